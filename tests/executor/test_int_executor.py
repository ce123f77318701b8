"""The integer reference executor against TFLite Micro's reference kernels: bit for bit.

Oracle: the `tflite-micro` Python interpreter (reference kernels). Whole models (every
intermediate tensor made a graph output, so each layer is compared, not only the last), batches
against one-sample-at-a-time TFLM runs, and one small int8 model per op built from the IR,
with edge cases (extreme zero points, per-tensor FC, fused RELU / RELU6 clamps, asymmetric SAME
pads, saturated softmax rows, exhaustive int8 inputs for the elementwise functions).

`layer_params` (TFLite Micro's Prepare-time multipliers and shifts) is checked in
`test_int_layer_params.py`.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS, random_inputs, tflm_invoke
from helpers.float_op_checks import TfGraph
from helpers.int8_models import (CONV, INT8_MODELS, Q8, all_int8_values, assert_same,
                                 int8_feeds, movement_model, tflm)
from qconvert.errors import QConvertError
from qconvert.executor.int_executor import run_int8
from qconvert.executor.int_kernels import INT_KERNELS
from qconvert.int8.multipliers import mean_multiplier
from qconvert.ir import Graph, Model, QuantParams
from qconvert.formats.model_io import load_model, serialize
from qconvert.padding import same_pads
from qconvert.formats.tflite_reader import read_tflite

# -- whole models ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", INT8_MODELS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_models_every_layer_bit_exact(path):
    model = load_model(path)
    g = model.graph
    g.outputs = [o for n in g.nodes for o in n.outputs]  # TFLM keeps graph outputs intact
    data = serialize(model)
    details = [(g.tensors[n].shape, g.tensors[n].dtype) for n in g.inputs]
    feeds = []
    for seed in range(3):
        arrays = random_inputs(details, seed)
        feeds.append(dict(zip(g.inputs, arrays)))
    g = assert_same(data, feeds)
    # the outputs are not degenerate (the comparison means something)
    last = run_int8(g, feeds[0])[g.outputs[-1]]
    assert len(np.unique(last)) > 1


@pytest.mark.parametrize("path", INT8_MODELS[:2], ids=lambda p: p.name)
def test_batch_of_inputs_equals_tflm_one_at_a_time(path):
    model = load_model(path)
    g = model.graph
    x_name = g.inputs[0]
    shape = (6,) + tuple(g.tensors[x_name].shape[1:])
    x = np.random.default_rng(7).integers(-128, 128, shape).astype(np.int8)
    got = run_int8(model, {x_name: x})[g.outputs[0]]
    data = path.read_bytes()
    ref = np.concatenate([tflm(data, [x[i:i + 1]])[0] for i in range(len(x))])
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("path", INT8_MODELS[:2], ids=lambda p: p.name)
def test_runs_sharing_their_parameters_equal_tflm(path):
    """Runs of one graph that share `params` (the report's frames) derive each node's
    Prepare-time parameters once and give TFLite Micro's bits on every run."""
    model = load_model(path)
    g = model.graph
    x_name = g.inputs[0]
    shape = (1,) + tuple(g.tensors[x_name].shape[1:])
    params: dict = {}
    data = path.read_bytes()
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)
        got = run_int8(model, {x_name: x}, params=params)[g.outputs[0]]
        np.testing.assert_array_equal(got, tflm(data, [x])[0])
        if seed == 0:
            first = {k: id(v) for k, v in params.items()}
    assert set(first) == {id(n) for n in g.nodes}
    assert {k: id(v) for k, v in params.items()} == first  # kept, not derived again


def test_observe_sees_inputs_and_every_produced_tensor():
    model = load_model(TEST_MODELS / "kws_ref_model.tflite")
    g = model.graph
    seen = []
    x = np.zeros((2,) + tuple(g.tensors[g.inputs[0]].shape[1:]), np.int8)
    run_int8(g, {g.inputs[0]: x}, observe=lambda name, a: seen.append((name, a.shape[0])))
    assert [n for n, _ in seen] == g.inputs + [o for n in g.nodes for o in n.outputs]
    assert all(b == 2 for _, b in seen)


# -- per-op models --------------------------------------------------------------------------


def _out_size(size, k, stride, dilation, padding):
    eff = (k - 1) * dilation + 1
    return -(-size // stride) if padding == "SAME" else (size - eff) // stride + 1


CONV_CASES = [  # (input hw, kernel, strides, dilations, padding, activation, z_in, per-channel)
    ((9, 8), (3, 3), (2, 2), (1, 1), "SAME", "RELU", -128, True),
    ((10, 9), (3, 2), (1, 1), (2, 2), "VALID", "RELU6", 127, True),
    ((7, 11), (5, 3), (1, 2), (1, 1), "SAME", "NONE", 5, False),
    ((6, 6), (1, 1), (2, 2), (1, 1), "VALID", "NONE", 0, True),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(case):
    (h, w), (kh, kw), strides, dil, padding, act, z_in, per_channel = case
    n = Q8(1)
    cin, cout = 3, 5
    s_in = 0.05
    x = n.input("x", (1, h, w, cin), s_in, z_in)
    wt, s_w = n.weights("w", (cout, kh, kw, cin), 0, per_channel)
    b = n.bias("b", s_in, s_w, cout)
    oh, ow = (_out_size(h, kh, strides[0], dil[0], padding),
              _out_size(w, kw, strides[1], dil[1], padding))
    pads = same_pads((h, w), (kh, kw), strides, dil) if padding == "SAME" else [0] * 4
    coarse = s_in * float(s_w.max()) * 255 * 128 * kh * kw * cin / 100
    n.node("Conv2D", [x, wt, b], "y", (1, oh, ow, cout), coarse, 0,
           **dict(CONV, kernel_shape=[kh, kw], strides=list(strides), dilations=list(dil),
                  pads=pads, activation="NONE"))
    feeds = int8_feeds(n.g, 3)
    n.fit("y", feeds)
    n.g.nodes[-1].attrs["activation"] = act
    assert_same(n.build(["y"]), feeds)


@pytest.mark.parametrize("op", ["Conv2D", "DepthwiseConv2D"])
def test_explicit_pads_tflite_cannot_express_equal_pad_then_valid(op):
    """IR pads [top, left, bottom, right] of any shape (from ONNX) against TFLM running an
    explicit PAD with the input zero point followed by a VALID layer; Conv2D without bias."""
    pads = [0, 2, 3, 1]
    n = Q8(14)
    s_in, z_in, cin = 0.05, -90, 3
    x = n.input("x", (1, 6, 5, cin), s_in, z_in)
    paddings = n.const("paddings", np.asarray([[0, 0], [pads[0], pads[2]], [pads[1], pads[3]],
                                               [0, 0]], np.int32))
    xp = n.node("Pad", [x, paddings], "xp", (1, 9, 8, cin), s_in, z_in)
    if op == "Conv2D":
        wt, s_w = n.weights("w", (4, 3, 2, cin), 0)
        attrs = dict(CONV, kernel_shape=[3, 2], strides=[2, 1], dilations=[1, 2])
        shape = (1, 4, 6, 4)
    else:
        wt, s_w = n.weights("w", (1, 3, 2, cin), 3)
        attrs = dict(CONV, kernel_shape=[3, 2], strides=[2, 1], dilations=[1, 2],
                     depth_multiplier=1)
        shape = (1, 4, 6, cin)
    b = None if op == "Conv2D" else n.bias("b", s_in, s_w, shape[3])
    n.node(op, [xp, wt, b], "y", shape, 40 * s_in * float(s_w.max()), 0,
           **dict(attrs, pads=[0, 0, 0, 0]))
    feeds = int8_feeds(n.g, 3)
    n.fit("y", feeds)
    data = n.build(["y"])
    direct = read_tflite(data).graph
    _, layer = direct.nodes
    layer.inputs[0] = "x"
    layer.attrs["pads"] = pads
    direct.nodes = [layer]
    for f in feeds:
        np.testing.assert_array_equal(run_int8(direct, f)["y"], tflm(data, [f["x"]])[0])


def test_depthwise_without_bias_is_refused():
    """TFLM's DEPTHWISE_CONV_2D segfaults without a bias (checked by hand, not run here)."""
    n = Q8(15)
    x = n.input("x", (1, 5, 5, 2), 0.05, 0)
    wt, _ = n.weights("w", (1, 3, 3, 2), 3)
    n.node("DepthwiseConv2D", [x, wt, None], "y", (1, 3, 3, 2), 0.1, 0,
           **dict(CONV, kernel_shape=[3, 3], pads=[0, 0, 0, 0], depth_multiplier=1))
    with pytest.raises(QConvertError, match="needs a bias"):
        run_int8(n.g, {"x": np.zeros((1, 5, 5, 2), np.int8)})


@pytest.mark.parametrize("multiplier,strides,padding,act,z_in", [
    (2, (2, 2), "SAME", "RELU6", -128), (1, (1, 1), "VALID", "NONE", 127),
    (3, (1, 2), "SAME", "RELU", 3)])
def test_depthwise_conv2d(multiplier, strides, padding, act, z_in):
    n = Q8(2)
    h, w, cin, k = 8, 7, 4, 3
    cout = cin * multiplier
    s_in = 0.1
    x = n.input("x", (1, h, w, cin), s_in, z_in)
    wt, s_w = n.weights("w", (1, k, k, cout), 3)
    b = n.bias("b", s_in, s_w, cout)
    oh, ow = _out_size(h, k, strides[0], 1, padding), _out_size(w, k, strides[1], 1, padding)
    pads = same_pads((h, w), (k, k), strides, (1, 1)) if padding == "SAME" else [0] * 4
    coarse = s_in * float(s_w.max()) * 255 * 128 * k * k / 100
    n.node("DepthwiseConv2D", [x, wt, b], "y", (1, oh, ow, cout), coarse, 0,
           **dict(CONV, kernel_shape=[k, k], strides=list(strides), pads=pads,
                  activation="NONE", depth_multiplier=multiplier))
    feeds = int8_feeds(n.g, 3)
    n.fit("y", feeds)
    n.g.nodes[-1].attrs["activation"] = act
    assert_same(n.build(["y"]), feeds)


@pytest.mark.parametrize("per_channel,keep_num_dims,with_bias,act", [
    (False, False, True, "RELU"), (True, False, True, "NONE"), (True, True, False, "RELU6"),
    (False, True, True, "NONE")])
def test_fully_connected(per_channel, keep_num_dims, with_bias, act):
    n = Q8(3)
    units, depth = 6, 20
    s_in = 0.03
    in_shape = (1, 3, depth) if keep_num_dims else (1, depth)
    x = n.input("x", in_shape, s_in, -128 if per_channel else 127)
    wt, s_w = n.weights("w", (units, depth), 0, per_channel)
    b = n.bias("b", s_in, s_w, units) if with_bias else None
    out_shape = in_shape[:-1] + (units,)
    coarse = s_in * float(s_w.max()) * 255 * 128 * depth / 100
    n.node("FullyConnected", [x, wt, b], "y", out_shape, coarse, 0, activation="NONE",
           keep_num_dims=keep_num_dims)
    if per_channel:
        n.g.nodes[-1].origin["version"] = 12
    feeds = int8_feeds(n.g, 3)
    n.fit("y", feeds)
    n.g.nodes[-1].attrs["activation"] = act
    assert_same(n.build(["y"]), feeds)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6"])
def test_elementwise_binary(op, act):
    n = Q8(4)
    a = n.input("a", (1, 4, 5, 3), 0.07, -128)
    b = n.input("b", (1, 4, 5, 3), 0.021, 90)
    c = n.const("c", n.rng.integers(-128, 128, (3,)).astype(np.int8), 0.05, 9)
    coarse = {"Add": 0.5, "Sub": 0.5, "Mul": 2.0}[op]
    y = n.node(op, [a, b], "y", (1, 4, 5, 3), coarse, 0, activation="NONE")
    n.node(op, [y, c], "z", (1, 4, 5, 3), coarse * 5, 0, activation="NONE")
    feeds = int8_feeds(n.g, 3)
    n.fit("y", feeds)
    n.fit("z", feeds)
    n.g.nodes[0].attrs["activation"] = act
    assert_same(n.build(["y", "z"]), feeds)


@pytest.mark.parametrize("scales", [(0.07, -128, 0.021, 90), (0.02, 3, 0.02, 3),
                                    (0.004, 0, 0.3, -20)])
def test_squared_difference_with_broadcast(scales):
    """SQUARED_DIFFERENCE of two activations and of an activation and a broadcast constant
    (int8: inputs rescaled << 7, their difference squared, requantized)."""
    s1, z1, s2, z2 = scales
    n = Q8(4)
    a = n.input("a", (1, 4, 5, 3), s1, z1)
    b = n.input("b", (1, 4, 5, 3), s2, z2)
    c = n.const("c", n.rng.integers(-128, 128, (3,)).astype(np.int8), 0.05, 9)
    y = n.node("SquaredDifference", [a, b], "y", (1, 4, 5, 3), 1.0, -128)
    n.node("SquaredDifference", [y, c], "z", (1, 4, 5, 3), 5.0, -128)
    feeds = int8_feeds(n.g, 3)
    n.fit("y", feeds)
    n.fit("z", feeds)
    assert_same(n.build(["y", "z"]), feeds)


def test_slice_reverse_pack_unpack_move_int8_values():
    data = movement_model()
    assert_same(data, int8_feeds(data, 3))


def test_reverse_of_non_contiguous_axes_is_refused_as_tflite_micro_refuses_it():
    n = Q8()
    x = n.input("x", (1, 3, 4, 2), 0.05, 0)
    n.node("Reverse", [x, n.const("ax", np.asarray([1, 3], np.int32))], "y", (1, 3, 4, 2),
           0.05, 0)
    data = n.build(["y"])
    feeds = {"x": np.zeros((1, 3, 4, 2), np.int8)}
    with pytest.raises(Exception):
        tflm(data, [feeds["x"]])
    with pytest.raises(QConvertError, match="not contiguous"):
        run_int8(read_tflite(data).graph, feeds)


@pytest.mark.parametrize("op,kernel,strides,padding,act", [
    ("AveragePool", (3, 3), (2, 2), "SAME", "NONE"), ("AveragePool", (2, 3), (1, 1), "SAME", "RELU6"),
    ("AveragePool", (7, 5), (7, 5), "VALID", "NONE"), ("MaxPool", (2, 2), (2, 2), "SAME", "RELU"),
    ("MaxPool", (3, 3), (1, 2), "VALID", "NONE")])
def test_pooling(op, kernel, strides, padding, act):
    n = Q8(5)
    h, w, c = 7, 9, 4
    x = n.input("x", (1, h, w, c), 0.04, -7)
    oh = _out_size(h, kernel[0], strides[0], 1, padding)
    ow = _out_size(w, kernel[1], strides[1], 1, padding)
    pads = same_pads((h, w), kernel, strides, (1, 1)) if padding == "SAME" else [0] * 4
    n.node(op, [x], "y", (1, oh, ow, c), 0.04, -7, layout="NHWC", kernel_shape=list(kernel),
           strides=list(strides), pads=pads, activation=act)
    assert_same(n.build(["y"]), int8_feeds(n.g, 3))


@pytest.mark.parametrize("op", ["Mean", "ReduceSum"])
@pytest.mark.parametrize("axes,keep_dims,out_q", [
    ([1, 2], True, (0.01, 5)), ([1, 2], True, (0.04, -7)), ([2], False, (0.013, -100)),
    ([-1], False, (0.04, -7)), ([1, 3], True, (0.2, 0))])
def test_mean(op, axes, keep_dims, out_q):
    n = Q8(6)
    shape = (1, 5, 7, 6)
    x = n.input("x", shape, 0.04, -7)
    ax = n.const("axes", np.asarray(axes, np.int32))
    resolved = [a % 4 for a in axes]
    out_shape = [1 if i in resolved else d for i, d in enumerate(shape)]
    if not keep_dims:
        out_shape = [d for i, d in enumerate(shape) if i not in resolved]
    if op == "ReduceSum":  # a sum's range: the mean's times the count (5 to 42 values here)
        out_q = (out_q[0] * 8, out_q[1])
    n.node(op, [x, ax], "y", out_shape, *out_q, keepdims=int(keep_dims))
    assert_same(n.build(["y"]), int8_feeds(n.g, 3))


def test_mean_multiplier_folding():
    # QuantizedMeanOrSum: shift = floor(log2(count)) capped at 32 and at 31 + shift
    assert mean_multiplier(2**30, 0, 35) == ((2**30 << 5) // 35, -5)
    assert mean_multiplier(2**30, -29, 1000) == ((2**30 << 2) // 1000, -31)


@pytest.mark.parametrize("s_in,beta", [(0.1, 1.0), (0.02, 1.0), (1.0, 0.5), (25.0, 1.0),
                                       (0.003, 2.0)])
def test_softmax_including_saturated_rows(s_in, beta):
    n = Q8(7)
    x = n.input("x", (1, 6, 10), s_in, 3)
    n.node("Softmax", [x], "y", (1, 6, 10), 1.0 / 256, -128, beta=beta)
    data = n.build(["y"])
    rows = np.random.default_rng(8).integers(-128, 128, (6, 10))
    rows[1] = 127  # all equal, at the top
    rows[2] = -128  # all equal, at the bottom
    rows[3] = -128
    rows[3, 4] = 127  # one saturated winner
    rows[4, :5] = 127  # a tie of five
    feeds = [{"x": rows[None].astype(np.int8)}] + int8_feeds(n.g, 2)
    assert_same(data, feeds)


def test_softmax_refuses_an_output_scale_other_than_1_256():
    n = Q8()
    x = n.input("x", (1, 10), 0.1, 0)
    n.node("Softmax", [x], "y", (1, 10), 1.0 / 255, -128, beta=1.0)
    g = read_tflite(n.build(["y"])).graph
    with pytest.raises(QConvertError, match="1/256"):
        run_int8(g, {"x": np.zeros((1, 10), np.int8)})


UNARY_QUANT = [(0.01, 0), (0.0625, -128), (0.3, 127), (0.047, 20), (2.5, -3)]


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh", "HardSwish", "Relu", "Relu6", "Quantize",
                                "Abs", "AbsSameScale"])
@pytest.mark.parametrize("q_in", UNARY_QUANT)
def test_elementwise_unary_on_every_int8_value(op, q_in):
    n = Q8(9)
    x = n.input("x", (1, 16, 16), *q_in)
    out_q = {"Sigmoid": (1.0 / 256, -128), "Tanh": (1.0 / 128, 0), "HardSwish": (0.05, -60),
             "Relu": (q_in[0] * 0.7, -110), "Relu6": q_in, "Quantize": (0.021, 17),
             "Abs": (q_in[0] * 0.6, -100), "AbsSameScale": (q_in[0], -128)}[op]
    op = "Abs" if op == "AbsSameScale" else op  # ABS without a rescale: equal scales
    if op == "HardSwish" and q_in[0] > 1:
        out_q = (q_in[0], -60)
    n.node(op, [x], "y", (1, 16, 16), *out_q)
    assert_same(n.build(["y"]), [{"x": all_int8_values()}], batch=False)


@pytest.mark.parametrize("op,q_in,q_out", [("Relu6", (0.05, -10), (0.02, 30)),
                                           ("Relu6", (0.1, 100), (0.01, -128)),
                                           ("Tanh", (0.05, -10), (0.01, 5))])
def test_relu6_and_tanh_do_not_read_the_output_quantization(op, q_in, q_out):
    n = Q8()
    x = n.input("x", (1, 16, 16), *q_in)
    n.node(op, [x], "y", (1, 16, 16), *q_out)
    assert_same(n.build(["y"]), [{"x": all_int8_values()}], batch=False)


def test_quantize_float_input_with_ties_and_saturation_then_dequantize():
    n = Q8(10)
    scale, zp = 0.05, -3
    x = n.input("x", (1, 64), None, None, dtype="float32")
    q = n.node("Quantize", [x], "q", (1, 64), scale, zp)
    n.node("Dequantize", [q], "y", (1, 64), None, None, dtype="float32")
    data = n.build(["q", "y"])
    v = np.float32(scale) * (np.arange(-32, 32, dtype=np.float32) + np.float32(0.5))  # ties
    v[:8] = [1e3, -1e3, 0.0, -0.0, 1e10, -1e10, np.inf, np.nan]  # beyond int32: as x86 casts
    feeds = [{"x": v[None].astype(np.float32)},
             {"x": np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32) * 3}]
    assert_same(data, feeds)


def test_data_movement_ops():
    n = Q8(11)
    a = n.input("a", (1, 4, 3, 2), 0.05, 3)
    b = n.input("b", (1, 4, 3, 2), 0.05, 3)
    c = n.node("Concat", [a, b], "c", (1, 4, 3, 4), 0.05, 3, axis=-1, activation="NONE")
    pads = n.const("pads", np.asarray([[0, 0], [1, 2], [0, 1], [0, 0]], np.int32))
    p = n.node("Pad", [c, pads], "p", (1, 7, 4, 4), 0.05, 3)
    perm = n.const("perm", np.asarray([0, 3, 1, 2], np.int32))
    t = n.node("Transpose", [p, perm], "t", (1, 4, 7, 4), 0.05, 3)
    shape = n.const("shape", np.asarray([1, 4, 1, 28], np.int32))
    r = n.node("Reshape", [t, shape], "r", (1, 4, 1, 28), 0.05, 3)
    s = n.node("Squeeze", [r, n.const("squeeze_dims", np.asarray([2], np.int32))], "s",
               (1, 4, 28), 0.05, 3)
    n.node("Concat", [s, s], "s2", (1, 8, 28), 0.05, 3, axis=1, activation="NONE")
    assert_same(n.build(["c", "p", "t", "r", "s", "s2"]), int8_feeds(n.g, 3))


def test_gather():
    n = Q8(16)
    x = n.input("x", (1, 5, 3), 0.05, 3)
    idx = n.const("idx", np.asarray([4, 0, 2, 2], np.int32))
    n.node("Gather", [x, idx], "y", (1, 4, 3), 0.05, 3, axis=1, batch_dims=0)
    assert_same(n.build(["y"]), int8_feeds(n.g, 2))


def test_concat_of_different_quantization_is_refused_like_tflm():
    n = Q8(11)
    a = n.input("a", (1, 4, 2), 0.05, 3)
    b = n.input("b", (1, 4, 2), 0.2, -100)
    n.node("Concat", [a, b], "c", (1, 4, 4), 0.05, 3, axis=-1, activation="NONE")
    data = n.build(["c"])
    g = read_tflite(data).graph
    with pytest.raises(RuntimeError):
        tflm(data, [np.zeros((1, 4, 2), np.int8)] * 2)
    with pytest.raises(QConvertError, match="requires them equal"):
        run_int8(g, {"a": np.zeros((1, 4, 2), np.int8), "b": np.zeros((1, 4, 2), np.int8)})


def test_reshape_to_a_hard_coded_leading_1_runs_batched():
    n = Q8(12)
    x = n.input("x", (1, 2, 2, 5), 0.05, 0)
    shape = n.const("shape", np.asarray([1, 20], np.int32))
    r = n.node("Reshape", [x, shape], "r", (1, 20), 0.05, 0)
    wt, s_w = n.weights("w", (3, 20), 0)
    n.node("FullyConnected", [r, wt, n.bias("b", 0.05, s_w, 3)], "y", (1, 3), 0.3, 0,
           activation="NONE", keep_num_dims=False)
    n.g.nodes[-1].origin["version"] = 12
    g = assert_same(n.build(["y"]), int8_feeds(n.g, 4))  # includes a batch of 4
    assert run_int8(g, int8_feeds(g, 1)[0])["y"].shape == (1, 3)


@pytest.mark.parametrize("begin,end,strides,shrink,shape", [
    ([0, 1, 0, 1], [1, 4, 3, 5], [1, 2, 1, 2], 0, (1, 2, 3, 2)),   # slice H and C with steps
    ([0, 3, 0, 0], [1, 0, 3, 5], [1, -1, 1, 1], 0, (1, 3, 3, 5)),  # H reversed
    ([0, 2, 0, 0], [1, 3, 3, 5], [1, 1, 1, 1], 2, (1, 3, 5)),      # H shrunk away
])
def test_strided_slice_copies_int8_values_and_runs_batched(begin, end, strides, shrink, shape):
    n = Q8(14)
    x = n.input("x", (1, 4, 3, 5), 0.05, 3)
    n.node("StridedSlice", [x, n.const("b", np.asarray(begin, np.int32)),
                            n.const("e", np.asarray(end, np.int32)),
                            n.const("s", np.asarray(strides, np.int32))], "y", shape, 0.05, 3,
           begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=shrink,
           offset=False)
    assert_same(n.build(["y"]), int8_feeds(n.g, 3))  # includes a batch of 3


def test_reshape_without_shape_input_takes_the_output_shape():
    n = Q8(12)
    x = n.input("x", (1, 2, 3, 4), 0.05, 0)
    n.node("Reshape", [x], "y", (1, 6, 4), 0.05, 0)
    assert_same(n.build(["y"]), int8_feeds(n.g, 2))


def test_batch_that_mixes_samples_is_refused():
    n = Q8(13)
    x = n.input("x", (1, 4), 0.05, 0)
    shape = n.const("shape", np.asarray([2, 2], np.int32))
    n.node("Reshape", [x, shape], "y", (2, 2), 0.05, 0)
    g = read_tflite(n.build(["y"])).graph
    assert run_int8(g, {"x": np.ones((1, 4), np.int8)})["y"].shape == (2, 2)
    with pytest.raises(QConvertError, match="one at a time"):
        run_int8(g, {"x": np.ones((3, 4), np.int8)})


def test_unsupported_ops_are_listed_at_once():
    model = load_model(SAMPLE_MODELS / "custom_op.tflite")
    with pytest.raises(QConvertError, match="does not support"):
        run_int8(model, {})


def test_single_rounding_differs_only_by_one_lsb():
    model = load_model(TEST_MODELS / "pretrainedResnet_quant.tflite")
    g = model.graph
    g.outputs = [g.nodes[0].outputs[0]]
    x = np.random.default_rng(0).integers(-128, 128, (2, 32, 32, 3)).astype(np.int8)
    a = run_int8(g, {g.inputs[0]: x})[g.outputs[0]].astype(int)
    b = run_int8(g, {g.inputs[0]: x}, rounding="single")[g.outputs[0]].astype(int)
    assert np.abs(a - b).max() <= 1


def test_kernel_table_covers_the_int8_ops():
    for op in ("Conv2D", "DepthwiseConv2D", "FullyConnected", "Add", "Sub", "Mul", "AveragePool",
               "MaxPool", "Mean", "Reshape", "Squeeze", "Softmax", "Sigmoid", "Tanh", "Relu",
               "Relu6", "Concat", "Pad", "Transpose", "Quantize", "Dequantize", "HardSwish"):
        assert op in INT_KERNELS


def test_conv_accumulators_beyond_float32_stay_exact():
    """Conv2D / FullyConnected accumulate in float32 BLAS only when the layer's bound (sum |w|
    of a channel times max |x - z_in|) is below 2**24 (`exact_float`). A 1x1 conv over 4000
    channels, half its terms 127 * 255, reaches ~1.3e8, where float32 sums round; the bias
    cancels each channel's sum on the first sample and the output scale is s_in * s_w, so one
    unit of accumulator error moves the output: the layer takes float64 and stays bit-exact
    with TFLM. A layer of 200 channels takes float32."""
    from qconvert.executor.int_kernels_conv import exact_float

    cin, s_in = 4000, 0.05
    rng = np.random.default_rng(3)
    n = Q8(1)
    x = n.input("x", (1, 2, 2, cin), s_in, -128)
    wt, s_w = n.weights("w", (3, 1, 1, cin), 0, per_channel=False)
    w = rng.integers(-127, 128, (3, 1, 1, cin)).astype(np.int8)
    w[..., ::2] = 127
    n.g.tensors[wt].data = w
    x0 = rng.integers(-128, 128, cin).astype(np.int8)
    x0[::2] = 127
    acc = w.reshape(3, cin).astype(np.int64) @ (x0.astype(np.int64) + 128)
    b = n.const("b", (-acc + np.array([50, -20, 0])).astype(np.int32),
                np.float32(s_in) * s_w.astype(np.float32), 0, 0)
    n.node("Conv2D", [x, wt, b], "y", (1, 2, 2, 3), float(np.float32(s_in) * s_w[0]), 0,
           **dict(CONV, kernel_shape=[1, 1], strides=[1, 1], dilations=[1, 1], pads=[0] * 4,
                  activation="NONE"))
    feeds = [{"x": np.broadcast_to(x0, (1, 2, 2, cin)).copy()}] + int8_feeds(n.g, 1)
    assert exact_float(feeds[0]["x"], 128, w, (1, 2, 3)) is np.float64
    assert exact_float(feeds[0]["x"], 128, w[:, :, :, :200], (1, 2, 3)) is np.float32
    assert_same(n.build(["y"]), feeds)
