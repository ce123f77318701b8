"""Activation range methods (`--method mse`, `--method entropy`) against independent oracles:
MSE against a brute-force search that quantizes the raw calibration values on each candidate
grid; entropy against a plain loop implementation of TensorRT's KL procedure; the streamed
histogram against numpy's histogram of all the values."""

import numpy as np
import pytest

from qconvert.quant.histogram import BINS, StreamingHistogram, sample
from qconvert.quant.params import activation_params
from qconvert.quant.range_search import kl_threshold_bins
from qconvert.quant.ranges import RangeCollector


def _true_mse(x, lo, hi):
    """Mean squared error of quantizing the values x on activation_params(lo, hi)'s grid."""
    s, z = activation_params(lo, hi)
    s = float(s)
    q = np.clip(np.sign(x / s) * np.floor(np.abs(x / s) + 0.5) + z, -128, 127)
    return float(np.mean((x - s * (q - z)) ** 2))


def _collect(method, batches, name="t"):
    c = RangeCollector(method)
    for b in batches:
        c.observe(name, b)
    return c.ranges()[name]


@pytest.mark.parametrize("kind", ["relu", "signed", "skewed"])
def test_mse_range_matches_brute_force_on_raw_values(kind):
    rng = np.random.default_rng(7)
    x = rng.standard_t(2, 20000).astype(np.float32)
    if kind == "relu":
        x = np.maximum(x, 0)
    elif kind == "skewed":
        x = np.where(x < 0, 0.3 * x, x)
    lo, hi = _collect("mse", np.split(x, 4))
    # brute force: a fine grid of candidate ranges, each scored on the raw values
    lo_obs, hi_obs = float(x.min()), float(x.max())
    fr = np.linspace(0.02, 1, 70)
    los = [lo_obs] if lo_obs >= 0 else lo_obs * fr
    best = min(_true_mse(x, a, b) for a in los for b in hi_obs * fr)
    got = _true_mse(x, lo, hi)
    minmax = _true_mse(x, lo_obs, hi_obs)
    assert got <= best * 1.03, (got, best)
    assert got <= minmax * 1.001


def test_mse_keeps_the_full_range_of_uniform_data():
    x = np.random.default_rng(1).uniform(-1, 3, 20000).astype(np.float32)
    lo, hi = _collect("mse", [x])
    assert lo <= x.min() * 0.97 and hi >= x.max() * 0.97


def _trt_kl_reference(h, levels):
    """TensorRT's KL calibration, written out plainly (one candidate at a time)."""
    h = h.astype(np.float64)
    best, best_i = np.inf, None
    for i in range(levels, len(h) + 1):
        p = h[:i].copy()
        p[i - 1] += h[i:].sum()
        nonzero = p != 0
        m = i // levels
        q = np.zeros(i)
        for j in range(levels):
            start = j * m
            stop = i if j == levels - 1 else start + m
            norm = nonzero[start:stop].sum()
            if norm:
                q[start:stop] = h[start:stop].sum() / norm
        q[~nonzero] = 0
        P, Q = p / p.sum(), q / q.sum()
        mask = P > 0
        if np.any(Q[mask] == 0):
            kl = np.inf
        else:
            kl = float(np.sum(P[mask] * np.log(P[mask] / Q[mask])))
        if kl < best - 1e-12:
            best, best_i = kl, i
    return best_i


@pytest.mark.parametrize("levels,seed", [(128, 0), (128, 1), (256, 2), (16, 3)])
def test_entropy_threshold_equals_plain_tensorrt_procedure(levels, seed):
    rng = np.random.default_rng(seed)
    n = 700 if levels == 16 else 1500
    x = np.abs(rng.laplace(0, 1, 200000))
    h = np.histogram(x, n, (0, x.max()))[0].astype(np.float64)
    h[rng.integers(0, n, 40)] = 0  # empty bins inside, as real histograms have
    assert kl_threshold_bins(h, levels) == _trt_kl_reference(h, levels)


def test_entropy_range_clips_a_long_tail_and_keeps_the_observed_sign():
    rng = np.random.default_rng(3)
    x = rng.laplace(0, 1, 100000).astype(np.float32)
    lo, hi = _collect("entropy", [x])
    assert x.min() < lo < 0 < hi < x.max()
    assert hi < 0.9 * x.max()
    r = _collect("entropy", [np.abs(x)])
    assert r[0] == float(np.abs(x).min()) and r[1] < 0.9 * np.abs(x).max()


def test_streamed_histogram_equals_one_histogram_of_everything():
    """Batches that widen the range several times: the doubled bins equal numpy's histogram of
    all values over the final range."""
    rng = np.random.default_rng(5)
    batches = [rng.normal(0, s, 5000).astype(np.float32) for s in (0.1, 1.0, 0.5, 9.0)]
    h = StreamingHistogram()
    for b in batches:
        h.add(b, float(np.abs(b).max()))
    x = np.concatenate(batches).astype(np.float64)
    w = h.width
    expect = np.bincount(np.clip(np.floor(x / w), -BINS, BINS - 1).astype(int) + BINS,
                         minlength=2 * BINS)
    # floor(x / 2^k w0) computed via doublings equals floor computed at once
    assert np.array_equal(h.counts, expect)
    assert h.top >= np.abs(x).max()


def test_histogram_sample_is_bounded_and_covers_the_tensor():
    from qconvert.quant import histogram

    big = np.arange(3 * histogram.SAMPLE_CAP + 5, dtype=np.float32)
    s = sample(big)
    assert s.size <= histogram.SAMPLE_CAP and s[-1] > 0.99 * big[-1] - 2 * big.size / s.size
    small = np.arange(10, dtype=np.float32)
    assert sample(small).size == 10


def test_collector_skips_tensors_not_needed():
    c = RangeCollector("mse", needed={"a"})
    c.observe("a", np.ones(4, np.float32))
    c.observe("b", np.ones(4, np.float32))
    assert set(c.ranges()) == {"a"}


@pytest.mark.parametrize("method", ["mse", "entropy"])
def test_methods_end_to_end_bit_exact_in_tflm(tmp_path, method):
    """The clipped ranges give a valid int8 model: TFLite Micro equals our integer executor,
    and the input range is no wider than minmax's."""
    from click.testing import CliRunner

    from helpers.oracles import TEST_MODELS, random_inputs, run_tflm
    from qconvert.cli.app import main
    from qconvert.executor.int_executor import run_int8
    from qconvert.formats.model_io import load_model

    calib = np.random.default_rng(0).laplace(0, 1, (24, 1, 640)).astype(np.float32)
    np.save(tmp_path / "calib.npy", calib)
    scales = {}
    for m in ("minmax", method):
        out = tmp_path / f"{m}.tflite"
        r = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / "ad01_fp32.tflite"),
                                      "--calibration", str(tmp_path / "calib.npy"),
                                      "--method", m, "-o", str(out)])
        assert r.exit_code == 0, r.output
        graph = load_model(out).graph
        scales[m] = float(graph.tensors[graph.inputs[0]].quant.scale[0])
    from tflite_micro.python.tflite_micro import runtime

    d = runtime.Interpreter.from_bytes(out.read_bytes()).get_input_details(0)
    for seed in (0, 1):
        x = random_inputs([(d["shape"], d["dtype"])], seed)[0]
        np.testing.assert_array_equal(run_tflm(out.read_bytes(), seed)[0],
                                      run_int8(graph, {graph.inputs[0]: x})[graph.outputs[0]])
    assert scales[method] < scales["minmax"]


def test_defaults_are_mse_ranges_with_bias_correction(tmp_path):
    """The defaults the figures of docs/results/accuracy.md chose: MSE ranges, bias correction on, no
    equalization; the report says so."""
    import json

    from click.testing import CliRunner

    from helpers.oracles import TEST_MODELS
    from qconvert.cli.app import main

    r = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / "ad01_fp32.tflite"),
                                  "--calibration-random", "4", "-o", str(tmp_path / "m.tflite"),
                                  "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["method"], report["bias_correction"], report["equalize"]) == ("mse", True,
                                                                                  False)


@pytest.mark.parametrize("method", ["mse", "percentile", "entropy"])
def test_tiny_activations_histogram_without_overflow(method):
    """Activations of ~1e-37 (1 / top overflows float32) still give a finite range."""
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * np.float32(1e-37)
    lo, hi = _collect(method, [x, x * 2])
    assert np.isfinite(lo) and np.isfinite(hi) and lo <= 0 <= hi and hi > 0
