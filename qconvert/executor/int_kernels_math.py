"""Integer kernels of LEAKY_RELU, PRELU, BATCH_MATMUL, RSQRT and DIV (int8), bit-exact with
TFLite Micro's reference kernels; registered into `int_kernels.INT_PARAMS` / `INT_KERNELS` (same
contract and conventions: see that module's docstring).

What TFLite Micro computes, each pinned by a test against its interpreter:
- LEAKY_RELU: two multipliers of double ratios, `s_in / s_out` (x >= z_in) and
  `s_in * alpha / s_out` (below); a negative alpha is applied as the negated product of its
  magnitude's multiplier.
- PRELU: double ratios `s_in / s_out` and `s_in * s_alpha / s_out`; below zero the int32
  product (x - z_in) * (alpha - z_alpha) is requantized; alpha broadcasts against x.
- BATCH_MATMUL: int32 sums of (a - z_a) * (b - z_b) over the accumulation axis, one multiplier
  of double `s_a * s_b / s_out` (as conv), no bias, no fused activation; `adj_x` / `adj_y`
  transpose an operand's last two axes, batch axes broadcast.
- RSQRT: per element v = x - z_in (refused below 0, as TFLite Micro's Eval fails; 0 gives
  127); 1 / sqrt(v) as gemmlowp's Newton-Raphson inverse square root (GetInvSqrtQuantized-
  MultiplierExp), scaled up by 2**20, then requantized by `1 / (sqrt(s_in) * s_out)` (in
  double) with the 2**20 taken back out of the shift.
- DIV: one multiplier of double `s1 / (s2 * s_out)`; per element the divisor's reciprocal
  (GetReciprocal) times the dividend at full headroom, then requantized (a divisor at its zero
  point, a division by zero, gives TFLite Micro's value for it, not an error).

This TFLite Micro takes every ratio above in double, where its sources of mid-2026 still had
float32 arithmetic for LEAKY_RELU, DIV, BATCH_MATMUL and RSQRT: tests/test_int_kernels_math.py
pins each at rounding ties, where only the double forms give its bits.
"""

from __future__ import annotations

import math

import numpy as np

from .int_kernels import (INT32_MAX, _act_range, _batch_guard, _fail, _mbqm, _per_tensor,
                          _quantize_multipliers, clz32, kernel, one_over_one_plus_x_for_x_in_0_1,
                          params, rdbpot, sat_mul_pot, srdhm, wrap32)


def _clamp8(x) -> np.ndarray:
    return np.clip(x, -128, 127).astype(np.int8)


# -- LEAKY_RELU ------------------------------------------------------------------------------------
@params("LeakyRelu")
def leaky_relu_params(graph, node) -> dict:
    """CalculateOpDataLeakyRelu as this TFLite Micro computes it: QuantizeMultiplier of
    double(s_in) * double(alpha) / double(s_out) and of double(s_in) / double(s_out) (double
    ratios: float32 ones, as older sources write them, are refuted at rounding ties)."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    alpha = node.attrs.get("alpha")
    alpha = np.float32(0.01 if alpha is None else alpha)
    alpha_real = float(s_in) * float(alpha) / float(s_out)
    m_a, e_a = _quantize_multipliers(node, abs(alpha_real))
    m_i, e_i = _quantize_multipliers(node, float(s_in) / float(s_out))
    return {"input_zero_point": z_in, "output_zero_point": z_out,
            "output_multiplier_alpha": int(m_a) * (-1 if alpha_real < 0 else 1),
            "output_shift_alpha": int(e_a), "output_multiplier_identity": int(m_i),
            "output_shift_identity": int(e_i)}


@kernel("LeakyRelu")
def leaky_relu(node, inputs, p, ctx):
    """reference_ops::QuantizeLeakyRelu: identity multiplier at and above z_in, alpha's below."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    m_a = p["output_multiplier_alpha"]
    below = _mbqm(v, abs(m_a), p["output_shift_alpha"], ctx)
    below = -below if m_a < 0 else below
    above = _mbqm(v, p["output_multiplier_identity"], p["output_shift_identity"], ctx)
    return [_clamp8(p["output_zero_point"] + np.where(v >= 0, above, below))]


# -- PRELU -----------------------------------------------------------------------------------------
@params("PRelu")
def prelu_params(graph, node) -> dict:
    """CalculatePreluParams: QuantizeMultiplier of double(s_in) / double(s_out) and of
    double(s_in) * double(s_alpha) / double(s_out); offsets -z_in, -z_alpha, +z_out."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_a, z_a = _per_tensor(graph, node, node.inputs[1])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    m1, e1 = _quantize_multipliers(node, float(s_in) / float(s_out))
    m2, e2 = _quantize_multipliers(node, float(s_in) * float(s_a) / float(s_out))
    return {"input_offset": -z_in, "alpha_offset": -z_a, "output_offset": z_out,
            "output_multiplier_1": int(m1), "output_shift_1": int(e1),
            "output_multiplier_2": int(m2), "output_shift_2": int(e2)}


@kernel("PRelu")
def prelu(node, inputs, p, ctx):
    """reference_ops::BroadcastPrelu4DSlow / Prelu (int8)."""
    x, alpha = inputs[0], inputs[1]
    if alpha.ndim > x.ndim or np.broadcast_shapes(x.shape, alpha.shape) != x.shape:
        _fail(node, f"alpha {alpha.shape} does not broadcast to the input {x.shape}")
    v = x.astype(np.int64) + p["input_offset"]
    a = np.broadcast_to(alpha.astype(np.int64) + p["alpha_offset"], v.shape)
    above = _mbqm(v, p["output_multiplier_1"], p["output_shift_1"], ctx)
    below = _mbqm(v * a, p["output_multiplier_2"], p["output_shift_2"], ctx)
    return [_clamp8(np.where(v >= 0, above, below) + p["output_offset"])]


# -- BATCH_MATMUL ----------------------------------------------------------------------------------
@params("BatchMatMul")
def batch_matmul_params(graph, node) -> dict:
    """BatchMatMulPrepare (int8) as this TFLite Micro computes it: QuantizeMultiplier of
    double(s_a) * double(s_b) / double(s_out) (the float32 product older sources write is
    refuted at rounding ties); the output clamps are the int8 range."""
    s_a, z_a = _per_tensor(graph, node, node.inputs[0])
    s_b, z_b = _per_tensor(graph, node, node.inputs[1])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    real = float(s_a) * float(s_b) / float(s_out)
    m, e = _quantize_multipliers(node, real)
    return {"lhs_offset": -z_a, "rhs_offset": -z_b, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(e),
            "adj_x": bool(node.attrs.get("adj_x")), "adj_y": bool(node.attrs.get("adj_y"))}


@kernel("BatchMatMul")
def batch_matmul(node, inputs, p, ctx):
    """reference_ops::BatchMatMul<int8_t, int32_t>: exact int32 sums (float64 BLAS: every partial
    sum is an integer below 2**53), requantized, + z_out, clamped to int8."""
    a = inputs[0].astype(np.float64) + p["lhs_offset"]
    b = inputs[1].astype(np.float64) + p["rhs_offset"]
    if p["adj_x"]:
        a = np.swapaxes(a, -1, -2)
    if p["adj_y"]:
        b = np.swapaxes(b, -1, -2)
    _batch_guard(node, ctx, a.ndim == b.ndim, "BatchMatMul of operands of different ranks")
    acc = wrap32(np.matmul(a, b).astype(np.int64))
    out = _mbqm(acc, p["output_multiplier"], p["output_shift"], ctx) + p["output_offset"]
    return [_clamp8(out)]


# -- RSQRT -----------------------------------------------------------------------------------------
_RSQRT_SHIFT = 20  # kShift of RsqrtEvalQuantized


@params("Rsqrt")
def rsqrt_params(graph, node) -> dict:
    """PrepareAbsRsqrt (RSQRT, int8) as this TFLite Micro computes it: QuantizeMultiplier of
    1 / (sqrt(double(s_in)) * double(s_out)) (the float32 sqrtf and product of older sources
    are refuted at rounding ties)."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    real = 1.0 / (math.sqrt(float(s_in)) * float(s_out))
    m, e = _quantize_multipliers(node, real)
    if not -31 <= int(e) - _RSQRT_SHIFT <= 30:
        _fail(node, f"output scale {s_out} out of range for RSQRT's input scale {s_in}")
    return {"input_zero_point": z_in, "output_zero_point": z_out, "output_multiplier": int(m),
            "output_shift": int(e)}


def inv_sqrt_multiplier_exp(v) -> tuple:
    """GetInvSqrtQuantizedMultiplierExp(v, reverse_shift=-1) of int32 values v >= 0:
    (multiplier, shift) with 1 / sqrt(v) ~ multiplier * 2**(shift - 31) (v <= 1: INT32_MAX, 0)."""
    v = np.asarray(v, dtype=np.int64)
    x_in = np.maximum(v, 2)
    shift = np.full(v.shape, 11, np.int64)
    while np.any(x_in >= (1 << 29)):
        big = x_in >= (1 << 29)
        x_in = np.where(big, x_in // 4, x_in)
        shift = shift + big
    pairs = (clz32(x_in) - 1) // 2 - 1
    shift = shift - pairs
    x_in = x_in << (2 * pairs)
    raw = x_in >> 1                      # F3 (3 integer bits)
    half = rdbpot(raw, 1)                # SaturatingRoundingMultiplyByPOT<-1>
    half_three = (1 << 28) + (1 << 27)   # 1.5 in F3
    x = np.full(v.shape, 1 << 28, np.int64)  # F3::One()
    for _ in range(5):
        x3 = sat_mul_pot(srdhm(srdhm(x, x), x), 6)          # Rescale<3> of an F9 product
        x = sat_mul_pot(wrap32(srdhm(half_three, x) - srdhm(half, x3)), 3)  # F6 -> F3
    x = srdhm(x, 1518500250)             # * sqrt(2) / 2 (F0)
    x = np.where(shift < 0, wrap32(x << np.maximum(-shift, 0)), x)
    shift = np.where(shift < 0, 0, shift)
    x = np.where(v <= 1, INT32_MAX, x)
    shift = np.where(v <= 1, 0, shift)
    return x, -shift


@kernel("Rsqrt")
def rsqrt(node, inputs, p, ctx):
    """RsqrtEvalQuantized (int8)."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    if np.any(v < 0):
        _fail(node, "input below its zero point: RSQRT is only defined for values >= 0 (TFLite "
                    "Micro stops with an error)")
    m, e = inv_sqrt_multiplier_exp(v)
    left = np.maximum(e + _RSQRT_SHIFT, 0)
    right = np.maximum(-(e + _RSQRT_SHIFT), 0)
    data = rdbpot(srdhm(wrap32(np.int64(1) << left), m), right)  # MBQM(1, m, e + 20)
    out = _mbqm(data, p["output_multiplier"], p["output_shift"] - _RSQRT_SHIFT, ctx)
    out = out + p["output_zero_point"]
    return [np.where(v == 0, 127, _clamp8(out)).astype(np.int8)]


# -- DIV -------------------------------------------------------------------------------------------
@params("Div")
def div_params(graph, node) -> dict:
    """CalculateOpDataDiv (int8) as this TFLite Micro computes it: QuantizeMultiplier of
    double(s1) / (double(s2) * double(s_out)) (a float32 quotient, as older sources write it,
    is refuted at rounding ties); offsets -z1, -z2, +z_out; the fused activation's clamps."""
    s1, z1 = _per_tensor(graph, node, node.inputs[0])
    s2, z2 = _per_tensor(graph, node, node.inputs[1])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    m, e = _quantize_multipliers(node, float(s1) / (float(s2) * float(s_out)))
    act_min, act_max = _act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(e),
            "activation_min": act_min, "activation_max": act_max}


def _rdbpot_wide(x, exponent):
    """gemmlowp RoundingDivideByPOT also for exponents 32..63, which DIV reaches when a dividend
    near its zero point meets a large divisor: C leaves that undefined; TFLite Micro's x86 build
    (the test oracle) computes mask = int32(2**e - 1) = -1 and shifts by e mod 32."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    wide = exponent > 31
    threshold = -1 + (x < 0)
    odd = (x >> (exponent & 31)) + (x > threshold)
    return np.where(wide, odd, rdbpot(x, np.minimum(exponent, 31)))


def _leading_sign_bits(x):
    """CountLeadingSignBits of int32 values (__builtin_clrsb; 31 for 0)."""
    x = np.asarray(x, dtype=np.int64)
    return clz32(np.where(x < 0, ~x, x)) - 1


@kernel("Div")
def div(node, inputs, p, ctx):
    """reference_ops::DivElementwise / BroadcastDivSlowQuantized (int8): the divisor's
    reciprocal by GetReciprocal (gemmlowp 1 / (1 + x)), the dividend shifted up by its headroom,
    one rounding multiply, then the output multiplier with the combined shift. A divisor at its
    zero point (a division by zero) gives what TFLite Micro computes for it (GetReciprocal of 0
    is defined: CountLeadingZeros(0) = 32). Always TFLite's double rounding (CMSIS-NN has no
    int8 DIV)."""
    a, b = np.broadcast_arrays(inputs[0].astype(np.int64) + p["input1_offset"],
                               inputs[1].astype(np.int64) + p["input2_offset"])
    a = np.where(b < 0, -a, a)
    b = np.abs(b)
    headroom_plus_one = clz32(b)
    recip_shift = 31 - headroom_plus_one
    shifted = wrap32(((b << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    inv = one_over_one_plus_x_for_x_in_0_1(shifted)
    headroom = _leading_sign_bits(a)
    quotient = srdhm(wrap32(a << headroom), inv)
    total_shift = p["output_shift"] - recip_shift - headroom
    if np.any(total_shift > 0):
        _fail(node, "quotient shift out of range for the output scale")
    out = _rdbpot_wide(srdhm(quotient, p["output_multiplier"]), -total_shift) + p["output_offset"]
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]
