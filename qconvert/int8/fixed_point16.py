"""16-bit fixed-point arithmetic of TFLite's int8 HARD_SWISH (reference_ops::HardSwish).

HardSwish computes in int16 with gemmlowp's 16-bit high multiplies; values are held in int64
arrays and wrapped to 16 bits where the C code truncates (see `fixed_point` for the 32-bit ones).
"""

from __future__ import annotations

import numpy as np

from .fixed_point import c_div


def wrap16(x):
    """Two's-complement truncation to int16, kept in int64."""
    return ((np.asarray(x, dtype=np.int64) + 2**15) & 0xFFFF) - 2**15


def srdhm16(a, b):
    """Saturating rounding doubling high multiply of int16 values (gemmlowp, int16 flavour)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = wrap16(c_div(ab + nudge, 1 << 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


def sdhm16(a, b):
    """SaturatingDoublingHighMul (hard_swish.h): like srdhm16 but truncating toward zero."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    high = wrap16(c_div(a * b, 1 << 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


def saturating_left_shift16(x, amount: int):
    """x << amount saturated to int16."""
    return np.clip(np.asarray(x, dtype=np.int64) << amount, -32768, 32767)
