"""ADD and SUB as `qconvert_add_fast_s8` and MUL as `qconvert_mul_fast_s8` (int8; the same
shapes, or one operand broadcast as one value per channel, per row or in all: `binary_layout`;
kernels/qconvert_nn_add.c).

    step = lower_add_fast(graph, node, index, options)   # a steps.Step
    step = lower_mul_fast(graph, node, index, options)
    layout = binary_layout(graph, node)   # which operand is full, how the other repeats

ADD: each input's rescale to the common scale tabulated at export.
TFLite rescales input k as requantize((x + offset_k) << left_shift, multiplier_k, shift_k), a
function of the raw int8 value x: the exporter evaluates it for the 256 values with the integer
executor's requantization (one table per rounding, TFLite's double and CMSIS-NN's single, as
the one-value lookup ops carry them); SUB is ADD with input 2's table negated (TFLite subtracts
the two rescaled inputs). A broadcast operand that is one value per row or in all is read once
per row. Other broadcasts and 16x8 layers keep `steps`' lowering (its per-element index
arithmetic and three requantizations: about 180 instructions per element on Cortex-M4/M55
against about 10 here); with --kernels cmsis-nn, `fast_steps.keep_on_dsp` decides between this
step and CMSIS-NN's. MUL: the product requantized once (the short form when exact).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import requantize_int32, wrap32
from qconvert.int8.prepare import layer_params

from .depthwise_steps import FAST_FILES, fast_requantize
from .steps import (activation_inputs, lower_binary, plain_step, operand_pointer, c_struct,
                    activation_of, tensor_dims)

ADD_FILES = FAST_FILES | {"qconvert_nn_add.c"}


def rescale_table(offset, left_shift, multiplier, shift, rounding) -> np.ndarray:
    """TFLite's rescale of one ADD input for raw values -128..127 (index v + 128), int32."""
    v = np.arange(-128, 128, dtype=np.int64) + int(offset)
    return requantize_int32(v << int(left_shift), int(multiplier), int(shift), rounding) \
        .astype(np.int32)


def lower_add_fast(graph, node, index, options):
    """The step of an ADD or SUB node (see the module docstring)."""
    layout = binary_layout(graph, node)
    if layout is None:
        return lower_binary(graph, node, index, options)
    full, other, outer, inner, b_outer, b_inner = layout
    p = layer_params(graph, node)
    arrays: list = []
    a = operand_pointer(graph, node, full, arrays, f"input{full + 1}")
    b = operand_pointer(graph, node, other, arrays, f"input{other + 1}")
    sign = {1: 1, 2: -1 if node.op == "Sub" else 1}  # SUB: input 2's rescale negated
    for name, k in (("table1", full + 1), ("table2", other + 1)):
        for rounding in ("double", "single"):
            table = rescale_table(p[f"input{k}_offset"], p["left_shift"],
                                  p[f"input{k}_multiplier"], p[f"input{k}_shift"], rounding)
            arrays.append((name, f"int32_t#{rounding}",
                           wrap32(sign[k] * table.astype(np.int64)).astype(np.int32)))
    fast = fast_requantize([p["output_multiplier"]], [p["output_shift"]])
    shift = -int(p["output_shift"]) - 2 if fast else int(p["output_shift"])
    fields = [outer, inner, b_outer, b_inner, "@L_table1", "@L_table2", p["output_multiplier"],
              shift, p["output_offset"], p["activation_min"], p["activation_max"],
              1 if fast else 0]
    decls = [f"static const qconvert_add_params @L_params = {c_struct(fields)};"]
    return plain_step(graph, node, index, f"qconvert_add_fast_s8({a}, {b}, $out0, &@L_params);",
                  arrays, decls, ADD_FILES, _overlap(graph, node, full, other, b_inner, outer))


def _overlap(graph, node, full, other, b_inner, outer) -> list:
    """("same", slot) for the operand read element for element (a, and b when it is full)."""
    acts = activation_inputs(graph, node)
    slots = [full] + ([other] if b_inner and outer == 1 else [])
    return [("same", acts.index(node.inputs[k])) for k in slots
            if graph.tensors[node.inputs[k]].data is None]


def _shape(graph, name) -> tuple:
    t = graph.tensors[name]
    return tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name)


def binary_layout(graph, node):
    """(full slot, other slot, outer, inner, b_outer, b_inner) of an ADD / SUB / MUL the fast
    kernels compute, or None: int8, one operand of the output's shape ("full") and the other,
    its shape right-aligned to the output's, either the output's shape, or 1 on a leading run of
    axes and the output's on the rest (one value per channel: b_outer 0, b_inner 1), or the
    output's on a leading run and 1 on the rest (one value per row: b_outer 1, b_inner 0), or all
    1 (one value). outer x inner is the output, split where the other operand changes."""
    if node.op not in ("Add", "Sub", "Mul") or activation_of(graph, node).bits != 8:
        return None
    names = node.inputs[:2]
    if any(graph.tensors[n].dtype != "int8" for n in names):
        return None
    out = tuple(tensor_dims(graph, node.outputs[0]))
    size = int(np.prod(out, dtype=np.int64))
    shapes = [tuple(_shape(graph, n)) for n in names]
    for full in (0, 1):
        vec = shapes[1 - full]
        if shapes[full] != out or len(vec) > len(out) or size == 0:
            continue
        vec = (1,) * (len(out) - len(vec)) + vec
        if vec == out:
            return full, 1 - full, 1, size, 0, 1
        for k in range(len(out) + 1):
            head, tail = int(np.prod(out[:k], dtype=np.int64)), \
                int(np.prod(out[k:], dtype=np.int64))
            if all(d == 1 for d in vec[:k]) and vec[k:] == out[k:]:
                return full, 1 - full, head, tail, 0, 1
            if vec[:k] == out[:k] and all(d == 1 for d in vec[k:]):
                return full, 1 - full, head, tail, 1, 0
    return None


def lower_mul_fast(graph, node, index, options):
    """The step of a MUL node (see the module docstring)."""
    layout = binary_layout(graph, node)
    if layout is None:
        return lower_binary(graph, node, index, options)
    full, other, outer, inner, b_step, b_inner = layout
    p = layer_params(graph, node)
    arrays: list = []
    a = operand_pointer(graph, node, full, arrays, f"input{full + 1}")
    b = operand_pointer(graph, node, other, arrays, f"input{other + 1}")
    fast = fast_requantize([p["output_multiplier"]], [p["output_shift"]])
    shift = -int(p["output_shift"]) - 2 if fast else int(p["output_shift"])
    fields = [outer, inner, b_step, b_inner, p[f"input{full + 1}_offset"],
              p[f"input{other + 1}_offset"],
              p["output_multiplier"], shift, p["output_offset"], p["activation_min"],
              p["activation_max"], 1 if fast else 0]
    decls = [f"static const qconvert_mul_params @L_params = {c_struct(fields)};"]
    return plain_step(graph, node, index, f"qconvert_mul_fast_s8({a}, {b}, $out0, &@L_params);",
                  arrays, decls, ADD_FILES, _overlap(graph, node, full, other, b_inner, outer))
