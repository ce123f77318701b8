"""Prepare of int8 arithmetic: ADD, SUB, MUL, DIV, BATCH_MATMUL and RSQRT, as this TFLite Micro
computes it (CalculateOpDataAdd / Sub / Mul / Div, BatchMatMulPrepare, PrepareAbsRsqrt).

Every ratio is taken in double: the float32 arithmetic older TFLite sources write for DIV,
BATCH_MATMUL and RSQRT is refuted at rounding ties by tests/test_int_kernels_math.py. Offsets
follow TFLite: `inputN_offset` = -z_N is added to the int8 values, `output_offset` = z_out after
requantization.
"""

from __future__ import annotations

import math

import numpy as np

from ..multipliers import quantize_multiplier_smaller_than_one
from .common import act_range, fail, per_tensor, prepare, quantize_multipliers

RSQRT_SHIFT = 20  # kShift of RsqrtEvalQuantized: RSQRT's inverse square root is scaled by 2**20


@prepare("Add", "Sub")
def add_params(graph, node) -> dict:
    """CalculateOpDataAdd / Sub: inputs rescaled to twice the larger input scale with a left
    shift of 20, QuantizeMultiplierSmallerThanOneExp of each ratio (an output multiplier >= 1
    is refused, as TFLite Micro refuses it)."""
    s1, z1 = per_tensor(graph, node, node.inputs[0])
    s2, z2 = per_tensor(graph, node, node.inputs[1])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    left_shift = 20
    twice_max = 2 * float(max(s1, s2))
    real = np.array([float(s1) / twice_max, float(s2) / twice_max,
                     twice_max / ((1 << left_shift) * float(s_out))])
    try:
        m, s = quantize_multiplier_smaller_than_one(real)
    except ValueError:
        fail(node, "output scale too small for the input scales (multiplier >= 1)")
    act_min, act_max = act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "left_shift": left_shift,
            "input1_multiplier": int(m[0]), "input1_shift": int(s[0]),
            "input2_multiplier": int(m[1]), "input2_shift": int(s[1]),
            "output_multiplier": int(m[2]), "output_shift": int(s[2]),
            "activation_min": act_min, "activation_max": act_max}


@prepare("Mul")
def mul_params(graph, node) -> dict:
    """CalculateOpDataMul: double(s1) * double(s2) / double(s_out)."""
    s1, z1 = per_tensor(graph, node, node.inputs[0])
    s2, z2 = per_tensor(graph, node, node.inputs[1])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    real = float(s1) * float(s2) / float(s_out)
    m, s = quantize_multipliers(node, real)
    act_min, act_max = act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(s),
            "activation_min": act_min, "activation_max": act_max}


@prepare("Div")
def div_params(graph, node) -> dict:
    """CalculateOpDataDiv (int8) as this TFLite Micro computes it: QuantizeMultiplier of
    double(s1) / (double(s2) * double(s_out)) (a float32 quotient, as older sources write it,
    is refuted at rounding ties); offsets -z1, -z2, +z_out; the fused activation's clamps."""
    s1, z1 = per_tensor(graph, node, node.inputs[0])
    s2, z2 = per_tensor(graph, node, node.inputs[1])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    m, e = quantize_multipliers(node, float(s1) / (float(s2) * float(s_out)))
    act_min, act_max = act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(e),
            "activation_min": act_min, "activation_max": act_max}


@prepare("BatchMatMul")
def batch_matmul_params(graph, node) -> dict:
    """BatchMatMulPrepare (int8) as this TFLite Micro computes it: QuantizeMultiplier of
    double(s_a) * double(s_b) / double(s_out) (the float32 product older sources write is
    refuted at rounding ties); the output clamps are the int8 range."""
    s_a, z_a = per_tensor(graph, node, node.inputs[0])
    s_b, z_b = per_tensor(graph, node, node.inputs[1])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    real = float(s_a) * float(s_b) / float(s_out)
    m, e = quantize_multipliers(node, real)
    return {"lhs_offset": -z_a, "rhs_offset": -z_b, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(e),
            "adj_x": bool(node.attrs.get("adj_x")), "adj_y": bool(node.attrs.get("adj_y"))}


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
