"""Integer kernels of the comparisons (EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS,
LESS_EQUAL) and SELECT_V2, bit-exact with TFLite Micro's reference kernels (parameters:
`qconvert.int8.prepare.logic`).

- int8 comparisons (ComparisonWithScaling): each input (x + offset) << 8 scaled by
  MultiplyByQuantizedMultiplierSmallerThanOneExp of its own scale, always TFLite's
  double-rounding arithmetic (no CMSIS-NN kernel replaces it), then compared; a bool tensor.
  Inputs of other types (int32 shape arithmetic, bool) are compared raw.
- SELECT_V2: x where the condition holds, else y, the raw values copied (int8 or int16: x, y
  and the output share one quantization), the three broadcast.
- REDUCE_MAX / REDUCE_MIN: the largest / smallest raw value over the axes (int8 or int16: the
  input and output share one quantization); a reduction over axis 0 refuses a batch of samples.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import requantize_int32
from qconvert.int8.prepare.logic import COMPARISON_OPS

from .float_kernels import KERNELS as FLOAT_KERNELS
from .float_kernels_logic import COMPARISONS
from .int_kernel_base import batch_guard, kernel


def _scaled(x, p, k: int):
    """Input `k` (1 or 2) in the comparison's common unit."""
    shifted = (x.astype(np.int64) + p[f"input{k}_offset"]) << p["left_shift"]
    return requantize_int32(shifted, p[f"input{k}_multiplier"], p[f"input{k}_shift"], "double")


@kernel(*COMPARISON_OPS)
def comparison(node, inputs, p, ctx):
    """ComparisonWithScaling (int8) or the raw comparison (other types): a bool tensor."""
    a, b = inputs[0], inputs[1]
    if p["scaled"]:
        a, b = _scaled(a, p, 1), _scaled(b, p, 2)
    return [np.asarray(COMPARISONS[node.op](a, b), dtype=np.bool_)]


@kernel("SelectV2")
def select_v2(node, inputs, p, ctx):
    """SELECT_V2: the raw values of x or y (the type of x, int8 or int16)."""
    condition, x, y = inputs
    return [np.where(condition.astype(np.bool_), x, y).astype(x.dtype, copy=False)]


@kernel("ReduceMax", "ReduceMin")
def reduce_extreme(node, inputs, p, ctx):
    """REDUCE_MAX / REDUCE_MIN: the float kernel's reduction of the raw values (the type of the
    input, int8 or int16)."""
    x = inputs[0]
    axes = {int(a) % max(x.ndim, 1) for a in p["axes"]}
    batch_guard(node, ctx, 0 not in axes or not p["axes"], f"{node.op} over axis 0")
    return [np.array(FLOAT_KERNELS[node.op](node, inputs, [None])[0], order="C")]  # 0-d kept
