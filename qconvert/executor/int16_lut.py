"""The 16-bit table paths of TFLite Micro's int16 SOFTMAX, LOGISTIC and TANH kernels, on numpy
arrays (the tables and their scaling are `qconvert.int8.lut16`'s)."""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import clz32
from qconvert.int8.lut16 import lut16_lookup, sigmoid_table, softmax_luts


def _scaled_input(x, multiplier: int, left_shift: int):
    if multiplier == 0:  # power-of-two input scale
        multiplier, left_shift = 3 << left_shift, 0
    rounding = (1 << (left_shift - 1)) if left_shift > 0 else 0
    return (np.asarray(x, dtype=np.int64) * multiplier + rounding) >> left_shift


def _sigmoid_interpolated(a, bits: int, saturated: int) -> np.ndarray:
    """The sigmoid table at a / 2**bits, interpolated over the low `bits` bits of `a` (9:
    logistic, 8: tanh); `saturated` past the table's end."""
    table = sigmoid_table()
    uh = a >> bits
    idx = np.minimum(uh, 254)
    ua, ub = table[idx], table[idx + 1]
    return np.where(uh >= 255, saturated, (ua << bits) + (a & ((1 << bits) - 1)) * (ub - ua))


def logistic16(x, multiplier: int, left_shift: int) -> np.ndarray:
    """reference_integer_ops::Logistic (int16): the table read at |x| / 2**9 with 9 bits of
    interpolation, mirrored for negative inputs, Q0.15 output."""
    v = _scaled_input(x, multiplier, left_shift)
    result = _sigmoid_interpolated(np.abs(v), 9, 0x7FFF << 10)
    result = np.where(v >= 0, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1)
    return (result >> 10).astype(np.int16)


def tanh16(x, multiplier: int, left_shift: int) -> np.ndarray:
    """reference_integer_ops::Tanh (int16): the sigmoid table read at |x| / 2**8 with 8 bits of
    interpolation, 2 sigmoid - 1, Q0.15 output."""
    v = _scaled_input(x, multiplier, left_shift)
    result = _sigmoid_interpolated(np.abs(v), 8, 0xFFFF << 8)
    result = np.where(v >= 0, result - (1 << 23) + (1 << 7), -result + (1 << 23) + (1 << 7) - 1)
    result = result >> 8
    return (((result + 32768) & 0xFFFF) - 32768).astype(np.int16)


def softmax16(x, input_multiplier: int, input_left_shift: int, mbqm) -> np.ndarray:
    """reference_ops::SoftmaxInt16 along the last axis: exp of the rescaled differences to the
    row max from the exp table, their int32 sum normalized by its leading zeros, reciprocal from
    the 1 / (1 + x) table, products rounded back to Q0.15 in [0, 32767]. `mbqm(values,
    multiplier, shift)` is TFLite's int32 MultiplyByQuantizedMultiplier."""
    exp_lut, recip_lut = softmax_luts()
    v = np.asarray(x, dtype=np.int64)
    diff = v - v.max(axis=-1, keepdims=True)
    scaled = np.asarray(mbqm(diff, input_multiplier, input_left_shift), dtype=np.int64)
    exps = lut16_lookup(np.clip(scaled + 32767, -32768, 32767), exp_lut)
    total = exps.sum(axis=-1, keepdims=True)
    headroom = clz32(total)
    shifted = ((total << (headroom - 1)) + (1 << 13)) >> 14
    sym = np.clip(shifted - (1 << 15) - (1 << 16), -32768, 32767)
    recip = lut16_lookup(sym, recip_lut)
    right = 31 - headroom
    out = (exps * recip + (np.int64(1) << (right - 1))) >> right
    return np.clip(out, 0, 32767).astype(np.int16)
