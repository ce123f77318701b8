"""`cancel-transposes`: transposes that meet cancel; a transpose that moves no data is a reshape.

Patterns:
- `Transpose(Transpose(x, p1), p2)`: the outer one reads `x` directly with the composed
  permutation `p1[p2[i]]`; when that is the identity `eliminate` then removes it, and the inner
  one goes too once nothing else reads it.
- `Transpose(x, p)` whose permutation moves only size-1 axes (the element order is unchanged):
  a Reshape to the output shape (an int32 shape input; the writers spell it for their format).
Conditions: the permutations are constant inputs (the IR's spelling of ONNX's `perm`);
shapes are static for the reshape rewrite. Math: none; values are unchanged bit for bit.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from .. import register_pass
from .layout_state import order_preserving


def _perm(graph: Graph, node) -> list | None:
    if node.op != "Transpose" or node.opaque:
        return None
    perm = graph.constant(node.inputs[1]) if len(node.inputs) > 1 else None
    return None if perm is None else [int(p) for p in np.asarray(perm).reshape(-1)]


def _set_perm(graph: Graph, node, perm: list) -> None:
    name = graph.add_constant(f"{node.name}_perm", np.asarray(perm, np.int32))
    graph.set_inputs(node, [node.inputs[0], name])


def _as_reshape(graph: Graph, node) -> None:
    out = graph.tensors[node.outputs[0]]
    dims = [int(d) for d in out.shape]
    name = graph.add_constant(f"{node.name}_shape", np.asarray(dims, np.int32))
    node.op = "Reshape"
    graph.set_inputs(node, [node.inputs[0], name])
    node.attrs = {"allowzero": 0}


@register_pass("cancel-transposes")
def cancel_transposes(graph: Graph, context) -> int:
    """Compose transposes that meet; a transpose moving only size-1 axes becomes a reshape."""
    count = 0
    for node in graph.nodes:
        perm = _perm(graph, node)
        if perm is None:
            continue
        inner = graph.producer(node.inputs[0])
        inner_perm = _perm(graph, inner) if inner is not None else None
        if inner_perm is not None and len(inner_perm) == len(perm):
            perm = [inner_perm[p] for p in perm]
            graph.set_inputs(node, [inner.inputs[0]] + node.inputs[1:])
            _set_perm(graph, node, perm)
            count += 1
        x = graph.tensors[node.inputs[0]]
        if (x.static_shape and len(perm) == len(x.shape) and perm != list(range(len(perm)))
                and graph.tensors[node.outputs[0]].static_shape
                and order_preserving([int(d) for d in x.shape], perm)):
            _as_reshape(graph, node)
            count += 1
    return count
