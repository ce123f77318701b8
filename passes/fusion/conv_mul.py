"""`fuse-conv-mul`: a Mul / Div by a per-channel or scalar constant folds into the layer's
weights.

Pattern: `y * k`, `k * y`, `y / k` with `y` a linear layer's output read by that op only
(`affine`). Math: scale `k` (or `1 / k` for Div) per output channel: `W' = W * s`, `b' = b * s`.
Conditions (else the op stays):
- the shared ones of `affine` (the layer absorbs an affine map; no broadcast);
- the op reads two different values (`y * y` is not affine);
- `k` is a constant of the output's dtype;
- `k / y` never folds (not affine in y); `y / k` only if no element of k is 0;
- `k` is per-channel for the layer (`channel_vector`: it varies along the output-channel axis
  only, never enlarges the output), or a scalar.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from ..matcher import Fusion, Match, distinct_operands, register_fusion, same_dtype_constant
from .affine import absorb, data_index, keeps_shape, layer_absorbs, layer_then
from .linear_layer import channel_vector


def per_channel_scale(graph: Graph, m: Match) -> str | None:
    """`k` scales per channel: not `k / y`, no zero divisor, per-channel or scalar."""
    k, view = m.consts["k"], m.facts["view"]
    if m.anchor.op == "Div":
        if data_index(m) != 0:
            return "k / y is not affine in y"
        if not np.all(k != 0):
            return "the divisor has a zero element"
    s = channel_vector(k, view)
    if s is None:
        return f"k {m.values['k']!r} is not per-channel for the layer"
    m.facts["affine"] = (1.0 / s if m.anchor.op == "Div" else s, None)
    return None


CONV_MUL = register_fusion(Fusion(
    name="fuse-conv-mul",
    summary="Fold Mul / Div by a per-channel or scalar constant into the layer before it.",
    pattern=layer_then(("Mul", "Div")),
    conditions=(distinct_operands, layer_absorbs, keeps_shape, same_dtype_constant("k"),
                per_channel_scale),
    rewrite=absorb,
))
