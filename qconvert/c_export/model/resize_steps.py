"""The resizes as C kernel calls: ResizeNearest as per-row and per-column source indices (the
lowering of `qconvert_resize_nearest`, kernels/qconvert_nn_resize.c), ResizeBilinear as
qconvert_resize_bilinear_s8 with its tap tables (`lower_resize_bilinear`).

TFLite's RESIZE_NEAREST_NEIGHBOR picks, for output pixel (b, y, x), input pixel
(b, rows[y], cols[x]) and copies its channels. The generic data-movement lowering
(`steps.lower_movement`) cannot say that as box copies and falls back to a gather with
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

from qconvert.errors import QConvertError
from qconvert.executor.int_kernels_spatial import taps_10

from .index_maps import SOURCE_BITS
from .steps import (ACTIVATIONS, activation_inputs, lower_movement, movement_maps, plain_step,
                    c_struct, activation_of, tensor_dims)
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
    acts = activation_inputs(graph, node)
    if graph.tensors[node.inputs[0]].data is not None or len(node.outputs) != 1:
        return lower_movement(graph, node, index, options)
    index_map = movement_maps(graph, node)[0]
    in_dims = tensor_dims(graph, node.inputs[0])
    pick = separable_pick(index_map, in_dims)
    if pick is None:
        return lower_movement(graph, node, index, options)
    rows, cols = pick
    act = activation_of(graph, node)
    n, h, w, c = in_dims
    arrays = [("rows", "int32_t", rows), ("cols", "int32_t", cols)]
    values = [n, h, w, len(rows), len(cols), c * act.bits // 8, "@L_rows", "@L_cols"]
    decls = ["static const qconvert_resize_nearest_params @L_params = {"
             + ", ".join(str(v) for v in values) + "};"]
    overlap = movement_overlap(graph, node, index_map, None, False, act, acts)
    return plain_step(graph, node, index, "qconvert_resize_nearest($in0, $out0, &@L_params);",
                      arrays, decls, RESIZE_FILES, overlap)


def lower_resize_bilinear(graph, node, index, options):
    """RESIZE_BILINEAR: the integer executor's taps (`taps_10`, TFLite's
    ComputeInterpolationValuesInteger) as tables, one call."""
    n, h, w, c = tensor_dims(graph, node.inputs[0])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    align = bool(node.attrs.get("align_corners", False))
    hpc = bool(node.attrs.get("half_pixel_centers", False))
    if align and hpc:
        raise QConvertError(f"{node.op} {node.name!r}: align_corners and half_pixel_centers "
                            "together")
    arrays = []
    for axis, size, out in (("y", h, oh), ("x", w, ow)):
        coord, lower, upper = taps_10(size, out, align, hpc)
        arrays += [(f"{axis}_lower", "int32_t", lower), (f"{axis}_upper", "int32_t", upper),
                   (f"{axis}_frac", "int32_t", coord - (lower << 10))]
    values = [n, h, w, c, oh, ow, "@L_y_lower", "@L_y_upper", "@L_y_frac", "@L_x_lower",
              "@L_x_upper", "@L_x_frac"]
    decls = [f"static const qconvert_resize_params @L_params = {c_struct(values)};"]
    return plain_step(graph, node, index, "qconvert_resize_bilinear_s8($in0, $out0, &@L_params);",
                      arrays, decls, ACTIVATIONS["int8"].extra_files)
