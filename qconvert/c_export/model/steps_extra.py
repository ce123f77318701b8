"""More layers as C kernel calls (see `model_steps`): TransposeConv, BatchMatMul,
ResizeBilinear and Rsqrt.

The numbers are TFLite Micro's Prepare-time values from `qconvert.int8.prepare.layer_params`; the
bilinear taps are the integer executor's (`_taps_10`, TFLite's ComputeInterpolationValues-
Integer); Rsqrt is a 256-entry table of the integer kernel over the inputs it is defined for,
and the C refuses (invoke returns 3) an input below the zero point, where TFLite Micro stops
with an error.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.executor.int_kernels import INT_KERNELS, IntContext
from qconvert.executor.int_kernels_spatial import _taps_10
from qconvert.int8.prepare import layer_params

from .steps import ACTIVATIONS, _plain, _ptr, _struct, activation_of, tensor_dims


def _lower_transpose_conv(graph, node, index, options):
    """TRANSPOSE_CONV (16x8: the `_s16` kernel, int64 bias, sums and requantization)."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    n, h, wd, c = tensor_dims(graph, node.inputs[2])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    cout, kh, kw, cin = w.shape
    if cin != c or cout != oc:
        raise QConvertError(f"{node.op} {node.name!r}: weights {w.shape} for input channels "
                            f"{c} and output channels {oc}")
    arrays = [("weights", "int8_t", w), ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"])]
    bias = "NULL"
    if p["bias"] is not None:
        arrays.append(("bias", "int32_t" if act.bits == 8 else "int64_t", p["bias"]))
        bias = "@L_bias"
    (sh, sw), (top, left) = p["strides"], p["pads"]
    values = [n, h, wd, c, oh, ow, oc, kh, kw, sh, sw, 1, 1, top, left, 1, p["input_offset"],
              p["output_offset"], p["activation_min"], p["activation_max"], "@L_multiplier",
              "@L_shift"]
    decls = [f"static const qconvert_conv_params @L_params = {_struct(values)};"]
    return _plain(graph, node, index,
                  f"qconvert_transpose_conv_{act.suffix}($in0, @L_weights, {bias}, $out0, "
                  "&@L_params);", arrays, decls, act.extra_files)


def _shape(graph, name) -> tuple:
    t = graph.tensors[name]
    return tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name)


def _lower_batch_matmul(graph, node, index, options):
    """BATCH_MATMUL (16x8: int16 operands, int64 sums and requantization)."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    a_shape, b_shape = _shape(graph, node.inputs[0]), _shape(graph, node.inputs[1])
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise QConvertError(f"{node.op} {node.name!r}: operands of rank < 2")
    ra, ca = a_shape[-2:]
    rb, cb = b_shape[-2:]
    rows, depth, a_row, a_depth = (ca, ra, 1, ca) if p["adj_x"] else (ra, ca, ca, 1)
    depth_b, cols, b_depth, b_col = (cb, rb, 1, cb) if p["adj_y"] else (rb, cb, cb, 1)
    if depth != depth_b:
        raise QConvertError(f"{node.op} {node.name!r}: inner dimensions {depth} and {depth_b}")
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])

    def offsets(shape, step):
        count = int(np.prod(shape, dtype=np.int64))
        ids = np.arange(count, dtype=np.int64).reshape(shape) if shape else np.zeros(())
        return (np.broadcast_to(ids, batch).reshape(-1) * step).astype(np.int64)

    a_off, b_off = offsets(a_shape[:-2], ra * ca), offsets(b_shape[:-2], rb * cb)
    out_size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    if out_size != a_off.size * rows * cols:
        raise QConvertError(f"{node.op} {node.name!r}: output of {out_size} values, expected "
                            f"{a_off.size * rows * cols}")
    arrays: list = [("a_batch", "int32_t", a_off), ("b_batch", "int32_t", b_off)]
    a = _ptr(graph, node, 0, arrays, "input1", act.bits)
    b = _ptr(graph, node, 1, arrays, "input2", act.bits)
    values = [a_off.size, rows, depth, cols, "@L_a_batch", "@L_b_batch", a_row, a_depth,
              b_depth, b_col, p.get("lhs_offset", 0), p.get("rhs_offset", 0),
              p.get("output_offset", 0), p["output_multiplier"], p["output_shift"]]
    decls = [f"static const qconvert_matmul_params @L_params = {_struct(values)};"]
    return _plain(graph, node, index,
                  f"qconvert_batch_matmul_{act.suffix}({a}, {b}, $out0, &@L_params);",
                  arrays, decls, act.extra_files)


def _lower_resize_bilinear(graph, node, index, options):
    n, h, w, c = tensor_dims(graph, node.inputs[0])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    align = bool(node.attrs.get("align_corners", False))
    hpc = bool(node.attrs.get("half_pixel_centers", False))
    if align and hpc:
        raise QConvertError(f"{node.op} {node.name!r}: align_corners and half_pixel_centers "
                            "together")
    arrays = []
    for axis, size, out in (("y", h, oh), ("x", w, ow)):
        coord, lower, upper = _taps_10(size, out, align, hpc)
        arrays += [(f"{axis}_lower", "int32_t", lower), (f"{axis}_upper", "int32_t", upper),
                   (f"{axis}_frac", "int32_t", coord - (lower << 10))]
    values = [n, h, w, c, oh, ow, "@L_y_lower", "@L_y_upper", "@L_y_frac", "@L_x_lower",
              "@L_x_upper", "@L_x_frac"]
    decls = [f"static const qconvert_resize_params @L_params = {_struct(values)};"]
    return _plain(graph, node, index, "qconvert_resize_bilinear_s8($in0, $out0, &@L_params);",
                  arrays, decls, ACTIVATIONS["int8"].extra_files)


def _lower_rsqrt(graph, node, index, options):
    p = layer_params(graph, node)
    zero = int(p["input_zero_point"])
    x = np.arange(zero, 128, dtype=np.int8).reshape(1, -1)
    arrays = []
    tables = {}
    for rounding in ("double", "single"):
        table = np.zeros(256, dtype=np.int8)
        table[zero + 128:] = INT_KERNELS[node.op](node, [x], p, IntContext(rounding=rounding))[0]
        tables[rounding] = table
    if np.array_equal(tables["double"], tables["single"]):
        arrays.append(("table", "int8_t", tables["double"]))
    else:
        arrays += [("table", "int8_t#double", tables["double"]),
                   ("table", "int8_t#single", tables["single"])]
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    call = "\n".join([f"if (qconvert_lookup_checked_s8($in0, $out0, {size}, @L_table, "
                      f"{zero}) != 0) {{", "    return 3; /* input below zero: TFLite Micro "
                      "stops with an error */", "}"])
    step = _plain(graph, node, index, call, arrays, (), {"qconvert_nn_ops.c"})
    return step


EXTRA_LOWERINGS = {
    "TransposeConv": _lower_transpose_conv,
    "BatchMatMul": _lower_batch_matmul,
    "ResizeBilinear": _lower_resize_bilinear,
    "Rsqrt": _lower_rsqrt,
}

