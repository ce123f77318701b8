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

import copy
from dataclasses import dataclass

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Model

from .plan import check_float, check_quantizable, dequantize_hybrid_weights, plan
from .ranges import RangeCollector

REPORT_SAMPLES = 64


@dataclass
class QuantizeOptions:
    """The choices of `qconvert quantize` (CLI options of the same names)."""

    method: str = "minmax"
    percentile: float = 99.99
    fc_per_channel: bool = False
    io_type: str = "int8"
    rounding: str = "double"
    fuse: bool = True
    batch_size: int = 16


def quantize_model(model: Model, calibration: dict, options: QuantizeOptions,
                   evaluation: dict | None = None, progress=None) -> dict:
    """Quantize `model` in place; return the report (a JSON-ready dict).

    `calibration` / `evaluation`: {input name: array (N, ...)}. `progress(done, total)` is
    called while calibrating.
    """
    from qconvert.passes import PassContext
    from qconvert.passes.pipeline import FUSE_PIPELINE, run_pipeline

    STATIC_PIPELINE = ("static-batch", "fold-constants", "eliminate")

    if len(model.graphs) != 1:
        raise QConvertError("quantizing a model with several subgraphs is not supported")
    graph = model.graph
    check_float(graph)
    dequantize_hybrid_weights(graph)
    if model.format == "tflite":  # TFLite Micro allocates from static shapes
        run_pipeline(model, STATIC_PIPELINE, PassContext(model.format))
    if options.fuse:
        run_pipeline(model, FUSE_PIPELINE, PassContext(model.format))
    check_quantizable(graph)
    collector = RangeCollector(options.method, options.percentile)
    reference = _calibrate(model, calibration, options.batch_size, collector.observe, progress,
                           REPORT_SAMPLES if evaluation is None else 0)
    qplan = plan(graph, collector.ranges(), model.format, options.fc_per_channel)
    float_graph = _snapshot(graph)
    if model.format == "tflite":
        from .tflite_int8 import apply_tflite_int8

        apply_tflite_int8(graph, qplan, options.io_type)
        names = {n: n for n in qplan.activations}
    else:
        from .qdq import apply_qdq

        names = apply_qdq(graph, qplan, model.meta.get("opset", 13))
    model.verify()
    data = evaluation if evaluation is not None else calibration
    return build_report(float_graph, model, qplan, names, data, options, reference)


def _calibrate(model: Model, calibration: dict, batch_size: int, observe, progress,
               keep_first: int) -> dict | None:
    """Run the float model over every calibration sample for `observe`; return its outputs on
    the first `keep_first` samples (the report's float reference, so the report need not run
    the float model again), or None when `keep_first` is 0."""
    from qconvert.executor.float_executor import run_float_batched

    total = len(next(iter(calibration.values())))
    head = min(total, keep_first)
    reference = None
    if head:
        reference = run_float_batched(model, {k: v[:head] for k, v in calibration.items()},
                                      batch_size, observe=observe, progress=progress)
    if head < total:
        report = None if progress is None else (lambda done, _n: progress(head + done, total))
        run_float_batched(model, {k: v[head:] for k, v in calibration.items()}, batch_size,
                          observe=observe, progress=report, collect=False)
    return reference


def _snapshot(graph):
    """A copy of `graph` that later rewrites of it leave alone, sharing its constant arrays
    (constants are immutable; copying them would double the weights in memory)."""
    memo = {id(t.data): t.data for t in graph.tensors.values() if t.data is not None}
    return copy.deepcopy(graph, memo)


def _opset(model: Model):
    return model.meta.get("opset") if model.format == "onnx" else None


def sqnr(reference: np.ndarray, actual: np.ndarray) -> float:
    """Signal to quantization noise ratio in dB (inf when equal)."""
    noise = float(np.sum((reference.astype(np.float64) - actual) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    if noise == 0:
        return float("inf")
    return 10.0 * np.log10(max(signal, 1e-300) / noise)


def _dequantized_int8(model: Model, names: dict, feeds: dict, options) -> dict:
    """TFLite: the dequantized value of every planned activation from the integer executor
    (bit-exact with TFLite Micro), on `feeds`."""
    from qconvert.executor.int_executor import run_int8

    from .numerics import round_half_away

    graph = model.graph
    seen: dict = {}

    def observe(name, array):
        t = graph.tensors.get(name)
        if t is not None and t.quant is not None and array.dtype == np.int8:
            seen[name] = (array.astype(np.float64) - float(t.quant.zero_point[0])) \
                * float(t.quant.scale[0])
        elif array.dtype.kind == "f":
            seen[name] = array

    inputs = {}
    for name, array in feeds.items():
        t = graph.tensors[name]
        if t.dtype == "int8":
            s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
            array = np.clip(round_half_away(array / s) + z, -128, 127).astype(np.int8)
        inputs[name] = array
    run_int8(graph, inputs, rounding=options.rounding, observe=observe)
    return {k: seen[v] for k, v in names.items() if v in seen}


def _tflite_errors(float_graph, model: Model, qplan, names: dict, feeds: dict, options):
    """TFLite: per activation (signal, noise) energies of the int8 value against the float
    model's (end to end: the error accumulated up to that tensor), sample by sample; and both
    models' outputs on every sample."""
    from qconvert.executor.float_executor import run_float

    n = len(next(iter(feeds.values())))
    energy: dict = {}
    ref_out: dict = {}
    got_out: dict = {}
    for i in range(n):
        one = {k: v[i:i + 1] for k, v in feeds.items()}
        ref: dict = {}
        run_float(float_graph, one, observe=lambda name, a: ref.__setitem__(name, a)
                  if name in qplan.activations else None)
        got = _dequantized_int8(model, names, one, options)
        for name, value in got.items():
            if name in ref:
                r = ref[name].astype(np.float64)
                s, e = energy.get(name, (0.0, 0.0))
                energy[name] = (s + float(np.sum(r * r)), e + float(np.sum((r - value) ** 2)))
        for o in float_graph.outputs:
            if o in ref and o in got:
                ref_out.setdefault(o, []).append(ref[o])
                got_out.setdefault(o, []).append(got[o])
    return (energy, {k: np.concatenate(v) for k, v in ref_out.items()},
            {k: np.concatenate(v) for k, v in got_out.items()})


def _qdq_errors(model: Model, names: dict, feeds: dict, batch_size: int):
    """ONNX QDQ: per activation (signal, noise) energies of its own quantization, and the QDQ
    model's outputs, from one batched run of the QDQ graph. Each QuantizeLinear reads the float
    value its layer computed from the (dequantized) int8 inputs; the noise is what rounding to
    the int8 grid and saturating then changes (the per-layer error of TFLite's quantization
    debugger: the error a layer adds, not the error it inherits). The executor measures it
    while it computes the QuantizeLinear -> DequantizeLinear pair (`run_float`'s
    `pair_error`), so nothing is kept or computed twice for the report."""
    from qconvert.executor.float_executor import run_float_batched

    activation_of = {d: a for a, d in names.items()}
    energy: dict = {}

    def pair_error(name, signal, noise):
        act = activation_of.get(name)
        if act is not None:
            s, e = energy.get(act, (0.0, 0.0))
            energy[act] = (s + signal, e + noise)

    outputs = run_float_batched(model, feeds, batch_size, pair_error=pair_error)
    return energy, outputs


def build_report(float_graph, model: Model, qplan, names: dict, data: dict, options,
                 reference: dict | None = None) -> dict:
    """The per-layer report over the first REPORT_SAMPLES samples of `data`.

    Per layer, "sqnr_db" is ONNX QDQ: the SQNR of the tensor's own quantization (`_qdq_errors`,
    one batched run of the QDQ model); TFLite: of its int8 value against the float model's, end
    to end (`_tflite_errors`). "output_sqnr_db" is always end to end against the float model,
    whose outputs are `reference` when calibration kept them (the first samples of `data`).
    """
    from qconvert.executor.float_executor import run_float_batched

    n = min(len(next(iter(data.values()))), REPORT_SAMPLES)
    feeds = {k: v[:n] for k, v in data.items()}
    outputs = float_graph.outputs
    if model.format == "tflite":
        energy, ref_out, got_out = _tflite_errors(float_graph, model, qplan, names, feeds,
                                                  options)
        kind = "end_to_end"
    else:
        energy, got_out = _qdq_errors(model, names, feeds, options.batch_size)
        ref_out = reference if reference is not None else run_float_batched(
            float_graph, feeds, options.batch_size, opset=_opset(model))
        kind = "own_quantization"

    def db(s, e):
        return float("inf") if e == 0 else round(10 * np.log10(max(s, 1e-300) / e), 2)

    def layer_db(name):
        return db(*energy[name]) if name in energy else None

    out_db = {}
    for o in outputs:
        if o in ref_out and o in got_out and ref_out[o].dtype.kind == "f":
            r = ref_out[o].astype(np.float64)
            out_db[o] = db(float(np.sum(r * r)), float(np.sum((r - got_out[o]) ** 2)))
        else:
            out_db[o] = None
    agree = total = 0
    first = outputs[0]
    if _is_classifier(float_graph) and first in ref_out and first in got_out:
        hits = np.argmax(ref_out[first], axis=1) == np.argmax(got_out[first], axis=1)
        agree, total = int(np.sum(hits)), int(hits.size)

    layers = []
    for node in float_graph.nodes:
        out = node.outputs[0]
        if out not in qplan.activations:
            continue
        entry = {"layer": node.name, "op": node.op,
                 "input": [_qp(qplan, i) for i in node.present_inputs() if i in qplan.activations],
                 "output": _qp(qplan, out), "sqnr_db": layer_db(out)}
        layer = qplan.layers.get(out)
        if layer is not None:
            entry.update(per_channel=layer.per_channel,
                         multiplier=layer.multiplier.tolist(), shift=layer.shift.tolist(),
                         bias=None if layer.bias is None else layer.bias.tolist())
        layers.append(entry)
    report = {"layers": layers, "samples": n, "method": options.method,
              "rounding": options.rounding,
              "layer_sqnr": kind, "output_sqnr_db": out_db}
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
    return (producer.op in ("FullyConnected", "Gemm", "MatMul") and x.shape is not None
            and isinstance(out.shape[-1], int) and isinstance(x.shape[-1], int)
            and 1 < out.shape[-1] < x.shape[-1])
