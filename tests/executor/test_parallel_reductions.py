"""Calibration's reductions shared among the CPUs (`executor.parallel`) give exactly the
single-threaded result: histogram counts, channel sums, min / max, elementwise in-place ops,
and the plan's layers (errors raised in node order)."""

from __future__ import annotations

import numpy as np
import pytest

from qconvert.executor import parallel
from qconvert.quant import bias_correction, histogram, tensor_stats


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
    stats = tensor_stats.tensor_stats(x, False, True)
    assert np.array_equal(stats.channel_sums, expect)
    assert (stats.lo, stats.hi) == (float(x.min()), float(x.max()))


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


@pytest.mark.parametrize("size", [10, tensor_stats.SHARED_STATS + 12_345,
                                  3 * histogram.SAMPLE_CAP + 7])
def test_tensor_stats_extremes_and_sample_equal_numpy(size):
    """Min / max of every value, and the histogram's sample: the same values, in the same
    order, as `histogram.sample` (a strided subset beyond SAMPLE_CAP), however the spans fall."""
    x = np.random.default_rng(6).standard_normal(size).astype(np.float32)
    x[size // 3] = -7.5
    x[-1] = 9.25
    stats = tensor_stats.tensor_stats(x, True)
    assert (stats.lo, stats.hi) == (-7.5, 9.25)
    assert np.array_equal(stats.sample, histogram.sample(x))
    assert tensor_stats.tensor_stats(x, False).sample is None


def test_one_pass_for_ranges_and_means_equals_separate_observers():
    """Calibration's fused observation of a layer input (range + histogram + channel means in
    one pass) records exactly what the two observers record on their own."""
    from qconvert.quant.ranges import RangeCollector

    x = np.random.default_rng(9).standard_normal((3, 40, 50, 70)).astype(np.float32)
    means = [bias_correction.ChannelMeans.__new__(bias_correction.ChannelMeans)
             for _ in range(2)]
    for m in means:
        m.wanted, m.sums = {"x": {("axis", 1): ["y"]}}, {}
    alone, fused = RangeCollector("mse"), RangeCollector("mse")
    alone.observe("x", x)
    means[0].observe("x", x)
    assert means[1].summed_by_stats("x", x) and fused.wants("x", x)
    stats = tensor_stats.tensor_stats(x, True, True)
    fused.observe("x", x, stats)
    means[1].observe("x", x, stats.channel_sums)
    assert alone.ranges() == fused.ranges()
    assert np.array_equal(alone.hist["x"].counts, fused.hist["x"].counts)
    a, b = means[0].sums["x", ("axis", 1)], means[1].sums["x", ("axis", 1)]
    assert a[1] == b[1] and np.array_equal(a[0], b[0])
    assert np.array_equal(a[0], x.sum(axis=(0, 2, 3)).astype(np.float64))


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


@pytest.mark.parametrize("scale_shape", [(300, 1, 1, 1), (1, 64, 1, 1), (5,), ()])
def test_fusion_weight_scaling_in_pieces_equals_one_product(scale_shape):
    """BatchNorm folding's W * s (float64 product, rounded once) of a weight large enough to be
    split among the CPUs: bit for bit the product computed at once."""
    from qconvert.executor.parallel import SPAN
    from qconvert.passes.fusion.linear_layer import _times

    rng = np.random.default_rng(8)
    w = rng.standard_normal((300, 64, 3, 5)).astype(np.float32)
    assert w.size >= 4 * SPAN
    s = rng.standard_normal(scale_shape) * 1.7
    got = _times(w, s, np.float32)
    assert got.dtype == np.float32
    assert np.array_equal(got, (w.astype(np.float64) * s).astype(np.float32))


def test_plan_shares_layers_among_cpus_and_raises_the_first_error_in_node_order(monkeypatch):
    """Layers are planned in parallel, largest first; the plan equals one planned layer by
    layer, and an error is the one of the first failing layer in graph order."""
    from qconvert.errors import QConvertError
    from qconvert.formats.model_io import load_model
    from qconvert.passes import PassContext
    from qconvert.passes.pipeline import FUSE_PIPELINE, run_pipeline
    from qconvert.quant import plan as plan_module
    from qconvert.quant.calibrate import calibrate
    from qconvert.quant.quantize import QuantizeOptions

    model = load_model("tests/models/digits_cnn.onnx")
    run_pipeline(model, FUSE_PIPELINE, PassContext(model.format, {}))
    graph = model.graph
    x = np.random.default_rng(0).standard_normal(
        (4, *graph.tensors[graph.inputs[0]].shape[1:])).astype(np.float32)
    measured = calibrate(model, {graph.inputs[0]: x}, QuantizeOptions(), 0)
    qplan = plan_module.plan(graph, measured.ranges, "onnx", False, measured.means)
    layers = [n for n in graph.nodes if n.outputs[0] in qplan.layers]
    assert len(layers) >= 3
    for node in layers:  # the same as each layer planned on its own
        alone = plan_module._plan_layer(graph, node, qplan.activations, "onnx", False,
                                        measured.means.get(node.outputs[0]))
        got = qplan.layers[node.outputs[0]]
        assert np.array_equal(alone.weights, got.weights)
        assert np.array_equal(alone.bias, got.bias)

    failing = {layers[1].name, layers[-1].name}
    original = plan_module._plan_layer

    def plan_layer(graph, node, *args):
        if node.name in failing:
            raise QConvertError(f"cannot plan {node.name}")
        return original(graph, node, *args)

    monkeypatch.setattr(plan_module, "_plan_layer", plan_layer)
    with pytest.raises(QConvertError, match=f"cannot plan {layers[1].name}$"):
        plan_module.plan(graph, measured.ranges, "onnx", False, measured.means)


def test_in_place_relu_clip_add_over_many_spans_equal_numpy():
    """The executor's in-place Relu, Clip and Add on tensors of several spans (shared among the
    CPUs): the values of the whole-array formulas."""
    from qconvert.executor.float_executor import run_float
    from qconvert.ir import Graph, Node, Tensor

    shape = (2, 6, 300, 300)
    assert np.prod(shape) > 4 * parallel.SHARED_ELEMENTWISE
    g = Graph()
    for name in ("x", "m", "a", "b", "y"):
        g.add_tensor(Tensor(name, shape, "float32"))
    g.add_tensor(Tensor("lo", (), "float32", np.array(-0.25, np.float32)))
    g.add_tensor(Tensor("hi", (), "float32", np.array(0.5, np.float32)))
    g.nodes = [Node("Mul", ["x", "x"], ["m"]), Node("Relu", ["m"], ["a"]),
               Node("Clip", ["a", "lo", "hi"], ["b"]), Node("Add", ["x", "b"], ["y"])]
    g.inputs, g.outputs = ["x"], ["y"]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    y = run_float(g, {"x": x})["y"]
    np.testing.assert_array_equal(y, x + np.minimum(np.maximum(x * x, 0), np.float32(0.5)))


@pytest.mark.parametrize("method", ["mse", "entropy", "percentile"])
def test_range_searches_shared_among_cpus_equal_one_cpu(monkeypatch, method):
    """`RangeCollector.ranges` runs each tensor's search on whichever CPU is free: the same
    ranges as on one CPU, in the same order."""
    from qconvert.quant.ranges import RangeCollector

    rng = np.random.default_rng(6)
    collector = RangeCollector(method)
    for i in range(9):
        a = rng.standard_normal(50_000).astype(np.float32) * (i + 1)
        collector.observe(f"t{i}", np.maximum(a, 0) if i % 2 else a)
    shared = collector.ranges()
    monkeypatch.setattr(parallel, "workers", lambda: 1)
    assert list(shared.items()) == list(collector.ranges().items())
