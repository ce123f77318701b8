"""Calibration on onnxruntime (`qconvert quantize --engine onnxruntime`), an optional extra.

The numpy float executor is the default and always works; onnxruntime, when installed
(`pip install onnxruntime`; never a dependency of qconvert), is the other float engine. It is not
faster on a model whose batch is fixed to 1 (most exports): onnxruntime then runs the samples
one at a time, its 16 ResNet-50 inferences take about as long as the executor's one batch of 16
(~0.6 s), and every sample's activations are observed on their own (~0.55 s against ~0.15 s for
one batch of 16); each session costs ~0.1 s more. `run_ort_batched` has the float executor's
calling convention (`run_float_batched`): it serializes the fused float model with every float
activation added as a graph output, runs it sample by sample (by chunks of `batch_size` when
the batch is dynamic) with basic graph optimizations (constant folding only: no node whose
output is requested disappears), calls `observe(name, array)` for every input and activation of
every chunk, and returns the model's outputs. The ranges it yields equal the executor's up to
float rounding (both compute float32 ONNX semantics).
"""

from __future__ import annotations

import importlib.util

import numpy as np

from qconvert.errors import QConvertError

from .error_energy import EndToEnd, energy_add

ENGINES = ("numpy", "onnxruntime")


def check_engine(engine: str, fmt: str) -> None:
    """Refuse an engine that cannot run here, in one line."""
    if engine == "numpy":
        return
    if fmt != "onnx":
        raise QConvertError("--engine onnxruntime runs ONNX graphs only, and this model is "
                            "calibrated as a TFLite graph (a TFLite model, or an ONNX model "
                            "converted for .tflite output, export-c or export-c-header): use "
                            "--engine numpy")
    if importlib.util.find_spec("onnxruntime") is None:
        raise QConvertError("--engine onnxruntime needs onnxruntime (pip install onnxruntime)")


def run_ort_batched(model, feeds: dict, batch_size: int, observe=None, progress=None,
                    collect=True) -> dict:
    """The float model's outputs on `feeds` (N samples on axis 0), run by onnxruntime; see
    the module docstring. `collect`: True for every sample's outputs, False for none, or a
    number: the outputs of the first that many samples."""
    graph = model.graph
    wanted = [n for n, t in graph.tensors.items()
              if t.data is None and t.dtype.startswith("float") and n not in graph.inputs
              and n not in graph.outputs] if observe is not None else []
    session = _session(model, wanted, basic=True)
    names = [o.name for o in session.get_outputs()]
    fixed = any(isinstance(i.shape[0], int) for i in session.get_inputs() if i.shape)
    step = 1 if fixed else batch_size
    total = len(next(iter(feeds.values())))
    limit = total if collect is True else int(collect)
    chunks: dict = {}
    for start in range(0, total, step):
        part = {k: np.ascontiguousarray(v[start:start + step]) for k, v in feeds.items()}
        values = session.run(names, part)
        if observe is not None:
            for name, array in part.items():
                observe(name, array)
            for name, array in zip(names, values):
                observe(name, array)
        if start < limit:
            for name, array in zip(graph.outputs, values):
                chunks.setdefault(name, []).append(array[:limit - start])
        if progress is not None:
            progress(min(start + step, total), total)
    return {k: np.concatenate(v) for k, v in chunks.items()}


def _session(model, extra_outputs: list, basic: bool = False):
    """An onnxruntime session of `model` with `extra_outputs` added to its graph outputs;
    `basic`: basic graph optimizations (a float model), else none (QDQ pairs run as written)."""
    import onnxruntime as ort

    from qconvert.formats.model_io import serialize

    graph = model.graph
    saved = list(graph.outputs)
    graph.outputs = saved + [n for n in dict.fromkeys(extra_outputs) if n not in saved]
    try:
        blob = serialize(model, "onnx")
    finally:
        graph.outputs = saved
    so = ort.SessionOptions()
    so.log_severity_level = 3
    level = ort.GraphOptimizationLevel
    so.graph_optimization_level = level.ORT_ENABLE_BASIC if basic else level.ORT_DISABLE_ALL
    try:
        return ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise QConvertError(f"onnxruntime cannot run the model: "
                            f"{str(exc).splitlines()[0][:200]}") from None


def qdq_errors(model, names: dict, feeds: dict, layer_reference: dict) -> tuple:
    """`error_energy.float_qdq_errors` on onnxruntime: the QDQ model run sample by sample with every
    activation's QuantizeLinear input and DequantizeLinear output requested, giving per
    activation the end-to-end (signal, noise) against `layer_reference`, the added (signal,
    noise) of its own Q -> DQ pair, and the model's outputs."""
    graph = model.graph
    q_input = {}
    for act, dq_out in names.items():
        dq = graph.producer(dq_out)
        q = graph.producer(dq.inputs[0]) if dq is not None and dq.op == "Dequantize" else None
        if q is not None and q.op == "Quantize":
            q_input[act] = q.inputs[0]
    session = _session(model, list(names.values()) + list(q_input.values()))
    outs = [o.name for o in session.get_outputs()]
    tracker = EndToEnd(layer_reference)
    added: dict = {}
    got: dict = {}
    total = len(next(iter(feeds.values())))
    for i in range(total):
        values = dict(zip(outs, session.run(outs, {k: np.ascontiguousarray(v[i:i + 1])
                                                   for k, v in feeds.items()})))
        for act, dq_out in names.items():
            tracker.add(act, values[dq_out])
            x = values.get(q_input.get(act))
            if x is not None:
                x64 = x.astype(np.float64)
                energy_add(added, act, float(np.sum(x64 * x64)),
                            float(np.sum((x64 - values[dq_out]) ** 2)))
        for name in graph.outputs:
            got.setdefault(name, []).append(values[name])
    return tracker.energy, added, {k: np.concatenate(v) for k, v in got.items()}
