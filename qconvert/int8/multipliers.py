"""Real multipliers of int8 layers and their fixed-point form, as TFLite Micro computes them.

- `quantize_multiplier`: TFLite's QuantizeMultiplier, real multiplier -> (int32 q31, shift), and
  its checked variants `quantize_multiplier_smaller_than_one` / `_greater_than_one`;
- `effective_multipliers` / `conv_multipliers`: the requantization multiplier of conv,
  depthwise, transpose conv and fully connected layers (the quantization plan, the integer
  executor, the invariant checks and the C exporter all take theirs from here);
- `frexp_multiplier`: LOGISTIC / TANH's input scaling (frexp, no normalization);
- `mean_multiplier`, `downscale_int32_to_int16_multiplier`, `calculate_input_radius`: the other
  Prepare / Eval-time multiplier arithmetic of TFLite's kernels.

Shift convention: positive = left shift (TFLite's and CMSIS-NN's).
"""

from __future__ import annotations

import math

import numpy as np

from .fixed_point import INT32_MAX, INT32_MIN
from .rounding import round_half_away


def quantize_multiplier(m):
    """TFLite QuantizeMultiplier of real multipliers `m` (float64): returns (multiplier, shift).

    Each m = multiplier * 2**(shift - 31) with multiplier in [2**30, 2**31) int32, as the
    kernels expect: frexp -> (q, e); q_fixed = round_half_away(q * 2**31); if q_fixed == 2**31
    then (2**30, e + 1); if e < -31 then (0, 0) (the multiplier underflows; checked after the
    round-up, as TFLite does). m == 0 gives (0, 0). Both outputs are int32 arrays of m's shape.
    No clamp of large shifts is applied (TFLite's TFLITE_SINGLE_ROUNDING build saturates
    shift > 30, i.e. m >= 2**30, which no sane model has). Raises ValueError on negative, NaN or
    infinite multipliers, which TFLite would reject or mis-handle.
    """
    m = np.asarray(m, dtype=np.float64)
    if not np.all(np.isfinite(m)):
        raise ValueError("quantize_multiplier: multiplier is NaN or infinite")
    if np.any(m < 0):
        raise ValueError("quantize_multiplier: negative multiplier")
    q, e = np.frexp(m)  # frexp(0) = (0, 0)
    q_fixed = round_half_away(q * float(2**31)).astype(np.int64)  # q * 2**31 is exact
    e = np.asarray(e, dtype=np.int64)
    top = q_fixed == 2**31
    q_fixed = np.where(top, 2**30, q_fixed)
    e = e + top
    under = e < -31
    q_fixed = np.where(under, 0, q_fixed)
    e = np.where(under, 0, e)
    return q_fixed.astype(np.int32), e.astype(np.int32)


def quantize_multiplier_smaller_than_one(m):
    """QuantizeMultiplierSmallerThanOneExp: `quantize_multiplier` of multipliers in (0, 1)
    (shift <= 0); ValueError for any other (TFLite stops at its assertion)."""
    m = np.asarray(m, dtype=np.float64)
    if not np.all((m > 0) & (m < 1)):
        raise ValueError("quantize_multiplier_smaller_than_one: multiplier not in (0, 1)")
    return quantize_multiplier(m)


def quantize_multiplier_greater_than_one(m):
    """QuantizeMultiplierGreaterThanOne: `quantize_multiplier` of finite multipliers > 1
    (shift >= 1, a left shift); ValueError for any other."""
    m = np.asarray(m, dtype=np.float64)
    if not np.all(m > 1):
        raise ValueError("quantize_multiplier_greater_than_one: multiplier not > 1")
    return quantize_multiplier(m)


def _positive_scales(x, name):
    x = np.asarray(x, dtype=np.float32)
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError(f"effective_multipliers: {name} must be finite and > 0")
    return x


def effective_multipliers(s_in, s_w, s_out, per_tensor_fc=False):
    """Real requantization multipliers s_in * s_w[c] / s_out, computed exactly as TFLM does.

    Conv, depthwise and per-channel FC (PopulateConvolutionQuantizationParams):
    double(s_in) * double(s_w[c]) / double(s_out). `per_tensor_fc` takes the product
    s_in * s_w as a float32 multiply first (older TFLite's GetQuantizedConvolutionMultipler for
    per-tensor FC; current TFLite Micro takes the double product there too). Scales are float32
    (the flatbuffer type; other inputs are rounded to float32 first), scalars or arrays
    broadcasting together. Returns float64. Raises ValueError on scales that are not finite and
    > 0, or a non-finite result.
    """
    s_in = _positive_scales(s_in, "s_in")
    s_w = _positive_scales(s_w, "s_w")
    s_out = _positive_scales(s_out, "s_out")
    if per_tensor_fc:
        product = np.multiply(s_in, s_w, dtype=np.float32).astype(np.float64)
    else:
        product = s_in.astype(np.float64) * s_w.astype(np.float64)
    with np.errstate(over="ignore"):
        out = product / s_out.astype(np.float64)
    if not np.all(np.isfinite(out)):
        raise ValueError("effective_multipliers: multiplier overflows")
    return out


def conv_multipliers(s_in, s_w, s_out) -> tuple:
    """(real, multiplier, shift) of a conv / depthwise / transpose conv / fully connected layer,
    per channel or per tensor alike, as this TFLite Micro computes them at Prepare: the double
    product `effective_multipliers`, then `quantize_multiplier`. ValueError on bad scales."""
    real = effective_multipliers(s_in, s_w, s_out)
    multiplier, shift = quantize_multiplier(np.asarray(real, np.float64))
    return real, multiplier, shift


def frexp_multiplier(real: float) -> tuple:
    """(multiplier, exponent) of frexp(real) with the mantissa rounded to Q31 and no
    normalization afterwards (CalculateArithmeticOpDataLogistic / TanhPrepare's input scaling):
    a mantissa that rounds up to 2**31 becomes INT32_MIN, as static_cast<int32_t> gives on the
    devices TFLite Micro targets."""
    q, e = math.frexp(real)
    multiplier = int(round_half_away(q * float(1 << 31)))
    if multiplier == 2**31:
        multiplier = INT32_MIN
    return multiplier, e


def mean_multiplier(multiplier: int, shift: int, count: int) -> tuple:
    """QuantizedMeanOrSum's folding of 1 / count: k = min(floor(log2 count), 32, 31 + shift),
    multiplier' = (multiplier << k) // count, shift' = shift - k."""
    if count <= 0:
        return int(multiplier), int(shift)
    k = min(count.bit_length() - 1, 32, 31 + shift)
    return int((int(multiplier) << k) // count), int(shift) - k


def downscale_int32_to_int16_multiplier(m: int) -> int:
    """TFLite's DownScaleInt32ToInt16Multiplier: a Q31 multiplier rounded to Q15, saturated."""
    if m >= INT32_MAX - (1 << 15):
        return 32767
    return (m + (1 << 15)) >> 16


def calculate_input_radius(integer_bits: int, left_shift: int, total_bits: int = 31) -> int:
    """TFLite CalculateInputRadius: floor((2**ib - 1) * 2**(tb - ib) / 2**left_shift)."""
    real = 1.0 * ((1 << integer_bits) - 1) * (1 << (total_bits - integer_bits)) / (1 << left_shift) \
        if left_shift >= 0 else \
        1.0 * ((1 << integer_bits) - 1) * (1 << (total_bits - integer_bits)) * 2.0 ** -left_shift
    return math.floor(real)
