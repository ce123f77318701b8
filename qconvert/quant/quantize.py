"""`qconvert quantize`'s orchestration: run the quantization stages in order, in place.

`quantize_model` runs the stages of `STAGES` (functions) for the format it writes:
`check-float` (a float model, one graph or a streaming one, hybrid weights dequantized),
`static-batch` (TFLite: the batch fixed to 1 and the shape arithmetic folded, as TFLite Micro
allocates), `fuse` (the fusion pipeline, unless `fuse=False`, so calibration sees the real
weight ranges), `equalize` (cross-layer equalization when asked), `calibrate` (the float model
over the calibration samples, `calibrate`), `plan` (the quantization plan, `plan`), the writer
(`tflite-int8` or `qdq`), `correct-bias` (the empirical bias correction of the written model,
`propagated_bias`) and `report` (`report.build_report`: per layer its scales, zero points,
(multiplier, shift) pairs and int32 biases and an SQNR against the float model).

Cost: one float pass over the calibration samples (which also keeps the float model's outputs
on the report's samples when they are the calibration samples) and the report's run of the
int8 model (for ONNX one batched pass of the QDQ model), whose first batch also measures the
empirical bias correction: the float model is not run again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Model
from qconvert.formats.model_io import require_one_graph

from .plan import check_float, check_quantizable, dequantize_hybrid_weights, plan

MAX_SHIFT = 30  # TFLite's kernels take a left shift of at most 30
STATIC_PIPELINE = ("static-batch", "fold-constants", "eliminate")


@dataclass
class QuantizeOptions:
    """The choices of `qconvert quantize` (CLI options of the same names)."""

    method: str = "mse"
    percentile: float = 99.99
    fc_per_channel: bool = False
    io_type: str = "int8"
    rounding: str = "double"
    fuse: bool = True
    batch_size: int = 16
    max_memory: int | None = None  # bytes one layer may need per batch (None: physical memory)
    bias_correction: bool = True
    equalize: bool = False
    engine: str = "numpy"
    activations: str = "int8"            # "int16": 16x8 wherever TFLite Micro has the kernels
    int16_layers: str | None = None      # "auto", a count, or layer names (mixed 16x8)
    per_tensor: bool = False             # every layer's weights per tensor (--per-tensor)

    @property
    def wide(self) -> bool:
        """True when some activations are to be int16 (16x8)."""
        return self.activations == "int16" or self.int16_layers is not None


@dataclass
class _Run:
    """What the stages of one `quantize_model` call share."""

    model: Model
    calibration: dict
    options: QuantizeOptions
    evaluation: dict | None
    progress: object
    stateful: bool = False
    report_count: int = 0
    measured: object = None  # calibrate.Calibration
    qplan: object = None
    float_graph: object = None
    float_model: Model | None = None
    names: dict | None = None
    int16_report: dict | None = None
    correction: object = None  # propagated_bias.PropagatedCorrection the report's run applies
    report: dict | None = None
    opset_from: int | None = None  # the ONNX opset the model had, when QDQ output raised it
    swamped: list | None = None  # concats kept in int16 (`concat_branches`), for the report


def quantize_model(model: Model, calibration: dict, options: QuantizeOptions,
                   evaluation: dict | None = None, progress=None) -> dict:
    """Quantize `model` in place, in its own format; return the report (a JSON-ready dict).

    `calibration` / `evaluation`: {input name: array (N, ...)}. `progress(done, total)` is
    called while calibrating.
    """
    run = _Run(model, calibration, options, evaluation, progress)
    for stage in STAGES[model.format]:
        stage(run)
    return run.report


def calibrate_float(model: Model, calibration: dict, options: QuantizeOptions,
                    progress=None):
    """Run the stages `Q7_STAGES` (checks, static batch, fusion, calibration) on
    `model` in place; its `calibrate.Calibration`. The start of `--scheme q7`, which plans
    power-of-two q7 from it (`q7_quantize`) instead of int8."""
    run = _Run(model, calibration, options, None, progress)
    for stage in Q7_STAGES:
        stage(run)
    return run.measured


def _check_float(run: _Run) -> None:
    """A float model (one graph, or a streaming model whose state quantizes) and 16x8 options
    qconvert can write; int8 weights of a hybrid model dequantized."""
    run.stateful = check_subgraphs(run.model)
    if run.options.per_tensor and (run.options.wide or run.options.fc_per_channel):
        raise QConvertError("--per-tensor takes every layer's weights per tensor: not with "
                            "--fc-per-channel, nor with 16x8 (TFLite Micro's int16 "
                            "convolutions take per-channel weights)")
    if run.options.wide:
        from .int16_choice import parse_int16_layers

        check_int16_options(run.model, run.options, run.stateful)
        parse_int16_layers(run.options.int16_layers)
    check_float(run.model.graph)
    dequantize_hybrid_weights(run.model.graph)


def _static_batch(run: _Run) -> None:
    """The batch fixed to 1 and the shape arithmetic folded (TFLite Micro allocates from static
    shapes)."""
    from qconvert.cli.input_shapes import with_shape_hint

    try:
        _pipeline(run.model, STATIC_PIPELINE, {"max_memory": run.options.max_memory})
    except QConvertError as exc:
        raise (with_shape_hint(exc, run.model.graph) if "dynamic" in exc.cause else exc)


def _fuse(run: _Run) -> None:
    """The fusion pipeline, unless `fuse=False`."""
    if run.options.fuse:
        from qconvert.passes.pipeline import FUSE_PIPELINE

        _pipeline(run.model, FUSE_PIPELINE)


def _equalize(run: _Run) -> None:
    """Cross-layer equalization, when `equalize=True`."""
    if run.options.equalize:
        _pipeline(run.model, ("equalize",))


def _pipeline(model: Model, names, options: dict | None = None) -> None:
    from qconvert.passes import PassContext
    from qconvert.passes.pipeline import run_pipeline

    run_pipeline(model, names, PassContext(model.format, options or {}))


def _calibrate(run: _Run) -> None:
    """Refuse what cannot be quantized or would not fit in memory, then calibrate, keeping the
    float reference of the report's samples when they are the calibration samples."""
    from qconvert.executor.memory_limit import (check_plan_memory, default_limit,
                                                release_free_memory)

    from .calibrate import calibrate
    from .ort_engine import check_engine
    from .report import report_samples

    model, options = run.model, run.options
    graph = model.graph
    check_quantizable(graph)
    check_engine(options.engine, model.format)
    samples = len(next(iter(run.calibration.values())))
    check_plan_memory(graph, max(1, min(options.batch_size, samples)),
                      options.max_memory or default_limit())
    data = run.evaluation if run.evaluation is not None else run.calibration
    run.report_count = report_samples(graph, len(next(iter(data.values()))))
    run.measured = calibrate(model, run.calibration, options,
                             run.report_count if run.evaluation is None else 0, run.progress)
    release_free_memory()  # the activations calibration freed: before planning allocates


def _plan(run: _Run) -> None:
    """The quantization plan (16x8 where asked: `int16_report.plan_int16`); a snapshot of the
    float graph (and of a streaming model) for the report."""
    model = run.model
    measured = run.measured
    measured.ranges = unclipped_outputs(model.graph, measured.ranges, measured.extremes)
    run.qplan = _plan_in_range(model.graph, measured.ranges, model.format,
                               run.options.fc_per_channel, measured.means,
                               per_tensor=run.options.per_tensor)
    run.float_graph = model.graph.copy()  # constants shared: they are immutable
    if run.stateful:
        run.float_model = Model(model.format, [run.float_graph] + [
            g.copy() for g in model.graphs[1:]], model.meta)
    options = run.options
    if not options.wide and model.format == "tflite" and not run.stateful:
        from .concat_branches import swamped_concats

        run.swamped = swamped_concats(model.graph, measured.ranges)
        widen = [f for f in run.swamped if not f.get("blocker")]
        if widen:  # the concats in int16, their branches on their own scales
            options = replace(options, int16_layers=",".join(f["output"] for f in widen),
                              io_type="float32")  # io_type: only lets a graph output be int16
    if options.wide:
        from .int16_report import plan_int16

        data = run.evaluation if run.evaluation is not None else run.calibration
        n = min(run.report_count, len(next(iter(data.values()))))
        run.qplan, run.int16_report = plan_int16(
            model.graph, run.float_graph, run.qplan, measured.ranges, measured.extremes,
            measured.means, options, {k: v[:n] for k, v in data.items()}, _plan_in_range)
        if run.swamped:
            run.int16_report["mode"] = "per-branch concat"


def unclipped_outputs(graph, ranges: dict, extremes: dict) -> dict:
    """`ranges` with every graph output's range replaced by the extremes calibration saw (what
    `--method minmax` takes). A clipping range (mse, percentile, entropy) pays inside the
    network, where the layers after a tensor average its clipped tails away; a graph output is
    the result itself, its largest values (the winning logit, the peak of a map) matter most and
    nothing averages them, so its int8 range keeps them (as the TFLite converter's and
    onnxruntime's ranges do)."""
    out = dict(ranges)
    for name in graph.outputs:
        if name in out and name in extremes:
            out[name] = extremes[name]
    return out


def _tflite_int8(run: _Run) -> None:
    """The plan written as an int8 TFLite graph (and a streaming model's initial values)."""
    from .invariants import check_int8_tflite
    from .tflite_int8 import apply_tflite_int8

    graph = run.model.graph
    apply_tflite_int8(graph, run.qplan, run.options.io_type)
    if run.stateful:
        quantize_initial_values(run.model, run.qplan)
    check_int8_tflite(graph)
    run.names = {n: n for n in run.qplan.activations}


def _qdq(run: _Run) -> None:
    """The plan written as QuantizeLinear / DequantizeLinear pairs in the ONNX graph."""
    from .invariants import check_qdq_scales
    from .opset_upgrade import upgrade_opset
    from .qdq import MIN_QDQ_OPSET, apply_qdq

    run.opset_from = upgrade_opset(run.model, MIN_QDQ_OPSET)
    if not run.stateful:
        from .concat_branches import float_tails, swamped_concats

        run.swamped = swamped_concats(run.model.graph, run.measured.ranges)
        for name in float_tails(run.model.graph, run.swamped, run.qplan.activations,
                                run.qplan.layers):
            del run.qplan.activations[name]  # the concat's output stays float
    run.names = apply_qdq(run.model.graph, run.qplan, run.model.meta.get("opset", 13))
    check_qdq_scales(run.model.graph)


def _correct_bias(run: _Run) -> None:
    """Empirical bias correction of the written int8 model (`propagated_bias`): each layer's
    int32 bias also takes the mean error its quantized input brings, measured on the first
    calibration samples (int8 plans of one-graph models, with bias correction on). When the
    report runs the model on those samples anyway (no `--eval`, the numpy engine), its first
    batch applies the correction (`run.correction`); otherwise a run of its own does. Not for
    a model whose calls carry state (an LSTM: its samples are one stream). Fewer
    than `propagated_bias.MIN_SAMPLES` samples: none (too few to tell a mean from noise)."""
    from qconvert.executor.streaming import carries_state

    from .propagated_bias import MIN_SAMPLES, PropagatedCorrection, correct_propagated_errors

    measured = run.measured
    if not measured.head_means or run.options.wide or run.stateful \
            or measured.head < MIN_SAMPLES or carries_state(run.model):
        return  # a stream (state carried): its means per sample are not a batch's

    if run.evaluation is None and run.options.engine == "numpy" \
            and measured.head <= run.report_count:
        run.correction = PropagatedCorrection(run.model, run.qplan, run.float_graph,
                                              measured.head_means, measured.head)
        return
    correct_propagated_errors(run.model, run.qplan, run.float_graph,
                              {k: v[:measured.head] for k, v in run.calibration.items()},
                              measured.head_means, run.options.rounding)


def _report(run: _Run) -> None:
    """The model verified, then the report against the float snapshot (a 16x8 plan's figures
    added, from a fake-quantized run where the integer executor cannot run it)."""
    from .report import build_report

    measured = run.measured
    if measured.reference is not None and measured.layer_reference and not run.stateful \
            and run.int16_report is None:
        _release_float_weights(run.float_graph, run.model.graph)  # the report needs no weights
    run.model.verify()
    simulate = None
    if run.int16_report is not None:
        from .int16_report import simulated_errors

        sources = run.int16_report.pop("_sources")
        float_graph, qplan, batch_size = run.float_graph, run.qplan, run.options.batch_size

        def simulate(feeds, layer_reference):
            return simulated_errors(float_graph, qplan, sources, feeds, layer_reference,
                                    batch_size)
    run.report = build_report(
        run.float_graph, run.model, run.qplan, run.names,
        run.evaluation if run.evaluation is not None else run.calibration, run.options,
        measured.reference, measured.layer_reference, run.float_model, run.report_count,
        simulate, run.correction)
    if run.int16_report is not None:
        from .int16_report import add_to_report

        add_to_report(run.report, run.int16_report, run.qplan)
    _note_stream(run)
    if run.swamped:
        from .concat_branches import describe

        run.report["per_branch_concats"] = run.swamped
        notes = run.report.setdefault("notes", [])
        if run.model.format != "tflite":
            floated = [f for f in run.swamped if not f.get("blocker")]
            if floated:
                notes.append(describe(floated, "its output left float, each branch on its own "
                                               "int8 scale"))
            for f in run.swamped:
                if f.get("blocker"):
                    notes.append(describe([f], f"left on one int8 scale ({f['blocker']})"))
        else:
            widened = [f for f in run.swamped if not f.get("blocker")]
            if widened:
                notes.append(describe(widened, "kept in int16 (16x8), each branch requantized "
                                               "into it"))
            for f in run.swamped:
                if f.get("blocker"):
                    notes.append(describe([f], f"left int8 ({f['blocker']} shares its scale "
                                               "and has no 16x8 kernel in TFLite Micro)"))
    if run.opset_from is not None:
        run.report["opset_upgraded"] = [run.opset_from, int(run.model.meta["opset"])]


# The stages of `quantize_model`, by the format written: `_static_batch` fixes the batch to 1
# and folds the shape arithmetic (TFLite Micro allocates from static shapes); `_fuse` and
# `_equalize` run when the options ask for them.
STAGES = {
    "tflite": (_check_float, _static_batch, _fuse, _equalize, _calibrate, _plan, _tflite_int8,
               _correct_bias, _report),
    "onnx": (_check_float, _fuse, _equalize, _calibrate, _plan, _qdq, _correct_bias, _report),
}

# `--scheme q7` (the CMSIS-NN paper's power-of-two q7, `quant.q7_quantize`) calibrates the
# fused float model with these stages, then plans q7 instead of int8 (`calibrate_float`)
Q7_STAGES = (_check_float, _static_batch, _fuse, _equalize, _calibrate)


def _release_float_weights(float_graph, graph) -> None:
    """Drop from the float snapshot the large constants the quantized graph no longer holds
    (its float weights: int8 copies replaced them), when the report needs only its structure:
    the float and int8 weights of every layer are then never in memory together through the
    report's run and the writing."""
    for name, t in float_graph.tensors.items():
        if t.data is None or t.data.nbytes <= 4096:
            continue
        kept = graph.tensors.get(name)
        if kept is None or kept.data is not t.data:
            t.data = None


def _note_stream(run: _Run) -> None:
    """Say so when the samples ran as one stream because an op keeps state from call to call
    (an LSTM): calibration and the report then depend on the samples' order."""
    from qconvert.executor.streaming import has_state, state_inputs

    graph = run.model.graph
    stateful = [n for n in graph.nodes if state_inputs(graph, n)]
    if stateful and not has_state(run.model):
        names = ", ".join(repr(n.name) for n in stateful[:3]) + (" ..." if len(stateful) > 3
                                                                  else "")
        run.report.setdefault("notes", []).append(
            f"the samples ran as one stream, in order, the state carried from call to call "
            f"as TFLite does ({stateful[0].op if len(stateful) == 1 else 'ops'} {names}): give "
            "calibration data in stream order")


def check_int16_options(model: Model, options, stateful: bool) -> None:
    """Refuse, in one line, 16x8 requests qconvert cannot write."""
    if options.activations == "int16" and options.int16_layers is not None:
        raise QConvertError("give --activations int16 or --int16-layers, not both")
    if model.format != "tflite":
        raise QConvertError("16x8 (int16 activations) is written to TFLite only (QDQ ONNX "
                            "output is int8); give a .tflite output")
    if stateful:
        raise QConvertError("16x8 (int16 activations) does not apply to a model with resource "
                            "variables (streaming state stays int8)")


def check_subgraphs(model: Model) -> bool:
    """True for a streaming model whose state quantizes (resource variables in the main graph,
    CALL_ONCE init subgraphs that only assign constants); False for a one-graph model. Other
    multi-graph models are refused (`require_one_graph`: one line naming the ops)."""
    from qconvert.executor.streaming import has_state, is_resource_op

    if len(model.graphs) == 1:
        return False
    init = {int((n.origin.get("options") or {}).get("InitSubgraphIndex", -1))
            for n in model.graph.nodes if is_resource_op(n) and n.op == "CALL_ONCE"}
    plain_init = all(
        i in init and not g.inputs and all(
            is_resource_op(n) and n.op in ("VAR_HANDLE", "ASSIGN_VARIABLE") and
            (n.op == "VAR_HANDLE" or g.tensors[n.inputs[1]].data is not None) for n in g.nodes)
        for i, g in enumerate(model.graphs) if i)
    if has_state(model) and plain_init:
        return True
    require_one_graph(model, "quantize")
    return False


def quantize_initial_values(model: Model, qplan) -> None:
    """Quantize the constants the init subgraphs assign to each variable with the variable's
    int8 parameters (those of its READ_VARIABLE outputs in the main graph)."""
    from qconvert.executor.streaming import is_resource_op, variable_key

    from .tflite_int8 import frozen, _quant, quantize_constant

    params = {}
    handles = {}
    for node in model.graph.nodes:
        if is_resource_op(node) and node.op == "VAR_HANDLE":
            handles[node.outputs[0]] = variable_key(node)
        elif is_resource_op(node) and node.op == "READ_VARIABLE":
            params[handles[node.inputs[0]]] = qplan.activations[node.outputs[0]]
    for g in model.graphs[1:]:
        local = {n.outputs[0]: variable_key(n) for n in g.nodes if n.op == "VAR_HANDLE"}
        for node in g.nodes:
            if node.op != "ASSIGN_VARIABLE":
                continue
            var = local[node.inputs[0]]
            t = g.tensors[node.inputs[1]]
            if var not in params:
                raise QConvertError(f"variable {var!r} is assigned but never read; cannot "
                                    "choose its int8 parameters")
            if t.dtype.startswith("float"):
                scale, zp = params[var]
                t.data = frozen(quantize_constant(t.data, scale, zp))
                t.dtype, t.quant = "int8", _quant(scale, zp)


def _plan_in_range(graph, ranges: dict, fmt: str, fc_per_channel: bool, means=None,
                   int16=frozenset(), per_tensor: bool = False):
    """`plan`, with the output range of a layer whose requantization would need a left shift
    beyond 30 widened until it fits. That happens when the output range is tiny next to the
    input and weight scales (weights that cancel, a constant-zero output): the int8 output is
    then 0 where the float one is ~0, instead of a model the int8 kernels cannot run. Ranges
    that cannot be widened this way are left to the writers' invariant check, which refuses."""
    ranges = dict(ranges)
    for _ in range(4):
        qplan = plan(graph, ranges, fmt, fc_per_channel, means, int16, per_tensor)
        wide = {out: int(np.max(layer.shift)) for out, layer in qplan.layers.items()
                if layer.shift is not None and np.size(layer.shift)
                and int(np.max(layer.shift)) > MAX_SHIFT and out in qplan.activations}
        if not wide:
            return qplan
        for out, shift in wide.items():
            scale = float(qplan.activations[out][0])
            target = scale * 2.0 ** (shift - MAX_SHIFT + 1)
            lo, hi = ranges.get(out, (0.0, 0.0))
            lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
            if hi - lo > 0:
                k = target / scale
                ranges[out] = (lo * k, hi * k)
            elif out in int16:
                ranges[out] = (-32767.0 * target, 32767.0 * target)
            else:
                ranges[out] = (-128.0 * target, 127.0 * target)
    return qplan
