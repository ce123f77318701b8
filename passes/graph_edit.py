"""Small graph-editing helpers every pass shares: uses, single-consumer checks, rewiring.

`implicit_uses` finds tensors read from inside the subgraphs of opaque ONNX control-flow nodes
(If, Loop, Scan bodies may read outer-scope tensors without listing them as inputs), so no pass
deletes or rewires a tensor such a body needs.
"""

from __future__ import annotations

from onnx import AttributeProto

from qconvert.ir import Graph


def _graph_inputs_read(g, names: set) -> None:
    for n in g.node:
        names.update(i for i in n.input if i)
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                _graph_inputs_read(a.g, names)
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _graph_inputs_read(sub, names)


def implicit_uses(graph: Graph) -> set:
    """Names of tensors read inside subgraph attributes of opaque nodes, and of tensors a TFLite
    signature def names (observable like graph outputs)."""
    names: set = {n for n, t in graph.tensors.items() if t.extra.get("signature")}
    for node in graph.nodes:
        if not node.opaque:
            continue
        for raw in node.origin.get("attributes", ()):
            a = AttributeProto()
            a.ParseFromString(raw)
            if a.type == AttributeProto.GRAPH:
                _graph_inputs_read(a.g, names)
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _graph_inputs_read(sub, names)
    return names


def used_names(graph: Graph) -> set:
    """Every tensor name something needs: node inputs, graph outputs, subgraph bodies."""
    names = {i for n in graph.nodes for i in n.present_inputs()}
    names.update(graph.outputs)
    names.update(implicit_uses(graph))
    return names


def replace_uses(graph: Graph, old: str, new: str) -> None:
    """Make every node that reads `old` read `new` instead (graph outputs are not touched)."""
    for node in graph.nodes:
        node.inputs = [new if i == old else i for i in node.inputs]
