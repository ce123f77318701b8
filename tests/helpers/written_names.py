"""Structure checks for every model a command writes: names that tools key by are unique.

ONNX (`onnx_name_problems`): node names unique (onnxruntime refuses two nodes with one name
even with its optimizations off, and so do qconvert's own reader, onnx-graphsurgeon and Netron's
lookups), every value defined once (a graph input, an initializer or one node output), the
model passes `onnx.checker.check_model(full_check=True)` and onnxruntime with its graph
optimizations off loads and runs it. TFLite (`tflite_name_problems`): tensor names unique in
each subgraph, and LiteRT loads the model. Each returns the list of problems found (empty: the
model is fine), so a test can show the check fails on a planted duplicate.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

_ORT_TYPES = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
              "tensor(int16)": np.int16, "tensor(float16)": np.float16}


def _repeated(names) -> list:
    return sorted(n for n, k in Counter(names).items() if k > 1)


def onnx_name_problems(model_bytes: bytes, run: bool = True) -> list:
    """What is wrong with the ONNX model `model_bytes` (module docstring); [] when nothing."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    g = model.graph
    problems = []
    nodes = _repeated(n.name for n in g.node if n.name)
    if nodes:
        problems.append(f"node names used twice: {nodes}")
    inits = {t.name for t in g.initializer}
    defined = ([t.name for t in g.initializer] + [v.name for v in g.input if v.name not in inits]
               + [o for n in g.node for o in n.output if o])
    values = _repeated(defined)
    if values:
        problems.append(f"values defined twice: {values}")
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # noqa: BLE001 - the checker's message is the finding
        problems.append(f"onnx.checker: {str(exc).splitlines()[0][:200]}")
    if run:
        problems += _ort_problems(model_bytes)
    return problems


def _ort_problems(model_bytes: bytes) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        feeds = {}
        for i in sess.get_inputs():
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
            feeds[i.name] = rng.standard_normal(shape).astype(_ORT_TYPES.get(i.type, np.float32))
        sess.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - the runtime's refusal is the finding
        return [f"onnxruntime: {str(exc).splitlines()[0][:200]}"]
    return []


def tflite_name_problems(model_bytes: bytes, load: bool = True) -> list:
    """What is wrong with the TFLite model `model_bytes` (module docstring); [] when nothing."""
    from tflite.Model import Model

    m = Model.GetRootAsModel(model_bytes, 0)
    problems = []
    for s in range(m.SubgraphsLength()):
        sub = m.Subgraphs(s)
        names = _repeated(sub.Tensors(t).Name() for t in range(sub.TensorsLength()))
        if names:
            problems.append(f"subgraph {s}: tensor names used twice: {names}")
    if load:
        from ai_edge_litert.interpreter import Interpreter

        try:
            Interpreter(model_content=model_bytes).allocate_tensors()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"LiteRT: {str(exc).splitlines()[0][:200]}")
    return problems
