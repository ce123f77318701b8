"""The `eliminate` pass: remove nodes and tensors that compute nothing.

Pattern and conditions:
- Identity, and Dropout at inference whose mask output is unused: readers of the output read
  the input instead. When the output is a graph output, the producer of the input is renamed to
  it instead (graph output names are kept), but only if the input has no other reader, is not a
  graph input, constant or graph output itself; otherwise the node stays.
- Reshape whose static output shape equals its static input shape; Transpose whose permutation
  is the identity: handled like Identity.
- Dead nodes (no output read by any node, graph output or subgraph body) and unused tensors,
  constants included. A node with side effects is never dead, whatever reads its outputs:
  TFLite ASSIGN_VARIABLE (no outputs at all), CALL_ONCE, custom ops, any op not known to be
  pure (`qconvert.schemas.effects`); its inputs stay live. Subgraphs are never removed (a
  CALL_ONCE names its init subgraph by index).
Math: none; outputs are unchanged bit for bit.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph
from qconvert.schemas.effects import is_pure

from .. import register_pass


_PASSTHROUGH_OPS = frozenset({"Identity", "Dropout", "Reshape", "Transpose"})


def _is_passthrough(node, graph: Graph) -> bool:
    if node.opaque or node.op not in _PASSTHROUGH_OPS:
        return False
    if node.op == "Identity":
        return True
    if node.op == "Dropout":
        return len(node.outputs) < 2 or node.outputs[1] is None or not _read(graph, node.outputs[1])
    x = graph.tensors[node.inputs[0]]
    y = graph.tensors[node.outputs[0]]
    if node.op == "Reshape":
        return x.static_shape and y.static_shape and tuple(x.shape) == tuple(y.shape) \
            and x.dtype == y.dtype
    if node.op == "Transpose":
        perm = graph.constant(node.inputs[1]) if len(node.inputs) > 1 else None
        if perm is None or x.shape is None:
            return False
        return list(np.asarray(perm).reshape(-1)) == list(range(len(x.shape)))
    return False


def _read(graph: Graph, name: str) -> bool:
    return graph.reader_count(name) > 0 or name in graph.outputs


def _bypass(node, graph: Graph) -> bool:
    """Remove pass-through `node` from the use index (the caller drops it from the node list);
    False when the graph's names forbid it."""
    src, dst = node.inputs[0], node.outputs[0]
    if graph.observed(dst):  # a subgraph body or a signature def needs it by name
        return False
    if dst not in graph.outputs:
        graph.replace_uses(dst, src)
        graph.detach(node)
        return True
    producer = graph.producer(src)
    if src in graph.inputs or producer is None or graph.sole_reader(src) is not node:
        return False
    graph.set_outputs(producer, [dst if o == src else o for o in producer.outputs])
    graph.detach(node)
    return True


@register_pass("eliminate")
def eliminate(graph: Graph, context) -> int:
    """Remove Identity, inference Dropout, no-op Reshape/Transpose, dead nodes, unused tensors."""
    count = 0
    bypassed = []
    for node in graph.nodes:
        if _is_passthrough(node, graph) and _bypass(node, graph):
            bypassed.append(node)
            count += 1
    graph.remove_nodes(bypassed)
    live = set(graph.outputs) | graph.observed_names()
    dead = []
    for node in reversed(graph.nodes):  # reverse topological order: readers before producers
        if not is_pure(node) or any(o in live for o in node.outputs if o is not None):
            live.update(node.present_inputs())
        else:
            dead.append(node)
            count += 1
    graph.remove_nodes(dead)
    used = graph.needed_names() | set(graph.inputs)
    produced = graph.uses.producer
    for name in [n for n in graph.tensors if n not in used and n not in produced]:
        del graph.tensors[name]
    return count
