"""16x8 layers (int16 activations, int8 weights) as C kernel calls: `export-c`'s lowering table
for every node that reads or writes an int16 activation (`lowering.lowerings_of` picks it),
onto the `_s16` kernels of kernels/qconvert_nn_s16.c.

Conv, depthwise conv, fully connected, pools, the binary ops, Mean, data movement, TransposeConv,
BatchMatMul, float Quantize and Dequantize are `steps`' lowerings, shared with int8 (the
`int16` row of `steps.ACTIVATIONS` gives their kernel suffix, element type, range, sources
and the 16x8 bias: an int64 one with 64-bit accumulator and requantization, or an int32 one as
the layer's `accumulator_bits` says). Fully connected weights are row-major for 16x8 layers (the
1x4 order is the int8 kernel's); conv, depthwise conv and pool outputs may overlap their input
as the int8 kernels' do (the same per-element contract, in bytes of int16 elements).

This module lowers what only 16x8 layers have: softmax with TFLite Micro's two 513-entry tables,
logistic / tanh over the 256-entry sigmoid table (`qconvert.int8.lut16`), RELU, LEAKY_RELU and
the QUANTIZE between int8 and int16 as one rescaling kernel, RELU6 as a clamp; element-wise
layers may run in place. A softmax from int8 to int16 is the int8 softmax kernel with 16 output
bits (`qconvert_softmax_s8_s16`; its wider output never overlaps its input). RSQRT computes
gemmlowp's inverse square root per element (`qconvert_nn_s16_math.c`; a table of 32768 int16
values would cost 64 KiB of flash); invoke returns 3 at a negative input, where TFLite Micro
stops with an error. The numbers are TFLite Micro's Prepare-time values from
`qconvert.int8.prepare.layer_params`.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.lut16 import sigmoid_table
from qconvert.int8.prepare import layer_params

from ..c_text import c_int
from .steps import (BINARY, MOVEMENT, S16_FILES, plain_step, c_struct, lower_quantize_float,
                    tensor_dims)

MATH16_FILES = {"qconvert_nn_s16_math.c"}
INT16_MIN, INT16_MAX = -32768, 32767


def _size(graph, name) -> int:
    return int(np.prod(tensor_dims(graph, name), dtype=np.int64))


def _lower_softmax16(graph, node, index, options):
    p = layer_params(graph, node)
    dims = tensor_dims(graph, node.inputs[0])
    row = dims[-1] if dims else 1
    rows = int(np.prod(dims, dtype=np.int64)) // max(row, 1)
    if graph.tensors[node.inputs[0]].dtype == "int8":  # the int8 softmax, 16 output bits
        return plain_step(graph, node, index,
                          f"qconvert_softmax_s8_s16($in0, $out0, {rows}, {row}, "
                          f"{p['input_multiplier']}, {p['input_left_shift']}, "
                          f"{c_int(p['diff_min'])});", (), (), {"qconvert_nn_softmax.c"})
    arrays = [("exp_lut", "int16_t", p["exp_lut"]),
              ("recip_lut", "int16_t", p["one_over_one_plus_x_lut"])]
    return plain_step(graph, node, index,
                      f"qconvert_softmax_s16($in0, $out0, {rows}, {row}, {p['input_multiplier']}, "
                      f"{p['input_left_shift']}, @L_exp_lut, @L_recip_lut);",
                      arrays, (), S16_FILES, [("same", 0)])


def _lower_sigmoid_tanh16(graph, node, index, options):
    p = layer_params(graph, node)
    fn = "qconvert_logistic_s16" if node.op == "Sigmoid" else "qconvert_tanh_s16"
    return plain_step(graph, node, index,
                      f"{fn}($in0, $out0, {_size(graph, node.outputs[0])}, "
                      f"{p['input_multiplier']}, {p['input_left_shift']}, @L_sigmoid_table);",
                      [("sigmoid_table", "uint16_t", sigmoid_table())], (), S16_FILES,
                      [("same", 0)])


def _rescale(graph, node, index, fields, overlap):
    decls = [f"static const qconvert_rescale_params @L_params = {c_struct(fields)};"]
    return plain_step(graph, node, index,
                      f"qconvert_rescale_s16($in0, $out0, {_size(graph, node.outputs[0])}, "
                      "&@L_params);", (), decls, S16_FILES, overlap)


def _bits(graph, name) -> int:
    return 16 if graph.tensors[name].dtype == "int16" else 8


def _lower_relu16(graph, node, index, options):
    p = layer_params(graph, node)
    if node.op == "Relu":
        m, s = p["output_multiplier"], p["output_shift"]
        fields = [16, 16, 0, 0, m, s, m, s, p["activation_min"], p["activation_max"]]
    else:  # LeakyRelu
        fields = [16, 16, p["input_zero_point"], p["output_zero_point"],
                  p["output_multiplier_identity"], p["output_shift_identity"],
                  p["output_multiplier_alpha"], p["output_shift_alpha"], INT16_MIN, INT16_MAX]
    return _rescale(graph, node, index, fields, [("same", 0)])


def _lower_relu6_16(graph, node, index, options):
    p = layer_params(graph, node)
    return plain_step(graph, node, index,
                      f"qconvert_clamp_s16($in0, $out0, {_size(graph, node.outputs[0])}, "
                      f"{c_int(p['zero'])}, {c_int(p['six'])});", (), (), S16_FILES, [("same", 0)])


def _lower_quantize16(graph, node, index, options):
    """QUANTIZE float -> int16 (`steps`), or between int8 and int16 (a rescaling)."""
    if graph.tensors[node.inputs[0]].dtype == "float32":
        return lower_quantize_float(graph, node, index, options)
    p = layer_params(graph, node)
    out_bits = p["output_bits"]
    lo, hi = (-128, 127) if out_bits == 8 else (INT16_MIN, INT16_MAX)
    m, s = p["output_multiplier"], p["output_shift"]
    fields = [_bits(graph, node.inputs[0]), out_bits, p["input_zero_point"], p["zero_point"],
              m, s, m, s, lo, hi]
    # element i is read before it is written; an output no wider than the input may overlap it
    return _rescale(graph, node, index, fields, [("same", 0)])


def _lower_rsqrt16(graph, node, index, options):
    p = layer_params(graph, node)
    call = "\n".join([f"if (qconvert_rsqrt_s16($in0, $out0, {_size(graph, node.outputs[0])}, "
                      f"{p['output_multiplier']}, {p['output_shift']}) != 0) {{",
                      "    return 3; /* a negative input: TFLite Micro stops with an error */",
                      "}"])
    return plain_step(graph, node, index, call, (), (), MATH16_FILES, [("same", 0)])


def _lower_abs16(graph, node, index, options):
    p = layer_params(graph, node)
    return plain_step(graph, node, index,
                      f"qconvert_abs_s16($in0, $out0, {_size(graph, node.outputs[0])}, "
                      f"{int(p['needs_rescale'])}, {p['output_multiplier']}, {p['output_shift']});",
                      (), (), MATH16_FILES, [("same", 0)])


# the int8 lowerings 16x8 layers share (see the module docstring): `lowering.LOWERINGS16`
SHARED_WITH_INT8 = ("Conv2D", "DepthwiseConv2D", "FullyConnected", "AveragePool", "MaxPool",
                    "Mean", "ReduceSum", "Dequantize", "Reshape", "Squeeze", "ExpandDims",
                    "TransposeConv", "BatchMatMul", "SelectV2",
                    *(op for op in BINARY if op != "Div"), *MOVEMENT)

# the 16x8 lowerings of their own
S16_LOWERINGS = {
    "Softmax": _lower_softmax16, "Sigmoid": _lower_sigmoid_tanh16, "Tanh": _lower_sigmoid_tanh16,
    "Relu": _lower_relu16, "LeakyRelu": _lower_relu16, "Relu6": _lower_relu6_16,
    "Quantize": _lower_quantize16, "Rsqrt": _lower_rsqrt16, "Abs": _lower_abs16,
}
