"""Index arithmetic for whole-model C: which input bytes each output element reads.

- `conv_minread`: the lowest input index each output element of a convolution, depthwise
  convolution or pool reads (walked in memory order), for the memory plan's overlap rule.
- `movement_map`: the output of a data-movement op (Transpose, StridedSlice, Gather, Pad,
  Concat) as source-tagged input indices, computed by running qconvert's own integer kernel
  (bit-exact with TFLite Micro) on index arrays instead of values, so the C code moves exactly
  what TFLite Micro moves.
- `boxes_of`: that map as strided box copies (`qconvert_copy_box_s8`), with a fill value for
  padding; `merged`: a box with its contiguous axes merged (fewer loop levels in C).

Vectorized numpy throughout; nothing loops over elements in Python.
"""

from __future__ import annotations

import numpy as np

SOURCE_BITS = 40
MAX_RANK = 6
NEVER = np.iinfo(np.int64).max


def contiguous_strides(shape) -> list:
    """Row-major element strides of `shape`."""
    strides, step = [], 1
    for d in reversed(list(shape)):
        strides.append(step)
        step *= int(d)
    return strides[::-1]


def conv_minread(in_shape, out_shape, kernel_hw, strides, dilations, pads,
                 channel_from_output) -> np.ndarray:
    """Lowest input index each output element reads (NEVER for an all-padding window).

    `channel_from_output(oc)` gives the input channel offset added for output channel oc (0
    for a convolution, which reads every input channel; oc // multiplier for depthwise)."""
    n, h, w, c = (int(d) for d in in_shape)
    _, oh, ow, oc = (int(d) for d in out_shape)
    (kh, kw), (sh, sw), (dh, dw) = kernel_hw, strides, dilations

    def first(o_count, stride, pad, dil, k, size):
        start = np.arange(o_count) * stride - pad
        kmin = np.maximum(0, (-start + dil - 1) // dil)
        pos = start + kmin * dil
        return pos, (kmin < k) & (pos < size) & (pos >= 0)

    y, yok = first(oh, sh, pads[0], dh, kh, h)
    x, xok = first(ow, sw, pads[1], dw, kw, w)
    base = (y[:, None] * w + x[None, :]) * c
    base = np.where(yok[:, None] & xok[None, :], base, NEVER)
    chan = np.asarray(channel_from_output(np.arange(oc)), dtype=np.int64)
    per_image = np.where(base[:, :, None] == NEVER, NEVER, base[:, :, None] + chan[None, None, :])
    batch = np.arange(n, dtype=np.int64)[:, None, None, None] * (h * w * c)
    return np.where(per_image[None] == NEVER, NEVER, per_image[None] + batch).reshape(-1)


def tagged(array_shape, source: int) -> np.ndarray:
    """Indices 0..size-1 of an input of `array_shape`, tagged with its source number."""
    size = int(np.prod(array_shape, dtype=np.int64))
    return (np.arange(size, dtype=np.int64) + (int(source) << SOURCE_BITS)).reshape(array_shape)


def boxes_of(index_map: np.ndarray):
    """(boxes, fill, table): `boxes` is [(source, box dict)] covering every element that comes
    from an input, `fill` is True when some elements are padding (-1); or, when the map is not
    made of strided boxes, `boxes` is None and `table` the flat input index of every element
    (single source, no padding). Box dicts: shape, in_strides, out_strides, in_base, out_base."""
    m = np.asarray(index_map, dtype=np.int64)
    shape = m.shape if m.ndim else (1,)
    m = m.reshape(shape)
    flat = m.reshape(-1)
    fill = bool(np.any(flat < 0))
    src = np.where(flat < 0, -1, flat >> SOURCE_BITS)
    idx = np.where(flat < 0, -1, flat & ((1 << SOURCE_BITS) - 1))
    out_strides = contiguous_strides(shape)
    boxes = []
    for s in np.unique(src[src >= 0]).tolist():
        where = np.nonzero((src == s).reshape(shape))
        lo = [int(a.min()) for a in where]
        hi = [int(a.max()) + 1 for a in where]
        box_shape = [b - a for a, b in zip(lo, hi)]
        if int(np.prod(box_shape)) != where[0].size:
            return _table(src, idx, fill)
        sub = idx.reshape(shape)[tuple(slice(a, b) for a, b in zip(lo, hi))]
        base = int(sub.reshape(-1)[0])
        strides = []
        for k, d in enumerate(box_shape):
            if d > 1:
                probe = [0] * len(box_shape)
                probe[k] = 1
                strides.append(int(sub[tuple(probe)]) - base)
            else:
                strides.append(0)
        grid = np.indices(box_shape, dtype=np.int64)
        expect = base + np.tensordot(np.asarray(strides, dtype=np.int64), grid, axes=1) \
            if box_shape else np.int64(base)
        if not np.array_equal(sub, expect):
            return _table(src, idx, fill)
        out_base = int(np.dot(lo, out_strides)) if lo else 0
        boxes.append((int(s), merged(box_shape, strides, out_strides, base, out_base)))
    return boxes, fill, None


def _table(src, idx, fill):
    if fill or np.unique(src).size != 1:
        return None, fill, None
    return None, False, idx


def merged(shape, in_strides, out_strides, in_base=0, out_base=0) -> dict:
    """A box with size-1 axes dropped and contiguous neighbours merged (rank <= MAX_RANK
    when possible; the caller checks)."""
    dims = [(int(d), int(a), int(b)) for d, a, b in zip(shape, in_strides, out_strides) if d != 1]
    out: list = []
    for d, a, b in dims:
        if out and out[-1][1] == a * d and out[-1][2] == b * d:
            pd, _, _ = out[-1]
            out[-1] = (pd * d, a, b)
        else:
            out.append((d, a, b))
    if not out:
        out = [(1, 0, 0)]
    return {"shape": [d for d, _, _ in out], "in_strides": [a for _, a, _ in out],
            "out_strides": [b for _, _, b in out], "in_base": int(in_base),
            "out_base": int(out_base)}


def broadcast_strides(in_shape, out_shape) -> list:
    """Element strides of an input broadcast to `out_shape` (0 along broadcast axes)."""
    rank = len(out_shape)
    padded = [1] * (rank - len(in_shape)) + [int(d) for d in in_shape]
    strides = contiguous_strides(padded)
    return [0 if p == 1 and int(o) != 1 else s for p, o, s in zip(padded, out_shape, strides)]
