"""Bias correction against independent oracles: on held-out digits data the int8 model's mean
output error per channel (TFLite Micro against the float model in LiteRT; onnxruntime for QDQ)
shrinks, the corrected model stays bit-exact between TFLite Micro and our integer executor, and
the per-channel correction equals the weight error times the input mean computed directly."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import TEST_MODELS, litert_per_sample, ort_per_sample
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.ir import Node
from qconvert.formats.model_io import load_model
from qconvert.quant.bias_correction import weight_error_bias
from qconvert.quant.params import quantize_layer


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _digits(layout):
    d = np.load(TEST_MODELS / f"digits_data_{layout}.npz")
    return d["test"].astype(np.float32)


def _litert(model_bytes, x):
    return litert_per_sample(model_bytes, x).astype(np.float64)


def _tflm(model_bytes, xq):
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model_bytes)
    rows = []
    for sample in xq:
        it.set_input(sample[None], 0)
        it.invoke()
        rows.append(np.array(it.get_output(0))[0])
    return np.stack(rows)


def test_bias_correction_reduces_mean_error_per_channel_tflite_and_stays_bit_exact(tmp_path):
    src = TEST_MODELS / "digits_cnn.tflite"
    x = _digits("nhwc")
    y_float = _litert(src.read_bytes(), x)
    bias_error = {}
    for flag in ((), ("--no-bias-correction",)):
        out = tmp_path / f"m{len(flag)}.tflite"
        r = _invoke(["quantize", src, "--calibration",
                     f"{TEST_MODELS / 'digits_data_nhwc.npz'}:calib", "-o", out, *flag])
        assert r.exit_code == 0, r.output
        graph = load_model(out).graph
        qi, qo = graph.tensors[graph.inputs[0]].quant, graph.tensors[graph.outputs[0]].quant
        xq = np.clip(np.floor(x / qi.scale[0] + 0.5) + qi.zero_point[0], -128, 127
                     ).astype(np.int8)
        tflm = _tflm(out.read_bytes(), xq)
        np.testing.assert_array_equal(run_int8(graph, {graph.inputs[0]: xq})[graph.outputs[0]],
                                      tflm)
        y = (tflm.astype(np.float64) - qo.zero_point[0]) * qo.scale[0]
        bias_error[bool(flag)] = np.abs((y - y_float).mean(axis=0)).mean()
    assert bias_error[False] < bias_error[True]


def test_bias_correction_reduces_mean_error_per_channel_onnx(tmp_path):

    src = TEST_MODELS / "digits_cnn.onnx"
    x = _digits("nchw")

    def run(path):
        return ort_per_sample(path, x).astype(np.float64)

    y_float = run(src)
    err = {}
    for flag in ((), ("--no-bias-correction",)):
        out = tmp_path / f"m{len(flag)}.onnx"
        r = _invoke(["quantize", src, "--calibration",
                     f"{TEST_MODELS / 'digits_data_nchw.npz'}:calib", "-o", out, *flag])
        assert r.exit_code == 0, r.output
        err[bool(flag)] = np.abs((run(out) - y_float).mean(axis=0)).mean()
    assert err[False] < 0.7 * err[True]


@pytest.mark.parametrize("kind", ["onnx_conv", "onnx_grouped", "tflite_conv", "depthwise", "fc"])
def test_weight_error_bias_equals_direct_expectation(kind):
    """sum_k (W - Wq)[c, k] E[x_k], computed here by running the float and the rounded weights
    as an actual convolution / matmul on inputs with nonzero channel means (no padding; each
    sample constant over positions), and comparing the mean output difference per channel."""
    rng = np.random.default_rng(0)
    if kind == "fc":
        w = rng.normal(size=(5, 12))
        x = rng.normal(2, 1, (300, 12))
        node = Node("FullyConnected", ["x", "w"], ["y"], {}, "fc")
        w_q, s_w, _, _ = quantize_layer(w, None, 0.05, 0, False)
        deq = w_q * np.float64(s_w[0])
        expect = (x @ w.T - x @ deq.T).mean(axis=0)
        got = weight_error_bias(node, "tflite", w, w_q, s_w, None, x.mean(axis=0))
        np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-12)
        return
    c_in, c_out, groups = 4, 6, 1
    fmt, op = "onnx", "Conv2D"
    if kind == "onnx_grouped":
        groups = 2
    if kind == "tflite_conv":
        fmt = "tflite"
    if kind == "depthwise":
        fmt, op, c_out = "tflite", "DepthwiseConv2D", 8
    # NHWC, each sample constant over positions (so every kernel tap sees the channel mean)
    x = np.broadcast_to(rng.normal(1.5, 1, (50, 1, 1, c_in)), (50, 5, 5, c_in))
    if op == "DepthwiseConv2D":
        w = rng.normal(size=(1, 3, 3, c_out))
        axis = 3
    elif fmt == "onnx":
        w = rng.normal(size=(c_out, c_in // groups, 3, 3))
        axis = 0
    else:
        w = rng.normal(size=(c_out, 3, 3, c_in))
        axis = 0
    w_q, s_w, _, _ = quantize_layer(w, None, 0.05, axis, True)
    deq = w_q * s_w.astype(np.float64).reshape([-1 if i == axis else 1 for i in range(4)])

    def conv(weights):  # valid 3x3 convolution, output (N, 3, 3, C_out)
        patches = np.stack([x[:, i:i + 3, j:j + 3, :] for i in range(3) for j in range(3)], 1)
        patches = patches.reshape(len(x), 3, 3, 3, 3, c_in)  # n, oy, ox, ky, kx, c
        if op == "DepthwiseConv2D":
            m = c_out // c_in
            return np.einsum("nabyxc,yxcm->nabcm", patches,
                             weights[0].reshape(3, 3, c_in, m)).reshape(len(x), 3, 3, c_out)
        k = weights.transpose(0, 2, 3, 1) if fmt == "onnx" else weights  # O, ky, kx, I
        per = c_in // groups
        outs = [np.einsum("nabyxc,oyxc->nabo", patches[..., g * per:(g + 1) * per],
                          k[g * (c_out // groups):(g + 1) * (c_out // groups)])
                for g in range(groups)]
        return np.concatenate(outs, axis=-1)

    expect = (conv(w) - conv(deq)).mean(axis=(0, 1, 2))
    node = Node(op, ["x", "w"], ["y"], {"group": groups}, "layer")
    got = weight_error_bias(node, fmt, w, w_q, s_w, axis, x.mean(axis=(0, 1, 2)))
    np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-12)


def test_layers_without_bias_get_a_corrected_one_in_qdq(tmp_path):
    """A Conv and a Gemm with no bias input: bias correction gives them one (int32 behind a
    DequantizeLinear); the QDQ model runs in onnxruntime, and its mean output error is smaller
    than without correction on held-out data."""
    import onnx

    from helpers.oracles import OnnxNet

    net = OnnxNet(1)
    x = net.input("x", [1, 3, 8, 8])
    net.conv(x, 3, 6, "c1", bias=False, pads=[1, 1, 1, 1])
    net.node("Relu", ["c1"], "r1")
    net.node("Flatten", ["r1"], "f")
    net.node("Gemm", ["f", net.rand("w", 10, 384)], "y", transB=1)
    src = tmp_path / "nb.onnx"
    src.write_bytes(net.build(["y"]))
    rng = np.random.default_rng(0)
    np.save(tmp_path / "calib.npy", np.abs(rng.standard_normal((32, 3, 8, 8))).astype(np.float32))
    held = np.abs(rng.standard_normal((40, 3, 8, 8))).astype(np.float32)

    def run(path):
        return ort_per_sample(path, held)

    y_float = run(src).astype(np.float64)
    err = {}
    for flag in ((), ("--no-bias-correction",)):
        out = tmp_path / f"q{len(flag)}.onnx"
        r = _invoke(["quantize", src, "--calibration", tmp_path / "calib.npy", "-o", out,
                     *flag])
        assert r.exit_code == 0, r.output
        layers = [n for n in onnx.load(str(out)).graph.node if n.op_type in ("Conv", "Gemm")]
        assert [len(n.input) for n in layers] == ([3, 3] if not flag else [2, 2])
        err[bool(flag)] = np.abs((run(out) - y_float).mean(axis=0)).mean()
    assert err[False] < err[True]


def test_weight_error_bias_of_a_1d_conv_equals_its_2d_form():
    """Conv1d weights (O, I, K) give the correction of the same weights as (O, I, 1, K), which
    the test above checks against an actual convolution."""
    rng = np.random.default_rng(4)
    w = rng.normal(size=(6, 4, 5))
    w_q, s_w, _, _ = quantize_layer(w, None, 0.05, 0, True)
    mean = rng.normal(1.0, 0.5, 4)
    node = Node("Conv2D", ["x", "w"], ["y"], {"group": 1}, "c")
    got = weight_error_bias(node, "onnx", w, w_q, s_w, 0, mean)
    flat = weight_error_bias(node, "onnx", w[:, :, None], w_q[:, :, None], s_w, 0, mean)
    np.testing.assert_allclose(got, flat, rtol=1e-12)
    assert np.any(got != 0)


@pytest.mark.parametrize("command", ["export-c-header", "export-c"])
def test_export_commands_take_the_quantize_options(tmp_path, command):
    """export-c-header and export-c quantize a float model with the same options as quantize
    (here bias correction off, equalization on, the numpy engine)."""
    out = tmp_path / ("w.h" if command == "export-c-header" else "c")
    r = _invoke([command, TEST_MODELS / "ad01_fp32.tflite", "--calibration-random", 4, "-o", out,
                 "--no-bias-correction", "--equalize", "--engine", "numpy", "--method",
                 "entropy"])
    assert r.exit_code == 0, r.output
    assert out.exists()
