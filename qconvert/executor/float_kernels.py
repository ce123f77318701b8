"""Numpy kernels of IR ops, with ONNX / TFLite semantics: `KERNELS[op](node, inputs, out_dtypes)`.

- `inputs`: one array per input slot, `None` for an omitted optional input. A kernel reads only
  what it needs (Shape reads only `.shape`, so a zero-strided placeholder is enough).
- `out_dtypes`: the IR dtype name declared for each output, `None` where it is unknown. Ops whose
  output type is not implied by their inputs (Cast from TFLite, Shape) use it.
- Returns one array per output. Kernels never write into their inputs; results may be views of
  them (Reshape, Transpose, Expand), so callers that keep a result copy it if they need to.
- A kernel raises (ValueError, IndexError, NotImplementedError, ZeroDivisionError) on anything it
  cannot compute exactly as the runtimes do; callers that only optimize treat that as "skip".

Attribute names are the IR's: ONNX attributes keep their ONNX names (`axis`, `perm`, `to`,
`allowzero`), TFLite options their snake_case field names (`new_shape`, `squeeze_dims`,
`batch_dims`) and the fused activation is `activation`.

Semantics worth knowing:
- integer Div truncates toward zero (C semantics, as onnxruntime and TFLite compute it); a zero
  integer divisor raises;
- Reshape: `0` copies the input dimension when `allowzero` is 0 (ONNX default), `-1` is inferred;
  a TFLite Reshape (no `allowzero`) whose shape holds a 0 is refused (TFLite reads 0 literally,
  ONNX copies: a node without the attribute is ambiguous);
- Cast from float to an integer type truncates toward zero and refuses out-of-range values (the
  runtimes' result is undefined there);
- Range accumulates `value += delta` in the output type, as onnxruntime and TFLite do.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from qconvert.dtypes import ONNX_TO_IR

KERNELS: dict[str, Callable] = {}


def kernel(*ops: str):
    """Register the decorated function as the kernel of each IR op in `ops`."""

    def wrap(fn):
        for op in ops:
            KERNELS[op] = fn
        return fn

    return wrap


# -- helpers ------------------------------------------------------------------------------------
def _ints(a) -> list:
    """A constant input or attribute as a list of Python ints."""
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _input_or_attr(node, inputs, index: int, *attrs):
    """Input `index` when present, else the first attribute of `attrs` that is set, else None."""
    if len(inputs) > index and inputs[index] is not None:
        return _ints(inputs[index])
    for name in attrs:
        if node.attrs.get(name) is not None:
            return _ints(node.attrs[name])
    return None


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


_ACTIVATIONS = {
    "NONE": lambda y: y,
    "RELU": lambda y: np.maximum(y, y.dtype.type(0)),
    "RELU6": lambda y: np.minimum(np.maximum(y, y.dtype.type(0)), y.dtype.type(6)),
    "RELU_N1_TO_1": lambda y: np.minimum(np.maximum(y, y.dtype.type(-1)), y.dtype.type(1)),
    "TANH": np.tanh,
}


def _fused(node, y: np.ndarray) -> np.ndarray:
    """Apply the TFLite fused activation of `node` (ONNX nodes have none)."""
    name = node.attrs.get("activation", "NONE")
    if name not in _ACTIVATIONS:
        raise NotImplementedError(f"fused activation {name}")
    return np.asarray(_ACTIVATIONS[name](y), dtype=y.dtype)


# -- elementwise --------------------------------------------------------------------------------
def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise ZeroDivisionError("integer division by zero")
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix.astype(q.dtype)).astype(np.result_type(a, b))


def _div(a, b):
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return _trunc_div(a, b)
    return np.divide(a, b)


def _binary(fn):
    def run(node, inputs, out_dtypes):
        a, b = inputs[0], inputs[1]
        if a.dtype != b.dtype:
            raise ValueError(f"{node.op} of {a.dtype} and {b.dtype}")
        with np.errstate(all="ignore"):
            y = np.asarray(fn(a, b)).astype(a.dtype, copy=False)
        return [_fused(node, y)]

    return run


for _op, _fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", _div)):
    KERNELS[_op] = _binary(_fn)


def _unary(fn):
    def run(node, inputs, out_dtypes):
        x = inputs[0]
        with np.errstate(all="ignore"):
            return [np.asarray(fn(x)).astype(x.dtype, copy=False)]

    return run


KERNELS["Relu"] = _unary(lambda x: np.maximum(x, x.dtype.type(0)))
KERNELS["Relu6"] = _unary(lambda x: np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(6)))
KERNELS["Sigmoid"] = _unary(lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)))
KERNELS["Tanh"] = _unary(np.tanh)
KERNELS["Identity"] = _unary(lambda x: x)


@kernel("Clip")
def clip(node, inputs, out_dtypes):
    """ONNX Clip 11+: optional `min`/`max` inputs; min > max gives max everywhere."""
    x = inputs[0]
    y = x
    if len(inputs) > 1 and inputs[1] is not None:
        y = np.maximum(y, inputs[1].astype(x.dtype))
    if len(inputs) > 2 and inputs[2] is not None:
        y = np.minimum(y, inputs[2].astype(x.dtype))
    return [np.asarray(y, dtype=x.dtype)]


@kernel("Cast")
def cast(node, inputs, out_dtypes):
    """ONNX: to the TensorProto type `to`; TFLite: to the declared output dtype."""
    x = inputs[0]
    to = node.attrs.get("to")
    name = ONNX_TO_IR.get(int(to)) if to is not None else out_dtypes[0]
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
    """The input's shape as int64 (ONNX) or the declared output type (TFLite `out_type`).
    ONNX 15+ `start`/`end`: negative values count from the rank, both are clamped to [0, rank]."""
    dims = list(inputs[0].shape)
    rank = len(dims)
    start, end = int(node.attrs.get("start", 0) or 0), node.attrs.get("end")
    end = rank if end is None else int(end)
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    dtype = out_dtypes[0] if out_dtypes and out_dtypes[0] in ("int32", "int64") else "int64"
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
    return [np.take(data, indices.astype(np.int64), axis=axis)]


@kernel("Unsqueeze")
def unsqueeze(node, inputs, out_dtypes):
    """Insert size-1 axes (input `axes` from ONNX 13, attribute before); negative axes count
    from the output rank."""
    x = inputs[0]
    axes = _input_or_attr(node, inputs, 1, "axes")
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


@kernel("Squeeze")
def squeeze(node, inputs, out_dtypes):
    """Remove the given size-1 axes (ONNX `axes` input or attribute, TFLite `squeeze_dims`);
    none given (or an empty list) removes every size-1 axis."""
    x = inputs[0]
    axes = _input_or_attr(node, inputs, 1, "axes", "squeeze_dims")
    if not axes:
        return [x.reshape([d for d in x.shape if d != 1])]
    axes = {_axis(a, x.ndim) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError("Squeeze of an axis whose size is not 1")
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in axes])]


@kernel("Reshape")
def reshape(node, inputs, out_dtypes):
    """Shape from the second input, else the TFLite `new_shape` option. `-1` is inferred; `0`
    copies the input dimension when `allowzero` is 0 (see the module docstring)."""
    x = inputs[0]
    dims = _input_or_attr(node, inputs, 1, "new_shape")
    if dims is None:
        raise ValueError("Reshape without a shape")
    if 0 in dims:
        allowzero = node.attrs.get("allowzero")
        if allowzero is None:
            raise NotImplementedError("Reshape to a 0 dimension without allowzero")
        if int(allowzero) == 0:
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
    """Permute by `perm` (ONNX attribute or TFLite constant input); default reverses the axes."""
    x = inputs[0]
    perm = _input_or_attr(node, inputs, 1, "perm")
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
    return [_fused(node, np.concatenate(inputs, axis=axis))]


@kernel("Slice")
def slice_(node, inputs, out_dtypes):
    """ONNX Slice 10+: for each axis, negative starts/ends count from the dimension, then both
    are clamped ([0, dim] for positive steps, [0, dim - 1] / [-1, dim - 1] for negative ones)."""
    x = inputs[0]
    starts, ends = _ints(inputs[1]), _ints(inputs[2])
    axes = _input_or_attr(node, inputs, 3) or list(range(len(starts)))
    steps = _input_or_attr(node, inputs, 4) or [1] * len(starts)
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
