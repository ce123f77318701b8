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


@kernel("Add", "Sub")
def add_sub(node, inputs, p, ctx):
    """ADD / SUB: both inputs rescaled to a common scale << 20, summed, requantized, clamped."""
    a = inputs[0].astype(np.int64) + p["input1_offset"]
    b = inputs[1].astype(np.int64) + p["input2_offset"]
    sa = requantize_int32(a << p["left_shift"], p["input1_multiplier"], p["input1_shift"],
                          ctx.rounding)
    sb = requantize_int32(b << p["left_shift"], p["input2_multiplier"], p["input2_shift"],
                          ctx.rounding)
    raw = sa + sb if node.op == "Add" else sa - sb
    out = requantize_int32(raw, p["output_multiplier"], p["output_shift"],
                           ctx.rounding) + p["output_offset"]
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


@kernel("Mul")
def mul(node, inputs, p, ctx):
    """MUL: (x1 - z1) * (x2 - z2) requantized with one multiplier, clamped."""
    a = inputs[0].astype(np.int64) + p["input1_offset"]
    b = inputs[1].astype(np.int64) + p["input2_offset"]
    out = requantize_int32(a * b, p["output_multiplier"], p["output_shift"],
                           ctx.rounding) + p["output_offset"]
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


@kernel("Mean")
def mean(node, inputs, p, ctx):
    """TFLM EvalIntegerMean -> QuantizedMeanOrSum for every int8 MEAN (also when input and
    output share their quantization; TFLM releases before 2024 took a truncating raw mean
    there): int32 sum over the axes, minus z_in * count, requantized with 1 / count folded
    into the multiplier, + z_out, clamped."""
    x = inputs[0]
    axes = resolve_axes(node, p["axes"], x.ndim)
    batch_guard(node, ctx, 0 not in axes, "Mean over axis 0")
    total = wrap32(x.astype(np.int64).sum(axis=tuple(axes), keepdims=True))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    m, s = mean_multiplier(p["multiplier"], p["shift"], count)
    shifted = wrap32(total - p["input_zero_point"] * count)
    out = np.clip(requantize_int32(shifted, m, s, ctx.rounding) + p["output_zero_point"], -128, 127)
    if not p["keep_dims"]:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in axes])
    return [out.astype(np.int8)]


@kernel("Quantize")
def quantize(node, inputs, p, ctx):
    """QUANTIZE: float -> int8 (round half away), or int8 -> int8 requantization."""
    x = inputs[0]
    if x.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            q = round_half_away(x.astype(np.float32) / np.float32(p["scale"]))
        out = wrap32(float_to_int32_x86(q) + p["zero_point"])
    else:
        out = requantize_int32(x.astype(np.int64) - p["input_zero_point"], p["output_multiplier"],
                    p["output_shift"], ctx.rounding) + p["zero_point"]
    return [np.clip(out, -128, 127).astype(np.int8)]


@kernel("Dequantize")
def dequantize(node, inputs, p, ctx):
    """float32(double(scale) * (x - zp))."""
    v = inputs[0].astype(np.float64) - p["zero_point"]
    return [(p["scale"] * v).astype(np.float32)]
