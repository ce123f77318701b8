"""Integer kernels of LEAKY_RELU, PRELU, BATCH_MATMUL, ABS, RSQRT and DIV (int8), bit-exact with
TFLite Micro's reference kernels (parameters: `qconvert.int8.prepare.activations` /
`.arithmetic`, where what this TFLite Micro computes at Prepare is described).

- LEAKY_RELU: the identity multiplier at and above z_in, alpha's below (a negative alpha is
  applied as the negated product of its magnitude's multiplier).
- PRELU: below zero the int32 product (x - z_in) * (alpha - z_alpha) is requantized; alpha
  broadcasts against x.
- BATCH_MATMUL: int32 sums of (a - z_a) * (b - z_b) over the accumulation axis, no bias, no fused
  activation; `adj_x` / `adj_y` transpose an operand's last two axes, batch axes broadcast.
- ABS: |x - z_in|, requantized only when the input and output scales differ, + z_out.
- L2_NORMALIZATION: per row of the last axis, (x - z_in) times the inverse square root of the
  row's int32 sum of squares (GetInvSqrtQuantizedMultiplierExp) with 7 more bits of left
  shift, clamped: steps of 1/128.
- RSQRT: per element v = x - z_in (refused below 0, as TFLite Micro's Eval fails; 0 gives the
  type's maximum, 127 or 32767 for 16x8);
  1 / sqrt(v) as gemmlowp's Newton-Raphson inverse square root, scaled up by 2**20, then
  requantized with the 2**20 taken back out of the shift.
- DIV: per element the divisor's reciprocal (GetReciprocal) times the dividend at full headroom,
  then requantized (a divisor at its zero point, a division by zero, gives TFLite Micro's value
  for it, not an error).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import (INT32_MAX, leading_sign_bits, rdbpot, rdbpot_x86_wide,
                                       requantize_int32, srdhm, wrap32)
from qconvert.int8.prepare.arithmetic import RSQRT_SHIFT
from qconvert.int8.prepare.common import fail
from qconvert.int8.transcendental import get_reciprocal, inv_sqrt_multiplier_exp

from .int_kernel_base import batch_guard, kernel


def _clamp8(x) -> np.ndarray:
    """Saturate to int8."""
    return np.clip(x, -128, 127).astype(np.int8)


@kernel("LeakyRelu")
def leaky_relu(node, inputs, p, ctx):
    """reference_ops::QuantizeLeakyRelu: identity multiplier at and above z_in, alpha's below."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    m_a = p["output_multiplier_alpha"]
    below = requantize_int32(v, abs(m_a), p["output_shift_alpha"], ctx.rounding)
    below = -below if m_a < 0 else below
    above = requantize_int32(v, p["output_multiplier_identity"], p["output_shift_identity"],
                             ctx.rounding)
    return [_clamp8(p["output_zero_point"] + np.where(v >= 0, above, below))]


@kernel("PRelu")
def prelu(node, inputs, p, ctx):
    """reference_ops::BroadcastPrelu4DSlow / Prelu (int8)."""
    x, alpha = inputs[0], inputs[1]
    if alpha.ndim > x.ndim or np.broadcast_shapes(x.shape, alpha.shape) != x.shape:
        fail(node, f"alpha {alpha.shape} does not broadcast to the input {x.shape}")
    v = x.astype(np.int64) + p["input_offset"]
    a = np.broadcast_to(alpha.astype(np.int64) + p["alpha_offset"], v.shape)
    above = requantize_int32(v, p["output_multiplier_1"], p["output_shift_1"], ctx.rounding)
    below = requantize_int32(v * a, p["output_multiplier_2"], p["output_shift_2"], ctx.rounding)
    return [_clamp8(np.where(v >= 0, above, below) + p["output_offset"])]


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
    batch_guard(node, ctx, a.ndim == b.ndim, "BatchMatMul of operands of different ranks")
    acc = wrap32(np.matmul(a, b).astype(np.int64))
    out = requantize_int32(acc, p["output_multiplier"], p["output_shift"],
                           ctx.rounding) + p["output_offset"]
    return [_clamp8(out)]


@kernel("Abs")
def abs_(node, inputs, p, ctx):
    """AbsEvalQuantized (int8)."""
    return [abs_as(inputs[0], p, ctx, np.int8)]


def abs_as(x, p, ctx, dtype) -> np.ndarray:
    """AbsEvalQuantized<T> (int8 or int16 `dtype`): |x - z_in|, requantized when the scales
    differ, + z_out, clamped to the type."""
    v = np.abs(x.astype(np.int64) - p["input_zero_point"])
    if p["needs_rescale"]:
        v = requantize_int32(v, p["output_multiplier"], p["output_shift"], ctx.rounding)
    info = np.iinfo(dtype)
    return np.clip(v + p["output_zero_point"], info.min, info.max).astype(dtype)


@kernel("L2Normalization")
def l2_normalization(node, inputs, p, ctx):
    """L2Normalization (int8): per row of the last axis, d = x - z_in, the int32 sum of d^2,
    its inverse square root as (multiplier, shift) (GetInvSqrtQuantizedMultiplierExp), then
    MultiplyByQuantizedMultiplier(d, multiplier, shift + 7) (TFLite's double rounding in every
    build: no CMSIS-NN kernel replaces it), clamped to int8."""
    d = inputs[0].astype(np.int64) - p["input_zero_point"]
    square = wrap32(np.sum(d * d, axis=-1, keepdims=True))
    m, e = inv_sqrt_multiplier_exp(square)
    out = requantize_int32(d, np.broadcast_to(m, d.shape), np.broadcast_to(e + 7, d.shape),
                           "double")
    return [np.clip(out, -128, 127).astype(np.int8)]


@kernel("Rsqrt")
def rsqrt(node, inputs, p, ctx):
    """RsqrtEvalQuantized (int8)."""
    return [rsqrt_as(node, inputs[0], p, ctx, np.int8)]


def rsqrt_as(node, x, p, ctx, dtype) -> np.ndarray:
    """RsqrtEvalQuantized<T> (int8 or int16 `dtype`): v = x - z_in, refused below 0; 0 gives
    the type's maximum."""
    v = x.astype(np.int64) - p["input_zero_point"]
    if np.any(v < 0):
        fail(node, "input below its zero point: RSQRT is only defined for values >= 0 (TFLite "
                    "Micro stops with an error)")
    m, e = inv_sqrt_multiplier_exp(v)
    left = np.maximum(e + RSQRT_SHIFT, 0)
    right = np.maximum(-(e + RSQRT_SHIFT), 0)
    data = rdbpot(srdhm(wrap32(np.int64(1) << left), m), right)  # MBQM(1, m, e + 20)
    out = requantize_int32(data, p["output_multiplier"], p["output_shift"] - RSQRT_SHIFT,
                           ctx.rounding)
    info = np.iinfo(dtype)
    out = np.clip(out + p["output_zero_point"], info.min, info.max)
    return np.where(v == 0, info.max, out).astype(dtype)


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
    inv, recip_shift = get_reciprocal(b, 31)
    headroom = leading_sign_bits(a)
    quotient = srdhm(wrap32(a << headroom), inv)
    total_shift = p["output_shift"] - recip_shift - headroom
    if np.any(total_shift > 0):
        fail(node, "quotient shift out of range for the output scale")
    out = rdbpot_x86_wide(srdhm(quotient, p["output_multiplier"]), -total_shift) \
        + p["output_offset"]
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]
