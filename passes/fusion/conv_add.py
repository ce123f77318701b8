"""`fuse-conv-add`: an Add / Sub of a per-channel or scalar constant folds into the layer's bias.

Pattern: `y + k`, `k + y`, `y - k`, `k - y` with `y` a linear layer's output read by that op
only (`affine`). Math: `y + k` shifts by k, `y - k` by -k, `k - y` scales by -1 (negated
weights) and shifts by k; the bias is created when the layer has none.
Conditions (else the op stays):
- the shared ones of `affine` (the layer absorbs an affine map; no broadcast);
- the op reads two different values; `k` is a constant of the output's dtype;
- the layer has a bias slot (MatMul has none: `fuse-matmul-add` makes it a Gemm);
- `k` is per-channel for the layer (`channel_vector`), or a scalar.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from ..matcher import Fusion, Match, distinct_operands, register_fusion, same_dtype_constant
from .affine import absorb, data_index, keeps_shape, layer_absorbs, layer_then
from .linear_layer import channel_vector


def per_channel_shift(graph: Graph, m: Match) -> str | None:
    """The layer has a bias slot and `k` shifts per channel (or is a scalar)."""
    view = m.facts["view"]
    if not view.rule.has_bias:
        return f"{view.node.op} has no bias slot"
    t = channel_vector(m.consts["k"], view)
    if t is None:
        return f"k {m.values['k']!r} is not per-channel for the layer"
    if m.anchor.op == "Add":
        m.facts["affine"] = (None, t)
    elif data_index(m) == 0:  # y - k
        m.facts["affine"] = (None, -t)
    else:  # k - y
        m.facts["affine"] = (np.full(view.channels, -1.0), t)
    return None


CONV_ADD = register_fusion(Fusion(
    name="fuse-conv-add",
    summary="Fold Add / Sub of a per-channel or scalar constant into the layer's bias.",
    pattern=layer_then(("Add", "Sub")),
    conditions=(distinct_operands, layer_absorbs, keeps_shape, same_dtype_constant("k"),
                per_channel_shift),
    rewrite=absorb,
))
