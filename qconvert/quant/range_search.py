"""Clipping ranges chosen from a calibration histogram: percentile, MSE and entropy (KL).

All three clip the range minmax would give, trading a few clipped outliers for finer steps:
- `percentile_range`: keeps `percentile` % of |x| (the largest magnitudes are clipped);
- `mse_range`: the (lo, hi) whose int8 grid - the scale and zero point `activation_params`
  derives from it, exactly as written to the model - gives the smallest squared error summed
  over the histogram (each bin's count at its center), rounding and clipping error together.
  Candidates: for a tensor that is never negative, `hi = hi_obs * j / MSE_STEPS` (lo stays 0);
  otherwise the grid `lo_obs * a`, `hi_obs * b` of MSE_GRID fractions each, then a grid as
  fine again around the best pair (coarse to fine: MSE_GRID^2 candidates twice instead of
  MSE_GRID^4). The error of every candidate on every bin is one vectorized array expression;
- `entropy_range`: TensorRT's KL-divergence calibration on the histogram of |x|: for every
  candidate bin count i (from `levels` to the last occupied bin), the reference distribution P
  is the first i bins with everything beyond added to bin i - 1, the candidate Q is those i
  bins (without the outliers) merged into `levels` groups (`i // levels` bins each, the last
  group taking the rest) and spread back evenly over the bins where P is not zero; the i of
  the smallest KL(P || Q) gives the threshold T = i * w and the range [-T, T] meets the
  observed one. `levels` is 128 for a signed tensor (int8's magnitudes, as TensorRT) and 256
  for a non-negative one (all 256 int8 steps cover [0, T]). KL is computed for all candidates
  at once from prefix sums (the derivation is in `_kl_all`).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.rounding import round_half_away
from .params import QMAX, QMIN

MSE_STEPS = 128   # candidates for a non-negative tensor
MSE_GRID = 16     # fractions per side and stage for a signed tensor (MSE_GRID ** 2 candidates)
MSE_BINS = 1024   # the occupied span is merged to at most this many bins for the search
_TINY = float(np.finfo(np.float32).tiny)


def percentile_range(hist, lo_obs: float, hi_obs: float, percentile: float) -> tuple:
    """(lo, hi) keeping `percentile` % of |x|; the lower bound is the observed minimum for a
    tensor that is never negative."""
    counts = hist.magnitudes()
    total = counts.sum()
    if total == 0 or hist.top == 0:
        return lo_obs, hi_obs
    cdf = np.cumsum(counts) / total
    idx = int(np.searchsorted(cdf, percentile / 100.0))
    bound = min((idx + 1) * hist.width, hist.top)
    lo = lo_obs if lo_obs >= 0 else max(-bound, lo_obs)
    return lo, min(bound, hi_obs) if hi_obs > 0 else hi_obs


def grid_errors(lo: np.ndarray, hi: np.ndarray, centers: np.ndarray,
                counts: np.ndarray) -> np.ndarray:
    """Squared error summed over the histogram for each candidate range (lo[k], hi[k]): values
    at `centers` quantized on the int8 grid `activation_params(lo, hi)` gives and dequantized."""
    lo = np.minimum(lo, 0.0)
    hi = np.maximum(hi, 0.0)
    scale = ((hi - lo) / (QMAX - QMIN)).astype(np.float32).astype(np.float64)
    scale = np.where(hi - lo > 0, np.maximum(scale, _TINY), 1.0)
    zp = np.clip(round_half_away(QMIN - lo / scale), QMIN, QMAX)
    s, z = scale[:, None], zp[:, None]
    q = np.clip(round_half_away(centers[None, :] / s) + z, QMIN, QMAX)
    err = centers[None, :] - s * (q - z)
    return (err * err) @ counts


def _merged(hist, lo_obs: float, hi_obs: float) -> tuple:
    """(centers, counts) of the occupied bins, merged by a power of two to at most MSE_BINS;
    a merged bin sits at the mean of its values' centers, and centers are kept inside the
    observed range (the bin holding the maximum must not look clipped at hi_obs)."""
    counts = hist.counts
    occupied = np.flatnonzero(counts)
    first, last = int(occupied[0]), int(occupied[-1]) + 1
    factor = 1
    while (last - first + factor - 1) // factor > MSE_BINS:
        factor *= 2
    first -= first % factor
    last += (-last) % factor
    c = counts[first:last].reshape(-1, factor)
    x = hist.centers()[first:last].reshape(-1, factor)
    n = c.sum(axis=1)
    keep = n > 0
    centers = (c * x).sum(axis=1)[keep] / n[keep]
    return np.clip(centers, lo_obs, hi_obs), n[keep]


def mse_range(hist, lo_obs: float, hi_obs: float) -> tuple:
    """(lo, hi) minimizing the int8 quantization error over the histogram (module docstring);
    among equal errors the widest range wins."""
    if hist.top == 0 or not hist.counts.any() or hi_obs - lo_obs <= 0:
        return lo_obs, hi_obs
    centers, counts = _merged(hist, lo_obs, hi_obs)
    if lo_obs >= 0 or hi_obs <= 0:
        frac = np.arange(MSE_STEPS, 0, -1, dtype=np.float64) / MSE_STEPS  # widest first
        lo = np.full(frac.size, lo_obs) if lo_obs >= 0 else lo_obs * frac
        hi = hi_obs * frac if lo_obs >= 0 else np.full(frac.size, hi_obs)
    else:
        step = 1.0 / MSE_GRID
        best_a = best_b = 1.0
        best = np.inf
        for _stage in range(2):
            fa = _fractions(best_a, step)
            fb = _fractions(best_b, step)
            a, b = np.meshgrid(fa, fb, indexing="ij")
            lo, hi = lo_obs * a.reshape(-1), hi_obs * b.reshape(-1)
            errors = grid_errors(lo, hi, centers, counts)
            k = int(np.argmin(errors))
            if errors[k] < best:
                best, best_a, best_b = errors[k], a.reshape(-1)[k], b.reshape(-1)[k]
            step /= MSE_GRID / 2
        return float(lo_obs * best_a), float(hi_obs * best_b)
    errors = grid_errors(lo, hi, centers, counts)
    k = int(np.argmin(errors))
    return float(lo[k]), float(hi[k])


def _fractions(center: float, step: float) -> np.ndarray:
    """MSE_GRID fractions in (0, 1] spaced `step` apart around `center`, widest first."""
    top = min(1.0, center + step * (MSE_GRID // 2))
    frac = top - step * np.arange(MSE_GRID, dtype=np.float64)
    return frac[frac > 0]


def _kl_all(h: np.ndarray, levels: int) -> np.ndarray:
    """KL(P_i || Q_i) of TensorRT's procedure (module docstring) for every i in
    [levels, len(h)], vectorized. With T = sum h, C[i] = sum h[:i], o_i = T - C[i]:
    P_i sums to T and Q_i to C[i], so
        KL = (sum_j p_j log p_j - sum_g P_g log(S_g / n_g)) / T - log T + log C[i],
    where S_g is group g's sum of h, n_g its number of bins with p_j != 0, and P_g its sum of
    p (S_g, plus o_i for the last group); a group with P_g > 0 and S_g = 0 makes KL infinite."""
    n = h.size
    total = h.sum()
    cum = np.concatenate([[0.0], np.cumsum(h)])
    nonzero = np.concatenate([[0], np.cumsum(h > 0)])
    hlogh = np.concatenate([[0.0], np.cumsum(np.where(h > 0, h * np.log(np.where(h > 0, h, 1)),
                                                      0.0))])
    i = np.arange(levels, n + 1)
    out = total - cum[i]
    last = h[i - 1] + out
    plogp = hlogh[i - 1] + np.where(last > 0, last * np.log(np.where(last > 0, last, 1)), 0.0)
    width = i // levels
    g = np.arange(levels)
    start = g[None, :] * width[:, None]
    stop = np.where(g[None, :] == levels - 1, i[:, None], start + width[:, None])
    s = cum[stop] - cum[start]
    count = (nonzero[stop] - nonzero[start]).astype(np.float64)
    count[:, -1] += (h[i - 1] == 0) & (out > 0)
    p = s.copy()
    p[:, -1] += out
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where(p > 0, p * np.log(np.where(s > 0, s, 1) / np.where(count > 0, count, 1)),
                         0.0)
        kl = (plogp - cross.sum(axis=1)) / total - np.log(total) + np.log(cum[i])
    kl[((p > 0) & (s == 0)).any(axis=1)] = np.inf
    return kl


def kl_threshold_bins(magnitudes: np.ndarray, levels: int) -> int:
    """TensorRT's threshold, as the number i of |x| bins kept (the first smallest KL)."""
    occupied = np.flatnonzero(magnitudes)
    if occupied.size == 0:
        return magnitudes.size
    n = int(occupied[-1]) + 1
    if n <= levels:
        return n
    h = magnitudes[:n].astype(np.float64)
    return levels + int(np.argmin(_kl_all(h, levels)))


def entropy_range(hist, lo_obs: float, hi_obs: float) -> tuple:
    """(lo, hi) from TensorRT's KL threshold T: [-T, T] within the observed range."""
    if hist.top == 0 or not hist.counts.any():
        return lo_obs, hi_obs
    signed = lo_obs < 0 < hi_obs
    bins = kl_threshold_bins(hist.magnitudes(), 128 if signed else 256)
    t = bins * hist.width
    return max(lo_obs, -t), min(hi_obs, t)
