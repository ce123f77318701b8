"""`x * HardSigmoid(x)` becomes `HardSwish(x)` (on the ONNX graph, before the layout pass).

PyTorch exports hardswish before opset 14 as HardSigmoid(alpha 1/6, beta 1/2) and a Mul; TFLite
has HARD_SWISH, one op (and one int8 requantization) instead of four.
Pattern: `Mul(x, HardSigmoid(x))` in either order, the Mul the sole reader of the HardSigmoid's
output (not a graph output, not read by a subgraph).
Conditions: HardSigmoid's alpha is 1/6 (to 1e-6 relative) and beta 1/2, so the product is
`x * relu6(x + 3) / 6`, HardSwish's definition. Rewrite: the Mul becomes HardSwish(x); the
HardSigmoid and its output go.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from ..matcher import Edit, Fusion, Match, Op, Value, run_fusion

HARD_SWISH_ALPHA, HARD_SWISH_BETA = 1.0 / 6.0, 0.5


def hardswish_constants(graph: Graph, m: Match) -> str | None:
    """HardSigmoid's alpha is 1/6 and beta 1/2 (PyTorch's hardswish)."""
    h = m["hs"]
    alpha, beta = float(h.attrs.get("alpha", 0.2)), float(h.attrs.get("beta", 0.5))
    if not np.isclose(alpha, HARD_SWISH_ALPHA, rtol=1e-6, atol=0) or beta != HARD_SWISH_BETA:
        return f"HardSigmoid alpha {alpha:g}, beta {beta:g} (not 1/6, 1/2)"
    return None


def to_hard_swish(graph: Graph, m: Match, edit: Edit) -> None:
    """The Mul becomes HardSwish(x); the HardSigmoid goes."""
    node, h = m.anchor, m["hs"]
    del graph.tensors[h.outputs[0]]
    edit.remove(graph, h)
    node.op, node.attrs = "HardSwish", {}
    graph.set_inputs(node, [m["x"]])


HARD_SWISH = Fusion(
    name="fuse-hard-swish",
    summary="Mul(x, HardSigmoid(x)) with alpha 1/6, beta 1/2 -> HardSwish(x).",
    pattern=Op("Mul", "mul", inputs=(Op("HardSigmoid", "hs", inputs=(Value("x"),)), Value("x")),
               commutative=True),
    conditions=(hardswish_constants,),
    rewrite=to_hard_swish,
)


def fuse_hard_swish(graph: Graph) -> int:
    """Rewrite every `x * HardSigmoid(x)` of the module docstring; returns how many."""
    return run_fusion(graph, HARD_SWISH)
