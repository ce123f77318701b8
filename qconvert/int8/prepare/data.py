"""Prepare of int8 QUANTIZE, DEQUANTIZE and the ops that move values: CONCATENATION, PAD / PADV2,
RESHAPE, and those TFLite Micro derives nothing for (`NO_PARAMS_OPS`).

QUANTIZE of an integer input requantizes with QuantizeMultiplier(double(s_in) / double(s_out));
CONCATENATION never requantizes, so every input must carry the output's quantization (TFLite
Micro refuses others); the pad value defaults to the output zero point.
"""

from __future__ import annotations

import numpy as np

from .common import LAYER_PARAMS, fail, fused_activation, no_params, per_tensor, prepare, \
    quantize_multipliers

NO_PARAMS_OPS = ("Squeeze", "ExpandDims", "MirrorPad", "DepthToSpaceNHWC", "Fill", "Transpose",
                 "Gather", "Maximum", "Minimum", "StridedSlice", "ResizeBilinear", "ResizeNearest",
                 "SplitEqual", "SplitSizes", "SliceBySize", "Unpack")


@prepare("Quantize")
def quantize_params(graph, node) -> dict:
    """PrepareQuantizeReference: float input -> AffineQuantize with the output's (scale, zp);
    integer input -> Requantize with QuantizeMultiplier(double(s_in) / double(s_out)); the
    output's type (`output_dtype`): int8, or uint8 at a Model Maker model's output edge."""
    out_t = graph.tensors[node.outputs[0]]
    if out_t.quant is None or out_t.quant.scale.size != 1:
        fail(node, "output must be quantized per tensor")
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    result = {"scale": float(s_out), "zero_point": z_out,
              "output_dtype": out_t.dtype if out_t.dtype in ("int8", "uint8") else "int8"}
    if graph.tensors[node.inputs[0]].dtype in ("int8", "uint8", "int16"):
        s_in, z_in = per_tensor(graph, node, node.inputs[0])
        m, s = quantize_multipliers(node, float(s_in) / float(s_out))
        result.update({"input_zero_point": z_in, "output_multiplier": int(m),
                       "output_shift": int(s)})
    return result


@prepare("Dequantize")
def dequantize_params(graph, node) -> dict:
    """DEQUANTIZE: the input's scale and zero point."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    return {"scale": float(s_in), "zero_point": z_in}


def concat_params_with(graph, node, quantization, refusal: str) -> dict:
    """ConcatenationPrepare: no fused activation, and every input must carry the output's
    quantization (read by `quantization(graph, node, name)`), else `refusal` ends the error;
    Eval copies the raw values. Shared by the int8 and the 16x8 Prepare."""
    if fused_activation(node) != "NONE":
        fail(node, "fused activation on CONCATENATION (TFLite Micro refuses it)")
    out_q = quantization(graph, node, node.outputs[0])
    for name in node.inputs:
        if name is not None and quantization(graph, node, name) != out_q:
            fail(node, f"input {name!r} is quantized {per_tensor(graph, node, name)}, the "
                        f"output {out_q}: {refusal}")
    return {"axis": int(node.attrs.get("axis", 0))}


@prepare("Reverse")
def reverse_params(graph, node) -> dict:
    """REVERSE_V2: constant axes that, sorted, are contiguous (TFLite Micro refuses others)."""
    data = graph.tensors[node.inputs[1]].data
    if data is None:
        fail(node, "axis is not a constant")
    rank = len(graph.tensors[node.inputs[0]].shape)
    axes = sorted(int(a) % rank for a in np.asarray(data).reshape(-1))
    if any(b != a + 1 for a, b in zip(axes, axes[1:])):
        fail(node, f"axes {axes} are not contiguous (TFLite Micro's REVERSE_V2 refuses them)")
    return {"axes": axes}


@prepare("Pack")
def pack_params(graph, node) -> dict:
    """PACK (int8): TFLite Micro copies the raw values, so every input must carry the output's
    scale and zero point (qconvert writes them so; others are refused)."""
    return concat_params_with(graph, node, per_tensor, "PACK does not requantize")


@prepare("Concat")
def concat_params(graph, node) -> dict:
    """ConcatenationPrepare (int8): every input must carry the output's scale and zero point
    and there is no fused activation; Eval copies the raw int8 values. TFLite Micro has no
    requantizing int8 concatenation, so a model needing one is refused, as TFLM refuses it."""
    return concat_params_with(graph, node, per_tensor,
                              "TFLite Micro requires them equal (no requantization)")


@prepare("Pad", "PadV2")
def pad_params(graph, node) -> dict:
    """PAD / PADV2 (int8): the pad value is the constant input, else the output zero point."""
    _, z_out = per_tensor(graph, node, node.outputs[0])
    value_name = node.inputs[2] if len(node.inputs) > 2 else None
    if value_name is not None:
        data = graph.tensors[value_name].data
        if data is None:
            fail(node, "pad value is not a constant")
        value = int(np.asarray(data).reshape(-1)[0])
    else:
        value = z_out
    return {"pad_value": value}


@prepare("Reshape")
def reshape_params(graph, node) -> dict:
    """The output tensor's shape (dynamic dimensions as -1): TFLM's fallback when the node has
    no shape (no shape input, no `new_shape` option: the IR's shape input)."""
    shape = graph.tensors[node.outputs[0]].shape
    return {"output_shape": None if shape is None else
            [int(d) if isinstance(d, (int, np.integer)) else -1 for d in shape]}


for _op in NO_PARAMS_OPS:
    LAYER_PARAMS[_op] = no_params
