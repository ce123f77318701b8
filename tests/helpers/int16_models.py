"""Shared 16x8 test models (int16 activations, int8 weights) and their TFLite Micro oracle:
the converter's models of tests/models/int16 (`INT16_MODELS`), `tflm` with an arena for large
int16 activations, `feeds_for` / `full_range16` inputs, `assert_same16` (run_int8 bit-exact
against TFLite Micro), one-layer builders made with `Q8` for what the converter cannot make
(`prelu16_model`, `softmax8_16_model`, `unary16`, `squared_difference16_model`), the float ONNX
`op_zoo3` that `quantize --activations int16` turns 16x8, and `built16_models`, those layers
written to files with their inputs. Shared by the executor, quant and c_export tests."""

from __future__ import annotations

import numpy as np

from helpers.int8_models import Q8
from helpers.oracles import TEST_MODELS, OnnxNet, tflm_invoke
from qconvert.executor.int_executor import run_int8
from qconvert.formats.model_io import load_model
from qconvert.formats.tflite_reader import read_tflite

INT16_DIR = TEST_MODELS / "int16"
INT16_MODELS = sorted(INT16_DIR.glob("*.tflite"))
# unary 16x8 ops built by `unary16`, with every int16 input they are defined for
UNARY16 = {"Rsqrt": np.arange(0, 32768, dtype=np.int16).reshape(1, 128, 256),
           "Abs": np.arange(-32768, 32768, dtype=np.int32).astype(np.int16).reshape(1, 256, 256)}


# -- the oracle -----------------------------------------------------------------------------
def tflm(model_bytes: bytes, arrays: list) -> list:
    """TFLite Micro's outputs for `arrays`, with an arena for large activations."""
    return tflm_invoke(model_bytes, arrays, arena_size=max(len(model_bytes) * 10, 1 << 20))


def feeds_for(g, seed: int) -> dict:
    """Random feeds of the graph inputs' dtypes: seed 0 moderate normal values, others the
    whole integer range."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in g.inputs:
        t = g.tensors[name]
        if t.dtype == "float32":
            out[name] = rng.normal(0, 1.5, t.shape).astype(np.float32)
            continue
        info = np.iinfo(t.dtype)
        if seed == 0:
            a = rng.normal(0, info.max / 6, t.shape).round().clip(info.min, info.max)
        else:
            a = rng.integers(info.min, info.max + 1, t.shape)
        out[name] = a.astype(t.dtype)
    return out


def full_range16(graph, seed) -> dict:
    """Uniform random int16 feeds over the whole int16 range for every input of `graph`."""
    rng = np.random.default_rng(seed)
    return {k: rng.integers(-32768, 32768, graph.tensors[k].shape).astype(np.int16)
            for k in graph.inputs}


def assert_same16(model_bytes: bytes, feeds_list: list) -> dict:
    """run_int8 on the model read back from `model_bytes` equals TFLite Micro on every feed
    (dtype, shape and values of every output); returns the executor's last outputs."""
    g = read_tflite(model_bytes).graph
    got = {}
    for feeds in feeds_list:
        ref = tflm(model_bytes, [feeds[n] for n in g.inputs])
        got = run_int8(g, feeds)
        assert len(ref) == len(g.outputs)
        for name, r in zip(g.outputs, ref):
            assert got[name].dtype == r.dtype and got[name].shape == r.shape, name
            np.testing.assert_array_equal(got[name], r, err_msg=name)
    return got


# -- one-layer 16x8 models --------------------------------------------------------------------
def prelu16_model(alpha_zp=3) -> bytes:
    """A 16x8 PRELU: int16 input (every int16 value) and output, per-channel int8 alpha."""
    n = Q8(11)
    x = n.input("x", (1, 256, 16, 16), 4e-4, 0, dtype="int16")
    alpha = n.const("alpha", n.rng.integers(-128, 128, (16,)).astype(np.int8), 0.02, alpha_zp)
    n.node("PRelu", [x, alpha], "y", (1, 256, 16, 16), 6e-4, 0, dtype="int16")
    return n.build(["y"])


def softmax8_16_model(s_in=0.1, beta=1.0, zero_point=5) -> bytes:
    """A SOFTMAX from int8 (40 rows of 17) to int16 (1/65536, -32768)."""
    n = Q8()
    x = n.input("x", (40, 17), s_in, zero_point)
    n.node("Softmax", [x], "y", (40, 17), 1.0 / 65536, -32768, dtype="int16", beta=beta)
    return n.build(["y"])


def softmax8_16_rows(seed=2) -> np.ndarray:
    """int8 rows for `softmax8_16_model`: random over the whole range, one all at the maximum,
    one dominated by a single entry (the others below diff_min)."""
    v = np.random.default_rng(seed).integers(-128, 128, (40, 17))
    v[1] = 127
    v[2, :] = -128
    v[2, 3] = 127
    return v.astype(np.int8)


def unary16(op, s_in, s_out, shape=(1, 128, 256)) -> bytes:
    """A one-node 16x8 model of the unary `op` (RSQRT, ABS, ...): int16 input and output of
    `shape`, zero points 0."""
    n = Q8()
    x = n.input("x", shape, s_in, 0, dtype="int16")
    n.node(op, [x], "y", shape, s_out, 0, dtype="int16")
    return n.build(["y"])


def squared_difference16_model(s1, s2, s_out, b_shape=(1, 8, 8, 16)) -> bytes:
    """A 16x8 SQUARED_DIFFERENCE of a (1, 8, 8, 16) input and one of `b_shape` (broadcast)."""
    n = Q8(2)
    a = n.input("a", (1, 8, 8, 16), s1, 0, dtype="int16")
    b = n.input("b", b_shape, s2, 0, dtype="int16")
    n.node("SquaredDifference", [a, b], "y", (1, 8, 8, 16), s_out, 0, dtype="int16")
    return n.build(["y"])


def built16_models(folder) -> dict:
    """{path: samples} of the 16x8 layers built by the tests rather than the converter (the
    converter makes no int8 -> int16 SOFTMAX) and the unary 16x8 ops on every int16 value they
    are defined for, written to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "softmax8_16.tflite"
    path.write_bytes(softmax8_16_model())
    built = {path: [[softmax8_16_rows(seed)] for seed in (2, 3)]}
    path = folder / "squared_difference16.tflite"
    path.write_bytes(squared_difference16_model(2e-4, 6e-3, 0.9, (1, 1, 1, 16)))
    graph = load_model(path).graph
    built[path] = [[full_range16(graph, seed)[n] for n in graph.inputs] for seed in range(2)]
    for op, values in UNARY16.items():
        path = folder / f"{op.lower()}16_all.tflite"
        path.write_bytes(unary16(op, 1.3e-4, 6.1e-5, values.shape))
        built[path] = [[values]]
    return built


# -- a float ONNX model for --activations int16 ------------------------------------------------
def op_zoo3() -> bytes:
    """PRELU, SPLIT_V, PADV2, MAXIMUM / MINIMUM, RESIZE_NEAREST_NEIGHBOR and SQUEEZE (ONNX PRelu,
    Split of unequal sizes, Pad with a value, Clip(-1, 1), Resize nearest, Squeeze): a float
    ONNX model, input x [1, 4, 8, 8], that `quantize --activations int16` makes 16x8."""
    n = OnnxNet(5)
    x = n.input("x", [1, 4, 8, 8])
    c = n.conv(x, 4, 8, "c1", pads=[1, 1, 1, 1])
    slope = np.linspace(0.05, 0.4, 8, dtype=np.float32).reshape(8, 1, 1)
    pr = n.node("PRelu", [c, n.const("slope", slope)], "prelu")
    n.node("Split", [pr, n.const("sp", np.array([3, 5], np.int64))], "s0", axis=1)
    n.nodes[-1].output[:] = ["s0", "s1"]
    pad = n.node("Pad", ["s0", n.const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
                         n.const("pv", np.float32(0.5))], "pad")
    clip = n.node("Clip", [pad, n.const("lo", np.float32(-1)), n.const("hi", np.float32(1))],
                  "clip")
    rs = n.node("Resize", ["s1", "", n.const("scales", np.array([1, 1, 2, 2], np.float32))],
                "rs", mode="nearest")
    mean = n.node("ReduceMean", [rs], "mean", axes=[2, 3], keepdims=1)
    sq = n.node("Squeeze", [mean, n.const("sqa", np.array([2, 3], np.int64))], "sq")
    return n.build([clip, sq])
