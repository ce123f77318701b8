"""Calibration: the float range of every activation, observed while the float executor runs.

`RangeCollector.observe(name, array)` is the executor's hook. Methods:
- `minmax`: the smallest and largest value seen, over all batches (the TFLite converter's and
  onnxruntime's MinMax default);
- `percentile`: the range that keeps `percentile` percent of the values on each tail
  (`--percentile 99.99` clips the largest 0.01 % of |x|); the lower bound is the negated upper
  bound unless the tensor is never negative, where it is the observed minimum;
- `mse`: the range whose int8 grid gives the smallest squared quantization error over the
  tensor's calibration histogram;
- `entropy`: TensorRT's KL-divergence threshold on the histogram of |x|.
The last three read a streamed histogram per tensor (`histogram.StreamingHistogram`: constant
memory whatever the number of samples, exact when a later batch widens the range) and choose
the range from it at the end (`range_search`). Only float tensors are recorded; integer ones
(shapes, indices) are skipped, and so are tensors outside `needed` when it is given (a conv
output whose range its ReLU replaces is never used: no work is spent on it).
"""

from __future__ import annotations

import numpy as np

from ..errors import QConvertError
from .histogram import StreamingHistogram
from .range_search import entropy_range, mse_range, percentile_range
from .tensor_stats import tensor_stats

METHODS = ("minmax", "percentile", "mse", "entropy")
class RangeCollector:
    """Collects per-tensor ranges; `ranges()` returns {name: (lo, hi)} as Python floats.

    `needed`: the tensors whose ranges are used (None: every float tensor)."""

    def __init__(self, method: str = "minmax", percentile: float = 99.99, needed=None):
        if method not in METHODS:
            raise ValueError(f"unknown calibration method {method!r}")
        if not 0 < percentile <= 100:
            raise ValueError("percentile must be in (0, 100]")
        self.method = method
        self.percentile = percentile
        self.needed = None if needed is None else frozenset(needed)
        self.lo: dict = {}
        self.hi: dict = {}
        self.hist: dict = {}  # name -> StreamingHistogram

    def wants(self, name: str, array: np.ndarray) -> bool:
        """True when `observe` records `array` as tensor `name`."""
        return (array.dtype.kind == "f" and array.size > 0
                and (self.needed is None or name in self.needed))

    def observe(self, name: str, array: np.ndarray, stats=None) -> None:
        """Record `array` as (one batch of) tensor `name`; `stats`: its `tensor_stats`
        (with the histogram's sample unless the method is minmax) when already taken."""
        if not self.wants(name, array):
            return
        if stats is None:
            stats = tensor_stats(array, self.method != "minmax")
        lo, hi = stats.lo, stats.hi
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise QConvertError(f"tensor {name!r} took a NaN or infinite value during "
                                "calibration (the model overflows float32 on this data)")
        self.lo[name] = min(lo, self.lo.get(name, lo))
        self.hi[name] = max(hi, self.hi.get(name, hi))
        if self.method != "minmax":
            hist = self.hist.get(name)
            if hist is None:
                hist = self.hist[name] = StreamingHistogram()
            hist.add(stats.sample, max(abs(lo), abs(hi)))

    def ranges(self) -> dict:
        if self.method == "minmax":
            return {n: (self.lo[n], self.hi[n]) for n in self.lo}
        from qconvert.executor.parallel import on_workers

        choose = {"percentile": lambda h, lo, hi: percentile_range(h, lo, hi, self.percentile),
                  "mse": mse_range, "entropy": entropy_range}[self.method]
        names = list(self.lo)
        found = [None] * len(names)

        def run(items):  # each tensor's search on its own: shared among the CPUs
            for i in items:
                found[i] = choose(self.hist[names[i]], self.lo[names[i]], self.hi[names[i]])

        on_workers(run, range(len(names)))
        return dict(zip(names, found))
