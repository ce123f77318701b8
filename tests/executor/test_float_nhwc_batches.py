"""The float executor's NHWC convolutions at calibration sizes (TFLite CONV_2D and
DEPTHWISE_CONV_2D, qconvert/executor/float_kernels_conv.py): groups of samples or chunks shared
among the CPUs, each padded and multiplied in work arrays of its thread, the bias and the fused
clamp applied while the piece is in cache. LiteRT (reference kernels) is the oracle; the
pieces' results must not depend on how many CPUs there are, and the in-place fused clamps must
be those of new arrays bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.float_op_checks import TfGraph, check_tflite, out_size, spatial
from qconvert.executor import parallel
from qconvert.executor.float_executor import run_float
from qconvert.executor.float_kernels_base import _fused
from qconvert.executor.float_kernels_conv import _sample_groups
from qconvert.executor.float_kernels_window import pad_spatial, padded_scratch
from qconvert.ir import Node


def _conv_graph(batch, hw, cin, cout, kernel, strides, dilations, padding, act):
    n = TfGraph()
    x = n.input("x", (batch, *hw, cin))
    wt = n.weights("w", (cout, *kernel, cin))
    b = n.weights("b", (cout,))
    oh = out_size(hw[0], kernel[0], strides[0], dilations[0], padding)
    ow = out_size(hw[1], kernel[1], strides[1], dilations[1], padding)
    attrs = spatial(kernel, strides, dilations, hw, padding)
    attrs["activation"] = act
    n.node("Conv2D", [x, wt, b], "y", (batch, oh, ow, cout), **attrs)
    return n.build(["y"]), (oh, ow)


# (batch, size, cin, cout, kernel, strides, dilations, padding, activation): several groups of
# one sample, groups of several samples, and one group whose rows the CPUs split
CONV_CASES = [
    (6, (32, 32), 16, 24, (1, 1), (1, 1), (1, 1), "VALID", "RELU6"),  # pointwise: no im2col
    (6, (20, 20), 5, 12, (3, 3), (1, 1), (1, 1), "SAME", "RELU"),     # 2 groups of 3 samples
    (8, (33, 31), 3, 16, (3, 3), (2, 2), (1, 1), "SAME", "NONE"),     # 2 groups of 4
    (5, (24, 24), 4, 8, (3, 3), (1, 1), (2, 2), "VALID", "RELU_N1_TO_1"),
    (1, (40, 40), 8, 20, (3, 3), (1, 1), (1, 1), "SAME", "RELU6"),    # one group, rows split
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_nhwc_conv_matches_litert(tmp_path, case):
    batch, hw, cin, cout, kernel, strides, dilations, padding, act = case
    data, out = _conv_graph(*case)
    groups = _sample_groups(batch, out[0] * out[1])
    assert len(groups) > 1 or batch == 1  # the case exercises what its comment says
    check_tflite(tmp_path, data, seeds=(0, 1))


def _depthwise_graph(batch, hw, c, mult, strides, padding, act):
    n = TfGraph()
    x = n.input("x", (batch, *hw, c))
    wt = n.weights("w", (1, 3, 3, c * mult))
    b = n.weights("b", (c * mult,))
    oh = out_size(hw[0], 3, strides[0], 1, padding)
    ow = out_size(hw[1], 3, strides[1], 1, padding)
    attrs = spatial((3, 3), strides, (1, 1), hw, padding, depth_multiplier=mult)
    attrs["activation"] = act
    n.node("DepthwiseConv2D", [x, wt, b], "y", (batch, oh, ow, c * mult), **attrs)
    return n.build(["y"])


# samples of 2^18 output values or more: one chunk per sample, shared among the CPUs
@pytest.mark.parametrize("mult,strides,padding,act", [
    (1, (1, 1), "SAME", "RELU6"),
    (2, (2, 2), "SAME", "NONE"),
    (1, (1, 1), "VALID", "RELU"),
])
def test_nhwc_depthwise_in_chunks_matches_litert(tmp_path, mult, strides, padding, act):
    size = (96, 90) if strides == (2, 2) else (48, 48)
    check_tflite(tmp_path, _depthwise_graph(4, size, 120, mult, strides, padding, act),
                 seeds=(0,))


@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_the_pieces_do_not_depend_on_the_cpu_count(tmp_path, monkeypatch, kind):
    """The same bits on one CPU (every piece in the calling thread) as on all of them."""
    from qconvert.formats.model_io import load_model

    data = (_conv_graph(*CONV_CASES[1])[0] if kind == "conv"
            else _depthwise_graph(4, (48, 48), 120, 1, (1, 1), "SAME", "RELU6"))
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    model = load_model(str(path))
    x = np.random.default_rng(3).standard_normal(
        model.graph.tensors["x"].shape).astype(np.float32)
    shared = run_float(model, {"x": x})["y"]
    monkeypatch.setattr(parallel, "workers", lambda: 1)
    alone = run_float(model, {"x": x})["y"]
    np.testing.assert_array_equal(shared, alone)


def test_a_conv_and_its_relu6_reader_run_together_bit_for_bit(tmp_path):
    """TFLite CONV_2D (no fused activation) read only by a RELU6: with the conv output
    unobserved the convolution clamps its pieces itself; the same bits as the two nodes."""
    from qconvert.formats.model_io import load_model

    n = TfGraph()
    x = n.input("x", (6, 20, 20, 5))
    wt, b = n.weights("w", (12, 3, 3, 5)), n.weights("b", (12,))
    n.node("Conv2D", [x, wt, b], "c", (6, 20, 20, 12), **spatial((3, 3), in_hw=(20, 20),
                                                                 padding="SAME"))
    n.node("Relu6", ["c"], "y", (6, 20, 20, 12))
    path = tmp_path / "m.tflite"
    path.write_bytes(n.build(["y"]))
    model = load_model(str(path))
    feeds = {"x": np.random.default_rng(4).standard_normal((6, 20, 20, 5)).astype(np.float32)}
    seen = []
    together = run_float(model, feeds, observe=lambda name, a: seen.append(name),
                         unobserved=frozenset({"c"}))["y"]
    assert "c" not in seen  # the clamp ran inside the convolution
    apart = run_float(model, feeds)["y"]
    np.testing.assert_array_equal(together, apart)
    check_tflite(tmp_path, path.read_bytes())


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"])
def test_a_fused_clamp_in_place_is_the_new_arrays_bit_for_bit(act):
    """`_fused(own=True)` clamps the kernel's own array in place (on every CPU for a large
    one): the values of the two new arrays it made before, NaN and infinities included."""
    node = Node(op="Conv2D", inputs=["x"], outputs=["y"], attrs={"activation": act}, name="c")
    y = np.random.default_rng(5).standard_normal(1 << 19).astype(np.float32) * 4
    y[:4] = [np.nan, np.inf, -np.inf, -0.0]
    expected = _fused(node, y.copy())
    got = _fused(node, y, own=True)
    np.testing.assert_array_equal(got, expected)
    if act in ("RELU", "RELU6", "RELU_N1_TO_1"):
        assert got is y  # no new array


@pytest.mark.parametrize("nhwc", [True, False])
@pytest.mark.parametrize("begins,ends,value", [((1, 2), (0, 3), 0.0), ((0, 0), (2, 1), -np.inf),
                                               ((3, 1), (3, 1), 0.0)])
def test_a_padded_work_array_is_np_pad(nhwc, begins, ends, value):
    x = np.random.default_rng(6).standard_normal((2, 5, 7, 3) if nhwc else (2, 3, 5, 7))
    x = x.astype(np.float32)
    axes = [1, 2] if nhwc else [2, 3]
    got = padded_scratch(x, axes, list(begins), list(ends), value, "test padded")
    np.testing.assert_array_equal(got, pad_spatial(x, axes, list(begins), list(ends), value))
    again = padded_scratch(x[:1] * 2, axes, list(begins), list(ends), value, "test padded")
    np.testing.assert_array_equal(again, pad_spatial(x[:1] * 2, axes, list(begins),
                                                     list(ends), value))
    assert padded_scratch(x, axes, [0, 0], [0, 0], value, "test padded") is x
