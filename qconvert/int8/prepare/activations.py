"""Prepare of int8 activation functions: SOFTMAX, LOGISTIC, TANH, HARD_SWISH, RELU, RELU6,
LEAKY_RELU and PRELU, as this TFLite Micro computes them (CalculateSoftmaxParams,
CalculateArithmeticOpDataLogistic, TanhPrepare, HardSwishPrepare, CalculateReluOpData,
Relu6Prepare, CalculateOpDataLeakyRelu, CalculatePreluParams).

Softmax's and logistic's output must be scale 1/256, zero point -128 (TFLite Micro refuses
others); TANH reads its output as 1/128, 0 whatever the tensor says; RELU6 clamps the raw input
(the output tensor's quantization is not read). LEAKY_RELU and PRELU take double ratios (float32
ones, as older sources write them, are refuted at rounding ties).
"""

from __future__ import annotations

import numpy as np

from qconvert.schemas.activations import ACTIVATION_RANGES, activation_of_op

from ..multipliers import (calculate_input_radius, frexp_multiplier,
                           quantize_multiplier_greater_than_one)
from ..multipliers import downscale_int32_to_int16_multiplier as downscale16
from ..rounding import round_half_away
from .common import fail, per_tensor, prepare, quantize_multipliers

SCALED_DIFF_INTEGER_BITS = 5  # softmax: the differences to the row max are Q5.26


@prepare("Softmax")
def softmax_params(graph, node) -> dict:
    """CalculateSoftmaxParams (int8 -> int8): PreprocessSoftmaxScaling with 5 integer bits,
    diff_min = -CalculateInputRadius(5, left_shift); output must be scale 1/256, zp -128."""
    s_in, _ = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    if graph.tensors[node.outputs[0]].dtype != "int8":
        fail(node, "only int8 output is supported")
    if z_out != -128 or s_out != np.float32(1.0 / 256):
        fail(node, f"output quantization ({s_out}, {z_out}) must be (1/256, -128)")
    beta = float(np.float32(node.attrs.get("beta", 1.0)))
    real = min(beta * float(s_in) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    if not real > 1:
        fail(node, f"input scale x beta {beta * float(s_in)} too small")
    try:
        m, s = quantize_multiplier_greater_than_one(real)
    except ValueError as exc:
        fail(node, str(exc))
    return {"input_multiplier": int(m), "input_left_shift": int(s),
            "diff_min": -calculate_input_radius(SCALED_DIFF_INTEGER_BITS, int(s))}


def _sigmoid_tanh_params(graph, node) -> dict:
    """The input scaling LOGISTIC and TANH share: s_in * 2**27 as `frexp_multiplier`, and the
    input radius beyond which the output saturates."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    real = float(s_in) * float(1 << (31 - 4))
    multiplier, e = frexp_multiplier(real)
    return {"input_zero_point": z_in, "input_multiplier": multiplier, "input_left_shift": e,
            "input_range_radius": calculate_input_radius(4, e, 31)}


@prepare("Sigmoid")
def sigmoid_params(graph, node) -> dict:
    """CalculateArithmeticOpDataLogistic: input scale * 2**27 split by frexp (no
    QuantizeMultiplier normalization), radius CalculateInputRadius(4, shift); output zp -128."""
    _, z_out = per_tensor(graph, node, node.outputs[0])
    if z_out != -128:
        fail(node, f"output zero point {z_out} must be -128")
    return _sigmoid_tanh_params(graph, node)


@prepare("Tanh")
def tanh_params(graph, node) -> dict:
    """TanhPrepare (int8): same input scaling as Logistic; the output is read as scale 1/128,
    zero point 0 whatever the tensor says (TFLM does not check it)."""
    return _sigmoid_tanh_params(graph, node)


@prepare("HardSwish")
def hard_swish_params(graph, node) -> dict:
    """HardSwishPrepare: float32 ratios hires_input_scale / s_out and hires / (3 / 32768),
    quantized then downscaled to 16-bit multipliers."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    hires = np.float32(1.0 / 128.0) * s_in
    out_real = float(np.float32(hires / s_out))
    relu_real = float(np.float32(hires / np.float32(3.0 / 32768.0)))
    m_out, e_out = quantize_multipliers(node, out_real)
    m_rel, e_rel = quantize_multipliers(node, relu_real)
    if int(e_out) > 0:
        fail(node, "output scale too small for the input scale (TFLite Micro rejects it)")
    return {"input_zero_point": z_in, "output_zero_point": z_out,
            "output_multiplier_fixedpoint_int16": downscale16(int(m_out)),
            "output_multiplier_exponent": int(e_out),
            "reluish_multiplier_fixedpoint_int16": downscale16(int(m_rel)),
            "reluish_multiplier_exponent": int(e_rel)}


@prepare("Relu")
def relu_params(graph, node) -> dict:
    """CalculateReluOpData<int8>: multiplier of double(float32(s_in / s_out)); clamp from
    z_out + roundf(0 / s_out)."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    m, s = quantize_multipliers(node, float(np.float32(s_in / s_out)))
    return {"input_zero_point": z_in, "output_zero_point": z_out,
            "output_multiplier": int(m), "output_shift": int(s),
            "activation_min": max(-128, z_out), "activation_max": 127}


@prepare("Relu6")
def relu6_params(graph, node) -> dict:
    """Relu6Prepare (int8): clamps the raw values to [z_in, z_in + round(6 / s_in)] (the input's
    quantization; the output tensor's is not read)."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    _, upper = ACTIVATION_RANGES[activation_of_op(node.op)]  # 6.0
    six = int(round_half_away(np.float32(upper) / s_in)) + z_in
    six = min(max(six, -128), 127)
    return {"zero": z_in, "six": six}


@prepare("LeakyRelu")
def leaky_relu_params(graph, node) -> dict:
    """CalculateOpDataLeakyRelu as this TFLite Micro computes it: QuantizeMultiplier of
    double(s_in) * double(alpha) / double(s_out) and of double(s_in) / double(s_out) (double
    ratios: float32 ones, as older sources write them, are refuted at rounding ties)."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    alpha = node.attrs.get("alpha")
    alpha = np.float32(0.01 if alpha is None else alpha)
    alpha_real = float(s_in) * float(alpha) / float(s_out)
    m_a, e_a = quantize_multipliers(node, abs(alpha_real))
    m_i, e_i = quantize_multipliers(node, float(s_in) / float(s_out))
    return {"input_zero_point": z_in, "output_zero_point": z_out,
            "output_multiplier_alpha": int(m_a) * (-1 if alpha_real < 0 else 1),
            "output_shift_alpha": int(e_a), "output_multiplier_identity": int(m_i),
            "output_shift_identity": int(e_i)}


@prepare("PRelu")
def prelu_params(graph, node) -> dict:
    """CalculatePreluParams: QuantizeMultiplier of double(s_in) / double(s_out) and of
    double(s_in) * double(s_alpha) / double(s_out); offsets -z_in, -z_alpha, +z_out."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_a, z_a = per_tensor(graph, node, node.inputs[1])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    m1, e1 = quantize_multipliers(node, float(s_in) / float(s_out))
    m2, e2 = quantize_multipliers(node, float(s_in) * float(s_a) / float(s_out))
    return {"input_offset": -z_in, "alpha_offset": -z_a, "output_offset": z_out,
            "output_multiplier_1": int(m1), "output_shift_1": int(e1),
            "output_multiplier_2": int(m2), "output_shift_2": int(e2)}
