"""Sliding-window geometry shared by the float convolutions and pools: spatial axes,
strides / dilations / pads (resolving an `auto_pad` left by the reader), output sizes, padding,
the read-only im2col view and the per-tap views, and chunking of samples to stay in cache.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from qconvert.padding import same_pads

from .float_kernels_base import _ints


def spatial_axes(ndim: int, nhwc: bool) -> list:
    return list(range(1, ndim - 1)) if nhwc else list(range(2, ndim))


def spatial_attrs(node, spatial: tuple, kernel: list, dilate_same: bool = True):
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


def out_sizes(spatial, kernel, strides, dilations, pads, ceil_mode: bool = False) -> list:
    rank = len(kernel)
    sizes = []
    for i in range(rank):
        span = spatial[i] + pads[i] + pads[rank + i] - ((kernel[i] - 1) * dilations[i] + 1)
        if span < 0:
            raise ValueError(f"kernel {kernel} larger than the padded input {list(spatial)}")
        n = -(-span // strides[i]) if ceil_mode else span // strides[i]
        sizes.append(n + 1)
    return sizes


def pad_spatial(x, axes, begins, ends, value) -> np.ndarray:
    if not any(begins) and not any(ends):
        return x
    width = [(0, 0)] * x.ndim
    for a, b, e in zip(axes, begins, ends):
        width[a] = (b, e)
    return np.pad(x, width, constant_values=value)


def padded_scratch(x, axes, begins, ends, value, key: str | None) -> np.ndarray:
    """`x` padded on its spatial `axes` (`begins`, `ends`) with `value`, like `pad_spatial`
    (without its passes over the interior), in a work array of the calling thread kept under
    `key` (`parallel.scratch`: no fresh memory per call, valid until this thread asks for
    `key` again) or, with `key` None, in a new array; `x` itself when there is no padding."""
    from .parallel import scratch

    if not any(begins) and not any(ends):
        return x
    shape = list(x.shape)
    for a, b, e in zip(axes, begins, ends):
        shape[a] += b + e
    out = np.empty(shape, x.dtype) if key is None else scratch(key, tuple(shape), x.dtype)
    inner = [slice(None)] * x.ndim
    for a, b, e in zip(axes, begins, ends):
        inner[a] = slice(b, b + x.shape[a])
        edge = [slice(None)] * x.ndim
        edge[a] = slice(0, b)
        out[tuple(edge)] = value
        edge[a] = slice(b + x.shape[a], None)
        out[tuple(edge)] = value
    out[tuple(inner)] = x
    return out


def window_view(xp, nhwc, kernel, strides, dilations, out) -> np.ndarray:
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


def window_taps(xp, nhwc, kernel, strides, dilations, out):
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


_CHUNK_ELEMENTS = 1 << 19  # tap loops run on chunks of samples this big (cache-sized)


def sample_chunks(n: int, per_sample: int):
    """Slices over axis 0 with about `_CHUNK_ELEMENTS` output elements each (at least one
    sample): tap-by-tap loops then stay in cache instead of streaming whole batches."""
    step = max(1, _CHUNK_ELEMENTS // max(per_sample, 1))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]
