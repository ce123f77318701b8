"""Prepare of int8 arithmetic: ADD, SUB, MUL, DIV, BATCH_MATMUL, SQUARED_DIFFERENCE, ABS,
L2_NORMALIZATION and RSQRT, as this TFLite Micro computes it (CalculateOpDataAdd / Sub / Mul /
Div, BatchMatMulPrepare, SquaredDifferencePrepare, L2Norm's Prepare, PrepareAbsRsqrt).

Every ratio is taken in double: the float32 arithmetic older TFLite sources write for DIV,
BATCH_MATMUL and RSQRT is refuted at rounding ties by tests/executor/test_int_kernels_math.py. Offsets
follow TFLite: `inputN_offset` = -z_N is added to the int8 values, `output_offset` = z_out after
requantization.
"""

from __future__ import annotations

import math

import numpy as np

from ..multipliers import quantize_multiplier_smaller_than_one
from .common import act_range, fail, fused_activation, per_tensor, prepare, quantize_multipliers

RSQRT_SHIFT = 20  # kShift of RsqrtEvalQuantized: RSQRT's inverse square root is scaled by 2**20


def operand_scales(graph, node, scale_of=per_tensor) -> list:
    """[(s1, z1), (s2, z2), (s_out, z_out)] of a binary op's two inputs and its output
    (`scale_of`: `per_tensor`, or the 16x8 layers' symmetric one)."""
    return [scale_of(graph, node, name) for name in (node.inputs[0], node.inputs[1],
                                                     node.outputs[0])]


def add_rescaling(node, s1, s2, s_out, left_shift: int) -> dict:
    """CalculateOpDataAdd / Sub's multipliers (int8 and int16 alike, `left_shift` 20 and 15):
    the inputs rescaled to twice the larger input scale, QuantizeMultiplierSmallerThanOneExp of
    each ratio in double (an output multiplier >= 1 is refused, as TFLite Micro refuses it)."""
    twice_max = 2 * float(max(s1, s2))
    real = np.array([float(s1) / twice_max, float(s2) / twice_max,
                     twice_max / ((1 << left_shift) * float(s_out))])
    try:
        m, s = quantize_multiplier_smaller_than_one(real)
    except ValueError:
        fail(node, "output scale too small for the input scales (multiplier >= 1)")
    return {"left_shift": left_shift,
            "input1_multiplier": int(m[0]), "input1_shift": int(s[0]),
            "input2_multiplier": int(m[1]), "input2_shift": int(s[1]),
            "output_multiplier": int(m[2]), "output_shift": int(s[2])}


@prepare("Add", "Sub")
def add_params(graph, node) -> dict:
    """CalculateOpDataAdd / Sub: `add_rescaling` with a left shift of 20; offsets -z1, -z2,
    +z_out; the fused activation's clamps."""
    (s1, z1), (s2, z2), (s_out, z_out) = operand_scales(graph, node)
    rescaling = add_rescaling(node, s1, s2, s_out, 20)
    act_min, act_max = act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out, **rescaling,
            "activation_min": act_min, "activation_max": act_max}


def _one_multiplier(node, scales, real) -> dict:
    """Offsets, QuantizeMultiplier of `real` and the fused activation's clamps (MUL, DIV) from
    the `operand_scales`."""
    (_, z1), (_, z2), (s_out, z_out) = scales
    m, e = quantize_multipliers(node, real)
    act_min, act_max = act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(e),
            "activation_min": act_min, "activation_max": act_max}


@prepare("Mul")
def mul_params(graph, node) -> dict:
    """CalculateOpDataMul: double(s1) * double(s2) / double(s_out)."""
    scales = operand_scales(graph, node)
    (s1, _), (s2, _), (s_out, _) = scales
    return _one_multiplier(node, scales, float(s1) * float(s2) / float(s_out))


@prepare("Div")
def div_params(graph, node) -> dict:
    """CalculateOpDataDiv (int8) as this TFLite Micro computes it: QuantizeMultiplier of
    double(s1) / (double(s2) * double(s_out)) (a float32 quotient, as older sources write it,
    is refuted at rounding ties); offsets -z1, -z2, +z_out; the fused activation's clamps."""
    scales = operand_scales(graph, node)
    (s1, _), (s2, _), (s_out, _) = scales
    return _one_multiplier(node, scales, float(s1) / (float(s2) * float(s_out)))


@prepare("BatchMatMul")
def batch_matmul_params(graph, node) -> dict:
    """BatchMatMulPrepare (int8) as this TFLite Micro computes it: QuantizeMultiplier of
    double(s_a) * double(s_b) / double(s_out) (the float32 product older sources write is
    refuted at rounding ties); the output clamps are the int8 range."""
    (s_a, z_a), (s_b, z_b), (s_out, z_out) = operand_scales(graph, node)
    real = float(s_a) * float(s_b) / float(s_out)
    m, e = quantize_multipliers(node, real)
    return {"lhs_offset": -z_a, "rhs_offset": -z_b, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(e),
            "adj_x": bool(node.attrs.get("adj_x")), "adj_y": bool(node.attrs.get("adj_y"))}


@prepare("SquaredDifference")
def squared_difference_params(graph, node, left_shift=7, type_range=(-128, 127)) -> dict:
    """SquaredDifferencePrepare: as ADD, both inputs rescaled to twice the larger input scale
    with a left shift (7 for int8, 0 for int16: `left_shift`), their difference squared,
    QuantizeMultiplier of twice_max ** 2 / (2 ** (2 left_shift) s_out); clamps the type's
    range."""
    (s1, z1), (s2, z2), (s_out, z_out) = operand_scales(graph, node)
    twice_max = 2.0 * float(max(s1, s2))
    try:
        m, s = quantize_multiplier_smaller_than_one(
            np.array([float(s1) / twice_max, float(s2) / twice_max]))
    except ValueError as exc:
        fail(node, str(exc))
    m_out, s_out_shift = quantize_multipliers(
        node, twice_max * twice_max / ((1 << (2 * left_shift)) * float(s_out)))
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "left_shift": left_shift,
            "input1_multiplier": int(m[0]), "input1_shift": int(s[0]),
            "input2_multiplier": int(m[1]), "input2_shift": int(s[1]),
            "output_multiplier": int(m_out), "output_shift": int(s_out_shift),
            "activation_min": type_range[0], "activation_max": type_range[1]}


@prepare("Abs")
def abs_params(graph, node) -> dict:
    """PrepareAbsRsqrt (ABS): a rescale only when the float32 scales differ, then
    QuantizeMultiplier of double(float32(s_in / s_out)) (the ratio taken in float, as TFLite
    Micro's SetAbsOutputMultiplier does)."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    needs_rescale = bool(np.float32(s_in) != np.float32(s_out))
    m, e = (quantize_multipliers(node, float(np.float32(s_in) / np.float32(s_out)))
            if needs_rescale else (0, 0))
    return {"input_zero_point": z_in, "output_zero_point": z_out,
            "needs_rescale": needs_rescale, "output_multiplier": int(m), "output_shift": int(e)}


@prepare("L2Normalization")
def l2_normalization_params(graph, node) -> dict:
    """L2_NORMALIZATION's Prepare: the input zero point; no fused activation (TFLite Micro
    refuses one). The output's quantization is not read: Eval writes steps of 1/128 from 0."""
    if fused_activation(node) != "NONE":
        fail(node, "fused activation on L2_NORMALIZATION (TFLite Micro refuses it)")
    _, z_in = per_tensor(graph, node, node.inputs[0])
    return {"input_zero_point": z_in}


@prepare("Rsqrt")
def rsqrt_params(graph, node) -> dict:
    """PrepareAbsRsqrt (RSQRT, int8) as this TFLite Micro computes it: QuantizeMultiplier of
    1 / (sqrt(double(s_in)) * double(s_out)) (the float32 sqrtf and product of older sources
    are refuted at rounding ties)."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    real = 1.0 / (math.sqrt(float(s_in)) * float(s_out))
    m, e = quantize_multipliers(node, real)
    if not -31 <= int(e) - RSQRT_SHIFT <= 30:
        fail(node, f"output scale {s_out} out of range for RSQRT's input scale {s_in}")
    return {"input_zero_point": z_in, "output_zero_point": z_out, "output_multiplier": int(m),
            "output_shift": int(e)}
