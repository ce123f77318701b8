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
  to Q15, `fixed_point.multiply_by_quantized_multiplier_int64`); with an int32 bias the accumulator
  is int32 (wrapping) and requantization the usual 32-bit one. Accumulators are computed with
  float64 BLAS, exact: every partial sum is an integer below 2**53.
- ADD / SUB rescale both inputs with a left shift of 15, SQUARED_DIFFERENCE with none; MUL, MEAN, RELU, LEAKY_RELU, PRELU,
  BATCH_MATMUL (int64 sums), pools: the int8 formulas with int16 clamps.
- ABS, RSQRT: the int8 computations (RSQRT: gemmlowp's inverse square root) with int16 clamps.
- SOFTMAX, LOGISTIC, TANH: the 16-bit table paths of `int16_lut`; an int8 -> int16 SOFTMAX is
  the int8 gemmlowp path with 16 output bits (`softmax8_16`).
- QUANTIZE: float -> int16 (round half away), int8 <-> int16 and int16 -> int16 requantization,
  clamped to the output type; DEQUANTIZE int16 -> float; data movement copies values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qconvert.int8.fixed_point import (clz32, mbqm_greater_than_one, rdbpot, requantize_int32,
                                       srdhm, wrap32)
from qconvert.int8.fixed_point import multiply_by_quantized_multiplier_int64 as requantize_int64
from qconvert.int8.prepare.common import fail, registrar
from qconvert.int8.prepare.int16 import is_int16_node  # noqa: F401  (the executor's dispatch)
from qconvert.int8.transcendental import exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1

from . import int16_lut
from .int_kernel_base import batch_guard
from .int_kernels import INT_KERNELS
from .int_kernels_conv import (average_pool_as, conv2d_sums, depthwise_sums,
                               fully_connected_with, max_pool_as)
from .int_kernels_data import concat_as
from .int_kernels_elementwise import (add_sub_as, mean_as, mul_as, quantize_as,
                                      squared_difference_as)
from .int_kernels_math import abs_as, rsqrt_as
from .int_kernels_spatial import transpose_conv_with

INT16_MIN, INT16_MAX = -32768, 32767


INT16_KERNELS: dict[str, Callable] = {}


kernel16 = registrar(INT16_KERNELS)  # @kernel16(op, ...): the int16 kernel of each IR op


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
    """reference_integer_ops::ConvPerChannel (int16 input): `int_kernels_conv.conv2d_sums` (no
    input offset), grouped convolutions included."""
    return [requantize16(conv2d_sums(node, inputs[0], inputs[1], p), p, ctx)]


@kernel16("DepthwiseConv2D")
def depthwise_conv2d16(node, inputs, p, ctx):
    """reference_integer_ops::DepthwiseConvPerChannel (int16 input, int64 accumulator)."""
    return [requantize16(depthwise_sums(node, inputs[0], inputs[1], p), p, ctx)]


@kernel16("FullyConnected")
def fully_connected16(node, inputs, p, ctx):
    """reference_integer_ops::FullyConnected(PerChannel) (int16 input): rows of `depth`
    values, acc = sum (w + weights_offset) * x."""
    return fully_connected_with(node, inputs, p, ctx, requantize16)


@kernel16("TransposeConv")
def transpose_conv16(node, inputs, p, ctx):
    """reference_integer_ops::TransposeConv (int16 input): every input pixel times the kernel
    scattered into an exact canvas, then bias and 64-bit requantization."""
    return transpose_conv_with(node, inputs, p, ctx, requantize16)


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
    return add_sub_as(node, inputs, p, ctx, np.int16)


@kernel16("SquaredDifference")
def squared_difference16(node, inputs, p, ctx):
    """SQUARED_DIFFERENCE (int16): the int8 computation with no left shift, int16 clamps."""
    return squared_difference_as(node, inputs, p, ctx, np.int16)


@kernel16("Mul")
def mul16(node, inputs, p, ctx):
    """MUL (int16): the int32 product requantized, clamped."""
    return mul_as(node, inputs, p, ctx, np.int16)


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
    return [average_pool_as(node, inputs[0], p, np.int16)]


@kernel16("MaxPool")
def max_pool16(node, inputs, p, ctx):
    """MaxPool (int16): padding never wins; clamped to the activation range."""
    return [max_pool_as(inputs[0], p, np.int16)]


@kernel16("Mean", "ReduceSum")
def mean16(node, inputs, p, ctx):
    """QuantizedMeanOrSum<int16_t>: int32 sum, 1 / count folded into the multiplier, clamped
    (zero points 0)."""
    return mean_as(node, inputs, p, ctx, np.int16)


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


@kernel16("Abs")
def abs16(node, inputs, p, ctx):
    """AbsEvalQuantized<int16_t>: the int8 computation, int16 clamps."""
    return [abs_as(inputs[0], p, ctx, np.int16)]


@kernel16("Rsqrt")
def rsqrt16(node, inputs, p, ctx):
    """RsqrtEvalQuantized<int16_t>: the int8 computation, int16 clamps, 0 -> 32767."""
    return [rsqrt_as(node, inputs[0], p, ctx, np.int16)]


# -- quantize / dequantize --------------------------------------------------------------------


@kernel16("Quantize")
def quantize16(node, inputs, p, ctx):
    """QUANTIZE: float -> int16 (AffineQuantize), int8 / int16 -> int8 / int16 (Requantize),
    clamped to the output type."""
    return quantize_as(inputs[0], p, ctx, np.int8 if p["output_bits"] == 8 else np.int16)


# -- data movement ----------------------------------------------------------------------------


@kernel16("Concat")
def concat16(node, inputs, p, ctx):
    """CONCATENATION of int16 inputs sharing the output's quantization."""
    return concat_as(node, inputs, p, ctx, np.int16)


for _op in ("Pad", "PadV2", "Reshape", "Squeeze", "ExpandDims", "Transpose", "Gather",
            "StridedSlice",
            "SplitEqual", "SplitSizes", "ResizeNearest", "Dequantize", "SliceBySize", "Pack",
            "Unpack", "Reverse", "SelectV2"):
    INT16_KERNELS[_op] = INT_KERNELS[_op]
# one kernel for 8- and 16-bit activations: its int16 cell state makes every LSTM a "16x8" node
INT16_KERNELS["UnidirectionalSequenceLSTM"] = INT_KERNELS["UnidirectionalSequenceLSTM"]
