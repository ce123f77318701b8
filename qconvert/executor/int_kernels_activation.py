"""Integer kernels of SOFTMAX, LOGISTIC, TANH, HARD_SWISH, RELU and RELU6, bit-exact with TFLite
Micro's reference kernels (parameters: `qconvert.int8.prepare.activations`).

The fixed-point transcendental functions (softmax's exp, logistic, tanh) follow gemmlowp's
`fixedpoint.h` step by step (`qconvert.int8.transcendental`), vectorized over elements.
`rounding="single"` changes only the MultiplyByQuantizedMultiplier steps (RELU, the input
scaling of LOGISTIC / TANH), not softmax's scaling.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import rdbpot, requantize_int32, srdhm, wrap32
from qconvert.int8.fixed_point16 import saturating_left_shift16, sdhm16, srdhm16, wrap16
from qconvert.int8.fixed_point import mbqm_greater_than_one
from qconvert.int8.prepare.activations import SCALED_DIFF_INTEGER_BITS
from qconvert.int8.transcendental import (exp_on_negative_values, fixed_logistic, fixed_tanh,
                                          get_reciprocal)

from .int_kernel_base import kernel


_ACCUMULATION_INTEGER_BITS = 12  # the sum of exponentials is Q12.19


@kernel("Softmax")
def softmax(node, inputs, p, ctx):
    """reference_ops::Softmax<int8, int8>: gemmlowp exp of the (rescaled, Q5.26) differences to
    the row max, Q12.19 sum, reciprocal by Newton-Raphson, output (q * 256) - 128."""
    x = inputs[0].astype(np.int64)
    diff = x - x.max(axis=-1, keepdims=True)
    inside = diff >= p["diff_min"]
    rescaled = mbqm_greater_than_one(diff, p["input_multiplier"], p["input_left_shift"])
    exp = exp_on_negative_values(rescaled, SCALED_DIFF_INTEGER_BITS)
    terms = np.where(inside, rdbpot(exp, _ACCUMULATION_INTEGER_BITS), 0)
    total = wrap32(terms.sum(axis=-1, keepdims=True))
    scale, bits_over_unit = get_reciprocal(total, _ACCUMULATION_INTEGER_BITS)
    exponent = bits_over_unit + 31 - 8
    if np.any((exponent < 0) | (exponent > 31)):
        raise ValueError("softmax reciprocal exponent out of range")
    out = rdbpot(srdhm(scale, exp), exponent) - 128
    out = np.where(inside, np.clip(out, -128, 127), -128)
    return [out.astype(np.int8)]


def _q4_input(x, p, ctx):
    """(x - z_in, radius, x - z_in rescaled to Q4.27 by MultiplyByQuantizedMultiplier)."""
    inp = x.astype(np.int64) - p["input_zero_point"]
    m, shift = p["input_multiplier"], p["input_left_shift"]
    if m >= 0 and -31 <= shift <= 30:
        q4 = requantize_int32(inp, m, shift, ctx.rounding)
    else:  # out of MultiplyByQuantizedMultiplier's domain: only saturated outputs remain
        q4 = rdbpot(srdhm(wrap32(inp << max(shift, 0)), m), min(max(-shift, 0), 31))
    return inp, p["input_range_radius"], q4


@kernel("Sigmoid")
def sigmoid(node, inputs, p, ctx):
    """reference_integer_ops::Logistic (int8): saturate outside the input radius, else gemmlowp
    logistic in Q4.27, output RoundingDivideByPOT(., 23) - 128."""
    inp, radius, q4 = _q4_input(inputs[0], p, ctx)
    out = np.clip(rdbpot(fixed_logistic(q4, 4), 31 - 8) - 128, -128, 127)
    out = np.where(inp <= -radius, -128, np.where(inp >= radius, 127, out))
    return [out.astype(np.int8)]


@kernel("Tanh")
def tanh(node, inputs, p, ctx):
    """reference_integer_ops::Tanh (int8): gemmlowp tanh in Q4.27, RoundingDivideByPOT(., 24)."""
    inp, radius, q4 = _q4_input(inputs[0], p, ctx)
    out = np.clip(rdbpot(fixed_tanh(q4, 4), 31 - 7), -128, 127)
    out = np.where(inp <= -radius, -128, np.where(inp >= radius, 127, out))
    return [out.astype(np.int8)]


@kernel("HardSwish")
def hard_swish(node, inputs, p, ctx):
    """reference_ops::HardSwish (quantized): 16-bit fixed point, see hard_swish.h."""
    value = wrap16(inputs[0].astype(np.int64) - p["input_zero_point"])
    hires = wrap16(value * 128)
    preshift = srdhm16(hires, p["output_multiplier_fixedpoint_int16"])
    rel = hires
    e = p["reluish_multiplier_exponent"]
    if e > 0:
        rel = saturating_left_shift16(rel, e - 1)
    rel = srdhm16(rel, p["reluish_multiplier_fixedpoint_int16"])
    if e > 0:
        rel = saturating_left_shift16(rel, 1)
    if e < 0:
        rel = rdbpot(rel, -e)
    rel = (rel + (1 << 15)) >> 1
    pre = sdhm16(rel, preshift)
    out = wrap16(rdbpot(pre, -p["output_multiplier_exponent"]) + p["output_zero_point"])
    return [np.clip(out, -128, 127).astype(np.int8)]


@kernel("Relu")
def relu(node, inputs, p, ctx):
    """RELU (TFLM ReluQuantized): x - z_in requantized to the output, plus z_out, clamped."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    out = p["output_zero_point"] + requantize_int32(v, p["output_multiplier"],
                                                    p["output_shift"], ctx.rounding)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


@kernel("Relu6")
def relu6(node, inputs, p, ctx):
    """RELU6 (int8): the raw values clamped to the input's [0, 6] (no requantization)."""
    x = inputs[0]
    out = np.where(x > p["six"], p["six"], np.where(x < p["zero"], p["zero"], x))
    return [out.astype(np.int8)]
