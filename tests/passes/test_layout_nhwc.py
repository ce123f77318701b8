"""ONNX -> TFLite with the NCHW -> NHWC layout pass, op by op: the ONNX model in onnxruntime
(graph optimizations off) and the written .tflite in LiteRT (reference kernels) agree within
1e-4 relative on random inputs, the TFLite data being the ONNX data transposed as
`convert_onnx_to_tflite` says. Also: which TFLite ops come out (no TRANSPOSE where none is needed),
the input layout option, and every case that must be refused, all problems in one error."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from helpers.onnx_layout_checks import conversion_of, convert, ops, refusal
from helpers.oracles import OnnxNet
from qconvert.errors import QConvertError
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes.onnx_to_tflite.convert import convert_onnx_to_tflite

F = TensorProto.FLOAT


Net = OnnxNet


# -- convolutions --------------------------------------------------------------------------------

@pytest.mark.parametrize("size,attrs,pad_op", [
    (8, dict(pads=[1, 1, 1, 1]), False),                          # TFLite SAME
    (8, dict(pads=[1, 1, 1, 1], strides=[2, 2]), True),           # PyTorch stride 2: PAD
    (9, dict(pads=[1, 1, 1, 1], strides=[2, 2]), False),          # odd size: SAME again
    (8, dict(pads=[0, 1, 2, 1]), True),                           # asymmetric
    (8, dict(auto_pad="SAME_UPPER", strides=[2, 2]), False),
    (8, dict(auto_pad="SAME_LOWER", strides=[2, 2]), True),
    (9, dict(pads=[2, 2, 2, 2], dilations=[2, 2]), False),        # dilated SAME
    (8, dict(pads=[0, 0, 0, 0], strides=[2, 1]), False),          # VALID
])
def test_conv_padding(tmp_path, size, attrs, pad_op):
    n = Net()
    x = n.input("x", [1, 3, size, size])
    n.conv(x, 3, 5, "y", **attrs)
    conversion = conversion_of(tmp_path, n.build(["y"]))
    assert ops(conversion.model) == (["Pad"] if pad_op else []) + ["Conv2D"]
    assert conversion.output_perms["y"] == (0, 2, 3, 1)  # a 4-D output stays NHWC


@pytest.mark.parametrize("mult,bias", [(1, True), (2, False), (3, True)])
def test_depthwise_with_multiplier(tmp_path, mult, bias):
    n = Net()
    x = n.input("x", [1, 4, 7, 7])
    n.conv(x, 4, 4 * mult, "y", group=4, bias=bias, pads=[1, 1, 1, 1], strides=[2, 2])
    tfl = convert(tmp_path, n.build(["y"]))
    dw = next(node for node in tfl.graph.nodes if node.op == "DepthwiseConv2D")
    assert dw.attrs["depth_multiplier"] == mult
    assert tfl.graph.tensors[dw.inputs[1]].shape == (1, 3, 3, 4 * mult)
    assert len(dw.inputs) == 3  # TFLite Micro's depthwise kernels need a bias


def test_conv_batchnorm_relu6_fused(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 8, 8])
    c = n.conv(x, 3, 6, "c", bias=False, pads=[1, 1, 1, 1])
    bn = n.node("BatchNormalization", [c, n.rand("g", 6), n.rand("b", 6), n.rand("m", 6),
                                       n.rand("v", 6, positive=True)], "bn")
    n.node("Clip", [bn, n.const("lo", np.float32(0)), n.const("hi", np.float32(6))], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["Conv2D"] and tfl.graph.nodes[0].attrs["activation"] == "RELU6"


# -- pools ---------------------------------------------------------------------------------------

MAX_3X3_S2_P1 = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


@pytest.mark.parametrize("op,size,attrs,expect", [
    ("MaxPool", 8, MAX_3X3_S2_P1, ["Gather", "Gather", "MaxPool"]),  # borders repeated
    ("MaxPool", 8, dict(kernel_shape=[2, 2], strides=[2, 2]), ["MaxPool"]),
    ("MaxPool", 8, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), ["MaxPool"]),  # SAME
    ("MaxPool", 8, dict(MAX_3X3_S2_P1, ceil_mode=1), ["Gather", "Gather", "MaxPool"]),
    ("MaxPool", 7, dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]), ["MaxPool"]),
    ("AveragePool", 8, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), ["AveragePool"]),
    ("AveragePool", 8, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            count_include_pad=1), ["Pad", "AveragePool"]),
    ("AveragePool", 8, dict(kernel_shape=[2, 2], strides=[2, 2]), ["AveragePool"]),
    ("GlobalAveragePool", 5, {}, ["AveragePool"]),
])
def test_pools(tmp_path, op, size, attrs, expect):
    n = Net()
    x = n.input("x", [1, 3, size, size])
    n.node(op, [x], "y", **attrs)
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == expect


@pytest.mark.parametrize("before,pad", [("Relu", "Pad"), ("Tanh", "PadV2"),
                                        ("Sigmoid", "Pad")])
def test_max_pool_pads_with_the_lowest_value_its_input_can_take(tmp_path, before, pad):
    n = Net()
    x = n.input("x", [1, 3, 8, 8])
    a = n.node(before, [x], "a")
    n.node("MaxPool", [a], "y", **MAX_3X3_S2_P1)
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == [before, pad, "MaxPool"]
    if pad == "PadV2":
        assert tfl.graph.tensors[tfl.graph.nodes[1].inputs[2]].data.tolist() == [-1.0]


# -- flatten, reshape, fully connected ---------------------------------------------------------

def test_flatten_of_feature_map_permutes_fc_weights(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.conv(x, 3, 4, "c", pads=[1, 1, 1, 1])
    f = n.node("Flatten", [c], "f")
    r = n.node("Relu", [f], "r")  # an elementwise op between keeps the column order
    n.node("Gemm", [r, n.rand("w", 10, 144), n.rand("b", 10)], "y", transB=1)
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["Conv2D", "Reshape", "Relu", "FullyConnected"]


@pytest.mark.parametrize("shape_const", [[1, -1], [0, 144]])
def test_reshape_then_matmul_add(tmp_path, shape_const):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.conv(x, 3, 4, "c", pads=[1, 1, 1, 1])
    r = n.node("Reshape", [c, n.const("s", np.array(shape_const, np.int64))], "r")
    m = n.node("MatMul", [r, n.rand("w", 144, 7)], "m")
    n.node("Add", [m, n.rand("b", 7)], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert "Transpose" not in ops(tfl) and ops(tfl)[-1] == "FullyConnected"


def test_permute_then_flatten_needs_no_transpose(tmp_path):
    """PyTorch `x.permute(0, 2, 3, 1).flatten(1)`: the permute is the NHWC layout itself."""
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    c = n.conv(x, 3, 4, "c", pads=[1, 1, 1, 1])
    t = n.node("Transpose", [c], "t", perm=[0, 2, 3, 1])
    f = n.node("Flatten", [t], "f")
    n.node("Gemm", [f, n.rand("w", 100, 6), n.rand("b", 6)], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["Conv2D", "Reshape", "FullyConnected"]


def test_transposes_that_meet_cancel(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    t1 = n.node("Transpose", [x], "t1", perm=[0, 2, 3, 1])
    t2 = n.node("Transpose", [t1], "t2", perm=[0, 3, 1, 2])
    n.conv(t2, 3, 4, "y", pads=[1, 1, 1, 1])
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["Conv2D"]


def test_gemm_variants(tmp_path):
    n = Net()
    x = n.input("x", [2, 6])
    g1 = n.node("Gemm", [x, n.rand("w1", 6, 5), n.rand("c1", 2, 5)], "g1", alpha=0.5, beta=2.0)
    g2 = n.node("Gemm", [g1, n.rand("w2", 4, 5), n.rand("c2", 1, 4)], "g2", transB=1, beta=0.5)
    n.node("Gemm", [g2, n.rand("w3", 2, 3)], "y", transA=1)  # transA: A' is [4, 2]
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl).count("FullyConnected") == 3


def test_matmul_on_3d_input_keeps_dims(tmp_path):
    n = Net()
    x = n.input("x", [1, 5, 6])
    n.node("MatMul", [x, n.rand("w", 6, 4)], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["FullyConnected"] and tfl.graph.nodes[0].attrs["keep_num_dims"]


# -- axis ops ------------------------------------------------------------------------------------

def test_concat_softmax_reduce_on_channels(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    a = n.conv(x, 3, 4, "a", pads=[1, 1, 1, 1])
    b = n.conv(x, 3, 2, "b", k=1)
    cat = n.node("Concat", [a, b, n.rand("k", 1, 2, 6, 6)], "cat", axis=1)
    sm = n.node("Softmax", [cat], "sm", axis=1)
    n.node("ReduceMean", [sm], "m1", axes=[2, 3], keepdims=0)
    n.node("ReduceMean", [sm], "m2", axes=[1], keepdims=1)
    tfl = convert(tmp_path, n.build(["m1", "m2"]))
    concat = next(node for node in tfl.graph.nodes if node.op == "Concat")
    assert concat.attrs["axis"] == 3 and "Transpose" not in ops(tfl)
    assert tfl.graph.nodes[-2].op == "Mean"


@pytest.mark.parametrize("op,axes,keep,expect", [
    ("ReduceMax", [2, 3], 0, "Reshape"), ("ReduceMax", [-2, -1], 1, "MaxPool"),
    ("ReduceSum", [1], 1, "ReduceSum"), ("ReduceMax", [1, 3], 1, "ReduceMax"),
    ("ReduceMean", None, 0, "Mean")])
def test_reductions(tmp_path, op, axes, keep, expect):
    n = Net()
    x = n.input("x", [1, 3, 4, 5])
    c = n.conv(x, 3, 2, "c", k=1)
    if op == "ReduceSum":  # opset 13: axes as an input; the others: an attribute until 18
        n.node(op, [c, n.const("axes", np.array(axes, np.int64))], "y", keepdims=keep)
    else:
        n.node(op, [c], "y", keepdims=keep, **({} if axes is None else {"axes": axes}))
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl)[0] == "Conv2D" and ops(tfl)[-1] == expect
    assert ("MaxPool" in ops(tfl)) == (op == "ReduceMax" and axes != [1, 3])


def test_global_max_pool(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 4, 5])
    g = n.node("GlobalMaxPool", [x], "g")
    n.node("Flatten", [g], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["MaxPool", "Reshape"]


def test_softmax_over_a_spatial_axis_transposes(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 4, 5])
    c = n.conv(x, 3, 2, "c", k=1)
    n.node("Softmax", [c], "y", axis=2)
    conversion = conversion_of(tmp_path, n.build(["y"]))
    assert "Transpose" in ops(conversion.model) and conversion.transposes


@pytest.mark.parametrize("value", [None, 1.5])
def test_pad(tmp_path, value):
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    c = n.conv(x, 3, 4, "c", k=1)
    ins = [c, n.const("p", np.array([0, 0, 1, 2, 0, 1, 2, 0], np.int64))]
    if value is not None:
        ins.append(n.const("v", np.array(value, np.float32)))
    n.node("Pad", ins, "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl)[-1] == ("Pad" if value is None else "PadV2")


def test_squeeze_excite_block(tmp_path):
    """GAP -> Squeeze -> FC -> Relu -> FC -> HardSigmoid -> Unsqueeze -> Mul with the map."""
    n = Net()
    x = n.input("x", [1, 8, 5, 5])
    c = n.conv(x, 8, 8, "c", pads=[1, 1, 1, 1])
    gap = n.node("GlobalAveragePool", [c], "gap")
    sq = n.node("Squeeze", [gap, n.const("axes", np.array([2, 3], np.int64))], "sq")
    f1 = n.node("Gemm", [sq, n.rand("w1", 4, 8), n.rand("b1", 4)], "f1", transB=1)
    r = n.node("Relu", [f1], "r")
    f2 = n.node("Gemm", [r, n.rand("w2", 8, 4), n.rand("b2", 8)], "f2", transB=1)
    hs = n.node("HardSigmoid", [f2], "hs", alpha=1.0 / 6.0)
    us = n.node("Unsqueeze", [hs, n.const("axes2", np.array([2, 3], np.int64))], "us")
    n.node("Mul", [c, us], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert "Transpose" not in ops(tfl)


def test_slice_and_gather(tmp_path):
    n = Net()
    x = n.input("x", [1, 6, 8, 8])
    c = n.conv(x, 6, 6, "c", k=1)
    s = n.node("Slice", [c, n.const("st", np.array([1, 7], np.int64)),
                         n.const("en", np.array([5, 0], np.int64)),
                         n.const("ax", np.array([1, 3], np.int64)),
                         n.const("sp", np.array([2, -2], np.int64))], "s")
    n.node("Gather", [s, n.const("i", np.array([1, 0, 1], np.int64))], "y", axis=2)
    tfl = convert(tmp_path, n.build(["y"]))
    assert "StridedSlice" in ops(tfl) and "Gather" in ops(tfl)


# -- elementwise and activations -----------------------------------------------------------------

@pytest.mark.parametrize("op,shape", [("Add", (4, 1, 1)), ("Mul", (1, 4, 1, 1)), ("Sub", ()),
                                      ("Div", (4, 1, 1)), ("Add", (5,)), ("Mul", (5, 1)),
                                      ("Sub", (1, 1, 5, 5))])
def test_elementwise_constants_follow_the_layout(tmp_path, op, shape):
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    c = n.conv(x, 3, 4, "c", k=1)
    p = n.node("MaxPool", [c], "p", kernel_shape=[1, 1])  # keeps the op from folding into c
    k = n.const("k", (np.abs(np.random.default_rng(1).standard_normal(shape)) + 0.5)
                .astype(np.float32))
    n.node(op, [k, p] if op == "Sub" else [p, k], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert "Transpose" not in ops(tfl) and "Div" not in ops(tfl)


def test_elementwise_broadcast_between_activations(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    v = n.input("v", [5])  # broadcasts along W
    c = n.conv(x, 3, 4, "c", k=1)
    gap = n.node("GlobalAveragePool", [c], "gap")
    a = n.node("Add", [c, gap], "a")
    n.node("Mul", [a, v], "y")
    convert(tmp_path, n.build(["y"]))


@pytest.mark.parametrize("lo,hi,expect", [(0.0, 6.0, "Relu6"), (0.0, None, "Relu"),
                                          (-1.0, 1.0, "Minimum"), (-2.0, 3.0, "Minimum"),
                                          (None, 0.5, "Minimum"), (-0.5, None, "Maximum")])
def test_clip_after_a_non_layer(tmp_path, lo, hi, expect):
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    a = n.node("MaxPool", [x], "a", kernel_shape=[2, 2])  # no fused activation in TFLite
    bounds = [n.const("lo", np.float32(lo)) if lo is not None else "",
              n.const("hi", np.float32(hi)) if hi is not None else ""]
    n.node("Clip", [a] + bounds, "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl)[-1] == expect and "Clip" not in ops(tfl)


@pytest.mark.parametrize("lo,hi,fused", [(0.0, 6.0, "RELU6"), (0.0, None, "RELU"),
                                         (-1.0, 1.0, "RELU_N1_TO_1")])
def test_clip_after_an_add_becomes_its_fused_activation(tmp_path, lo, hi, fused):
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    a = n.node("Add", [x, n.rand("k", 3, 1, 1)], "a")
    bounds = [n.const("lo", np.float32(lo)) if lo is not None else "",
              n.const("hi", np.float32(hi)) if hi is not None else ""]
    n.node("Clip", [a] + bounds, "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["Add"] and tfl.graph.nodes[0].attrs["activation"] == fused


def test_activations(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    c = n.conv(x, 3, 4, "c", k=1)
    hs = n.node("HardSigmoid", [c], "hs", alpha=1.0 / 6.0, beta=0.5)
    hw = n.node("Mul", [c, hs], "hw")  # PyTorch's hardswish before opset 14
    h2 = n.node("HardSwish", [hw], "h2")
    h3 = n.node("HardSigmoid", [h2], "h3", alpha=0.3, beta=0.4)
    s = n.node("Sigmoid", [h3], "s")
    n.node("Tanh", [s], "y")
    tfl = convert(tmp_path, n.build(["y"], opset=14))
    assert ops(tfl).count("HardSwish") == 2 and "HardSigmoid" not in ops(tfl)


def test_unfused_batchnorm_becomes_mul_add(tmp_path):
    n = Net()
    x = n.input("x", [1, 4, 6, 6])
    p = n.node("MaxPool", [x], "p", kernel_shape=[2, 2], strides=[2, 2])
    n.node("BatchNormalization", [p, n.rand("g", 4), n.rand("b", 4), n.rand("m", 4),
                                  n.rand("v", 4, positive=True)], "y")
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["MaxPool", "Mul", "Add"]
    assert tfl.graph.tensors[tfl.graph.nodes[1].inputs[1]].shape == (4,)


def test_cancel_transposes_pass(tmp_path):
    """Transpose -> Transpose composes (here to the identity, then removed); a transpose moving
    only size-1 axes becomes a reshape; LiteRT gives the same outputs bit for bit."""
    from helpers.oracles import run_litert
    from qconvert.ir import Graph, Model, Node, Tensor
    from qconvert.passes import PassContext, run_passes

    g = Graph("g", inputs=["x", "z"], outputs=["y", "w"])
    for name, shape in (("x", (1, 4, 5, 6)), ("t1", (1, 5, 6, 4)), ("t2", (1, 4, 5, 6)),
                        ("y", (1, 4, 5, 6)), ("z", (1, 1, 5, 1)), ("w", (1, 1, 5, 1))):
        g.add_tensor(Tensor(name, shape, "float32"))
    for name, perm in (("p1", [0, 2, 3, 1]), ("p2", [0, 3, 1, 2]), ("p3", [0, 3, 2, 1])):
        data = np.array(perm, np.int32)
        g.add_tensor(Tensor(name, data.shape, "int32", data))
    g.nodes = [Node("Transpose", ["x", "p1"], ["t1"], {}, "t1"),
               Node("Transpose", ["t1", "p2"], ["t2"], {}, "t2"),
               Node("Relu", ["t2"], ["y"], {}, "y"),
               Node("Transpose", ["z", "p3"], ["w"], {}, "w")]
    model = Model("tflite", [g], {"version": 3})
    before = serialize(model)
    counts = run_passes(model, ["cancel-transposes", "eliminate"], PassContext("tflite"))
    assert counts["cancel-transposes"] == 2 and ops(model) == ["Relu", "Reshape"]
    after = serialize(model)
    for seed in (0, 1):
        for a, b in zip(run_litert(before, seed), run_litert(after, seed)):
            np.testing.assert_array_equal(a, b)


# -- inputs and outputs --------------------------------------------------------------------------

def test_input_layout_nchw_transposes_after_the_input(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    n.conv(x, 3, 4, "y", pads=[1, 1, 1, 1])
    conversion = conversion_of(tmp_path, n.build(["y"]), input_layout="nchw")
    graph = conversion.model.graph
    assert graph.tensors["x"].shape == (1, 3, 6, 6) and graph.tensors["y"].shape == (1, 4, 6, 6)
    first = graph.nodes[0]
    assert first.op == "Transpose" and first.inputs[0] == "x"
    assert graph.tensors[first.inputs[1]].data.tolist() == [0, 2, 3, 1]
    assert len(conversion.transposes) == 2  # after the input, before the output


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_outputs_in_every_layout_keep_their_names(tmp_path, layout):
    """A conv output, its flatten, a transpose of it, a copy of the input, and one more op."""
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    c = n.conv(x, 3, 4, "c", k=1)
    n.node("Flatten", [c], "f")
    n.node("Transpose", [c], "t", perm=[0, 3, 2, 1])
    n.node("Identity", [x], "i")
    n.node("Relu", [c], "r")
    conversion = conversion_of(tmp_path, n.build(["c", "f", "t", "i", "r"]), input_layout=layout)
    assert conversion.model.graph.outputs == ["c", "f", "t", "i", "r"]
    nhwc = (0, 2, 3, 1) if layout == "nhwc" else (0, 1, 2, 3)
    assert conversion.output_perms == {"c": nhwc, "f": (0, 1), "t": (0, 1, 2, 3),
                                       "i": nhwc, "r": nhwc}


def test_one_value_as_two_outputs(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 5, 5])
    c = n.conv(x, 3, 4, "c", k=1)
    n.node("Identity", [c], "a")
    n.node("Identity", [c], "b")
    tfl = convert(tmp_path, n.build(["a", "b"]))
    assert tfl.graph.outputs == ["a", "b"] and ops(tfl) == ["Conv2D", "Reshape"]


def test_dynamic_batch_and_shape_arithmetic_fold(tmp_path):
    """torch's dynamic-batch flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    n = Net()
    x = n.input("x", ["N", 3, 4, 4])
    c = n.conv(x, 3, 2, "c", pads=[1, 1, 1, 1])
    sh = n.node("Shape", [c], "sh")
    g = n.node("Gather", [sh, n.const("zero", np.array(0, np.int64))], "g", axis=0)
    u = n.node("Unsqueeze", [g, n.const("ax0", np.array([0], np.int64))], "u")
    cat = n.node("Concat", [u, n.const("minus1", np.array([-1], np.int64))], "cat", axis=0)
    r = n.node("Reshape", [c, cat], "r")
    n.node("Gemm", [r, n.rand("w", 5, 32), n.rand("b", 5)], "y", transB=1)
    tfl = convert(tmp_path, n.build(["y"]))
    assert ops(tfl) == ["Conv2D", "Reshape", "FullyConnected"]
    assert tfl.graph.tensors["x"].shape == (1, 4, 4, 3)


def test_input_model_is_not_changed(tmp_path):
    path = tmp_path / "m.onnx"
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.conv(x, 3, 4, "c", pads=[1, 1, 1, 1])
    n.node("Relu", [c], "y")
    path.write_bytes(n.build(["y"]))
    model = load_model(path)
    before = serialize(model)
    tfl = convert_onnx_to_tflite(model).model
    assert serialize(model) == before and model.format == "onnx" and tfl.format == "tflite"


# -- what is refused -----------------------------------------------------------------------------

def test_dynamic_non_batch_dimension_is_refused(tmp_path):
    n = Net()
    x = n.input("x", ["N", 3, "H", 8])
    n.conv(x, 3, 4, "y", pads=[1, 1, 1, 1])
    message = refusal(tmp_path, n.build(["y"]))
    assert "dynamic shapes: input 'x'" in message and "dimension 2" in message


def test_non_constant_weights_are_refused(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 8, 8])
    w = n.input("w", [4, 3, 3, 3])
    n.node("Conv", [x, w], "y", kernel_shape=[3, 3])
    message = refusal(tmp_path, n.build(["y"]))
    assert "non-constant weights" in message and "'w'" in message


def test_unmapped_op_is_refused(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 8, 8])
    n.node("LRN", [x], "y", size=3)
    assert "ops with no TFLite mapping: LRN" in refusal(tmp_path, n.build(["y"]))


def test_every_problem_is_listed_at_once(tmp_path):
    n = Net()
    x = n.input("x", ["N", 4, "H", "W"])
    w = n.input("w", [4, 4, 1, 1])
    n.node("ConvTranspose", [x, n.rand("tw", 4, 3, 3, 3)], "a", kernel_shape=[3, 3], group=2)
    b = n.node("Conv", [x, w], "b", kernel_shape=[1, 1])
    r = n.node("Resize", [b, "", n.const("sc", np.array([1, 1, 2, 2], np.float32))], "r",
               mode="cubic")
    n.node("LRN", [r], "l", size=3)
    message = refusal(tmp_path, n.build(["a", "l"]))
    for part in ("dynamic shapes", "dimension 2, 3", "non-constant weights",
                 "ConvTranspose 'a_node' (group 2", "Resize 'r_node' (mode cubic)",
                 "ops with no TFLite mapping: LRN"):
        assert part in message, part


def test_quantized_onnx_is_refused(tmp_path):
    n = Net()
    x = n.input("x", [1, 3])
    q = n.node("QuantizeLinear", [x, n.const("s", np.float32(0.1)),
                                  n.const("z", np.int8(0))], "q")
    n.node("DequantizeLinear", [q, "s", "z"], "y")
    path = tmp_path / "q.onnx"
    path.write_bytes(n.build(["y"]))
    with pytest.raises(QConvertError, match="only float models convert"):
        convert_onnx_to_tflite(load_model(path))
