"""`layer_params`, the parameters TFLite Micro computes at Prepare time, against TFLite Micro.

TFLM does not expose its per-layer multipliers and shifts to Python, so they are checked (1)
against an independent derivation from the tensors' scales, (2) through bit-exact outputs, and
(3) with probe layers whose biases sit where requantizing with the multiplier one LSB off
changes the output: TFLM agrees with our multiplier and disagrees with its neighbours and with
the other product formula (float32 vs double) where those differ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.int8_models import CONV, INT8_MODELS, Q8, tflm
from helpers.int8_models import flip_accs, requant

from qconvert.executor.int_executor import run_int8
from qconvert.int8.multipliers import quantize_multiplier
from qconvert.int8.prepare import layer_params
from qconvert.formats.model_io import load_model
from qconvert.formats.tflite_reader import read_tflite


def _frexp_multiplier(real: float) -> tuple:
    """QuantizeMultiplier written out independently (Python floats are doubles)."""
    if real == 0:
        return 0, 0
    q, e = math.frexp(real)
    m = math.floor(abs(q) * 2**31 + 0.5)  # q > 0: half away from zero
    if m == 2**31:
        m, e = 2**30, e + 1
    if e < -31:
        return 0, 0
    return m, e


@pytest.mark.parametrize("path", INT8_MODELS[:2], ids=lambda p: p.name)
def test_layer_params_of_conv_depthwise_fc_layers(path):
    g = load_model(path).graph
    checked = 0
    for node in g.nodes:
        if node.op not in ("Conv2D", "DepthwiseConv2D", "FullyConnected"):
            continue
        p = layer_params(g, node)
        x, w, b, y = (g.tensors[n] for n in (node.inputs[0], node.inputs[1], node.inputs[2],
                                              node.outputs[0]))
        s_in, s_out = float(x.quant.scale[0]), float(y.quant.scale[0])
        z_in, z_out = int(x.quant.zero_point[0]), int(y.quant.zero_point[0])
        scales = [float(s) for s in w.quant.scale]
        if node.op == "FullyConnected" and len(scales) == 1:
            expected = [s_in * scales[0] / s_out]
        else:
            channels = w.data.shape[3 if node.op == "DepthwiseConv2D" else 0]
            expected = [s_in * (scales[c] if len(scales) > 1 else scales[0]) / s_out
                        for c in range(channels)]
        pairs = [_frexp_multiplier(r) for r in expected]
        np.testing.assert_array_equal(p["output_multiplier"], [m for m, _ in pairs])
        np.testing.assert_array_equal(p["output_shift"], [e for _, e in pairs])
        assert p["output_multiplier"].dtype == np.int32 and p["output_shift"].dtype == np.int32
        assert p["input_offset"] == -z_in and p["output_offset"] == z_out
        np.testing.assert_array_equal(p["bias"], b.data)
        lo = z_out if node.attrs["activation"] in ("RELU", "RELU6") else -128
        assert p["activation_min"] == max(-128, lo)
        if node.attrs["activation"] == "RELU6":
            assert p["activation_max"] == min(127, z_out + round(6 / s_out))
        else:
            assert p["activation_max"] == 127
        checked += 1
    assert checked >= 9


def _probe_scales(rng, want_product_difference: bool):
    """(s_in, s_w, s_out) float32 with a real multiplier near 2**-23 (many observable ties);
    when asked, the float32 and double products give different quantized multipliers."""
    for _ in range(200000):
        s_in = np.float32(rng.uniform(0.01, 0.1))
        s_w = np.float32(rng.uniform(0.001, 0.01))
        s_out = np.float32(float(s_in) * float(s_w) * 2**23 * rng.uniform(1, 2))
        m_d, e_d = quantize_multiplier(float(s_in) * float(s_w) / float(s_out))
        m_f, e_f = quantize_multiplier(float(s_in * s_w) / float(s_out))
        if (m_d != m_f or e_d != e_f) == want_product_difference:
            return s_in, s_w, s_out, (int(m_d), int(e_d)), (int(m_f), int(e_f))
    raise AssertionError("no scales found")


def _probe_model(op: str, s_in, s_w, s_out, biases: list) -> bytes:
    """A layer with all-zero weights: every output is requantize(bias[c]) + 0."""
    n = Q8()
    c = len(biases)
    x = n.input("x", (1, 1, 1, 1) if op != "FullyConnected" else (1, 1), s_in, 0)
    scale = np.full(c, s_w, np.float32) if op != "FullyConnected" or c == 1 else np.float32(s_w)
    if op == "FullyConnected":
        w = n.const("w", np.zeros((c, 1), np.int8), scale, axis=0)
        out_shape = (1, c)
        attrs = {"activation": "NONE", "keep_num_dims": False}
    else:
        w = n.const("w", np.zeros((c, 1, 1, 1), np.int8), scale, axis=0)
        out_shape = (1, 1, 1, c)
        attrs = dict(CONV, kernel_shape=[1, 1], pads=[0, 0, 0, 0])
    b = n.const("b", np.asarray(biases, np.int32), np.float32(s_in * s_w), axis=0)
    n.node(op, [x, w, b], "y", out_shape, s_out, 0, **attrs)
    return n.build(["y"])


def test_layer_params_multipliers_are_tflms_to_the_last_bit():
    rng = np.random.default_rng(3)
    # Conv2D and FullyConnected, per-tensor weights included: double(s_in) * double(s_w) /
    # double(s_out); a float32 product s_in * s_w (what GetQuantizedConvolutionMultipler's
    # source suggests for per-tensor FC) is refuted by TFLM itself.
    for op in ("FullyConnected", "Conv2D"):
        s_in, s_w, s_out, dbl, flt = _probe_scales(rng, want_product_difference=True)
        ours, other = dbl, flt
        m, s = ours
        accs = (flip_accs(m, s, m + 1, s, 4) + flip_accs(m, s, m - 1, s, 4)
                + flip_accs(m, s, *other, 4))
        assert len(accs) >= 8
        data = _probe_model(op, s_in, s_w, s_out, accs)
        g = read_tflite(data).graph
        p = layer_params(g, g.nodes[0])
        assert (int(p["output_multiplier"][0]), int(p["output_shift"][0])) == ours
        x = np.zeros(g.tensors["x"].shape, np.int8)
        ref = tflm(data, [x])[0].reshape(-1)
        np.testing.assert_array_equal(run_int8(g, {"x": x})["y"].reshape(-1), ref)
        np.testing.assert_array_equal(requant(accs, m, s), ref)
        for alt in ((m + 1, s), (m - 1, s), other):  # one LSB off, or the other formula
            assert np.any(requant(accs, *alt) != ref)
