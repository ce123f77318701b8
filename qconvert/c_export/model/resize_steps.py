"""ResizeNearest as per-row and per-column source indices: the lowering of
`qconvert_resize_nearest` (kernels/qconvert_nn_resize.c).

TFLite's RESIZE_NEAREST_NEIGHBOR picks, for output pixel (b, y, x), input pixel
(b, rows[y], cols[x]) and copies its channels. The generic data-movement lowering
(`model_steps._lower_movement`) cannot say that as box copies and falls back to a gather with
one int32 index per output element (a U-Net's x2 upsampling: 128 KB of flash); here the step
keeps only `rows` (out_h entries) and `cols` (out_w entries). Both are read off the index map
of qconvert's own integer kernel (bit-exact with TFLite Micro, align_corners and
half_pixel_centers included), and the map is checked to be exactly that separable pick before
the kernel is used; otherwise (never for a 4-D NHWC resize, but the check keeps it honest) the
generic lowering stays. int8 and int16 alike: the kernel copies `channels x element size`
bytes per pixel.

The kernel writes its output in memory order, each output element after reading the input
element it copies (or copying an earlier output row), so it offers the memory plan the same
`("reads", slot, minread)` overlap as a single gather (`movement_overlap`).
"""

from __future__ import annotations

import numpy as np

from .index_maps import SOURCE_BITS
from .steps import _acts, _lower_movement, _movement_maps, _plain, activation_of, tensor_dims
from .movement_overlap import movement_overlap

RESIZE_FILES = frozenset({"qconvert_nn_resize.h", "qconvert_nn_resize.c"})


def separable_pick(index_map: np.ndarray, in_dims) -> tuple | None:
    """(rows, cols) when the (n, oh, ow, c) source-tagged `index_map` copies, for every
    output pixel (b, y, x), all channels of input pixel (b, rows[y], cols[x]) of the one input
    of NHWC shape `in_dims` (source 0); else None."""
    m = np.asarray(index_map, dtype=np.int64)
    if m.ndim != 4 or len(in_dims) != 4 or m.size == 0 or np.any(m < 0) or \
            np.any(m >> SOURCE_BITS):
        return None
    n, h, w, c = (int(d) for d in in_dims)
    if m.shape[0] != n or m.shape[3] != c:
        return None
    rows = m[0, :, 0, 0] // (w * c)
    cols = (m[0, 0, :, 0] // c) % w
    expect = (np.arange(n, dtype=np.int64)[:, None, None, None] * (h * w * c)
              + rows[None, :, None, None] * (w * c) + cols[None, None, :, None] * c
              + np.arange(c, dtype=np.int64)[None, None, None, :])
    if not np.array_equal(m, expect):
        return None
    return rows, cols


def lower_resize_nearest(graph, node, index, options):
    """ResizeNearest of an activation -> one `qconvert_resize_nearest` call (see the module
    docstring); anything else -> the generic data-movement lowering."""
    acts = _acts(graph, node)
    if graph.tensors[node.inputs[0]].data is not None or len(node.outputs) != 1:
        return _lower_movement(graph, node, index, options)
    index_map = _movement_maps(graph, node)[0]
    in_dims = tensor_dims(graph, node.inputs[0])
    pick = separable_pick(index_map, in_dims)
    if pick is None:
        return _lower_movement(graph, node, index, options)
    rows, cols = pick
    act = activation_of(graph, node)
    n, h, w, c = in_dims
    arrays = [("rows", "int32_t", rows), ("cols", "int32_t", cols)]
    values = [n, h, w, len(rows), len(cols), c * act.bits // 8, "@L_rows", "@L_cols"]
    decls = ["static const qconvert_resize_nearest_params @L_params = {"
             + ", ".join(str(v) for v in values) + "};"]
    overlap = movement_overlap(graph, node, index_map, None, False, act, acts)
    return _plain(graph, node, index, "qconvert_resize_nearest($in0, $out0, &@L_params);",
                  arrays, decls, RESIZE_FILES, overlap)


RESIZE_LOWERINGS = {"ResizeNearest": lower_resize_nearest}
