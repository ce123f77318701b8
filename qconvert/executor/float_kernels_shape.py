"""Float kernels of the shape and data-movement ops: Cast, Shape, Gather, Unsqueeze, ExpandDims,
Squeeze, Reshape, Flatten, Transpose, Concat, Slice, ConstantOfShape, Expand, Range, Pad /
PadV2, MirrorPad, Fill and TFLite's StridedSlice / Pack. Registered into
`float_kernels.KERNELS` (same contract: see that module's docstring); fold-constants evaluates
shape arithmetic with them.
"""

from __future__ import annotations

import math

import numpy as np

from .float_kernels_base import _axis, _fused, input_or_attr, _ints, optional_input, kernel


@kernel("Cast")
def cast(node, inputs, out_dtypes):
    """To the IR dtype `to` (else the declared output dtype)."""
    x = inputs[0]
    name = node.attrs.get("to") or out_dtypes[0]
    if name is None:
        raise NotImplementedError("Cast to an unknown type")
    dtype = np.dtype(name)  # raises TypeError for types numpy lacks (strings, float8...)
    if x.dtype.kind == "f" and dtype.kind in "iu":
        if not np.isfinite(x).all():
            raise ValueError("Cast of a non-finite value to an integer type")
        info = np.iinfo(dtype)
        t = np.trunc(x.astype(np.float64))
        if t.size and (t.min() < info.min or t.max() > info.max):
            raise ValueError(f"Cast of out-of-range values to {dtype}")
    with np.errstate(over="ignore"):  # float -> float16 overflows to inf, as the runtimes do
        return [x.astype(dtype)]


# -- shapes -------------------------------------------------------------------------------------
@kernel("Shape")
def shape(node, inputs, out_dtypes):
    """The input's shape as `out_type` (an IR dtype name: int64 from ONNX, TFLite's
    `out_type`; absent, int64). ONNX 15+ `start`/`end`: negative values count from the rank,
    both are clamped to [0, rank]."""
    dims = list(inputs[0].shape)
    rank = len(dims)
    start, end = int(node.attrs.get("start", 0) or 0), node.attrs.get("end")
    end = rank if end is None else int(end)
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    dtype = node.attrs.get("out_type") or "int64"
    if dtype not in ("int32", "int64"):
        raise ValueError(f"Shape out_type {dtype} (int32 or int64)")
    return [np.array(dims[start:end], dtype=dtype)]


@kernel("Gather")
def gather(node, inputs, out_dtypes):
    """`np.take` along `axis`; negative indices count from the end (ONNX)."""
    data, indices = inputs[0], inputs[1]
    if int(node.attrs.get("batch_dims", 0) or 0) != 0:
        raise NotImplementedError("Gather with batch_dims")
    if indices.dtype.kind not in "iu":
        raise ValueError("Gather indices must be integers")
    axis = _axis(int(node.attrs.get("axis", 0) or 0), data.ndim)
    n = data.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise IndexError("Gather index out of range")
    return [np.asarray(np.take(data, indices.astype(np.int64), axis=axis))]


@kernel("Unsqueeze")
def unsqueeze(node, inputs, out_dtypes):
    """Insert size-1 axes at the `axes` input; negative axes count from the output rank."""
    x = inputs[0]
    axes = input_or_attr(node, inputs, 1)
    if axes is None:
        raise ValueError("Unsqueeze without axes")
    rank = x.ndim + len(axes)
    axes = sorted(_axis(a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError("Unsqueeze with repeated axes")
    dims = list(x.shape)
    for a in axes:
        dims.insert(a, 1)
    return [x.reshape(dims)]


@kernel("ExpandDims")
def expand_dims(node, inputs, out_dtypes):
    """TFLite EXPAND_DIMS: one size-1 axis inserted at the single value of the `axis` input;
    a negative axis counts from the output rank (-1: last)."""
    x, axis = inputs[0], np.asarray(inputs[1]).reshape(-1)
    if axis.size != 1:
        raise ValueError(f"ExpandDims axis has {axis.size} values, needs one")
    a = int(axis[0])
    if not -x.ndim - 1 <= a <= x.ndim:
        raise ValueError(f"ExpandDims axis {a} of a rank-{x.ndim} tensor")
    return [np.expand_dims(x, a % (x.ndim + 1))]


@kernel("Squeeze")
def squeeze(node, inputs, out_dtypes):
    """Remove the size-1 axes of the `axes` input; none given (or an empty list) removes every
    size-1 axis."""
    x = inputs[0]
    axes = input_or_attr(node, inputs, 1)
    if not axes:
        return [x.reshape([d for d in x.shape if d != 1])]
    axes = {_axis(a, x.ndim) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError("Squeeze of an axis whose size is not 1")
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in axes])]


@kernel("Reshape")
def reshape(node, inputs, out_dtypes):
    """Shape from the second input. `-1` is inferred; `0` copies the input dimension when
    `allowzero` is 0 (see the module docstring)."""
    x = inputs[0]
    dims = input_or_attr(node, inputs, 1)
    if dims is None:
        raise ValueError("Reshape without a shape")
    if 0 in dims:
        if int(node.attrs.get("allowzero", 0)) == 0:
            if len(dims) > x.ndim and any(d == 0 for d in dims[x.ndim:]):
                raise ValueError("Reshape copies a dimension the input lacks")
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    if sum(1 for d in dims if d == -1) > 1 or any(d < -1 for d in dims):
        raise ValueError(f"invalid Reshape shape {dims}")
    return [x.reshape(dims)]


@kernel("Flatten")
def flatten(node, inputs, out_dtypes):
    """To 2-D: dims before `axis` (default 1; negative counts from the rank) and after."""
    x = inputs[0]
    axis = int(node.attrs.get("axis", 1))
    if axis < 0:
        axis += x.ndim
    if not 0 <= axis <= x.ndim:
        raise ValueError(f"Flatten axis {axis} out of range")
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [x.reshape(outer, int(np.prod(x.shape[axis:], dtype=np.int64)))]


@kernel("Transpose")
def transpose(node, inputs, out_dtypes):
    """Permute by the `perm` input; without it, reverse the axes."""
    x = inputs[0]
    perm = input_or_attr(node, inputs, 1)
    if perm is None:
        perm = list(range(x.ndim))[::-1]
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"Transpose perm {perm} is not a permutation of rank {x.ndim}")
    return [np.transpose(x, perm)]


@kernel("Concat")
def concat(node, inputs, out_dtypes):
    """Concatenate along `axis` (negative counts from the rank); TFLite fused activation."""
    if not inputs or any(a is None for a in inputs):
        raise ValueError("Concat with a missing input")
    axis = node.attrs.get("axis")
    if axis is None:
        raise ValueError("Concat without axis")
    axis = _axis(int(axis), inputs[0].ndim)
    return [_fused(node, np.concatenate(inputs, axis=axis), own=True)]


@kernel("Slice")
def slice_(node, inputs, out_dtypes):
    """ONNX Slice 10+: for each axis, negative starts/ends count from the dimension, then both
    are clamped ([0, dim] for positive steps, [0, dim - 1] / [-1, dim - 1] for negative ones)."""
    x = inputs[0]
    starts, ends = _ints(inputs[1]), _ints(inputs[2])
    axes = input_or_attr(node, inputs, 3) or list(range(len(starts)))
    steps = input_or_attr(node, inputs, 4) or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError("Slice inputs of different lengths")
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _axis(axis, x.ndim)
        dim = x.shape[axis]
        if step == 0:
            raise ValueError("Slice step 0")
        start += dim if start < 0 else 0
        end += dim if end < 0 else 0
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        index[axis] = slice(start, None if end < 0 else end, step)
    return [x[tuple(index)]]


@kernel("ConstantOfShape")
def constant_of_shape(node, inputs, out_dtypes):
    """A tensor of the shape input filled with `value` (a 1-element tensor; default float32 0)."""
    dims = _ints(inputs[0])
    if any(d < 0 for d in dims):
        raise ValueError(f"ConstantOfShape of negative shape {dims}")
    value = node.attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if value.size != 1:
        raise ValueError("ConstantOfShape value must hold one element")
    return [np.full(dims, value[0], dtype=value.dtype)]


@kernel("Expand")
def expand(node, inputs, out_dtypes):
    """Two-way numpy broadcasting of `x` against the shape input (ONNX Expand)."""
    x = inputs[0]
    dims = _ints(inputs[1])
    return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(dims)))]


def range_length(start, limit, delta) -> int:
    """Number of elements of Range(start, limit, delta): max(ceil((limit - start) / delta), 0)."""
    start, limit, delta = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    if delta == 0:
        raise ValueError("Range delta 0")
    if start.dtype.kind in "iu":
        a, d = int(limit) - int(start), int(delta)
        return max(-((-a) // d), 0)
    n = math.ceil(float(limit - start) / float(delta))
    if not math.isfinite(n):
        raise ValueError("Range of non-finite length")
    return max(int(n), 0)


@kernel("Range")
def range_(node, inputs, out_dtypes):
    """start, start + delta, ... while before limit; floats accumulate in their own type."""
    start, limit, delta = inputs[0], inputs[1], inputs[2]
    if not start.dtype == limit.dtype == delta.dtype or any(v.size != 1 for v in inputs[:3]):
        raise ValueError("Range needs three scalars of one type")
    n = range_length(start, limit, delta)
    dtype = start.dtype
    if dtype.kind in "iu":
        values = int(start.reshape(())) + int(delta.reshape(())) * np.arange(n, dtype=np.int64)
        return [values.astype(dtype)]
    steps = np.full(n, delta.reshape(()), dtype=dtype)
    if n:
        steps[0] = start.reshape(())
    return [np.cumsum(steps, dtype=dtype)]


@kernel("Fill")
def fill(node, inputs, out_dtypes):
    """TFLite FILL: the shape of the 1-D `dims` input, every element the scalar `value`."""
    dims, value = np.asarray(inputs[0]), np.asarray(inputs[1])
    if dims.ndim != 1 or dims.dtype.kind not in "iu" or np.any(dims < 0) or value.ndim != 0:
        raise ValueError(f"Fill of dims {dims.tolist()} with a value of shape {list(value.shape)}")
    return [np.full(tuple(int(d) for d in dims), value, dtype=value.dtype)]


MIRROR_MODES = {0: "reflect", 1: "symmetric"}  # TFLite MirrorPadMode -> numpy's pad mode


@kernel("MirrorPad")
def mirror_pad(node, inputs, out_dtypes):
    """TFLite MIRROR_PAD: rows [rank, 2] of (begin, end) pads mirrored, `mode` 0 REFLECT (the
    edge not repeated: a pad at most the axis size - 1) or 1 SYMMETRIC (repeated: at most the
    axis size), the bounds TFLite checks."""
    x, pads = inputs[0], np.asarray(inputs[1]).astype(np.int64)
    mode = int(node.attrs.get("mode", 0) or 0)
    if mode not in MIRROR_MODES:
        raise ValueError(f"MirrorPad mode {mode} (0 REFLECT, 1 SYMMETRIC)")
    if pads.shape != (x.ndim, 2) or np.any(pads < 0):
        raise ValueError(f"MirrorPad pads {pads.tolist()} for rank {x.ndim}")
    limit = np.asarray(x.shape, np.int64)[:, None] - (1 if mode == 0 else 0)
    if np.any(pads > limit):
        raise ValueError(f"MirrorPad pads {pads.tolist()} wider than the input {list(x.shape)} "
                         f"allows in {MIRROR_MODES[mode]} mode")
    return [np.pad(x, [tuple(r) for r in pads.tolist()], mode=MIRROR_MODES[mode])]


@kernel("Pad", "PadV2")
def pad(node, inputs, out_dtypes):
    """Pad by `pads`, the IR's rows [k, 2] of (begin, end) for each axis of the `axes` input
    (absent: every axis; see `qconvert.formats.pads_spelling`), with the `value` input (default 0) or
    by `mode` constant / reflect / edge / wrap; negative pads crop."""
    x, pads = inputs[0], np.asarray(inputs[1])
    value = optional_input(inputs, 2)
    value = x.dtype.type(0) if value is None or np.asarray(value).size == 0 else \
        np.asarray(value).reshape(-1)[0]
    axes = input_or_attr(node, inputs, 3)
    axes = list(range(x.ndim)) if axes is None else [_axis(a, x.ndim) for a in axes]
    if pads.shape != (len(axes), 2):
        raise ValueError(f"Pad pads of shape {list(pads.shape)} for axes {axes} (rows [k, 2])")
    widths = [(0, 0)] * x.ndim
    for a, (b, e) in zip(axes, pads.tolist()):
        widths[a] = (int(b), int(e))
    mode = node.attrs.get("mode", "constant") or "constant"
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise NotImplementedError(f"Pad mode {mode}")
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(widths))
    if any(x.shape[i] - max(-b, 0) - max(-e, 0) < 0 for i, (b, e) in enumerate(widths)):
        raise ValueError("Pad crops more than the input")
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in widths]
    if mode == "constant":
        return [np.pad(x, widths, constant_values=x.dtype.type(value))]
    if mode == "reflect" and any((b or e) and x.shape[i] < 2 for i, (b, e) in enumerate(widths)):
        raise ValueError("reflect Pad of an axis shorter than 2")
    return [np.pad(x, widths, mode=mode)]


# -- TFLite shape plumbing -------------------------------------------------------------------------
# TFLite's converter writes a model's flatten as Shape -> STRIDED_SLICE -> PACK -> Reshape when
# the batch is dynamic; fold-constants evaluates the chain once the batch is fixed.
@kernel("StridedSlice")
def _strided_slice(node, inputs, out_dtypes):
    """TFLite STRIDED_SLICE with begin / end / strides inputs, begin_mask, end_mask,
    shrink_axis_mask and offset (ellipsis and new-axis masks are refused)."""
    attrs = node.attrs
    if attrs.get("ellipsis_mask", 0) or attrs.get("new_axis_mask", 0):
        raise NotImplementedError("STRIDED_SLICE with ellipsis or new-axis masks")
    x = inputs[0]
    begin, end = _ints(inputs[1]), _ints(inputs[2])
    steps = _ints(inputs[3]) if optional_input(inputs, 3) is not None else [1] * len(begin)
    if not len(begin) == len(end) == len(steps) <= x.ndim:
        raise ValueError("STRIDED_SLICE operands of different lengths")
    bmask, emask = int(attrs.get("begin_mask", 0)), int(attrs.get("end_mask", 0))
    shrink, offset = int(attrs.get("shrink_axis_mask", 0)), bool(attrs.get("offset", False))
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, steps)):
        dim = x.shape[i]
        if s == 0:
            raise ValueError("STRIDED_SLICE step 0")
        if shrink >> i & 1:
            k = b + dim if b < 0 else b
            if not 0 <= k < dim:
                raise IndexError("STRIDED_SLICE index out of range")
            index.append(k)
            continue
        if offset:
            e = b + e
        start = None if bmask >> i & 1 else b
        stop = None if emask >> i & 1 else e
        index.append(slice(start, stop, s))
    return [np.asarray(x[tuple(index)])]


@kernel("Unpack")
def _unpack(node, inputs, out_dtypes):
    """TFLite UNPACK: the slices along `axis` (negative counts from the input rank), that axis
    removed."""
    x = inputs[0]
    axis = _axis(int(node.attrs.get("axis", 0) or 0), x.ndim)
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


@kernel("SliceBySize")
def _slice_by_size(node, inputs, out_dtypes):
    """TFLite SLICE: x[begin : begin + size] per axis, a size of -1 reaching the end."""
    x = inputs[0]
    begin = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
    size = [int(v) for v in np.asarray(inputs[2]).reshape(-1)]
    if len(begin) != x.ndim or len(size) != x.ndim:
        raise ValueError(f"SLICE begin {begin} / size {size} for rank {x.ndim}")
    index = []
    for b, s, d in zip(begin, size, x.shape):
        end = d if s == -1 else b + s
        if not 0 <= b <= end <= d:
            raise ValueError(f"SLICE begin {begin} size {size} outside {tuple(x.shape)}")
        index.append(slice(b, end))
    return [np.asarray(x[tuple(index)])]


@kernel("Reverse")
def _reverse(node, inputs, out_dtypes):
    """TFLite REVERSE_V2: x reversed along every axis of the axis input."""
    x = inputs[0]
    axes = tuple(_axis(int(a), x.ndim) for a in np.asarray(inputs[1]).reshape(-1))
    return [np.flip(x, axis=axes)]


@kernel("Pack")
def _pack(node, inputs, out_dtypes):
    """TFLite PACK: stack the inputs along `axis` (negative counts from the output rank)."""
    axis = int(node.attrs.get("axis", 0) or 0)
    return [np.stack(inputs, axis=_axis(axis, inputs[0].ndim + 1))]
