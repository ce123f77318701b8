"""DepthwiseConv2D (int8, depth multiplier 1) as `qconvert_dw_s8`, the four-channel kernel of
kernels/qconvert_nn_depthwise.c, with what the exporter knows ahead of time.

    step = lower_depthwise(graph, node, index, options)   # a steps.Step

What is decided here rather than at run time: the weights re-laid out in the order the kernel
reads them (`dw_weights_layout`: groups of four channels, tap by tap, then the last channels
% 4), and whether every channel's requantization takes the short form (`fast_requantize`).
Layers the kernel does not cover (16x8 activations, a depth multiplier other than 1) keep
`steps`' lowering. With --kernels cmsis-nn the step calls qconvert_dw_hwc_s8, which reads
the arrays CMSIS-NN's call reads (TFLite's weight order and shifts), so `fast_steps.keep_on_dsp`
can put both calls in one step over one copy of the weights.
The output overlaps its input as today's depthwise kernel allows: the kernel writes four
channels of a pixel after reading all their taps, so the per-element "reads" bound holds.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.prepare import layer_params

from .steps import (conv_overlap, lower_conv, plain_step, c_struct, activation_of,
                    tensor_dims)

FAST_FILES = frozenset({"qconvert_nn_fast.h", "qconvert_nn_simd.h"})  # every fast kernel's
DW_FILES = FAST_FILES | {"qconvert_nn_depthwise.c"}
# qconvert_dw_hwc_s8: TFLite's weight order and shifts (its source includes the other's)
DW_HWC_FILES = DW_FILES | {"qconvert_nn_depthwise_hwc.c"}


def dw_weights_layout(w: np.ndarray) -> np.ndarray:
    """Depthwise weights [1][kh][kw][C] in the kernel's order: for each group of four channels
    its taps (ky, kx) each as four bytes, then the last C % 4 channels tap-major."""
    taps = w.reshape(-1, w.shape[-1])  # [taps][C]
    c4 = taps.shape[1] // 4 * 4
    groups = taps[:, :c4].reshape(taps.shape[0], c4 // 4, 4).transpose(1, 0, 2)
    return np.concatenate([groups.reshape(-1), taps[:, c4:].reshape(-1)]).astype(np.int8)


def fast_requantize(multiplier, shift) -> bool:
    """True when every channel's (multiplier, shift) suits qconvert_requantize_fast:
    multiplier in [2^30, 2^31) and shift <= -2 (a right shift of at least 2)."""
    m = np.asarray(multiplier, np.int64)
    s = np.asarray(shift, np.int64)
    return bool(np.all((m >= 1 << 30) & (m < 1 << 31) & (s <= -2)))


def covered(graph, node) -> bool:
    """True when qconvert_dw_s8 computes `node`: int8 activations, depth multiplier 1."""
    w = graph.tensors[node.inputs[1]].data
    return activation_of(graph, node).bits == 8 and \
        int(w.shape[3]) == tensor_dims(graph, node.inputs[0])[3]


def lower_depthwise(graph, node, index, options):
    """The step of a DepthwiseConv2D node (see the module docstring)."""
    if not covered(graph, node):
        return lower_conv(graph, node, index, options)
    hwc = options.kernels != "portable"  # CMSIS-NN reads the same arrays
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    kernel_hw = (int(w.shape[1]), int(w.shape[2]))
    n, h, wd, c = tensor_dims(graph, node.inputs[0])
    _, oh, ow, _ = tensor_dims(graph, node.outputs[0])
    (sh, sw), (dh, dw), pads = p["strides"], p.get("dilations", [1, 1]), p["pads"]
    bias_arrays, bias = act.bias_arguments(p, c)
    fast = fast_requantize(p["output_multiplier"], p["output_shift"])
    shift = -np.asarray(p["output_shift"], np.int64) - 2 if fast and not hwc \
        else p["output_shift"]
    arrays = [("weights", "int8_t", w if hwc else dw_weights_layout(w)),
              ("multiplier", "int32_t", p["output_multiplier"]), ("shift", "int32_t", shift),
              *bias_arrays]
    fields = [n, h, wd, c, oh, ow, *kernel_hw, sh, sw, dh, dw, pads[0], pads[1],
              p["input_offset"], p["output_offset"], p["activation_min"], p["activation_max"],
              "@L_multiplier", "@L_shift", 1 if fast else 0]
    decls = [f"static const qconvert_dw_params @L_params = {c_struct(fields)};"]
    fn = "qconvert_dw_hwc_s8" if hwc else "qconvert_dw_s8"
    return plain_step(graph, node, index, f"{fn}($in0, @L_weights, {bias}, $out0, &@L_params);",
                      arrays, decls, DW_HWC_FILES if hwc else DW_FILES,
                  conv_overlap(graph, node, p, kernel_hw, lambda oc: oc, act))
