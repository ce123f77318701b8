"""BatchMatMul as a C kernel call (qconvert_batch_matmul_s8 / _s16; see `steps`): the
broadcast batches as offset tables, the operands' transposes as strides.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.int8.prepare import layer_params

from .steps import plain_step, operand_pointer, c_struct, activation_of, tensor_dims


def _shape(graph, name) -> tuple:
    t = graph.tensors[name]
    return tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name)


def lower_batch_matmul(graph, node, index, options):
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
    a = operand_pointer(graph, node, 0, arrays, "input1", act.bits)
    b = operand_pointer(graph, node, 1, arrays, "input2", act.bits)
    values = [a_off.size, rows, depth, cols, "@L_a_batch", "@L_b_batch", a_row, a_depth,
              b_depth, b_col, p.get("lhs_offset", 0), p.get("rhs_offset", 0),
              p.get("output_offset", 0), p["output_multiplier"], p["output_shift"]]
    decls = [f"static const qconvert_matmul_params @L_params = {c_struct(values)};"]
    return plain_step(graph, node, index,
                      f"qconvert_batch_matmul_{act.suffix}({a}, {b}, $out0, &@L_params);",
                      arrays, decls, act.extra_files)
