"""The lookup tables of TFLite Micro's 16x8 SOFTMAX, LOGISTIC and TANH (int16 activations),
bit-exact with TFLite Micro (tests/executor/test_int16_executor.py). The 64-bit requantization of the
16x8 layers with an int64 accumulator is `fixed_point.multiply_by_quantized_multiplier_int64`.

- SOFTMAX (int16 -> int16): two 513-entry int16 tables built once at Prepare time in float32
  arithmetic (`populate_lut16`): exp(x) over [-10, 0] and 1 / (1 + x) over [0, 1]. Each table
  entry is the rounded sample minus half the rounded error of linear interpolation at the
  midpoint of its step. Lookups (`lut16_lookup`) index with the high 9 bits of the int16
  value and interpolate with the low 7.
- LOGISTIC / TANH (int16 -> int16): the input is brought to Q3.12 times 3/4 by a 15-bit
  multiplier and a right shift (`int16_sigmoid_tanh_scaling`), then read from a 256-entry
  table of sigmoid(i / 24) in unsigned Q0.16 (`sigmoid_table`) with linear interpolation.

TFLite Micro's sigmoid table is not a plain rounding of sigmoid(i / 24) * 65536: 44 entries sit
one above it (`_SIGMOID_TABLE_ROUNDED_UP`, measured against TFLite Micro's outputs). The table is
built here from the formula plus those indices.
"""

from __future__ import annotations

import functools

import numpy as np

from .rounding import round_half_away


F32 = np.float32

# Entries i of the sigmoid(i / 24) Q0.16 table that are one above round(65536 sigmoid(i / 24))
_SIGMOID_TABLE_ROUNDED_UP = (
    4, 8, 12, 14, 15, 16, 17, 19, 20, 21, 22, 25, 27, 28, 29, 30, 31, 33, 34, 35, 37, 39, 40,
    41, 43, 44, 45, 46, 49, 50, 54, 62, 63, 64, 66, 82, 86, 93, 100, 103, 112, 116, 135, 255)


@functools.lru_cache(maxsize=None)
def sigmoid_table() -> np.ndarray:
    """TFLite's 256-entry sigmoid(i / 24) table in unsigned Q0.16 (int64 array)."""
    i = np.arange(256, dtype=np.float64)
    table = np.floor(65536.0 / (1.0 + np.exp(-i / 24.0)) + 0.5).astype(np.int64)
    table[list(_SIGMOID_TABLE_ROUNDED_UP)] += 1
    return np.minimum(table, 65535)


def _expf(x):
    """C expf on float32 values (the double exp rounded once to float32)."""
    return np.exp(np.asarray(x, dtype=np.float64)).astype(F32)


def _one_over_one_plus_x(x):
    return F32(1.0) / (F32(1.0) + np.asarray(x, dtype=F32))


def populate_lut16(input_scale, input_zero_point, output_scale, output_zero_point,
                   transform) -> np.ndarray:
    """TFLite's LUTPopulateInt16<float>: 512 steps over the int16 input range plus one end
    value, in float32 arithmetic, each entry corrected by half its midpoint interpolation
    error; int64 array of 513 int16 values."""
    s_in, s_out = F32(input_scale), F32(output_scale)
    input_min = s_in * F32(-32768 - input_zero_point)
    input_max = s_in * F32(32767 - input_zero_point)
    output_min = s_out * F32(-32768 - output_zero_point)
    output_max = s_out * F32(32767 - output_zero_point)
    steps = 512
    step = (input_max - input_min) / F32(steps)
    half_step = step / F32(2)
    inv = F32(65536) / (output_max - output_min)
    i = np.arange(steps).astype(F32)
    x = input_min + i * step
    val = transform(x)
    val_mid = transform(x + half_step)
    val_next = transform(input_min + (i + F32(1)) * step)
    sample = round_half_away(val * inv)
    interp = round_half_away((val_next * inv + round_half_away(val * inv)) / F32(2))
    mid = round_half_away(val_mid * inv)
    bias = round_half_away((interp - mid) / F32(2))
    lut = np.clip(sample - bias, -32768, 32767)
    last = np.clip(round_half_away(transform(np.array([input_max], F32)) * inv), -32768, 32767)
    return np.concatenate([lut, last]).astype(np.int64)


@functools.lru_cache(maxsize=None)
def softmax_luts() -> tuple:
    """(exp table over [-10, 0], 1 / (1 + x) table over [0, 1]) of TFLM's int16 softmax."""
    span = F32(65535)
    exp_lut = populate_lut16(F32(10.0) / span, 32767, F32(2.0) / span, 0, _expf)
    recip_lut = populate_lut16(F32(1.0) / span, -32768, F32(2.0) / span, 0,
                               _one_over_one_plus_x)
    return exp_lut, recip_lut


def lut16_lookup(value, lut) -> np.ndarray:
    """TFLite's LUTLookup(int16, lut): base at the high 9 bits, slope interpolated over the
    low 7 bits with rounding; int64 array of int16 values (wrapped as the C cast does)."""
    v = np.asarray(value, dtype=np.int64)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = lut[index]
    slope = lut[index + 1] - base
    out = base + ((slope * offset + 64) >> 7)
    return ((out + 32768) & 0xFFFF) - 32768


def checked_log2(x) -> tuple:
    """TFLite's CheckedLog2 in float32: (rounded log2 of x, whether x is a power of two within
    1e-3 of an octave)."""
    x_log2 = F32(np.log(np.float64(F32(x)))) * (F32(1.0) / F32(np.log(np.float64(2.0))))
    rounded = F32(round_half_away(x_log2))
    return int(rounded), bool(abs(F32(x_log2 - rounded)) < F32(1e-3))


def int16_sigmoid_tanh_scaling(input_scale, is_tanh: bool) -> tuple:
    """(input_multiplier, input_left_shift) of TFLM's int16 LOGISTIC / TANH Prepare: 0 and the
    exponent for a power-of-two input scale 2**-12 (tanh: also 2**-11), else the 15-bit
    multiplier of scale * 4096 * 3 doubled up past 16383.5 with the number of doublings."""
    log2, pot = checked_log2(input_scale)
    left_shift = 12 + log2
    pot = pot and (left_shift in ((0, 1) if is_tanh else (0,)))
    if pot:
        return 0, left_shift
    multiplier = float(F32(input_scale)) * 4096.0 * 3.0
    left_shift = 0
    while multiplier <= 32767.0 / 2.0 and left_shift <= 30:
        left_shift += 1
        multiplier *= 2.0
    return int(multiplier), left_shift
