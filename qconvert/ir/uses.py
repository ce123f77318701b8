"""The use index of a graph: which node produces each tensor and which nodes read it.

Passes ask "who writes x", "who reads x", "is x read by exactly one node" for every candidate
they look at; scanning the node list for each question makes a pass quadratic in the graph's
length. `UseIndex` answers each in O(1). It is built once, on the first question (one walk over
the nodes), and the graph's edit methods (`Graph.replace_uses`, `set_inputs`, `set_outputs`,
`remove_nodes`...) keep it current; code that edits `node.inputs` / `node.outputs` or the node
list in place must call `Graph.invalidate_uses()` (assigning `graph.nodes` does it).
`Graph.verify()` compares a live index with a fresh one, so an edit that bypassed it is caught.

Reads hidden in subgraph bodies (an opaque ONNX If / Loop / Scan whose body reads an outer tensor
without listing it as an input) are counted too (`hidden`), parsed once per opaque node.
"""

from __future__ import annotations


def _names_read_in_bodies(node) -> frozenset:
    """Tensors read inside the subgraph attributes of opaque ONNX node `node`."""
    raws = node.origin.get("attributes", ()) if node.opaque else ()
    if not raws:
        return frozenset()
    from onnx import AttributeProto

    names: set = set()

    def walk(g):
        stack = [g]
        while stack:  # no recursion: bodies may nest deeply
            g = stack.pop()
            for n in g.node:
                names.update(i for i in n.input if i)
                for a in n.attribute:
                    if a.type == AttributeProto.GRAPH:
                        stack.append(a.g)
                    elif a.type == AttributeProto.GRAPHS:
                        stack.extend(a.graphs)

    for raw in raws:
        a = AttributeProto()
        a.ParseFromString(raw)
        if a.type == AttributeProto.GRAPH:
            walk(a.g)
        elif a.type == AttributeProto.GRAPHS:
            for sub in a.graphs:
                walk(sub)
    return frozenset(names)


class UseIndex:
    """Producer and readers of every tensor of one graph (see the module docstring).

    `readers[name]` maps id(node) -> node for each node reading `name` (once per node, in the
    order the nodes were added); `hidden[name]` counts the subgraph bodies reading it.
    `visits` counts node visits (building and updating), for tests that check linearity.
    """

    visits_total = 0  # over every index, ever: the scaling tests read it

    def __init__(self, nodes):
        self.producer: dict = {}
        self.readers: dict = {}
        self.hidden: dict = {}
        self._bodies: dict = {}  # id(node) -> names its subgraph bodies read
        for node in nodes:
            self.add(node)

    def add(self, node) -> None:
        """Record `node` (appended to the graph, or rewired)."""
        UseIndex.visits_total += 1
        key = id(node)
        for name in node.inputs:
            if name is not None:
                self.readers.setdefault(name, {})[key] = node
        for name in node.outputs:
            if name is not None:
                self.producer[name] = node
        if node.opaque:
            body = _names_read_in_bodies(node)
            if body:
                self._bodies[key] = body
                for name in body:
                    self.hidden[name] = self.hidden.get(name, 0) + 1

    def remove(self, node) -> None:
        """Forget `node` (removed from the graph, or about to be rewired)."""
        UseIndex.visits_total += 1
        key = id(node)
        for name in node.inputs:
            if name is not None:
                users = self.readers.get(name)
                if users is not None:
                    users.pop(key, None)
                    if not users:
                        del self.readers[name]
        for name in node.outputs:
            if name is not None and self.producer.get(name) is node:
                del self.producer[name]
        for name in self._bodies.pop(key, ()):
            self.hidden[name] -= 1
            if not self.hidden[name]:
                del self.hidden[name]

    def same_as(self, other: "UseIndex") -> bool:
        """True when both record the same producers and readers (node identity)."""
        def ids(readers):
            return {k: set(v) for k, v in readers.items()}

        return ({k: id(v) for k, v in self.producer.items()}
                == {k: id(v) for k, v in other.producer.items()}
                and ids(self.readers) == ids(other.readers) and self.hidden == other.hidden)
