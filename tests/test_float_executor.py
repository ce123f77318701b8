"""The float reference executor (`qconvert.executor.float_executor`) and its kernels, against
independent runtimes only: onnxruntime with its graph optimizations disabled for ONNX, LiteRT
with the reference op resolver for TFLite. Per-op models are built with onnx.helper or written
from hand-built IR by the TFLite writer; then every shared float model on random inputs (1e-5
relative), batching (a batch of N equals N single runs, including reshapes that hard-code the
batch 1), the `observe` hook, early freeing, `run_float_batched` and the errors."""

from __future__ import annotations

import gc
import importlib.util
import weakref

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT, SAMPLE_MODELS, TEST_MODELS, assert_close, random_inputs
from qconvert.errors import QConvertError
from qconvert.executor.float_executor import (ExecutionError, UnsupportedOpsError, run_float,
                                              run_float_batched)
from qconvert.executor.float_kernels import KERNELS
from qconvert.ir import Graph, Model, Node, QuantParams, Tensor
from qconvert.model_io import load_model, serialize
from qconvert.padding import same_pads

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
FLOAT_MODELS = ["digits_cnn.onnx", "digits_cnn.tflite", "kws_ref_model_float32.tflite",
                "pretrainedResnet.tflite", "ad01_fp32.tflite"]


# -- oracles and helpers --------------------------------------------------------------------------
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


# -- the op table -----------------------------------------------------------------------------------
def test_every_schema_op_has_a_kernel():
    from qconvert import schemas

    assert sorted(s.name for s in schemas.all_schemas() if KERNELS.get(s.name) is None) == []


# -- ONNX ops against onnxruntime -------------------------------------------------------------------
def _w(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CONV_CASES = {
    "3x3_pad_bias": ((1, 3, 8, 8), (4, 3, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    "stride2_asymmetric_pads": ((2, 3, 9, 8), (5, 3, 3, 3),
                                dict(strides=[2, 2], pads=[0, 1, 2, 0]), True),
    "dilation_no_bias": ((1, 2, 11, 10), (3, 2, 3, 2), dict(dilations=[2, 3], pads=[2, 1, 2, 1]),
                         False),
    "groups": ((1, 6, 7, 7), (4, 3, 3, 3), dict(group=2, pads=[1, 1, 1, 1]), True),
    "groups_strided": ((2, 8, 9, 9), (12, 2, 3, 3), dict(group=4, strides=[2, 1]), True),
    "depthwise": ((2, 5, 8, 8), (5, 1, 3, 3), dict(group=5, pads=[1, 1, 1, 1]), True),
    "depthwise_multiplier_stride": ((1, 3, 9, 9), (6, 1, 3, 3),
                                    dict(group=3, strides=[2, 2], pads=[0, 0, 1, 1]), True),
    "pointwise": ((2, 8, 5, 5), (16, 8, 1, 1), {}, True),
    "pointwise_strided": ((1, 8, 6, 6), (4, 8, 1, 1), dict(strides=[2, 2]), False),
    "same_upper": ((1, 3, 7, 7), (4, 3, 4, 4), dict(auto_pad="SAME_UPPER", strides=[2, 2]), True),
    "same_lower": ((1, 3, 7, 7), (4, 3, 4, 4), dict(auto_pad="SAME_LOWER"), True),
    "conv1d": ((2, 3, 20), (4, 3, 5), dict(pads=[2, 1], strides=[2], dilations=[2]), True),
    "conv3d": ((1, 2, 5, 6, 5), (3, 2, 3, 2, 3), dict(pads=[1, 0, 1, 1, 1, 0]), True),
    "big_channels": ((1, 64, 10, 10), (96, 64, 3, 3), dict(pads=[1, 1, 1, 1]), True),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_onnx_conv(tmp_path, case):
    x, w, attrs, bias = CONV_CASES[case]
    inits = [("W", _w(*w))] + ([("B", _w(w[0], seed=2))] if bias else [])
    node = helper.make_node("Conv", ["x", "W"] + (["B"] if bias else []), ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", x)], [vi("y", None)], inits), seeds=(0, 1))


CONV_TRANSPOSE_CASES = {
    "stride2_pads": ((1, 4, 5, 5), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 0, 0, 1])),
    "output_padding": ((2, 4, 4, 5), (4, 2, 3, 3), dict(strides=[2, 3], output_padding=[1, 2])),
    "groups_dilation": ((1, 4, 5, 5), (4, 2, 3, 2), dict(group=2, dilations=[2, 1], pads=[1, 1, 0, 0])),
    "output_shape": ((1, 2, 4, 4), (2, 3, 3, 3), dict(strides=[2, 2], output_shape=[8, 9])),
    "same_upper": ((1, 2, 4, 5), (2, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "same_lower": ((1, 2, 4, 5), (2, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    "output_shape_same_upper": ((1, 2, 4, 4), (2, 3, 3, 3),
                                dict(strides=[2, 2], output_shape=[8, 9], auto_pad="SAME_UPPER")),
    "conv_transpose_1d": ((1, 3, 7), (3, 2, 4), dict(strides=[3], pads=[1, 2])),
}


@pytest.mark.parametrize("case", sorted(CONV_TRANSPOSE_CASES))
def test_onnx_conv_transpose(tmp_path, case):
    x, w, attrs = CONV_TRANSPOSE_CASES[case]
    cout = w[1] * attrs.get("group", 1)
    node = helper.make_node("ConvTranspose", ["x", "W", "B"], ["y"], **attrs)
    data = onnx_bytes([node], [vi("x", x)], [vi("y", None)],
                      [("W", _w(*w)), ("B", _w(cout, seed=2))])
    check_onnx(tmp_path, data)


@pytest.mark.parametrize("attrs,a,b,c", [
    ({}, (3, 5), (5, 4), (4,)),
    (dict(transB=1, alpha=0.5, beta=2.0), (3, 5), (4, 5), (3, 1)),
    (dict(transA=1, transB=1), (5, 3), (4, 5), (3, 4)),
    (dict(transA=1, beta=0.0), (5, 3), (5, 4), (4,)),
    ({}, (2, 6), (6, 3), None),
])
def test_onnx_gemm(tmp_path, attrs, a, b, c):
    inits = [("B", _w(*b))] + ([("C", _w(*c, seed=3))] if c else [])
    node = helper.make_node("Gemm", ["a", "B"] + (["C"] if c else []), ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("a", a)], [vi("y", None)], inits))


@pytest.mark.parametrize("a,b", [((3, 5), (5, 4)), ((2, 3, 5), (5, 4)), ((2, 1, 3, 5), (3, 5, 2)),
                                 ((5,), (5, 4)), ((2, 3, 5), (5,))])
def test_onnx_matmul(tmp_path, a, b):
    node = helper.make_node("MatMul", ["a", "B"], ["y"])
    check_onnx(tmp_path, onnx_bytes([node], [vi("a", a)], [vi("y", None)], [("B", _w(*b))]))


@pytest.mark.parametrize("shape", [(2, 4, 5, 5), (3, 4), (2, 4, 6)])
def test_onnx_batchnorm(tmp_path, shape):
    c = shape[1]
    rng = np.random.default_rng(4)
    inits = [("s", _w(c)), ("b", _w(c, seed=5)), ("m", _w(c, seed=6)),
             ("v", rng.uniform(0.1, 2.0, c).astype(np.float32))]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", shape)], [vi("y", None)], inits))


POOL_CASES = {
    "plain": ((1, 3, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
    "pads_stride": ((2, 2, 9, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 2])),
    "ceil_mode": ((1, 2, 8, 9), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "ceil_mode_pads": ((1, 2, 7, 7), dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 1, 1, 0],
                                          ceil_mode=1)),
    "ceil_mode_window_in_pad": ((1, 1, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2],
                                                   pads=[1, 1, 1, 1], ceil_mode=1)),
    "pool1d": ((2, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool0", "AveragePool1"])
def test_onnx_pools(tmp_path, case, op):
    x, attrs = POOL_CASES[case]
    attrs = dict(attrs)
    if op.startswith("AveragePool"):
        attrs["count_include_pad"] = int(op[-1])
        op = "AveragePool"
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", x)], [vi("y", None)], opset=13))


@pytest.mark.parametrize("attrs", [dict(dilations=[2, 1], pads=[1, 1, 1, 1]),
                                   dict(dilations=[2, 2], strides=[2, 1], ceil_mode=1)])
def test_onnx_maxpool_dilations(tmp_path, attrs):
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", (1, 2, 9, 8))], [vi("y", None)]))


def test_onnx_average_pool_dilations_opset19(tmp_path):
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2],
                            pads=[1, 0, 1, 1], count_include_pad=1)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", (1, 2, 7, 7))], [vi("y", None)], opset=19))


def test_onnx_global_average_pool(tmp_path):
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", (2, 5, 6, 7))], [vi("y", None)]))


@pytest.mark.parametrize("opset,attrs,axes", [
    (13, dict(axes=[2, 3]), None),
    (13, dict(axes=[-1], keepdims=0), None),
    (13, {}, None),
    (18, {}, [1, -1]),
    (18, dict(keepdims=0), [0]),
    (18, dict(noop_with_empty_axes=1), None),
    (18, {}, None),
])
def test_onnx_reduce_mean(tmp_path, opset, attrs, axes):
    inits = [("axes", np.array(axes, np.int64))] if axes is not None else []
    node = helper.make_node("ReduceMean", ["x"] + (["axes"] if axes is not None else []), ["y"],
                            **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", (2, 3, 4, 5))], [vi("y", None)], inits,
                                    opset=opset))


@pytest.mark.parametrize("opset,axis", [(13, 1), (13, -1), (11, 1), (11, 2), (11, -1)])
def test_onnx_softmax(tmp_path, opset, axis):
    node = helper.make_node("Softmax", ["x"], ["y"], axis=axis)
    x = 4 * np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", x.shape)], [vi("y", None)], opset=opset),
               feeds={"x": x})


def test_onnx_hard_sigmoid_and_hard_swish(tmp_path):
    nodes = [helper.make_node("HardSigmoid", ["x"], ["a"], alpha=0.3, beta=0.4),
             helper.make_node("HardSigmoid", ["x"], ["b"]),
             helper.make_node("HardSwish", ["x"], ["c"])]
    x = 4 * np.random.default_rng(0).standard_normal((3, 50)).astype(np.float32)
    x[0, :4] = [-3, 3, 0, -2.5]
    data = onnx_bytes(nodes, [vi("x", x.shape)], [vi(n, None) for n in "abc"], opset=14)
    check_onnx(tmp_path, data, feeds={"x": x})


@pytest.mark.parametrize("opset,mode,pads,value,axes", [
    (13, "constant", [1, 0, 2, 1, 0, 1, 0, 3], 1.5, None),
    (13, "constant", [0, 0, -1, 1, 0, 0, 2, -2], None, None),
    (13, "reflect", [0, 0, 2, 1, 0, 0, 1, 3], None, None),
    (13, "edge", [0, 1, 2, 0, 1, 0, 0, 3], None, None),
    (18, "constant", [2, 1, 0, 3], 0.5, [2, -1]),
    (19, "wrap", [0, 0, 2, 1, 0, 0, 1, 3], None, None),
])
def test_onnx_pad(tmp_path, opset, mode, pads, value, axes):
    inits = [("pads", np.array(pads, np.int64))]
    ins = ["x", "pads"]
    if value is not None or axes is not None:
        ins.append("value" if value is not None else "")
        if value is not None:
            inits.append(("value", np.array(value, np.float32)))
    if axes is not None:
        ins.append("axes")
        inits.append(("axes", np.array(axes, np.int64)))
    node = helper.make_node("Pad", ins, ["y"], mode=mode)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", (2, 3, 5, 6))], [vi("y", None)], inits,
                                    opset=opset))


def test_onnx_dropout_is_identity_with_a_mask(tmp_path):
    node = helper.make_node("Dropout", ["x", "r"], ["y", "mask"])
    data = onnx_bytes([node], [vi("x", (2, 5))], [vi("y", None), vi("mask", None, TensorProto.BOOL)],
                      [("r", np.array(0.3, np.float32))])
    check_onnx(tmp_path, data)


@pytest.mark.parametrize("qtype,axis,per_axis", [(U8, 1, False), (I8, 1, False), (I8, 1, True),
                                                 (U8, 0, True), (I8, -1, True)])
def test_onnx_quantize_dequantize(tmp_path, qtype, axis, per_axis):
    shape = (3, 4, 5)
    n = shape[axis] if per_axis else 1
    rng = np.random.default_rng(7)
    scale = rng.uniform(0.01, 0.05, n).astype(np.float32)
    zero = rng.integers(-20, 20, n).astype(np.int8 if qtype == I8 else np.uint8) + (
        0 if qtype == I8 else np.uint8(100))
    if not per_axis:
        scale, zero = scale.reshape(()), zero.reshape(())
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis)]
    x = rng.standard_normal(shape).astype(np.float32) * 3
    # exact ties round half to even; 300 steps saturates
    flat = x.reshape(-1)
    s0 = float(scale.reshape(-1)[0])
    flat[:6] = (np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300]) * s0).astype(np.float32)
    data = onnx_bytes(nodes, [vi("x", shape)], [vi("q", None, qtype), vi("y", None)],
                      [("s", scale), ("z", zero)])
    check_onnx(tmp_path, data, feeds={"x": x})


def test_onnx_quantize_without_zero_point_is_uint8(tmp_path):
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["q"])
    data = onnx_bytes([node], [vi("x", (4, 6))], [vi("q", None, U8)],
                      [("s", np.array(0.02, np.float32))])
    check_onnx(tmp_path, data)


# -- TFLite ops against LiteRT (reference kernels) ----------------------------------------------
@pytest.mark.parametrize("kernel,strides,dilations,padding,act,cin,group", [
    ((3, 3), (1, 1), (1, 1), "SAME", "RELU", 3, 1),
    ((3, 2), (2, 2), (1, 1), "SAME", "RELU6", 4, 1),
    ((3, 3), (2, 1), (1, 1), "VALID", "NONE", 3, 1),
    ((3, 3), (1, 1), (2, 2), "SAME", "RELU_N1_TO_1", 2, 1),
    ((1, 1), (1, 1), (1, 1), "VALID", "NONE", 8, 1),
    ((3, 3), (1, 1), (1, 1), "SAME", "NONE", 6, 2),
])
def test_tflite_conv(tmp_path, kernel, strides, dilations, padding, act, cin, group):
    n = TfGraph()
    h, w, cout = 9, 8, 4
    x = n.input("x", (1, h, w, cin))
    wt = n.weights("w", (cout, *kernel, cin // group))
    b = n.weights("b", (cout,))
    oh = out_size(h, kernel[0], strides[0], dilations[0], padding)
    ow = out_size(w, kernel[1], strides[1], dilations[1], padding)
    attrs = spatial(kernel, strides, dilations, (h, w), padding, group=group)
    attrs["activation"] = act
    n.node("Conv2D", [x, wt, b], "y", (1, oh, ow, cout), **attrs)
    check_tflite(tmp_path, n.build(["y"]), seeds=(0, 1))


@pytest.mark.parametrize("mult,strides,dilations,padding,act", [
    (1, (1, 1), (1, 1), "SAME", "RELU6"),
    (2, (2, 2), (1, 1), "SAME", "NONE"),
    (3, (1, 2), (1, 1), "VALID", "RELU"),
    (1, (1, 1), (2, 2), "SAME", "NONE"),
])
def test_tflite_depthwise(tmp_path, mult, strides, dilations, padding, act):
    n = TfGraph()
    h, w, c = 9, 10, 3
    x = n.input("x", (2, h, w, c))
    wt = n.weights("w", (1, 3, 3, c * mult))
    b = n.weights("b", (c * mult,))
    oh = out_size(h, 3, strides[0], dilations[0], padding)
    ow = out_size(w, 3, strides[1], dilations[1], padding)
    attrs = spatial((3, 3), strides, dilations, (h, w), padding, depth_multiplier=mult)
    attrs["activation"] = act
    n.node("DepthwiseConv2D", [x, wt, b], "y", (2, oh, ow, c * mult), **attrs)
    check_tflite(tmp_path, n.build(["y"]), seeds=(0, 1))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("kernel,strides,padding,act", [
    ((2, 2), (2, 2), "VALID", "NONE"),
    ((3, 3), (2, 2), "SAME", "RELU"),
    ((3, 2), (1, 1), "SAME", "NONE"),
    ((4, 4), (3, 3), "SAME", "RELU6"),
])
def test_tflite_pools(tmp_path, op, kernel, strides, padding, act):
    n = TfGraph()
    h, w, c = 9, 10, 3
    x = n.input("x", (1, h, w, c))
    oh, ow = (out_size(h, kernel[0], strides[0], 1, padding),
              out_size(w, kernel[1], strides[1], 1, padding))
    attrs = spatial(kernel, strides, (1, 1), (h, w), padding)
    attrs["activation"] = act
    n.node(op, [x], "y", (1, oh, ow, c), **attrs)
    check_tflite(tmp_path, n.build(["y"]), seeds=(0, 1))


@pytest.mark.parametrize("keep,shape,bias,act", [(False, (3, 6), True, "RELU"),
                                                 (True, (2, 3, 6), True, "NONE"),
                                                 (False, (2, 3, 6), False, "NONE"),
                                                 (False, (1, 2, 2, 6), True, "RELU6")])
def test_tflite_fully_connected(tmp_path, keep, shape, bias, act):
    n = TfGraph()
    x = n.input("x", shape)
    w = n.weights("w", (5, 6))
    b = n.weights("b", (5,)) if bias else None
    rows = int(np.prod(shape)) // 6
    out = (*shape[:-1], 5) if keep else (rows, 5)
    n.node("FullyConnected", [x, w, b], "y", out, activation=act, keep_num_dims=keep)
    check_tflite(tmp_path, n.build(["y"]))


@pytest.mark.parametrize("axes,keep", [([1, 2], True), ([1, 2], False), ([-1], False),
                                       ([0, 3], True)])
def test_tflite_mean(tmp_path, axes, keep):
    n = TfGraph()
    x = n.input("x", (2, 4, 5, 3))
    shape = [d for i, d in enumerate((2, 4, 5, 3)) if i not in [a % 4 for a in axes]]
    if keep:
        shape = [1 if i in [a % 4 for a in axes] else d for i, d in enumerate((2, 4, 5, 3))]
    n.node("Mean", [x, n.const("axes", np.array(axes, np.int32))], "y", shape, keepdims=int(keep))
    check_tflite(tmp_path, n.build(["y"]))


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
def test_tflite_softmax_hard_swish_pad(tmp_path, beta):
    n = TfGraph()
    x = n.input("x", (2, 3, 7))
    s = n.node("Softmax", [x], "s", (2, 3, 7), beta=beta)
    h = n.node("HardSwish", [x], "h", (2, 3, 7))
    pads = n.const("pads", np.array([[0, 1], [2, 0], [1, 3]], np.int32))
    p = n.node("Pad", [h, pads], "p", (3, 5, 11))
    check_tflite(tmp_path, n.build([s, p]), seeds=(0, 1))


@pytest.mark.parametrize("per_channel", [False, True])
def test_tflite_quantize_dequantize(tmp_path, per_channel):
    n = TfGraph()
    x = n.input("x", (2, 3, 4))
    if per_channel:
        q = QuantParams(np.array([0.01, 0.03, 0.02], np.float32), np.array([3, -5, 0]), axis=1)
    else:
        q = QuantParams(np.array([0.02], np.float32), np.array([-7]))
    qt = n.node("Quantize", [x], "q", (2, 3, 4), dtype="int8", quant=q)
    n.node("Dequantize", [qt], "y", (2, 3, 4))
    data = n.build([qt, "y"])
    model = load(tmp_path, data, ".tflite")
    xs = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    xs[0, 0, :3] = np.array([0.5, 1.5, -2.5], np.float32) * 0.02  # ties: away from zero
    xs[1, 2, :2] = [100, -100]  # saturate
    got = run_float(model, {"x": xs})
    compare(litert_run(data, [xs]), [got["q"], got["y"]])


def _hybrid_graph(per_channel: bool, stride, padding):
    n = TfGraph(seed=3)
    h, w, cin, cout = 8, 7, 3, 5
    x = n.input("x", (2, h, w, cin))
    wq = n.rng.integers(-127, 128, (cout, 3, 3, cin)).astype(np.int8)
    scales = (np.linspace(0.01, 0.03, cout) if per_channel else np.full(1, 0.02)).astype(np.float32)
    q = QuantParams(scales, np.zeros(scales.size, np.int64), 0 if per_channel else None)
    wt = n.const("w", wq, q)
    b = n.weights("b", (cout,))
    oh, ow = out_size(h, 3, stride, 1, padding), out_size(w, 3, stride, 1, padding)
    n.node("Conv2D", [x, wt, b], "y", (2, oh, ow, cout),
           **dict(spatial((3, 3), (stride, stride), (1, 1), (h, w), padding, group=1),
                  activation="RELU"))
    return n


@pytest.mark.parametrize("per_channel,stride,padding", [(False, 1, "SAME"), (False, 2, "VALID"),
                                                        (True, 1, "SAME"), (True, 2, "SAME")])
def test_tflite_hybrid_conv(tmp_path, per_channel, stride, padding):
    """int8 weights with a float input: LiteRT quantizes each batch entry on the fly."""
    check_tflite(tmp_path, _hybrid_graph(per_channel, stride, padding).build(["y"]),
                 seeds=(0, 1, 2))


@pytest.mark.parametrize("asymmetric,per_channel", [(False, False), (True, False),
                                                    (False, True), (True, True)])
def test_tflite_hybrid_fully_connected(tmp_path, asymmetric, per_channel):
    n = TfGraph(seed=4)
    x = n.input("x", (3, 20))
    wq = n.rng.integers(-127, 128, (6, 20)).astype(np.int8)
    scales = (np.linspace(0.01, 0.03, 6) if per_channel else np.full(1, 0.02)).astype(np.float32)
    q = QuantParams(scales, np.zeros(scales.size, np.int64), 0 if per_channel else None)
    n.node("FullyConnected", [x, n.const("w", wq, q), n.weights("b", (6,))], "y", (3, 6),
           activation="NONE", keep_num_dims=False, asymmetric_quantize_inputs=asymmetric)
    check_tflite(tmp_path, n.build(["y"]), seeds=(0, 1, 2))


def test_all_ops_sample(tmp_path):
    data = (SAMPLE_MODELS / "all_ops.tflite").read_bytes()
    check_tflite(tmp_path, data, seeds=(0, 1, 2))


# -- whole models ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_shared_float_models(name):
    path = TEST_MODELS / name
    data = path.read_bytes()
    model = load_model(path)
    g = model.graph
    for seed in (0, 1):
        feeds = random_feeds(g, seed)
        got = run_float(model, feeds)
        ref = (ort_run(data, feeds) if name.endswith(".onnx")
               else litert_run(data, [feeds[n] for n in g.inputs]))
        compare(ref, [got[o] for o in g.outputs])


def _pytorch_like():
    spec = importlib.util.spec_from_file_location("pytorch_like",
                                                  ROOT / "bench" / "pytorch_like.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arch,width,resolution", [("resnet50", 0.25, 64),
                                                   ("mobilenet_v2", 0.5, 64)])
def test_pytorch_like_models_with_a_batch(tmp_path, arch, width, resolution):
    module = _pytorch_like()
    proto = getattr(module, arch)(width=width, resolution=resolution)
    data = proto.SerializeToString()
    model = load(tmp_path, data, ".onnx")
    g = model.graph
    feeds = random_feeds(g, 0, batch=4)
    got = run_float(model, feeds)[g.outputs[0]]
    ref = np.concatenate([ort_run(data, {g.inputs[0]: feeds[g.inputs[0]][i:i + 1]})[0]
                          for i in range(4)])
    compare([ref], [got])


# -- batching ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_batch_equals_single_runs(name):
    model = load_model(TEST_MODELS / name)
    g = model.graph
    feeds = random_feeds(g, 3, batch=8)
    batched = run_float(model, feeds)
    for i in range(8):
        single = run_float(model, {k: v[i:i + 1] for k, v in feeds.items()})
        for o in g.outputs:
            assert batched[o].shape[0] == 8
            compare([single[o]], [batched[o][i:i + 1]])  # BLAS blocking differs: rounding


@pytest.mark.parametrize("form", ["new_shape", "shape_input", "minus_one"])
def test_tflite_reshape_with_hard_coded_batch_one(tmp_path, form):
    """Reshape [1, 48] (option or constant) and [1, -1] follow the batch N of the feeds; each
    sample's result equals LiteRT's batch-1 run."""
    n = TfGraph()
    x = n.input("x", (1, 4, 4, 3))
    c = n.node("Conv2D", [x, n.weights("w", (3, 3, 3, 3)), n.weights("b", (3,))], "c",
               (1, 4, 4, 3), **dict(spatial((3, 3), in_hw=(4, 4), padding="SAME", group=1)))
    target = [1, -1] if form == "minus_one" else [1, 48]
    shape = n.const("shape", np.array(target, np.int32))
    if form == "new_shape":  # the IR's spelling of an option-only shape: written as `new_shape`
        n.g.tensors[shape].extra["from_attribute"] = True
    r = n.node("Reshape", [c, shape], "r", (1, 48))
    n.node("FullyConnected", [r, n.weights("fw", (5, 48)), n.weights("fb", (5,))], "y", (1, 5),
           activation="NONE", keep_num_dims=False)
    data = n.build(["y"])
    model = load(tmp_path, data, ".tflite")
    xs = random_inputs([((6, 4, 4, 3), "float32")], 0)[0]
    got = run_float(model, {"x": xs})["y"]
    assert got.shape == (6, 5)
    ref = np.concatenate([litert_run(data, [xs[i:i + 1]])[0] for i in range(6)])
    compare([ref], [got])


def test_onnx_reshape_constant_one_minus_one_follows_the_batch(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("Gemm", ["r", "G"], ["y"], transB=1),
             helper.make_node("Reshape", ["c", "shape2"], ["r2"])]
    data = onnx_bytes(nodes, [vi("x", (1, 2, 3, 3))], [vi("y", None), vi("r2", None)],
                      [("W", _w(4, 2, 3, 3)), ("shape", np.array([1, -1], np.int64)),
                       ("G", _w(5, 36)), ("shape2", np.array([1, 4, 9], np.int64))])
    model = load(tmp_path, data, ".onnx")
    xs = random_inputs([((5, 2, 3, 3), "float32")], 0)[0]
    got = run_float(model, {"x": xs})
    assert got["y"].shape == (5, 5) and got["r2"].shape == (5, 4, 9)
    ref = [np.concatenate(parts) for parts in zip(*[ort_run(data, {"x": xs[i:i + 1]})
                                                    for i in range(5)])]
    compare(ref, [got["y"], got["r2"]])


def test_fixed_batch_above_one_must_be_fed_exactly(tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"])
    model = load(tmp_path, onnx_bytes([node], [vi("x", (2, 3))], [vi("y", None)]), ".onnx")
    run_float(model, {"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(ExecutionError, match="fixed batch of 2"):
        run_float(model, {"x": np.zeros((4, 3), np.float32)})
    with pytest.raises(ExecutionError, match="no feed"):
        run_float(model, {})
    with pytest.raises(ExecutionError, match=r"\[2, 3\]"):
        run_float(model, {"x": np.zeros((2, 4), np.float32)})


def test_run_float_batched_splits_and_concatenates():
    model = load_model(TEST_MODELS / "kws_ref_model_float32.tflite")
    g = model.graph
    feeds = random_feeds(g, 5, batch=10)
    whole = run_float(model, feeds)
    calls = []
    seen = {}
    parts = run_float_batched(model, feeds, 4, observe=lambda n, a: seen.setdefault(n, 0),
                              progress=lambda done, total: calls.append((done, total)))
    assert calls == [(4, 10), (8, 10), (10, 10)]
    for o in g.outputs:
        np.testing.assert_allclose(parts[o], whole[o], rtol=1e-5, atol=1e-7)
    assert set(seen) >= set(g.outputs)


# -- observe, keep, freeing -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["digits_cnn.onnx", "digits_cnn.tflite"])
def test_observe_sees_every_tensor_once(name):
    model = load_model(TEST_MODELS / name)
    g = model.graph
    seen = []
    feeds = random_feeds(g, 0)
    out = run_float(model, feeds, observe=lambda n, a: seen.append((n, a.shape)))
    produced = [o for node in g.nodes for o in node.outputs if o is not None]
    assert [n for n, _ in seen] == list(g.inputs) + produced
    for n, shape in seen:
        declared = g.tensors[n].shape
        assert len(shape) == len(declared)
    kept = run_float(model, feeds, keep=[produced[3], produced[0]])
    assert set(kept) == set(g.outputs) | {produced[3], produced[0]}
    np.testing.assert_array_equal(kept[g.outputs[0]], out[g.outputs[0]])


def test_intermediates_are_freed_after_their_last_reader():
    """When a node's output is observed, every tensor whose last reader ran before is gone."""
    model = load_model(TEST_MODELS / "pretrainedResnet.tflite")
    g = model.graph
    last = {}
    for i, node in enumerate(g.nodes):
        for name in node.present_inputs():
            last[name] = i
    producer = {o: i for i, node in enumerate(g.nodes) for o in node.outputs}
    viewing = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Dropout"}
    refs = {}
    alive_late = []

    def observe(name, array):
        i = producer.get(name, -1)
        gc.collect()
        for other, ref in refs.items():
            if last.get(other, len(g.nodes)) < i and ref() is not None:
                alive_late.append(other)
        readers = [n.op for n in g.nodes if name in n.present_inputs()]
        if name not in g.outputs and name not in g.inputs and not viewing.intersection(readers):
            refs[name] = weakref.ref(array)

    run_float(model, random_feeds(g, 0, batch=2), observe=observe)
    assert len(refs) > 5 and alive_late == []


# -- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,ops", [
    (SAMPLE_MODELS / "opaque_ops.onnx", ["LRN", "Size"]),
    (SAMPLE_MODELS / "unknown_builtin.tflite", ["SLICE", "REVERSE_V2"]),
    (SAMPLE_MODELS / "custom_op.tflite", ["QcvTestCustom"]),
])
def test_unknown_ops_are_all_named(path, ops):
    model = load_model(path)
    with pytest.raises(UnsupportedOpsError) as info:
        run_float(model, random_feeds(model.graph))
    assert isinstance(info.value, QConvertError)
    for op in ops:
        assert op in str(info.value)
    assert sorted(o.split(" ")[0] for o in info.value.ops) == sorted(ops)


def test_a_failing_node_is_named(tmp_path):
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="the_reshape")
    data = onnx_bytes([node], [vi("x", ("N", 6))], [vi("y", None)],
                      [("shape", np.array([4, -1], np.int64))])
    model = load(tmp_path, data, ".onnx")
    with pytest.raises(ExecutionError, match="the_reshape"):
        run_float(model, {"x": np.zeros((3, 6), np.float32)})


# -- details --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,attrs", [
    ("Conv", dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ("Conv", dict(auto_pad="SAME_LOWER", strides=[1, 2])),
    ("MaxPool", dict(auto_pad="SAME_UPPER", kernel_shape=[3, 2], strides=[2, 2])),
    ("AveragePool", dict(auto_pad="SAME_LOWER", kernel_shape=[3, 3], strides=[2, 1])),
])
def test_onnx_same_padding_on_dynamic_sizes_resolved_at_run_time(tmp_path, op, attrs):
    ins, inits = ["x"], []
    if op == "Conv":
        ins.append("W")
        inits.append(("W", _w(4, 3, 3, 3)))
    node = helper.make_node(op, ins, ["y"], **attrs)
    data = onnx_bytes([node], [vi("x", ("N", 3, "H", "W"))], [vi("y", None)], inits)
    model = load(tmp_path, data, ".onnx")
    assert model.graph.nodes[0].attrs["auto_pad"] == attrs["auto_pad"]  # left to the executor
    xs = random_inputs([((2, 3, 9, 8), "float32")], 0)[0]
    got = run_float(model, {"x": xs})
    compare(ort_run(data, {"x": xs}), [got["y"]])


@pytest.mark.parametrize("opset", [11, 13])
def test_onnx_softmax_meaning_of_its_opset_is_in_the_ir(tmp_path, opset):
    """Before opset 13 Softmax flattens from `axis`; the reader spells that in the node
    (`coerce_2d`), so the graph alone (no opset) computes what onnxruntime does."""
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    data = onnx_bytes([node], [vi("x", (2, 3, 4))], [vi("y", None)], opset=opset)
    model = load(tmp_path, data, ".onnx")
    assert bool(model.graph.nodes[0].attrs.get("coerce_2d")) == (opset < 13)
    feeds = random_feeds(model.graph)
    ref = ort_run(data, feeds)
    compare(ref, [run_float(model.graph, feeds)["y"]])
    compare(ref, [run_float(model, feeds)["y"]])


@pytest.mark.parametrize("op,attrs", [
    ("BatchNorm", dict(epsilon=1e-3)),
    ("GlobalAveragePool", {}),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1,
                         count_include_pad=1)),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1)),
    ("Conv2D", dict(kernel_shape=[3, 3], strides=[1, 2], pads=[1, 1, 0, 2], group=2)),
])
def test_nhwc_layout_equals_transposed_nchw(op, attrs):
    """After the layout pass ONNX ops run in NHWC (weights OHWI): the NCHW kernels checked
    against onnxruntime above, transposed."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 8)).astype(np.float32)
    extra = []
    if op == "BatchNorm":
        extra = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
        extra.append(rng.uniform(0.5, 2, 4).astype(np.float32))
    if op == "Conv2D":
        extra = [rng.standard_normal((6, 2, 3, 3)).astype(np.float32),
                 rng.standard_normal(6).astype(np.float32)]
    names = [f"i{i}" for i in range(1 + len(extra))]
    nchw = KERNELS[op](Node(op, names, ["y"], dict(attrs, layout="NCHW")), [x] + extra,
                       ["float32"])[0]
    if op == "Conv2D":
        extra[0] = extra[0].transpose(0, 2, 3, 1)
    nhwc = KERNELS[op](Node(op, names, ["y"], dict(attrs, layout="NHWC")),
                       [x.transpose(0, 2, 3, 1)] + extra, ["float32"])[0]
    compare([nchw.transpose(0, 2, 3, 1)], [nhwc])


def test_kernels_do_not_write_into_their_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    for arr in (x, w):
        arr.flags.writeable = False
    node = Node("Conv2D", ["x", "w"], ["y"], dict(layout="NCHW", group=3, pads=[1, 1, 1, 1]))
    KERNELS["Conv2D"](node, [x, w], ["float32"])
    node = Node("AveragePool", ["x"], ["y"], dict(layout="NCHW", kernel_shape=[2, 2]))
    KERNELS["AveragePool"](node, [x], ["float32"])


# -- fast paths: batched NCHW convolution, depthwise, pools, (de)quantize, in place ----------------
# Sizes chosen to cross the kernels' internal splits: samples multiplied together when the output
# has few positions (fewer than `_GEMM_COLUMNS`), one matmul per sample otherwise; depthwise
# samples shared among worker threads; pools in chunks of samples; (de)quantize in spans of
# `parallel.SPAN` elements.
FAST_CONV_CASES = {
    "pointwise_per_sample": ((3, 16, 40, 40), (24, 16, 1, 1), {}, True),
    "pointwise_grouped_samples": ((5, 16, 12, 12), (24, 16, 1, 1), {}, False),
    "3x3_padded_per_sample": ((3, 8, 33, 35), (12, 8, 3, 3), dict(pads=[1, 2, 0, 1]), True),
    "3x3_padded_grouped_last_alone": ((5, 8, 16, 16), (12, 8, 3, 3), dict(pads=[1, 1, 1, 1]),
                                      True),
    "7x7_stride2_dilated": ((2, 3, 50, 46), (8, 3, 7, 7),
                            dict(strides=[2, 2], dilations=[1, 2], pads=[3, 3, 3, 3]), True),
    "conv1d_batched": ((4, 5, 300), (6, 5, 3), dict(pads=[1, 1], strides=[1]), True),
    "conv3d_batched": ((3, 2, 6, 12, 12), (4, 2, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1]), True),
    "depthwise_stride1": ((3, 6, 20, 22), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1]), True),
    "depthwise_stride2_odd": ((3, 4, 21, 19), (4, 1, 3, 3),
                              dict(group=4, strides=[2, 2], pads=[1, 0, 1, 1]), True),
    "depthwise_stride3_dilated_multiplier": ((2, 3, 23, 25), (6, 1, 3, 2),
                                             dict(group=3, strides=[3, 2], dilations=[2, 3],
                                                  pads=[2, 1, 0, 2]), False),
    "depthwise_5x5_no_pad": ((5, 8, 14, 14), (8, 1, 5, 5), dict(group=8), True),
}


@pytest.mark.parametrize("case", sorted(FAST_CONV_CASES))
def test_onnx_conv_batched_fast_paths(tmp_path, case):
    x, w, attrs, bias = FAST_CONV_CASES[case]
    inits = [("W", _w(*w))] + ([("B", _w(w[0], seed=2))] if bias else [])
    node = helper.make_node("Conv", ["x", "W"] + (["B"] if bias else []), ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", x)], [vi("y", None)], inits), seeds=(0,))


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1)),
])
def test_onnx_pools_over_several_chunks_of_samples(tmp_path, op, attrs):
    """Batches whose output exceeds one chunk (2**19 elements) are pooled chunk by chunk."""
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", (5, 40, 70, 66))], [vi("y", None)]))


@pytest.mark.parametrize("qtype", [I8, U8])
def test_onnx_quantize_dequantize_over_many_spans(tmp_path, qtype):
    """Per-tensor QuantizeLinear / DequantizeLinear of a tensor of several spans, with ties,
    saturation at both ends and infinities, equal to onnxruntime."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 70001)) * 4).astype(np.float32)
    x[0, :8] = np.array([0.25, 0.75, -0.25, 1e30, -1e30, np.inf, -np.inf, 100], np.float32)
    x[2, -3:] = np.array([0.125, -0.125, 0.375], np.float32)
    zero = np.array(-7 if qtype == I8 else 131, np.int8 if qtype == I8 else np.uint8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    data = onnx_bytes(nodes, [vi("x", x.shape)], [vi("q", None, qtype), vi("y", None)],
                      [("s", np.array(0.25, np.float32)), ("z", zero)])
    check_onnx(tmp_path, data, feeds={"x": x})


def _graph(nodes, inputs, outputs, tensors) -> Graph:
    g = Graph()
    for name, shape in tensors.items():
        g.add_tensor(Tensor(name, shape, "float32"))
    g.nodes = nodes
    g.inputs, g.outputs = inputs, outputs
    return g


def test_in_place_ops_write_into_dead_intermediates_only():
    """Relu / Add reuse an input array only when nothing else can see it: a feed, a graph
    output, a tensor with a live view (Reshape) or one an observer holds keep their values."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    shape4 = (2, 3, 4, 4)
    g = _graph([
        Node("Relu", ["x"], ["a"]),                 # reads a feed: never in place
        Node("Mul", ["x", "x"], ["m"]),
        Node("Reshape", ["m", "shape"], ["r"]),     # r is a view of m, alive after the Relu
        Node("Relu", ["m"], ["b"]),                 # m's last reader, but viewed by r
        Node("Add", ["b", "a"], ["c"]),             # b and a dead: in place
        Node("Relu", ["c"], ["out1"]),              # c is also a graph output
    ], ["x"], ["c", "out1", "r"],
        {"x": shape4, "a": shape4, "m": shape4, "r": (2, 3, 16), "b": shape4, "c": shape4,
         "out1": shape4})
    g.add_tensor(Tensor("shape", (3,), "int64", np.array([2, 3, 16], np.int64)))
    x0 = x.copy()
    held = {}
    got = run_float(g, {"x": x}, observe=lambda n, a: held.__setitem__(n, a) if n == "a" else None,
                    check_shapes=False)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(held["a"], np.maximum(x0, 0))
    m = x0 * x0
    c = np.maximum(m, 0) + np.maximum(x0, 0)
    np.testing.assert_array_equal(got["c"], c)
    np.testing.assert_array_equal(got["out1"], np.maximum(c, 0))
    np.testing.assert_array_equal(got["r"], m.reshape(2, 3, 16))


def test_in_place_ops_happen():
    """The must-not test above could pass with no in-place op at all: count the ones done."""
    import qconvert.executor.float_executor as fe

    done = []
    original = dict(fe.IN_PLACE)
    try:
        for op, fn in original.items():
            fe.IN_PLACE[op] = lambda node, x, inputs, fn=fn: done.append(node.op) or fn(node, x,
                                                                                      inputs)
        shape4 = (2, 3, 4, 4)
        g = _graph([Node("Mul", ["x", "x"], ["m"]), Node("Relu", ["m"], ["a"]),
                    Node("Clip", ["a", "", "hi"], ["b"]), Node("Add", ["x", "b"], ["y"])],
                   ["x"], ["y"], {"x": shape4, "m": shape4, "a": shape4, "b": shape4, "y": shape4})
        g.nodes[2].inputs[1] = None
        g.add_tensor(Tensor("hi", (), "float32", np.array(0.5, np.float32)))
        x = np.random.default_rng(1).standard_normal(shape4).astype(np.float32)
        y = run_float(g, {"x": x})["y"]
    finally:
        fe.IN_PLACE.clear()
        fe.IN_PLACE.update(original)
    np.testing.assert_array_equal(y, x + np.minimum(np.maximum(x * x, 0), 0.5))
    assert done == ["Relu", "Clip", "Add"]


@pytest.mark.parametrize("qtype", [I8, U8])
def test_onnx_quantize_dequantize_pair_computed_at_once_is_bit_exact(tmp_path, qtype):
    """x -> QuantizeLinear -> DequantizeLinear -> y with the int8 tensor read by nothing else
    runs as one fused step: bit for bit onnxruntime's result, and the int8 tensor is not made
    (not observed). With the int8 tensor also an output, both kernels run."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 170, 201)) * 6).astype(np.float32)
    flat = x.reshape(-1)
    flat[:9] = np.array([0.05, 0.15, -0.05, -0.15, 0.25, 1e30, -1e30, np.inf, -np.inf],
                        np.float32)
    zero = np.array(5 if qtype == I8 else 120, np.int8 if qtype == I8 else np.uint8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
             helper.make_node("Relu", ["y"], ["r"])]
    inits = [("s", np.array(0.1, np.float32)), ("z", zero)]
    fused = onnx_bytes(nodes, [vi("x", x.shape)], [vi("r", None)], inits)
    both = onnx_bytes(nodes, [vi("x", x.shape)], [vi("r", None), vi("q", None, qtype)], inits)
    seen = []
    got = run_float(load(tmp_path, fused, ".onnx"), {"x": x}, observe=lambda n, a: seen.append(n))
    assert "q" not in seen and "y" in seen
    np.testing.assert_array_equal(got["r"], ort_run(fused, {"x": x})[0])
    unfused = run_float(load(tmp_path, both, ".onnx"), {"x": x})
    np.testing.assert_array_equal(got["r"], unfused["r"])
    np.testing.assert_array_equal(unfused["q"], ort_run(both, {"x": x})[1])


def test_work_shared_among_threads_covers_every_item_once_and_raises_errors():
    """`parallel.on_workers`: each item exactly once whatever thread takes it, a nested call
    from inside a worker completes (no waiting on the pool from the pool), errors reach the
    caller."""
    from qconvert.executor.parallel import on_workers

    seen = np.zeros(1000, np.int64)

    def run(items):
        for i in items:
            seen[i] += 1
            if i % 100 == 0:
                on_workers(lambda inner: [None for _ in inner], range(3))

    on_workers(run, range(1000))
    np.testing.assert_array_equal(seen, np.ones(1000, np.int64))

    def fail(items):
        for i in items:
            if i == 7:
                raise ValueError("item 7")

    with pytest.raises(ValueError, match="item 7"):
        on_workers(fail, range(20))
