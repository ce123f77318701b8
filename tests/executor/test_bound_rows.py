"""`executor.bound_rows`: max / min against a scalar bound, computed against a row of the
bound, equal bit for bit to numpy's scalar form (the oracle), NaN, infinities and signed zeros
included, for every size around the row length, in place or not."""

from __future__ import annotations

import numpy as np
import pytest

from qconvert.executor import bound_rows
from qconvert.executor.bound_rows import ROW, maximum, minimum

SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 6.0, -6.0, 1e-45, -1e-45, 1.0, -1.0]


def _values(size, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(size) * 4).astype(dtype)
    specials = np.array(SPECIALS, dtype)
    x[: min(size, 3 * len(specials))] = np.resize(specials, min(size, 3 * len(specials)))
    return x


def _bits(a):
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 37, ROW - 1, ROW, ROW + 1, 3 * ROW + 5])
@pytest.mark.parametrize("fn,ufunc", [(maximum, np.maximum), (minimum, np.minimum)])
@pytest.mark.parametrize("bound", [0, 6, -1.0, -0.0])
def test_equal_to_numpy_against_a_scalar(dtype, size, fn, ufunc, bound):
    x = _values(size, dtype)
    expected = ufunc(x, x.dtype.type(bound))
    got = fn(x, bound)
    assert got.dtype == x.dtype and got.shape == x.shape
    assert np.array_equal(_bits(got), _bits(expected))
    inplace = x.copy()
    assert fn(inplace, bound, out=inplace) is inplace
    assert np.array_equal(_bits(inplace), _bits(expected))


def test_many_dimensions_and_other_layouts():
    x = _values(2 * 3 * ROW // 4 * 5, np.float32, seed=1).reshape(2, 3, ROW // 4, 5)
    assert np.array_equal(_bits(maximum(x, 0)), _bits(np.maximum(x, np.float32(0))))
    strided = x[:, :, ::2]  # not contiguous: numpy's own form
    assert np.array_equal(_bits(minimum(strided, 1)), _bits(np.minimum(strided, np.float32(1))))
    out = np.empty_like(x)
    assert maximum(x, 0, out=out) is out
    assert np.array_equal(_bits(out), _bits(np.maximum(x, np.float32(0))))
    fortran = np.asfortranarray(x)
    assert np.array_equal(_bits(maximum(fortran, 0)), _bits(np.maximum(fortran, np.float32(0))))
    ints = np.arange(-5, 5)
    assert np.array_equal(maximum(ints, 0), np.maximum(ints, 0))


def test_the_rows_are_used_and_bounded():
    """A contiguous float array goes through a cached row of its bound; the cache stays small
    however many distinct bounds a model's Clips use."""
    bound_rows._ROWS.clear()
    x = _values(3 * ROW, np.float32)
    maximum(x, 0.5)
    assert (np.dtype(np.float32).str, np.float32(0.5).tobytes()) in bound_rows._ROWS
    for k in range(3 * bound_rows._MAX_ROWS):
        minimum(x, float(k))
    assert len(bound_rows._ROWS) <= bound_rows._MAX_ROWS
    assert all(not row.flags.writeable for row in bound_rows._ROWS.values())
