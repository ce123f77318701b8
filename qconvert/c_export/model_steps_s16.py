"""16x8 layers (int16 activations, int8 weights) as C kernel calls: `export-c`'s lowering of
every node that reads or writes an int16 activation (`model_steps.lowerings_of` picks this
table), onto the `_s16` kernels of kernels/qconvert_nn_s16.c.

The numbers are TFLite Micro's Prepare-time values from `int_executor.layer_params` (the 16x8
parameters of `executor.int16_kernels`): conv, depthwise conv and fully connected carry an
int64 bias (`bias64`, 64-bit accumulator and requantization) or an int32 one (`bias32`) as the
layer's `accumulator_bits` says; softmax carries TFLite Micro's two 513-entry tables and
logistic / tanh the 256-entry sigmoid table (`qconvert.int8.lut16`); RELU, LEAKY_RELU and the
QUANTIZE between int8 and int16 are one rescaling kernel; data movement is the int8 lowering's
box copies on int16 elements. Fully connected weights are row-major for 16x8 layers (the 1x4
order is the int8 kernel's). Conv, depthwise conv and pool outputs may overlap their input as
the int8 kernels' do (the same per-element contract, in bytes of int16 elements); element-wise
layers may run in place.
TRANSPOSE_CONV and BATCH_MATMUL reuse the int8 lowerings' geometry with the `_s16` kernels
(int64 sums and requantization). A softmax from int8 to int16 is the int8 softmax kernel with
16 output bits (`qconvert_softmax_s8_s16`; its wider output never overlaps its input).
RSQRT computes gemmlowp's inverse square root per element (`qconvert_nn_s16_math.c`; a table of
32768 int16 values would cost 64 KiB of flash); invoke returns 3 at a negative input, where
TFLite Micro stops with an error.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.int8.lut16 import sigmoid_table
from qconvert.int8.prepare import layer_params

from .c_text import c_int
from .index_maps import MAX_RANK, NEVER, broadcast_strides, conv_minread, merged
from .model_steps_extra import _lower_batch_matmul, _lower_transpose_conv
from .model_steps import (_BINARY, _MOVEMENT, _lower_alias, _lower_mean, _lower_movement, _plain,
                          _prelu_fields, _ptr, _struct, conv_struct, fc_geometry,
                          tensor_dims)

S16_FILES = {"qconvert_nn_s16.c"}
MATH16_FILES = {"qconvert_nn_s16_math.c"}
INT16_MIN, INT16_MAX = -32768, 32767


def _size(graph, name) -> int:
    return int(np.prod(tensor_dims(graph, name), dtype=np.int64))


def _overlap16(graph, node, p, kernel_hw, per_channel_input) -> list:
    """The int8 lowering's ("reads", ...) candidate in bytes of int16 elements: both bytes of
    output element i are written after every tap of element i is read, so byte 2i and 2i + 1
    carry element i's lowest input byte (conservative for the second byte)."""
    minread = conv_minread(tensor_dims(graph, node.inputs[0]), tensor_dims(graph, node.outputs[0]),
                           kernel_hw, p["strides"], p.get("dilations", [1, 1]), p["pads"],
                           per_channel_input)
    return [("reads", 0, np.repeat(np.where(minread == NEVER, NEVER, 2 * minread), 2))]


def _bias_args(p, channels) -> tuple:
    """(arrays, bias64 expression, bias32 expression) of a 16x8 weighted layer."""
    if p["accumulator_bits"] == 32:
        bias = p["bias"] if p["bias"] is not None else np.zeros(channels, np.int64)
        return [("bias", "int32_t", bias)], "NULL", "@L_bias"
    if p["bias"] is None:
        return [], "NULL", "NULL"
    return [("bias", "int64_t", p["bias"])], "@L_bias", "NULL"


def _lower_conv16(graph, node, index, options):
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    depthwise = node.op == "DepthwiseConv2D"
    kernel_hw = (w.shape[1], w.shape[2])
    c_in = tensor_dims(graph, node.inputs[0])[3]
    if depthwise:
        mult = int(w.shape[3]) // c_in
    else:  # the group count of a grouped convolution
        mult = c_in // int(w.shape[3])
    channels = int(w.shape[3] if depthwise else w.shape[0])
    bias_arrays, b64, b32 = _bias_args(p, channels)
    arrays = [("weights", "int8_t", w), ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"]), *bias_arrays]
    decls = [f"static const qconvert_conv_params @L_params = "
             f"{conv_struct(graph, node, p, kernel_hw, mult)};"]
    fn = "qconvert_depthwise_conv_s16" if depthwise else "qconvert_conv_s16"
    per_group = int(w.shape[0]) // mult if not depthwise else 1
    chan = (lambda oc, m=mult: oc // m) if depthwise else \
        (lambda oc, g=per_group, f=int(w.shape[3]): (oc // g) * f)
    return _plain(graph, node, index, f"{fn}($in0, @L_weights, {b64}, {b32}, $out0, &@L_params);",
                  arrays, decls, S16_FILES, _overlap16(graph, node, p, kernel_hw, chan))


def _lower_fc16(graph, node, index, options):
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    batches, depth, rows = fc_geometry(graph, node)
    bias_arrays, b64, b32 = _bias_args(p, rows)
    arrays = [("weights", "int8_t", w), ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"]), *bias_arrays]
    quant = _struct([p["input_offset"], p["weights_offset"], p["output_offset"],
                     p["activation_min"], p["activation_max"], "@L_multiplier", "@L_shift",
                     1 if p["per_channel"] else 0])
    decls = [f"static const qconvert_fc_quant @L_quant = {quant};"]
    return _plain(graph, node, index,
                  f"qconvert_fc_s16($in0, @L_weights, {b64}, {b32}, $out0, {batches}, {depth}, "
                  f"{rows}, &@L_quant);", arrays, decls, S16_FILES)


def _lower_pool16(graph, node, index, options):
    p = layer_params(graph, node)
    kernel_hw = tuple(p["kernel_shape"])
    decls = [f"static const qconvert_conv_params @L_params = "
             f"{conv_struct(graph, node, p, kernel_hw, quant=False)};"]
    fn = "qconvert_avgpool_s16" if node.op == "AveragePool" else "qconvert_maxpool_s16"
    return _plain(graph, node, index, f"{fn}($in0, $out0, &@L_params);", (), decls, S16_FILES,
                  _overlap16(graph, node, p, kernel_hw, lambda oc: oc))


def _lower_binary16(graph, node, index, options):
    p = layer_params(graph, node)
    if node.op == "PRelu":  # int8 alpha: the PRELU slots of the binary parameters
        p = _prelu_fields(p)
    out_shape = tensor_dims(graph, node.outputs[0])
    shapes = []
    for name in node.inputs[:2]:
        t = graph.tensors[name]
        shapes.append(tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name))
    box = merged(out_shape, broadcast_strides(shapes[0], out_shape),
                 broadcast_strides(shapes[1], out_shape))
    if len(box["shape"]) > MAX_RANK:
        raise QConvertError(f"{node.op} {node.name!r}: broadcast over more than {MAX_RANK} axes")
    arrays: list = []
    a = _ptr(graph, node, 0, arrays, "input1", 16)
    b = _ptr(graph, node, 1, arrays, "input2", 8 if node.op == "PRelu" else 16)
    pad = [0] * (MAX_RANK - len(box["shape"]))
    keys = ("input1_offset", "input2_offset", "output_offset", "left_shift", "input1_multiplier",
            "input1_shift", "input2_multiplier", "input2_shift", "output_multiplier",
            "output_shift")
    fields = [_BINARY[node.op], len(box["shape"]), _struct(box["shape"] + pad),
              _struct(box["in_strides"] + pad), _struct(box["out_strides"] + pad),
              *[int(p.get(k, 0)) for k in keys], int(p.get("activation_min", INT16_MIN)),
              int(p.get("activation_max", INT16_MAX)), "NULL", "NULL"]
    decls = [f"static const qconvert_binary_params @L_params = {_struct(fields)};"]
    acts = [n for n in node.inputs if n is not None and graph.tensors[n].data is None]
    overlap = [("same", acts.index(node.inputs[k])) for k in (0, 1)
               if graph.tensors[node.inputs[k]].data is None and shapes[k] == out_shape]
    fn = "qconvert_prelu_s16" if node.op == "PRelu" else "qconvert_binary_s16"
    if node.op == "PRelu":
        overlap = overlap[:1] if graph.tensors[node.inputs[0]].data is None else []
    return _plain(graph, node, index, f"{fn}({a}, {b}, $out0, &@L_params);",
                  arrays, decls, S16_FILES, overlap)


def _lower_softmax16(graph, node, index, options):
    p = layer_params(graph, node)
    dims = tensor_dims(graph, node.inputs[0])
    row = dims[-1] if dims else 1
    rows = int(np.prod(dims, dtype=np.int64)) // max(row, 1)
    if graph.tensors[node.inputs[0]].dtype == "int8":  # the int8 softmax, 16 output bits
        return _plain(graph, node, index,
                      f"qconvert_softmax_s8_s16($in0, $out0, {rows}, {row}, "
                      f"{p['input_multiplier']}, {p['input_left_shift']}, "
                      f"{c_int(p['diff_min'])});", (), (), {"qconvert_nn_softmax.c"})
    arrays = [("exp_lut", "int16_t", p["exp_lut"]),
              ("recip_lut", "int16_t", p["one_over_one_plus_x_lut"])]
    return _plain(graph, node, index,
                  f"qconvert_softmax_s16($in0, $out0, {rows}, {row}, {p['input_multiplier']}, "
                  f"{p['input_left_shift']}, @L_exp_lut, @L_recip_lut);",
                  arrays, (), S16_FILES, [("same", 0)])


def _lower_sigmoid_tanh16(graph, node, index, options):
    p = layer_params(graph, node)
    fn = "qconvert_logistic_s16" if node.op == "Sigmoid" else "qconvert_tanh_s16"
    return _plain(graph, node, index,
                  f"{fn}($in0, $out0, {_size(graph, node.outputs[0])}, {p['input_multiplier']}, "
                  f"{p['input_left_shift']}, @L_sigmoid_table);",
                  [("sigmoid_table", "uint16_t", sigmoid_table())], (), S16_FILES,
                  [("same", 0)])


def _rescale(graph, node, index, fields, overlap):
    decls = [f"static const qconvert_rescale_params @L_params = {_struct(fields)};"]
    return _plain(graph, node, index,
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
    return _plain(graph, node, index,
                  f"qconvert_clamp_s16($in0, $out0, {_size(graph, node.outputs[0])}, "
                  f"{c_int(p['zero'])}, {c_int(p['six'])});", (), (), S16_FILES, [("same", 0)])


def _lower_quantize16(graph, node, index, options):
    p = layer_params(graph, node)
    src = graph.tensors[node.inputs[0]].dtype
    size = _size(graph, node.outputs[0])
    if src == "float32":
        scale = repr(float(np.float32(p["scale"])))
        return _plain(graph, node, index,
                      f"qconvert_quantize_f32_s16($in0, $out0, {size}, {scale}f, "
                      f"{c_int(p['zero_point'])});", (), (), S16_FILES)
    out_bits = p["output_bits"]
    lo, hi = (-128, 127) if out_bits == 8 else (INT16_MIN, INT16_MAX)
    m, s = p["output_multiplier"], p["output_shift"]
    fields = [_bits(graph, node.inputs[0]), out_bits, p["input_zero_point"], p["zero_point"],
              m, s, m, s, lo, hi]
    # element i is read before it is written; an output no wider than the input may overlap it
    return _rescale(graph, node, index, fields, [("same", 0)])


def _lower_dequantize16(graph, node, index, options):
    p = layer_params(graph, node)
    return _plain(graph, node, index,
                  f"qconvert_dequantize_s16_f32($in0, $out0, {_size(graph, node.outputs[0])}, "
                  f"{repr(float(p['scale']))}, {c_int(p['zero_point'])});", (), (), S16_FILES)


def _lower_mean16(graph, node, index, options):
    return _lower_mean(graph, node, index, options, bits=16, files=S16_FILES)


def _lower_rsqrt16(graph, node, index, options):
    p = layer_params(graph, node)
    call = "\n".join([f"if (qconvert_rsqrt_s16($in0, $out0, {_size(graph, node.outputs[0])}, "
                      f"{p['output_multiplier']}, {p['output_shift']}) != 0) {{",
                      "    return 3; /* a negative input: TFLite Micro stops with an error */",
                      "}"])
    return _plain(graph, node, index, call, (), (), MATH16_FILES, [("same", 0)])


def _lower_abs16(graph, node, index, options):
    p = layer_params(graph, node)
    return _plain(graph, node, index,
                  f"qconvert_abs_s16($in0, $out0, {_size(graph, node.outputs[0])}, "
                  f"{int(p['needs_rescale'])}, {p['output_multiplier']}, {p['output_shift']});",
                  (), (), MATH16_FILES, [("same", 0)])


def _lower_transpose_conv16(graph, node, index, options):
    step = _lower_transpose_conv(graph, node, index, options, bits=16)
    step.files = set(S16_FILES)
    return step


def _lower_batch_matmul16(graph, node, index, options):
    step = _lower_batch_matmul(graph, node, index, options, bits=16)
    step.files = set(S16_FILES)
    return step


def _lower_movement16(graph, node, index, options):
    step = _lower_movement(graph, node, index, options, bits=16)
    step.files = set(S16_FILES)
    return step


LOWERINGS16 = {
    "Conv2D": _lower_conv16, "DepthwiseConv2D": _lower_conv16, "FullyConnected": _lower_fc16,
    "AveragePool": _lower_pool16, "MaxPool": _lower_pool16, "Softmax": _lower_softmax16,
    "Sigmoid": _lower_sigmoid_tanh16, "Tanh": _lower_sigmoid_tanh16,
    "Relu": _lower_relu16, "LeakyRelu": _lower_relu16, "Relu6": _lower_relu6_16,
    "Quantize": _lower_quantize16, "Dequantize": _lower_dequantize16, "Mean": _lower_mean16,
    "ReduceSum": _lower_mean16,
    "Reshape": _lower_alias, "Squeeze": _lower_alias,
    "TransposeConv": _lower_transpose_conv16, "BatchMatMul": _lower_batch_matmul16,
    "Rsqrt": _lower_rsqrt16, "Abs": _lower_abs16,
    **{op: _lower_binary16 for op in ("Add", "Sub", "Mul", "Maximum", "Minimum", "PRelu",
                                      "SquaredDifference")},
    **{op: _lower_movement16 for op in _MOVEMENT},
}
