"""Integer kernels of 16x8 TFLite graphs (int16 activations, int8 weights), bit-exact with
TFLite Micro's reference kernels.

`INT16_KERNELS[op](node, inputs, params, ctx)` is one Eval, with the contract of
`int_kernels.INT_KERNELS`; the parameters are TFLite Micro's 16x8 Prepare values
(`qconvert.int8.prepare.int16`). The executor picks this table for every node that reads or
writes an int16 activation (`is_int16_node`), so a mixed model (int8 layers and 16x8 layers
joined by QUANTIZE int8 <-> int16) runs each layer with its own kernels.

What the kernels compute, each pinned by a test against TFLite Micro's interpreter:
- CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / TRANSPOSE_CONV multiply int16 inputs by int8
  weights (no input offset for convolutions). With an int64 bias the accumulator is int64 and
  requantization is TFLite's 64-bit MultiplyByQuantizedMultiplier (the Q31 multiplier rounded
  to Q15, `lut16.multiply_by_quantized_multiplier_int64`); with an int32 bias the accumulator
  is int32 (wrapping) and requantization the usual 32-bit one. Accumulators are computed with
  float64 BLAS, exact: every partial sum is an integer below 2**53.
- ADD / SUB rescale both inputs with a left shift of 15; MUL, MEAN, RELU, LEAKY_RELU, PRELU,
  BATCH_MATMUL (int64 sums), pools: the int8 formulas with int16 clamps.
- SOFTMAX, LOGISTIC, TANH: the 16-bit table paths of `int16_lut`; an int8 -> int16 SOFTMAX is
  the int8 gemmlowp path with 16 output bits (`softmax8_16`).
- QUANTIZE: float -> int16 (round half away), int8 <-> int16 and int16 -> int16 requantization,
  clamped to the output type; DEQUANTIZE int16 -> float; data movement copies values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qconvert.int8.fixed_point import (clz32, float_to_int32_x86, mbqm_greater_than_one, rdbpot,
                                       requantize_int32, srdhm, wrap32)
from qconvert.int8.lut16 import multiply_by_quantized_multiplier_int64 as requantize_int64
from qconvert.int8.multipliers import mean_multiplier
from qconvert.int8.prepare.common import fail
from qconvert.int8.prepare.int16 import is_int16_node  # noqa: F401  (the executor's dispatch)
from qconvert.int8.prepare.pooling import resolve_axes
from qconvert.int8.rounding import round_half_away
from qconvert.int8.transcendental import exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1

from . import int16_lut
from .int_kernel_base import batch_guard
from .int_kernels import INT_KERNELS
from .int_kernels_conv import _spatial, _tap

INT16_MIN, INT16_MAX = -32768, 32767


INT16_KERNELS: dict[str, Callable] = {}


def kernel16(*ops: str):
    """Register the decorated function as the int16 kernel of each IR op in `ops`."""
    def wrap(fn):
        for op in ops:
            INT16_KERNELS[op] = fn
        return fn

    return wrap


def _clamp16(x) -> np.ndarray:
    return np.clip(x, INT16_MIN, INT16_MAX).astype(np.int16)


# -- weighted layers --------------------------------------------------------------------------


def requantize16(acc, p, ctx) -> np.ndarray:
    """Exact accumulators -> + bias -> the int64 (Q15 multiplier) or int32 requantization the
    bias type selects -> int16 clamps."""
    acc = np.asarray(acc)
    if acc.dtype.kind == "f":
        acc = acc.astype(np.int64)
    if p["accumulator_bits"] == 32:
        if p["bias"] is not None:
            acc = wrap32(wrap32(acc) + p["bias"])
        out = requantize_int32(acc, p["output_multiplier"], p["output_shift"], rounding=ctx.rounding)
    else:
        if p["bias"] is not None:
            acc = acc + p["bias"]
        out = requantize_int64(acc, p["output_multiplier"], p["output_shift"])
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
        fail(node, f"{x.shape[3]} input channels for weights {tuple(w.shape)}")
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
        fail(node, f"{cout} output channels for {cin} input channels")
    m = cout // cin
    if p["depth_multiplier"] not in (0, m):
        fail(node, f"depth_multiplier {p['depth_multiplier']} but weights give {m}")
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
    batch_guard(node, ctx, p["keep_num_dims"] or xf.shape[0] == x.shape[0],
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


@kernel16("BatchMatMul")
def batch_matmul16(node, inputs, p, ctx):
    """reference_ops::BatchMatMul<int16_t, int64_t>: exact int64 sums, 64-bit requantization."""
    a = inputs[0].astype(np.float64)
    b = inputs[1].astype(np.float64)
    if p["adj_x"]:
        a = np.swapaxes(a, -1, -2)
    if p["adj_y"]:
        b = np.swapaxes(b, -1, -2)
    batch_guard(node, ctx, a.ndim == b.ndim, "BatchMatMul of operands of different ranks")
    acc = np.matmul(a, b).astype(np.int64)
    return [_clamp16(requantize_int64(acc, p["output_multiplier"], p["output_shift"]))]


# -- elementwise arithmetic -------------------------------------------------------------------


@kernel16("Add", "Sub")
def add_sub16(node, inputs, p, ctx):
    """ADD / SUB (int16): both inputs << 15 rescaled, summed, requantized, clamped."""
    a = inputs[0].astype(np.int64) << p["left_shift"]
    b = inputs[1].astype(np.int64) << p["left_shift"]
    sa = requantize_int32(a, p["input1_multiplier"], p["input1_shift"], rounding=ctx.rounding)
    sb = requantize_int32(b, p["input2_multiplier"], p["input2_shift"], rounding=ctx.rounding)
    raw = sa + sb if node.op == "Add" else sa - sb
    out = requantize_int32(raw, p["output_multiplier"], p["output_shift"], rounding=ctx.rounding)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@kernel16("Mul")
def mul16(node, inputs, p, ctx):
    """MUL (int16): the int32 product requantized, clamped."""
    prod = inputs[0].astype(np.int64) * inputs[1].astype(np.int64)
    out = requantize_int32(prod, p["output_multiplier"], p["output_shift"], rounding=ctx.rounding)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@kernel16("Maximum", "Minimum")
def maximum_minimum16(node, inputs, p, ctx):
    """MAXIMUM / MINIMUM: raw values compared (one shared quantization)."""
    fn = np.maximum if node.op == "Maximum" else np.minimum
    return [np.asarray(fn(inputs[0], inputs[1]), dtype=np.int16)]


# -- pooling and reductions -------------------------------------------------------------------


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
        fail(node, "a pooling window lies entirely in the padding")
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


@kernel16("Mean")
def mean16(node, inputs, p, ctx):
    """QuantizedMeanOrSum<int16_t>: int32 sum, 1 / count folded into the multiplier, clamped."""
    x = inputs[0]
    axes = resolve_axes(node, p["axes"], x.ndim)
    batch_guard(node, ctx, 0 not in axes, "Mean over axis 0")
    total = wrap32(x.astype(np.int64).sum(axis=tuple(axes), keepdims=True))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    m, s = mean_multiplier(p["multiplier"], p["shift"], count)
    out = _clamp16(requantize_int32(total, m, s, rounding=ctx.rounding))
    if not p["keep_dims"]:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in axes])
    return [out]


# -- activation functions ---------------------------------------------------------------------


def softmax8_16(x, p) -> np.ndarray:
    """reference_ops::Softmax<int8_t, int16_t>: the int8 softmax's gemmlowp path with 16 output
    bits: RoundingDivideByPOT(., bits_over_unit + 15) - 32768, entries below diff_min -32768."""
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

    def requantize(v, m, s):
        return requantize_int32(v, m, s, rounding=ctx.rounding)

    return [int16_lut.softmax16(inputs[0], p["input_multiplier"], p["input_left_shift"],
                                requantize)]


@kernel16("Sigmoid")
def sigmoid16(node, inputs, p, ctx):
    """reference_integer_ops::Logistic (int16)."""
    return [int16_lut.logistic16(inputs[0], p["input_multiplier"], p["input_left_shift"])]


@kernel16("Tanh")
def tanh16(node, inputs, p, ctx):
    """reference_integer_ops::Tanh (int16)."""
    return [int16_lut.tanh16(inputs[0], p["input_multiplier"], p["input_left_shift"])]


@kernel16("Relu")
def relu16(node, inputs, p, ctx):
    """RELU (int16): x requantized to the output, clamped at 0."""
    out = requantize_int32(inputs[0].astype(np.int64), p["output_multiplier"], p["output_shift"], rounding=ctx.rounding)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int16)]


@kernel16("Relu6")
def relu6_16(node, inputs, p, ctx):
    """RELU6 (int16): the raw values clamped to the input's [0, 6]."""
    return [np.clip(inputs[0], p["zero"], p["six"]).astype(np.int16)]


@kernel16("LeakyRelu")
def leaky_relu16(node, inputs, p, ctx):
    """QuantizeLeakyRelu<int16_t>: identity multiplier at and above 0, alpha's below."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    m_a = p["output_multiplier_alpha"]
    below = requantize_int32(v, abs(m_a), p["output_shift_alpha"], rounding=ctx.rounding)
    below = -below if m_a < 0 else below
    above = requantize_int32(v, p["output_multiplier_identity"], p["output_shift_identity"], rounding=ctx.rounding)
    return [_clamp16(p["output_zero_point"] + np.where(v >= 0, above, below))]


@kernel16("PRelu")
def prelu16(node, inputs, p, ctx):
    """BroadcastPrelu4DSlow<int16_t, int8_t>: x requantized at and above 0, x * (alpha - z_a)
    requantized below, clamped to int16."""
    x, alpha = inputs[0], inputs[1]
    if alpha.ndim > x.ndim or np.broadcast_shapes(x.shape, alpha.shape) != x.shape:
        fail(node, f"alpha {alpha.shape} does not broadcast to the input {x.shape}")
    v = x.astype(np.int64) + p["input_offset"]
    a = np.broadcast_to(alpha.astype(np.int64) + p["alpha_offset"], v.shape)
    above = requantize_int32(v, p["output_multiplier_1"], p["output_shift_1"], rounding=ctx.rounding)
    below = requantize_int32(v * a, p["output_multiplier_2"], p["output_shift_2"], rounding=ctx.rounding)
    return [_clamp16(np.where(v >= 0, above, below) + p["output_offset"])]


# -- quantize / dequantize --------------------------------------------------------------------


@kernel16("Quantize")
def quantize16(node, inputs, p, ctx):
    """QUANTIZE: float -> int16 (AffineQuantize), int8 / int16 -> int8 / int16 (Requantize),
    clamped to the output type."""
    x = inputs[0]
    info = np.iinfo(np.int8 if p["output_bits"] == 8 else np.int16)
    if x.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            q = round_half_away(x.astype(np.float32) / np.float32(p["scale"]))
        out = wrap32(float_to_int32_x86(q) + p["zero_point"])
    else:
        out = requantize_int32(x.astype(np.int64) - p["input_zero_point"],
                               p["output_multiplier"], p["output_shift"],
                               rounding=ctx.rounding) + p["zero_point"]
    return [np.clip(out, info.min, info.max).astype(info.dtype)]


# -- data movement ----------------------------------------------------------------------------


@kernel16("Concat")
def concat16(node, inputs, p, ctx):
    """CONCATENATION of int16 inputs sharing the output's quantization."""
    rank = inputs[0].ndim
    axis = p["axis"] + rank if p["axis"] < 0 else p["axis"]
    batch_guard(node, ctx, axis != 0, "Concat along axis 0")
    return [np.concatenate(inputs, axis=axis).astype(np.int16, copy=False)]


for _op in ("Pad", "PadV2", "Reshape", "Squeeze", "Transpose", "Gather", "StridedSlice",
            "SplitEqual", "SplitSizes", "ResizeNearest", "Dequantize"):
    INT16_KERNELS[_op] = INT_KERNELS[_op]
