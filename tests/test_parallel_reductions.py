"""Calibration's reductions shared among the CPUs (`executor.parallel`) give exactly the
single-threaded result: histogram counts, channel sums, min / max, elementwise in-place ops,
and the plan's layers (errors raised in node order)."""

from __future__ import annotations

import numpy as np
import pytest

from qconvert.executor import parallel
from qconvert.quant import bias_correction, histogram, ranges


def test_histogram_of_many_pieces_equals_numpy_over_everything():
    """Batches of several SHARED_COUNTS pieces, one widening the range: equal to numpy's
    counts of all values over the final bins (float64 arithmetic, integer-friendly values)."""
    rng = np.random.default_rng(3)
    assert 200_003 > 2 * histogram.SHARED_COUNTS
    # multiples of 1/8 up to 64: exact in float32, x * BINS / top exact for top a power of 2
    batches = [rng.integers(-256, 256, 200_003).astype(np.float32) / 8,
               rng.integers(-512, 512, 150_001).astype(np.float32) / 8]
    h = histogram.StreamingHistogram()
    for b in batches:
        h.add(b, 64.0 if b is batches[0] else 128.0)
    x = np.concatenate(batches).astype(np.float64)
    expect = np.bincount(np.clip(np.floor(x / h.width), -histogram.BINS,
                                 histogram.BINS - 1).astype(int) + histogram.BINS,
                         minlength=2 * histogram.BINS)
    assert h.top == 128.0 and np.array_equal(h.counts, expect)


def test_histogram_counts_do_not_depend_on_the_pieces(monkeypatch):
    rng = np.random.default_rng(4)
    values = rng.standard_normal(300_000).astype(np.float32)
    split = histogram._bin_counts(values, histogram.BINS / 5.0)
    monkeypatch.setattr(histogram, "SHARED_COUNTS", 1 << 30)
    assert np.array_equal(split, histogram._bin_counts(values, histogram.BINS / 5.0))


@pytest.mark.parametrize("shape", [(14, 256, 56, 56), (2, 64, 9, 7), (16, 1280, 1, 1),
                                   (3, 10), (5, 3, 4, 5, 6)])
def test_channel_sums_bit_exact_with_numpy(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expect = x.sum(axis=tuple(i for i in range(x.ndim) if i != 1))
    assert np.array_equal(bias_correction._leading_channel_sums(x), expect)


def test_channel_means_of_strided_and_empty_arrays_take_numpy_path():
    """Non-contiguous or float64 activations are summed as before (no parallel path)."""
    means = bias_correction.ChannelMeans.__new__(bias_correction.ChannelMeans)
    means.wanted, means.sums = {"x": {("axis", 1): ["y"]}}, {}
    x = np.random.default_rng(2).standard_normal((4, 6, 8, 8)).astype(np.float32)
    means.observe("x", x[:, :, ::2])
    means.observe("x", x.astype(np.float64)[:, :, :0])
    total, count = means.sums[("x", ("axis", 1))]
    assert count == 4 * 4 * 8
    assert np.array_equal(total, x[:, :, ::2].sum(axis=(0, 2, 3)).astype(np.float64))


@pytest.mark.parametrize("size", [10, ranges.SHARED_EXTREMES + 12_345])
def test_extremes_equal_numpy(size):
    x = np.random.default_rng(6).standard_normal(size).astype(np.float32)
    x[size // 3] = -7.5
    x[-1] = 9.25
    assert ranges._extremes(x) == (-7.5, 9.25)


def test_workers_run_under_the_callers_error_state():
    import threading
    import time

    seen = {}

    def run(items):
        for _ in items:
            seen.setdefault(threading.get_ident(), set()).add(np.geterr()["over"])
            time.sleep(0.005)  # long enough for the worker thread to take some

    with np.errstate(over="raise"):
        parallel.on_workers(run, range(40))
    assert all(v == {"raise"} for v in seen.values())
    assert len(seen) == min(2, parallel.workers())


def test_elementwise_equals_one_call():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, parallel.SHARED_ELEMENTWISE)).astype(np.float32)
    b = rng.standard_normal(a.shape).astype(np.float32)
    b[0, 5] = np.inf
    expect = a + b
    with np.errstate(all="ignore"):
        out = parallel.elementwise(np.add, a, a, b)  # in place
    assert out is a and np.array_equal(a, expect)
    # a broadcast operand: one call
    twos = np.full(a.shape[1:], 2, np.float32)
    c = parallel.elementwise(np.multiply, np.empty_like(b), b, twos)
    assert np.array_equal(c, b * 2)
