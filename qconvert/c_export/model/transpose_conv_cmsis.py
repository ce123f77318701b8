"""`export-c --kernels cmsis-nn`: a TransposeConv whose kernel is its stride as CMSIS-NN fully
connected calls.

    step = transpose_conv_step(graph, node, portable_step)   # or portable_step unchanged

When kernel == stride in both dimensions, the padding is 0 and the output is exactly
input x stride (a U-Net's 2x2 stride-2 upsampling), every output pixel (oy, ox) receives one
input pixel (oy / sh, ox / sw) through one tap (oy % sh, ox % sw): no two taps add into the same
output. Then the input row r and the tap row t give the output row r * kh + t as a matrix
product: the row's iw pixels (cin values each) times the kw * cout weight rows
W[c, t, tx, :] ordered (tx, c), whose results lie in memory exactly as the output row holds
them (pixel r * sw + tx, channel c). So the layer is n * ih * kh calls of
`arm_fully_connected_per_channel_s8` (iw "batches", cin deep, kw * cout rows; the bias,
multipliers and shifts repeated kw times; Helium builds read the per-row kernel sums,
bias + input_offset * sum of the row's weights, computed here), with nothing computed at
run time that the export knows: TFLite Micro's CMSIS-NN build instead reverses the weights at
every invoke and runs arm_convolve_s8 on the zero-upscaled input (unet_small's 8x8x32 ->
16x16x16 upsampling on Cortex-M55: 1.30 M instructions with qconvert's generic kernel, see
docs/bench_mcu.md for the figure with this call).

TFLite's reference kernel sums (x + input_offset) * w per output into int32 and requantizes
with the per-channel multiplier and shift: the fully connected kernel computes the same sum
(one tap per output) and the same requantization, so the output is bit-exact. Every other
TransposeConv (overlapping taps, padding, 16x8) keeps its portable kernel.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.prepare import layer_params

from ..c_text import HELIUM_TEST
from .steps import Step, tensor_dims


def tiled(graph, node, p) -> bool:
    """True when each output pixel of the TransposeConv `node` gets exactly one tap (see the
    module docstring)."""
    w = graph.tensors[node.inputs[1]].data
    n, h, wd, c = tensor_dims(graph, node.inputs[2])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    (sh, sw), pads = p["strides"], p["pads"]
    return (w is not None and tuple(w.shape[1:3]) == (sh, sw) and tuple(pads) == (0, 0)
            and (oh, ow) == (h * sh, wd * sw) and w.shape[3] == c and w.shape[0] == oc)


def transpose_conv_step(graph, node, step) -> Step:
    """The TransposeConv `step` as fully connected calls when `tiled`, else `step`."""
    from .cmsis_nn import status_check, cmsis_step, kernel_sums

    p = layer_params(graph, node)
    if not tiled(graph, node, p):
        return step
    w = np.asarray(graph.tensors[node.inputs[1]].data)
    n, h, wd, c = tensor_dims(graph, node.inputs[2])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    kh, kw = int(w.shape[1]), int(w.shape[2])
    rows = kw * oc
    by_tap = w.transpose(1, 2, 0, 3).reshape(kh, rows, c)        # [t][(tx, c)][k]
    mult = np.resize(np.asarray(p["output_multiplier"], np.int64), oc)
    shift = np.resize(np.asarray(p["output_shift"], np.int64), oc)
    bias = None if p["bias"] is None else np.tile(np.asarray(p["bias"], np.int64), kw)
    sums = np.concatenate([kernel_sums(by_tap[t], bias, p["input_offset"], 0)
                           for t in range(kh)])
    arrays = [("weights", "int8_t", by_tap.reshape(-1)),
              ("multiplier", "int32_t", np.tile(mult, kw)),
              ("shift", "int32_t", np.tile(shift, kw)),
              ("kernel_sums", "int32_t#helium", sums)]
    if bias is not None:
        arrays.append(("bias", "int32_t", bias))
    act = f"{{{p['activation_min']}, {p['activation_max']}}}"
    decls = [f"static const cmsis_nn_fc_params @L_fc = {{{p['input_offset']}, 0, "
             f"{p['output_offset']}, {act}}};",
             "static const cmsis_nn_per_channel_quant_params @L_quant = "
             "{(int32_t *)@L_multiplier, (int32_t *)@L_shift};",
             f"static const cmsis_nn_dims @L_input_dims = {{{wd}, 1, 1, {c}}};",
             f"static const cmsis_nn_dims @L_filter_dims = {{{c}, 1, 1, {rows}}};",
             f"static const cmsis_nn_dims @L_bias_dims = {{1, 1, 1, {rows}}};",
             f"static const cmsis_nn_dims @L_output_dims = {{{wd}, 1, 1, {rows}}};"]
    call = (f"arm_fully_connected_per_channel_s8(&ctx, &@L_fc, &@L_quant, &@L_input_dims, "
            f"$in0 + r * {wd * c}, &@L_filter_dims, @L_weights + t * {rows * c}, "
            f"&@L_bias_dims, {'NULL' if bias is None else '@L_bias'}, &@L_output_dims, "
            f"$out0 + (r * {kh} + t) * {ow * oc})")
    lines = ["{", "    int32_t r, t;", "    cmsis_nn_context ctx;", "    ctx.buf = NULL;",
             "    ctx.size = 0;",
             f"    /* kernel == stride: input row r, tap row t -> output row r * {kh} + t */",
             f"    for (r = 0; r < {n * h}; ++r) {{", f"        for (t = 0; t < {kh}; ++t) {{",
             f"#if {HELIUM_TEST}",
             f"            ctx.buf = (void *)(@L_kernel_sums + t * {rows});",
             f"            ctx.size = {4 * rows};",
             "#endif",
             *("            " + line for line in status_check(call)),
             "        }", "    }", "}"]
    return cmsis_step(graph, node, step.index, lines, arrays, decls)
