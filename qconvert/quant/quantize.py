"""`qconvert quantize`: fuse, calibrate, plan, write int8 (TFLite) or QDQ (ONNX), and report.

Steps: the fusion pipeline (unless `fuse=False`) so calibration sees the real weight ranges;
calibration batches through the float reference executor, collecting ranges; the quantization
plan (`plan`); writing it in the model's format (`tflite_int8` or `qdq`); then the report: per
layer its scales, zero points, (multiplier, shift) pairs and int32 biases, and an SQNR per
quantized tensor on the evaluation samples (`build_report`: ONNX, the error the tensor's own
quantization adds; TFLite, the int8 value against float end to end), with the overall output
SQNR against the float model and, for classifiers, top-1 agreement with float.

Cost: one float pass over the calibration samples (which also keeps the float model's outputs
on the report's samples when they are the calibration samples) and, for ONNX, one batched pass
of the QDQ model: the float model is not run again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Model
from qconvert.model_io import require_one_graph

from .plan import (FC_OPS, check_float, check_quantizable, clamped_inputs,
                   dequantize_hybrid_weights, plan)
from .ranges import RangeCollector

REPORT_SAMPLES = 64
REPORT_MACS = 8e9  # the report's int8 run stays within this many multiply-accumulates...
REPORT_MIN_SAMPLES = 2  # ...but covers at least this many samples
LAYER_REFERENCE_BYTES = 64 << 20  # float activations kept from calibration for the ONNX report


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


def quantize_model(model: Model, calibration: dict, options: QuantizeOptions,
                   evaluation: dict | None = None, progress=None) -> dict:
    """Quantize `model` in place; return the report (a JSON-ready dict).

    `calibration` / `evaluation`: {input name: array (N, ...)}. `progress(done, total)` is
    called while calibrating.
    """
    from qconvert.passes import PassContext
    from qconvert.passes.pipeline import FUSE_PIPELINE, run_pipeline

    STATIC_PIPELINE = ("static-batch", "fold-constants", "eliminate")

    stateful = check_subgraphs(model)
    wide = options.activations == "int16" or options.int16_layers is not None
    if wide:
        from .int16_choice import parse_int16_layers

        check_int16_options(model, options, stateful)
        parse_int16_layers(options.int16_layers)
    graph = model.graph
    check_float(graph)
    dequantize_hybrid_weights(graph)
    if model.format == "tflite":  # TFLite Micro allocates from static shapes
        run_pipeline(model, STATIC_PIPELINE,
                     PassContext(model.format, {"max_memory": options.max_memory}))
    if options.fuse:
        run_pipeline(model, FUSE_PIPELINE, PassContext(model.format))
    if options.equalize:
        run_pipeline(model, ("equalize",), PassContext(model.format))
    check_quantizable(graph)
    from .invariants import check_int8_tflite, check_qdq_scales
    from qconvert.executor.memory_limit import (check_plan_memory, default_limit,
                                                release_free_memory)
    from .ort_engine import check_engine

    check_engine(options.engine, model.format)
    samples = len(next(iter(calibration.values())))
    check_plan_memory(graph, max(1, min(options.batch_size, samples)),
                      options.max_memory or default_limit())
    collector = RangeCollector(options.method, options.percentile, _needed(graph))
    observe = collector.observe
    means = None
    if options.bias_correction:
        from .bias_correction import ChannelMeans

        means = ChannelMeans(graph, model.format)

        def observe(name, array):
            collector.observe(name, array)
            means.observe(name, array)

    data = evaluation if evaluation is not None else calibration
    n_report = report_samples(graph, len(next(iter(data.values()))))
    with np.errstate(all="ignore"):  # an overflow is reported by the range check, in one line
        reference, layer_reference = _calibrate(model, calibration, options.batch_size,
                                                observe, progress,
                                                n_report if evaluation is None else 0,
                                                options.engine)
    release_free_memory()  # the activations calibration freed: before planning allocates
    ranges = collector.ranges()
    input_means = None if means is None else means.means()
    qplan = _plan_in_range(graph, ranges, model.format, options.fc_per_channel, input_means)
    float_graph = _snapshot(graph)
    float_model = Model(model.format, [float_graph] + [_snapshot(g) for g in model.graphs[1:]],
                        model.meta) if stateful else None
    int16_report = None
    if wide:
        from .int16_report import plan_int16

        n = min(n_report, len(next(iter(data.values()))))
        extremes = {k: (collector.lo[k], collector.hi[k]) for k in collector.lo}
        qplan, int16_report = plan_int16(graph, float_graph, qplan, ranges, extremes,
                                         input_means, options,
                                         {k: v[:n] for k, v in data.items()}, _plan_in_range)
    if model.format == "tflite":
        from .tflite_int8 import apply_tflite_int8

        apply_tflite_int8(graph, qplan, options.io_type)
        if stateful:
            quantize_initial_values(model, qplan)
        check_int8_tflite(graph)
        names = {n: n for n in qplan.activations}
    else:
        from .qdq import apply_qdq

        names = apply_qdq(graph, qplan, model.meta.get("opset", 13))
        check_qdq_scales(graph)
    if reference is not None and layer_reference and not stateful and int16_report is None:
        _release_float_weights(float_graph, graph)  # the report will not run the float model
    model.verify()
    simulate = None
    if int16_report is not None:
        from .int16_report import simulated_errors

        sources = int16_report.pop("_sources")

        def simulate(feeds, layer_reference):
            return simulated_errors(float_graph, qplan, sources, feeds, layer_reference,
                                    options.batch_size)
    report = build_report(float_graph, model, qplan, names, data, options, reference,
                          layer_reference, float_model, n_report, simulate)
    if int16_report is not None:
        from .int16_report import add_to_report

        add_to_report(report, int16_report, qplan)
    return report


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


def report_samples(graph, available: int) -> int:
    """How many samples the report runs: REPORT_SAMPLES, fewer for a large network (the int8
    run of the report stays within REPORT_MACS, at least REPORT_MIN_SAMPLES), never more than
    `available`."""
    from qconvert.layer_table import layer_macs

    macs = sum(layer_macs(node, graph) for node in graph.nodes)
    bound = max(REPORT_MIN_SAMPLES, int(REPORT_MACS // max(macs, 1)))
    return max(1, min(available, REPORT_SAMPLES, bound))


def _needed(graph) -> set:
    """The float activations whose calibrated range the plan reads: all but those a clamping
    activation gives its own range (`plan.clamped_inputs`)."""
    names = {n for n, t in graph.tensors.items()
             if t.data is None and t.dtype.startswith("float")}
    return names - clamped_inputs(graph)


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

    from .tflite_int8 import _frozen, _quant, _quantize_constant

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
                t.data = _frozen(_quantize_constant(t.data, scale, zp))
                t.dtype, t.quant = "int8", _quant(scale, zp)


def _activation_bytes(graph) -> int:
    """Bytes of one sample's float activations (dynamic dimensions counted as 1)."""
    return sum(t.nbytes() for t in graph.tensors.values()
               if t.data is None and t.dtype.startswith("float") and t.shape is not None)


def _reference_extent(graph, samples: int) -> tuple:
    """(samples, fraction) of the float activations the report keeps as its per-layer
    reference: as many of the first `samples` as LAYER_REFERENCE_BYTES hold, at least one; when
    one sample is larger than that (a ResNet-50 at 224 x 224: 101 MB), the leading `fraction` of
    each tensor's values of the first sample, so the reference stays within the budget."""
    size = max(1, _activation_bytes(graph))
    kept = max(1, min(samples, LAYER_REFERENCE_BYTES // size))
    return kept, min(1.0, LAYER_REFERENCE_BYTES / size) if kept == 1 else 1.0


def _kept_fraction(graph, layer_reference: dict) -> float:
    """The share of each tensor's values of the first sample `_first_samples` kept (1.0: whole
    samples), read off the reference arrays against the tensors' static shapes."""
    shares = []
    for name, ref in layer_reference.items():
        t = graph.tensors.get(name)
        if ref.ndim == 2 and t is not None and t.static_shape and len(t.shape) > 2:
            shares.append(ref.shape[1] / max(1, int(np.prod(t.shape[1:]))))
    return max(shares, default=1.0)  # the largest tensor's: the least truncated


def _first_samples(store: dict, count: int, skip=frozenset(), fraction: float = 1.0):
    """An observer that appends copies of each float tensor's samples to `store` ({name: list of
    arrays}) until it holds the first `count` (the observer sees batches in order); tensors in
    `skip` (those that get no int8 value of their own) are not kept. `fraction` < 1 (with
    `count` 1): only the leading fraction of the first sample's values, as an array [1, m]
    (`_EndToEnd` compares that prefix)."""
    held: dict = {}

    def keep(name, array):
        have = held.get(name, 0)
        if array.dtype.kind != "f" or not array.ndim or have >= count or name in skip:
            return
        if fraction < 1.0:
            first = array[:1].reshape(1, -1)
            part = np.array(first[:, :max(1, int(first.shape[1] * fraction))])
        else:
            part = np.array(array[:count - have])
        store.setdefault(name, []).append(part)
        held[name] = have + len(part)

    return keep


def _joined(store: dict) -> dict:
    """{name: one array} from `_first_samples`' lists, emptying them as it goes (never two
    copies of everything at once)."""
    joined = {}
    for name in list(store):
        parts = store.pop(name)
        joined[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return joined


def _calibrate(model: Model, calibration: dict, batch_size: int, observe, progress,
               keep_first: int, engine: str = "numpy") -> tuple:
    """Run the float model over every calibration sample for `observe`; return its outputs on
    the first `keep_first` samples and its float activations on the first few of them, as many
    as LAYER_REFERENCE_BYTES hold (at least one): the report's float reference, so the report
    need not run the float model again. (None, {}) when `keep_first` is 0. `engine`: the
    float executor, or onnxruntime (`ort_engine`)."""
    from qconvert.executor.float_executor import run_float_batched
    from qconvert.executor.streaming import has_state

    if has_state(model):
        run_float_batched = _float_stream  # noqa: F811  (frames in order, the state carried)
    total = len(next(iter(calibration.values())))
    head = min(total, keep_first)
    reference, layers = None, {}
    watch = observe
    if head:
        kept, fraction = _reference_extent(model.graph, head)
        keep = _first_samples(layers, kept, _unreported(model), fraction)

        def watch(name, array):
            observe(name, array)
            keep(name, array)

    if engine == "onnxruntime":  # one session, one pass: its outputs kept on the head only
        from .ort_engine import run_ort_batched

        outputs = run_ort_batched(model, calibration, batch_size, observe=watch,
                                  progress=progress, collect=head)
        return (outputs if head else None), _joined(layers)
    if head:
        reference = run_float_batched(model, {k: v[:head] for k, v in calibration.items()},
                                      batch_size, observe=watch, progress=progress)
        layers = _joined(layers)
    if head < total:
        report = None if progress is None else (lambda done, _n: progress(head + done, total))
        run_float_batched(model, {k: v[head:] for k, v in calibration.items()}, batch_size,
                          observe=observe, progress=report, collect=False)
    return reference, layers


def _frames(feeds: dict) -> list:
    """{input: array (N, ...)} -> N single-sample feeds, in order (a stream of frames)."""
    n = len(next(iter(feeds.values())))
    return [{k: v[i:i + 1] for k, v in feeds.items()} for i in range(n)]


def _float_stream(model: Model, feeds: dict, batch_size: int = 1, observe=None, progress=None,
                  collect: bool = True, opset=None) -> dict:
    """`run_float_batched` for a model with resource variables: the samples are consecutive
    frames of one stream, run one at a time with the state carried (`run_frames`)."""
    from qconvert.executor.float_executor import run_float
    from qconvert.executor.streaming import run_frames

    frames = _frames(feeds)
    outs = run_frames(model, frames, lambda g, f, o, k: run_float(g, f, o, k), observe)
    if progress is not None:
        progress(len(frames), len(frames))
    if not collect:
        return {}
    return {name: np.concatenate([o[name] for o in outs]) for name in model.graph.outputs}


MAX_SHIFT = 30  # TFLite's kernels take a left shift of at most 30


def _plan_in_range(graph, ranges: dict, fmt: str, fc_per_channel: bool, means=None,
                   int16=frozenset()):
    """`plan`, with the output range of a layer whose requantization would need a left shift
    beyond 30 widened until it fits. That happens when the output range is tiny next to the
    input and weight scales (weights that cancel, a constant-zero output): the int8 output is
    then 0 where the float one is ~0, instead of a model the int8 kernels cannot run. Ranges
    that cannot be widened this way are left to the writers' invariant check, which refuses."""
    ranges = dict(ranges)
    for _ in range(4):
        qplan = plan(graph, ranges, fmt, fc_per_channel, means, int16)
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


def _snapshot(graph):
    """A copy of `graph` that later rewrites of it leave alone, sharing its constant arrays
    (constants are immutable; copying them would double the weights in memory)."""
    return graph.copy()


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


def _opset(model: Model):
    return model.meta.get("opset") if model.format == "onnx" else None


def sqnr(reference: np.ndarray, actual: np.ndarray) -> float:
    """Signal to quantization noise ratio in dB (inf when equal)."""
    noise = float(np.sum((reference.astype(np.float64) - actual) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    if noise == 0:
        return float("inf")
    return 10.0 * np.log10(max(signal, 1e-300) / noise)


class _EndToEnd:
    """(signal, noise) energies of each activation's quantized value against the float model's
    value on the first samples (`reference`: {activation: float array}), fed batch by batch in
    sample order."""

    def __init__(self, reference: dict):
        self.reference = reference
        self.seen = dict.fromkeys(reference, 0)
        self.energy: dict = {}

    def add(self, name: str, values: np.ndarray) -> None:
        ref = self.reference.get(name)
        if ref is None or self.seen[name] >= len(ref):
            return
        start = self.seen[name]
        got = values[:len(ref) - start]
        r = ref[start:start + len(got)].astype(np.float64)
        if got.ndim and got[:1].size != r[:1].size:  # a prefix of each sample (`_first_samples`)
            got = got.reshape(len(got), -1)[:, :r[:1].size]
        got = got.astype(np.float64)
        self.seen[name] += len(got)
        _energy_add(self.energy, name, float(np.sum(r * r)), float(np.sum((r - got) ** 2)))


def _int8_inputs(graph, feeds: dict) -> dict:
    """Float samples quantized for the model's int8 inputs (float inputs left as they are)."""
    from qconvert.int8.rounding import round_half_away

    inputs = {}
    for name, array in feeds.items():
        t = graph.tensors[name]
        if t.dtype in ("int8", "int16"):  # int16: a 16x8 model's input
            s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
            info = np.iinfo(t.dtype)
            array = np.clip(round_half_away(array / s) + z, info.min, info.max).astype(t.dtype)
        inputs[name] = array
    return inputs


def _tflite_errors(model: Model, feeds: dict, options, layer_reference: dict):
    """TFLite: per activation the (signal, noise) energies of its int8 value (the integer
    executor, bit-exact with TFLite Micro) against the float model's, end to end, on the samples
    `layer_reference` holds; and the dequantized outputs on every sample. The integer executor
    runs one sample at a time: its float64 matmuls are no faster batched, and memory stays that
    of one sample."""
    from qconvert.executor.int_executor import run_int8
    from qconvert.executor.streaming import has_state, run_frames

    graph = model.graph
    tracker = _EndToEnd(layer_reference)

    def dequantized(name, array):
        t = graph.tensors.get(name)
        if t is not None and t.quant is not None and array.dtype in (np.int8, np.int16):
            return (array.astype(np.float64) - float(t.quant.zero_point[0])) \
                * float(t.quant.scale[0])
        return array if array.dtype.kind == "f" else None

    def observe(name, array):
        if name in layer_reference:
            value = dequantized(name, array)
            if value is not None:
                tracker.add(name, value)

    inputs = _int8_inputs(graph, feeds)
    got: dict = {}
    if has_state(model):  # one stream of frames, the int8 state carried
        outs = run_frames(model, _frames(inputs), lambda g, f, o, k: run_int8(
            g, f, rounding=options.rounding, observe=o), observe)
    else:
        outs = (run_int8(graph, frame, rounding=options.rounding, observe=observe)
                for frame in _frames(inputs))
    for out in outs:
        for name in graph.outputs:
            got.setdefault(name, []).append(dequantized(name, out[name]))
    return tracker.energy, {k: np.concatenate(v) for k, v in got.items()}


def _int_executor_runs_int16(graph=None) -> bool:
    """True when the integer executor has TFLite Micro's 16x8 kernels (`supported_ops16`) for
    every op of `graph` that touches an int16 activation (any graph when `graph` is None)."""
    from qconvert.executor import int_executor

    supported = getattr(int_executor, "supported_ops16", None)
    if supported is None:
        return False
    ops = set(supported())

    def touches_int16(node):
        names = [n for n in list(node.present_inputs()) + list(node.outputs) if n]
        return any(graph.tensors[n].dtype == "int16" and graph.tensors[n].data is None
                   for n in names)

    return graph is None or all(n.op in ops for n in graph.nodes
                                if not n.opaque and touches_int16(n))


def _energy_add(energy: dict, name: str, signal: float, noise: float) -> None:
    s, e = energy.get(name, (0.0, 0.0))
    energy[name] = (s + signal, e + noise)


def _qdq_errors(model: Model, names: dict, feeds: dict, batch_size: int, layer_reference: dict):
    """ONNX QDQ, from one batched run of the QDQ graph: per activation the (signal, noise)
    energies end to end (its dequantized value against the float model's, `layer_reference`:
    {activation: float value on the first samples}) and added (what its own QuantizeLinear ->
    DequantizeLinear pair changes in the float value its layer computed from dequantized inputs:
    the error the layer adds, not the one it inherits, measured by the executor while it
    computes the pair, `run_float`'s `pair_error`); and the QDQ model's outputs."""
    from qconvert.executor.float_executor import run_float_batched

    activation_of = {d: a for a, d in names.items()}
    tracker = _EndToEnd(layer_reference)
    added: dict = {}

    def observe(name, array):
        act = activation_of.get(name)
        if act is not None:
            tracker.add(act, array)

    def pair_error(name, signal, noise):
        act = activation_of.get(name)
        if act is not None:
            _energy_add(added, act, signal, noise)

    outputs = run_float_batched(model, feeds, batch_size, observe=observe,
                                pair_error=pair_error)
    return tracker.energy, added, outputs


def _unreported(model: Model) -> set:
    """Activations the report never compares: in ONNX QDQ, those a clamp absorbs (no Q/DQ pair
    of their own); TFLite has an int8 value for every activation."""
    return clamped_inputs(model.graph) if model.format == "onnx" else set()


def _float_reference(float_graph, feeds: dict, batch_size: int, opset, skip=frozenset(),
                     float_model: Model | None = None) -> tuple:
    """The float model's outputs on `feeds` and its activations on the first samples (as
    `_calibrate` keeps them), for a report on data calibration did not see (`--eval`).
    `float_model` (a streaming model with its init subgraphs) runs frame by frame."""
    from qconvert.executor.float_executor import run_float_batched

    if float_model is not None:
        run_float_batched = _float_stream  # noqa: F811
        float_graph = float_model

    n = len(next(iter(feeds.values())))
    kept, fraction = _reference_extent(
        float_graph.graph if isinstance(float_graph, Model) else float_graph, n)
    layers: dict = {}
    outputs = run_float_batched(float_graph, feeds, batch_size,
                                observe=_first_samples(layers, kept, skip, fraction), opset=opset)
    return outputs, _joined(layers)


def _db(signal: float, noise: float) -> float:
    return float("inf") if noise == 0 else round(10 * np.log10(max(signal, 1e-300) / noise), 2)


def build_report(float_graph, model: Model, qplan, names: dict, data: dict, options,
                 reference: dict | None = None, layer_reference: dict | None = None,
                 float_model: Model | None = None, samples: int = REPORT_SAMPLES,
                 simulate=None) -> dict:
    """The per-layer report over the first `samples` samples of `data` (`report_samples`).

    Per layer, "sqnr_db" is the SQNR of its int8 output against the float model's tensor, end
    to end (TFLite: the integer executor, bit-exact with TFLite Micro, sample by sample, see
    `_tflite_errors`; ONNX QDQ: one batched run of the QDQ model against the float activations
    calibration kept, on the first "layer_samples" samples, see `_qdq_errors`); ONNX also gets
    "added_sqnr_db", the error the layer's own quantization adds. "output_sqnr_db" is end to
    end over all report samples; the float outputs are `reference` when calibration kept them.
    """
    n = min(len(next(iter(data.values()))), samples)
    feeds = {k: v[:n] for k, v in data.items()}
    outputs = float_graph.outputs
    added: dict = {}
    if reference is None or not layer_reference:
        reference, layer_reference = _float_reference(
            float_graph, feeds, options.batch_size, _opset(model),
            clamped_inputs(float_graph) if model.format == "onnx" else frozenset(), float_model)
    run = None
    if model.format == "tflite" and simulate is not None and not _int_executor_runs_int16(
            model.graph):
        # a 16x8 model the integer executor cannot run yet: a fake-quantized float run
        energy, got_out = simulate(feeds, layer_reference)
        run = "fake-quantized float run (the integer executor has no 16x8 kernels)"
    elif model.format == "tflite":
        energy, got_out = _tflite_errors(model, feeds, options, layer_reference)
    elif getattr(options, "engine", "numpy") == "onnxruntime":
        from .ort_engine import qdq_errors

        energy, added, got_out = qdq_errors(model, names, feeds, layer_reference)
    else:
        energy, added, got_out = _qdq_errors(model, names, feeds, options.batch_size,
                                             layer_reference)
    ref_out = reference
    layer_samples = min(n, min((len(v) for v in layer_reference.values()), default=n))
    fraction = _kept_fraction(float_graph, layer_reference)

    out_db = {}
    for o in outputs:
        if o in ref_out and o in got_out and ref_out[o].dtype.kind == "f":
            r = ref_out[o].astype(np.float64)
            out_db[o] = _db(float(np.sum(r * r)), float(np.sum((r - got_out[o]) ** 2)))
        else:
            out_db[o] = None
    agree = total = 0
    first = outputs[0]
    if _is_classifier(float_graph) and first in ref_out and first in got_out:
        hits = np.argmax(ref_out[first], axis=1) == np.argmax(got_out[first], axis=1)
        agree, total = int(np.sum(hits)), int(hits.size)

    layers = []
    for node in float_graph.nodes:
        out = node.outputs[0] if node.outputs else None
        if out not in qplan.activations:
            continue
        entry = {"layer": node.name, "op": node.op,
                 "input": [_qp(qplan, i) for i in node.present_inputs() if i in qplan.activations],
                 "output": _qp(qplan, out),
                 "sqnr_db": _db(*energy[out]) if out in energy else None}
        if model.format == "onnx":
            entry["added_sqnr_db"] = _db(*added[out]) if out in added else None
        layer = qplan.layers.get(out)
        if layer is not None:
            entry.update(per_channel=layer.per_channel, widened_channels=layer.widened,
                         multiplier=layer.multiplier.tolist(), shift=layer.shift.tolist(),
                         bias=None if layer.bias is None else layer.bias.tolist())
        layers.append(entry)
    report = {"layers": layers, "samples": n, "layer_samples": layer_samples,
              **({"layer_sample_fraction": round(fraction, 3)} if fraction < 1 else {}),
              "method": options.method, "rounding": options.rounding,
              "bias_correction": getattr(options, "bias_correction", False),
              "equalize": getattr(options, "equalize", False), "output_sqnr_db": out_db}
    if run is not None:
        report["report_run"] = run
    if first in ref_out and first in got_out and ref_out[first].dtype.kind == "f":
        # for the HTML report's scatter; not part of the JSON report
        report["_output_pairs"] = (ref_out[first], got_out[first])
    if total:
        report["top1_agreement"] = agree / total
    return report


def _qp(qplan, name) -> dict:
    scale, zp = qplan.activations[name]
    return {"tensor": name, "scale": float(scale), "zero_point": int(zp)}


def _is_classifier(graph) -> bool:
    """A 2-D output made by Softmax, or by a fully connected layer that narrows (logits)."""
    out = graph.tensors[graph.outputs[0]]
    producer = graph.producers().get(out.name)
    if producer is None or out.shape is None or len(out.shape) != 2:
        return False
    if producer.op == "Softmax":
        return True
    x = graph.tensors[producer.inputs[0]]
    return (producer.op in FC_OPS and x.shape is not None
            and isinstance(out.shape[-1], int) and isinstance(x.shape[-1], int)
            and 1 < out.shape[-1] < x.shape[-1])
