"""Float kernels of Quantize and Dequantize (ONNX QuantizeLinear / DequantizeLinear, TFLite
QUANTIZE / DEQUANTIZE) and `fake_quantize`, the two fused for the float executor. Registered
into `float_kernels.KERNELS` (same contract: see that module's docstring).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.rounding import round_half_away

from .float_kernels_base import _axis, _float_input, _opt, kernel
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
            name = node.attrs.get("output_dtype") or "uint8"  # an IR dtype name
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
