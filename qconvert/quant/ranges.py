"""Calibration: the float range of every activation, observed while the float executor runs.

`RangeCollector.observe(name, array)` is the executor's hook. Methods:
- `minmax`: the smallest and largest value seen, over all batches (the TFLite converter's and
  onnxruntime's MinMax default);
- `percentile`: the range that keeps `percentile` percent of the values on each tail
  (`--percentile 99.99` clips the largest 0.01 % of |x|), from a fixed-size histogram of |x| per
  tensor that is re-binned when a batch exceeds its range, so memory stays constant whatever
  the number of samples; the lower bound is the negated upper bound unless the tensor is never
  negative, where it is the observed minimum.
Only float tensors are recorded; integer ones (shapes, indices) are skipped.
"""

from __future__ import annotations

import numpy as np

from ..errors import QConvertError

BINS = 2048


def _extremes(array: np.ndarray) -> tuple:
    """(min, max) as Python floats, span by span on every CPU (`executor.parallel`): each span
    is read once from memory for both."""
    from qconvert.executor.parallel import on_workers, spans

    flat = array.reshape(-1)
    parts = spans(flat.size)
    if len(parts) == 1:
        return float(flat.min()), float(flat.max())
    found = np.empty((len(parts), 2), flat.dtype)

    def run(items):
        for k, (i, j) in items:
            found[k] = flat[i:j].min(), flat[i:j].max()

    on_workers(run, enumerate(parts))
    return float(found[:, 0].min()), float(found[:, 1].max())


class RangeCollector:
    """Collects per-tensor ranges; `ranges()` returns {name: (lo, hi)} as Python floats."""

    def __init__(self, method: str = "minmax", percentile: float = 99.99):
        if method not in ("minmax", "percentile"):
            raise ValueError(f"unknown calibration method {method!r}")
        if not 0 < percentile <= 100:
            raise ValueError("percentile must be in (0, 100]")
        self.method = method
        self.percentile = percentile
        self.lo: dict = {}
        self.hi: dict = {}
        self.hist: dict = {}  # name -> (counts float64[BINS], top)

    def observe(self, name: str, array: np.ndarray) -> None:
        if array.dtype.kind != "f" or array.size == 0:
            return
        lo, hi = _extremes(array)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise QConvertError(f"tensor {name!r} took a NaN or infinite value during "
                                "calibration (the model overflows float32 on this data)")
        self.lo[name] = min(lo, self.lo.get(name, lo))
        self.hi[name] = max(hi, self.hi.get(name, hi))
        if self.method == "percentile":
            self._histogram(name, np.abs(array), max(abs(lo), abs(hi)))

    def _histogram(self, name: str, mag: np.ndarray, peak: float) -> None:
        counts, top = self.hist.get(name, (np.zeros(BINS), 0.0))
        if peak > top:
            if top > 0 and counts.any():  # re-bin the old counts onto the wider range
                centers = (np.arange(BINS) + 0.5) * (top / BINS)
                counts, _ = np.histogram(centers, BINS, (0.0, peak), weights=counts)
            else:
                counts = np.zeros(BINS)
            top = peak
        if top > 0:
            counts = counts + np.histogram(mag, BINS, (0.0, top))[0]
        self.hist[name] = (counts, top)

    def ranges(self) -> dict:
        if self.method == "minmax":
            return {n: (self.lo[n], self.hi[n]) for n in self.lo}
        out = {}
        for name in self.lo:
            counts, top = self.hist[name]
            total = counts.sum()
            if total == 0 or top == 0:
                out[name] = (self.lo[name], self.hi[name])
                continue
            cdf = np.cumsum(counts) / total
            idx = int(np.searchsorted(cdf, self.percentile / 100.0))
            bound = min((idx + 1) * top / BINS, top)
            lo = self.lo[name] if self.lo[name] >= 0 else max(-bound, self.lo[name])
            out[name] = (lo, min(bound, self.hi[name]) if self.hi[name] > 0 else self.hi[name])
        return out
