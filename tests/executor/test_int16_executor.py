"""The integer executor on 16x8 models (int16 activations, int8 weights) against the TFLite
Micro interpreter (reference kernels), bit for bit.

Whole models: the TFLite converter's 16x8 models of tests/models/int16 (made by
make_int16_models.py) and a mixed int8 / 16x8 model (make_mixed_model.py), every layer's
output compared. Single layers built here probe what the models cannot: every int16 value
through LOGISTIC / TANH at power-of-two and other scales, softmax rows with saturated entries,
int32 versus int64 bias accumulators near their limits, the int16 requantizing QUANTIZE paths,
and the refusals.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from helpers.int8_models import Q8, movement_model
from helpers.int16_models import (INT16_DIR, INT16_MODELS, assert_same16, feeds_for, full_range16,
                                  prelu16_model, softmax8_16_model, softmax8_16_rows,
                                  squared_difference16_model, tflm, unary16)
from qconvert.errors import QConvertError
from qconvert.executor.int_executor import run_int8, supported_ops16
from qconvert.int8.fixed_point import multiply_by_quantized_multiplier_int64 as requantize_int64
from qconvert.int8.prepare import layer_params
from qconvert.formats.model_io import load_model, serialize
from qconvert.formats.tflite_reader import read_tflite

CONV = {"activation": "NONE", "strides": [1, 1], "dilations": [1, 1]}


# -- whole models ---------------------------------------------------------------------------
def test_the_models_cover_tflite_micros_16x8_kernels():
    ops = set()
    for path in INT16_MODELS:
        ops |= {n.op for n in load_model(path).graph.nodes}
    want = {"Conv2D", "DepthwiseConv2D", "FullyConnected", "TransposeConv", "BatchMatMul", "Add",
            "Sub", "Mul", "AveragePool", "MaxPool", "Mean", "Softmax", "Sigmoid", "Tanh", "Relu",
            "Relu6", "LeakyRelu", "Maximum", "Minimum", "Concat", "Pad", "Transpose",
            "Reshape", "StridedSlice", "SplitEqual", "ResizeNearest", "Quantize",
            "Dequantize", "Rsqrt", "Abs", "SquaredDifference", "ReduceSum", "SliceBySize",
            "Pack", "Unpack", "Reverse"}
    assert want <= ops, want - ops
    assert want <= set(supported_ops16())
    total = sum(p.stat().st_size for p in INT16_MODELS)
    assert total < 1_000_000


@pytest.mark.parametrize("path", INT16_MODELS, ids=lambda p: p.name)
def test_models_every_layer_bit_exact(path):
    model = load_model(path)
    g = model.graph
    g.outputs = [o for n in g.nodes for o in n.outputs if o is not None]
    data = serialize(model)
    g = read_tflite(data).graph
    got = assert_same16(data, [feeds_for(g, seed) for seed in range(3)])
    last = got[g.outputs[-1]]
    assert len(np.unique(last)) > 1  # the comparison means something


def test_mixed_model_runs_each_layer_with_its_own_kernels():
    g = load_model(INT16_DIR / "mixed_int8_int16.tflite").graph
    dtypes = [g.tensors[n.outputs[0]].dtype for n in g.nodes]
    assert dtypes[0] == "int8" and "int16" in dtypes and dtypes[-1] == "int8"
    quantizes = [(g.tensors[n.inputs[0]].dtype, g.tensors[n.outputs[0]].dtype)
                 for n in g.nodes if n.op == "Quantize"]
    assert quantizes == [("int8", "int16"), ("int16", "int8")]
    conv16 = next(n for n in g.nodes if n.op == "Conv2D" and
                  g.tensors[n.inputs[0]].dtype == "int16")
    p = layer_params(g, conv16)
    assert p["accumulator_bits"] == 64 and p["activation_min"] == 0 \
        and p["activation_max"] == 32767


def test_batch_of_inputs_equals_tflm_one_at_a_time():
    path = INT16_DIR / "conv_16x8.tflite"
    g = load_model(path).graph
    x = np.random.default_rng(3).integers(-32768, 32768, (4,) + tuple(g.tensors[g.inputs[0]]
                                                                       .shape[1:]))
    x = x.astype(np.int16)
    got = run_int8(g, {g.inputs[0]: x})[g.outputs[0]]
    data = path.read_bytes()
    ref = np.concatenate([tflm(data, [x[i:i + 1]])[0] for i in range(len(x))])
    np.testing.assert_array_equal(got, ref)


# -- single layers --------------------------------------------------------------------------
def all_int16_values() -> np.ndarray:
    return np.arange(-32768, 32768, dtype=np.int32).astype(np.int16).reshape(1, 256, 256)


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
@pytest.mark.parametrize("s_in", [2.0**-12, 2.0**-11, 2.0**-10, 3.0e-4, 1.0e-4, 0.01, 1.3e-3])
def test_logistic_and_tanh_on_every_int16_value(op, s_in):
    n = Q8()
    x = n.input("x", (1, 256, 256), s_in, 0, dtype="int16")
    n.node(op, [x], "y", (1, 256, 256), 2.0**-15, 0, dtype="int16")
    assert_same16(n.build(["y"]), [{"x": all_int16_values()}])


@pytest.mark.parametrize("s_in,beta", [(1e-3, 1.0), (3e-4, 1.0), (2e-2, 0.5), (1.0 / 4096, 2.0)])
def test_softmax16_including_saturated_rows(s_in, beta):
    n = Q8()
    x = n.input("x", (6, 37), s_in, 0, dtype="int16")
    n.node("Softmax", [x], "y", (6, 37), 1.0 / 32768, 0, dtype="int16", beta=beta)
    rng = np.random.default_rng(5)
    v = rng.integers(-32768, 32768, (6, 37))
    v[1] = rng.integers(-200, 200, 37)  # nearly flat row
    v[2, :] = -32768
    v[2, 7] = 32767  # one entry dominates
    v[3] = 0
    assert_same16(n.build(["y"]), [{"x": v.astype(np.int16)}])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6"])
@pytest.mark.parametrize("scales", [(3e-4, 7e-4, 9e-4), (1e-3, 1e-3, 5e-4), (2e-4, 6e-3, 4e-3)])
def test_elementwise_binary16(op, act, scales):
    s1, s2, s_out = scales
    if op == "Mul":
        s_out = s1 * s2 * 4000
    n = Q8(2)
    a = n.input("a", (1, 8, 8, 16), s1, 0, dtype="int16")
    b = n.input("b", (1, 8, 8, 16), s2, 0, dtype="int16")
    n.node(op, [a, b], "y", (1, 8, 8, 16), s_out, 0, dtype="int16", activation=act)
    data = n.build(["y"])
    rng = np.random.default_rng(1)
    feeds = [{k: rng.integers(-32768, 32768, (1, 8, 8, 16)).astype(np.int16) for k in "ab"}
             for _ in range(2)]
    assert_same16(data, feeds)


def _conv16(bias_dtype, bias_values, s_in=1e-3, s_out=2e-2, op="Conv2D"):
    n = Q8(4)
    x = n.input("x", (1, 6, 6, 8), s_in, 0, dtype="int16")
    if op == "Conv2D":
        w, s_w = n.weights("w", (4, 3, 3, 8), 0)
        out_c = 4
        attrs = dict(CONV, kernel_shape=[3, 3], pads=[1, 1, 1, 1], padding="SAME")
    else:
        w, s_w = n.weights("w", (1, 3, 3, 8), 3)
        out_c = 8
        attrs = dict(CONV, kernel_shape=[3, 3], pads=[0, 0, 0, 0], padding="VALID",
                     depth_multiplier=1)
    bias = n.const("b", np.asarray(bias_values[:out_c], bias_dtype),
                   (np.float32(s_in) * s_w).astype(np.float32), 0, 0)
    shape = (1, 6, 6, out_c) if op == "Conv2D" else (1, 4, 4, out_c)
    attrs["activation"] = "RELU"
    n.node(op, [x, w, bias], "y", shape, s_out, 0, dtype="int16", **attrs)
    return n.build(["y"])


@pytest.mark.parametrize("bias_dtype", [np.int64, np.int32])
def test_conv16_int64_and_int32_bias_accumulators(bias_dtype):
    big = [2**30 + 12345, -(2**30), 987654, -3] if bias_dtype == np.int32 else \
        [2**40 + 77, -(2**38), 123456789, 0]
    data = _conv16(bias_dtype, big, s_out=5.0)
    g = read_tflite(data).graph
    p = layer_params(g, g.nodes[0])
    assert p["accumulator_bits"] == (32 if bias_dtype == np.int32 else 64)
    rng = np.random.default_rng(2)
    assert_same16(data, [{"x": rng.integers(-32768, 32768, (1, 6, 6, 8)).astype(np.int16)}
                         for _ in range(2)])
    assert_same16(_conv16(bias_dtype, [5, -7, 100, 0]),
                  [{"x": rng.integers(-32768, 32768, (1, 6, 6, 8)).astype(np.int16)}])


def test_int64_requantization_rounds_the_multiplier_to_q15():
    # 0x7FFF0000 and above saturate to 0x7FFF; else (m + 2**15) >> 16
    assert requantize_int64(1 << 20, 0x7FFFFFFF, 0) == ((1 << 20) * 0x7FFF + (1 << 14)) >> 15
    assert requantize_int64(-(1 << 20), 1 << 30, -3) == ((-(1 << 20) * (1 << 14)) + (1 << 17)) >> 18
    assert requantize_int64(3, (1 << 30) + (1 << 15), 0) == (3 * ((1 << 14) + 1) + (1 << 14)) >> 15


def test_depthwise16_refuses_an_int32_bias():
    data = _conv16(np.int32, [1] * 8, op="DepthwiseConv2D")
    g = read_tflite(data).graph
    with pytest.raises(QConvertError, match="int64"):
        run_int8(g, {"x": np.zeros((1, 6, 6, 8), np.int16)})
    data = _conv16(np.int64, list(range(8)), op="DepthwiseConv2D")
    assert_same16(data, [{"x": np.random.default_rng(0).integers(-32768, 32768, (1, 6, 6, 8))
                          .astype(np.int16)}])


@pytest.mark.parametrize("src,dst", [("float32", "int16"), ("int8", "int16"), ("int16", "int8"),
                                     ("int16", "int16")])
def test_quantize_paths(src, dst):
    n = Q8(6)
    s_src, z_src = {"float32": (None, None), "int8": (0.05, -7), "int16": (3e-4, 0)}[src]
    s_dst, z_dst = {"int8": (0.02, 9), "int16": (1.1e-4, 0)}[dst]
    x = n.input("x", (1, 4096), s_src, z_src, dtype=src)
    n.node("Quantize", [x], "y", (1, 4096), s_dst, z_dst, dtype=dst)
    rng = np.random.default_rng(8)
    if src == "float32":
        v = np.concatenate([np.arange(-2048, 2048) * np.float32(1.1e-4) / 2,  # ties
                            rng.normal(0, 3, 4096)])[:4096].astype(np.float32)
        v[:8] = [10.0, -10.0, 1e9, -1e9, 3.6, -3.6, 0.0, 2.5e-5]
    else:
        info = np.iinfo(src)
        v = rng.integers(info.min, info.max + 1, 4096).astype(src)
    assert_same16(n.build(["y"]), [{"x": v.reshape(1, 4096)}])


@pytest.mark.parametrize("op,s_in,s_out", [("Relu", 3e-4, 2e-4), ("Relu6", 3e-4, 3e-4),
                                           ("Relu6", 1e-4, 1e-4), ("LeakyRelu", 3e-4, 5e-4)])
def test_relus16_on_every_int16_value(op, s_in, s_out):
    n = Q8()
    x = n.input("x", (1, 256, 256), s_in, 0, dtype="int16")
    attrs = {"alpha": 0.3} if op == "LeakyRelu" else {}
    n.node(op, [x], "y", (1, 256, 256), s_out, 0, dtype="int16", **attrs)
    assert_same16(n.build(["y"]), [{"x": all_int16_values()}])


def test_int16_zero_point_and_unequal_concat_scales_are_refused():
    n = Q8()
    x = n.input("x", (1, 16), 1e-3, 5, dtype="int16")
    n.node("Relu", [x], "y", (1, 16), 1e-3, 0, dtype="int16")
    g = read_tflite(n.build(["y"])).graph
    with pytest.raises(QConvertError, match="zero point 5"):
        run_int8(g, {"x": np.zeros((1, 16), np.int16)})
    n = Q8()
    a = n.input("a", (1, 4), 1e-3, 0, dtype="int16")
    b = n.input("b", (1, 4), 2e-3, 0, dtype="int16")
    n.node("Concat", [a, b], "y", (1, 8), 1e-3, 0, dtype="int16", axis=1)
    g = read_tflite(n.build(["y"])).graph
    with pytest.raises(QConvertError, match="does not requantize"):
        run_int8(g, {"a": np.zeros((1, 4), np.int16), "b": np.zeros((1, 4), np.int16)})


# -- the command line on 16x8 models --------------------------------------------------------
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "qconvert.cli", *args], capture_output=True,
                          text=True)


def test_inspect_and_fuse_of_a_16x8_model(tmp_path):
    path = INT16_DIR / "mixed_int8_int16.tflite"
    r = _cli("inspect", str(path))
    assert r.returncode == 0, r.stderr
    assert "DepthwiseConv2D" in r.stdout and "Quantize" in r.stdout
    out = tmp_path / "fused.tflite"
    r = _cli("fuse", str(INT16_DIR / "conv_16x8.tflite"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    g = read_tflite(out.read_bytes()).graph
    feeds = feeds_for(g, 1)
    ref = tflm((INT16_DIR / "conv_16x8.tflite").read_bytes(), [feeds[n] for n in g.inputs])
    np.testing.assert_array_equal(run_int8(g, feeds)[g.outputs[0]], ref[0])


def test_prelu16_on_every_int16_value():
    assert_same16(prelu16_model(), [{"x": all_int16_values().reshape(1, 256, 16, 16)}])


@pytest.mark.parametrize("s_in,beta", [(0.1, 1.0), (0.02, 2.0), (0.5, 0.7)])
def test_softmax_int8_to_int16(s_in, beta):
    assert_same16(softmax8_16_model(s_in, beta), [{"x": softmax8_16_rows()}])


@pytest.mark.parametrize("name", ["eltwise_16x8", "mixed_int8_int16", "conv_16x8_float_io"])
def test_fuse_and_convert_verify_run_16x8_models_in_the_integer_executor(tmp_path, name):
    path = INT16_DIR / f"{name}.tflite"
    for cmd in ("fuse", "convert"):
        out = tmp_path / f"{cmd}.tflite"
        r = _cli(cmd, str(path), "-o", str(out), "--verify", "4")
        assert r.returncode == 0, r.stderr
        g = read_tflite(out.read_bytes()).graph
        feeds = feeds_for(g, 2)
        ref = tflm(path.read_bytes(), [feeds[n] for n in g.inputs])
        for n, r_ in zip(g.outputs, ref):
            np.testing.assert_array_equal(run_int8(g, feeds)[n], r_)


# -- RSQRT, ABS, SQUARED_DIFFERENCE (normalisation layers) -----------------------------------
@pytest.mark.parametrize("s_in,s_out", [(1.3e-4, 6.1e-5), (1e-3, 3e-3), (2.0**-10, 2.0**-8),
                                        (0.05, 1e-4)])
def test_rsqrt16_on_every_non_negative_int16_value(s_in, s_out):
    x = np.arange(0, 32768, dtype=np.int16).reshape(1, 128, 256)
    assert_same16(unary16("Rsqrt", s_in, s_out), [{"x": x}])


@pytest.mark.parametrize("s_in,s_out", [(3e-4, 3e-4), (3e-4, 2e-4), (1e-3, 3e-3), (0.05, 1e-4)])
def test_abs16_on_every_int16_value(s_in, s_out):
    assert_same16(unary16("Abs", s_in, s_out, (1, 256, 256)), [{"x": all_int16_values()}])


def test_rsqrt16_refuses_a_negative_input_as_tflite_micro_fails():
    data = unary16("Rsqrt", 1e-3, 1e-3, (1, 4))
    x = np.array([[5, 0, -1, 7]], np.int16)
    with pytest.raises(Exception):
        tflm(data, [x])
    with pytest.raises(QConvertError, match="only defined for values >= 0"):
        run_int8(read_tflite(data).graph, {"x": x})


def test_slice_reverse_pack_unpack_move_int16_values():
    data = movement_model("int16")
    g = read_tflite(data).graph
    assert_same16(data, [full_range16(g, 0), feeds_for(g, 0)])


@pytest.mark.parametrize("scales", [(3e-4, 7e-4, 0.02), (1e-3, 1e-3, 5e-2), (2e-4, 6e-3, 0.9),
                                    (1e-3, 1e-3, 1e-5)])
@pytest.mark.parametrize("b_shape", [(1, 8, 8, 16), (1, 1, 1, 16)])
def test_squared_difference16(scales, b_shape):
    data = squared_difference16_model(*scales, b_shape)
    g = read_tflite(data).graph
    got = assert_same16(data, [full_range16(g, seed) for seed in range(2)] + [feeds_for(g, 0)])
    assert len(np.unique(got["y"])) > 10


@pytest.mark.parametrize("axes,keep_dims,s_out", [([1, 2], True, 3e-3), ([3], False, 1e-3),
                                                   ([1, 2, 3], True, 5e-2), ([2], True, 3e-4)])
def test_sum16_on_full_range_inputs(axes, keep_dims, s_out):
    """SUM (int16): the int32 sum requantized without 1 / count, clamped; full-range inputs
    saturate it, moderate ones do not."""
    n = Q8()
    shape = (1, 6, 8, 16)
    x = n.input("x", shape, 3e-4, 0, dtype="int16")
    ax = n.const("axes", np.asarray(axes, np.int32))
    out_shape = [1 if i in axes else d for i, d in enumerate(shape)]
    if not keep_dims:
        out_shape = [d for i, d in enumerate(shape) if i not in axes]
    n.node("ReduceSum", [x, ax], "y", out_shape, s_out, 0, dtype="int16",
           keepdims=int(keep_dims))
    data = n.build(["y"])
    g = read_tflite(data).graph
    assert_same16(data, [full_range16(g, 0), feeds_for(g, 0)])
