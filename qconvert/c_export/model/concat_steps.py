"""Concat as row copies an input may overlap: the lowering of `qconvert_concat_rows`.

A concatenation on any axis is, in memory, `rows` rows (the product of the dimensions before
the axis), output row r being row r of every part one after the other. The kernel
(kernels/qconvert_nn_concat.c) writes the output in memory order, one part's row piece at a
time, each piece as by memmove. So every activation part that dies at the concat may sit inside
the output: the step offers the memory plan a `("reads", slot, minread)` overlap per part
(`minread`: for each output byte, the part's byte it copies; never for the other parts' bytes),
and the plan computes how far the output may start below that part (for the last part, the
whole part fits inside the output's end; for the others all but about one output row).
Without it a channel Concat keeps its inputs and its output alive at once (U-Net's decoder:
an upsampled map, a skip connection and both together). The parts do not overlap one another,
so every part's overlap holds at once. Both kernel sets use this kernel (CMSIS-NN has no
concatenation); the copies are the same bytes as TFLite Micro's CONCATENATION, which requires
the parts and the output to share one quantization.
"""

from __future__ import annotations

import numpy as np

from .index_maps import NEVER
from .steps import activation_inputs, plain_step, operand_pointer, activation_of, tensor_dims

CONCAT_FILES = frozenset({"qconvert_nn_concat.h", "qconvert_nn_concat.c"})


def row_bytes(graph, node) -> tuple:
    """(rows, [bytes of each part's row]) of a Concat node."""
    dims = [tuple(graph.tensors[n].data.shape) if graph.tensors[n].data is not None
            else tuple(tensor_dims(graph, n)) for n in node.inputs]
    axis = int(node.attrs.get("axis", 0)) % len(dims[0])
    size = activation_of(graph, node).bits // 8
    rows = int(np.prod(dims[0][:axis], dtype=np.int64))
    return rows, [int(np.prod(d[axis:], dtype=np.int64)) * size for d in dims]


def part_minread(rows: int, widths: list, part: int) -> np.ndarray:
    """For each output byte, the byte of part `part` it copies (NEVER for other parts')."""
    total = sum(widths)
    out = np.full((rows, total), NEVER, dtype=np.int64)
    before = sum(widths[:part])
    w = widths[part]
    out[:, before:before + w] = (np.arange(rows, dtype=np.int64)[:, None] * w
                                 + np.arange(w, dtype=np.int64)[None, :])
    return out.reshape(-1)


def lower_concat(graph, node, index, options):
    """Concat -> one `qconvert_concat_rows` call; every activation part read once may overlap
    the output (see the module docstring)."""
    act = activation_of(graph, node)
    rows, widths = row_bytes(graph, node)
    arrays: list = []
    ptrs = [operand_pointer(graph, node, slot, arrays, f"input{slot + 1}", act.bits)
            for slot in range(len(node.inputs))]
    arrays.append(("row_bytes", "int32_t", np.asarray(widths, dtype=np.int64)))
    count = len(widths)
    call = "\n".join([
        "{",
        f"    const void *const @L_parts[{count}] = {{{', '.join(ptrs)}}};",
        f"    qconvert_concat_rows(@L_parts, @L_row_bytes, {count}, {rows}, $out0);",
        "}"])
    acts = activation_inputs(graph, node)
    overlap = [("reads", acts.index(name), part_minread(rows, widths, slot))
               for slot, name in enumerate(node.inputs)
               if graph.tensors[name].data is None and node.inputs.count(name) == 1]
    return plain_step(graph, node, index, call, arrays, (), CONCAT_FILES, overlap or None)
