"""32-bit fixed-point arithmetic of gemmlowp / TFLite's common.h, on numpy arrays.

The one definition of these primitives in qconvert: the integer executor's kernels, the C
exporter's precomputed tables and the quantizer all use them, so every int8 number qconvert
computes follows the same arithmetic as TFLite Micro and CMSIS-NN.

Every C `int32_t` quantity is held in an int64 array and wrapped back to 32 bits (`wrap32`)
wherever the C code could overflow (two's complement, as on the devices). Two levels:

- the raw primitives (`srdhm`, `rdbpot`, `sat_mul_pot`, `rounding_half_sum`, `clz32`, ...) take
  and return int64 arrays without checks, for kernels that chain them;
- the checked forms (`saturating_rounding_doubling_high_mul`, `rounding_divide_by_pot`,
  `multiply_by_quantized_multiplier`) validate integer dtypes and ranges and return int32, for
  callers outside the kernels; `requantize_int32` is MultiplyByQuantizedMultiplier as kernels
  call it (their int32 value wrapped first, int64 out); `multiply_by_quantized_multiplier_int64`
  is its 64-bit form (16x8 layers with an int64 accumulator).

Shift convention: positive = left shift (TFLite's and CMSIS-NN's).
"""

from __future__ import annotations

import numpy as np

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

ROUNDINGS = ("double", "single")


# -- raw primitives: int64 arrays in and out, no checks --------------------------------------
def wrap32(x):
    """Two's-complement truncation to int32, kept in int64 (C int32 overflow on devices)."""
    return ((np.asarray(x, dtype=np.int64) + 2**31) & 0xFFFFFFFF) - 2**31


def c_div(a, b: int):
    """C integer division (truncates toward zero) of int64 values by a positive int."""
    a = np.asarray(a, dtype=np.int64)
    return np.sign(a) * (np.abs(a) // b)


def srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul of int32 values: round(a * b / 2**31).

    Ties (nudge 2**30 for a*b >= 0, 1 - 2**30 otherwise, then C truncating division) come out as
    floor((a*b + 2**30) / 2**31), i.e. half toward +inf. The single overflowing case
    INT32_MIN * INT32_MIN saturates to INT32_MAX (the ARM VQRDMULH instruction). int64 in/out.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    high = (a * b + 2**30) >> 31  # |a*b| <= 2**62: exact; arithmetic shift = floor division
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high)


def rdbpot(x, exponent):
    """gemmlowp RoundingDivideByPOT: x / 2**exponent rounded to nearest, ties away from zero.

    The second rounding of TFLite's requantization; exponent in [0, 31] (broadcasts against x).
    int64 in/out.
    """
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)  # low bits: same in int64 as in int32


def rdbpot_x86_wide(x, exponent):
    """RoundingDivideByPOT also for exponents 32..63, which int8 DIV reaches when a dividend
    near its zero point meets a large divisor: C leaves that undefined; TFLite Micro's x86 build
    (the test oracle) computes mask = int32(2**e - 1) = -1 and shifts by e mod 32."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    wide = exponent > 31
    threshold = -1 + (x < 0)
    odd = (x >> (exponent & 31)) + (x > threshold)
    return np.where(wide, odd, rdbpot(x, np.minimum(exponent, 31)))


def sat_mul_pot(x, exponent: int):
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> of int32 raw values."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX,
                    np.where(x < -threshold, INT32_MIN, x << exponent))


def rounding_half_sum(a, b):
    """gemmlowp RoundingHalfSum for int32: (a + b + sign) / 2 with C truncating division."""
    s = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t // 2, -((-t) // 2))


def clz32(x):
    """CountLeadingZeros of 32-bit values (as uint32; 32 for 0)."""
    x = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    _, e = np.frexp(x.astype(np.float64))  # exact: x < 2**53
    return np.where(x == 0, 32, 32 - e).astype(np.int64)


def leading_sign_bits(x):
    """CountLeadingSignBits of int32 values (__builtin_clrsb; 31 for 0)."""
    x = np.asarray(x, dtype=np.int64)
    return clz32(np.where(x < 0, ~x, x)) - 1


def mbqm_greater_than_one(x, multiplier: int, left_shift: int):
    """MultiplyByQuantizedMultiplierGreaterThanOne: SRDHM(x * 2**left_shift, multiplier)."""
    return srdhm(wrap32(np.asarray(x, dtype=np.int64) << left_shift), multiplier)


def float_to_int32_x86(v):
    """static_cast<int32_t> of floats as x86 does it: out of range or NaN -> INT32_MIN."""
    v = np.asarray(v, dtype=np.float64)
    ok = np.isfinite(v) & (v >= -2.0**31) & (v < 2.0**31)
    return np.where(ok, np.where(ok, v, 0).astype(np.int64), INT32_MIN)


# -- checked forms: integer dtypes and ranges validated, int32 out ---------------------------
def checked_ints(x, name, lo=INT32_MIN, hi=INT32_MAX):
    """x as an int64 array, after checking it is integer-typed with values in [lo, hi]."""
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got {x.dtype}")
    if x.size and (x.min() < lo or x.max() > hi):
        raise ValueError(f"{name} out of range [{lo}, {hi}]")
    return x.astype(np.int64)


def saturating_rounding_doubling_high_mul(a, b):
    """`srdhm` of int32-valued integer arrays, checked; broadcasts a against b; returns int32."""
    return srdhm(checked_ints(a, "a"), checked_ints(b, "b")).astype(np.int32)


def rounding_divide_by_pot(x, exponent):
    """`rdbpot` of int32 values by an exponent in [0, 31], checked; returns int32."""
    return rdbpot(checked_ints(x, "x"),
                  checked_ints(exponent, "exponent", 0, 31)).astype(np.int32)


def _per_channel(values, acc_ndim, axis, name):
    values = np.asarray(values)
    if axis is None:
        return values
    if values.ndim != 1:
        raise ValueError(f"{name}: per-channel values along axis {axis} must be 1-D")
    shape = [1] * acc_ndim
    shape[axis] = -1
    return values.reshape(shape)


def multiply_by_quantized_multiplier(acc, multiplier, shift, rounding="double", axis=None):
    """Requantize int32 accumulators: about acc * multiplier * 2**(shift - 31), as int32.

    multiplier in [0, 2**31 - 1], shift in [-31, 30] (positive = left), as from
    `multipliers.quantize_multiplier`. With `axis`, multiplier and shift are 1-D per-channel
    values laid along that axis of acc; otherwise they broadcast against acc as numpy arrays do.

    rounding="double" (TFLite / TFLM reference, CMSIS-NN default): x = acc * 2**max(shift, 0)
    in int32, then SaturatingRoundingDoublingHighMul(x, multiplier) (half toward +inf), then
    RoundingDivideByPOT by max(-shift, 0) (half away from zero).
    rounding="single" (CMSIS-NN's arm_nn_requantize with CMSIS_NN_USE_SINGLE_ROUNDING): the
    64-bit product acc * multiplier is shifted right by 31 - shift - 1, then (r + 1) >> 1 in
    64 bits, narrowed to int32 at the end: one rounding, half toward +inf, i.e.
    floor((p + 2**(30 - shift)) / 2**(31 - shift)).
    The two agree for shift >= 0 and differ by at most 1 LSB for shift < 0 (double rounding, and
    negative ties).

    When a result (or double rounding's acc * 2**shift) does not fit in int32, the C code
    overflows; this returns what it computes on a two's-complement target (wraparound), so
    out-of-range values are bit-exact with the device, not meaningful.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    acc = checked_ints(acc, "acc")
    multiplier = _per_channel(checked_ints(multiplier, "multiplier", 0, INT32_MAX), acc.ndim, axis,
                              "multiplier")
    shift = _per_channel(checked_ints(shift, "shift", -31, 30), acc.ndim, axis, "shift")
    if rounding == "single":
        product = acc * multiplier  # < 2**62 in magnitude
        r = product >> (30 - shift)  # int64 new_val >> (total_shift - 1), kept in 64 bits
        return wrap32((r + 1) >> 1).astype(np.int32)  # narrowed only at the return
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    x = wrap32(acc << left)  # x * (1 << left_shift) in int32
    return rdbpot(srdhm(x, multiplier), right).astype(np.int32)


def requantize_int32(x, multiplier, shift, rounding="double"):
    """MultiplyByQuantizedMultiplier of values C holds in int32 (wrapped first, as C would),
    as the kernels call it: int64 out. Out-of-range multipliers or shifts raise ValueError."""
    return multiply_by_quantized_multiplier(wrap32(x), multiplier, shift,
                                            rounding=rounding).astype(np.int64)


def multiply_by_quantized_multiplier_int64(acc, multiplier, shift) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier(int64_t x, ...) of the 16x8 layers with an int64
    accumulator: the Q31 multiplier rounded to Q15 (saturated at 0x7FFF), one rounding shift by
    15 - shift, the result truncated to int32 (CMSIS-NN's arm_nn_requantize_s64 is the same
    arithmetic); int64 array of the int32 results."""
    m = np.asarray(multiplier, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, dtype=np.int64)
    x = np.asarray(acc, dtype=np.int64) * reduced + (np.int64(1) << (total - 1))
    return wrap32(x >> total)
