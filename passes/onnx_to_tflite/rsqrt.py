"""`a / Sqrt(v)` becomes `a * Rsqrt(v)` and `1 / Sqrt(v)` becomes `Rsqrt(v)` (on the ONNX
graph, before the layout pass): a decomposed LayerNorm then needs only ops TFLite Micro runs in
int8 (RSQRT, MUL), not SQRT and DIV.

Patterns: `Div(a, Sqrt(v))` and `Reciprocal(Sqrt(v))`, the Div / Reciprocal the sole reader of
the Sqrt's output (not a graph output, not read by a subgraph).
Conditions: the Div's numerator is not the Sqrt's output itself (`Sqrt(v) / Sqrt(v)` is 1,
not `Rsqrt(v) * Rsqrt(v)`). Math: `1 / sqrt(v) = rsqrt(v)`.
Rewrite: Div -> Mul and the Sqrt becomes Rsqrt; Reciprocal -> Rsqrt(v) and the Sqrt goes.
"""

from __future__ import annotations

from qconvert.ir import Graph

from ..matcher import ANY, Edit, Fusion, Match, Op, run_fusion


def numerator_not_root(graph: Graph, m: Match) -> str | None:
    """The Div's numerator is not the Sqrt's output (a / a is not a * rsqrt(a)^2)."""
    if m.anchor.inputs[0] == m["sqrt"].outputs[0]:
        return "the Div divides the Sqrt's output by itself"
    return None


def div_to_mul(graph: Graph, m: Match, edit: Edit) -> None:
    """Sqrt -> Rsqrt, Div -> Mul (same inputs)."""
    m["sqrt"].op = "Rsqrt"
    m.anchor.op = "Mul"


def reciprocal_to_rsqrt(graph: Graph, m: Match, edit: Edit) -> None:
    """Reciprocal(Sqrt(v)) -> Rsqrt(v); the Sqrt goes."""
    node, sqrt = m.anchor, m["sqrt"]
    s = sqrt.outputs[0]
    node.op = "Rsqrt"
    graph.set_inputs(node, [sqrt.inputs[0]])
    del graph.tensors[s]
    edit.remove(graph, sqrt)


DIV_SQRT = Fusion(
    name="fuse-div-sqrt",
    summary="Div(a, Sqrt(v)) -> Mul(a, Rsqrt(v)).",
    pattern=Op("Div", "div", inputs=(ANY, Op("Sqrt", "sqrt"))),
    conditions=(numerator_not_root,),
    rewrite=div_to_mul,
)
RECIPROCAL_SQRT = Fusion(
    name="fuse-reciprocal-sqrt",
    summary="Reciprocal(Sqrt(v)) -> Rsqrt(v).",
    pattern=Op("Reciprocal", "reciprocal", inputs=(Op("Sqrt", "sqrt"),)),
    conditions=(),
    rewrite=reciprocal_to_rsqrt,
)


def fuse_rsqrt(graph: Graph) -> int:
    """Both rewrites of the module docstring; returns how many were made."""
    return run_fusion(graph, DIV_SQRT) + run_fusion(graph, RECIPROCAL_SQRT)
