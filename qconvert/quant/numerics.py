"""Fixed-point numerics of int8 inference, bit-exact with TFLite Micro and CMSIS-NN.

Everything is vectorized numpy; integer arithmetic is done in int64 so that the int32 products of
the C kernels are exact, and every place where the C code truncates to int32 is reproduced.

- `round_half_away`: the C `round()` / `TfLiteRound` (np.round is half-to-even).
- `quantize_multiplier`: TFLite's QuantizeMultiplier, real multiplier -> (int32 q31, shift).
- `effective_multipliers`: the real multiplier as TFLM computes it at load time.
- `saturating_rounding_doubling_high_mul`, `rounding_divide_by_pot`: gemmlowp primitives.
- `multiply_by_quantized_multiplier`: requantization of int32 accumulators, TFLite's double
  rounding (default) or CMSIS-NN's single rounding (`CMSIS_NN_USE_SINGLE_ROUNDING`).
- `activation_range`: TFLite's CalculateActivationRangeQuantized for fused activations.

Shift convention: positive = left shift (TFLite's and CMSIS-NN's).
"""

from __future__ import annotations

import numpy as np

from qconvert.schemas.activations import ACTIVATION_RANGES

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_ROUNDINGS = ("double", "single")


def round_half_away(x):
    """Round to nearest, ties away from zero (C `round`, TfLiteRound), keeping the float dtype.

    np.round / Python round are half-to-even and would be wrong on exact ties such as 2.5.
    Uses trunc + the exact fractional part (x - trunc(x) is exact), so 0.49999999999999994 stays 0
    (the floor(x + 0.5) trick rounds it to 1). NaN and inf pass through.
    """
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):  # inf - inf
        away = np.abs(x - t) >= 0.5
    out = t + np.where(away, np.sign(x), np.zeros_like(x))
    return out[()] if out.ndim == 0 else out


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


def _positive_scales(x, name):
    x = np.asarray(x, dtype=np.float32)
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError(f"effective_multipliers: {name} must be finite and > 0")
    return x


def effective_multipliers(s_in, s_w, s_out, per_tensor_fc=False):
    """Real requantization multipliers s_in * s_w[c] / s_out, computed exactly as TFLM does.

    Conv, depthwise and per-channel FC (PopulateConvolutionQuantizationParams):
    double(s_in) * double(s_w[c]) / double(s_out). Per-tensor FC (GetQuantizedConvolutionMultipler):
    the product s_in * s_w is a float32 multiply, then double(product) / double(s_out). The two
    differ in the low bits, which can change the quantized multiplier. Scales are float32 (the
    flatbuffer type; other inputs are rounded to float32 first), scalars or arrays broadcasting
    together. Returns float64. Raises ValueError on scales that are not finite and > 0, or a
    non-finite result.
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


def _ints(x, name, lo=INT32_MIN, hi=INT32_MAX):
    """x as an int64 array, after checking it is integer-typed with values in [lo, hi]."""
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got {x.dtype}")
    if x.size and (x.min() < lo or x.max() > hi):
        raise ValueError(f"{name} out of range [{lo}, {hi}]")
    return x.astype(np.int64)


def _wrap_int32(x):
    """int64 -> value modulo 2**32 in int32 range (two's-complement truncation, kept in int64)."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def saturating_rounding_doubling_high_mul(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul of int32 values: round(a * b / 2**31).

    Ties (nudge 2**30 for a*b >= 0, 1 - 2**30 otherwise, then C truncating division) come out as
    floor((a*b + 2**30) / 2**31), i.e. half toward +inf. The single overflowing case
    INT32_MIN * INT32_MIN saturates to INT32_MAX (this is the ARM VQRDMULH instruction).
    Broadcasts a against b; returns int32.
    """
    a = _ints(a, "a")
    b = _ints(b, "b")
    ab = a * b  # |ab| <= 2**62: exact in int64
    high = (ab + 2**30) >> 31  # arithmetic shift = floor division
    high = np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high)
    return high.astype(np.int32)


def rounding_divide_by_pot(x, exponent):
    """gemmlowp RoundingDivideByPOT: x / 2**exponent rounded to nearest, ties away from zero.

    x int32 values, exponent in [0, 31] (broadcasts against x). This is the second rounding of
    TFLite's requantization. Returns int32.
    """
    x = _ints(x, "x")
    exponent = _ints(exponent, "exponent", 0, 31)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask  # low bits, same in int64 as in int32 two's complement
    threshold = (mask >> 1) + (x < 0)
    return ((x >> exponent) + (remainder > threshold)).astype(np.int32)


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
    `quantize_multiplier`. With `axis`, multiplier and shift are 1-D per-channel values laid along
    that axis of acc; otherwise they broadcast against acc as numpy arrays do.

    rounding="double" (TFLite / TFLM reference, CMSIS-NN default): x = acc * 2**max(shift, 0)
    in int32, then SaturatingRoundingDoublingHighMul(x, multiplier) (half toward +inf), then
    RoundingDivideByPOT by max(-shift, 0) (half away from zero).
    rounding="single" (CMSIS-NN's arm_nn_requantize with CMSIS_NN_USE_SINGLE_ROUNDING): the
    64-bit product acc * multiplier is shifted right by 31 - shift - 1, then (r + 1) >> 1 in
    64 bits, narrowed to int32 at the end: one rounding, half toward +inf, i.e. floor((p + 2**(30 - shift)) / 2**(31 - shift)).
    The two agree for shift >= 0 and differ by at most 1 LSB for shift < 0 (double rounding, and
    negative ties).

    When a result (or double rounding's acc * 2**shift) does not fit in int32, the C code
    overflows; this returns what it computes on a two's-complement target (wraparound), so
    out-of-range values are bit-exact with the device, not meaningful.
    """
    if rounding not in _ROUNDINGS:
        raise ValueError(f"rounding must be one of {_ROUNDINGS}, got {rounding!r}")
    acc = _ints(acc, "acc")
    multiplier = _per_channel(_ints(multiplier, "multiplier", 0, INT32_MAX), acc.ndim, axis,
                              "multiplier")
    shift = _per_channel(_ints(shift, "shift", -31, 30), acc.ndim, axis, "shift")
    if rounding == "single":
        product = acc * multiplier  # < 2**62 in magnitude
        r = product >> (30 - shift)  # int64 new_val >> (total_shift - 1), kept in 64 bits
        return _wrap_int32((r + 1) >> 1).astype(np.int32)  # narrowed only at the return
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    x = _wrap_int32(acc << left)  # x * (1 << left_shift) in int32
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), right)


def _quantize_limit(limit, scale, zero_point):
    # TFLite's Quantize(): float tmp = TfLiteRound(f / scale), a float32 division and rounding.
    with np.errstate(over="ignore", divide="ignore"):
        tmp = round_half_away(np.float32(limit) / scale)
    # Same bounds check as TFLite, against the int32 limits converted to float32.
    if not (np.isfinite(tmp) and np.float32(INT32_MIN) <= tmp <= np.float32(INT32_MAX)):
        raise ValueError(f"activation_range: {limit} / scale {scale} overflows int32 "
                         "(TFLite rejects this model)")
    return zero_point + int(tmp)


def activation_range(activation, scale, zero_point, qmin=-128, qmax=127):
    """(act_min, act_max) int clamps of a fused activation, as TFLite's
    CalculateActivationRangeQuantized computes them.

    activation is an ActivationFunctionType name: NONE (or None), RELU, RELU6, RELU_N1_TO_1.
    A limit L maps to zero_point + round_half_away(float32(L) / float32(scale)) with the division
    in float32 (TfLiteRound(f / scale) on floats; it can differ from the double quotient at
    ties), then act_min = max(qmin, q(lower)) and act_max = min(qmax, q(upper)), i.e. clipped to
    [qmin, qmax] for a zero point inside that range. Raises ValueError for other activations, a
    scale that is not finite and > 0, a zero point outside [qmin, qmax], or a limit whose
    quotient overflows int32 (TFLite fails at Prepare then).
    """
    key = "NONE" if activation is None else str(activation).upper()
    if key not in ACTIVATION_RANGES:
        raise ValueError(f"activation_range: unsupported fused activation {activation!r}")
    scale = np.float32(scale)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"activation_range: scale must be finite and > 0, got {scale}")
    zero_point, qmin, qmax = int(zero_point), int(qmin), int(qmax)
    if not qmin <= zero_point <= qmax:
        raise ValueError(f"activation_range: zero point {zero_point} outside [{qmin}, {qmax}]")
    lower, upper = ACTIVATION_RANGES[key]
    act_min, act_max = qmin, qmax
    if lower is not None:
        act_min = max(qmin, _quantize_limit(lower, scale, zero_point))
    if upper is not None:
        act_max = min(qmax, _quantize_limit(upper, scale, zero_point))
    return act_min, act_max
