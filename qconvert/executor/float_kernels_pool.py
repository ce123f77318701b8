"""Float kernels of the pools and reductions: MaxPool, AveragePool, GlobalAveragePool,
GlobalMaxPool, Mean (TFLite), ReduceMean, ReduceMax, ReduceMin, ReduceSum and ReduceProd.
Registered into `float_kernels.KERNELS` (same contract: see that module's docstring). Padding
never wins a max; averages divide by the valid element count or the taps inside the explicit
pads.
"""

from __future__ import annotations

import numpy as np

from .float_kernels_base import _axis, float_input, _fused, input_or_attr, _ints, _layout, kernel
from .float_kernels_window import (out_sizes, pad_spatial, padded_scratch, sample_chunks,
                                   spatial_attrs, spatial_axes, window_taps)
from .parallel import on_workers


def _pool(node, x, kind: str) -> np.ndarray:
    float_input(node, x)
    nhwc = _layout(node) == "NHWC"
    axes = spatial_axes(x.ndim, nhwc)
    rank = len(axes)
    kernel = _ints(node.attrs.get("kernel_shape") or [])
    if len(kernel) != rank:
        raise ValueError(f"{node.op}: kernel_shape {kernel} for a {x.ndim}-D input")
    spatial = [x.shape[a] for a in axes]
    strides, dilations, pads = spatial_attrs(node, spatial, kernel, dilate_same=False)
    ceil_mode = bool(int(node.attrs.get("ceil_mode", 0) or 0))
    out = out_sizes(spatial, kernel, strides, dilations, pads, ceil_mode)
    # the last window may run past the end padding (ceil_mode): pad that too, never counted
    extra = [max(0, (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                 - (spatial[i] + pads[i] + pads[rank + i])) for i in range(rank)]
    fill = -np.inf if kind == "max" else 0
    ends = [pads[rank + i] + extra[i] for i in range(rank)]
    shape = (x.shape[0], *out, x.shape[-1]) if nhwc else (*x.shape[:2], *out)
    acc = np.empty(shape, x.dtype)

    def run(parts):
        for part in parts:
            if kind == "max":
                xp = padded_scratch(x[part], axes, pads[:rank], ends, fill, None)
                _max_axis_by_axis(xp, acc[part], axes, kernel, strides, dilations, out)
                continue
            xp = pad_spatial(x[part], axes, pads[:rank], ends, fill)
            a = acc[part]
            for t, view in enumerate(window_taps(xp, nhwc, kernel, strides, dilations, out)):
                if t == 0:
                    a[...] = view
                else:
                    a += view

    # chunks of samples, shared among the CPUs (each writes its own slice of `acc`): padding
    # and the tap loop stay in cache, no padded copy of the batch
    on_workers(run, sample_chunks(x.shape[0], int(np.prod(shape[1:]))))
    if kind == "max":
        return acc
    include_pad = bool(int(node.attrs.get("count_include_pad", 0) or 0))
    count = np.ones([1] * x.ndim, dtype=np.int64)
    for i, a in enumerate(axes):
        pos = (np.arange(out[i])[:, None] * strides[i] - pads[i]
               + np.arange(kernel[i])[None, :] * dilations[i])
        if include_pad:  # taps inside [-pad_begin, size + pad_end) count (onnxruntime)
            inside = (pos >= -pads[i]) & (pos < spatial[i] + pads[rank + i])
        else:
            inside = (pos >= 0) & (pos < spatial[i])
        shape = [1] * x.ndim
        shape[a] = out[i]
        count = count * inside.sum(axis=1).reshape(shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = acc / count.astype(acc.dtype)
    return np.where(count > 0, y, acc.dtype.type(0)) if np.any(count == 0) else y


def _max_axis_by_axis(xp, a, axes, kernel, strides, dilations, out) -> None:
    """The window maxima of the padded `xp` into `a`, one spatial axis at a time (a max over a
    box is the max over its columns of the max over its rows, exactly): 3x3 stride 2 takes
    3 + 3 taps instead of 9, and the first axes' taps read whole contiguous rows. (Arrays of
    their own, not thread work arrays: the heap reuses them once freed, where a work array
    would hold its memory for the rest of the run.)"""
    source = xp
    for i, axis in enumerate(axes):
        shape = list(source.shape)
        shape[axis] = out[i]
        target = a if i == len(axes) - 1 else np.empty(shape, a.dtype)
        index = [slice(None)] * source.ndim
        for tap in range(kernel[i]):
            start = tap * dilations[i]
            index[axis] = slice(start, start + (out[i] - 1) * strides[i] + 1, strides[i])
            if tap == 0:
                target[...] = source[tuple(index)]
            else:
                np.maximum(target, source[tuple(index)], out=target)
        source = target


@kernel("MaxPool")
def max_pool(node, inputs, out_dtypes):
    """Max over each window, padding excluded (ONNX: pads, dilations, ceil_mode; TFLite: fused
    activation). The optional ONNX Indices output is not computed."""
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        raise NotImplementedError("MaxPool with an Indices output")
    return [_fused(node, _pool(node, inputs[0], "max"), own=True)]


@kernel("AveragePool")
def average_pool(node, inputs, out_dtypes):
    """Window sum / count. The count excludes padding (TFLite, whose SAME padding the reader
    made explicit, and ONNX count_include_pad=0); with count_include_pad=1 it includes the
    explicit pads but not the part of a ceil_mode window past them (onnxruntime)."""
    return [_fused(node, _pool(node, inputs[0], "avg"), own=True)]


@kernel("GlobalAveragePool")
def global_average_pool(node, inputs, out_dtypes):
    """Mean over the spatial axes, kept as size 1."""
    x = inputs[0]
    float_input(node, x)
    axes = tuple(spatial_axes(x.ndim, _layout(node) == "NHWC"))
    return [np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)]


def _reduce_axes(axes, ndim: int) -> tuple:
    return tuple(sorted({_axis(a, max(ndim, 1)) for a in axes}))


@kernel("Mean")
def mean(node, inputs, out_dtypes):
    """TFLite MEAN: over the axes of the constant input (negative count from the rank, repeats
    allowed), `keepdims`."""
    x = inputs[0]
    float_input(node, x)
    axes = _reduce_axes(_ints(inputs[1]), x.ndim)
    return [np.mean(x, axis=axes, keepdims=bool(int(node.attrs.get("keepdims", 1))),
                    dtype=x.dtype)]


def _reduce_over(node, inputs) -> tuple:
    """(axes, keepdims) of an ONNX Reduce* node: the `axes` input (or attribute); none (or
    empty) means every axis, or None (the identity) when `noop_with_empty_axes`; `keepdims`
    (default 1)."""
    x = inputs[0]
    axes = input_or_attr(node, inputs, 1)
    keep = bool(int(node.attrs.get("keepdims", 1)))
    if not axes:
        if int(node.attrs.get("noop_with_empty_axes", 0) or 0):
            return None, keep
        axes = list(range(x.ndim))
    return _reduce_axes(axes, x.ndim), keep


@kernel("ReduceMean")
def reduce_mean(node, inputs, out_dtypes):
    """ONNX ReduceMean over `_reduce_over`'s axes."""
    x = inputs[0]
    float_input(node, x)
    axes, keep = _reduce_over(node, inputs)
    if axes is None:
        return [x]
    return [np.mean(x, axis=axes, keepdims=keep, dtype=x.dtype)]


_REDUCTIONS = {"ReduceMax": np.max, "ReduceMin": np.min, "ReduceSum": np.sum,
               "ReduceProd": np.prod}


@kernel(*_REDUCTIONS)
def reduce_max_min_sum(node, inputs, out_dtypes):
    """Max / min / sum / product over the `axes` input, `keepdims`; empty axes as in ReduceMean
    (every axis, or none when `noop_with_empty_axes`, as TFLite's REDUCE_MAX / REDUCE_MIN / SUM /
    REDUCE_PROD)."""
    x = inputs[0]
    fn = _REDUCTIONS[node.op]
    axes, keep = _reduce_over(node, inputs)
    if axes is None:
        return [x]
    return [np.asarray(fn(x, axis=axes, keepdims=keep)).astype(x.dtype)]


@kernel("GlobalMaxPool")
def global_max_pool(node, inputs, out_dtypes):
    """Max over the spatial axes, kept as size 1."""
    x = inputs[0]
    float_input(node, x)
    return [np.max(x, axis=tuple(spatial_axes(x.ndim, _layout(node) == "NHWC")), keepdims=True)]
