"""Rounding of floats as C's `round()` and TFLite's `TfLiteRound` do it: half away from zero.

numpy's and Python's `round` are half-to-even and differ at exact ties (2.5 -> 2), so every place
that quantizes a float (weights, biases, activation limits, the float kernels' round) uses this.
"""

from __future__ import annotations

import numpy as np


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
