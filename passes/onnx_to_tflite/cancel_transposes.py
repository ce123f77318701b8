"""`cancel-transposes`: transposes that meet cancel; a transpose that moves no data is a reshape.

Two rules, tried in this order at each node of one sweep (`matcher.apply_fusions`):
- `compose-transposes`, pattern `Transpose(Transpose(x, p1), p2)`: the outer one reads `x`
  directly with the composed permutation `p1[p2[i]]` (a new int32 constant). The inner one may
  have other readers (it stays; `eliminate` removes it once nothing reads it), and a chain
  T1 -> T2 -> T3 composes in the one sweep: T2 reads x when T3 is visited. When the composed
  permutation is the identity, `eliminate` then removes the outer one.
  Conditions: both permutations are constant inputs (the IR's spelling of ONNX's `perm`; a
  computed one is not this pattern's) of the same length (`same_rank`).
- `transpose-as-reshape`, pattern `Transpose(x, p)` (after the first rule, at the same node):
  when the permutation moves only size-1 axes (the element order is unchanged), a Reshape to
  the output shape (an int32 shape input; the writers spell it for their format).
  Conditions: static input and output shapes (`static_shapes`), a permutation of the input's
  rank (`full_rank_perm`), not the identity (`moves_axes`: `eliminate` removes those), and the
  order of the elements kept (`order_kept`).
Math: none; values are unchanged bit for bit.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from ..matcher import ANY, Const, Edit, Fusion, Match, Op, register_rules
from .layout_state import order_preserving


def _ints(a) -> list:
    return [int(p) for p in np.asarray(a).reshape(-1)]


def same_rank(graph: Graph, m: Match) -> str | None:
    """The two permutations have the same length (else they do not compose)."""
    if len(_ints(m["inner_perm"])) != len(_ints(m["perm"])):
        return "the two permutations have different lengths"
    return None


def compose(graph: Graph, m: Match, edit: Edit) -> None:
    """The outer Transpose reads the inner one's input with the composed permutation."""
    node, inner = m.anchor, m["inner"]
    inner_perm = _ints(m["inner_perm"])
    perm = [inner_perm[p] for p in _ints(m["perm"])]
    graph.set_inputs(node, [inner.inputs[0]] + node.inputs[1:])
    name = graph.add_constant(f"{node.name}_perm", np.asarray(perm, np.int32))
    graph.set_inputs(node, [node.inputs[0], name])


COMPOSE_TRANSPOSES = Fusion(
    name="compose-transposes",
    summary="Transpose of a Transpose -> one Transpose with the composed permutation.",
    pattern=Op("Transpose", "outer", inputs=(
        Op("Transpose", "inner", inputs=(ANY, Const("inner_perm")), shared=True),
        Const("perm"))),
    conditions=(same_rank,),
    rewrite=compose,
)


def static_shapes(graph: Graph, m: Match) -> str | None:
    """The input's and the output's shapes are static (the Reshape's target is a constant)."""
    node = m.anchor
    if not (graph.tensors[node.inputs[0]].static_shape
            and graph.tensors[node.outputs[0]].static_shape):
        return "the shapes are not static"
    return None


def full_rank_perm(graph: Graph, m: Match) -> str | None:
    """The permutation has one entry per axis of the input."""
    if len(_ints(m["perm"])) != len(graph.tensors[m.anchor.inputs[0]].shape):
        return "the permutation's length is not the input's rank"
    return None


def moves_axes(graph: Graph, m: Match) -> str | None:
    """Not the identity (`eliminate` removes an identity transpose outright)."""
    perm = _ints(m["perm"])
    if perm == list(range(len(perm))):
        return "the identity permutation (eliminate removes it)"
    return None


def order_kept(graph: Graph, m: Match) -> str | None:
    """Only size-1 axes move, so the elements stay in the same order."""
    x = graph.tensors[m.anchor.inputs[0]]
    if not order_preserving([int(d) for d in x.shape], _ints(m["perm"])):
        return "the transpose moves data"
    return None


def to_reshape(graph: Graph, m: Match, edit: Edit) -> None:
    """The Transpose becomes a Reshape to its output shape."""
    node = m.anchor
    dims = [int(d) for d in graph.tensors[node.outputs[0]].shape]
    name = graph.add_constant(f"{node.name}_shape", np.asarray(dims, np.int32))
    node.op = "Reshape"
    graph.set_inputs(node, [node.inputs[0], name])
    node.attrs = {"allowzero": 0}


TRANSPOSE_AS_RESHAPE = Fusion(
    name="transpose-as-reshape",
    summary="Transpose moving only size-1 axes -> Reshape.",
    pattern=Op("Transpose", "transpose", inputs=(ANY, Const("perm"))),
    conditions=(static_shapes, full_rank_perm, moves_axes, order_kept),
    rewrite=to_reshape,
)

CANCEL_TRANSPOSES = register_rules(
    "cancel-transposes",
    "Compose transposes that meet; a transpose moving only size-1 axes becomes a reshape.",
    (COMPOSE_TRANSPOSES, TRANSPOSE_AS_RESHAPE))
