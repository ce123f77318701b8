"""Degenerate weight channels quantize (issue "Real models", part 3): near-zero weights next to
a real bias (what BatchNorm folding leaves in the MLPerf Tiny models), all-zero channels with and
without bias, huge (1e30) and denormal weights. Each weight scale is chosen in closed form; the
int8 model must run in TFLite Micro bit for bit like our integer executor, every scale and bias
scale written is a normal float32, and the report names the channels whose scale was widened."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import TEST_MODELS, random_inputs, run_tflm
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize
from qconvert.padding import same_pads
from qconvert.quant.params import INT32_MAX, bias_scale, quantize_layer

TINY = np.finfo(np.float32).tiny


def _degenerate_conv_weights(rng) -> tuple:
    """8 output channels of a 3x3x3 conv: (weights OHWI, bias, channels expected widened)."""
    w = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.2, 8).astype(np.float32)
    sign = np.sign(rng.normal(size=(3, 3, 3))).astype(np.float32)
    w[0], b[0] = 1e-30 * sign, 0.3          # near zero, real bias: the MLPerf case
    w[1], b[1] = 0.0, 0.5                    # all zero with a bias
    w[2], b[2] = 0.0, 0.0                    # all zero, no bias
    w[3], b[3] = 1e30 * sign, 0.1            # huge
    w[4], b[4] = 1e-40 * sign, 0.2           # denormal, with a bias
    w[5], b[5] = 1e-40 * sign, 0.0           # denormal, no bias
    return w, b, {0, 4, 5}


def _float_model(with_bias: bool, seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    g = Graph("main")

    def add(name, shape, data=None):
        g.add_tensor(Tensor(name, tuple(shape), "float32", data))
        return name

    x = add("x", (1, 5, 5, 3))
    g.inputs.append(x)
    w, b, _ = _degenerate_conv_weights(rng)
    ins = [x, add("w", w.shape, w)] + ([add("b", b.shape, b)] if with_bias else [])
    attrs = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "group": 1,
             "kernel_shape": [3, 3], "pads": same_pads((5, 5), [3, 3], [1, 1], [1, 1]),
             "activation": "NONE"}
    g.nodes.append(Node("Conv2D", ins, [add("conv", (1, 5, 5, 8))], attrs, "conv"))
    shape = np.array([1, 200], np.int32)
    g.nodes.append(Node("Reshape", ["conv", add_const(g, "shape", shape)],
                        [add("flat", (1, 200))], {}, "flat"))
    fw = rng.normal(0, 0.1, (4, 200)).astype(np.float32)
    fw[1] = 1e-30  # a near-zero row next to a bias: widened when FC is per channel
    fb = np.array([0.1, 0.3, 0.0, -0.2], np.float32)
    g.nodes.append(Node("FullyConnected", ["flat", add("fw", fw.shape, fw), add("fb", (4,), fb)],
                        [add("y", (1, 4))], {"activation": "NONE", "keep_num_dims": False}, "fc"))
    g.outputs.append("y")
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


def add_const(g, name, data):
    g.add_tensor(Tensor(name, data.shape, str(data.dtype), data))
    return name


def _normal(values) -> bool:
    v = np.abs(np.asarray(values, np.float64))
    return bool(np.all(np.isfinite(v)) and np.all(v >= TINY))


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("fc_per_channel", [False, True])
def test_degenerate_channels_run_bit_exact_in_tflm(tmp_path, with_bias, fc_per_channel):
    src = tmp_path / "degenerate.tflite"
    src.write_bytes(_float_model(with_bias))
    out, report = tmp_path / "int8.tflite", tmp_path / "q.json"
    args = ["quantize", str(src), "--calibration-random", "16", "-o", str(out),
            "--report", str(report)] + (["--fc-per-channel"] if fc_per_channel else [])
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    graph = load_model(out).graph
    for t in graph.tensors.values():
        if t.quant is not None and t.quant.scale.size:
            assert _normal(t.quant.scale), (t.name, t.quant.scale)
    conv = next(n for n in graph.nodes if n.op == "Conv2D")
    s_in = graph.tensors[conv.inputs[0]].quant.scale[0]
    assert _normal(bias_scale(s_in, graph.tensors[conv.inputs[1]].quant.scale))
    for seed in range(4):
        x = random_inputs([((1, 5, 5, 3), np.int8)], seed)[0]
        ours = run_int8(graph, {graph.inputs[0]: x})["y"]
        np.testing.assert_array_equal(run_tflm(out.read_bytes(), seed)[0], ours)
    rows = {row["op"]: row for row in json.loads(report.read_text())["layers"]}
    widened = set(rows["Conv2D"]["widened_channels"])
    expected = {0, 4, 5} if with_bias else {5, 4}
    assert expected <= widened and not widened & {1, 2, 6, 7}
    # the FC reads the 1e30 channel: its input scale is so coarse that even its 1e-30 row needs
    # no wider scale for the bias; nothing else may be widened
    assert set(rows["FullyConnected"]["widened_channels"]) <= {1}
    # one summary line, its counts those of the JSON report
    printed = [line for line in r.output.splitlines() if line.startswith("widened weight")]
    assert len(printed) == 1 and len(printed[0]) <= 100, printed
    layers = [row["widened_channels"] for row in rows.values() if row.get("widened_channels")]
    if len(layers) == 1:
        assert printed[0].startswith("widened weight scales (int32 bias guard): conv channels ")
    else:
        n = sum(map(len, layers))
        assert f": {n} channel{'s' if n != 1 else ''} in {len(layers)} layers (" in printed[0]


def test_near_zero_channel_matches_the_tflite_converter_rule():
    """A 1e-30 channel with a bias of 0.3: the scale is the smallest that keeps bias plus the
    worst-case accumulator in int32 (within one part in 1e6), its weights quantize to 0 and the
    bias keeps its value."""
    w = np.full((2, 27), 1e-30, np.float32)
    w[1] = np.linspace(-1, 1, 27)
    b = np.array([0.3, 0.1], np.float32)
    s_in = 0.02
    w_q, s_w, b_q, widened = quantize_layer(w, b, s_in, 0)
    assert list(widened) == [True, False]
    assert np.all(w_q[0] == 0) and abs(int(b_q[0])) <= INT32_MAX
    smallest = 0.3 / s_in / (INT32_MAX - 1 - 255 * 27 / 2)
    assert smallest <= s_w[0] <= smallest * (1 + 1e-6)
    assert abs(b_q[0] * float(bias_scale(s_in, s_w[0])) - 0.3) < 1e-6
    assert s_w[1] == np.float32(1.0 / 127)


@pytest.mark.parametrize("value", [0.0, 1e-45, 1e-38, 1e-30, 1.0, 1e30, 3e38])
@pytest.mark.parametrize("bias", [None, 0.0, 1e-3, 0.3, 1e6])
def test_every_scale_normal_and_bias_in_int32(value, bias):
    w = np.full((3, 8), value, np.float32)
    w[2] = 0.5
    b = None if bias is None else np.full(3, bias, np.float32)
    for s_in in (1e-6, 0.02, 3.0):
        w_q, s_w, b_q, _ = quantize_layer(w, b, s_in, 0)
        assert _normal(s_w) and _normal(bias_scale(s_in, s_w))
        if b_q is not None:
            worst = np.abs(w_q.astype(np.int64)).sum(axis=1) * 255
            assert np.all(np.abs(b_q.astype(np.int64)) + worst <= INT32_MAX)


@pytest.mark.parametrize("name", ["pretrainedResnet.tflite", "kws_ref_model_float32.tflite"])
def test_mlperf_float_models_quantize(tmp_path, name):
    out = tmp_path / "int8.tflite"
    r = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / name), "--calibration-random",
                                  "4", "-o", str(out)])
    assert r.exit_code == 0, r.output
    graph = load_model(out).graph
    x = random_inputs([(graph.tensors[graph.inputs[0]].shape, np.int8)], 0)[0]
    ours = run_int8(graph, {graph.inputs[0]: x})
    np.testing.assert_array_equal(run_tflm(out.read_bytes(), 0)[0], ours[graph.outputs[0]])
