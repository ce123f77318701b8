"""Prepare of the comparisons (EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL) and
SELECT_V2, as this TFLite Micro computes it (ComparisonsPrepare, SelectPrepare).

Comparisons of int8 inputs rescale each input by its own scale before comparing: left shift 8,
then QuantizeMultiplierSmallerThanOneExp of the input's scale itself (not a ratio: the two
sides end in one common unit, 2**8 / 2**31 of a real unit), so a scale of 1 or more is refused
as TFLite Micro's check stops there. Inputs of any other type (int32 shape arithmetic, float,
bool) are compared raw. There are no int16 parameters in this TFLite Micro (its GREATER /
LESS would run an int16 input with zero multipliers), so comparisons have no 16x8 form.
SELECT_V2 derives nothing: Eval copies the raw values of x or y (the quantizer gives x, y and
the output one scale).
"""

from __future__ import annotations

import numpy as np

from ..multipliers import quantize_multiplier_smaller_than_one
from .common import LAYER_PARAMS, fail, no_params, per_tensor, prepare

COMPARISON_OPS = ("Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual")
COMPARISON_LEFT_SHIFT = 8


@prepare(*COMPARISON_OPS)
def comparison_params(graph, node) -> dict:
    """ComparisonsPrepare: `scaled` (int8 inputs) with left_shift 8 and each input's offset,
    multiplier and shift (QuantizeMultiplierSmallerThanOneExp of its scale)."""
    dtypes = [graph.tensors[name].dtype for name in node.inputs[:2]]
    if dtypes[0] != dtypes[1]:
        fail(node, f"inputs of {dtypes[0]} and {dtypes[1]} (TFLite Micro compares one type)")
    if dtypes[0] != "int8":  # compared raw: TFLite Micro leaves the parameters at 0
        return {"scaled": False, "left_shift": 0,
                **{f"input{k}_{f}": 0 for k in (1, 2) for f in ("offset", "multiplier", "shift")}}
    result = {"scaled": True, "left_shift": COMPARISON_LEFT_SHIFT}
    for k, name in enumerate(node.inputs[:2], start=1):
        scale, zp = per_tensor(graph, node, name)
        try:
            m, s = quantize_multiplier_smaller_than_one(np.float64(scale))
        except ValueError:
            fail(node, f"input {name!r} has scale {scale}, TFLite Micro needs one below 1")
        result.update({f"input{k}_offset": -zp, f"input{k}_multiplier": int(m),
                       f"input{k}_shift": int(s)})
    return result


LAYER_PARAMS["SelectV2"] = no_params
