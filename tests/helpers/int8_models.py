"""Shared int8 test builders and the TFLite Micro oracle: `Q8` builds quantized IR graphs,
`tflm` runs TFLite Micro, `assert_same` checks run_int8 bit-exact against it, `int8_feeds`
makes random int8 inputs, `movement_model` moves values (SLICE, REVERSE, PACK, UNPACK; int8 or
int16). Shared by the executor, c_export, quant and passes tests."""

from __future__ import annotations

import numpy as np

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS, tflm_invoke
from helpers.float_op_checks import TfGraph
from qconvert.executor.int_executor import run_int8
from qconvert.ir import Node, QuantParams, Tensor
from qconvert.formats.tflite_reader import read_tflite
from qconvert.int8.fixed_point import multiply_by_quantized_multiplier

INT8_MODELS = [TEST_MODELS / "kws_ref_model.tflite",
               TEST_MODELS / "pretrainedResnet_quant.tflite",
               TEST_MODELS / "ad01_int8.tflite",
               SAMPLE_MODELS / "kws_ref_model.tflite"]


# -- the oracle -----------------------------------------------------------------------------
def tflm(model_bytes: bytes, arrays: list) -> list:
    """TFLite Micro's outputs for `arrays`."""
    return tflm_invoke(model_bytes, arrays)


def assert_same(model_bytes: bytes, feeds_list: list, batch: bool = True):
    """run_int8 on the model read back from `model_bytes` equals TFLM, per sample and batched."""
    g = read_tflite(model_bytes).graph
    for feeds in feeds_list:
        ref = tflm(model_bytes, [feeds[n] for n in g.inputs])
        got = run_int8(g, feeds)
        for name, r in zip(g.outputs, ref):
            assert got[name].dtype == r.dtype and got[name].shape == r.shape, name
            np.testing.assert_array_equal(got[name], r, err_msg=name)
    if batch and len(feeds_list) > 1:
        stacked = {n: np.concatenate([f[n] for f in feeds_list]) for n in g.inputs}
        got = run_int8(g, stacked)
        for k, name in enumerate(g.outputs):
            ref = np.concatenate([tflm(model_bytes, [f[n] for n in g.inputs])[k]
                                  for f in feeds_list])
            np.testing.assert_array_equal(got[name], ref, err_msg=f"batched {name}")
    return g




CONV = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "group": 1,
        "activation": "NONE"}


class Q8(TfGraph):
    """Builds an int8 IR graph and serializes it for TFLM (`TfGraph` with quantization
    parameters: a scale and zero point per activation, per-channel weights)."""

    def _q(self, scale, zp, axis=None):
        scale = np.atleast_1d(np.asarray(scale, np.float32))
        zp = np.broadcast_to(np.asarray(zp, np.int64), scale.shape)
        return QuantParams(scale, zp, axis if scale.size > 1 else None)

    def input(self, name, shape, scale, zp, dtype="int8"):
        q = None if dtype == "float32" else self._q(scale, zp)
        self.g.add_tensor(Tensor(name, tuple(shape), dtype, quant=q))
        self.g.inputs.append(name)
        return name

    def const(self, name, data, scale=None, zp=0, axis=None):
        q = None if scale is None else self._q(scale, zp, axis)
        self.g.add_tensor(Tensor(name, data.shape, str(data.dtype), data, q))
        return name

    def weights(self, name, shape, axis, per_channel=True):
        data = self.rng.integers(-127, 128, shape).astype(np.int8)
        n = shape[axis] if per_channel else 1
        scales = self.rng.uniform(0.002, 0.02, n).astype(np.float32)
        return self.const(name, data, scales, 0, axis), scales

    def bias(self, name, s_in, s_w, n, low=-3000, high=3000):
        data = self.rng.integers(low, high, n).astype(np.int32)
        scale = (np.float32(s_in) * np.broadcast_to(np.asarray(s_w, np.float32), (n,))).astype(
            np.float32)
        return self.const(name, data, scale, 0, 0)

    def node(self, op, ins, out, shape, scale, zp, dtype="int8", **attrs):
        q = None if dtype == "float32" else self._q(scale, zp)
        return super().node(op, ins, out, shape, dtype, q, **attrs)

    def fit(self, name, feeds, levels=235):
        """Requantize tensor `name` to span what TFLM computes for it on `feeds` (its current
        quantization must be coarse enough not to saturate), so outputs use the int8 range."""
        data = self.build([name])
        t = self.g.tensors[name]
        s0, z0 = float(t.quant.scale[0]), int(t.quant.zero_point[0])
        real = np.concatenate([(tflm(data, [f[i] for i in self.g.inputs])[0].astype(float) - z0)
                               .reshape(-1) * s0 for f in feeds])
        lo, hi = min(real.min(), 0.0), max(real.max(), 0.0)
        scale = max(hi - lo, 1e-6) / levels
        zp = int(np.clip(round(-128 - lo / scale) + (255 - levels) // 2, -128, 127))
        t.quant = self._q(scale, zp)


def movement_model(dtype="int8") -> bytes:
    """SLICE, REVERSE_V2, PACK and UNPACK (TFLite Micro copies the values: one quantization for
    inputs and outputs); `dtype` int8 or int16."""
    n = Q8(12)
    q = (0.05, -3) if dtype == "int8" else (3e-4, 0)
    x = n.input("x", (1, 6, 8, 4), *q, dtype=dtype)
    sl = n.node("SliceBySize", [x, n.const("begin", np.asarray([0, 1, 2, 1], np.int32)),
                                n.const("size", np.asarray([1, 4, -1, 2], np.int32))],
                "slice", (1, 4, 6, 2), *q, dtype=dtype)
    rv = n.node("Reverse", [sl, n.const("raxis", np.asarray([1, 2], np.int32))], "reverse",
                (1, 4, 6, 2), *q, dtype=dtype)
    pk = n.node("Pack", [sl, rv], "pack", (1, 2, 4, 6, 2), *q, dtype=dtype, axis=1,
                values_count=2)
    names = ["unpack_0", "unpack_1"]
    for name in names:
        n.g.add_tensor(Tensor(name, (1, 4, 6), dtype, quant=n._q(*q)))
    n.g.nodes.append(Node("Unpack", [rv], names, {"axis": -1, "num": 2}, names[0]))
    return n.build([pk, *names])


def int8_feeds(g_or_bytes, count=3, seed=0, low=-128, high=127) -> list:
    """`count` random int8 feeds for every input of a graph (or serialized model)."""
    g = read_tflite(g_or_bytes).graph if isinstance(g_or_bytes, bytes) else g_or_bytes
    rng = np.random.default_rng(seed)
    return [{n: rng.integers(low, high + 1, g.tensors[n].shape).astype(np.int8)
             for n in g.inputs} for _ in range(count)]


def all_int8_values(shape=(1, 16, 16)) -> np.ndarray:
    """Every int8 value once, reshaped to `shape`."""
    return np.arange(-128, 128, dtype=np.int16).astype(np.int8).reshape(shape)


def requant(acc, m, s):
    """Requantize accumulators with multiplier `m` and shift `s`, as int64."""
    return multiply_by_quantized_multiplier(np.asarray(acc, np.int64), m, s).astype(np.int64)


def flip_accs(m_a: int, s_a: int, m_b: int, s_b: int, count: int) -> list:
    """Accumulators whose requantization differs between (m_a, s_a) and (m_b, s_b) with a
    result inside [-100, 100] (found at the rounding ties of the final division)."""
    right = -min(s_a, 0)
    found = []
    for k in range(-100, 100):
        tie = k * 2**right + 2**(right - 1) if right else k
        base = (2 * tie - 1) * 2**30 // max(m_a, m_b)
        cand = np.arange(base - 4, base + 5, dtype=np.int64)
        cand = cand[np.abs(cand) < 2**31 - 1]
        a, b = requant(cand, m_a, s_a), requant(cand, m_b, s_b)
        hit = cand[(a != b) & (np.abs(a) <= 100) & (np.abs(b) <= 100)]
        found.extend(int(v) for v in hit[:1])
        if len(found) >= count:
            break
    return found
