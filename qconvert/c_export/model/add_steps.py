"""ADD (int8, both inputs of the output's shape) as `qconvert_add_fast_s8` and MUL (int8, the
same shapes, or one operand one value per channel) as `qconvert_mul_fast_s8`
(kernels/qconvert_nn_add.c).

    step = lower_add_fast(graph, node, index, options)   # a model_steps.Step
    step = lower_mul_fast(graph, node, index, options)

ADD: each input's rescale to the common scale tabulated at export.
TFLite rescales input k as requantize((x + offset_k) << left_shift, multiplier_k, shift_k), a
function of the raw int8 value x: the exporter evaluates it for the 256 values with the integer
executor's requantization (one table per rounding, TFLite's double and CMSIS-NN's single, as
the one-value lookup ops carry them). Broadcasting adds and 16x8 layers keep `model_steps`'
lowering; with --kernels cmsis-nn, `fast_steps.keep_on_dsp` decides between this step and
CMSIS-NN's. MUL: the product requantized once (the short form when exact); other broadcasts keep
`model_steps`' lowering.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import requantize_int32
from qconvert.int8.prepare import layer_params

from .depthwise_steps import FAST_FILES, fast_requantize
from .steps import _acts, _lower_binary, _plain, _ptr, _struct, activation_of, tensor_dims

ADD_FILES = FAST_FILES | {"qconvert_nn_add.c"}


def rescale_table(offset, left_shift, multiplier, shift, rounding) -> np.ndarray:
    """TFLite's rescale of one ADD input for raw values -128..127 (index v + 128), int32."""
    v = np.arange(-128, 128, dtype=np.int64) + int(offset)
    return requantize_int32(v << int(left_shift), int(multiplier), int(shift), rounding) \
        .astype(np.int32)


def covered(graph, node) -> bool:
    """True when qconvert_add_fast_s8 computes `node`: int8, no broadcasting."""
    if node.op != "Add" or activation_of(graph, node).bits != 8:
        return False
    out = tensor_dims(graph, node.outputs[0])
    for name in node.inputs[:2]:
        t = graph.tensors[name]
        if t.dtype != "int8":
            return False
        shape = tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name)
        if shape != out:
            return False
    return True


def lower_add_fast(graph, node, index, options):
    """The step of an ADD node (see the module docstring)."""
    if not covered(graph, node):
        return _lower_binary(graph, node, index, options)
    p = layer_params(graph, node)
    arrays: list = []
    a = _ptr(graph, node, 0, arrays, "input1")
    b = _ptr(graph, node, 1, arrays, "input2")
    for k in (1, 2):
        for rounding in ("double", "single"):
            arrays.append((f"table{k}", f"int32_t#{rounding}", rescale_table(
                p[f"input{k}_offset"], p["left_shift"], p[f"input{k}_multiplier"],
                p[f"input{k}_shift"], rounding)))
    fast = fast_requantize([p["output_multiplier"]], [p["output_shift"]])
    shift = -int(p["output_shift"]) - 2 if fast else int(p["output_shift"])
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    fields = [size, "@L_table1", "@L_table2", p["output_multiplier"], shift, p["output_offset"],
              p["activation_min"], p["activation_max"], 1 if fast else 0]
    decls = [f"static const qconvert_add_params @L_params = {_struct(fields)};"]
    acts = _acts(graph, node)
    overlap = [("same", acts.index(name)) for name in node.inputs[:2]
               if graph.tensors[name].data is None]
    return _plain(graph, node, index, f"qconvert_add_fast_s8({a}, {b}, $out0, &@L_params);",
                  arrays, decls, ADD_FILES, overlap)


def _shape(graph, name) -> tuple:
    t = graph.tensors[name]
    return tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name)


def mul_layout(graph, node):
    """(full slot, other slot, outer, inner, b_step) of a MUL qconvert_mul_fast_s8 computes, or
    None: int8, and the operands of the output's shape, or one of them one value per channel
    (every axis but the last 1, the last the output's)."""
    if node.op != "Mul" or activation_of(graph, node).bits != 8:
        return None
    names = node.inputs[:2]
    if any(graph.tensors[n].dtype != "int8" for n in names):
        return None
    out = tensor_dims(graph, node.outputs[0])
    size = int(np.prod(out, dtype=np.int64))
    shapes = [_shape(graph, n) for n in names]
    if shapes[0] == out and shapes[1] == out:
        return 0, 1, 1, size, size
    for full in (0, 1):
        vec = shapes[1 - full]
        if shapes[full] == out and len(out) > 0 and len(vec) > 0 and vec[-1] == out[-1] \
                and all(d == 1 for d in vec[:-1]) and out[-1] > 0:
            return full, 1 - full, size // out[-1], out[-1], 0
    return None


def lower_mul_fast(graph, node, index, options):
    """The step of a MUL node (see the module docstring)."""
    layout = mul_layout(graph, node)
    if layout is None:
        return _lower_binary(graph, node, index, options)
    full, other, outer, inner, b_step = layout
    p = layer_params(graph, node)
    arrays: list = []
    a = _ptr(graph, node, full, arrays, f"input{full + 1}")
    b = _ptr(graph, node, other, arrays, f"input{other + 1}")
    fast = fast_requantize([p["output_multiplier"]], [p["output_shift"]])
    shift = -int(p["output_shift"]) - 2 if fast else int(p["output_shift"])
    fields = [outer, inner, b_step, p[f"input{full + 1}_offset"], p[f"input{other + 1}_offset"],
              p["output_multiplier"], shift, p["output_offset"], p["activation_min"],
              p["activation_max"], 1 if fast else 0]
    decls = [f"static const qconvert_mul_params @L_params = {_struct(fields)};"]
    acts = _acts(graph, node)
    name = node.inputs[full]
    overlap = [("same", acts.index(name))] if graph.tensors[name].data is None else []
    if b_step and graph.tensors[node.inputs[other]].data is None:
        overlap.append(("same", acts.index(node.inputs[other])))
    return _plain(graph, node, index, f"qconvert_mul_fast_s8({a}, {b}, $out0, &@L_params);",
                  arrays, decls, ADD_FILES, overlap)
