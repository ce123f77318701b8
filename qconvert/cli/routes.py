"""Which pipeline runs: one table from (source format, target, intent) to the steps that run.

Every command that rewrites a model (`convert`, `fuse`, `quantize`, `export-c-header`,
`export-c`) looks its route up here (`find_route`) and runs the steps the row names
(`route_steps.run_route`); no other module decides which pipeline runs.

- source: the format of the model read, "onnx" or "tflite", and its precision where the route
  depends on it ("float" or "int8": only the C exports tell them apart; "any" matches both);
- target: "onnx" or "tflite" (the file written), "c-header" or "c" (an int8 TFLite model first);
- intent: "convert", "fuse", "quantize" or "export".

A refused combination has a `refusal`: its steps are checks that run first (so a more precise
refusal, such as ops unknown to qconvert, wins), then the refusal is raised as one line.

The steps are the functions of `route_steps` themselves (a row holds the functions it runs):
- `no_input_layout`: refuse `--input-layout` (it applies only to routes from ONNX to TFLite);
- `one_graph`, `known_ops`: refuse a model with several subgraphs / with ops unknown to
  qconvert (`model_io.require_one_graph`, `require_known_ops`), naming every such op;
- `one_graph_or_state`, `known_ops_or_state` (export-c): the same, but a streaming model
  (resource variables, CALL_ONCE init subgraphs) passes (`executor.streaming`);
- `no_calibration`, `need_calibration`: refuse calibration data for an int8 model / its absence
  for a float one;
- `onnx_to_tflite`: the ONNX -> TFLite conversion (`passes.onnx_to_tflite`), calibration data
  loaded before it following the model into the TFLite layout;
- `fuse`: the fusion pipeline (`passes.pipeline`, or the passes `fuse --passes` names);
- `check_engine`: refuse a calibration engine that cannot run the quantized format;
- `load_data`: read the calibration (and evaluation) data, in the source model's layout;
- `quantize`: `quant.quantize.quantize_model`, running the stages of `quant.quantize.STAGES`
  for the format it writes;
- `quantize_q7` (`--scheme q7`, in place of `quantize`: `q7_route`): the stages
  `quant.quantize.Q7_STAGES`, then the power-of-two q7 plan (`quant.q7_quantize`).
"""

from __future__ import annotations

from ..errors import QConvertError
from .route_steps import (  # the steps; ANY, C_TARGETS and Route: the table's keys and row
    ANY, C_TARGETS, Route, check_engine, fuse, known_ops, known_ops_or_state, load_data,
    need_calibration, no_calibration, no_input_layout, one_graph, one_graph_or_state,
    onnx_to_tflite, quantize, quantize_q7)

_TO_ONNX_REFUSED = "converting tflite to onnx is not supported yet"
ONNX_QDQ_REFUSAL = ("an int8 (QDQ) ONNX model cannot be exported; give the float ONNX model "
                    "with --calibration DATA")
_QUANTIZE = (check_engine, load_data, quantize)
_INT8_EXPORT = (no_input_layout, one_graph, no_calibration)
_FLOAT_TFLITE_EXPORT = (no_input_layout, one_graph, known_ops, need_calibration, *_QUANTIZE)
_FLOAT_ONNX_EXPORT = (one_graph, onnx_to_tflite, need_calibration, *_QUANTIZE)


def _c_steps(steps: tuple, target: str) -> tuple:
    """`export-c` takes streaming TFLite models (state in resource variables, a CALL_ONCE init
    subgraph: `executor.streaming`, `c_export.model.resource_state`); `export-c-header` does not."""
    swap = {one_graph: one_graph_or_state, known_ops: known_ops_or_state}
    return tuple(swap.get(s, s) for s in steps) if target == "c" else steps


ROUTES = (
    #     source    precision target    intent      steps
    Route("onnx",   ANY,      "onnx",   "convert",  (no_input_layout,)),
    Route("tflite", ANY,      "tflite", "convert",  (no_input_layout,)),
    Route("onnx",   ANY,      "tflite", "convert",  (onnx_to_tflite,)),
    Route("tflite", ANY,      "onnx",   "convert",  (no_input_layout, known_ops),
          _TO_ONNX_REFUSED),
    Route("onnx",   ANY,      "onnx",   "fuse",     (fuse,)),
    Route("tflite", ANY,      "tflite", "fuse",     (fuse,)),
    Route("onnx",   ANY,      "tflite", "fuse",     (),
          "fuse writes the model's own format; for TFLite run qconvert convert (it takes "
          "-o {output}), then fuse its output"),
    Route("tflite", ANY,      "onnx",   "fuse",     (known_ops,), _TO_ONNX_REFUSED),
    Route("onnx",   ANY,      "onnx",   "quantize", (no_input_layout, *_QUANTIZE)),
    Route("tflite", ANY,      "tflite", "quantize", (no_input_layout, *_QUANTIZE)),
    Route("onnx",   ANY,      "tflite", "quantize", (check_engine, load_data,
                                                     onnx_to_tflite, quantize)),
    Route("tflite", ANY,      "onnx",   "quantize", (),
          "quantizing tflite to onnx is not supported yet"),
    *(row for target in C_TARGETS for row in (
        Route("tflite", "int8",  target, "export", _c_steps(_INT8_EXPORT, target)),
        Route("onnx",   "int8",  target, "export", (one_graph,), ONNX_QDQ_REFUSAL),
        Route("tflite", "float", target, "export", _c_steps(_FLOAT_TFLITE_EXPORT, target)),
        Route("onnx",   "float", target, "export", _FLOAT_ONNX_EXPORT))),
)

Q7_REFUSAL = ("--scheme q7 quantizes a float model (no int8 model has a power-of-two q7 "
              "form): give the float TFLite or ONNX model with --calibration DATA")


def q7_route(route: Route) -> Route:
    """The export route of `--scheme q7`: `route` (a C export) with its int8 `quantize` step
    replaced by `quantize-q7`; refused for an int8 source."""
    if route.precision == "int8" or quantize not in route.steps:
        return Route(route.source, route.precision, route.target, route.intent,
                     route.steps if route.refusal else (), route.refusal or Q7_REFUSAL)
    steps = tuple(quantize_q7 if s is quantize else s for s in route.steps)
    return Route(route.source, route.precision, route.target, route.intent, steps)


def find_route(source: str, target: str, intent: str, precision: str = "float") -> Route:
    """The row of `ROUTES` for this combination (`precision` matters for exports only)."""
    for route in ROUTES:
        if (route.source, route.target, route.intent) == (source, target, intent) and \
                route.precision in (ANY, precision):
            return route
    raise QConvertError(f"cannot {intent} {source} to {target}: no route")


def precision_of(model) -> str:
    """"float" when no activation of the main graph is quantized (weights may be: a hybrid
    model), else "int8"."""
    quantized = any(t.data is None and (t.quant is not None or t.dtype in ("int8", "uint8"))
                    for t in model.graph.tensors.values())
    return "int8" if quantized else "float"
