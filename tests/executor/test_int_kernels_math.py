"""int8 LEAKY_RELU, PRELU, RSQRT, DIV and BATCH_MATMUL (qconvert/executor/int_kernels_math.py)
against the TFLite Micro interpreter, bit for bit: every int8 input value (every pair for DIV)
over several quantizations, BATCH_MATMUL over ranks 2 to 5 with adj_x / adj_y and broadcast
batch axes, and a probe pinning its multiplier to TFLite Micro's double product s_a * s_b.
Exact scale ratios put LEAKY_RELU and DIV inputs on rounding ties, where only the double
ratios this TFLite Micro takes give its bits."""

from __future__ import annotations

import numpy as np
import pytest

from qconvert.errors import QConvertError
from qconvert.executor.int_executor import run_int8
from qconvert.int8.multipliers import quantize_multiplier
from qconvert.int8.prepare import layer_params
from qconvert.formats.tflite_reader import read_tflite
from helpers.int8_models import Q8, all_int8_values, assert_same, tflm
from helpers.int8_models import flip_accs, requant


def _tflm_big(model_bytes: bytes, arrays: list) -> np.ndarray:
    """TFLite Micro with an arena large enough for tensors of tens of kilobytes."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model_bytes, arena_size=1 << 20)
    for i, a in enumerate(arrays):
        it.set_input(a, i)
    it.invoke()
    return np.array(it.get_output(0))


@pytest.mark.parametrize("alpha", [0.1, -0.3, 1.7, -2.0, 0.5, 0.0])
@pytest.mark.parametrize("q_in,q_out", [((0.05, -10), (0.04, 20)), ((0.3, 127), (0.5, -128)),
                                        ((0.04, 0), (0.04, 0)),
                                        # float32(s_in / s_out) is 1.25, the double ratio below
                                        ((0.04999999701976776, -128), (0.04, -128))])
def test_leaky_relu_on_every_int8_value(alpha, q_in, q_out):
    """Exact ratios (2.125 = 0.05 * 1.7 / 0.04, 0.5, 1.25) put inputs on rounding ties, where
    only TFLite Micro's double ratios give its bits."""
    n = Q8(1)
    x = n.input("x", (1, 16, 16), *q_in)
    n.node("LeakyRelu", [x], "y", (1, 16, 16), *q_out, alpha=alpha)
    assert_same(n.build(["y"]), [{"x": all_int8_values()}], batch=False)


@pytest.mark.parametrize("alpha_shape", [(4,), (1, 1, 4), (1, 16, 4)])
def test_prelu_on_every_int8_value_with_broadcast_slopes(alpha_shape):
    n = Q8(2)
    x = n.input("x", (1, 16, 16, 4), 0.04, 5)
    rng = np.random.default_rng(0)
    slope = n.const("slope", rng.integers(-128, 128, alpha_shape).astype(np.int8), 0.006, -7)
    n.node("PRelu", [x, slope], "y", (1, 16, 16, 4), 0.05, -3)
    values = np.repeat(all_int8_values((1, 16, 16, 1)), 4, axis=3)
    assert_same(n.build(["y"]), [{"x": values}, {"x": np.roll(values, 5, axis=1)}])


@pytest.mark.parametrize("q_in,q_out", [((0.02, -128), (0.05, -128)), ((0.5, -20), (0.004, -100)),
                                        ((0.0007, -128), (0.3, -128))])
def test_rsqrt_on_every_value_from_the_zero_point(q_in, q_out):
    n = Q8(3)
    z = q_in[1]
    x = n.input("x", (1, 128 - z), *q_in)
    n.node("Rsqrt", [x], "y", (1, 128 - z), *q_out)
    data = n.build(["y"])
    assert_same(data, [{"x": np.arange(z, 128, dtype=np.int64).astype(np.int8)[None]}],
                batch=False)


def test_rsqrt_below_the_zero_point_fails_like_tflite_micro():
    n = Q8(4)
    x = n.input("x", (1, 4), 0.02, 0)
    n.node("Rsqrt", [x], "y", (1, 4), 0.05, -128)
    data = n.build(["y"])
    feeds = np.array([[3, 2, -1, 5]], np.int8)
    with pytest.raises(Exception):
        tflm(data, [feeds])
    with pytest.raises(QConvertError, match="RSQRT"):
        run_int8(read_tflite(data).graph, {"x": feeds})


@pytest.mark.parametrize("q1,q2,q_out,act", [((0.05, 3), (0.02, -128), (0.3, 10), "NONE"),
                                             ((0.01, -128), (0.1, 0), (0.002, -128), "RELU"),
                                             ((0.2, 100), (0.004, 17), (25.0, -5), "NONE")])
def test_div_on_every_pair_of_int8_values(q1, q2, q_out, act):
    n = Q8(5)
    a = n.input("a", (1, 32, 256), *q1)
    b = n.input("b", (1, 32, 256), *q2)
    n.node("Div", [a, b], "y", (1, 32, 256), *q_out, activation=act)
    values = np.arange(-128, 128, dtype=np.int64).astype(np.int8)
    pairs_a = np.broadcast_to(values[:, None], (256, 256)).reshape(8, 1, 32, 256)
    pairs_b = np.broadcast_to(values[None, :], (256, 256)).reshape(8, 1, 32, 256)
    data = n.build(["y"])
    g = read_tflite(data).graph
    for pa, pb in zip(pairs_a, pairs_b):
        np.testing.assert_array_equal(run_int8(g, {"a": pa, "b": pb})["y"],
                                      _tflm_big(data, [pa, pb]))


@pytest.mark.parametrize("a_shape,b_shape,adj_x,adj_y", [
    ((3, 5), (5, 4), False, False),
    ((1, 6, 5), (1, 4, 5), False, True),
    ((2, 5, 3), (1, 5, 4), True, False),
    ((1, 2, 4, 6), (1, 2, 5, 4), True, True),
    ((1, 2, 3, 4, 6), (1, 1, 3, 6, 2), False, False),
])
def test_batch_matmul_shapes_and_adjoints(a_shape, b_shape, adj_x, adj_y):
    n = Q8(6)
    a = n.input("a", a_shape, 0.04, -9)
    b = n.input("b", b_shape, 0.03, 14)
    ta = list(a_shape[-2:])[::-1] if adj_x else list(a_shape[-2:])
    tb = list(b_shape[-2:])[::-1] if adj_y else list(b_shape[-2:])
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    out_shape = tuple(batch) + (ta[0], tb[1])
    n.node("BatchMatMul", [a, b], "y", out_shape, 0.5, 3, adj_x=adj_x, adj_y=adj_y,
           asymmetric_quantize_inputs=False)
    data = n.build(["y"])
    rng = np.random.default_rng(1)
    feeds = [{"a": rng.integers(-128, 128, a_shape).astype(np.int8),
              "b": rng.integers(-128, 128, b_shape).astype(np.int8)} for _ in range(3)]
    assert_same(data, feeds, batch=False)


def _column(acc: int, depth: int) -> np.ndarray:
    """A column of int8 values v with sum(lhs * v) == acc for lhs = [127] * (depth - 1) + [1]."""
    t = (acc + 63) % 127 - 63
    rest = (acc - t) // 127
    col = np.zeros(depth, np.int64)
    col[-1] = t
    full, left = divmod(abs(rest), 127)
    sign = 1 if rest >= 0 else -1
    col[:full] = sign * 127
    col[full] = sign * left
    assert abs(full) < depth - 1
    return col


def test_batch_matmul_multiplier_is_the_double_product():
    """BatchMatMulPrepare's GetQuantizedConvolutionMultipler without a bias: this TFLite Micro
    takes double(s_a) * double(s_b) / double(s_out) (sources of mid-2026 had the product in
    float32). Probe scales where the two give different multipliers, accumulators at their
    rounding ties: TFLite Micro agrees with ours and disagrees with the float32 product and
    with a multiplier one LSB up."""
    rng = np.random.default_rng(8)
    for _ in range(100000):
        s_a = np.float32(rng.uniform(0.01, 0.1))
        s_b = np.float32(rng.uniform(0.01, 0.1))
        s_out = np.float32(float(s_a) * float(s_b) * 2**16 * rng.uniform(1, 2))
        flt = tuple(int(v) for v in quantize_multiplier(float(s_a * s_b) / float(s_out)))
        dbl = tuple(int(v) for v in quantize_multiplier(float(s_a) * float(s_b) / float(s_out)))
        if flt != dbl:
            break
    ours, other = dbl, flt
    m, s = ours
    depth = 1200
    accs = [a for a in flip_accs(m, s, m + 1, s, 6) + flip_accs(m, s, *other, 6)
            if abs(a) < 127 * 127 * (depth - 2)]
    assert len(accs) >= 6
    n = Q8(7)
    a = n.input("a", (1, depth), s_a, 0)
    b = n.input("b", (depth, len(accs)), s_b, 0)
    n.node("BatchMatMul", [a, b], "y", (1, len(accs)), s_out, 0, adj_x=False, adj_y=False,
           asymmetric_quantize_inputs=False)
    data = n.build(["y"])
    g = read_tflite(data).graph
    p = layer_params(g, g.nodes[0])
    assert (p["output_multiplier"], p["output_shift"]) == ours
    lhs = np.array([[127] * (depth - 1) + [1]], np.int8)
    rhs = np.stack([_column(acc, depth) for acc in accs], axis=1).astype(np.int8)
    ref = _tflm_big(data, [lhs, rhs]).reshape(-1)
    np.testing.assert_array_equal(run_int8(g, {"a": lhs, "b": rhs})["y"].reshape(-1), ref)
    np.testing.assert_array_equal(requant(accs, m, s), ref)
    for alt in ((m + 1, s), other):
        assert np.any(requant(accs, *alt) != ref)


def test_rsqrt_multiplier_is_double_at_rounding_ties():
    """Output scales chosen so an output lands on a rounding tie where the two formulas part:
    this TFLite Micro's RSQRT multiplier is 1 / (sqrt(double(s_in)) * double(s_out)), and the
    float32 sqrtf and product of older sources give other bits there. (Candidates are screened
    with the requantization step alone; TFLite Micro judges the ones kept.)"""
    from qconvert.int8.fixed_point import multiply_by_quantized_multiplier, rdbpot, srdhm, wrap32
    from qconvert.int8.transcendental import inv_sqrt_multiplier_exp

    rng = np.random.default_rng(0)
    every = np.arange(-128, 128).astype(np.int8)[None]
    v = np.arange(256)
    m, e = inv_sqrt_multiplier_exp(v)
    shift = e + 20
    data = rdbpot(srdhm(wrap32(np.int64(1) << np.maximum(shift, 0)), m), np.maximum(-shift, 0))

    def screened(real):
        mult, sh = quantize_multiplier(real)
        out = multiply_by_quantized_multiplier(data, int(mult), int(sh) - 20).astype(np.int64)
        return np.where(v == 0, 127, np.clip(out - 128, -128, 127))

    found = 0
    for _ in range(3000):
        s_in = np.float32(rng.uniform(0.001, 0.5))
        k = int(rng.integers(1, 256))
        real = (int(rng.integers(1, 200)) + 0.5) * 2**20 / int(data[k])  # v = k on a tie
        s_out = np.float32(1.0 / (np.sqrt(float(s_in)) * real))
        for _ in range(6):
            f32_real = 1.0 / float(np.float32(np.sqrt(s_in, dtype=np.float32) * s_out))
            if np.any(screened(1.0 / (np.sqrt(float(s_in)) * float(s_out)))
                      != screened(f32_real)):
                n = Q8(9)
                x = n.input("x", (1, 256), float(s_in), -128)
                n.node("Rsqrt", [x], "y", (1, 256), float(s_out), -128)
                model = n.build(["y"])
                ref = _tflm_big(model, [every])
                np.testing.assert_array_equal(run_int8(read_tflite(model).graph,
                                                       {"x": every})["y"], ref)
                assert np.any(screened(f32_real) != ref.reshape(-1))
                found += 1
                break
            s_out = np.nextafter(s_out, np.float32(1))
        if found == 4:
            break
    assert found == 4
