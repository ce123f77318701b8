"""Winograd F(2x2, 3x3) in the float executor (qconvert/executor/float_kernels_winograd.py):
the same convolution as a float64 direct sum and as onnxruntime, to float32 rounding; the same
bits whatever the number of CPUs; and every convolution it must not take goes to the im2col
product."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from qconvert.executor import float_kernels_conv, parallel
from qconvert.executor.float_executor import run_float
from qconvert.executor.float_kernels_conv import conv2d
from qconvert.executor.float_kernels_winograd import winograd_applies, winograd_conv
from qconvert.ir import Node
from qconvert.formats.onnx_reader import read_onnx_proto

TOLERANCE = 2e-6  # of the output's largest magnitude; float32 rounding is about 5e-7 here


def _direct(x, w, b, pads) -> np.ndarray:
    """The convolution as a float64 sum over the nine taps."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho, wo = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(3):
        for j in range(3):
            out += np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64),
                             xp[:, :, i:i + ho, j:j + wo])
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def _case(n, cin, cout, h, w, seed=0, bias=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float32)
    weights = (rng.standard_normal((cout, cin, 3, 3)) / (3 * cin ** 0.5)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    return x, weights, b


def _relative_error(y, ref) -> float:
    return float(np.abs(y - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("n,cin,cout,h,w,pads,bias", [
    (1, 8, 8, 5, 5, [1, 1, 1, 1], True),       # odd output: the last tiles half used
    (3, 5, 7, 7, 6, [1, 1, 1, 1], True),
    (2, 6, 4, 9, 11, [0, 0, 0, 0], False),     # no padding, no bias
    (5, 4, 3, 4, 3, [2, 1, 0, 2], True),       # asymmetric pads
    (1, 3, 2, 1, 1, [1, 1, 1, 1], True),       # one output pixel
    (2, 3, 2, 3, 3, [0, 0, 0, 0], True),       # one output pixel, no padding
    (7, 2, 3, 2, 9, [1, 0, 1, 0], True),
])
@pytest.mark.parametrize("split", ["one group", "groups", "row blocks"])
def test_winograd_matches_the_direct_sum(n, cin, cout, h, w, pads, bias, split):
    """Every shape and padding, each way the work is split, against a float64 direct sum."""
    x, weights, b = _case(n, cin, cout, h, w, bias=bias)
    out = (h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2)
    groups = {"one group": [(0, n)], "groups": [(i, i + 1) for i in range(n)],
              "row blocks": [(0, n)]}[split]
    blocks = [slice(0, cout // 2), slice(cout // 2, cout)] if split == "row blocks" else [
        slice(0, cout)]
    y = winograd_conv(x, weights, None if b is None else b.reshape(-1, 1, 1), pads, out,
                      groups, blocks)
    ref = _direct(x, weights, b, pads)
    assert y.shape == ref.shape and y.dtype == np.float32
    assert _relative_error(y, ref) < TOLERANCE


@pytest.mark.parametrize("n,channels,size", [(16, 512, 7), (2, 64, 56), (1, 128, 28),
                                             (4, 256, 14)])
def test_conv2d_takes_winograd_on_wide_layers_bit_for_bit_whatever_the_cpus(
        monkeypatch, n, channels, size):
    """ResNet-50's 3x3 layers go through Winograd; one CPU and two give the same bits, and
    both are within float32 rounding of the direct sum."""
    x, weights, b = _case(n, channels, channels, size, size, seed=channels)
    node = Node("Conv2D", ["x", "w", "b"], ["y"],
                {"pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}, name="conv")
    assert winograd_applies(x, weights, [3, 3], [1, 1], [1, 1], (size, size))
    taken = []
    real = float_kernels_conv.winograd_conv
    monkeypatch.setattr(float_kernels_conv, "winograd_conv",
                        lambda *a: taken.append(1) or real(*a))
    results = []
    for cpus in (1, 2):
        monkeypatch.setattr(parallel, "workers", lambda cpus=cpus: cpus)
        results.append(conv2d(node, [x, weights, b], [None])[0])
    assert taken == [1, 1]
    np.testing.assert_array_equal(results[0], results[1])
    assert _relative_error(results[0], _direct(x, weights, b, [1, 1, 1, 1])) < TOLERANCE


def _conv_node(**attrs):
    base = {"pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}
    base.update(attrs)
    return Node("Conv2D", ["x", "w", "b"], ["y"], base, name="conv")


@pytest.mark.parametrize("why,n,cin,cout,size,kernel,attrs,dtype", [
    ("stride 2", 16, 64, 64, 28, 3, {"strides": [2, 2]}, np.float32),
    ("dilation 2", 16, 64, 64, 28, 3, {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, np.float32),
    ("a 5x5 kernel", 16, 64, 64, 28, 5, {"pads": [2, 2, 2, 2]}, np.float32),
    ("a 1x1 kernel", 16, 64, 64, 28, 1, {"pads": [0, 0, 0, 0]}, np.float32),
    ("float64", 16, 64, 64, 28, 3, {}, np.float64),
    ("few input channels", 16, 32, 64, 28, 3, {}, np.float32),
    ("few output channels", 16, 64, 32, 28, 3, {}, np.float32),
    ("few tiles", 1, 512, 512, 7, 3, {}, np.float32),
    ("two groups", 16, 64, 64, 28, 3, {"group": 2}, np.float32),
])
def test_conv2d_keeps_im2col_where_winograd_does_not_pay_or_apply(
        monkeypatch, why, n, cin, cout, size, kernel, attrs, dtype):
    """Each condition of `winograd_applies` (and the caller's: NCHW, one group) has a case
    that must not reach Winograd; the result is still the convolution."""
    rng = np.random.default_rng(1)
    group = attrs.get("group", 1)
    x = rng.standard_normal((n, cin, size, size)).astype(dtype)
    weights = (rng.standard_normal((cout, cin // group, kernel, kernel)) * 0.05).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype)

    def refuse(*args):
        raise AssertionError(f"Winograd taken for {why}")

    monkeypatch.setattr(float_kernels_conv, "winograd_conv", refuse)
    y = conv2d(_conv_node(**attrs), [x, weights, b], [None])[0]
    assert np.all(np.isfinite(y)) and y.shape[:2] == (n, cout)


def test_nhwc_convolution_keeps_im2col(monkeypatch):
    """TFLite's NHWC convolutions never reach Winograd (NCHW only)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 14, 14, 64)).astype(np.float32)
    weights = (rng.standard_normal((64, 3, 3, 64)) * 0.05).astype(np.float32)
    node = Node("Conv2D", ["x", "w"], ["y"], {"pads": [1, 1, 1, 1], "strides": [1, 1],
                                             "dilations": [1, 1], "layout": "NHWC"},
                name="conv")
    monkeypatch.setattr(float_kernels_conv, "winograd_conv",
                        lambda *a: (_ for _ in ()).throw(AssertionError("Winograd on NHWC")))
    assert conv2d(node, [x, weights], [None])[0].shape == (16, 14, 14, 64)


def test_winograd_conv_agrees_with_onnxruntime():
    """A wide 3x3 ONNX Conv run by the float executor (through Winograd) against onnxruntime
    with graph optimizations off."""
    ort = pytest.importorskip("onnxruntime")
    x, weights, b = _case(8, 64, 96, 13, 10, seed=5)
    assert winograd_applies(x, weights, [3, 3], [1, 1], [1, 1], (13, 10))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 96, 13, 10])],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(b, "b")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    ours = run_float(read_onnx_proto(proto, "wide.onnx"), {"x": x})["y"]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    theirs = sess.run(None, {"x": x})[0]
    assert _relative_error(ours, theirs.astype(np.float64)) < TOLERANCE
