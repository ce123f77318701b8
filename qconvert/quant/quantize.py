"""`qconvert quantize`: fuse, calibrate, plan, write int8 (TFLite) or QDQ (ONNX), and report.

Steps: the fusion pipeline (unless `fuse=False`) so calibration sees the real weight ranges;
calibration batches through the float reference executor, collecting ranges; the quantization
plan (`plan`); writing it in the model's format (`tflite_int8` or `qdq`); then the report: per
layer its scales, zero points, (multiplier, shift) pairs and int32 biases, and the SQNR of each
quantized tensor against float on the evaluation samples, with the overall output SQNR and,
for classifiers, top-1 agreement with float.
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
    from qconvert.executor.float_executor import run_float_batched
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
    run_float_batched(model, calibration, options.batch_size, observe=collector.observe,
                      progress=progress)
    qplan = plan(graph, collector.ranges(), model.format, options.fc_per_channel)
    float_graph = copy.deepcopy(graph)
    if model.format == "tflite":
        from .tflite_int8 import apply_tflite_int8

        apply_tflite_int8(graph, qplan, options.io_type)
        names = {n: n for n in qplan.activations}
    else:
        from .qdq import apply_qdq

        names = apply_qdq(graph, qplan, model.meta.get("opset", 13))
    model.verify()
    data = evaluation if evaluation is not None else calibration
    return build_report(float_graph, model, qplan, names, data, options)


def _opset(model: Model):
    return model.meta.get("opset") if model.format == "onnx" else None


def sqnr(reference: np.ndarray, actual: np.ndarray) -> float:
    """Signal to quantization noise ratio in dB (inf when equal)."""
    noise = float(np.sum((reference.astype(np.float64) - actual) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    if noise == 0:
        return float("inf")
    return 10.0 * np.log10(max(signal, 1e-300) / noise)


def _quantized_values(model: Model, qplan, names: dict, feeds: dict, options) -> dict:
    """Dequantized value of every planned activation, from the quantized model."""
    graph = model.graph
    seen: dict = {}
    if model.format == "tflite":
        from qconvert.executor.int_executor import run_int8

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
                from .numerics import round_half_away
                array = np.clip(round_half_away(array / s) + z, -128, 127).astype(np.int8)
            inputs[name] = array
        run_int8(graph, inputs, rounding=options.rounding, observe=observe)
    else:
        from qconvert.executor.float_executor import run_float

        wanted = {v: k for k, v in names.items()}

        def observe(name, array):
            if name in wanted:
                seen[wanted[name]] = array

        run_float(graph, feeds, observe=observe, opset=_opset(model))
        return seen
    return {k: seen[v] for k, v in names.items() if v in seen}


def build_report(float_graph, model: Model, qplan, names: dict, data: dict, options) -> dict:
    """The per-layer report; SQNR over up to REPORT_SAMPLES samples, one at a time."""
    from qconvert.executor.float_executor import run_float

    n = min(len(next(iter(data.values()))), REPORT_SAMPLES)
    energy: dict = {}
    outputs = float_graph.outputs
    agree = total = 0
    classifier = _is_classifier(float_graph)
    for i in range(n):
        feeds = {k: v[i:i + 1] for k, v in data.items()}
        ref: dict = {}
        run_float(float_graph, feeds, observe=lambda name, a: ref.__setitem__(name, a)
                  if name in qplan.activations else None, opset=_opset(model))
        got = _quantized_values(model, qplan, names, feeds, options)
        for name, value in got.items():
            if name in ref:
                r = ref[name].astype(np.float64)
                s, e = energy.get(name, (0.0, 0.0))
                energy[name] = (s + float(np.sum(r * r)), e + float(np.sum((r - value) ** 2)))
        first = outputs[0]
        if classifier and first in ref and first in got:
            agree += int(np.argmax(ref[first], axis=1)[0] == np.argmax(got[first], axis=1)[0])
            total += 1

    def db(name):
        s, e = energy.get(name, (0.0, 0.0))
        return None if name not in energy else (float("inf") if e == 0
                                                else round(10 * np.log10(max(s, 1e-300) / e), 2))

    layers = []
    for node in float_graph.nodes:
        out = node.outputs[0]
        if out not in qplan.activations:
            continue
        entry = {"layer": node.name, "op": node.op,
                 "input": [_qp(qplan, i) for i in node.present_inputs() if i in qplan.activations],
                 "output": _qp(qplan, out), "sqnr_db": db(out)}
        layer = qplan.layers.get(out)
        if layer is not None:
            entry.update(per_channel=layer.per_channel,
                         multiplier=layer.multiplier.tolist(), shift=layer.shift.tolist(),
                         bias=None if layer.bias is None else layer.bias.tolist())
        layers.append(entry)
    report = {"layers": layers, "samples": n, "method": options.method,
              "rounding": options.rounding,
              "output_sqnr_db": {o: db(o) for o in outputs}}
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
