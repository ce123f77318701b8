"""Prepare of the layers with weights: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and
TRANSPOSE_CONV, as TFLite Micro computes it (PopulateConvolutionQuantizationParams,
CalculateOpDataFullyConnected, TransposeConv's Prepare).

Per output channel (a per-tensor weight scale is broadcast; one entry for a per-tensor
FullyConnected): `output_multiplier` / `output_shift` (int32 arrays) from `conv_multipliers`,
the real `effective_scale` they encode, `input_offset` = -z_in, `output_offset` = z_out, the
fused activation's clamps, the int32 `bias` (int64 copy, or None) and the geometry.
"""

from __future__ import annotations

import numpy as np

from qconvert.padding import transpose_conv_pads

from ..multipliers import conv_multipliers
from .common import act_range, bias_of, fail, per_tensor, prepare, weights_of


@prepare("Conv2D", "DepthwiseConv2D")
def conv_params(graph, node) -> dict:
    """PopulateConvolutionQuantizationParams: per channel (a per-tensor weight scale is
    broadcast), effective scale double(s_in) * double(s_w[c]) / double(s_out)."""
    w = weights_of(graph, node)
    depthwise = node.op == "DepthwiseConv2D"
    channels = int(w.data.shape[3] if depthwise else w.data.shape[0])
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    s_w = w.quant.scale
    if s_w.size not in (1, channels):
        fail(node, f"{s_w.size} weight scales for {channels} output channels")
    s_w = np.broadcast_to(s_w, (channels,))
    try:
        real, multiplier, shift = conv_multipliers(s_in, s_w, s_out)
    except ValueError as exc:
        fail(node, str(exc))
    act_min, act_max = act_range(node, s_out, z_out)
    attrs = node.attrs
    out = {
        "per_channel": bool(w.quant.scale.size > 1),
        "input_offset": -z_in, "output_offset": z_out,
        "output_multiplier": multiplier, "output_shift": shift,
        "effective_scale": real,
        "activation_min": act_min, "activation_max": act_max,
        "bias": bias_of(graph, node, 2, channels),
        "strides": [int(v) for v in attrs.get("strides") or [1, 1]],
        "dilations": [int(v) for v in attrs.get("dilations") or [1, 1]],
        "pads": [int(v) for v in attrs.get("pads") or [0, 0, 0, 0]],
    }
    x_shape = graph.tensors[node.inputs[0]].shape
    if not depthwise and x_shape and isinstance(x_shape[-1], (int, np.integer)) \
            and int(x_shape[-1]) != int(w.data.shape[3]):
        out["groups"] = int(x_shape[-1]) // int(w.data.shape[3])  # a grouped CONV_2D
    if depthwise:
        if out["bias"] is None:  # TFLM's DEPTHWISE_CONV_2D dereferences it (segfault)
            fail(node, "TFLite Micro's DEPTHWISE_CONV_2D needs a bias tensor (use zeros)")
        out["depth_multiplier"] = int(attrs.get("depth_multiplier") or 0)
    return out


@prepare("FullyConnected")
def fc_params(graph, node) -> dict:
    """CalculateOpDataFullyConnected: per channel when the weights carry more than one scale,
    else one multiplier (and TFLM's bias-scale check). Both take the double product
    double(s_in) * double(s_w) / double(s_out): probes of TFLite Micro (and of LiteRT's
    reference kernels) show that the per-tensor path does *not* round s_in * s_w to float32
    first (tests/executor/test_int_executor.py::test_layer_params_multipliers_are_tflms_to_the_last_bit).
    """
    w = weights_of(graph, node)
    channels = int(w.data.shape[0])
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    s_w = w.quant.scale
    per_channel = s_w.size > 1
    if per_channel and s_w.size != channels:
        fail(node, f"{s_w.size} weight scales for {channels} output channels")
    bias = bias_of(graph, node, 2, channels)
    if not per_channel and bias is not None:
        bq = graph.tensors[node.inputs[2]].quant
        bias_scale = float(bq.scale[0]) if bq is not None and bq.scale.size else 0.0
        product = float(s_in) * float(s_w[0])
        if abs(product - bias_scale) / float(s_out) > 0.02:
            fail(node, f"bias scale {bias_scale} differs from input scale x weight scale "
                        f"{product} (TFLite Micro rejects the layer)")
    try:
        real, multiplier, shift = conv_multipliers(s_in, s_w if per_channel else s_w[:1], s_out)
    except ValueError as exc:
        fail(node, str(exc))
    act_min, act_max = act_range(node, s_out, z_out)
    z_w = int(w.quant.zero_point[0]) if w.quant.zero_point.size else 0
    return {
        "per_channel": bool(per_channel),
        "input_offset": -z_in, "weights_offset": 0 if per_channel else -z_w,
        "output_offset": z_out,
        "output_multiplier": multiplier, "output_shift": shift, "effective_scale": real,
        "activation_min": act_min, "activation_max": act_max, "bias": bias,
        "keep_num_dims": bool(node.attrs.get("keep_num_dims") or False),
    }


@prepare("TransposeConv")
def transpose_conv_params(graph, node) -> dict:
    """TFLM TransposeConv Prepare: per-channel multipliers, the padding of the output size."""
    w = graph.tensors[node.inputs[1]]
    if w.data is None or w.data.dtype != np.int8 or w.quant is None or not w.quant.scale.size:
        fail(node, f"weights {node.inputs[1]!r} are not int8 constants with scales")
    shape = graph.tensors[node.inputs[0]].data
    if shape is None:
        fail(node, "output_shape is not a constant")
    out_shape = [int(v) for v in np.asarray(shape).reshape(-1)]
    channels, kh, kw, _ = w.data.shape
    s_in, z_in = per_tensor(graph, node, node.inputs[2])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    s_w = w.quant.scale
    if s_w.size not in (1, channels):
        fail(node, f"{s_w.size} weight scales for {channels} output channels")
    try:
        real, multiplier, shift = conv_multipliers(s_in, np.broadcast_to(s_w, (channels,)),
                                                   s_out)
    except ValueError as exc:
        fail(node, str(exc))
    act_min, act_max = act_range(node, s_out, z_out)
    strides = [int(v) for v in node.attrs.get("strides") or [1, 1]]
    top, left = transpose_conv_pads(node.attrs.get("padding", "VALID"), out_shape[1:3],
                                    (kh, kw), strides)
    return {"per_channel": bool(s_w.size > 1), "input_offset": -z_in, "output_offset": z_out,
            "output_multiplier": multiplier, "output_shift": shift, "effective_scale": real,
            "activation_min": act_min, "activation_max": act_max,
            "bias": bias_of(graph, node, 3, channels), "strides": strides,
            "pads": [top, left], "output_shape": out_shape}
