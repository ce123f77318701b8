"""On the TFLite graph after the layout pass: a RESHAPE of a RESHAPE or SQUEEZE reshapes the
first one's input directly (the layout pass leaves such pairs where 1-D and 2-D layers meet).

Pattern: `Reshape(Reshape | Squeeze(x))`, the outer Reshape the sole reader of the inner one's
output (no other reader, not a graph output, not read by a subgraph). Conditions: none more;
a reshape's result depends only on its input's elements in order and the target shape.
Rewrite: the outer Reshape reads x; the inner node and its output go.
"""

from __future__ import annotations

from qconvert.ir import Graph

from ..matcher import Edit, Fusion, Match, Op, run_fusion


def skip_first(graph: Graph, m: Match, edit: Edit) -> None:
    """The outer Reshape reads the inner one's input; the inner one goes."""
    node, first = m.anchor, m["first"]
    mid = node.inputs[0]
    graph.set_inputs(node, [first.inputs[0]] + node.inputs[1:])
    edit.remove(graph, first)
    del graph.tensors[mid]


MERGE_RESHAPES = Fusion(
    name="merge-reshapes",
    summary="Reshape of a Reshape / Squeeze -> one Reshape.",
    pattern=Op("Reshape", "reshape", inputs=(Op(("Reshape", "Squeeze"), "first"),)),
    conditions=(),
    rewrite=skip_first,
)


def merge_reshapes(graph: Graph) -> int:
    """Merge every pair of the module docstring; returns how many were merged."""
    return run_fusion(graph, MERGE_RESHAPES)
