"""Integer kernels of ADD, SUB, MUL, MEAN, QUANTIZE and DEQUANTIZE, bit-exact with TFLite Micro's
reference kernels (parameters: `qconvert.int8.prepare.arithmetic` / `.pooling` / `.data`).

- ADD / SUB rescale both inputs to a common scale << 20, sum, requantize and clamp;
- int8 MEAN always goes through QuantizedMeanOrSum (no truncating raw mean when input and output
  share their quantization);
- a float -> int8 QUANTIZE of a value beyond int32 (or NaN) gives what x86 gives:
  INT32_MIN + z_out, wrapped, then clamped.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import float_to_int32_x86, requantize_int32, wrap32
from qconvert.int8.multipliers import mean_multiplier
from qconvert.int8.prepare.pooling import resolve_axes
from qconvert.int8.rounding import round_half_away

from .int_kernel_base import batch_guard, kernel


def add_sub_as(node, inputs, p, ctx, dtype):
    """ADD / SUB: both inputs (+ their offsets) << left_shift rescaled to a common scale,
    summed or subtracted, requantized, + z_out, clamped, as `dtype`. int8: left shift 20 and
    offsets; 16x8: left shift 15 and no offsets (its parameters carry none)."""
    a = inputs[0].astype(np.int64) + p.get("input1_offset", 0)
    b = inputs[1].astype(np.int64) + p.get("input2_offset", 0)
    sa = requantize_int32(a << p["left_shift"], p["input1_multiplier"], p["input1_shift"],
                          ctx.rounding)
    sb = requantize_int32(b << p["left_shift"], p["input2_multiplier"], p["input2_shift"],
                          ctx.rounding)
    raw = sa + sb if node.op == "Add" else sa - sb
    out = requantize_int32(raw, p["output_multiplier"], p["output_shift"],
                           ctx.rounding) + p.get("output_offset", 0)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(dtype)]


@kernel("Add", "Sub")
def add_sub(node, inputs, p, ctx):
    """ADD / SUB (int8): `add_sub_as` with a common scale << 20."""
    return add_sub_as(node, inputs, p, ctx, np.int8)


def squared_difference_as(node, inputs, p, ctx, dtype):
    """SQUARED_DIFFERENCE: both inputs (+ their offsets) << left_shift rescaled to a common
    scale as ADD's, the int32 square of their difference requantized, + z_out, clamped, as
    `dtype` (int8: left shift 7; 16x8: 0)."""
    a = inputs[0].astype(np.int64) + p["input1_offset"]
    b = inputs[1].astype(np.int64) + p["input2_offset"]
    diff = requantize_int32(a << p["left_shift"], p["input1_multiplier"], p["input1_shift"],
                            ctx.rounding) - \
        requantize_int32(b << p["left_shift"], p["input2_multiplier"], p["input2_shift"],
                         ctx.rounding)
    out = requantize_int32(wrap32(diff * diff), p["output_multiplier"], p["output_shift"],
                           ctx.rounding) + p["output_offset"]
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(dtype)]


@kernel("SquaredDifference")
def squared_difference(node, inputs, p, ctx):
    """SQUARED_DIFFERENCE (int8): `squared_difference_as` with a common scale << 7."""
    return squared_difference_as(node, inputs, p, ctx, np.int8)


def mul_as(node, inputs, p, ctx, dtype):
    """MUL: (x1 - z1) * (x2 - z2) requantized with one multiplier, + z_out, clamped, as `dtype`
    (16x8 parameters carry no offsets: all zero points are 0)."""
    a = inputs[0].astype(np.int64) + p.get("input1_offset", 0)
    b = inputs[1].astype(np.int64) + p.get("input2_offset", 0)
    out = requantize_int32(a * b, p["output_multiplier"], p["output_shift"],
                           ctx.rounding) + p.get("output_offset", 0)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(dtype)]


@kernel("Mul")
def mul(node, inputs, p, ctx):
    """MUL (int8): `mul_as`."""
    return mul_as(node, inputs, p, ctx, np.int8)


def mean_as(node, inputs, p, ctx, dtype):
    """QuantizedMeanOrSum: int32 sum over the axes, minus z_in * count, requantized (MEAN:
    with 1 / count folded into the multiplier; SUM, `node.op` ReduceSum: not), + z_out,
    clamped to `dtype` (int8 or int16)."""
    x = inputs[0]
    info = np.iinfo(dtype)
    axes = resolve_axes(node, p["axes"], x.ndim)
    batch_guard(node, ctx, 0 not in axes, "Mean over axis 0")
    total = wrap32(x.astype(np.int64).sum(axis=tuple(axes), keepdims=True))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    m, s = (p["multiplier"], p["shift"]) if node.op == "ReduceSum" else \
        mean_multiplier(p["multiplier"], p["shift"], count)
    shifted = wrap32(total - p["input_zero_point"] * count)
    out = np.clip(requantize_int32(shifted, m, s, ctx.rounding) + p["output_zero_point"],
                  info.min, info.max)
    if not p["keep_dims"]:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in axes])
    return [out.astype(dtype)]


@kernel("Mean")
def mean(node, inputs, p, ctx):
    """TFLM EvalIntegerMean -> QuantizedMeanOrSum for every int8 MEAN (also when input and
    output share their quantization; TFLM releases before 2024 took a truncating raw mean
    there): `mean_as`."""
    return mean_as(node, inputs, p, ctx, np.int8)


@kernel("ReduceSum")
def reduce_sum(node, inputs, p, ctx):
    """TFLM EvalSumHelper -> QuantizedMeanOrSum(compute_sum): `mean_as` without 1 / count."""
    return mean_as(node, inputs, p, ctx, np.int8)


def quantize_as(x, p, ctx, dtype):
    """QUANTIZE to `dtype`: float -> integer (AffineQuantize, round half away, x86's int32
    conversion), or integer -> integer requantization, clamped to the output type."""
    info = np.iinfo(dtype)
    if x.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            q = round_half_away(x.astype(np.float32) / np.float32(p["scale"]))
        out = wrap32(float_to_int32_x86(q) + p["zero_point"])
    else:
        out = requantize_int32(x.astype(np.int64) - p["input_zero_point"], p["output_multiplier"],
                               p["output_shift"], ctx.rounding) + p["zero_point"]
    return [np.clip(out, info.min, info.max).astype(dtype)]


@kernel("Quantize")
def quantize(node, inputs, p, ctx):
    """QUANTIZE: float -> int8 (round half away), or integer -> integer requantization (int8
    -> int8; uint8 <-> int8 at the edges of a uint8-I/O model: TFLM's Requantize)."""
    return quantize_as(inputs[0], p, ctx, np.dtype(p.get("output_dtype", "int8")))


@kernel("Dequantize")
def dequantize(node, inputs, p, ctx):
    """float32(double(scale) * (x - zp))."""
    v = inputs[0].astype(np.float64) - p["zero_point"]
    return [(p["scale"] * v).astype(np.float32)]
