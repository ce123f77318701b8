"""A streamed value histogram per tensor, the input of the percentile, MSE and entropy ranges.

`StreamingHistogram` keeps `2 * BINS` equal bins symmetric about zero, bin k covering
`[(k - BINS) w, (k - BINS + 1) w)` with `w = top / BINS`. Calibration batches arrive one after
another and a later batch may exceed `top`: the histogram then doubles `top` as often as needed,
and since `floor(x / 2w) = floor(floor(x / w) / 2)`, doubling merges neighbouring bins pairwise
*exactly* (no re-binning approximation, whatever the number of batches). Memory is constant.

Cost: a histogram reads at most `SAMPLE_CAP` values of each batch of a tensor, an evenly
strided subset (an odd stride, so it does not lock onto power-of-two rows or channels) when the
batch is larger: statistics of ~2.6e5 values per batch are as good as those of all of them,
and a ResNet-50 activation of 16 samples holds 1.3e7. The extremes (minmax) are always taken from
every value, by the caller.
"""

from __future__ import annotations

import numpy as np

BINS = 2048          # per side
SAMPLE_CAP = 1 << 18  # values per batch of a tensor that enter its histogram


def sample_step(size: int) -> int:
    """The stride of `sample` over `size` values: 1 up to SAMPLE_CAP, else odd."""
    if size <= SAMPLE_CAP:
        return 1
    step = size // SAMPLE_CAP + 1
    return step + 1 - step % 2  # odd


def sample(array: np.ndarray) -> np.ndarray:
    """At most SAMPLE_CAP values of `array`: all of them, or an evenly strided subset."""
    flat = array.reshape(-1)
    return flat[::sample_step(flat.size)]


SHARED_COUNTS = 1 << 16  # values per piece counted on its own (pieces shared among the CPUs)


def _bin_counts(values: np.ndarray, k: float) -> np.ndarray:
    """Counts (int64) of floor(values * k) + BINS clipped to the 2 * BINS bins, piece by piece
    on every CPU (`executor.parallel`): integer counts, so the sum over pieces is exact and the
    result does not depend on how the values were split."""
    from qconvert.executor.parallel import on_workers, spans

    # float32 arithmetic unless k overflows it (activations of ~1e-38); one work array per
    # piece, every step in place
    narrow = values.dtype == np.float32 and k < 1e37
    parts = spans(values.size, SHARED_COUNTS)
    found = np.zeros((len(parts), 2 * BINS), np.int64)

    def run(items):
        for n, (i, j) in items:
            if narrow:
                idx = np.multiply(values[i:j], np.float32(k))
            else:
                idx = np.multiply(values[i:j], k, dtype=np.float64)
            np.floor(idx, out=idx)
            np.clip(idx, -BINS, BINS - 1, out=idx)  # infinities too
            nan = np.isnan(idx)
            if nan.any():  # a NaN value counts as 0
                idx[nan] = 0.0
            idx += BINS
            found[n] = np.bincount(idx.astype(np.intp), minlength=2 * BINS)

    on_workers(run, enumerate(parts))
    return found.sum(axis=0)


class StreamingHistogram:
    """Counts of values in 2 * BINS bins over [-top, top) (module docstring)."""

    def __init__(self):
        self.counts = np.zeros(2 * BINS, np.float64)
        self.top = 0.0
        self.zeros = 0.0  # values seen while top was still 0 (all of them exactly 0)

    @property
    def width(self) -> float:
        """The bin width w = top / BINS."""
        return self.top / BINS

    def add(self, values: np.ndarray, peak: float) -> None:
        """Count `values` (a flat float array) whose largest magnitude is `peak`."""
        if peak > self.top:
            if self.top == 0:
                self.top = float(peak)
                self.counts[BINS] += self.zeros
            else:
                while self.top < peak:
                    self._double()
        if self.top == 0:
            self.zeros += values.size
            return
        k = BINS / self.top
        if not np.isfinite(k):  # a subnormal top: every value is in the bins next to 0
            self.counts[BINS] += values.size
            return
        self.counts += _bin_counts(values, k)

    def _double(self) -> None:
        merged = self.counts.reshape(BINS, 2).sum(axis=1)
        self.counts = np.zeros(2 * BINS, np.float64)
        self.counts[BINS // 2:BINS // 2 + BINS] = merged
        self.top *= 2.0

    def centers(self) -> np.ndarray:
        """The center of every bin."""
        return (np.arange(-BINS, BINS, dtype=np.float64) + 0.5) * self.width

    def magnitudes(self) -> np.ndarray:
        """Counts of |x| in BINS bins over [0, top): the two halves folded (the negative bin
        [-(j+1) w, -j w) goes to |x| bin j)."""
        return self.counts[BINS:] + self.counts[:BINS][::-1]
