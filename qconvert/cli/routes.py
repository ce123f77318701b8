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

The steps (implemented in `route_steps.STEPS`):
- `no-input-layout`: refuse `--input-layout` (it applies only to routes from ONNX to TFLite);
- `one-graph`, `known-ops`: refuse a model with several subgraphs / with ops unknown to
  qconvert (`model_io.require_one_graph`, `require_known_ops`), naming every such op;
- `one-graph-or-state`, `known-ops-or-state` (export-c): the same, but a streaming model
  (resource variables, CALL_ONCE init subgraphs) passes (`executor.streaming`);
- `no-calibration`, `need-calibration`: refuse calibration data for an int8 model / its absence
  for a float one;
- `onnx-to-tflite`: the ONNX -> TFLite conversion (`passes.onnx_to_tflite`), calibration data
  loaded before it following the model into the TFLite layout;
- `fuse`: the fusion pipeline (`passes.pipeline`, or the passes `fuse --passes` names);
- `check-engine`: refuse a calibration engine that cannot run the quantized format;
- `load-data`: read the calibration (and evaluation) data, in the source model's layout;
- `quantize`: `quant.quantize.quantize_model`, running the stages `QUANTIZE_STAGES` names for
  the format it writes;
- `quantize-q7` (`--scheme q7`, in place of `quantize`: `q7_route`): the stages `Q7_STAGES`
  names, then the power-of-two q7 plan (`quant.q7_quantize`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import QConvertError

ANY = "any"
C_TARGETS = ("c-header", "c")


@dataclass(frozen=True)
class Route:
    """One row of `ROUTES`: the steps run for a (source, precision, target, intent)."""

    source: str
    precision: str
    target: str
    intent: str
    steps: tuple
    refusal: str | None = None

    @property
    def quantized_format(self) -> str:
        """The format a quantizing route writes int8 in (C exports quantize TFLite)."""
        return "tflite" if self.target in C_TARGETS else self.target

    @property
    def purpose(self) -> str:
        """How refusals word the work ("convert tflite to onnx", "export C")."""
        if self.target == "c-header":
            return "export a C header"
        if self.target == "c":
            return "export C"
        return f"convert {self.source} to {self.target}"


_TO_ONNX_REFUSED = "converting tflite to onnx is not supported yet"
ONNX_QDQ_REFUSAL = ("an int8 (QDQ) ONNX model cannot be exported; give the float ONNX model "
                    "with --calibration DATA")
_QUANTIZE = ("check-engine", "load-data", "quantize")
_INT8_EXPORT = ("no-input-layout", "one-graph", "no-calibration")
_FLOAT_TFLITE_EXPORT = ("no-input-layout", "one-graph", "known-ops", "need-calibration",
                        *_QUANTIZE)
_FLOAT_ONNX_EXPORT = ("one-graph", "onnx-to-tflite", "need-calibration", *_QUANTIZE)



def _c_steps(steps: tuple, target: str) -> tuple:
    """`export-c` takes streaming TFLite models (state in resource variables, a CALL_ONCE init
    subgraph: `executor.streaming`, `c_export.resource_state`); `export-c-header` does not."""
    swap = {"one-graph": "one-graph-or-state", "known-ops": "known-ops-or-state"}
    return tuple(swap.get(s, s) for s in steps) if target == "c" else steps


ROUTES = (
    #     source    precision target    intent      steps
    Route("onnx",   ANY,      "onnx",   "convert",  ("no-input-layout",)),
    Route("tflite", ANY,      "tflite", "convert",  ("no-input-layout",)),
    Route("onnx",   ANY,      "tflite", "convert",  ("onnx-to-tflite",)),
    Route("tflite", ANY,      "onnx",   "convert",  ("no-input-layout", "known-ops"),
          _TO_ONNX_REFUSED),
    Route("onnx",   ANY,      "onnx",   "fuse",     ("fuse",)),
    Route("tflite", ANY,      "tflite", "fuse",     ("fuse",)),
    Route("onnx",   ANY,      "tflite", "fuse",     (),
          "fuse writes the model's own format; for TFLite run qconvert convert (it takes "
          "-o {output}), then fuse its output"),
    Route("tflite", ANY,      "onnx",   "fuse",     ("known-ops",), _TO_ONNX_REFUSED),
    Route("onnx",   ANY,      "onnx",   "quantize", ("no-input-layout", *_QUANTIZE)),
    Route("tflite", ANY,      "tflite", "quantize", ("no-input-layout", *_QUANTIZE)),
    Route("onnx",   ANY,      "tflite", "quantize", ("check-engine", "load-data",
                                                     "onnx-to-tflite", "quantize")),
    Route("tflite", ANY,      "onnx",   "quantize", (),
          "quantizing tflite to onnx is not supported yet"),
    *(row for target in C_TARGETS for row in (
        Route("tflite", "int8",  target, "export", _c_steps(_INT8_EXPORT, target)),
        Route("onnx",   "int8",  target, "export", ("one-graph",), ONNX_QDQ_REFUSAL),
        Route("tflite", "float", target, "export", _c_steps(_FLOAT_TFLITE_EXPORT, target)),
        Route("onnx",   "float", target, "export", _FLOAT_ONNX_EXPORT))),
)

# The stages of `quantize` (`quant.quantize.STAGES`), by the format written: `static-batch`
# fixes the batch to 1 and folds the shape arithmetic (TFLite Micro allocates from static
# shapes); `fuse` and `equalize` run when the options ask for them.
QUANTIZE_STAGES = {
    "tflite": ("check-float", "static-batch", "fuse", "equalize", "calibrate", "plan",
               "tflite-int8", "correct-bias", "report"),
    "onnx": ("check-float", "fuse", "equalize", "calibrate", "plan", "qdq", "correct-bias",
             "report"),
}

# `--scheme q7` (the CMSIS-NN paper's power-of-two q7, `quant.q7_quantize`) calibrates the
# fused float model with these stages of `quantize`, then plans q7 instead of int8
Q7_STAGES = ("check-float", "static-batch", "fuse", "equalize", "calibrate")
Q7_REFUSAL = ("--scheme q7 quantizes a float model (no int8 model has a power-of-two q7 "
              "form): give the float TFLite or ONNX model with --calibration DATA")


def q7_route(route: Route) -> Route:
    """The export route of `--scheme q7`: `route` (a C export) with its int8 `quantize` step
    replaced by `quantize-q7`; refused for an int8 source."""
    if route.precision == "int8" or "quantize" not in route.steps:
        return Route(route.source, route.precision, route.target, route.intent,
                     route.steps if route.refusal else (), route.refusal or Q7_REFUSAL)
    steps = tuple("quantize-q7" if s == "quantize" else s for s in route.steps)
    return Route(route.source, route.precision, route.target, route.intent, steps)


# `--input-layout` refused (`no-input-layout`), by intent
INPUT_LAYOUT_REFUSALS = {
    "convert": "--input-layout applies to ONNX -> TFLite conversion only",
    "quantize": "--input-layout applies to ONNX -> int8 TFLite only",
    "export": "--input-layout applies to ONNX models only",
}


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
