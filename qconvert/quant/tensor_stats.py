"""One pass over a calibration activation for everything calibration measures on it.

`tensor_stats(array, sample, channel_sums)` reads the tensor once, span by span on every CPU
(`executor.parallel`), and takes from each span, while it is in cache: its minimum and maximum
(every range method), the values the streamed histogram counts (`histogram.sample`: an evenly
strided subset, copied into one small contiguous array) and, for the input of a convolution
with bias correction, the sum of each channel plane (`bias_correction.ChannelMeans`). Taken one
after another, these were three or four passes over the tensor through memory.

The results are those of the separate reductions, bit for bit: minimum and maximum do not
depend on the order; the sample holds the same values in the same order; each plane is summed
by numpy as `array.sum(axis=(0, 2, ...))` sums it, and the planes of the samples are then
added in order, as numpy does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .histogram import sample_step

SPAN_VALUES = 1 << 17  # values per span (whole channel planes when summing them): 512 KB, in L2
SHARED_STATS = 1 << 18  # below this many values the tensor is read in one piece, on one thread


@dataclass
class TensorStats:
    """`lo`, `hi`: the smallest and largest value (Python floats); `sample`: the histogram's
    values (None unless asked for); `channel_sums`: float32 sums over every axis but axis 1
    (None unless asked for)."""

    lo: float
    hi: float
    sample: np.ndarray | None = None
    channel_sums: np.ndarray | None = None


def planes_summable(array: np.ndarray) -> bool:
    """True when `tensor_stats` can sum the channel planes (axis 1) of `array`: float32,
    C-contiguous, non-empty, at least 2-D."""
    return (array.dtype == np.float32 and array.flags.c_contiguous and array.size > 0
            and array.ndim >= 2)


def tensor_stats(array: np.ndarray, sample: bool, channel_sums: bool = False) -> TensorStats:
    """The statistics of a non-empty float `array` (module docstring); `channel_sums` needs
    `planes_summable(array)`."""
    from qconvert.executor.parallel import on_workers, spans

    flat = array.reshape(-1)
    step = sample_step(flat.size)
    plane = int(np.prod(array.shape[2:])) if channel_sums else 1
    planes = flat.reshape(-1, plane) if channel_sums else None
    if flat.size < SHARED_STATS and not channel_sums:
        return TensorStats(float(flat.min()), float(flat.max()),
                           flat[::step] if sample else None)
    per = max(1, SPAN_VALUES // plane)  # planes (or values) per span
    parts = [(i * plane, j * plane) for i, j in spans(flat.size // plane, per)]
    found = np.empty((len(parts), 2), flat.dtype)
    picked = None
    if sample:
        picked = flat if step == 1 else np.empty(-(-flat.size // step), flat.dtype)
    sums = np.empty(flat.size // plane, flat.dtype) if channel_sums else None

    def run(items):
        for k, (i, j) in items:
            part = flat[i:j]
            found[k] = part.min(), part.max()
            if sums is not None:
                planes[i // plane:j // plane].sum(axis=1, out=sums[i // plane:j // plane])
            if picked is not None and step > 1:
                first = -(-i // step) * step
                if first < j:
                    picked[first // step:(j - 1) // step + 1] = flat[first:j:step]

    on_workers(run, enumerate(parts))
    total = None
    if sums is not None:
        total = sums.reshape(array.shape[0], array.shape[1]).sum(axis=0)
    return TensorStats(float(found[:, 0].min()), float(found[:, 1].max()), picked, total)
