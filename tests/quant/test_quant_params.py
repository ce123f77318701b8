"""Quantization parameters (qconvert.quant.params) as properties, checked with hypothesis:
zero is exactly representable, the calibrated range is covered, weights use the full symmetric
range per channel, biases land in int32 with the scale float32(s_in) * float32(s_w), the two
guards (all-zero channel, bias overflow) hold, and no scale is ever 0, inf or NaN."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from qconvert.quant.params import activation_params, bias_scale, quantize_layer

INT32_MAX = 2**31 - 1
finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@settings(max_examples=300, deadline=None)
@given(finite, finite)
def test_activation_range_covers_zero_and_the_range(a, b):
    lo, hi = min(a, b), max(a, b)
    scale, zp = activation_params(lo, hi)
    assert np.isfinite(scale) and scale > 0 and -128 <= zp <= 127
    # zero is the integer zp exactly; lo and hi are within one step of the int8 grid's ends
    real_min = (-128 - zp) * float(scale)
    real_max = (127 - zp) * float(scale)
    step = float(scale)
    assert real_min <= min(lo, 0) + step and real_max >= max(hi, 0) - step


def test_activation_range_of_only_zeros_has_a_usable_scale():
    assert activation_params(0.0, 0.0) == (np.float32(1.0), 0)


arrays = st.builds(lambda seed, c, k, zero: (seed, c, k, zero), st.integers(0, 2**32 - 1),
                   st.integers(1, 6), st.integers(1, 20), st.booleans())


@settings(max_examples=200, deadline=None)
@given(arrays, st.floats(1e-4, 10.0), st.booleans())
def test_layer_weights_and_bias(case, s_in, per_channel):
    seed, c, k, zero = case
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((c, k)) * rng.uniform(0.01, 5, (c, 1))).astype(np.float32)
    if zero:
        w[0] = 0.0
    b = (rng.standard_normal(c) * 3).astype(np.float32)
    w_q, s_w, b_q, _ = quantize_layer(w, b, s_in, 0, per_channel)
    assert np.all(np.isfinite(s_w)) and np.all(s_w > 0)
    assert s_w.shape == ((c,) if per_channel else (1,))
    assert w_q.dtype == np.int8 and np.abs(w_q.astype(int)).max() <= 127
    live = np.abs(w).max(axis=1) > 0
    if per_channel:  # every live channel reaches the full range
        assert np.all(np.abs(w_q[live].astype(int)).max(axis=1) == 127)
    scale = np.broadcast_to(bias_scale(s_in, s_w).astype(np.float64), (c,))
    # dequantized bias equals the float bias within half a step
    assert np.all(np.abs(b_q * scale - b) <= scale / 2 + 1e-6 * np.abs(b))
    worst = np.abs(w_q.astype(np.int64)).sum(axis=1) * 255
    assert np.all(np.abs(b_q.astype(np.int64)) + worst <= INT32_MAX)
    # dequantized weights are within half a step of the float weights
    s = s_w.reshape(-1, 1) if per_channel else s_w
    assert np.all(np.abs(w_q * s.astype(np.float64) - w) <= s / 2 + 1e-7)


def test_all_zero_channel_with_bias_keeps_the_bias():
    w = np.zeros((2, 3), np.float32)
    w[1] = [0.5, -1.0, 0.25]
    b = np.array([7.5, 0.1], np.float32)
    w_q, s_w, b_q, _ = quantize_layer(w, b, 0.02, 0)
    assert np.all(w_q[0] == 0) and s_w[0] > 0
    assert abs(b_q[0] * float(np.float32(0.02) * s_w[0]) - 7.5) < 1e-5


def test_bias_that_would_overflow_gets_a_coarser_weight_scale():
    w = np.full((1, 4096), 1e-6, np.float32)
    w[0, 0] = 1e-3
    b = np.array([1e4], np.float32)  # b / (s_in * s_w) would be ~1.3e11
    w_q, s_w, b_q, _ = quantize_layer(w, b, 0.01, 0)
    worst = int(np.abs(w_q.astype(np.int64)).sum()) * 255
    assert abs(int(b_q[0])) + worst <= INT32_MAX
    assert abs(b_q[0] * float(np.float32(0.01) * s_w[0]) - 1e4) < 1e4 * 1e-6
