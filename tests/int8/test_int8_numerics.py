"""qconvert.int8 (rounding, fixed point, multipliers, activation range) against oracles.

The integer kernels are checked against tests/c/quant_oracle.c: scalar C written from the
TFLite / gemmlowp / CMSIS-NN definitions (libm frexp and round, int64 arithmetic), compiled here
with gcc and called through ctypes on whole numpy arrays. Rounding is checked against Python's
decimal module, the effective multipliers against scalar Python float / struct float32 arithmetic,
and the activation clamps against values derived by hand from TFLite's formula. No expected value
comes from the code under test.
"""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qconvert.executor.int_kernels_conv import requantize_channels_last
from qconvert.int8.activation_range import activation_range
from qconvert.int8.fixed_point import (
                                       multiply_by_quantized_multiplier,
                                       rounding_divide_by_pot,
                                       saturating_rounding_doubling_high_mul,
                                       )
from qconvert.int8.multipliers import (
                                       effective_multipliers,
                                       frexp_multiplier,
                                       quantize_multiplier,
                                       quantize_multiplier_greater_than_one,
                                       quantize_multiplier_smaller_than_one,
                                       )
from qconvert.int8.rounding import round_half_away
from qconvert.int8.transcendental import get_reciprocal

C_SOURCE = Path(__file__).resolve().parents[1] / "c" / "quant_oracle.c"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SEEDS = st.integers(min_value=0, max_value=2**63 - 1)


class Oracle:
    """ctypes front end of the compiled C oracle; every call loops over whole arrays in C."""

    def __init__(self, lib):
        self.lib = lib
        p64, p32 = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int32)
        lib.oracle_quantize_multiplier.argtypes = [p64, p32, p32, ctypes.c_int64]
        lib.oracle_srdhm.argtypes = [p32, p32, p32, ctypes.c_int64]
        lib.oracle_rdbp.argtypes = [p32, p32, p32, ctypes.c_int64]
        lib.oracle_mbqm.argtypes = [p32, p32, p32, p32, ctypes.c_int64, ctypes.c_int]
        for fn in (lib.oracle_quantize_multiplier, lib.oracle_srdhm, lib.oracle_rdbp,
                   lib.oracle_mbqm):
            fn.restype = None

    @staticmethod
    def _ptr(a, ctype):
        return a.ctypes.data_as(ctypes.POINTER(ctype))

    def _i32(self, *arrays):
        arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.int64) for a in arrays])
        for a in arrays:  # the oracle takes int32: make sure the cast below is lossless
            assert a.size == 0 or (a.min() >= INT32_MIN and a.max() <= INT32_MAX)
        return [np.ascontiguousarray(a.ravel(), dtype=np.int32) for a in arrays], arrays[0].shape

    def quantize_multiplier(self, m):
        m = np.ascontiguousarray(np.asarray(m, dtype=np.float64).ravel())
        mult, shift = np.empty(m.size, np.int32), np.empty(m.size, np.int32)
        self.lib.oracle_quantize_multiplier(self._ptr(m, ctypes.c_double),
                                            self._ptr(mult, ctypes.c_int32),
                                            self._ptr(shift, ctypes.c_int32), m.size)
        return mult, shift

    def _binary(self, fn, a, b):
        (a, b), shape = self._i32(a, b)
        out = np.empty(a.size, np.int32)
        fn(self._ptr(a, ctypes.c_int32), self._ptr(b, ctypes.c_int32),
           self._ptr(out, ctypes.c_int32), a.size)
        return out.reshape(shape)

    def srdhm(self, a, b):
        return self._binary(self.lib.oracle_srdhm, a, b)

    def rdbp(self, x, exponent):
        return self._binary(self.lib.oracle_rdbp, x, exponent)

    def mbqm(self, acc, multiplier, shift, single):
        (acc, multiplier, shift), shape = self._i32(acc, multiplier, shift)
        out = np.empty(acc.size, np.int32)
        self.lib.oracle_mbqm(self._ptr(acc, ctypes.c_int32), self._ptr(multiplier, ctypes.c_int32),
                             self._ptr(shift, ctypes.c_int32), self._ptr(out, ctypes.c_int32),
                             acc.size, int(single))
        return out.reshape(shape)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is needed to build the C oracle")
    lib_path = tmp_path_factory.mktemp("quant_oracle") / "quant_oracle.so"
    subprocess.run([gcc, "-O2", "-shared", "-fPIC", str(C_SOURCE), "-o", str(lib_path), "-lm"],
                   check=True, capture_output=True)
    return Oracle(ctypes.CDLL(str(lib_path)))


# --- round_half_away -------------------------------------------------------------------------

def _decimal_round(values):
    """Round half away from zero of each float, exactly (Decimal(float) is exact; decimal's
    ROUND_HALF_UP is half away from zero)."""
    with localcontext() as ctx:
        ctx.prec = 400  # enough digits for any double's integer part
        return [float(Decimal(float(v)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
                for v in values]


def test_round_half_away_ties_and_near_ties():
    rng = np.random.default_rng(1)
    ties = rng.integers(-10**6, 10**6, 2000) + 0.5
    near = np.array([0.49999999999999994, -0.49999999999999994, 0.5, -0.5, 1.5, 2.5, -2.5,
                     2.0**52 - 0.5, -(2.0**52 - 0.5), 4503599627370497.0, 0.0, -0.0, 1e300])
    randoms = rng.standard_normal(2000) * 1000
    values = np.concatenate([ties, near, randoms])
    assert round_half_away(values).tolist() == _decimal_round(values)
    assert round_half_away(2.5) == 3.0 and round_half_away(-2.5) == -3.0  # np.round gives +-2


def test_round_half_away_keeps_float32():
    values = np.array([0.5, 1.5, 2.5, -2.5, 3.4999998, 8388607.5, -8388607.5], dtype=np.float32)
    out = round_half_away(values)
    assert out.dtype == np.float32
    assert out.tolist() == _decimal_round(values)
    assert round_half_away(np.float32(2.5)).dtype == np.float32
    assert np.isnan(round_half_away(np.nan)) and round_half_away(-np.inf) == -np.inf


# --- quantize_multiplier ---------------------------------------------------------------------

def random_multipliers(seed, n):
    """Mix of log-uniform values in [2**-40, 2**8] and exact dyadic, tie and near-one values."""
    rng = np.random.default_rng(seed)
    k = n // 5
    exps = rng.integers(-40, 9, 4 * k)
    log_uniform = 2.0 ** rng.uniform(-40.0, 8.0, n - 4 * k)
    dyadic = rng.integers(1, 2**20, k) * 2.0 ** (exps[:k] - 20)
    # q = (2j + 1) / 2**32 in [0.5, 1): q * 2**31 = j + 0.5 exactly, a tie of the rounding.
    ties = (2 * rng.integers(2**30, 2**31, k) + 1) * 2.0 ** (exps[k:2 * k] - 32)
    # q = 1 - i * 2**-53: q * 2**31 = 2**31 - i * 2**-22, rounds up to 2**31 for i <= 2**21.
    near_one = (1.0 - rng.integers(1, 2**22, k) * 2.0**-53) * 2.0 ** exps[2 * k:3 * k]
    # Plain random 53-bit mantissas.
    mantissa = (rng.integers(2**52, 2**53, k) * 2.0**-53) * 2.0 ** exps[3 * k:]
    values = np.concatenate([log_uniform, dyadic, ties, near_one, mantissa])
    rng.shuffle(values)
    return values


EDGE_MULTIPLIERS = [
    1.0, 0.5, 1 - 2**-40, 2**-32, 2**-33, 3.0, 0.0, -0.0, 2.0**8, 1.5, 1 - 2**-53,
    (1 - 2**-40) * 2**-32,        # rounds up to 2**31 *before* the e < -31 check: (2**30, -31)
    (2**32 - 1) * 2.0**-32,       # q * 2**31 = 2**31 - 0.5: a tie that rounds up to 2**31
    (2**32 - 3) * 2.0**-32,       # q * 2**31 = 2**31 - 1.5: tie, rounds to 2**31 - 1
    (2**31 + 1) * 2.0**-32,       # q * 2**31 = 2**30 + 0.5: tie, rounds to 2**30 + 1
    (2**31 + 1) * 2.0**-64,       # same mantissa, shift -32: underflows to (0, 0)
    2**-31 * (1 - 2**-33), 5e-324, 2.2250738585072014e-308, 1e-12, 0.1, 0.0039215686,
]


def test_quantize_multiplier_edges_by_hand(oracle):
    # Derived from frexp by hand: 1.0 = 0.5 * 2**1, 3.0 = 0.75 * 2**2, 2**-32 = 0.5 * 2**-31.
    cases = {1.0: (2**30, 1), 0.5: (2**30, 0), 3.0: (3 * 2**29, 2), 2**-32: (2**30, -31),
             2**-33: (0, 0), 0.0: (0, 0), 1 - 2**-40: (2**30, 1),
             (1 - 2**-40) * 2**-32: (2**30, -31), (2**31 + 1) * 2.0**-32: (2**30 + 1, 0),
             (2**32 - 3) * 2.0**-32: (2**31 - 1, 0)}
    mult, shift = quantize_multiplier(np.array(list(cases)))
    assert list(zip(mult.tolist(), shift.tolist())) == list(cases.values())
    assert mult.dtype == np.int32 and shift.dtype == np.int32
    ours = quantize_multiplier(np.array(EDGE_MULTIPLIERS))
    theirs = oracle.quantize_multiplier(EDGE_MULTIPLIERS)
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


@settings(max_examples=4, deadline=None)
@given(seed=SEEDS)
def test_quantize_multiplier_matches_c_oracle(oracle, seed):
    m = random_multipliers(seed, 10**6)
    mult, shift = quantize_multiplier(m)
    c_mult, c_shift = oracle.quantize_multiplier(m)
    bad = np.flatnonzero((mult != c_mult) | (shift != c_shift))
    assert bad.size == 0, [(m[i], mult[i], shift[i], c_mult[i], c_shift[i]) for i in bad[:5]]
    # The tie values really are exercised and are rounded away from zero (not to even).
    q, _ = np.frexp(m)
    frac = q * 2.0**31 - np.floor(q * 2.0**31)
    assert np.count_nonzero(frac == 0.5) > 10**5
    assert np.count_nonzero((c_mult == 2**30) & (q > 0.75)) > 1000  # rounded up to 2**31


def test_quantize_multiplier_shapes_and_rejects():
    mult, shift = quantize_multiplier([[0.25, 0.75]])
    assert mult.shape == shift.shape == (1, 2)
    for bad in (-1e-9, np.nan, np.inf, [0.5, -0.5]):
        with pytest.raises(ValueError):
            quantize_multiplier(bad)


# --- gemmlowp primitives ---------------------------------------------------------------------

def random_int32(rng, n):
    """Full-range int32, small magnitudes and the extremes."""
    full = rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True)
    bits = rng.integers(0, 32, n)
    small = rng.integers(-(2**31), 2**31, n) >> (31 - bits)
    values = np.where(rng.random(n) < 0.5, full, small)
    edges = np.array([INT32_MIN, INT32_MIN + 1, INT32_MAX, INT32_MAX - 1, 0, 1, -1, 2**30, -(2**30)])
    pick = rng.random(n) < 0.05
    values[pick] = rng.choice(edges, np.count_nonzero(pick))
    return values


@settings(max_examples=3, deadline=None)
@given(seed=SEEDS)
def test_srdhm_and_rdbp_match_c_oracle(oracle, seed):
    rng = np.random.default_rng(seed)
    a, b = random_int32(rng, 200_000), random_int32(rng, 200_000)
    a[:3], b[:3] = [INT32_MIN, INT32_MIN, INT32_MAX], [INT32_MIN, INT32_MAX, INT32_MIN]
    np.testing.assert_array_equal(saturating_rounding_doubling_high_mul(a, b), oracle.srdhm(a, b))
    exponent = rng.integers(0, 32, a.size)
    np.testing.assert_array_equal(rounding_divide_by_pot(a, exponent), oracle.rdbp(a, exponent))


def test_gemmlowp_primitives_by_hand():
    assert saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN) == INT32_MAX
    # 3 * 2**30 / 2**31 = 1.5 -> 2;  -3 * 2**30 / 2**31 = -1.5 -> -1 (gemmlowp: half toward +inf)
    assert saturating_rounding_doubling_high_mul([3, -3], 2**30).tolist() == [2, -1]
    # Ties away from zero: 5/2 -> 3, -5/2 -> -3, 6/4 -> 2, -6/4 -> -2, 7/4 -> 2
    assert rounding_divide_by_pot([5, -5, 6, -6, 7, -7], [1, 1, 2, 2, 2, 2]).tolist() == \
        [3, -3, 2, -2, 2, -2]
    assert rounding_divide_by_pot(INT32_MIN, 31) == -1 and rounding_divide_by_pot(INT32_MAX, 31) == 1


# --- multiply_by_quantized_multiplier --------------------------------------------------------

def random_requant_cases(seed, n):
    rng = np.random.default_rng(seed)
    acc = random_int32(rng, n)
    multiplier = rng.integers(2**30, 2**31, n)
    pick = rng.random(n) < 0.02
    multiplier[pick] = rng.choice([2**30, 2**31 - 1, 0, 1], np.count_nonzero(pick))
    shift = rng.integers(-31, 31, n)
    return acc, multiplier, shift


@settings(max_examples=3, deadline=None)
@given(seed=SEEDS)
def test_requantize_matches_c_oracle(oracle, seed):
    acc, multiplier, shift = random_requant_cases(seed, 350_000)  # ~10**6 cases over 3 examples
    for rounding in ("double", "single"):
        ours = multiply_by_quantized_multiplier(acc, multiplier, shift, rounding=rounding)
        theirs = oracle.mbqm(acc, multiplier, shift, single=rounding == "single")
        assert ours.dtype == np.int32
        bad = np.flatnonzero(ours != theirs)
        assert bad.size == 0, (rounding, [(acc[i], multiplier[i], shift[i], ours[i], theirs[i])
                                          for i in bad[:5]])


def test_single_rounding_is_one_step_in_range(oracle):
    """Where nothing overflows, single rounding is floor((acc*m + 2**(30-s)) / 2**(31-s)).

    CMSIS-NN keeps the intermediate (acc*m) >> (30 - s), about twice the result, in 64 bits
    and narrows only the result: results of magnitude in [2**30, 2**31) do not wrap (acc 2**22,
    multiplier 2**30, shift 9 gives +2**30, not -2**30).
    """
    acc, multiplier, shift = random_requant_cases(7, 200_000)
    exact = (acc * multiplier + (np.int64(1) << (30 - shift))) // (np.int64(1) << (31 - shift))
    ok = (exact >= -(2**30)) & (exact < 2**30)
    assert np.count_nonzero(ok) > 50_000
    ours = multiply_by_quantized_multiplier(acc, multiplier, shift, rounding="single")
    np.testing.assert_array_equal(ours[ok], exact[ok])
    large = (np.abs(exact) >= 2**30) & (exact >= INT32_MIN) & (exact <= INT32_MAX)
    assert np.count_nonzero(large) > 0
    np.testing.assert_array_equal(ours[large], exact[large])
    one = multiply_by_quantized_multiplier(np.array([1 << 22]), 1 << 30, 9, rounding="single")
    assert int(one[0]) == 2**30


def test_single_vs_double_rounding(oracle):
    # Hand-derived: 5 * 2**30 * 2**-32 = 1.25. Double: SRDHM -> round(2.5) = 3, then 3/2 = 1.5 -> 2.
    # Single: round(1.25) = 1.  And -10 * 2**-2 = -2.5: double (away) -3, single (half up) -2.
    assert multiply_by_quantized_multiplier([5, -10], 2**30, -1).tolist() == [2, -3]
    assert multiply_by_quantized_multiplier([5, -10], 2**30, -1, rounding="single").tolist() == \
        [1, -2]
    # Typical conv accumulators and right shifts: at most 1 LSB apart, only for shift < 0.
    rng = np.random.default_rng(3)
    n = 400_000
    acc = rng.integers(-(2**20), 2**20, n)
    multiplier = rng.integers(2**30, 2**31, n)
    shift = rng.integers(-12, 3, n)
    double = oracle.mbqm(acc, multiplier, shift, single=False)
    single = oracle.mbqm(acc, multiplier, shift, single=True)
    diff = single.astype(np.int64) - double
    assert np.all(np.abs(diff) <= 1)
    assert np.all(diff[shift >= 0] == 0)
    assert 0 < np.count_nonzero(diff) < 0.05 * n
    np.testing.assert_array_equal(
        multiply_by_quantized_multiplier(acc, multiplier, shift, rounding="single"), single)


def test_requantize_per_channel_axis(oracle):
    rng = np.random.default_rng(5)
    acc = rng.integers(-(2**24), 2**24, (64, 3, 5, 16))
    multiplier = rng.integers(2**30, 2**31, 16)
    shift = rng.integers(-20, 4, 16)
    for rounding in ("double", "single"):
        expected = oracle.mbqm(acc, multiplier, shift, single=rounding == "single")
        np.testing.assert_array_equal(
            multiply_by_quantized_multiplier(acc, multiplier, shift, rounding, axis=3), expected)
        np.testing.assert_array_equal(
            multiply_by_quantized_multiplier(acc, multiplier, shift, rounding, axis=-1), expected)
        moved = np.moveaxis(acc, 3, 0)  # OHWI-like layout: channels on axis 0
        np.testing.assert_array_equal(
            multiply_by_quantized_multiplier(moved, multiplier, shift, rounding, axis=0),
            np.moveaxis(expected, 3, 0))


@pytest.mark.parametrize("rounding", ["double", "single"])
@pytest.mark.parametrize("per_channel", [True, False])
def test_the_kernels_output_stage_matches_c_oracle(oracle, rounding, per_channel):
    """`requantize_channels_last` (conv / depthwise output stage, in blocks on every CPU): the
    accumulator plus bias wrapped to int32 as C holds it, the C oracle's
    MultiplyByQuantizedMultiplier, the offset, the clamp, int8. Accumulators within and beyond
    int32 (wrapping), float and int64, left and right shifts, more rows than one block."""
    rng = np.random.default_rng(11 + per_channel)
    channels = 24
    for big, as_float in ((False, False), (False, True), (True, False)):
        limit = 2**40 if big else 2**22
        acc = rng.integers(-limit, limit, (7, 9, 300, channels))
        bias = rng.integers(INT32_MIN, INT32_MAX, channels)
        size = channels if per_channel else 1
        multiplier = rng.integers(2**30, 2**31, size)
        shift = rng.integers(-20, 4, size)
        wrapped = (acc + bias + 2**31) % 2**32 - 2**31
        expected = oracle.mbqm(wrapped, np.broadcast_to(multiplier, acc.shape),
                               np.broadcast_to(shift, acc.shape), single=rounding == "single")
        expected = np.clip(expected.astype(np.int64) + 5, -128, 127).astype(np.int8)
        got = requantize_channels_last(acc.astype(np.float64) if as_float else acc, bias,
                                       multiplier, shift, 5, -128, 127, rounding)
        assert got.dtype == np.int8 and got.shape == acc.shape
        np.testing.assert_array_equal(got, expected)
    # float32 accumulators below 2**24 (as the kernels make them): the wrap is skipped when the
    # bias cannot leave int32 either, and kept when it can
    for bias_limit in (2**20, INT32_MAX):
        acc = rng.integers(-(2**24) + 1, 2**24, (5, 40, channels))
        bias = rng.integers(-bias_limit, bias_limit, channels)
        multiplier = rng.integers(2**30, 2**31, channels if per_channel else 1)
        shift = rng.integers(-20, 4, channels if per_channel else 1)
        wrapped = (acc + bias + 2**31) % 2**32 - 2**31
        expected = oracle.mbqm(wrapped, np.broadcast_to(multiplier, acc.shape),
                               np.broadcast_to(shift, acc.shape), single=rounding == "single")
        expected = np.clip(expected.astype(np.int64) - 3, -128, 127).astype(np.int8)
        got = requantize_channels_last(acc.astype(np.float32), bias, multiplier, shift, -3,
                                       -128, 127, rounding, acc_bound=2**24)
        np.testing.assert_array_equal(got, expected)
    empty = requantize_channels_last(np.zeros((0, 4)), None, [2**30], [0], 0, -128, 127)
    assert empty.shape == (0, 4)
    with pytest.raises(ValueError):
        requantize_channels_last(np.zeros((2, 4)), None, [2**30] * 3, [0], 0, -128, 127)


def test_requantize_rejects_bad_arguments():
    with pytest.raises(ValueError):
        multiply_by_quantized_multiplier([1], 2**30, 31)
    with pytest.raises(ValueError):
        multiply_by_quantized_multiplier([1], 2**30, -32)
    with pytest.raises(ValueError):
        multiply_by_quantized_multiplier([1], -(2**30), 0)
    with pytest.raises(ValueError):
        multiply_by_quantized_multiplier([2**31], 2**30, 0)
    with pytest.raises(ValueError):
        multiply_by_quantized_multiplier([1], 2**30, 0, rounding="nearest")
    with pytest.raises(TypeError):
        multiply_by_quantized_multiplier([1.5], 2**30, 0)


# --- effective_multipliers -------------------------------------------------------------------

def _f32(x: float) -> float:
    """Round a Python float to the nearest float32 (ties to even), via struct."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def test_effective_multipliers_against_scalar_arithmetic():
    rng = np.random.default_rng(11)
    s_in = np.float32(0.0235294122248888)
    s_out = np.float32(0.0470588244497776)
    s_w = (rng.uniform(1e-4, 2e-2, 4000)).astype(np.float32)
    conv = effective_multipliers(s_in, s_w, s_out)
    fc = effective_multipliers(s_in, s_w, s_out, per_tensor_fc=True)
    assert conv.dtype == fc.dtype == np.float64
    # Scalar oracles: Python floats are doubles; the product of two float32 values is exact in a
    # double (24 + 24 bits), so _f32(product) is the correctly rounded float32 product.
    a, c = float(s_in), float(s_out)
    want_conv = [a * float(w) / c for w in s_w]
    want_fc = [_f32(a * float(w)) / c for w in s_w]
    assert conv.tolist() == want_conv
    assert fc.tolist() == want_fc
    # The float32 product path really differs, on the multiplier and on its quantized form.
    assert np.count_nonzero(conv != fc) > 0.9 * s_w.size
    conv_q, fc_q = quantize_multiplier(conv)[0], quantize_multiplier(fc)[0]
    assert np.count_nonzero(conv_q != fc_q) > 0
    # Scalars broadcast; inputs given as double are rounded to float32 first.
    assert effective_multipliers(0.1, 0.2, 0.3) == float(np.float32(0.1)) * float(
        np.float32(0.2)) / float(np.float32(0.3))


def test_effective_multipliers_rejects_bad_scales():
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError):
            effective_multipliers(0.5, [0.1, bad], 0.25)
        with pytest.raises(ValueError):
            effective_multipliers(0.5, 0.1, bad)


# --- activation_range ------------------------------------------------------------------------

def test_activation_range_by_hand():
    # scale 0.05, zp -10: 0 -> -10; 6 / 0.05 = 120 -> 110; +-1 / 0.05 = +-20 -> -30, 10.
    assert activation_range("NONE", 0.05, -10) == (-128, 127)
    assert activation_range(None, 0.05, -10) == (-128, 127)
    assert activation_range("RELU", 0.05, -10) == (-10, 127)
    assert activation_range("RELU6", 0.05, -10) == (-10, 110)
    assert activation_range("RELU_N1_TO_1", 0.05, -10) == (-30, 10)
    # Clipped: 6 / 0.01 = 600 -> 127; -1 / 0.001 = -1000 -> -128.
    assert activation_range("RELU6", 0.01, 0) == (0, 127)
    assert activation_range("RELU_N1_TO_1", 0.001, 5) == (-128, 127)
    # Exact ties, rounded away from zero (np.round would give 0, 5 and 5):
    # 6 / 12 = 0.5 -> 1;  -+1 / 2 = -+0.5 -> -+1.
    assert activation_range("RELU6", 12.0, 0) == (0, 1)
    assert activation_range("RELU_N1_TO_1", 2.0, 5) == (4, 6)
    # Custom int range (uint8-style).
    assert activation_range("RELU6", 0.05, 10, qmin=0, qmax=255) == (10, 130)


def test_activation_range_divides_in_float32():
    """TFLite computes TfLiteRound(f / scale) with float operands: the float32 quotient 1 / 0.4f
    rounds to exactly 2.5 (-> 3), although the exact quotient is below 2.5 (-> 2)."""
    s = np.float32(0.4)
    exact = Fraction(1) / Fraction(float(s))
    assert exact < Fraction(5, 2)
    below = Fraction(float(np.nextafter(np.float32(2.5), np.float32(0))))
    assert abs(exact - Fraction(5, 2)) < abs(exact - below)  # nearest float32 is 2.5 itself
    assert activation_range("RELU_N1_TO_1", s, 0) == (-3, 3)


def test_activation_range_rejects():
    with pytest.raises(ValueError):
        activation_range("TANH", 0.05, 0)
    with pytest.raises(ValueError):
        activation_range("RELU6", 0.0, 0)
    with pytest.raises(ValueError):
        activation_range("RELU6", 0.05, 128)
    with pytest.raises(ValueError):  # 6 / 1e-12 overflows int32: TFLite fails at Prepare
        activation_range("RELU6", 1e-12, 0)
    assert activation_range("RELU", 1e-12, 0) == (0, 127)  # only q(0) is computed


# --- QuantizeMultiplier variants, frexp multiplier, GetReciprocal ----------------------------

def test_quantize_multiplier_variants_check_their_range():
    # Inside their ranges they are QuantizeMultiplier (values from frexp by hand, as above).
    assert [v.tolist() for v in quantize_multiplier_smaller_than_one([0.75, 2**-32])] == \
        [[3 * 2**29, 2**30], [0, -31]]
    assert [v.tolist() for v in quantize_multiplier_greater_than_one([3.0, 1 + 2**-31])] == \
        [[3 * 2**29, 2**30 + 1], [2, 1]]
    for bad in (1.0, 0.0, -0.5, np.nan, [0.5, 1.5]):
        with pytest.raises(ValueError):
            quantize_multiplier_smaller_than_one(bad)
    for bad in (1.0, 0.5, np.nan, np.inf, [2.0, 0.5]):
        with pytest.raises(ValueError):
            quantize_multiplier_greater_than_one(bad)


def test_frexp_multiplier_keeps_the_unnormalized_rounding():
    # 0.75 = 0.75 * 2**0 -> 0.75 * 2**31; 5 * 2**27 = 0.625 * 2**30.
    assert frexp_multiplier(0.75) == (3 * 2**29, 0)
    assert frexp_multiplier(5.0 * 2**27) == (5 * 2**28, 30)
    # A mantissa that rounds up to 2**31 is not renormalized: int32 wraps it to INT32_MIN.
    assert frexp_multiplier(1 - 2**-40) == (INT32_MIN, 0)


def test_get_reciprocal_against_exact_fractions():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.integers(1, 2**31, 2000), [1, 2, 3, 255, 2**30, 2**31 - 1]])
    for digits in (12, 31):
        recip, bits = get_reciprocal(x, digits)
        for xi, r, b in zip(x.tolist(), recip.tolist(), bits.tolist()):
            want = Fraction(2 ** (31 - digits), xi)  # 1 / (x read as Q(digits).(31 - digits))
            got = Fraction(r, 2**31) * Fraction(2) ** -b
            # gemmlowp halves the normalized x first (RoundingHalfSum), losing its lowest bit
            assert abs(got - want) <= want * Fraction(1, 2**25), (xi, digits, r, b)
