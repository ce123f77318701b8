"""Integer kernels of TRANSPOSE_CONV, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, SPLIT and
SPLIT_V, bit-exact with TFLite Micro's reference kernels (TRANSPOSE_CONV's parameters:
`qconvert.int8.prepare.conv`).

- TRANSPOSE_CONV (reference_integer_ops::TransposeConv): every input pixel's (x - z_in) times the
  kernel is accumulated into an int32 canvas at in * stride - pad (pads from the output size,
  `qconvert.padding.transpose_conv_pads`), then bias, requantization, z_out, clamps.
  Accumulated in float64, exact (integers far below 2**53).
- RESIZE_BILINEAR (reference_ops::ResizeBilinearInteger): 10-bit fixed-point source
  coordinates, scale_10 = (1024 * in + out / 2) / out (align_corners: (1024 * (in - 1) +
  (out - 1) / 2) / (out - 1)), half-pixel offset scale_10 / 2 - 512, four products in 20 bits,
  rounded half away from zero by C division.
- RESIZE_NEAREST_NEIGHBOR: the float kernel's indices (TFLite computes them in float for int8
  too); values copied.
- SPLIT / SPLIT_V: values copied; every part keeps the input's quantization (the quantizer gives
  them one).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import c_div
from qconvert.int8.prepare.common import fail

from .float_kernels import KERNELS as FLOAT_KERNELS
from .float_kernels_spatial import nearest_indices
from .int_kernel_base import batch_guard, kernel
from .int_kernels_conv import requantize_acc


def transpose_conv_with(node, inputs, p, ctx, requantize):
    """reference_integer_ops::TransposeConv (see the module docstring): the float64 canvas of
    exact sums, then `requantize(acc, p, ctx)` (the int8 or the 16x8 one)."""
    w, x = inputs[1], inputs[2]
    n, h, wd, cin = x.shape
    cout, kh, kw, _ = w.shape
    sh, sw = p["strides"]
    top, left = p["pads"]
    oh, ow = p["output_shape"][1:3]
    xo = x.astype(np.float64) + p["input_offset"]
    cols = (xo.reshape(-1, cin) @ w.astype(np.float64).reshape(cout * kh * kw, cin).T)
    cols = cols.reshape(n, h, wd, cout, kh, kw)
    canvas = np.zeros((n, max((h - 1) * sh + kh, top + oh), max((wd - 1) * sw + kw, left + ow),
                       cout))
    for ky in range(kh):
        for kx in range(kw):
            canvas[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (wd - 1) * sw + 1:sw, :] += \
                cols[..., ky, kx]
    return [requantize(canvas[:, top:top + oh, left:left + ow, :], p, ctx)]


@kernel("TransposeConv")
def transpose_conv(node, inputs, p, ctx):
    """reference_integer_ops::TransposeConv, int8 (`transpose_conv_with`)."""
    return transpose_conv_with(node, inputs, p, ctx, requantize_acc)


def taps_10(in_size: int, out_size: int, align: bool, hpc: bool) -> tuple:
    """(10-bit source coordinate, lower, upper) per output index: ComputeInterpolationValues-
    Integer."""
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = ((1 << 10) * in_size + out_size // 2) // out_size
    v = np.arange(out_size, dtype=np.int64)
    coord = v * scale + scale // 2 - (1 << 9) if hpc else v * scale
    lower = np.maximum(c_div(coord, 1 << 10), 0)
    upper = np.minimum(c_div(coord + (1 << 10) - 1, 1 << 10), in_size - 1)
    return coord, lower, upper


def _resize_args(node, inputs):
    x = inputs[0]
    if x.ndim != 4:
        raise ValueError(f"{node.op} of a {x.ndim}-D input (NHWC expected)")
    size = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
    return (x, size, bool(node.attrs.get("align_corners", False)),
            bool(node.attrs.get("half_pixel_centers", False)))


@kernel("ResizeBilinear")
def resize_bilinear(node, inputs, p, ctx):
    """reference_ops::ResizeBilinearInteger (see the module docstring)."""
    x, (oh, ow), align, hpc = _resize_args(node, inputs)
    if align and hpc:
        fail(node, "align_corners and half_pixel_centers together")
    yc, y0, y1 = taps_10(x.shape[1], oh, align, hpc)
    xc, x0, x1 = taps_10(x.shape[2], ow, align, hpc)
    dy = (yc - (y0 << 10))[None, :, None, None]
    dx = (xc - (x0 << 10))[None, None, :, None]
    xi = x.astype(np.int64)
    rows0, rows1 = xi[:, y0], xi[:, y1]
    total = (rows0[:, :, x0] * ((1 << 10) - dy) * ((1 << 10) - dx)
             + rows1[:, :, x0] * dy * ((1 << 10) - dx)
             + rows0[:, :, x1] * ((1 << 10) - dy) * dx
             + rows1[:, :, x1] * dy * dx)
    rounded = c_div(total + np.where(total > 0, 1 << 19, -(1 << 19)), 1 << 20)
    return [rounded.astype(x.dtype)]


@kernel("ResizeNearest")
def resize_nearest(node, inputs, p, ctx):
    """RESIZE_NEAREST_NEIGHBOR: TFLite's float indices, values copied."""
    x, (oh, ow), align, hpc = _resize_args(node, inputs)
    y = np.take(x, nearest_indices(x.shape[1], oh, align, hpc), axis=1)
    return [np.ascontiguousarray(np.take(y, nearest_indices(x.shape[2], ow, align, hpc),
                                         axis=2))]


@kernel("SplitEqual", "SplitSizes")
def split(node, inputs, p, ctx):
    """SPLIT / SPLIT_V: the parts copied, parameters kept."""
    axis_input = inputs[0] if node.op == "SplitEqual" else inputs[2]
    rank = (inputs[1] if node.op == "SplitEqual" else inputs[0]).ndim
    batch_guard(node, ctx, int(np.asarray(axis_input).reshape(-1)[0]) % rank != 0,
                 "Split along axis 0")
    return FLOAT_KERNELS[node.op](node, inputs, [None] * len(node.outputs))
