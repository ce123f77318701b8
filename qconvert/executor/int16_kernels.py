"""Integer kernels of 16x8 TFLite graphs (int16 activations, int8 weights), bit-exact with
TFLite Micro's reference kernels.

Two tables keyed by IR op name, with the contract of `int_kernels.INT_PARAMS` /
`INT_KERNELS`: `INT16_PARAMS[op](graph, node)` is TFLM's Prepare, `INT16_KERNELS[op](node,
inputs, params, ctx)` one Eval. The executor picks them for every node that reads or writes an
int16 activation (`is_int16_node`), so a mixed model (int8 layers and 16x8 layers joined by
QUANTIZE int8 <-> int16) runs each layer with its own kernels.

What TFLite Micro does for int16, each pinned by a test against its interpreter:
- int16 activations are symmetric: a zero point other than 0 is refused (TFLM refuses it for
  most int16 kernels and ignores it in CONV_2D's, which would silently mis-compute).
- CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / TRANSPOSE_CONV multiply int16 inputs by int8
  weights. With an int64 bias (the converter's default for 16x8) the accumulator is int64 and
  requantization is TFLite's 64-bit MultiplyByQuantizedMultiplier, which first rounds the Q31
  multiplier to Q15 (`mbqm64`). With an int32 bias (CONV_2D and FULLY_CONNECTED only) the
  accumulator is int32 and requantization the usual 32-bit double rounding. DEPTHWISE_CONV_2D
  reads its bias as int64 whatever it is (an int32 bias is refused); TRANSPOSE_CONV takes an
  int16 or int64 bias. The multipliers are those of the int8 kernels (double products).
- ADD / SUB rescale both inputs with a left shift of 15 (20 for int8), ratios in double.
- MUL, MEAN, RELU, LEAKY_RELU, PRELU (int8 alpha), BATCH_MATMUL (int64 accumulator), pools:
  the int8 formulas with int16 clamps. RELU6 clamps to [0, round(6 / s_in)].
- SOFTMAX, LOGISTIC, TANH: the 16-bit table paths of `int16_lut`.
- QUANTIZE: float -> int16 (round half away), int8 <-> int16 and int16 -> int16 requantization
  (32-bit double rounding), clamped to the output type; DEQUANTIZE int16 -> float.
- CONCATENATION copies raw values (TFLM checks only zero points); inputs quantized unlike the
  output are refused here, as TFLM would give them the wrong scale. PAD pads with 0 (or the
  constant value input). Data movement ops copy values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qconvert.quant.numerics import activation_range, effective_multipliers, round_half_away

from . import int16_lut
from .int_kernels import (INT_KERNELS, INT_PARAMS, _activation, _batch_guard, _fail, _mbqm,
                          _no_params, _per_tensor, _quantize_multipliers, _spatial, _tap,
                          mean_params, wrap32)

INT16_MIN, INT16_MAX = -32768, 32767

INT16_KERNELS: dict[str, Callable] = {}
INT16_PARAMS: dict[str, Callable] = {}


def kernel16(*ops: str):
    """Register the decorated function as the int16 kernel of each IR op in `ops`."""
    def wrap(fn):
        for op in ops:
            INT16_KERNELS[op] = fn
        return fn

    return wrap


def params16(*ops: str):
    """Register the decorated function as the int16 Prepare-time parameters of each op."""
    def wrap(fn):
        for op in ops:
            INT16_PARAMS[op] = fn
        return fn

    return wrap


def is_int16_node(graph, node) -> bool:
    """True when `node` reads or writes an int16 activation (a non-constant int16 tensor)."""
    for name in list(node.inputs) + list(node.outputs):
        if name is None:
            continue
        t = graph.tensors[name]
        if t.data is None and str(t.dtype) == "int16":
            return True
    return False


def _clamp16(x) -> np.ndarray:
    return np.clip(x, INT16_MIN, INT16_MAX).astype(np.int16)


def _symmetric(graph, node, name) -> tuple:
    """(float32 scale, 0) of an int16 activation; a non-zero zero point is refused."""
    scale, zp = _per_tensor(graph, node, name)
    if zp != 0 and str(graph.tensors[name].dtype) == "int16":
        _fail(node, f"int16 tensor {name!r} has zero point {zp}: 16x8 kernels need 0")
    return scale, zp


def _act_range16(node, scale, zp) -> tuple:
    try:
        return activation_range(_activation(node), scale, zp, INT16_MIN, INT16_MAX)
    except ValueError as exc:
        _fail(node, str(exc))


def mbqm64(acc, multiplier, shift) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier(int64_t x, ...): the Q31 multiplier rounded to
    Q15 (saturated at 0x7FFF), one rounding shift by 15 - shift, truncated to int32."""
    m = np.asarray(multiplier, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, dtype=np.int64)
    x = np.asarray(acc, dtype=np.int64) * reduced + (np.int64(1) << (total - 1))
    return wrap32(x >> total)


# -- weighted layers --------------------------------------------------------------------------
def _weights(graph, node, index):
    w = graph.tensors[node.inputs[index]]
    if w.data is None or w.data.dtype != np.int8:
        _fail(node, f"weights {node.inputs[index]!r} are not int8 constants (16x8 needs int8)")
    if w.quant is None or w.quant.scale.size == 0:
        _fail(node, f"weights {node.inputs[index]!r} have no quantization parameters")
    return w


def _bias16(graph, node, index, channels, allowed):
    """(int64 bias or None, accumulator bits 32 or 64) of a 16x8 layer."""
    name = node.inputs[index] if len(node.inputs) > index else None
    if name is None:
        bits = 32 if str(node.attrs.get("quantized_bias_type") or "").upper() == "INT32" else 64
        return None, bits if "int32" in allowed else 64
    data = graph.tensors[name].data
    if data is None:
        _fail(node, f"bias {name!r} is not a constant")
    if str(data.dtype) not in allowed:
        _fail(node, f"bias {name!r} is {data.dtype}; TFLite Micro's 16x8 {node.op} takes "
                    f"{' or '.join(allowed)}")
    if data.size != channels:
        _fail(node, f"bias {name!r} has {data.size} values for {channels} channels")
    return data.reshape(-1).astype(np.int64), 32 if data.dtype == np.int32 else 64


def _weighted_params(graph, node, w, channels, input_index, per_tensor_ok=True) -> dict:
    s_in, _ = _symmetric(graph, node, node.inputs[input_index])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    s_w = w.quant.scale
    if s_w.size not in (1, channels):
        _fail(node, f"{s_w.size} weight scales for {channels} output channels")
    try:
        real = effective_multipliers(s_in, np.broadcast_to(s_w, (channels,)) if per_tensor_ok
                                     else s_w, s_out)
    except ValueError as exc:
        _fail(node, str(exc))
    multiplier, shift = _quantize_multipliers(node, real)
    act_min, act_max = _act_range16(node, s_out, 0)
    return {"per_channel": bool(s_w.size > 1), "input_offset": 0, "output_offset": 0,
            "output_multiplier": multiplier, "output_shift": shift, "effective_scale": real,
            "activation_min": act_min, "activation_max": act_max}


@params16("Conv2D", "DepthwiseConv2D")
def conv16_params(graph, node) -> dict:
    """16x8 CONV_2D / DEPTHWISE_CONV_2D Prepare: per-channel multipliers as int8, int16 clamps,
    the bias type choosing the accumulator."""
    w = _weights(graph, node, 1)
    depthwise = node.op == "DepthwiseConv2D"
    channels = int(w.data.shape[3] if depthwise else w.data.shape[0])
    out = _weighted_params(graph, node, w, channels, 0)
    allowed = ("int64",) if depthwise else ("int64", "int32")
    out["bias"], out["accumulator_bits"] = _bias16(graph, node, 2, channels, allowed)
    attrs = node.attrs
    out.update({"strides": [int(v) for v in attrs.get("strides") or [1, 1]],
                "dilations": [int(v) for v in attrs.get("dilations") or [1, 1]],
                "pads": [int(v) for v in attrs.get("pads") or [0, 0, 0, 0]]})
    x_shape = graph.tensors[node.inputs[0]].shape
    if not depthwise and x_shape and isinstance(x_shape[-1], (int, np.integer)) \
            and int(x_shape[-1]) != int(w.data.shape[3]):
        out["groups"] = int(x_shape[-1]) // int(w.data.shape[3])  # a grouped CONV_2D
    if depthwise:
        if out["bias"] is None:
            _fail(node, "TFLite Micro's DEPTHWISE_CONV_2D needs a bias tensor (use zeros)")
        out["depth_multiplier"] = int(attrs.get("depth_multiplier") or 0)
    return out


@params16("FullyConnected")
def fc16_params(graph, node) -> dict:
    """16x8 FULLY_CONNECTED Prepare: per channel when the weights carry several scales, else one
    multiplier; int64 or int32 bias."""
    w = _weights(graph, node, 1)
    channels = int(w.data.shape[0])
    per_channel = w.quant.scale.size > 1
    out = _weighted_params(graph, node, w, channels if per_channel else 1, 0)
    if per_channel and w.quant.scale.size != channels:
        _fail(node, f"{w.quant.scale.size} weight scales for {channels} output channels")
    out["bias"], out["accumulator_bits"] = _bias16(graph, node, 2, channels, ("int64", "int32"))
    z_w = int(w.quant.zero_point[0]) if w.quant.zero_point.size else 0
    out["weights_offset"] = 0 if per_channel else -z_w
    out["keep_num_dims"] = bool(node.attrs.get("keep_num_dims") or False)
    return out


@params16("TransposeConv")
def transpose_conv16_params(graph, node) -> dict:
    """16x8 TRANSPOSE_CONV Prepare: per-channel multipliers, int64 (or int16) bias, the padding
    of the output size."""
    from .float_kernels_spatial import transpose_conv_pads

    w = _weights(graph, node, 1)
    shape = graph.tensors[node.inputs[0]].data
    if shape is None:
        _fail(node, "output_shape is not a constant")
    out_shape = [int(v) for v in np.asarray(shape).reshape(-1)]
    channels, kh, kw, _ = w.data.shape
    out = _weighted_params(graph, node, w, int(channels), 2)
    out["bias"], _ = _bias16(graph, node, 3, int(channels), ("int64", "int16"))
    out["accumulator_bits"] = 64
    strides = [int(v) for v in node.attrs.get("strides") or [1, 1]]
    top, left = transpose_conv_pads(node.attrs.get("padding", "VALID"), out_shape[1:3],
                                    (kh, kw), strides)
    out.update({"strides": strides, "pads": [top, left], "output_shape": out_shape})
    return out


def requantize16(acc, p, ctx) -> np.ndarray:
    """Exact accumulators -> + bias -> the int64 (Q15 multiplier) or int32 requantization the
    bias type selects -> int16 clamps."""
    acc = np.asarray(acc)
    if acc.dtype.kind == "f":
        acc = acc.astype(np.int64)
    if p["accumulator_bits"] == 32:
        if p["bias"] is not None:
            acc = wrap32(wrap32(acc) + p["bias"])
        out = _mbqm(acc, p["output_multiplier"], p["output_shift"], ctx)
    else:
        if p["bias"] is not None:
            acc = acc + p["bias"]
        out = mbqm64(acc, p["output_multiplier"], p["output_shift"])
    out = out + p["output_offset"]
    return np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)


@kernel16("Conv2D")
def conv2d16(node, inputs, p, ctx):
    """reference_integer_ops::ConvPerChannel (int16 input): sum of w * x over the taps inside
    the image (no input offset), grouped convolutions included."""
    x, w = inputs[0], inputs[1]
    if x.ndim != 4:
        raise ValueError(f"Conv2D input of rank {x.ndim}")
    cout, kh, kw, cin = w.shape
    groups = x.shape[3] // cin if cin else 0
    if groups < 1 or groups * cin != x.shape[3] or cout % groups:
        _fail(node, f"{x.shape[3]} input channels for weights {tuple(w.shape)}")
    xp, oh, ow = _spatial(x.astype(np.float64), p, kh, kw)
    n = x.shape[0]
    wf = w.astype(np.float64)
    acc = np.zeros((n * oh * ow, cout))
    for ky in range(kh):
        for kx in range(kw):
            patch = _tap(xp, ky, kx, p, oh, ow).reshape(-1, x.shape[3])
            if groups == 1:
                acc += patch @ wf[:, ky, kx, :].T
            else:
                wg = wf[:, ky, kx, :].reshape(groups, cout // groups, cin)
                acc += np.einsum("pgc,goc->pgo", patch.reshape(-1, groups, cin),
                                 wg).reshape(-1, cout)
    return [requantize16(acc.reshape(n, oh, ow, cout), p, ctx)]


@kernel16("DepthwiseConv2D")
def depthwise_conv2d16(node, inputs, p, ctx):
    """reference_integer_ops::DepthwiseConvPerChannel (int16 input, int64 accumulator)."""
    x, w = inputs[0], inputs[1]
    if x.ndim != 4:
        raise ValueError(f"DepthwiseConv2D input of rank {x.ndim}")
    _, kh, kw, cout = w.shape
    cin = x.shape[3]
    if cout % cin:
        _fail(node, f"{cout} output channels for {cin} input channels")
    m = cout // cin
    if p["depth_multiplier"] not in (0, m):
        _fail(node, f"depth_multiplier {p['depth_multiplier']} but weights give {m}")
    xo = x.astype(np.int64)
    if m > 1:
        xo = np.repeat(xo, m, axis=3)
    xp, oh, ow = _spatial(xo, p, kh, kw)
    w64 = w.astype(np.int64)
    acc = np.zeros((x.shape[0], oh, ow, cout), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += _tap(xp, ky, kx, p, oh, ow) * w64[0, ky, kx, :]
    return [requantize16(acc, p, ctx)]


@kernel16("FullyConnected")
def fully_connected16(node, inputs, p, ctx):
    """reference_integer_ops::FullyConnected(PerChannel) (int16 input): rows of `depth`
    values, acc = sum (w + weights_offset) * x."""
    x, w = inputs[0], inputs[1]
    units, depth = w.shape
    if x.size % depth:
        raise ValueError(f"FullyConnected input of {x.size} values, weights of depth {depth}")
    xf = x.reshape(-1, depth).astype(np.float64)
    _batch_guard(node, ctx, p["keep_num_dims"] or xf.shape[0] == x.shape[0],
                 "FullyConnected folding the batch axis into rows")
    wf = w.astype(np.float64) + p["weights_offset"]
    out = requantize16(xf @ wf.T, p, ctx)
    if p["keep_num_dims"]:
        if x.shape[-1] != depth:
            raise ValueError("FullyConnected keep_num_dims with a last axis other than depth")
        return [out.reshape(x.shape[:-1] + (units,))]
    return [out]


@kernel16("TransposeConv")
def transpose_conv16(node, inputs, p, ctx):
    """reference_integer_ops::TransposeConv (int16 input): every input pixel times the kernel
    scattered into an int64 canvas, then bias and 64-bit requantization."""
    w, x = inputs[1], inputs[2]
    n, h, wd, cin = x.shape
    cout, kh, kw, _ = w.shape
    sh, sw = p["strides"]
    top, left = p["pads"]
    oh, ow = p["output_shape"][1:3]
    cols = x.astype(np.float64).reshape(-1, cin) @ w.astype(np.float64).reshape(-1, cin).T
    cols = cols.reshape(n, h, wd, cout, kh, kw)
    canvas = np.zeros((n, max((h - 1) * sh + kh, top + oh), max((wd - 1) * sw + kw, left + ow),
                       cout))
    for ky in range(kh):
        for kx in range(kw):
            canvas[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (wd - 1) * sw + 1:sw, :] += \
                cols[..., ky, kx]
    return [requantize16(canvas[:, top:top + oh, left:left + ow, :], p, ctx)]


@params16("BatchMatMul")
def batch_matmul16_params(graph, node) -> dict:
    """BatchMatMulPrepare (int16): one multiplier of double s_a * s_b / s_out, int16 clamps."""
    s_a, _ = _symmetric(graph, node, node.inputs[0])
    s_b, _ = _symmetric(graph, node, node.inputs[1])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    m, e = _quantize_multipliers(node, float(s_a) * float(s_b) / float(s_out))
    return {"output_multiplier": int(m), "output_shift": int(e),
            "adj_x": bool(node.attrs.get("adj_x")), "adj_y": bool(node.attrs.get("adj_y"))}


@kernel16("BatchMatMul")
def batch_matmul16(node, inputs, p, ctx):
    """reference_ops::BatchMatMul<int16_t, int64_t>: exact int64 sums, 64-bit requantization."""
    a = inputs[0].astype(np.float64)
    b = inputs[1].astype(np.float64)
    if p["adj_x"]:
        a = np.swapaxes(a, -1, -2)
    if p["adj_y"]:
        b = np.swapaxes(b, -1, -2)
    _batch_guard(node, ctx, a.ndim == b.ndim, "BatchMatMul of operands of different ranks")
    acc = np.matmul(a, b).astype(np.int64)
    return [_clamp16(mbqm64(acc, p["output_multiplier"], p["output_shift"]))]


# -- elementwise arithmetic -------------------------------------------------------------------
@params16("Add", "Sub")
def add_sub16_params(graph, node) -> dict:
    """CalculateOpDataAdd / Sub (int16): left shift 15, the ratios in double (this TFLite Micro
    does so for SUB too, where older sources have float32: pinned by a test)."""
    s1, _ = _symmetric(graph, node, node.inputs[0])
    s2, _ = _symmetric(graph, node, node.inputs[1])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    left_shift = 15
    twice = 2 * float(max(s1, s2))
    real = [float(s1) / twice, float(s2) / twice, twice / ((1 << left_shift) * float(s_out))]
    if not real[2] < 1:
        _fail(node, "output scale too small for the input scales (multiplier >= 1)")
    m, s = _quantize_multipliers(node, np.array(real))
    act_min, act_max = _act_range16(node, s_out, 0)
    return {"left_shift": left_shift,
            "input1_multiplier": int(m[0]), "input1_shift": int(s[0]),
            "input2_multiplier": int(m[1]), "input2_shift": int(s[1]),
            "output_multiplier": int(m[2]), "output_shift": int(s[2]),
            "activation_min": act_min, "activation_max": act_max}


@kernel16("Add", "Sub")
def add_sub16(node, inputs, p, ctx):
    """ADD / SUB (int16): both inputs << 15 rescaled, summed, requantized, clamped."""
    a = inputs[0].astype(np.int64) << p["left_shift"]
    b = inputs[1].astype(np.int64) << p["left_shift"]
    sa = _mbqm(a, p["input1_multiplier"], p["input1_shift"], ctx)
    sb = _mbqm(b, p["input2_multiplier"], p["input2_shift"], ctx)
    raw = sa + sb if node.op == "Add" else sa - sb
    out = _mbqm(raw, p["output_multiplier"], p["output_shift"], ctx)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@params16("Mul")
def mul16_params(graph, node) -> dict:
    """CalculateOpDataMul (int16): double s1 * s2 / s_out; all zero points 0."""
    s1, _ = _symmetric(graph, node, node.inputs[0])
    s2, _ = _symmetric(graph, node, node.inputs[1])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    m, s = _quantize_multipliers(node, float(s1) * float(s2) / float(s_out))
    act_min, act_max = _act_range16(node, s_out, 0)
    return {"output_multiplier": int(m), "output_shift": int(s),
            "activation_min": act_min, "activation_max": act_max}


@kernel16("Mul")
def mul16(node, inputs, p, ctx):
    """MUL (int16): the int32 product requantized, clamped."""
    prod = inputs[0].astype(np.int64) * inputs[1].astype(np.int64)
    out = _mbqm(prod, p["output_multiplier"], p["output_shift"], ctx)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@kernel16("Maximum", "Minimum")
def maximum_minimum16(node, inputs, p, ctx):
    """MAXIMUM / MINIMUM: raw values compared (one shared quantization)."""
    fn = np.maximum if node.op == "Maximum" else np.minimum
    return [np.asarray(fn(inputs[0], inputs[1]), dtype=np.int16)]


# -- pooling and reductions -------------------------------------------------------------------
@params16("AveragePool", "MaxPool")
def pool16_params(graph, node) -> dict:
    """PoolingPrepare (int16): equal input and output quantization, int16 clamps."""
    s_in, z_in = _symmetric(graph, node, node.inputs[0])
    s_out, z_out = _symmetric(graph, node, node.outputs[0])
    if abs(float(s_in) - float(s_out)) > 1e-6 or z_in != z_out:
        _fail(node, "input and output quantization differ (TFLite Micro requires them equal)")
    act_min, act_max = _act_range16(node, s_out, z_out)
    attrs = node.attrs
    return {"activation_min": act_min, "activation_max": act_max,
            "kernel_shape": [int(v) for v in attrs["kernel_shape"]],
            "strides": [int(v) for v in attrs.get("strides") or [1, 1]],
            "dilations": [1, 1],
            "pads": [int(v) for v in attrs.get("pads") or [0, 0, 0, 0]]}


@kernel16("AveragePool")
def average_pool16(node, inputs, p, ctx):
    """AveragePool (int16): int32 sum of the taps inside the image over their count, rounded
    half away from zero by C division."""
    x = inputs[0]
    kh, kw = p["kernel_shape"]
    xp, oh, ow = _spatial(x.astype(np.int64), p, kh, kw)
    ones = np.ones((1,) + x.shape[1:3] + (1,), dtype=np.int64)
    op_, _, _ = _spatial(ones, p, kh, kw)
    acc = np.zeros((x.shape[0], oh, ow, x.shape[3]), dtype=np.int64)
    count = np.zeros((1, oh, ow, 1), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += _tap(xp, ky, kx, p, oh, ow)
            count += _tap(op_, ky, kx, p, oh, ow)
    if np.any(count == 0):
        _fail(node, "a pooling window lies entirely in the padding")
    half = count // 2
    out = np.where(acc > 0, (acc + half) // count, -((half - acc) // count))
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@kernel16("MaxPool")
def max_pool16(node, inputs, p, ctx):
    """MaxPool (int16): padding never wins; clamped to the activation range."""
    x = inputs[0]
    kh, kw = p["kernel_shape"]
    xp, oh, ow = _spatial(x.astype(np.int32), p, kh, kw, value=INT16_MIN - 1)
    out = np.full((x.shape[0], oh, ow, x.shape[3]), INT16_MIN, dtype=np.int32)
    for ky in range(kh):
        for kx in range(kw):
            np.maximum(out, _tap(xp, ky, kx, p, oh, ow), out=out)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@params16("Mean")
def mean16_params(graph, node) -> dict:
    """MEAN (int16): the int8 Prepare (QuantizeMultiplier of s_in / s_out, 1 / count folded)."""
    _symmetric(graph, node, node.inputs[0])
    _symmetric(graph, node, node.outputs[0])
    return mean_params(graph, node)


@kernel16("Mean")
def mean16(node, inputs, p, ctx):
    """QuantizedMeanOrSum<int16_t>: int32 sum, 1 / count folded into the multiplier, clamped."""
    from .int_kernels import _resolve_axes, mean_multiplier

    x = inputs[0]
    axes = _resolve_axes(node, p["axes"], x.ndim)
    _batch_guard(node, ctx, 0 not in axes, "Mean over axis 0")
    total = wrap32(x.astype(np.int64).sum(axis=tuple(axes), keepdims=True))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    m, s = mean_multiplier(p["multiplier"], p["shift"], count)
    out = _clamp16(_mbqm(total, m, s, ctx))
    if not p["keep_dims"]:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in axes])
    return [out]


# -- activation functions ---------------------------------------------------------------------
@params16("Softmax")
def softmax16_params(graph, node) -> dict:
    """CalculateSoftmaxParams (int16 -> int16): QuantizeMultiplier(s_in * beta / (10 / 65535));
    the output must be scale 1/32768, zero point 0. An int8 input with an int16 output is the
    int8 softmax's scaling (`softmax8_16`)."""
    if str(graph.tensors[node.inputs[0]].dtype) == "int8":
        return softmax8_16_params(graph, node)
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    if str(graph.tensors[node.inputs[0]].dtype) != "int16" or \
            str(graph.tensors[node.outputs[0]].dtype) != "int16":
        _fail(node, "16-bit softmax needs int16 input and output")
    if abs(float(s_out) - 1.0 / 32768) > 0.001 / 32768:
        _fail(node, f"output scale {s_out} must be 1/32768")
    beta = float(np.float32(node.attrs.get("beta", 1.0)))
    m, s = _quantize_multipliers(node, float(s_in) * beta / (10.0 / 65535.0))
    exp_lut, recip_lut = int16_lut.softmax_luts()
    return {"input_multiplier": int(m), "input_left_shift": int(s), "exp_lut": exp_lut,
            "one_over_one_plus_x_lut": recip_lut}


def softmax8_16_params(graph, node) -> dict:
    """CalculateSoftmaxParams (int8 -> int16): PreprocessSoftmaxScaling with 5 integer bits and
    diff_min as for int8 -> int8; the output must be scale 1/65536, zero point -32768."""
    from .int_kernels import calculate_input_radius

    s_in, _ = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    if z_out != -32768 or abs(float(s_out) - 1.0 / 65536) > 0.001 / 65536:
        _fail(node, f"output quantization ({s_out}, {z_out}) must be (1/65536, -32768)")
    beta = float(np.float32(node.attrs.get("beta", 1.0)))
    real = min(beta * float(s_in) * (1 << 26), (1 << 31) - 1.0)
    if not real > 1:
        _fail(node, f"input scale x beta {beta * float(s_in)} too small")
    m, s = _quantize_multipliers(node, real)
    return {"input_multiplier": int(m), "input_left_shift": int(s),
            "diff_min": -calculate_input_radius(5, int(s))}


def softmax8_16(x, p) -> np.ndarray:
    """reference_ops::Softmax<int8_t, int16_t>: the int8 softmax's gemmlowp path with 16 output
    bits: RoundingDivideByPOT(., bits_over_unit + 15) - 32768, entries below diff_min -32768."""
    from .int_kernels import (clz32, exp_on_negative_values, mbqm_greater_than_one,
                              one_over_one_plus_x_for_x_in_0_1, rdbpot, srdhm)

    x = x.astype(np.int64)
    diff = x - x.max(axis=-1, keepdims=True)
    inside = diff >= p["diff_min"]
    rescaled = mbqm_greater_than_one(diff, p["input_multiplier"], p["input_left_shift"])
    exp = exp_on_negative_values(rescaled, 5)
    total = wrap32(np.where(inside, rdbpot(exp, 12), 0).sum(axis=-1, keepdims=True))
    headroom_plus_one = clz32(total)
    shifted_minus_one = wrap32((((total & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF)
                               - (1 << 31))
    scale = one_over_one_plus_x_for_x_in_0_1(shifted_minus_one)
    exponent = 12 - headroom_plus_one + 31 - 16
    if np.any((exponent < 0) | (exponent > 31)):
        raise ValueError("softmax reciprocal exponent out of range")
    out = rdbpot(srdhm(scale, exp), exponent) - 32768
    return np.where(inside, np.clip(out, INT16_MIN, INT16_MAX), INT16_MIN).astype(np.int16)


@kernel16("Softmax")
def softmax16(node, inputs, p, ctx):
    """reference_ops::SoftmaxInt16 (see `int16_lut.softmax16`); int8 input: `softmax8_16`."""
    if inputs[0].dtype == np.int8:
        return [softmax8_16(inputs[0], p)]

    def mbqm(v, m, s):
        return _mbqm(v, m, s, ctx)

    return [int16_lut.softmax16(inputs[0], p["input_multiplier"], p["input_left_shift"], mbqm)]


def _sigmoid_tanh16_params(graph, node, is_tanh) -> dict:
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    log2, pot = int16_lut.checked_log2(s_out)
    if not pot or log2 != -15:
        _fail(node, f"output scale {s_out} must be 2**-15")
    m, shift = int16_lut.sigmoid_tanh_scaling(s_in, is_tanh)
    return {"input_multiplier": m, "input_left_shift": shift}


@params16("Sigmoid")
def sigmoid16_params(graph, node) -> dict:
    """CalculateArithmeticOpDataLogistic (int16)."""
    return _sigmoid_tanh16_params(graph, node, False)


@params16("Tanh")
def tanh16_params(graph, node) -> dict:
    """TanhPrepare (int16)."""
    return _sigmoid_tanh16_params(graph, node, True)


@kernel16("Sigmoid")
def sigmoid16(node, inputs, p, ctx):
    """reference_integer_ops::Logistic (int16)."""
    return [int16_lut.logistic16(inputs[0], p["input_multiplier"], p["input_left_shift"])]


@kernel16("Tanh")
def tanh16(node, inputs, p, ctx):
    """reference_integer_ops::Tanh (int16)."""
    return [int16_lut.tanh16(inputs[0], p["input_multiplier"], p["input_left_shift"])]


@params16("Relu")
def relu16_params(graph, node) -> dict:
    """CalculateReluOpData<int16_t>: multiplier of double(float32(s_in / s_out)), zero points 0."""
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    m, s = _quantize_multipliers(node, float(np.float32(s_in / s_out)))
    return {"output_multiplier": int(m), "output_shift": int(s),
            "activation_min": 0, "activation_max": INT16_MAX}


@kernel16("Relu")
def relu16(node, inputs, p, ctx):
    """RELU (int16): x requantized to the output, clamped at 0."""
    out = _mbqm(inputs[0].astype(np.int64), p["output_multiplier"], p["output_shift"], ctx)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@params16("Relu6")
def relu6_16_params(graph, node) -> dict:
    """Relu6Prepare (int16): raw values clamped to [0, min(round(6 / s_in), 32767)]."""
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    six = int(round_half_away(np.float32(6.0) / s_in))
    return {"zero": 0, "six": min(six, INT16_MAX)}


@kernel16("Relu6")
def relu6_16(node, inputs, p, ctx):
    """RELU6 (int16): the raw values clamped to the input's [0, 6]."""
    return [np.clip(inputs[0], p["zero"], p["six"]).astype(np.int16)]


@params16("LeakyRelu")
def leaky_relu16_params(graph, node) -> dict:
    """CalculateOpDataLeakyRelu (int16): the int8 multipliers."""
    _symmetric(graph, node, node.inputs[0])
    _symmetric(graph, node, node.outputs[0])
    return INT_PARAMS["LeakyRelu"](graph, node)


@kernel16("LeakyRelu")
def leaky_relu16(node, inputs, p, ctx):
    """QuantizeLeakyRelu<int16_t>: identity multiplier at and above 0, alpha's below."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    m_a = p["output_multiplier_alpha"]
    below = _mbqm(v, abs(m_a), p["output_shift_alpha"], ctx)
    below = -below if m_a < 0 else below
    above = _mbqm(v, p["output_multiplier_identity"], p["output_shift_identity"], ctx)
    return [_clamp16(p["output_zero_point"] + np.where(v >= 0, above, below))]


@params16("PRelu")
def prelu16_params(graph, node) -> dict:
    """CalculatePreluParams (int16 input and output, int8 alpha): the int8 multipliers."""
    _symmetric(graph, node, node.inputs[0])
    _symmetric(graph, node, node.outputs[0])
    if str(graph.tensors[node.inputs[1]].dtype) != "int8":
        _fail(node, "a 16x8 PRELU takes an int8 alpha (TFLite Micro requires it)")
    return INT_PARAMS["PRelu"](graph, node)


@kernel16("PRelu")
def prelu16(node, inputs, p, ctx):
    """BroadcastPrelu4DSlow<int16_t, int8_t>: x requantized at and above 0, x * (alpha - z_a)
    requantized below, clamped to int16."""
    x, alpha = inputs[0], inputs[1]
    if alpha.ndim > x.ndim or np.broadcast_shapes(x.shape, alpha.shape) != x.shape:
        _fail(node, f"alpha {alpha.shape} does not broadcast to the input {x.shape}")
    v = x.astype(np.int64) + p["input_offset"]
    a = np.broadcast_to(alpha.astype(np.int64) + p["alpha_offset"], v.shape)
    above = _mbqm(v, p["output_multiplier_1"], p["output_shift_1"], ctx)
    below = _mbqm(v * a, p["output_multiplier_2"], p["output_shift_2"], ctx)
    return [_clamp16(np.where(v >= 0, above, below) + p["output_offset"])]


# -- quantize / dequantize --------------------------------------------------------------------
@params16("Quantize")
def quantize16_params(graph, node) -> dict:
    """PrepareQuantizeReference with an int16 side: the int8 parameters plus the output type's
    range."""
    out = dict(INT_PARAMS["Quantize"](graph, node))
    for name in (node.inputs[0], node.outputs[0]):
        if str(graph.tensors[name].dtype) == "int16":
            _symmetric(graph, node, name)
    dtype = str(graph.tensors[node.outputs[0]].dtype)
    if dtype not in ("int8", "int16"):
        _fail(node, f"QUANTIZE to {dtype} is not supported")
    out["output_bits"] = 8 if dtype == "int8" else 16
    return out


@kernel16("Quantize")
def quantize16(node, inputs, p, ctx):
    """QUANTIZE: float -> int16 (AffineQuantize), int8 / int16 -> int8 / int16 (Requantize),
    clamped to the output type."""
    from .int_kernels import _float_to_int32_x86

    x = inputs[0]
    info = np.iinfo(np.int8 if p["output_bits"] == 8 else np.int16)
    if x.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            q = round_half_away(x.astype(np.float32) / np.float32(p["scale"]))
        out = wrap32(_float_to_int32_x86(q) + p["zero_point"])
    else:
        out = _mbqm(x.astype(np.int64) - p["input_zero_point"], p["output_multiplier"],
                    p["output_shift"], ctx) + p["zero_point"]
    return [np.clip(out, info.min, info.max).astype(info.dtype)]


# -- data movement ----------------------------------------------------------------------------
@params16("Concat")
def concat16_params(graph, node) -> dict:
    """ConcatenationPrepare (int16): zero points 0, no fused activation; inputs quantized unlike
    the output are refused (TFLite Micro would copy their raw values at the wrong scale)."""
    if _activation(node) != "NONE":
        _fail(node, "fused activation on CONCATENATION (TFLite Micro refuses it)")
    out_q = _symmetric(graph, node, node.outputs[0])
    for name in node.inputs:
        if name is not None and _symmetric(graph, node, name) != out_q:
            _fail(node, f"input {name!r} is quantized {_per_tensor(graph, node, name)}, the "
                        f"output {out_q}: int16 CONCATENATION does not requantize")
    return {"axis": int(node.attrs.get("axis", 0))}


@kernel16("Concat")
def concat16(node, inputs, p, ctx):
    """CONCATENATION of int16 inputs sharing the output's quantization."""
    rank = inputs[0].ndim
    axis = p["axis"] + rank if p["axis"] < 0 else p["axis"]
    _batch_guard(node, ctx, axis != 0, "Concat along axis 0")
    return [np.concatenate(inputs, axis=axis).astype(np.int16, copy=False)]


@params16("Pad", "PadV2")
def pad16_params(graph, node) -> dict:
    """PAD / PADV2 (int16): the constant value input, else 0."""
    _symmetric(graph, node, node.outputs[0])
    value_name = node.inputs[2] if len(node.inputs) > 2 else None
    if value_name is None:
        return {"pad_value": 0}
    data = graph.tensors[value_name].data
    if data is None:
        _fail(node, "pad value is not a constant")
    return {"pad_value": int(np.asarray(data).reshape(-1)[0])}


# Ops that move int16 values as they move int8 ones: the int8 kernels keep the dtype.
for _op in ("Pad", "PadV2", "Reshape", "Squeeze", "Transpose", "Gather", "StridedSlice",
            "SplitEqual", "SplitSizes", "ResizeNearest", "Dequantize"):
    INT16_KERNELS[_op] = INT_KERNELS[_op]
for _op in ("Reshape", "Dequantize"):
    INT16_PARAMS[_op] = INT_PARAMS[_op]
for _op in ("Squeeze", "Transpose", "Gather", "StridedSlice", "SplitEqual", "SplitSizes",
            "ResizeNearest", "Maximum", "Minimum"):
    INT16_PARAMS[_op] = _no_params
