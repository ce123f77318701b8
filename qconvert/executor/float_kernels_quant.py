"""Float kernels of Quantize and Dequantize (ONNX QuantizeLinear / DequantizeLinear, TFLite
QUANTIZE / DEQUANTIZE) and `fake_quantize`, the two fused for the float executor. Registered
into `float_kernels.KERNELS` (same contract: see that module's docstring).
"""

from __future__ import annotations

import numpy as np

from qconvert import schemas
from qconvert.schemas.ops import HALF_AWAY
from qconvert.int8.rounding import round_half_away

from .float_kernels_base import _axis, float_input, optional_input, kernel
from .parallel import SPAN, on_workers, spans


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




def _implied_slots() -> dict:
    """{IR op: ((input position, "input" / "output", field), ...)} of `Input.from_quantization`."""
    table = {}
    for schema in schemas.all_schemas():
        slots = tuple((i, slot.from_quantization, slot.name) for i, slot in enumerate(schema.inputs)
                      if slot.from_quantization)
        if slots:
            table[schema.name] = slots
    return table


IMPLIED_SLOTS = _implied_slots()


def implied_inputs(graph, node, inputs: list) -> list:
    """`inputs` of `node` with the parameters its op keeps in a tensor's quantization
    (`Input.from_quantization`: TFLite QUANTIZE / DEQUANTIZE) given as inputs, as ONNX spells
    them: the scale in float32, the zero point in the quantized tensor's type, per tensor or
    one per channel (the node's `axis` must be the tensor's quantized dimension). A node that
    has any of those parameters as an input, or whose tensor is not quantized, is left as it
    is (its kernel refuses a missing scale)."""
    slots = IMPLIED_SLOTS.get(node.op)
    if slots is None or node.opaque or any(i < len(inputs) and inputs[i] is not None
                                           for i, _, _ in slots):
        return inputs
    side = slots[0][1]
    name = (node.outputs if side == "output" else node.inputs)[0]
    t = graph.tensors[name] if name is not None else None
    q = None if t is None else t.quant
    if q is None or q.scale.size == 0:
        return inputs
    rank = len(t.shape) if t.shape is not None else 1 << 30
    if q.scale.size > 1 and (q.axis is None or _axis(int(node.attrs.get("axis", 1)), rank)
                             != _axis(int(q.axis), rank)):
        raise ValueError(f"{node.op} along axis {node.attrs.get('axis', 1)} of a tensor "
                         f"quantized along {q.axis}")
    dtype = np.dtype(t.dtype) if t.dtype in ("int8", "uint8", "int16", "uint16", "int32") \
        else np.dtype(np.int8)
    zero = q.zero_point if q.zero_point.size == q.scale.size else \
        np.full(q.scale.size, q.zero_point.reshape(-1)[0])
    values = {"scale": np.asarray(q.scale, np.float32).reshape(-1),
              "zero_point": np.asarray(zero).reshape(-1).astype(dtype)}
    if q.scale.size == 1:
        values = {k: v.reshape(()) for k, v in values.items()}
    inputs = list(inputs) + [None] * (max(i for i, _, _ in slots) + 1 - len(inputs))
    for i, _, field in slots:
        inputs[i] = values[field]
    return inputs


@kernel("Quantize")
def quantize(node, inputs, out_dtypes):
    """saturate(round(x / scale) + zero_point), per tensor or along `axis`; the output type is
    the zero point's, else `output_dtype`, else uint8. `rounding`: half to even (ONNX
    QuantizeLinear: absent) or half away from zero (TFLite QUANTIZE, dividing in float32 as
    its reference kernel). A TFLite node's scale and zero point are its output's quantization,
    given as inputs by the executor (`implied_inputs`). An integer input (TFLite's
    requantizing QUANTIZE) is integer arithmetic: refused."""
    x = inputs[0]
    float_input(node, x)
    scale = optional_input(inputs, 1)
    if scale is None:
        raise NotImplementedError("Quantize without a scale (input or output quantization)")
    if int(node.attrs.get("block_size", 0) or 0):
        raise NotImplementedError("blocked QuantizeLinear")
    zero = optional_input(inputs, 2)
    if zero is not None:
        dtype = zero.dtype
    else:
        name = node.attrs.get("output_dtype") or "uint8"  # an IR dtype name
        if name not in ("int8", "uint8", "int16", "uint16", "int32"):
            raise NotImplementedError(f"QuantizeLinear to {name}")
        dtype = np.dtype(name)
        zero = np.zeros(np.asarray(scale).size, dtype)
    if dtype.kind not in "iu":
        raise NotImplementedError(f"QuantizeLinear to {dtype}")
    axis = int(node.attrs.get("axis", 1))
    rounding = node.attrs.get("rounding")
    if rounding == HALF_AWAY:
        s = _per_axis(scale, x.ndim, axis).astype(np.float32)
        z = _per_axis(zero, x.ndim, axis).astype(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = round_half_away(x / s).astype(np.float64)
        return [_saturate(v + z, dtype)]
    if rounding is not None:
        raise NotImplementedError(f"Quantize rounding {rounding}")
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


@kernel("Dequantize")
def dequantize(node, inputs, out_dtypes):
    """(x - zero_point) * scale in the scale's type, per tensor or along `axis` (a TFLite node's
    scale and zero point are its input's quantization, given as inputs by the executor:
    `implied_inputs`). A float input (TFLite DEQUANTIZE of float16) is cast to the output
    type."""
    x = inputs[0]
    if x.dtype.kind == "f":
        return [x.astype(out_dtypes[0] if out_dtypes and out_dtypes[0] else np.float32)]
    scale = optional_input(inputs, 1)
    if scale is None:
        raise NotImplementedError("Dequantize without a scale (input or input quantization)")
    if int(node.attrs.get("block_size", 0) or 0):
        raise NotImplementedError("blocked DequantizeLinear")
    if x.dtype.kind not in "iu":
        raise NotImplementedError(f"DequantizeLinear of {x.dtype}")
    axis = int(node.attrs.get("axis", 1))
    s = _per_axis(scale, x.ndim, axis)
    zero = optional_input(inputs, 2)
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
