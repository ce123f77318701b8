"""Rounding of floats as C's `round()` and TFLite's `TfLiteRound` do it: half away from zero.

numpy's and Python's `round` are half-to-even and differ at exact ties (2.5 -> 2), so every place
that quantizes a float (weights, biases, activation limits, the float kernels' round) uses this.
"""

from __future__ import annotations

import numpy as np


def round_half_away(x):
    """Round to nearest, ties away from zero (C `round`, TfLiteRound), keeping the float dtype.

    np.round / Python round are half-to-even and would be wrong on exact ties such as 2.5.
    Uses np.rint, then moves the exact ties (|x - rint(x)| == 0.5, exact) away from zero:
    0.49999999999999994 stays 0 (the floor(x + 0.5) trick rounds it to 1). NaN and inf pass
    through; a zero result is +0.0. Three passes over x, where trunc + sign + where took eight.
    """
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    flat = x.reshape(-1)
    out = np.rint(flat)
    with np.errstate(invalid="ignore"):  # inf - inf
        gap = np.subtract(flat, out)
        np.abs(gap, out=gap)
        ties = np.flatnonzero(gap == 0.5)
    del gap
    if ties.size:
        out[ties] = flat[ties] + np.copysign(x.dtype.type(0.5), flat[ties])
    out += x.dtype.type(0)  # -0.0 -> +0.0
    out = out.reshape(x.shape)
    return out[()] if out.ndim == 0 else out
