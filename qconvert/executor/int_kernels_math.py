"""Integer kernels of LEAKY_RELU, PRELU, BATCH_MATMUL and RSQRT (int8), bit-exact with TFLite
Micro's reference kernels; registered into `int_kernels.INT_PARAMS` / `INT_KERNELS` (same
contract and conventions: see that module's docstring).

What TFLite Micro computes, each pinned by a test against its interpreter:
- LEAKY_RELU: two multipliers of float32 ratios, `s_in / s_out` (x >= z_in) and
  `s_in * alpha / s_out` (below); a negative alpha is applied as the negated product of its
  magnitude's multiplier.
- PRELU: double ratios `s_in / s_out` and `s_in * s_alpha / s_out`; below zero the int32
  product (x - z_in) * (alpha - z_alpha) is requantized; alpha broadcasts against x.
- BATCH_MATMUL: int32 sums of (a - z_a) * (b - z_b) over the accumulation axis, one multiplier
  of `float32(s_a * s_b) / s_out` (the product in float32, unlike conv), no bias, no fused
  activation; `adj_x` / `adj_y` transpose an operand's last two axes, batch axes broadcast.
- RSQRT: per element v = x - z_in (refused below 0, as TFLite Micro's Eval fails; 0 gives
  127); 1 / sqrt(v) as gemmlowp's Newton-Raphson inverse square root (GetInvSqrtQuantized-
  MultiplierExp), scaled up by 2**20, then requantized by `1 / (sqrtf(s_in) * s_out)` (float32
  product) with the 2**20 taken back out of the shift.
"""

from __future__ import annotations

import numpy as np

from .int_kernels import (INT32_MAX, _batch_guard, _fail, _mbqm, _per_tensor,
                          _quantize_multipliers, clz32, params, kernel, rdbpot, sat_mul_pot, srdhm,
                          wrap32)


def _clamp8(x) -> np.ndarray:
    return np.clip(x, -128, 127).astype(np.int8)


# -- LEAKY_RELU ------------------------------------------------------------------------------------
@params("LeakyRelu")
def leaky_relu_params(graph, node) -> dict:
    """CalculateOpDataLeakyRelu: QuantizeMultiplier of double(float32(s_in * alpha / s_out)) and
    of double(float32(s_in / s_out))."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    alpha = node.attrs.get("alpha")
    alpha = np.float32(0.01 if alpha is None else alpha)
    alpha_real = float(np.float32(np.float32(s_in * alpha) / s_out))
    m_a, e_a = _quantize_multipliers(node, abs(alpha_real))
    m_i, e_i = _quantize_multipliers(node, float(np.float32(s_in / s_out)))
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
    """BatchMatMulPrepare (int8): QuantizeMultiplier(double(float32(s_a * s_b)) / double(s_out));
    the output clamps are the int8 range."""
    s_a, z_a = _per_tensor(graph, node, node.inputs[0])
    s_b, z_b = _per_tensor(graph, node, node.inputs[1])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    real = float(np.float32(s_a * s_b)) / float(s_out)
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
    """PrepareAbsRsqrt (RSQRT, int8): QuantizeMultiplier(1 / double(sqrtf(s_in) * s_out)) (a
    float32 product)."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    real = 1.0 / float(np.float32(np.sqrt(s_in, dtype=np.float32) * s_out))
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
