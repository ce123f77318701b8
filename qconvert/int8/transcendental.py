"""gemmlowp's fixed-point transcendental functions (`fixedpoint.h`), vectorized over elements.

exp of negative values, 1 / (1 + x), (1 - x) / (1 + x), logistic, tanh, TFLite's GetReciprocal
and the inverse square root of RSQRT, step by step as the C code computes them, so that int8
SOFTMAX, LOGISTIC, TANH, DIV and RSQRT (the executor's kernels and the C exporter's tables) are
bit-exact with TFLite Micro. Raw values are int32 held in int64 arrays (see `fixed_point`);
`Qm.n` names a raw value with m integer and n fractional bits.
"""

from __future__ import annotations

import numpy as np

from .fixed_point import (INT32_MAX, clz32, rdbpot, rounding_half_sum, sat_mul_pot, srdhm,
                          wrap32)


def exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out (gemmlowp's Taylor expansion around -1/8)."""
    constant_term = 1895147668  # exp(-1/8)
    constant_1_over_3 = 715827883
    x = wrap32(a + (1 << 28))  # a + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(wrap32(srdhm(wrap32(x4_over_4 + x3), constant_1_over_3) + x2), 1)
    return wrap32(constant_term + srdhm(constant_term, wrap32(x + poly)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int):
    """exp(a) for a <= 0 given as Q(integer_bits).(31 - integer_bits); result in Q0.31."""
    a = np.asarray(a, dtype=np.int64)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = wrap32((a & (one_quarter - 1)) - one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        sat_mul_pot(a_mod_quarter_minus_one_quarter, integer_bits))
    remainder = wrap32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = (remainder >> (fractional_bits + exponent)) & 1
            result = np.where(bit != 0, srdhm(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (fractional_bits + 5)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal(half_denominator):
    """Three Newton-Raphson steps of gemmlowp's 1 / (1 + x), in Q2.29."""
    x = wrap32(1515870810 + srdhm(half_denominator, -1010580540))  # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus = wrap32((1 << 29) - srdhm(half_denominator, x))
        x = wrap32(x + sat_mul_pot(srdhm(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp's 1 / (1 + x) for x in [0, 1), Q0.31 in and out (Newton-Raphson)."""
    x = _newton_reciprocal(rounding_half_sum(a, INT32_MAX))
    return sat_mul_pot(x, 1)  # Rescale<0>(ExactMulByPot<-1>(x))


def one_minus_x_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp's (1 - x) / (1 + x) for x in [0, 1), Q0.31 in and out."""
    x = _newton_reciprocal(rounding_half_sum(a, INT32_MAX))
    return sat_mul_pot(wrap32(x - (1 << 29)), 2)


def get_reciprocal(x, integer_digits: int) -> tuple:
    """TFLite GetReciprocal of int32 values x read as Q(integer_digits).(31 - integer_digits):
    (reciprocal, num_bits_over_unit) with 1 / x = reciprocal * 2**-num_bits_over_unit, the
    reciprocal in Q0.31 (x is normalized to [1, 2) by its leading zeros first). Used by SOFTMAX
    (the sum of exponentials) and DIV (the divisor). CountLeadingZeros(0) is 32, so x = 0 gives
    TFLite Micro's value, not an error."""
    x = np.asarray(x, dtype=np.int64)
    headroom_plus_one = clz32(x)
    bits_over_unit = integer_digits - headroom_plus_one
    shifted_minus_one = wrap32((((x & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF)
                               - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), bits_over_unit


def fixed_logistic(a, integer_bits: int = 4):
    """gemmlowp logistic of Q(integer_bits) raw values; Q0.31 result."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_input = np.where(positive, a, wrap32(-a))
    result_pos = one_over_one_plus_x_for_x_in_0_1(
        exp_on_negative_values(wrap32(-abs_input), integer_bits))
    result_neg = wrap32(INT32_MAX - result_pos)
    return np.where(a == 0, 1 << 30, np.where(positive, result_pos, result_neg))


def fixed_tanh(a, integer_bits: int = 4):
    """gemmlowp tanh of Q(integer_bits) raw values; Q0.31 result."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, wrap32(-a))
    # neg_tanh_on_negative_values: ExactMulByPot<1> reinterprets the raw with one more
    # integer bit, i.e. exp(2 n).
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, wrap32(-t), t))


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
