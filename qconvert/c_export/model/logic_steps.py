"""Comparisons, SELECT_V2, REDUCE_MAX and REDUCE_MIN as C: the lowerings of
`qconvert_compare_s8`, `qconvert_select` and `qconvert_reduce_extreme_s8`
(kernels/qconvert_nn_logic.c).

A comparison of int8 operands (TFLite EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS,
LESS_EQUAL) writes a bool tensor, one byte 0 / 1 per element as TFLite Micro's bool: each
operand is brought to the common unit with its own multiplier and shift (the parameters of
`qconvert.int8.prepare.logic`), then compared. SELECT_V2 copies, per output element, the
element of x or of y its bool condition names (int8 or int16: `element_bytes`). Both broadcast
their operands over the output box as the binary kernels do (strides 0 along broadcast axes);
a comparison's box has size-1 axes dropped and contiguous axes merged (`index_maps.merged`).

Comparisons and SELECT_V2 write output element i after reading the operands of element i, so
an operand of the output's shape and element size may share its bytes (`("same", slot)`
overlap). REDUCE_MAX / REDUCE_MIN walk an outer (output) and an inner (reduced) box as MEAN
does (`steps._lower_mean`), their output in its own bytes.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.int8.prepare import layer_params
from qconvert.int8.prepare.logic import COMPARISON_OPS

from .index_maps import MAX_RANK, broadcast_strides, contiguous_strides, merged
from .steps import (activation_inputs, box_literal, plain_step, operand_pointer, c_struct,
                    activation_of, tensor_dims)

LOGIC_FILES = frozenset({"qconvert_nn_logic.h", "qconvert_nn_logic.c"})
COMPARE_ENUMS = {op: "QCONVERT_" + name for op, name in zip(
    COMPARISON_OPS, ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"))}


def _dims(graph, name) -> tuple:
    t = graph.tensors[name]
    return tuple(t.data.shape) if t.data is not None else tuple(tensor_dims(graph, name))


def _padded(values) -> str:
    return c_struct(list(values) + [0] * (MAX_RANK - len(values)))


def _same_overlap(graph, node, slots, out_shape) -> list:
    """("same", activation index) for each operand slot whose activation has the output's
    shape and element type (written element by element after it is read)."""
    acts = activation_inputs(graph, node)
    out_dtype = graph.tensors[node.outputs[0]].dtype
    return [("same", acts.index(node.inputs[k])) for k in slots
            if graph.tensors[node.inputs[k]].data is None
            and _dims(graph, node.inputs[k]) == tuple(out_shape)
            and graph.tensors[node.inputs[k]].dtype == out_dtype]


def lower_comparison(graph, node, index, options):
    """A comparison of int8 operands -> one `qconvert_compare_s8` call."""
    p = layer_params(graph, node)
    if not p["scaled"]:
        raise QConvertError(f"{node.op} {node.name!r}: export-c compares int8 operands only, "
                            f"not {graph.tensors[node.inputs[0]].dtype}")
    out_shape = tensor_dims(graph, node.outputs[0])
    shapes = [_dims(graph, name) for name in node.inputs[:2]]
    box = merged(out_shape, broadcast_strides(shapes[0], out_shape),
                 broadcast_strides(shapes[1], out_shape))
    if len(box["shape"]) > MAX_RANK:
        raise QConvertError(f"{node.op} {node.name!r}: broadcast over more than {MAX_RANK} axes")
    arrays: list = []
    a = operand_pointer(graph, node, 0, arrays, "input1")
    b = operand_pointer(graph, node, 1, arrays, "input2")
    fields = [COMPARE_ENUMS[node.op], len(box["shape"]), _padded(box["shape"]),
              _padded(box["in_strides"]), _padded(box["out_strides"]), p["left_shift"],
              p["input1_offset"], p["input1_multiplier"], p["input1_shift"],
              p["input2_offset"], p["input2_multiplier"], p["input2_shift"]]
    decls = [f"static const qconvert_compare_params @L_params = {c_struct(fields)};"]
    return plain_step(graph, node, index, f"qconvert_compare_s8({a}, {b}, $out0, &@L_params);",
                      arrays, decls, LOGIC_FILES, [])


def lower_select(graph, node, index, options):
    """SELECT_V2 of int8 / int16 values -> one `qconvert_select` call."""
    act = activation_of(graph, node)
    out_shape = tuple(tensor_dims(graph, node.outputs[0]))
    if len(out_shape) > MAX_RANK:
        raise QConvertError(f"{node.op} {node.name!r}: more than {MAX_RANK} axes")
    arrays: list = []
    condition = node.inputs[0]
    data = graph.tensors[condition].data
    if data is None:
        cond = f"$in{activation_inputs(graph, node).index(condition)}"
    else:
        arrays.append(("condition", "uint8_t", np.asarray(data, np.uint8)))
        cond = "@L_condition"
    x = operand_pointer(graph, node, 1, arrays, "x", act.bits)
    y = operand_pointer(graph, node, 2, arrays, "y", act.bits)
    strides = [broadcast_strides(_dims(graph, name), out_shape) for name in node.inputs[:3]]
    rank = max(len(out_shape), 1)
    shape = list(out_shape) or [1]
    strides = [s or [0] for s in strides]
    fields = [rank, _padded(shape), *(_padded(s) for s in strides), act.bits // 8]
    decls = [f"static const qconvert_select_params @L_params = {c_struct(fields)};"]
    return plain_step(graph, node, index, f"qconvert_select({cond}, {x}, {y}, $out0, &@L_params);",
                      arrays, decls, LOGIC_FILES, _same_overlap(graph, node, (1, 2), out_shape))


def lower_reduce_extreme(graph, node, index, options):
    """REDUCE_MAX / REDUCE_MIN of int8 -> one `qconvert_reduce_extreme_s8` call over an outer
    (output) and an inner (reduced) box, as MEAN's."""
    p = layer_params(graph, node)
    dims = tensor_dims(graph, node.inputs[0])
    axes = sorted({a % len(dims) for a in p["axes"]})
    strides = contiguous_strides(dims)
    keep = [k for k in range(len(dims)) if k not in axes]
    outer_shape = [dims[k] for k in keep]
    outer = merged(outer_shape, [strides[k] for k in keep], contiguous_strides(outer_shape))
    inner = merged([dims[k] for k in axes], [strides[k] for k in axes], [0] * len(axes))
    fields = [box_literal(outer), box_literal(inner), int(node.op == "ReduceMin")]
    decls = [f"static const qconvert_reduce_params @L_params = {c_struct(fields)};"]
    return plain_step(graph, node, index,
                      "qconvert_reduce_extreme_s8($in0, $out0, &@L_params);",
                      (), decls, LOGIC_FILES)


def lower_l2_normalization(graph, node, index, options):
    """L2_NORMALIZATION (int8) -> one `qconvert_l2norm_s8` call over the rows of the last axis
    (kernels/qconvert_nn_ops.c; in place allowed)."""
    p = layer_params(graph, node)
    dims = tensor_dims(graph, node.inputs[0])
    depth = int(dims[-1]) if dims else 1
    outer = int(np.prod(dims, dtype=np.int64)) // max(depth, 1)
    call = f"qconvert_l2norm_s8($in0, $out0, {outer}, {depth}, {p['input_zero_point']});"
    return plain_step(graph, node, index, call,
                      (), (), activation_of(graph, node).ops_files, [("same", 0)])


def lower_fill(graph, node, index, options):
    """FILL (int8) -> `qconvert_fill_s8` of the output's size with the value: the constant's,
    or the first (only) element of the activation."""
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    data = graph.tensors[node.inputs[1]].data
    value = f"$in{activation_inputs(graph, node).index(node.inputs[1])}[0]" if data is None else \
        str(int(np.asarray(data).reshape(-1)[0]))
    return plain_step(graph, node, index, f"qconvert_fill_s8($out0, {size}, {value});", (), (),
                      activation_of(graph, node).ops_files, [])
