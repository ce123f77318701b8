"""The use index of a graph: which node produces each tensor and which nodes read it.

Passes ask "who writes x", "who reads x", "is x read by exactly one node" for every candidate
they look at; scanning the node list for each question makes a pass quadratic in the graph's
length. `UseIndex` answers each in O(1). It is built once, on the first question (one walk over
the nodes), and the graph's edit methods (`Graph.replace_uses`, `set_inputs`, `set_outputs`,
`remove_nodes`...) keep it current; code that edits `node.inputs` / `node.outputs` or the node
list in place must call `Graph.invalidate_uses()` (assigning `graph.nodes` does it).
`Graph.verify()` compares a live index with a fresh one, so an edit that bypassed it is caught.

Reads hidden in subgraph bodies (an opaque ONNX If / Loop / Scan whose body reads an outer tensor
without listing it as an input) are counted too (`hidden`), from the names the ONNX reader
found once per opaque node (`origin["body_reads"]`).
"""

from __future__ import annotations


def _names_read_in_bodies(node) -> tuple:
    """Tensors read inside the subgraph bodies of opaque node `node` (the ONNX reader lists
    them once, in `origin["body_reads"]`)."""
    return node.origin.get("body_reads", ()) if node.opaque else ()


class UseIndex:
    """Producer and readers of every tensor of one graph (see the module docstring).

    `producer[name]` is the node writing `name`. `readers[name]` is the one node reading it or,
    for a tensor with several readers, a dict id(node) -> node (each node once, in the order
    the nodes were added): most tensors have one reader, and a dict for each would cost a
    quarter of a big graph's memory. `hidden[name]` counts the subgraph bodies reading it.
    `visits_total` counts node visits (building and updating) over every index, for the tests
    that check that passes stay linear.
    """

    visits_total = 0

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
        readers = self.readers
        for name in node.inputs:
            if name is None:
                continue
            cur = readers.get(name)
            if cur is None:
                readers[name] = node
            elif type(cur) is dict:
                cur[id(node)] = node
            elif cur is not node:
                readers[name] = {id(cur): cur, id(node): node}
        producer = self.producer
        for name in node.outputs:
            if name is not None:
                producer[name] = node
        if node.opaque:
            body = _names_read_in_bodies(node)
            if body:
                self._bodies[id(node)] = body
                for name in body:
                    self.hidden[name] = self.hidden.get(name, 0) + 1

    def remove(self, node) -> None:
        """Forget `node` (removed from the graph, or about to be rewired)."""
        UseIndex.visits_total += 1
        readers = self.readers
        for name in node.inputs:
            if name is None:
                continue
            cur = readers.get(name)
            if cur is node:
                del readers[name]
            elif type(cur) is dict:
                cur.pop(id(node), None)
                if len(cur) == 1:
                    readers[name] = next(iter(cur.values()))
        for name in node.outputs:
            if name is not None and self.producer.get(name) is node:
                del self.producer[name]
        for name in self._bodies.pop(id(node), ()):
            self.hidden[name] -= 1
            if not self.hidden[name]:
                del self.hidden[name]

    def readers_of(self, name: str) -> list:
        """The nodes reading `name` (each once)."""
        cur = self.readers.get(name)
        if cur is None:
            return []
        return list(cur.values()) if type(cur) is dict else [cur]

    def count(self, name: str) -> int:
        """How many nodes read `name`."""
        cur = self.readers.get(name)
        return 0 if cur is None else (len(cur) if type(cur) is dict else 1)

    def describes(self, nodes) -> bool:
        """True when the index records exactly the reads and writes of `nodes` (one walk, no
        copy): every read and write is recorded, and nothing else is."""
        readers, producer = self.readers, self.producer
        reads = writes = 0
        opaque = set()
        for node in nodes:
            seen = None
            for name in node.inputs:
                if name is None:
                    continue
                cur = readers.get(name)
                if cur is not node and not (type(cur) is dict and cur.get(id(node)) is node):
                    return False
                if seen is None:
                    seen = {name}
                    reads += 1
                elif name not in seen:
                    seen.add(name)
                    reads += 1
            for name in node.outputs:
                if name is not None:
                    if producer.get(name) is not node:
                        return False
                    writes += 1
            if node.opaque:
                opaque.add(id(node))
        recorded = sum(len(v) if type(v) is dict else 1 for v in readers.values())
        return recorded == reads and len(producer) == writes and set(self._bodies) <= opaque
