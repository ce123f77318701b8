"""Float kernels of the ops ONNX exports bring beyond the basic table: resize, transposed
convolution in NHWC, split. Registered into `float_kernels.KERNELS` (same contract: see that
module's docstring).

- ONNX Resize (opset 11+, the oldest the reader takes): nearest (round_prefer_floor,
  round_prefer_ceil, floor, ceil) and linear, every coordinate_transformation_mode but
  tf_crop_and_resize and half_pixel_symmetric; computed axis by axis in float32 as onnxruntime
  does (linear coordinates clamped to the input). Cubic and antialiased downscaling raise.
- TFLite RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR (NHWC, `size` [h, w], align_corners,
  half_pixel_centers): TFLite's reference index and weight formulas (`nearest_indices`,
  `bilinear_taps`), which the integer kernels reuse.
- TFLite TRANSPOSE_CONV (output_shape, OHWI weights, NHWC x, bias): each input pixel times the
  kernel is added into a (in - 1) * stride + k canvas, cropped from TFLite's padding offset
  (`qconvert.padding.transpose_conv_pads`, the value TFLite Micro computes from the output shape).
- ONNX Split (sizes from the input, the attribute, or equal parts), TFLite SPLIT and SPLIT_V.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.rounding import round_half_away
from qconvert.padding import transpose_conv_pads

from .float_kernels_base import _axis, float_input, _fused, _ints, optional_input, kernel

RESIZE_COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                           "tf_half_pixel_for_nn")


# -- ONNX Resize ----------------------------------------------------------------------------
def onnx_resize_plan(node, x_shape, inputs) -> tuple:
    """(output shape, per-axis float32 scales) of an ONNX Resize (opset 11+: the readers take
    nothing older) on an input of `x_shape`."""
    rank = len(x_shape)
    scales_in, sizes_in = optional_input(inputs, 2), optional_input(inputs, 3)
    axes = node.attrs.get("axes")
    axes = list(range(rank)) if axes is None else [_axis(int(a), rank) for a in axes]
    policy = node.attrs.get("keep_aspect_ratio_policy") or "stretch"
    scales = [np.float32(1.0)] * rank
    out = list(x_shape)
    if sizes_in is not None and np.asarray(sizes_in).size:
        if policy != "stretch":
            raise NotImplementedError(f"Resize keep_aspect_ratio_policy {policy}")
        sizes = _ints(sizes_in)
        if len(sizes) != len(axes):
            raise ValueError(f"Resize sizes {sizes} for axes {axes}")
        for a, size in zip(axes, sizes):
            out[a] = size
            scales[a] = np.float32(size) / np.float32(x_shape[a])
    elif scales_in is not None and np.asarray(scales_in).size:
        values = np.asarray(scales_in, np.float32).reshape(-1)
        if values.size != len(axes):
            raise ValueError(f"Resize scales {values.tolist()} for axes {axes}")
        for a, s in zip(axes, values):
            if not s > 0:
                raise ValueError(f"Resize scale {s}")
            scales[a] = np.float32(s)
            out[a] = int(np.floor(np.float64(x_shape[a]) * np.float64(s)))
    else:
        raise ValueError("Resize needs scales or sizes")
    if min(out) < 1:
        raise ValueError(f"Resize to {out}")
    return tuple(out), scales


def onnx_source_coordinates(mode: str, out_size: int, in_size: int, scale) -> np.ndarray:
    """float32 x_original of every output index (onnxruntime's formulas, in float32)."""
    x = np.arange(out_size, dtype=np.float32)
    scale = np.float32(scale)
    half = np.float32(0.5)
    if mode == "half_pixel":
        return (x + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (x + half) / scale - half if out_size > 1 else np.zeros(1, np.float32)
    if mode == "align_corners":
        if out_size == 1:
            return np.zeros(1, np.float32)
        return x * np.float32(in_size - 1) / np.float32(out_size - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + half) / scale
    raise NotImplementedError(f"Resize coordinate_transformation_mode {mode}")


def onnx_nearest_indices(mode: str, nearest: str, out_size: int, in_size: int,
                         scale) -> np.ndarray:
    """The input index ONNX Resize (nearest) reads for every output index of one axis."""
    c = onnx_source_coordinates(mode, out_size, in_size, scale)
    floor = np.floor(c)
    frac = c - floor
    if nearest == "round_prefer_floor":
        idx = np.where(frac == 0.5, floor, np.floor(c + np.float32(0.5)))
    elif nearest == "round_prefer_ceil":
        idx = np.where(frac == 0.5, floor + 1, np.floor(c + np.float32(0.5)))
    elif nearest == "floor":
        idx = floor
    elif nearest == "ceil":
        idx = np.ceil(c)
    else:
        raise NotImplementedError(f"Resize nearest_mode {nearest}")
    return np.clip(idx, 0, in_size - 1).astype(np.int64)


def _linear_axis(x, axis, coords, in_size):
    c = np.clip(coords, np.float32(0), np.float32(in_size - 1))
    i0 = np.floor(c).astype(np.int64)
    i1 = np.minimum(i0 + 1, in_size - 1)
    w = (c - i0.astype(np.float32)).astype(x.dtype)
    shape = [1] * x.ndim
    shape[axis] = -1
    w = w.reshape(shape)
    return np.take(x, i0, axis=axis) * (1 - w) + np.take(x, i1, axis=axis) * w


@kernel("Resize")
def resize(node, inputs, out_dtypes):
    """ONNX Resize, nearest or linear (see the module docstring)."""
    x = inputs[0]
    float_input(node, x)
    out, scales = onnx_resize_plan(node, x.shape, inputs)
    attrs = node.attrs
    mode = attrs.get("mode") or "nearest"
    coord = attrs.get("coordinate_transformation_mode") or "half_pixel"
    nearest = attrs.get("nearest_mode") or "round_prefer_floor"
    if mode not in ("nearest", "linear"):
        raise NotImplementedError(f"Resize mode {mode}")
    if int(attrs.get("antialias", 0) or 0) and any(s < 1 for s in scales):
        raise NotImplementedError("Resize antialias when downscaling")
    y = x
    for axis, (size, n_in, s) in enumerate(zip(out, x.shape, scales)):
        if size == n_in and s == 1:
            continue
        if mode == "nearest":
            y = np.take(y, onnx_nearest_indices(coord, nearest, size, n_in, s), axis=axis)
        else:
            y = _linear_axis(y, axis, onnx_source_coordinates(coord, size, n_in, s), n_in)
    return [np.ascontiguousarray(y, dtype=x.dtype)]


# -- TFLite resize --------------------------------------------------------------------------
def _tflite_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def nearest_indices(in_size: int, out_size: int, align_corners: bool,
                    half_pixel_centers: bool) -> np.ndarray:
    """TFLite's GetNearestNeighbor for every output index of one axis."""
    scale = _tflite_scale(in_size, out_size, align_corners)
    offset = np.float32(0.5 if half_pixel_centers else 0.0)
    v = (np.arange(out_size, dtype=np.float32) + offset) * scale
    idx = round_half_away(v) if align_corners else np.floor(v)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half_pixel_centers else idx


def bilinear_taps(in_size: int, out_size: int, align_corners: bool,
                  half_pixel_centers: bool) -> tuple:
    """(lower index, upper index, float32 source coordinate) per output index: TFLite's
    ComputeInterpolationValues."""
    scale = _tflite_scale(in_size, out_size, align_corners)
    v = np.arange(out_size, dtype=np.float32)
    coord = (v + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel_centers else v * scale
    lower = np.maximum(np.floor(coord), 0).astype(np.int64)
    upper = np.minimum(np.ceil(coord).astype(np.int64), in_size - 1)
    return lower, upper, coord.astype(np.float32)


def _resize_args(node, inputs):
    x = inputs[0]
    if x.ndim != 4:
        raise ValueError(f"{node.op} of a {x.ndim}-D input (NHWC expected)")
    size = _ints(inputs[1])
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f"{node.op} size {size}")
    align = bool(node.attrs.get("align_corners", False))
    hpc = bool(node.attrs.get("half_pixel_centers", False))
    return x, size, align, hpc


@kernel("ResizeNearest")
def resize_nearest(node, inputs, out_dtypes):
    """TFLite RESIZE_NEAREST_NEIGHBOR (any dtype: values are copied)."""
    x, (oh, ow), align, hpc = _resize_args(node, inputs)
    y = np.take(x, nearest_indices(x.shape[1], oh, align, hpc), axis=1)
    return [np.ascontiguousarray(np.take(y, nearest_indices(x.shape[2], ow, align, hpc), axis=2))]


@kernel("ResizeBilinear")
def resize_bilinear(node, inputs, out_dtypes):
    """TFLite RESIZE_BILINEAR in float32 (TFLite's weights: 1 - (c - lower) and c - lower)."""
    x, (oh, ow), align, hpc = _resize_args(node, inputs)
    float_input(node, x)
    y = x
    for axis, size in ((1, oh), (2, ow)):
        lo, hi, c = bilinear_taps(x.shape[axis], size, align, hpc)
        d = (c - lo.astype(np.float32)).astype(x.dtype)
        shape = [1, 1, 1, 1]
        shape[axis] = -1
        d = d.reshape(shape)
        y = np.take(y, lo, axis=axis) * (1 - d) + np.take(y, hi, axis=axis) * d
    return [np.ascontiguousarray(y, dtype=x.dtype)]


# -- TFLite TRANSPOSE_CONV ------------------------------------------------------------------
@kernel("TransposeConv")
def transpose_conv(node, inputs, out_dtypes):
    """TFLite TRANSPOSE_CONV (NHWC): see the module docstring; fused activation."""
    out_shape, w, x, b = _ints(inputs[0]), inputs[1], inputs[2], optional_input(inputs, 3)
    float_input(node, x)
    if x.ndim != 4 or w.ndim != 4 or len(out_shape) != 4 or w.shape[3] != x.shape[3]:
        raise ValueError(f"TransposeConv of {x.shape} with weights {w.shape} to {out_shape}")
    n, h, wd, cin = x.shape
    cout, kh, kw, _ = w.shape
    sh, sw = _ints(node.attrs.get("strides") or [1, 1])
    oh, ow = out_shape[1], out_shape[2]
    top, left = transpose_conv_pads(node.attrs.get("padding", "VALID"), (oh, ow), (kh, kw),
                                    (sh, sw))
    full_h, full_w = max((h - 1) * sh + kh, top + oh), max((wd - 1) * sw + kw, left + ow)
    cols = x.reshape(-1, cin) @ w.astype(x.dtype).reshape(cout * kh * kw, cin).T
    cols = cols.reshape(n, h, wd, cout, kh, kw)
    canvas = np.zeros((n, full_h, full_w, cout), dtype=x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            canvas[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (wd - 1) * sw + 1:sw, :] += \
                cols[..., ky, kx]
    y = np.ascontiguousarray(canvas[:, top:top + oh, left:left + ow, :])
    if b is not None:
        y += b.astype(x.dtype).reshape(-1)
    return [_fused(node, y, own=True)]


# -- split ----------------------------------------------------------------------------------
def _split(x, axis: int, sizes) -> list:
    if sum(sizes) != x.shape[axis] or min(sizes) < 0:
        raise ValueError(f"split sizes {sizes} of an axis of {x.shape[axis]}")
    return [np.ascontiguousarray(p) for p in np.split(x, np.cumsum(sizes)[:-1], axis=axis)]


def onnx_split_sizes(node, inputs, dim: int) -> list:
    """The part sizes of an ONNX Split (the `split` input, or equal parts; opset 18 lets the
    last part be smaller)."""
    sizes = optional_input(inputs, 1)
    if sizes is not None and np.asarray(sizes).size:
        return _ints(sizes)
    parts = int(node.attrs.get("num_outputs") or len(node.outputs))
    step = -(-dim // parts)
    return [min(step, dim - i * step) for i in range(parts)]


@kernel("DepthToSpaceNHWC")
def depth_to_space_nhwc(node, inputs, out_dtypes):
    """TFLite DEPTH_TO_SPACE: [N, H, W, C] -> [N, H b, W b, C / b^2], output (h b + i, w b + j,
    c) from input channel (i b + j) C / b^2 + c (DCR)."""
    x, b = inputs[0], int(node.attrs.get("block_size", 0) or 0)
    if x.ndim != 4 or b < 1 or x.shape[3] % (b * b):
        raise ValueError(f"DepthToSpace block {b} of a {list(x.shape)} input")
    n, h, w, c = x.shape
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return [y.reshape(n, h * b, w * b, c // (b * b))]


@kernel("DepthToSpace")
def depth_to_space(node, inputs, out_dtypes):
    """ONNX DepthToSpace of NCHW: DCR takes output channel c at tile (i, j) from input channel
    (i b + j) C / b^2 + c, CRD from c b^2 + i b + j."""
    x, b = inputs[0], int(node.attrs.get("blocksize", 0) or 0)
    mode = node.attrs.get("mode", "DCR") or "DCR"
    if x.ndim != 4 or b < 1 or x.shape[1] % (b * b) or mode not in ("DCR", "CRD"):
        raise ValueError(f"DepthToSpace block {b} mode {mode} of a {list(x.shape)} input")
    n, c, h, w = x.shape
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [y.reshape(n, c // (b * b), h * b, w * b)]


@kernel("Split")
def split(node, inputs, out_dtypes):
    """ONNX Split along `axis`."""
    x = inputs[0]
    axis = _axis(int(node.attrs.get("axis", 0) or 0), x.ndim)
    return _split(x, axis, onnx_split_sizes(node, inputs, x.shape[axis]))


@kernel("SplitEqual")
def split_equal(node, inputs, out_dtypes):
    """TFLite SPLIT: inputs (axis, x), `num_splits` equal parts."""
    x = inputs[1]
    axis = _axis(_ints(inputs[0])[0], x.ndim)
    parts = int(node.attrs.get("num_splits") or len(node.outputs))
    if x.shape[axis] % parts:
        raise ValueError(f"SPLIT of {x.shape[axis]} into {parts} parts")
    return _split(x, axis, [x.shape[axis] // parts] * parts)


@kernel("SplitSizes")
def split_sizes(node, inputs, out_dtypes):
    """TFLite SPLIT_V: inputs (x, size_splits, axis); one size may be -1 (the rest)."""
    x = inputs[0]
    axis = _axis(_ints(inputs[2])[0], x.ndim)
    sizes = _ints(inputs[1])
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    return _split(x, axis, sizes)
