"""Small graph-editing helpers every pass shares, on top of the graph's use index.

`implicit_uses` names the tensors read from inside the subgraphs of opaque ONNX control-flow
nodes (If, Loop, Scan bodies may read outer-scope tensors without listing them as inputs), so no
pass deletes or rewires a tensor such a body needs. The bodies are parsed once per index
(`qconvert.ir.uses`), not on every call.
"""

from __future__ import annotations

from qconvert.ir import Graph


def implicit_uses(graph: Graph) -> set:
    """Names of tensors read inside subgraph attributes of opaque nodes, and of tensors a TFLite
    signature def names (observable like graph outputs)."""
    names: set = {n for n, t in graph.tensors.items() if t.extra.get("signature")}
    names.update(graph.uses.hidden)
    return names


def used_names(graph: Graph) -> set:
    """Every tensor name something needs: node inputs, graph outputs, subgraph bodies,
    signature defs."""
    uses = graph.uses
    names = set(uses.readers)
    names.update(graph.outputs)
    names.update(implicit_uses(graph))
    return names


def replace_uses(graph: Graph, old: str, new: str) -> None:
    """Make every node that reads `old` read `new` instead (graph outputs are not touched)."""
    graph.replace_uses(old, new)
