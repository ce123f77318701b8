"""The float kernels (`qconvert.executor.float_kernels`), op by op, against independent runtimes
only: onnxruntime with its graph optimizations disabled for ONNX, LiteRT with the reference op
resolver for TFLite. Per-op models are built with onnx.helper or written from hand-built IR by
the TFLite writer (helpers in `float_op_checks`)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.oracles import SAMPLE_MODELS
from helpers.float_op_checks import (I8, U8, TfGraph, check_onnx, check_tflite, compare, randn,
                                     litert_run, load, onnx_bytes, out_size, spatial, vi)
from qconvert.executor.float_executor import run_float
from qconvert.ir import QuantParams


# -- ONNX ops against onnxruntime -------------------------------------------------------------------
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
    inits = [("W", randn(*w))] + ([("B", randn(w[0], seed=2))] if bias else [])
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
                      [("W", randn(*w)), ("B", randn(cout, seed=2))])
    check_onnx(tmp_path, data)


@pytest.mark.parametrize("attrs,a,b,c", [
    ({}, (3, 5), (5, 4), (4,)),
    (dict(transB=1, alpha=0.5, beta=2.0), (3, 5), (4, 5), (3, 1)),
    (dict(transA=1, transB=1), (5, 3), (4, 5), (3, 4)),
    (dict(transA=1, beta=0.0), (5, 3), (5, 4), (4,)),
    ({}, (2, 6), (6, 3), None),
])
def test_onnx_gemm(tmp_path, attrs, a, b, c):
    inits = [("B", randn(*b))] + ([("C", randn(*c, seed=3))] if c else [])
    node = helper.make_node("Gemm", ["a", "B"] + (["C"] if c else []), ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("a", a)], [vi("y", None)], inits))


@pytest.mark.parametrize("a,b", [((3, 5), (5, 4)), ((2, 3, 5), (5, 4)), ((2, 1, 3, 5), (3, 5, 2)),
                                 ((5,), (5, 4)), ((2, 3, 5), (5,))])
def test_onnx_matmul(tmp_path, a, b):
    node = helper.make_node("MatMul", ["a", "B"], ["y"])
    check_onnx(tmp_path, onnx_bytes([node], [vi("a", a)], [vi("y", None)], [("B", randn(*b))]))


@pytest.mark.parametrize("shape", [(2, 4, 5, 5), (3, 4), (2, 4, 6)])
def test_onnx_batchnorm(tmp_path, shape):
    c = shape[1]
    rng = np.random.default_rng(4)
    inits = [("s", randn(c)), ("b", randn(c, seed=5)), ("m", randn(c, seed=6)),
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
    "pool3d": ((1, 2, 5, 7, 6), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2],
                                     pads=[0, 1, 1, 1, 1, 0])),
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


def test_onnx_and_tflite_abs(tmp_path):
    x = 4 * np.random.default_rng(0).standard_normal((3, 50)).astype(np.float32)
    x[0, :3] = [0.0, -0.0, -2.5]
    check_onnx(tmp_path, onnx_bytes([helper.make_node("Abs", ["x"], ["y"])], [vi("x", x.shape)],
                                    [vi("y", None)], opset=13), feeds={"x": x})
    n = TfGraph()
    n.node("Abs", [n.input("x", (2, 3, 7))], "y", (2, 3, 7))
    check_tflite(tmp_path, n.build(["y"]), seeds=(0, 1))


def test_tflite_squared_difference_with_broadcast(tmp_path):
    n = TfGraph()
    a = n.input("a", (2, 3, 7))
    b = n.input("b", (3, 1))
    n.node("SquaredDifference", [a, b], "y", (2, 3, 7))
    check_tflite(tmp_path, n.build(["y"]), seeds=(0, 1))


def test_tflite_slice_reverse_pack(tmp_path):
    n = TfGraph()
    x = n.input("x", (2, 5, 6, 3))
    sl = n.node("SliceBySize", [x, n.const("b", np.asarray([0, 1, 2, 0], np.int32)),
                                n.const("s", np.asarray([-1, 3, -1, 2], np.int32))], "sl",
                (2, 3, 4, 2))
    rv = n.node("Reverse", [sl, n.const("ax", np.asarray([3, 2], np.int32))], "rv", (2, 3, 4, 2))
    n.node("Pack", [sl, rv], "pk", (2, 2, 3, 4, 2), axis=1, values_count=2)
    check_tflite(tmp_path, n.build(["pk", "rv"]), seeds=(0, 1))


def test_tflite_unpack(tmp_path):
    from qconvert.ir import Node, Tensor

    n = TfGraph()
    x = n.input("x", (2, 3, 4))
    names = [f"u{k}" for k in range(4)]
    for name in names:
        n.g.add_tensor(Tensor(name, (2, 3), "float32"))
    n.g.nodes.append(Node("Unpack", [x], names, {"axis": -1, "num": 4}, names[0]))
    check_tflite(tmp_path, n.build(names), seeds=(0, 1))


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


@pytest.mark.parametrize("qtype,axis", [(I8, 0), (U8, 0), (I8, 1), (I8, -1)])
def test_onnx_dequantize_large_weights_per_axis(tmp_path, qtype, axis):
    """A conv layer's per-channel int8 / uint8 weights along each axis, zero points mixed:
    onnxruntime's values, and bit for bit (q - z) * s in float32."""
    from qconvert.executor.float_kernels_quant import dequantize
    from qconvert.ir.node import Node

    shape = (300, 64, 3, 3)
    n = shape[axis]
    rng = np.random.default_rng(11)
    dtype = np.int8 if qtype == I8 else np.uint8
    q = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, shape).astype(dtype)
    scale = rng.uniform(1e-4, 0.05, n).astype(np.float32)
    zero = rng.integers(0, 9, n).astype(dtype)
    zero[::3] = 0
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis)
    check_onnx(tmp_path, onnx_bytes([node], [], [vi("y", None)],
                                    [("q", q), ("s", scale), ("z", zero)]), feeds={})
    ours = dequantize(Node("Dequantize", ["q", "s", "z"], ["y"], attrs={"axis": axis}),
                      [q, scale, zero], [np.float32])[0]
    along = [1] * q.ndim
    along[axis] = n
    whole = (q.astype(np.float32) - zero.reshape(along).astype(np.float32)) * scale.reshape(along)
    assert ours.dtype == np.float32 and np.array_equal(ours, whole)
