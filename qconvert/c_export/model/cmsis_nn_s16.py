"""`export-c --kernels cmsis-nn` for 16x8 layers: CMSIS-NN's s16 kernels where they compute
what TFLite Micro's reference kernels compute, qconvert's portable `_s16` kernel elsewhere.

    step = lower_cmsis_s16(graph, portable_step, options)

Calls (CMSIS-NN 7):
- Conv2D -> arm_convolve_wrapper_s16 (int64 or int32 bias through `cmsis_nn_bias_data`; its
  64-bit requantization, arm_nn_requantize_s64 on the Q15-rounded multiplier, is TFLite's);
  grouped convolutions keep the portable kernel.
- DepthwiseConv2D -> arm_depthwise_conv_wrapper_s16 (int64 bias).
- FullyConnected with per-tensor weights of zero point 0 and an int64 bias (or none) ->
  arm_fully_connected_s16; per-channel weights or an int32 bias keep the portable kernel (the
  CMSIS-NN function takes neither).
- Add and Mul of equal shapes -> arm_elementwise_add_s16 / arm_elementwise_mul_s16.
- AveragePool / MaxPool (batch 1) -> arm_avgpool_s16 / arm_max_pool_s16.
- Softmax from int8 to int16 -> arm_softmax_s8_s16 (arm_softmax_s8's code with 16 output bits:
  TFLite Micro's Softmax<int8, int16>).

Softmax keeps the portable kernel: arm_softmax_s16 differs from TFLite Micro's SoftmaxInt16
where TFLite Micro saturates: the sum of the exponentials is normalized in int32 with no
saturation (a sum whose top 18 bits are all ones, such as 8 row maxima and one small term,
overflows to a negative index into the 1 / (1 + x) table) and the result is narrowed to int16
without TFLite Micro's clamp to [0, 32767]
(tests/c_export/test_export_c_s16.py::test_cmsis_nn_softmax_s16_differs_from_tflite_micro pins it).

Scratch: the s16 kernels' buffer sizes of CMSIS-NN 7 per build, checked at run time against
the library's own `*_get_buffer_size` answer (invoke returns 2 rather than overrun), as for
the int8 calls (see `cmsis_nn`).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.prepare import layer_params

from .cmsis_nn import (ConvKernels, status_check, cmsis_context, cmsis_step, conv_step,
                       elementwise_step, pool_step, softmax_step)
from .steps import fc_geometry, tensor_dims


def conv_s16_scratch(cin, kh, kw) -> dict:
    """Bytes of arm_convolve_wrapper_s16's im2col buffer per build."""
    k = cin * kh * kw
    return {"helium": 4 * (-(-k // 8)) * 8 * 2, "other": 2 * k * 2}


def depthwise_s16_scratch(cin, kh, kw, fast: bool) -> dict:
    """Bytes of arm_depthwise_conv_wrapper_s16's buffer per build (the fast DSP / MVE path)."""
    if not fast:
        return {"helium": 0, "other": 0}
    return {"helium": 4 * cin * kh * kw * 2 + 8, "other": cin * kh * kw * 2}


def _bias_s16(graph, node, p, channels, depthwise) -> tuple:
    """An int64 bias (the 64-bit accumulator) or an int32 one; zeros when the layer has none.
    arm_convolve_wrapper_s16 takes it through `cmsis_nn_bias_data` (is_int32_bias)."""
    wide = p["accumulator_bits"] == 64
    bias = p["bias"] if p["bias"] is not None else np.zeros(channels, np.int64)
    array = ("bias", "int64_t" if wide else "int32_t", bias)
    if depthwise:
        return array, "@L_bias", []
    return array, "&@L_bias_data", ["static const cmsis_nn_bias_data @L_bias_data = "
                                    f"{{(const void *)@L_bias, {'false' if wide else 'true'}}};"]


def _depthwise_scratch(x, y, kh, kw, p) -> dict:
    fast = y[3] == x[3] and p["dilations"] == [1, 1] and kh * kw < 512
    return depthwise_s16_scratch(x[3], kh, kw, fast)


# the 16x8 convolution calls: no row bands (an output never overlaps its input)
S16_CONV = ConvKernels("s16", lambda x, y, kh, kw, p: conv_s16_scratch(x[3], kh, kw),
                       _depthwise_scratch, _bias_s16, False)


def _fc(graph, node, step):
    p = layer_params(graph, node)
    if p["per_channel"] or p["accumulator_bits"] != 64 or p["weights_offset"] != 0:
        return step
    batches, depth, rows = fc_geometry(graph, node)
    act = f"{{{p['activation_min']}, {p['activation_max']}}}"
    decls = [f"static const cmsis_nn_fc_params @L_fc = {{0, 0, 0, {act}}};",
             "static const cmsis_nn_per_tensor_quant_params @L_quant = "
             f"{{{int(p['output_multiplier'][0])}, {int(p['output_shift'][0])}}};",
             f"static const cmsis_nn_dims @L_input_dims = {{{batches}, 1, 1, {depth}}};",
             f"static const cmsis_nn_dims @L_filter_dims = {{{depth}, 1, 1, {rows}}};",
             f"static const cmsis_nn_dims @L_bias_dims = {{1, 1, 1, {rows}}};",
             f"static const cmsis_nn_dims @L_output_dims = {{{batches}, 1, 1, {rows}}};"]
    bias = "@L_bias" if p["bias"] is not None else "NULL"
    call = ["{", *("    " + c for c in cmsis_context(None)),
            *("    " + c for c in status_check(
                f"arm_fully_connected_s16(&ctx, &@L_fc, &@L_quant, &@L_input_dims, $in0, "
                f"&@L_filter_dims, @L_weights, &@L_bias_dims, {bias}, &@L_output_dims, "
                "$out0)")), "}"]
    return cmsis_step(graph, node, step.index, call, list(step.arrays), decls)


def lower_cmsis_s16(graph, step, options):
    """`step` (a 16x8 layer) as a CMSIS-NN s16 call where that is TFLite Micro's result, else
    unchanged (see the module docstring)."""
    node = step.node
    if node.op == "Softmax" and graph.tensors[node.inputs[0]].dtype == "int8":
        return softmax_step(graph, node, step, "arm_softmax_s8_s16")
    if graph.tensors[node.inputs[0]].dtype != "int16" or \
            graph.tensors[node.outputs[0]].dtype != "int16":
        return step  # QUANTIZE / DEQUANTIZE between types: the portable kernel
    if node.op in ("Conv2D", "DepthwiseConv2D"):
        grouped = node.op == "Conv2D" and graph.tensors[node.inputs[1]].data.shape[3] != \
            tensor_dims(graph, node.inputs[0])[3]
        return step if grouped else conv_step(graph, node, step, S16_CONV)
    if node.op == "FullyConnected":
        return _fc(graph, node, step)
    if node.op in ("AveragePool", "MaxPool"):
        return pool_step(graph, node, step, "s16")
    if node.op in ("Add", "Mul"):
        return elementwise_step(graph, node, step, "s16")
    return step
