"""Numpy kernels of IR ops, with ONNX / TFLite semantics: `KERNELS[op](node, inputs, out_dtypes)`.

- `inputs`: one array per input slot, `None` for an omitted optional input. A kernel reads only
  what it needs (Shape reads only `.shape`, so a zero-strided placeholder is enough).
- `out_dtypes`: the IR dtype name declared for each output, `None` where it is unknown. Ops whose
  output type is not implied by their inputs (Cast from TFLite, Shape) use it.
- Returns one array per output. Kernels never write into their inputs; results may be views of
  them (Reshape, Transpose, Expand), so callers that keep a result copy it if they need to.
- A kernel raises (ValueError, IndexError, NotImplementedError, ZeroDivisionError) on anything it
  cannot compute exactly as the runtimes do; callers that only optimize treat that as "skip".
- Kernels of the ops in `CONTEXT_KERNELS` also take a keyword argument `ctx` (a `KernelContext`:
  the quantization parameters of the node's input and output tensors, the ONNX opset), which
  only a caller holding the graph can give (the executor does; fold-constants does not). They
  are TFLite Quantize / Dequantize (scale and zero point live on the tensors, not the node),
  hybrid TFLite Conv2D / FullyConnected (int8 weights, float input) and ONNX Softmax (its
  meaning changed at opset 13). Without `ctx` they raise NotImplementedError where they need it.

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
- Range accumulates `value += delta` in the output type, as onnxruntime and TFLite do;
- float layers compute in float32 like the runtimes (BLAS matmuls over an im2col view, sums over
  kernel taps), so they agree with onnxruntime / LiteRT to float rounding, not bitwise;
- pools: padding never wins a max; averages divide by the valid (non-pad) element count
  (TFLite, ONNX count_include_pad=0) or by the taps inside the explicit pads
  (count_include_pad=1); ONNX ceil_mode windows may run past the end padding;
- ONNX QuantizeLinear rounds half to even, TFLite QUANTIZE half away from zero (x / scale in
  float32 both), both saturate to the output type.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from qconvert.dtypes import ONNX_TO_IR
from qconvert.padding import same_pads
from qconvert.quant.numerics import round_half_away

from .parallel import SPAN, on_workers, one_blas_thread, scratch, spans

KERNELS: dict[str, Callable] = {}
CONTEXT_KERNELS: set = set()  # ops whose kernel takes the keyword argument `ctx`


@dataclass(frozen=True)
class KernelContext:
    """Facts about a node that live in the graph, not in the node: given to the kernels of
    `CONTEXT_KERNELS` as the keyword argument `ctx` (the executor builds one per node).

    - `input_quant` / `output_quant`: the `QuantParams` (or None) of each input / output tensor,
      in slot order. TFLite Quantize reads its output's, TFLite Dequantize its input's, and a
      TFLite Conv2D / FullyConnected with int8 weights and a float input (a "hybrid" op, from
      dynamic-range quantization) its weights'.
    - `onnx_opset`: the model's default-domain ONNX opset; None for TFLite or when unknown.
      ONNX Softmax before opset 13 flattens the input to 2-D at `axis`.

    A caller without a graph (fold-constants) passes no `ctx`; a kernel that cannot compute the
    node exactly without it raises NotImplementedError (so fold-constants skips the node).
    """

    input_quant: tuple = ()
    output_quant: tuple = ()
    onnx_opset: int | None = None

    def in_quant(self, index: int):
        return self.input_quant[index] if index < len(self.input_quant) else None

    def out_quant(self, index: int):
        return self.output_quant[index] if index < len(self.output_quant) else None


def kernel(*ops: str, context: bool = False):
    """Register the decorated function as the kernel of each IR op in `ops`; with `context`,
    the kernel also takes `ctx=None` (a `KernelContext`)."""

    def wrap(fn):
        for op in ops:
            KERNELS[op] = fn
            if context:
                CONTEXT_KERNELS.add(op)
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


for _op, _fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", _div),
                 ("Maximum", np.maximum), ("Minimum", np.minimum)):
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
    return [np.asarray(np.take(data, indices.astype(np.int64), axis=axis))]


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


# -- float layers -------------------------------------------------------------------------------
# Everything below computes in the input's float type (float32 for every model the readers
# produce), like the runtimes: convolutions are an im2col (a strided view of the padded input,
# copied once) times the weights with BLAS, one matmul per group; depthwise convolutions and
# pools are sums / maxima over the kernel taps of strided views. Accumulation order differs from
# the runtimes' loops, so results agree to float32 rounding (about 1e-6 relative), not bitwise.
def _opt(inputs, index: int):
    """Optional input `index`, or None when it is omitted."""
    return inputs[index] if len(inputs) > index else None


def _float_input(node, x: np.ndarray) -> None:
    if x.dtype.kind != "f":
        raise NotImplementedError(f"{node.op} of {x.dtype} (the float executor computes floats; "
                                  "quantized ops are the integer executor's)")


def _float_operand(node, a: np.ndarray, dtype, what: str) -> np.ndarray:
    """A float weight / bias operand in the computation's dtype (float16 weights widen)."""
    if a.dtype.kind != "f":
        raise NotImplementedError(f"{node.op} with {a.dtype} {what} and a float input")
    return _aligned(a.astype(dtype, copy=False))


def _aligned(a: np.ndarray) -> np.ndarray:
    """`a`, copied when unaligned or not C-contiguous: constants read from ONNX files are views
    of the file's bytes, often unaligned, and numpy's matmul skips BLAS (100x slower) on those."""
    return np.require(a, requirements=("C", "A"))


def _layout(node) -> str:
    layout = node.attrs.get("layout", "NCHW") or "NCHW"
    if layout not in ("NCHW", "NHWC"):
        raise NotImplementedError(f"layout {layout}")
    return layout


def _spatial_axes(ndim: int, nhwc: bool) -> list:
    return list(range(1, ndim - 1)) if nhwc else list(range(2, ndim))


def _spatial_attrs(node, spatial: tuple, kernel: list, dilate_same: bool = True):
    """(strides, dilations, pads) of a conv / pool, pads [begins..., ends...] per spatial axis.
    An `auto_pad` the reader could not resolve (SAME on a dynamic input) is resolved here from
    the actual input size (ONNX SAME_UPPER / SAME_LOWER, TFLite SAME = SAME_UPPER)."""
    rank = len(kernel)
    strides = _ints(node.attrs.get("strides") or [1] * rank)
    dilations = _ints(node.attrs.get("dilations") or [1] * rank)
    auto = node.attrs.get("auto_pad") or "NOTSET"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(spatial, kernel, strides, dilations if dilate_same else [1] * rank,
                         lower=auto == "SAME_LOWER")
    elif auto == "VALID":
        pads = [0] * (2 * rank)
    elif auto == "NOTSET":
        pads = _ints(node.attrs.get("pads") or [0] * (2 * rank))
    else:
        raise NotImplementedError(f"auto_pad {auto}")
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ValueError(f"{node.op}: strides / dilations / pads do not match a {rank}-D kernel")
    if min(strides + dilations) < 1 or min(pads) < 0 or min(kernel) < 1:
        raise ValueError(f"{node.op}: invalid strides {strides}, dilations {dilations}, "
                         f"pads {pads} or kernel {kernel}")
    return strides, dilations, pads


def _out_sizes(spatial, kernel, strides, dilations, pads, ceil_mode: bool = False) -> list:
    rank = len(kernel)
    sizes = []
    for i in range(rank):
        span = spatial[i] + pads[i] + pads[rank + i] - ((kernel[i] - 1) * dilations[i] + 1)
        if span < 0:
            raise ValueError(f"kernel {kernel} larger than the padded input {list(spatial)}")
        n = -(-span // strides[i]) if ceil_mode else span // strides[i]
        sizes.append(n + 1)
    return sizes


def _pad_spatial(x, axes, begins, ends, value) -> np.ndarray:
    if not any(begins) and not any(ends):
        return x
    width = [(0, 0)] * x.ndim
    for a, b, e in zip(axes, begins, ends):
        width[a] = (b, e)
    return np.pad(x, width, constant_values=value)


def _window_view(xp, nhwc, kernel, strides, dilations, out) -> np.ndarray:
    """Read-only im2col view of the padded input: [N, C, *kernel, *out] (NCHW) or
    [N, *out, *kernel, C] (NHWC); no copy."""
    rank = len(kernel)
    if nhwc:
        sp = xp.strides[1:1 + rank]
        shape = (xp.shape[0], *out, *kernel, xp.shape[-1])
        strides = (xp.strides[0], *(s * st for s, st in zip(sp, strides)),
                   *(s * d for s, d in zip(sp, dilations)), xp.strides[-1])
    else:
        sp = xp.strides[2:]
        shape = (xp.shape[0], xp.shape[1], *kernel, *out)
        strides = (xp.strides[0], xp.strides[1], *(s * d for s, d in zip(sp, dilations)),
                   *(s * st for s, st in zip(sp, strides)))
    return as_strided(xp, shape, strides, writeable=False)


def _taps(xp, nhwc, kernel, strides, dilations, out):
    """Yield, for each kernel tap in row-major order, the strided view of the padded input
    that tap reads for every output position ([N, C, *out] or [N, *out, C])."""
    rank = len(kernel)
    first = 1 if nhwc else 2
    for tap in itertools.product(*(range(k) for k in kernel)):
        index = [slice(None)] * xp.ndim
        for i in range(rank):
            start = tap[i] * dilations[i]
            index[first + i] = slice(start, start + (out[i] - 1) * strides[i] + 1, strides[i])
        yield xp[tuple(index)]


def _add_bias(node, y, b, axis: int) -> None:
    if b is None:
        return
    b = _float_operand(node, b, y.dtype, "bias").reshape(-1)
    if b.size != y.shape[axis]:
        raise ValueError(f"{node.op}: bias of {b.size} values for {y.shape[axis]} channels")
    shape = [1] * y.ndim
    shape[axis] = b.size
    y += b.reshape(shape)


@kernel("Conv2D", context=True)
def conv2d(node, inputs, out_dtypes, ctx=None):
    """ONNX Conv (NCHW input, OIHW weights, any spatial rank, `group`) and TFLite CONV_2D (NHWC,
    OHWI, fused `activation`): explicit `pads`, `strides`, `dilations`, optional bias. Int8
    weights with a float input are TFLite's hybrid kernel (see `_hybrid_conv`)."""
    x, w, b = inputs[0], inputs[1], _opt(inputs, 2)
    _float_input(node, x)
    nhwc = _layout(node) == "NHWC"
    rank = x.ndim - 2
    if rank < 1 or w.ndim != x.ndim:
        raise ValueError(f"Conv2D of a {x.ndim}-D input with {w.ndim}-D weights")
    kernel = list(w.shape[1:-1] if nhwc else w.shape[2:])
    cin_g = w.shape[-1] if nhwc else w.shape[1]
    channels = x.shape[-1] if nhwc else x.shape[1]
    cout = w.shape[0]
    group = int(node.attrs.get("group", 1) or 1)
    if cin_g * group != channels or cout % group:
        raise ValueError(f"Conv2D: {channels} input channels, weights {w.shape}, group {group}")
    axes = _spatial_axes(x.ndim, nhwc)
    spatial = [x.shape[a] for a in axes]
    strides, dilations, pads = _spatial_attrs(node, spatial, kernel)
    out = _out_sizes(spatial, kernel, strides, dilations, pads)
    if w.dtype.kind in "iu":
        return [_fused(node, _hybrid_conv(node, x, w, b, ctx, kernel, strides, dilations, pads,
                                          out, group))]
    w = _float_operand(node, w, x.dtype, "weights")
    n, k = x.shape[0], int(np.prod(kernel))
    if group == 1 and not nhwc:
        return [_fused(node, _dense_nchw(node, x, w.reshape(cout, channels * k), b, kernel,
                                         strides, dilations, pads, out))]
    depthwise = group == channels and cin_g == 1 and group > 1
    if depthwise and not nhwc and rank == 2:
        per_tap = np.moveaxis(w.reshape(channels, cout // channels, k), 2, 0)  # [k, C, M]
        return [_fused(node, _depthwise_nchw(node, x, per_tap, b, kernel, strides, dilations,
                                             pads, out))]
    xp = _pad_spatial(x, axes, pads[:rank], pads[rank:], 0)
    if depthwise:  # sum over taps
        per_tap = (np.moveaxis(w.reshape(channels, cout // channels, k), 2, 0))  # [k, C, M]
        y = _depthwise_sum(xp, per_tap, nhwc, kernel, strides, dilations, out)
    elif nhwc:
        p = n * int(np.prod(out))
        cols = _window_view(xp, True, kernel, strides, dilations, out)
        if group == 1:
            y = cols.reshape(p, k * channels) @ w.reshape(cout, k * channels).T
        else:
            cols = cols.reshape(p, k, group, cin_g).transpose(2, 0, 1, 3).reshape(group, p, -1)
            wg = w.reshape(group, cout // group, k * cin_g).transpose(0, 2, 1)
            y = np.matmul(cols, wg).transpose(1, 0, 2).reshape(p, cout)
        y = y.reshape(n, *out, cout)
    else:
        cols = _window_view(xp, False, kernel, strides, dilations, out)
        cols = cols.reshape(n, group, cin_g * k, int(np.prod(out)))
        y = np.matmul(w.reshape(group, cout // group, cin_g * k), cols).reshape(n, cout, *out)
    _add_bias(node, y, b, -1 if nhwc else 1)
    return [_fused(node, y)]


_GEMM_COLUMNS = 1024  # output positions per matmul below which samples are multiplied together


def _dense_nchw(node, x, w2, b, kernel, strides, dilations, pads, out) -> np.ndarray:
    """A group-1 NCHW convolution of `x` with weights w2 [Cout, C * k]: [N, Cout, *out].

    One matmul per sample, W @ im2col(x_i), written straight into the output, its bias added
    while the rows are in cache; a 1x1, stride-1, unpadded conv needs no im2col copy at all.
    When the output has few positions (late layers), samples are multiplied together,
    W @ [im2col(x_i) ...], so BLAS gets wide enough matrices. Padding and im2col are done one
    sample (or one group of samples) at a time, into buffers reused across the batch: memory
    stays bounded whatever the batch size, and no padded copy of the whole input is made.
    Several groups are shared among the CPUs (`on_workers`), each product on one BLAS thread
    (`one_blas_thread`); the groups depend on the shapes only, so the result does not depend on
    the number of CPUs."""
    n, channels = x.shape[:2]
    cout, depth = w2.shape
    rank = len(kernel)
    positions = int(np.prod(out))
    result = np.empty((n, cout, *out), dtype=np.result_type(x.dtype, w2.dtype))
    y = result.reshape(n, cout, positions)
    bias = None if b is None else _float_operand(node, b, y.dtype, "bias").reshape(-1)
    if bias is not None and bias.size != cout:
        raise ValueError(f"{node.op}: bias of {bias.size} values for {cout} channels")
    bias = None if bias is None else bias.reshape(cout, 1)
    per = max(1, -(-_GEMM_COLUMNS // max(positions, 1)))
    order = (1, *range(2, 2 + rank), 0, *range(2 + rank, 2 + 2 * rank))
    size = [x.shape[2 + i] + pads[i] + pads[rank + i] for i in range(rank)]
    inner = (slice(None), slice(None),
             *(slice(pads[i], pads[i] + x.shape[2 + i]) for i in range(rank)))
    pointwise = not any(pads) and all(v == 1 for v in (*kernel, *strides))

    def run(starts):
        padded = None
        if any(pads):  # this thread's work array (`parallel.scratch`), its padding zeroed once
            padded = scratch("conv padded", (min(per, n), channels, *size), x.dtype)
            for i in range(rank):
                lead = (slice(None),) * (2 + i)
                padded[(*lead, slice(0, pads[i]))] = 0
                padded[(*lead, slice(pads[i] + x.shape[2 + i], None))] = 0
        for start in starts:
            stop = min(start + per, n)
            xp = x[start:stop]
            if padded is not None:
                xp, src = padded[:stop - start], xp
                xp[inner] = src
            cols = _window_view(xp, False, kernel, strides, dilations, out)  # [m, C, *k, *out]
            if stop - start == 1:
                if pointwise:  # the input itself, no copy when it is contiguous
                    matrix = xp[0].reshape(depth, positions)
                else:  # im2col into a reused work array
                    matrix = scratch("conv columns", cols.shape[1:], y.dtype)
                    np.copyto(matrix, cols[0])
                    matrix = matrix.reshape(depth, positions)
                np.matmul(w2, matrix, out=y[start])
                if bias is not None:
                    y[start] += bias
                continue
            view = cols.transpose(order)  # [C, *k, m, *out]
            part = scratch("conv columns", view.shape, y.dtype)
            np.copyto(part, view)
            prod = w2 @ part.reshape(depth, (stop - start) * positions)  # [Cout, m * P]
            if bias is not None:
                prod += bias
            y[start:stop] = prod.reshape(cout, stop - start, positions).transpose(1, 0, 2)

    starts = list(range(0, n, per))
    if len(starts) > 1:  # the groups of samples shared among the CPUs
        with one_blas_thread():
            on_workers(run, starts)
    else:
        run(starts)
    return result


def _zero_outside(image: np.ndarray, top: int, height: int, left: int, width: int) -> None:
    """Zero image[:, r, c] outside rows [top, top + height) and columns [left, left + width)."""
    image[:, :top] = 0
    image[:, top + height:] = 0
    image[:, :, :left] = 0
    image[:, :, left + width:] = 0


def _depthwise_nchw(node, x, per_tap, b, kernel, strides, dilations, pads, out) -> np.ndarray:
    """A 2-D NCHW depthwise convolution, per_tap [k, C, M] (output channel c * M + m reads input
    channel c): [N, C * M, *out], the taps accumulated in row-major order, sample by sample
    (samples shared among the CPUs, see `parallel`).

    Each sample is padded into a buffer reused across the batch and split into its stride
    phases (phase (a, b) holds the pixels at rows a + sh * r, columns b + sw * c; with stride 1
    it is the padded image itself). Tap (i, j) reads one phase shifted by (i dh // sh,
    j dw // sw); read as one flat row per channel (width wq), output (r, c) sits at flat
    r * wq + c, so every tap is one contiguous slice and every multiply-add runs over long rows
    (the wq - wo columns computed past each output row are dropped)."""
    n, channels, height, width = x.shape
    taps, _, mult = per_tap.shape
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, strides, dilations, out
    dtype = np.result_type(x.dtype, per_tap.dtype)
    hp, wp = height + pads[0] + pads[2], width + pads[1] + pads[3]
    hq, wq = -(-hp // sh), -(-wp // sw)  # phase size
    bias = None if b is None else _float_operand(node, b, dtype, "bias").reshape(-1)
    if bias is not None and bias.size != channels * mult:
        raise ValueError(f"{node.op}: bias of {bias.size} values for {channels * mult} channels")
    bias = None if bias is None else bias.reshape(channels, mult, 1)
    y = np.empty((n, channels * mult, ho, wo), dtype)
    length = (ho - 1) * wq + wo
    weights = [per_tap[t][:, :, None] for t in range(taps)]  # [C, M, 1]
    reads = [((i * dh) % sh, (j * dw) % sw, (i * dh) // sh * wq + (j * dw) // sw)
             for i in range(kh) for j in range(kw)]  # (phase row, phase column, offset)

    def run(samples):
        # work arrays of this thread (`parallel.scratch`); only what samples do not overwrite
        # is zeroed: the padding of the image, the tail rows and columns of each phase
        buf = scratch("depthwise image", (channels, hp * wp), dtype)
        image = buf.reshape(channels, hp, wp)
        _zero_outside(image, pads[0], height, pads[1], width)
        inner = image[:, pads[0]:pads[0] + height, pads[1]:pads[1] + width]
        phases = {(0, 0): buf}
        if (sh, sw) != (1, 1):
            phases = {}
            for a, c, _ in reads:
                phase = scratch(f"depthwise phase {a} {c}", (channels, hq * wq), dtype)
                _zero_outside(phase.reshape(channels, hq, wq), 0, len(range(a, hp, sh)),
                              0, len(range(c, wp, sw)))
                phases[a, c] = phase
        acc = scratch("depthwise sum", (channels, mult, ho * wq), dtype)
        part = acc[:, :, :length]
        tmp = scratch("depthwise product", (channels, mult, length), dtype)
        for s in samples:
            inner[...] = x[s]
            if (sh, sw) != (1, 1):
                for (a, c), phase in phases.items():
                    src = image[:, a::sh, c::sw]
                    phase.reshape(channels, hq, wq)[:, :src.shape[1], :src.shape[2]] = src
            for t, (a, c, offset) in enumerate(reads):
                src = phases[a, c][:, None, offset:offset + length]
                np.multiply(src, weights[t], out=part if t == 0 else tmp)
                if t:
                    part += tmp
            if bias is not None:
                part += bias
            y[s] = acc.reshape(channels * mult, ho, wq)[:, :, :wo]

    on_workers(run, range(n))
    return y


_CHUNK_ELEMENTS = 1 << 19  # tap loops run on chunks of samples this big (cache-sized)


def _sample_chunks(n: int, per_sample: int):
    """Slices over axis 0 with about `_CHUNK_ELEMENTS` output elements each (at least one
    sample): tap-by-tap loops then stay in cache instead of streaming whole batches."""
    step = max(1, _CHUNK_ELEMENTS // max(per_sample, 1))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _depthwise_sum(xp, per_tap, nhwc, kernel, strides, dilations, out) -> np.ndarray:
    """sum over taps t of input_tap[..., c] * per_tap[t, c, m] -> channels c * M + m, the taps
    accumulated in row-major order (as TFLite's reference kernel)."""
    _, channels, mult = per_tap.shape
    rank = len(kernel)
    n = xp.shape[0]
    shape = (n, *out, channels * mult) if nhwc else (n, channels * mult, *out)
    y = np.empty(shape, dtype=np.result_type(xp.dtype, per_tap.dtype))
    if nhwc:
        weights = [per_tap[t] if mult > 1 else per_tap[t, :, 0] for t in range(len(per_tap))]
    else:
        weights = [per_tap[t].reshape(channels, mult, *[1] * rank) if mult > 1
                   else per_tap[t, :, 0].reshape(channels, *[1] * rank)
                   for t in range(len(per_tap))]
    for part in _sample_chunks(n, int(np.prod(shape[1:]))):
        acc = tmp = None
        for t, view in enumerate(_taps(xp[part], nhwc, kernel, strides, dilations, out)):
            if mult > 1:
                view = view[..., None] if nhwc else view[:, :, None]
            if acc is None:
                acc = view * weights[t]
                tmp = np.empty_like(acc)
            else:
                np.multiply(view, weights[t], out=tmp)
                acc += tmp
        y[part] = acc.reshape(y[part].shape)
    return y


@kernel("DepthwiseConv2D", context=True)
def depthwise_conv2d(node, inputs, out_dtypes, ctx=None):
    """TFLite DEPTHWISE_CONV_2D: NHWC input, weights [1, kH, kW, C * depth_multiplier], output
    channel c * M + m reads input channel c; a sum over the kH * kW taps."""
    x, w, b = inputs[0], inputs[1], _opt(inputs, 2)
    _float_input(node, x)
    if w.dtype.kind in "iu":
        raise NotImplementedError("hybrid DepthwiseConv2D (int8 weights, float input)")
    w = _float_operand(node, w, x.dtype, "weights")
    nhwc = _layout(node) == "NHWC"
    if x.ndim != 4 or w.ndim != 4 or w.shape[0] != 1:
        raise ValueError(f"DepthwiseConv2D of {x.shape} with weights {w.shape}")
    channels = x.shape[-1] if nhwc else x.shape[1]
    mult = w.shape[3] // channels if channels else 0
    declared = int(node.attrs.get("depth_multiplier", mult) or mult)
    if mult < 1 or channels * mult != w.shape[3] or declared not in (mult, 0):
        raise ValueError(f"DepthwiseConv2D: {channels} channels, weights {w.shape}")
    kernel = list(w.shape[1:3])
    axes = _spatial_axes(x.ndim, nhwc)
    spatial = [x.shape[a] for a in axes]
    strides, dilations, pads = _spatial_attrs(node, spatial, kernel)
    out = _out_sizes(spatial, kernel, strides, dilations, pads)
    xp = _pad_spatial(x, axes, pads[:2], pads[2:], 0)
    per_tap = w.reshape(kernel[0] * kernel[1], channels, mult)
    y = _depthwise_sum(xp, per_tap, nhwc, kernel, strides, dilations, out)
    _add_bias(node, y, b, -1 if nhwc else 1)
    return [_fused(node, y)]


@kernel("ConvTranspose")
def conv_transpose(node, inputs, out_dtypes):
    """ONNX ConvTranspose (NCHW, weights [C_in, C_out / group, *k]): per group one matmul
    W^T x, then each kernel tap is added into the strided output (col2im), the result cropped by
    `pads`. Output size (in - 1) * stride + output_padding + (k - 1) * dilation + 1 - pads;
    `output_shape` (or auto_pad SAME: in * stride) sets the total padding instead, split as the
    ONNX spec and onnxruntime do: the odd pixel at the end for SAME_UPPER, else at the start."""
    x, w, b = inputs[0], inputs[1], _opt(inputs, 2)
    _float_input(node, x)
    w = _float_operand(node, w, x.dtype, "weights")
    if _layout(node) != "NCHW":
        raise NotImplementedError("ConvTranspose in NHWC")
    rank = x.ndim - 2
    if rank < 1 or w.ndim != x.ndim:
        raise ValueError(f"ConvTranspose of {x.shape} with weights {w.shape}")
    n, cin = x.shape[:2]
    spatial = list(x.shape[2:])
    kernel = list(w.shape[2:])
    group = int(node.attrs.get("group", 1) or 1)
    if w.shape[0] != cin or cin % group:
        raise ValueError(f"ConvTranspose: {cin} input channels, weights {w.shape}, group {group}")
    cout_g = w.shape[1]
    strides = _ints(node.attrs.get("strides") or [1] * rank)
    dilations = _ints(node.attrs.get("dilations") or [1] * rank)
    adj = _ints(node.attrs.get("output_padding") or [0] * rank)
    auto = node.attrs.get("auto_pad") or "NOTSET"
    full = [(spatial[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 + adj[i]
            for i in range(rank)]
    target = node.attrs.get("output_shape")
    if target is not None:
        target = _ints(target)[-rank:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [spatial[i] * strides[i] for i in range(rank)]
    if target is not None:
        begins, ends = [], []
        for i in range(rank):
            total = max(full[i] - target[i], 0)
            small, large = total // 2, total - total // 2
            begins.append(small if auto == "SAME_UPPER" else large)
            ends.append(large if auto == "SAME_UPPER" else small)
        pads = begins + ends
    elif auto in ("NOTSET", "VALID"):
        pads = _ints(node.attrs.get("pads") or [0] * (2 * rank)) if auto == "NOTSET" else [0] * (2 * rank)
    else:
        raise NotImplementedError(f"auto_pad {auto}")
    if len(pads) != 2 * rank or len(strides) != rank or len(dilations) != rank or len(adj) != rank:
        raise ValueError("ConvTranspose attributes do not match the kernel rank")
    k = int(np.prod(kernel))
    p_in = int(np.prod(spatial))
    xg = x.reshape(n, group, cin // group, p_in)
    wg = w.reshape(group, cin // group, cout_g * k).transpose(0, 2, 1)  # [G, Og * k, Cg]
    cols = np.matmul(wg, xg).reshape(n, group * cout_g, *kernel, *spatial)
    y = np.zeros((n, group * cout_g, *full), dtype=x.dtype)
    for tap in itertools.product(*(range(kk) for kk in kernel)):
        index = [slice(None), slice(None)]
        for i in range(rank):
            start = tap[i] * dilations[i]
            index.append(slice(start, start + (spatial[i] - 1) * strides[i] + 1, strides[i]))
        y[tuple(index)] += cols[(slice(None), slice(None), *tap)]
    crop = [slice(None), slice(None)]
    for i in range(rank):
        size = full[i] - pads[i] - pads[rank + i]
        if size < 1:
            raise ValueError(f"ConvTranspose output of size {size}")
        crop.append(slice(pads[i], pads[i] + size))
    y = np.ascontiguousarray(y[tuple(crop)])
    _add_bias(node, y, b, 1)
    return [y]


@kernel("FullyConnected", context=True)
def fully_connected(node, inputs, out_dtypes, ctx=None):
    """TFLite FULLY_CONNECTED: x reshaped to [-1, in], y = x W^T + b with W [out, in]; the output
    keeps x's leading dims when `keep_num_dims`, else is [rows, out]; fused activation. Int8
    weights with a float input are the hybrid kernel (see `_hybrid_fc`)."""
    x, w, b = inputs[0], inputs[1], _opt(inputs, 2)
    _float_input(node, x)
    if w.ndim != 2 or not w.shape[1] or x.size % w.shape[1]:
        raise ValueError(f"FullyConnected of {x.shape} with weights {w.shape}")
    if int(node.attrs.get("weights_format", 0) or 0) != 0:
        raise NotImplementedError("FullyConnected with shuffled weights")
    x2 = x.reshape(-1, w.shape[1])
    if w.dtype.kind in "iu":
        y = _hybrid_fc(node, x2, w, b, ctx)
    else:
        y = x2 @ _float_operand(node, w, x.dtype, "weights").T
        _add_bias(node, y, b, 1)
    if node.attrs.get("keep_num_dims"):
        y = y.reshape(*x.shape[:-1], w.shape[0])
    return [_fused(node, y)]


@kernel("Gemm")
def gemm(node, inputs, out_dtypes):
    """ONNX Gemm: alpha * A' B' + beta * C, A' / B' transposed by transA / transB, C
    broadcast (unidirectionally) to [M, N]."""
    a, b, c = inputs[0], inputs[1], _opt(inputs, 2)
    _float_input(node, a)
    a = _aligned(a)
    b = _float_operand(node, b, a.dtype, "B")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"Gemm of {a.shape} and {b.shape}")
    if int(node.attrs.get("transA", 0) or 0):
        a = a.T
    if int(node.attrs.get("transB", 0) or 0):
        b = b.T
    alpha = a.dtype.type(node.attrs.get("alpha", 1.0))
    beta = a.dtype.type(node.attrs.get("beta", 1.0))
    y = a @ b
    if alpha != 1:
        y *= alpha
    if c is not None and beta != 0:
        c = _float_operand(node, c, a.dtype, "C")
        y += c * beta if beta != 1 else c
    return [y]


@kernel("MatMul")
def matmul(node, inputs, out_dtypes):
    """ONNX MatMul: numpy matmul semantics (1-D operands promoted, batch dims broadcast)."""
    a, b = inputs[0], inputs[1]
    if a.dtype != b.dtype:
        raise ValueError(f"MatMul of {a.dtype} and {b.dtype}")
    if a.dtype.kind != "f":
        raise NotImplementedError(f"MatMul of {a.dtype}")
    return [np.asarray(np.matmul(_aligned(a), _aligned(b)))]


@kernel("BatchNorm")
def batch_norm(node, inputs, out_dtypes):
    """ONNX BatchNormalization at inference, as onnxruntime computes it:
    s = scale / sqrt(var + epsilon), y = x * s + (bias - mean * s), along the channel axis
    (1 for NCHW, the last for NHWC)."""
    x = inputs[0]
    _float_input(node, x)
    if int(node.attrs.get("training_mode", 0) or 0):
        raise NotImplementedError("BatchNormalization in training mode")
    if any(o is not None for o in node.outputs[1:]):
        raise NotImplementedError("BatchNormalization with running-statistics outputs")
    scale, bias, mean, var = (_float_operand(node, a, x.dtype, "parameters").reshape(-1)
                              for a in inputs[1:5])
    eps = x.dtype.type(node.attrs.get("epsilon", 1e-5))
    s = scale / np.sqrt(var + eps)
    t = bias - mean * s
    axis = x.ndim - 1 if _layout(node) == "NHWC" else 1
    shape = [1] * x.ndim
    shape[axis] = s.size
    y = x * s.reshape(shape)
    y += t.reshape(shape)
    return [y]


@kernel("HardSigmoid")
def hard_sigmoid(node, inputs, out_dtypes):
    """max(0, min(1, alpha * x + beta)) (ONNX defaults alpha 0.2, beta 0.5)."""
    x = inputs[0]
    _float_input(node, x)
    t = x.dtype.type
    y = x * t(node.attrs.get("alpha", 0.2)) + t(node.attrs.get("beta", 0.5))
    return [np.clip(y, t(0), t(1))]


@kernel("HardSwish")
def hard_swish(node, inputs, out_dtypes):
    """x * relu6(x + 3) / 6 (TFLite's formula; onnxruntime's x * hardsigmoid(x) differs by
    float rounding only)."""
    x = inputs[0]
    _float_input(node, x)
    t = x.dtype.type
    return [x * np.clip(x + t(3), t(0), t(6)) / t(6)]


@kernel("Softmax", context=True)
def softmax(node, inputs, out_dtypes, ctx=None):
    """exp(beta * (x - max)) / sum along `axis`. TFLite (a `beta` attribute): the last axis.
    ONNX opset 13+: along `axis`; before 13 the input is flattened to 2-D at `axis` and the
    softmax runs over the whole second part (needs `ctx.onnx_opset` unless axis is the last)."""
    x = inputs[0]
    _float_input(node, x)
    beta = node.attrs.get("beta")
    if beta is not None:
        axes = (x.ndim - 1,)
    else:
        axis = _axis(int(node.attrs.get("axis", -1)), max(x.ndim, 1))
        if axis == x.ndim - 1:
            axes = (axis,)
        else:
            opset = ctx.onnx_opset if ctx is not None else None
            if opset is None:
                raise NotImplementedError("ONNX Softmax over a non-last axis needs the opset")
            axes = tuple(range(axis, x.ndim)) if opset < 13 else (axis,)
    with np.errstate(over="ignore", invalid="ignore"):
        z = x - np.max(x, axis=axes, keepdims=True)
        if beta is not None and float(beta) != 1.0:
            z *= x.dtype.type(beta)
        e = np.exp(z)
        return [e / np.sum(e, axis=axes, keepdims=True)]


def _pool(node, x, kind: str) -> np.ndarray:
    _float_input(node, x)
    nhwc = _layout(node) == "NHWC"
    axes = _spatial_axes(x.ndim, nhwc)
    rank = len(axes)
    kernel = _ints(node.attrs.get("kernel_shape") or [])
    if len(kernel) != rank:
        raise ValueError(f"{node.op}: kernel_shape {kernel} for a {x.ndim}-D input")
    spatial = [x.shape[a] for a in axes]
    strides, dilations, pads = _spatial_attrs(node, spatial, kernel, dilate_same=False)
    ceil_mode = bool(int(node.attrs.get("ceil_mode", 0) or 0))
    out = _out_sizes(spatial, kernel, strides, dilations, pads, ceil_mode)
    # the last window may run past the end padding (ceil_mode): pad that too, never counted
    extra = [max(0, (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                 - (spatial[i] + pads[i] + pads[rank + i])) for i in range(rank)]
    fill = -np.inf if kind == "max" else 0
    ends = [pads[rank + i] + extra[i] for i in range(rank)]
    shape = (x.shape[0], *out, x.shape[-1]) if nhwc else (*x.shape[:2], *out)
    acc = np.empty(shape, x.dtype)
    # chunks of samples: padding and the tap loop stay in cache, no padded copy of the batch
    for part in _sample_chunks(x.shape[0], int(np.prod(shape[1:]))):
        xp = _pad_spatial(x[part], axes, pads[:rank], ends, fill)
        a = acc[part]
        for t, view in enumerate(_taps(xp, nhwc, kernel, strides, dilations, out)):
            if t == 0:
                a[...] = view
            elif kind == "max":
                np.maximum(a, view, out=a)
            else:
                a += view
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


@kernel("MaxPool")
def max_pool(node, inputs, out_dtypes):
    """Max over each window, padding excluded (ONNX: pads, dilations, ceil_mode; TFLite: fused
    activation). The optional ONNX Indices output is not computed."""
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        raise NotImplementedError("MaxPool with an Indices output")
    return [_fused(node, _pool(node, inputs[0], "max"))]


@kernel("AveragePool")
def average_pool(node, inputs, out_dtypes):
    """Window sum / count. The count excludes padding (TFLite, whose SAME padding the reader
    made explicit, and ONNX count_include_pad=0); with count_include_pad=1 it includes the
    explicit pads but not the part of a ceil_mode window past them (onnxruntime)."""
    return [_fused(node, _pool(node, inputs[0], "avg"))]


@kernel("GlobalAveragePool")
def global_average_pool(node, inputs, out_dtypes):
    """Mean over the spatial axes, kept as size 1."""
    x = inputs[0]
    _float_input(node, x)
    axes = tuple(_spatial_axes(x.ndim, _layout(node) == "NHWC"))
    return [np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)]


def _reduce_axes(axes, ndim: int) -> tuple:
    return tuple(sorted({_axis(a, max(ndim, 1)) for a in axes}))


@kernel("Mean")
def mean(node, inputs, out_dtypes):
    """TFLite MEAN: over the axes of the constant input (negative count from the rank, repeats
    allowed), `keep_dims`."""
    x = inputs[0]
    _float_input(node, x)
    axes = _reduce_axes(_ints(inputs[1]), x.ndim)
    return [np.mean(x, axis=axes, keepdims=bool(node.attrs.get("keep_dims", False)),
                    dtype=x.dtype)]


@kernel("ReduceMean")
def reduce_mean(node, inputs, out_dtypes):
    """ONNX ReduceMean: axes from the input (opset 18+) or the attribute; none (or empty) means
    every axis, or the identity when `noop_with_empty_axes`; `keepdims` (default 1)."""
    x = inputs[0]
    _float_input(node, x)
    axes = _input_or_attr(node, inputs, 1, "axes")
    keep = bool(int(node.attrs.get("keepdims", 1)))
    if not axes:
        if int(node.attrs.get("noop_with_empty_axes", 0) or 0):
            return [x]
        axes = list(range(x.ndim))
    return [np.mean(x, axis=_reduce_axes(axes, x.ndim), keepdims=keep, dtype=x.dtype)]


@kernel("ReduceMax", "ReduceSum")
def reduce_max_sum(node, inputs, out_dtypes):
    """ONNX ReduceMax / ReduceSum (axes input or attribute, `keepdims`, empty axes as in
    ReduceMean) and TFLite REDUCE_MAX / SUM (a `keep_dims` attribute, axes input required)."""
    x = inputs[0]
    fn = np.max if node.op == "ReduceMax" else np.sum
    axes = _input_or_attr(node, inputs, 1, "axes")
    if "keep_dims" in node.attrs:  # TFLite
        keep = bool(node.attrs["keep_dims"])
    else:
        keep = bool(int(node.attrs.get("keepdims", 1)))
        if not axes:
            if int(node.attrs.get("noop_with_empty_axes", 0) or 0):
                return [x]
            axes = list(range(x.ndim))
    if axes is None:
        raise ValueError(f"{node.op} without axes")
    return [np.asarray(fn(x, axis=_reduce_axes(axes, x.ndim), keepdims=keep)).astype(x.dtype)]


@kernel("GlobalMaxPool")
def global_max_pool(node, inputs, out_dtypes):
    """Max over the spatial axes, kept as size 1."""
    x = inputs[0]
    _float_input(node, x)
    return [np.max(x, axis=tuple(_spatial_axes(x.ndim, _layout(node) == "NHWC")), keepdims=True)]


@kernel("Pad", "PadV2")
def pad(node, inputs, out_dtypes):
    """TFLite PAD / PADV2: paddings [rank, 2], zeros or the value input. ONNX Pad 11+: pads [begins..., ends...] over
    `axes` (opset 18 input; default all), optional constant value, mode constant / reflect /
    edge / wrap; negative pads crop."""
    x, pads = inputs[0], np.asarray(inputs[1])
    value = _opt(inputs, 2)
    value = x.dtype.type(0) if value is None or np.asarray(value).size == 0 else \
        np.asarray(value).reshape(-1)[0]
    if pads.ndim == 2:  # TFLite
        if pads.shape != (x.ndim, 2):
            raise ValueError(f"Pad paddings {pads.shape} for rank {x.ndim}")
        widths = [(int(b), int(e)) for b, e in pads]
        mode = "constant"
    else:
        flat = _ints(pads)
        axes = _input_or_attr(node, inputs, 3)
        axes = list(range(x.ndim)) if axes is None else [_axis(a, x.ndim) for a in axes]
        if len(flat) != 2 * len(axes):
            raise ValueError(f"Pad pads {flat} for axes {axes}")
        widths = [(0, 0)] * x.ndim
        for i, a in enumerate(axes):
            widths[a] = (flat[i], flat[len(axes) + i])
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


@kernel("Dropout")
def dropout(node, inputs, out_dtypes):
    """Inference: the identity; the optional mask output is all true."""
    training = _opt(inputs, 2)
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        raise NotImplementedError("Dropout in training mode")
    x = inputs[0]
    outs = [x]
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        outs.append(np.ones(x.shape, dtype=bool))
    return outs


# -- quantize / dequantize ----------------------------------------------------------------------
def _per_axis(values: np.ndarray, ndim: int, axis: int | None) -> np.ndarray:
    """Per-tensor (one value) or per-axis parameters shaped to broadcast against rank `ndim`."""
    values = np.asarray(values).reshape(-1)
    if values.size == 1 or axis is None:
        if values.size != 1:
            raise ValueError(f"{values.size} quantization parameters without an axis")
        return values.reshape(())
    shape = [1] * ndim
    shape[_axis(axis, ndim)] = values.size
    return values.reshape(shape)


def _quant_arrays(q, ndim: int):
    """(scale, zero point) arrays of TFLite QuantParams `q`, broadcastable against rank `ndim`."""
    if q is None or q.scale.size == 0:
        raise ValueError("tensor has no quantization scale")
    axis = q.axis if q.scale.size > 1 else None
    zero = q.zero_point if q.zero_point.size == q.scale.size else np.full(q.scale.size, q.zero_point[0])
    return _per_axis(q.scale, ndim, axis), _per_axis(zero, ndim, axis)


def _saturate(values: np.ndarray, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


def _quantize_blocks(x: np.ndarray, s, z, dtype) -> np.ndarray:
    """saturate(rint(x / s) + z) with per-tensor float32 s and z, span by span (`parallel`):
    each span's chain of ops runs in cache instead of streaming the tensor through memory five
    times, and the spans are shared among the CPUs."""
    info = np.iinfo(dtype)
    out = np.empty(x.shape, dtype)
    src, dst = x.reshape(-1), out.reshape(-1)

    def run(parts):
        tmp = np.empty(min(SPAN, src.size), np.float32)
        for i, j in parts:
            t = tmp[:j - i]
            np.divide(src[i:j], s, out=t)
            np.rint(t, out=t)
            if z:
                t += z
            np.clip(t, info.min, info.max, out=t)
            dst[i:j] = t

    on_workers(run, spans(src.size))
    return out


def fake_quantize(x: np.ndarray, scale: np.ndarray, zero: np.ndarray,
                  out: np.ndarray | None = None, error: list | None = None) -> np.ndarray:
    """DequantizeLinear(QuantizeLinear(x, s, z), s, z) with per-tensor float32 s and an int8 /
    uint8 z, at once: clip(rint(x / s), qmin - z, qmax - z) * s. Bit for bit the two kernels'
    result (the integers are exact in float32; beyond 2**24 both saturate), without the
    integer tensor; span by span on every CPU. `out` (a C-contiguous float32 array of x's
    shape, possibly x itself) receives the result. With `error` (a list), appends
    (sum x^2, sum (x - result)^2), measured span by span while x is still there (float32
    within a span, float64 across, in span order)."""
    if x.dtype != np.float32 or not x.ndim:
        raise NotImplementedError("fused QuantizeLinear / DequantizeLinear of a non-float32 tensor")
    s = np.float32(np.asarray(scale).reshape(-1)[0])
    info = np.iinfo(np.asarray(zero).dtype)
    z = float(np.asarray(zero).reshape(-1)[0])
    lo, hi = np.float32(info.min - z), np.float32(info.max - z)
    out = np.empty(x.shape, np.float32) if out is None else out
    src, dst = x.reshape(-1), out.reshape(-1)
    parts = spans(src.size)
    sums = np.zeros((len(parts), 2)) if error is not None else None
    staged = sums is not None and np.may_share_memory(x, out)  # x is needed after the span

    def run(items):
        size = min(SPAN, src.size)
        buf = np.empty(size, np.float32) if staged else None
        diff = np.empty(size, np.float32) if sums is not None else None
        for k, (i, j) in items:
            t = buf[:j - i] if staged else dst[i:j]
            np.divide(src[i:j], s, out=t)
            np.rint(t, out=t)
            np.clip(t, lo, hi, out=t)
            t *= s
            if sums is not None:
                d = np.subtract(src[i:j], t, out=diff[:j - i])
                sums[k] = np.dot(src[i:j], src[i:j]), np.dot(d, d)
            if staged:
                dst[i:j] = t

    on_workers(run, enumerate(parts))
    if error is not None:
        total = sums.sum(axis=0)
        error.append((float(total[0]), float(total[1])))
    return out


def _dequantize_blocks(q: np.ndarray, s, z) -> np.ndarray:
    """(q - z) * s in float32 with per-tensor s and z, span by span (see `_quantize_blocks`)."""
    out = np.empty(q.shape, np.float32)
    src, dst = q.reshape(-1), out.reshape(-1)

    def run(parts):
        for i, j in parts:
            d = dst[i:j]
            d[...] = src[i:j]
            d -= z
            d *= s

    on_workers(run, spans(src.size))
    return out


@kernel("Quantize", context=True)
def quantize(node, inputs, out_dtypes, ctx=None):
    """ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point), per tensor or
    along `axis`; the output type is the zero point's, else `output_dtype`, else uint8.
    TFLite QUANTIZE (float input): clamp(round_half_away(x / scale) + zero_point) with the
    output tensor's quantization (`ctx.output_quant[0]`), float32 division as TFLite's reference
    kernel. Requantizing TFLite QUANTIZE (integer input) is integer arithmetic: refused."""
    x = inputs[0]
    _float_input(node, x)
    scale = _opt(inputs, 1)
    if scale is not None:  # ONNX
        if int(node.attrs.get("block_size", 0) or 0):
            raise NotImplementedError("blocked QuantizeLinear")
        zero = _opt(inputs, 2)
        if zero is not None:
            dtype = zero.dtype
        else:
            code = int(node.attrs.get("output_dtype", 0) or 0)
            name = ONNX_TO_IR.get(code, "unknown") if code else "uint8"
            if name not in ("int8", "uint8", "int16", "uint16", "int32"):
                raise NotImplementedError(f"QuantizeLinear to {name}")
            dtype = np.dtype(name)
            zero = np.zeros(np.asarray(scale).size, dtype)
        if dtype.kind not in "iu":
            raise NotImplementedError(f"QuantizeLinear to {dtype}")
        axis = int(node.attrs.get("axis", 1))
        s = _per_axis(scale, x.ndim, axis).astype(x.dtype)
        if dtype.itemsize <= 2 and x.dtype == np.float32 and x.ndim:
            # in float32: rint(x / s) + z is exact below 2**24, and beyond that far outside
            # the 8 / 16-bit range, where saturation gives the same result
            z = _per_axis(zero, x.ndim, axis).astype(np.float32)
            info = np.iinfo(dtype)
            if s.ndim == 0 or s.size == 1:
                return [_quantize_blocks(x, s.reshape(()), z.reshape(()), dtype)]
            y = np.divide(x, s)
            np.rint(y, out=y)
            if np.any(z):
                y += z
            np.clip(y, info.min, info.max, out=y)
            return [y.astype(dtype)]
        z = _per_axis(zero, x.ndim, axis).astype(np.float64)
        return [_saturate(np.rint(x / s).astype(np.float64) + z, dtype)]
    q = ctx.out_quant(0) if ctx is not None else None
    if q is None:
        raise NotImplementedError("TFLite Quantize needs its output's quantization parameters")
    dtype = np.dtype(out_dtypes[0]) if out_dtypes and out_dtypes[0] else np.dtype(np.int8)
    s, z = _quant_arrays(q, x.ndim)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = round_half_away(x / s.astype(np.float32)).astype(np.float64)
    return [_saturate(v + z, dtype)]


@kernel("Dequantize", context=True)
def dequantize(node, inputs, out_dtypes, ctx=None):
    """ONNX DequantizeLinear: (x - zero_point) * scale in the scale's type, per tensor or along
    `axis`. TFLite DEQUANTIZE: float16 -> float32, or (q - zero_point) * scale with the input
    tensor's quantization (`ctx.input_quant[0]`)."""
    x = inputs[0]
    scale = _opt(inputs, 1)
    if scale is not None:  # ONNX
        if int(node.attrs.get("block_size", 0) or 0):
            raise NotImplementedError("blocked DequantizeLinear")
        if x.dtype.kind not in "iu":
            raise NotImplementedError(f"DequantizeLinear of {x.dtype}")
        axis = int(node.attrs.get("axis", 1))
        s = _per_axis(scale, x.ndim, axis)
        zero = _opt(inputs, 2)
        if x.dtype.itemsize <= 2 and s.dtype == np.float32:
            # x - z of 8 / 16-bit integers is exact in float32: same result, no int64 copies
            z = np.float32(0) if zero is None else _per_axis(zero, x.ndim, axis).astype(np.float32)
            if x.ndim and s.size == 1 and z.size == 1:
                return [_dequantize_blocks(x, s.reshape(()), z.reshape(()))]
            y = x.astype(np.float32)
            if np.any(z):
                y -= z
            y *= s
            return [y]
        z = 0 if zero is None else _per_axis(zero, x.ndim, axis).astype(np.int64)
        return [(x.astype(np.int64) - z).astype(s.dtype) * s]
    if x.dtype.kind == "f":
        return [x.astype(out_dtypes[0] if out_dtypes and out_dtypes[0] else np.float32)]
    q = ctx.in_quant(0) if ctx is not None else None
    if q is None:
        raise NotImplementedError("TFLite Dequantize needs its input's quantization parameters")
    s, z = _quant_arrays(q, x.ndim)
    return [(x.astype(np.int64) - z).astype(np.float32) * s.astype(np.float32)]


# -- TFLite hybrid kernels (int8 weights, float activations) --------------------------------------
# Dynamic-range quantization leaves float activations and int8 weights; TFLite then quantizes
# each batch entry of the input on the fly and multiplies in integers. Reproduced here exactly
# (LiteRT, reference op resolver), since the result differs from float math by about 1%:
# - symmetric (per-tensor weights): range = max|x_b|, s_b = range / 127,
#   q = clamp(round(x * (127 / range)), -127, 127); out = float(acc) * (s_b * s_w) + bias;
# - asymmetric (per-channel Conv2D weights; FC with asymmetric_quantize_inputs): TFLite's
#   AsymmetricQuantizeFloats (scale and zero point in double, nudged zero point),
#   out = float(acc - zp_b * rowsum(W)) * scale + bias.
def _symmetric_quantize(x2: np.ndarray):
    """Per row of x2 (rows = batch entries): int8 values (as float64) and float32 scales."""
    lo, hi = x2.min(axis=1), x2.max(axis=1)
    rng = np.maximum(np.abs(lo), np.abs(hi)).astype(np.float32)
    zero = rng == 0
    safe = np.where(zero, np.float32(1), rng)
    scale = np.where(zero, np.float32(1), safe / np.float32(127)).astype(np.float32)
    inv = (np.float32(127) / safe).astype(np.float32)
    q = round_half_away((x2 * inv[:, None]).astype(np.float32)).astype(np.float64)
    q = np.clip(q, -127, 127)
    q[zero] = 0
    return q, scale


def _asymmetric_quantize(x2: np.ndarray):
    """Per row: int8 values (float64), float32 scales and int zero points (TFLite's
    AsymmetricQuantizeFloats)."""
    rmin = np.minimum(x2.min(axis=1), 0).astype(np.float64)
    rmax = np.maximum(x2.max(axis=1), 0).astype(np.float64)
    same = rmin == rmax
    scale = np.where(same, 1.0, (rmax - rmin) / 255.0)
    zp_min = -128.0 - rmin / scale
    zp_max = 127.0 - rmax / scale
    err_min = 128.0 + np.abs(rmin / scale)
    err_max = 127.0 + np.abs(rmax / scale)
    zp = np.where(err_min < err_max, zp_min, zp_max)
    zp = np.where(zp <= -128, -128, np.where(zp >= 127, 127, round_half_away(zp)))
    zp = np.where(same, 0, zp).astype(np.int64)
    scale32 = np.where(same, 1.0, scale).astype(np.float32)
    inv = (1.0 / scale32.astype(np.float64)).astype(np.float32)
    v = (zp.astype(np.float32)[:, None] + (x2 * inv[:, None]).astype(np.float32)).astype(np.float32)
    q = np.clip(round_half_away(v).astype(np.float64), -128, 127)
    q[same] = 0
    return q, scale32, zp


def _weight_scales(node, ctx, index: int = 1):
    q = ctx.in_quant(index) if ctx is not None else None
    if q is None or q.scale.size == 0:
        raise NotImplementedError(f"{node.op} with integer weights but no quantization "
                                  "parameters for them")
    if np.any(q.zero_point != 0):
        raise NotImplementedError(f"hybrid {node.op} with non-zero weight zero points")
    return q.scale.astype(np.float32)


def _hybrid_conv(node, x, w, b, ctx, kernel, strides, dilations, pads, out, group):
    """TFLite CONV_2D with int8 OHWI weights and a float NHWC input."""
    if _layout(node) != "NHWC" or w.dtype != np.int8 or group != 1:
        raise NotImplementedError("hybrid Conv2D other than TFLite NHWC, int8, group 1")
    if any(d != 1 for d in dilations):
        raise NotImplementedError("hybrid Conv2D with dilation (TFLite ignores it)")
    scales = _weight_scales(node, ctx)
    n, cout = x.shape[0], w.shape[0]
    x2 = x.reshape(n, -1)
    per_channel = scales.size > 1 and np.any(scales != scales[0])
    if per_channel:
        q, s_in, zp = _asymmetric_quantize(x2)
    else:
        q, s_in = _symmetric_quantize(x2)
    qx = q.reshape(x.shape)
    if per_channel:  # TFLite skips padding taps: pad (q - zp) with zeros
        qx = qx - zp.reshape(-1, 1, 1, 1)
    xp = _pad_spatial(qx, [1, 2], pads[:2], pads[2:], 0)
    cols = _window_view(xp, True, kernel, strides, dilations, out).reshape(-1, w[0].size)
    acc = (cols @ w.reshape(cout, -1).T.astype(np.float64)).reshape(n, -1, cout)
    acc = acc.astype(np.int32).astype(np.float32)
    if per_channel:  # reference: acc * per_channel_scale * input_scale, left to right
        y = (acc * scales) * s_in[:, None, None]
    else:
        y = acc * (s_in * scales[0]).astype(np.float32)[:, None, None]
    y = y.astype(np.float32).reshape(n, *out, cout)
    if b is not None:
        y += b.astype(np.float32).reshape(-1)
    return y


def _hybrid_fc(node, x2, w, b, ctx):
    """TFLite FULLY_CONNECTED with int8 weights [out, in] and float input rows x2."""
    if w.dtype != np.int8:
        raise NotImplementedError(f"hybrid FullyConnected with {w.dtype} weights")
    scales = _weight_scales(node, ctx)
    w64 = w.astype(np.float64)
    if node.attrs.get("asymmetric_quantize_inputs"):
        q, s_in, zp = _asymmetric_quantize(x2)
        acc = q @ w64.T - zp[:, None] * w64.sum(axis=1)[None, :]
    else:
        q, s_in = _symmetric_quantize(x2)
        acc = q @ w64.T
    acc = acc.astype(np.int32).astype(np.float32)
    if scales.size > 1:
        y = acc * (s_in[:, None] * scales[None, :]).astype(np.float32)
    else:
        y = acc * (s_in * scales[0]).astype(np.float32)[:, None]
    y = y.astype(np.float32)
    if b is not None:
        y = b.astype(np.float32).reshape(1, -1) + y
    return y


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
    steps = _ints(inputs[3]) if _opt(inputs, 3) is not None else [1] * len(begin)
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


@kernel("Pack")
def _pack(node, inputs, out_dtypes):
    """TFLite PACK: stack the inputs along `axis` (negative counts from the output rank)."""
    axis = int(node.attrs.get("axis", 0) or 0)
    return [np.stack(inputs, axis=_axis(axis, inputs[0].ndim + 1))]


# the kernels of the transformer-era activation / normalization / attention ops live apart
from . import float_kernels_math as _float_kernels_math  # noqa: E402,F401  (registers them)
from . import float_kernels_spatial as _spatial_kernels  # noqa: E402,F401  (resize, split...)
