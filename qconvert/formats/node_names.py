"""The node names an ONNX model is written with: unique, the source's own names kept.

ONNX leaves node names optional, but a name given twice breaks the tools that key by it:
onnxruntime refuses the model ("two nodes with same node name") even with its optimizations
off, and so do qconvert's ONNX reader, onnx-graphsurgeon and Netron's lookups. Passes name the
nodes they make after a tensor or the node they replace (`w_DequantizeLinear` for each reader of
a shared weight, `bn/mul` for a BatchNormalization's Mul), which can meet another made-up name
or one the source model chose. So the writer decides every name in one place:
- a name the source model gave a node (`origin["name"]`, kept by the ONNX reader) is kept; an
  unnamed source node stays unnamed;
- every other name (made up by a pass), and a source name a copied node repeats, becomes
  `ir.fresh_name(name, taken)` against every name already written or kept for a source node,
  in node order.
The same graph always gets the same names (byte-identical output).
"""

from __future__ import annotations

from ..ir import fresh_name


def written_node_names(nodes) -> list:
    """The name to write for each of `nodes` (in order; "" for none), unique among them."""
    wanted = [(n.origin["name"], True) if "name" in n.origin else (n.name or "", False)
              for n in nodes]
    taken = set()
    kept = [False] * len(wanted)
    for i, (name, source) in enumerate(wanted):
        if source and name and name not in taken:
            taken.add(name)
            kept[i] = True
    names = []
    for (name, _), keep in zip(wanted, kept):
        if name and not keep:
            name = fresh_name(name, taken)
            taken.add(name)
        names.append(name)
    return names
