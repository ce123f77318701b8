"""The int clamps of a fused activation, as TFLite's CalculateActivationRangeQuantized computes
them: every int8 layer with a fused RELU / RELU6 / RELU_N1_TO_1 clamps its output to these, and
the quantizer, the executor and the C exporter must agree on them to the last bit.
"""

from __future__ import annotations

import numpy as np

from qconvert.schemas.activations import ACTIVATION_RANGES

from .fixed_point import INT32_MAX, INT32_MIN
from .rounding import round_half_away


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
