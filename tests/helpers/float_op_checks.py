"""Oracles and model builders shared by the float executor's tests (`test_float_kernels`,
`test_float_executor`): onnxruntime with its graph optimizations disabled, LiteRT with the
reference op resolver, random feeds, per-op ONNX models from onnx.helper, hand-built IR written
as TFLite (`TfGraph`), and `check_onnx` / `check_tflite`, which run a model through
`run_float` and compare every output with the runtime's."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import assert_close, random_inputs
from qconvert.executor.float_executor import run_float
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize
from qconvert.padding import same_pads

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
FLOAT_MODELS = ["digits_cnn.onnx", "digits_cnn.tflite", "kws_ref_model_float32.tflite",
                "pretrainedResnet.tflite", "ad01_fp32.tflite"]


# -- oracles and helpers --------------------------------------------------------------------------
def randn(*shape, seed=1):
    """Float32 normal random weights of `shape`."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def ort_run(data: bytes, feeds: dict) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})


def litert_run(data: bytes, arrays: list) -> list:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    ins = it.get_input_details()
    for d, a in zip(ins, arrays):
        if tuple(d["shape"]) != a.shape:
            it.resize_tensor_input(d["index"], a.shape)
    it.allocate_tensors()
    for d, a in zip(ins, arrays):
        it.set_tensor(d["index"], a)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def random_feeds(graph: Graph, seed=0, batch=None) -> dict:
    details = []
    for name in graph.inputs:
        t = graph.tensors[name]
        shape = list(t.shape)
        if batch is not None:
            shape[0] = batch
        details.append((shape, t.dtype))
    return dict(zip(graph.inputs, random_inputs(details, seed)))


def compare(reference: list, actual: list, rel=1e-5) -> None:
    assert len(reference) == len(actual)
    for ref, got in zip(reference, actual):
        if ref.dtype.kind == "f":
            assert_close([ref], [got], rel)
        else:
            assert ref.dtype == got.dtype and ref.shape == got.shape
            np.testing.assert_array_equal(got, ref)


def onnx_bytes(nodes, inputs, outputs, inits=(), opset=13) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 21 else 10
    return m.SerializeToString()


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def load(tmp_path, data: bytes, suffix: str) -> Model:
    path = tmp_path / f"m{suffix}"
    path.write_bytes(data)
    return load_model(path)


def check_onnx(tmp_path, data: bytes, feeds=None, seeds=(0,), rel=1e-5) -> Model:
    model = load(tmp_path, data, ".onnx")
    g = model.graph
    for seed in seeds:
        f = feeds if feeds is not None else random_feeds(g, seed)
        got = run_float(model, f)
        compare(ort_run(data, f), [got[o] for o in g.outputs], rel)
    return model


def check_tflite(tmp_path, data: bytes, seeds=(0,), rel=1e-5, batch=None) -> Model:
    model = load(tmp_path, data, ".tflite")
    g = model.graph
    for seed in seeds:
        feeds = random_feeds(g, seed, batch)
        got = run_float(model, feeds)
        compare(litert_run(data, [feeds[n] for n in g.inputs]), [got[o] for o in g.outputs], rel)
    return model


class TfGraph:
    """Hand-built IR written as TFLite by qconvert's writer (LiteRT is the oracle)."""

    def __init__(self, seed=0):
        self.g = Graph("main")
        self.rng = np.random.default_rng(seed)

    def input(self, name, shape, dtype="float32"):
        self.g.add_tensor(Tensor(name, tuple(shape), dtype))
        self.g.inputs.append(name)
        return name

    def const(self, name, array, quant=None):
        array = np.asarray(array)
        self.g.add_tensor(Tensor(name, array.shape, str(array.dtype), array, quant))
        return name

    def weights(self, name, shape):
        return self.const(name, self.rng.standard_normal(shape).astype(np.float32))

    def node(self, op, ins, out, shape, dtype="float32", quant=None, **attrs):
        self.g.add_tensor(Tensor(out, tuple(shape), dtype, quant=quant))
        self.g.nodes.append(Node(op, list(ins), [out], attrs, out))
        return out

    def build(self, outputs) -> bytes:
        self.g.outputs = list(outputs)
        model = Model("tflite", [self.g])
        model.verify()
        return serialize(model)


def spatial(kernel, strides=(1, 1), dilations=(1, 1), in_hw=None, padding="VALID", **extra):
    """TFLite spatial attributes, SAME resolved to explicit pads for input size `in_hw`."""
    pads = (same_pads(in_hw, kernel, strides, dilations) if padding == "SAME" else [0, 0, 0, 0])
    return dict(layout="NHWC", kernel_shape=list(kernel), strides=list(strides),
                dilations=list(dilations), pads=pads, activation="NONE", **extra)


def out_size(n, k, s, d, padding):
    return -(-n // s) if padding == "SAME" else (n - (k - 1) * d - 1) // s + 1
