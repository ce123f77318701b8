"""The one pattern matcher: a fusion declares its pattern, its conditions and its rewrite.

A *pattern* is a small tree of ops rooted at the node the fusion rewrites around (the *anchor*,
the last node of the chain), written from the anchor up through its inputs:

    Op("BatchNorm", "bn", inputs=(Op(LINEAR_OPS, "layer"), ANY, ANY, ANY, ANY))
    Op(("Mul", "Div"), "op", inputs=(Op(LINEAR_OPS, "layer"), Const("k")), commutative=True)
    Op("Mul", "mul", inputs=(Value("x"), Op("HardSigmoid", "hs", inputs=(Value("x"),))),
       commutative=True)

Each input slot is one of
- `Op(ops, name, inputs, ...)`: the value is written by a node of one of `ops` (captured as
  `name`) whose own inputs match in turn. By default the value must have the consumer as its
  *sole reader* (`Graph.sole_reader`: no other reader, not a graph output, not read by a
  subgraph body or named by a signature def): a fusion that removes or rewrites the producer
  must not change what anybody else reads. `shared=True` lifts that (the producer stays);
- `Const(name)`: the value is a constant (its array is captured as `name`);
- `Value(name)`: any value, captured by name; a name used twice must bind the same value, so a
  pattern can be a DAG (`Mul(x, HardSigmoid(x))`);
- `ANY`: not looked at.
`commutative=True` tries the first two inputs of a binary op in both orders (`Match.swapped`
says which one matched). `where=(graph, node) -> bool` narrows an `Op` to the nodes the pattern
is about ("a Reshape that keeps its input's shape", "a Transpose whose permutation is the
identity"): a node failing it is simply not this pattern (no reason is recorded), unlike a
condition. Opaque nodes (ops qconvert does not know) never match.

A `Fusion` names its pattern, its *conditions* and its *rewrite*. A condition is a function
`(graph, match) -> str | None`: None when the fusion may fire, else the reason it must not (the
reason is recorded in `PassContext.skipped`, so a test or a user can see why a node was left
alone). A condition may leave what it computed in `match.facts` for the rewrite. The rewrite
`(graph, match, edit)` changes the graph through the Graph API (`qconvert.ir.graph`) and the
`Edit` of the sweep (nodes to remove or replace, constants to drop once unread).

`apply_fusion` walks the nodes once, in topological order: for each anchor it tries the pattern
(both orders when commutative), checks the conditions, rewrites the first binding that passes,
and counts. Removals and replacements are applied in one walk at the end of the sweep, so the
sweep is linear in the graph's size; a node that a rewrite removed is never matched again, and
a producer rewired by an earlier rewrite (a layer that absorbed a Mul now writes its output) is
seen by later anchors, so chains collapse in one sweep. `apply_fusions` sweeps a *rule group*
the same way: at each node every rule is tried in order, and an anchor a rule rewrote is
offered to the rules after it as it now is (the cleanup rules of `eliminate`, the transpose
rules of `cancel-transposes`, the Clip rule of `tflite-legalize`). `register_fusion` makes a
fusion a registered pass, `register_rules` a rule group; `run_passes` verifies the graph after
it as after every pass (`run_fusion` does the same for a fusion run as a step of a
conversion).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from qconvert.ir import Graph, Node

from .registry import register_pass


# -- patterns ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Op:
    """A node of a pattern: one of `ops` (a name, or a collection of names), captured as
    `name`, whose inputs match `inputs` slot by slot (slots beyond them are not looked at)."""

    ops: object
    name: str
    inputs: tuple = ()
    commutative: bool = False
    shared: bool = False  # as an input: the value may have other readers (the producer stays)
    where: Callable | None = None  # (graph, node) -> bool: part of what the pattern is

    def accepts(self, op: str) -> bool:
        return op == self.ops if isinstance(self.ops, str) else op in self.ops


@dataclass(frozen=True)
class Const:
    """An input that is a constant tensor; its array is captured as `name`."""

    name: str


@dataclass(frozen=True)
class Value:
    """An input that may be anything; its tensor name is captured as `name` (the same name in
    two slots must bind the same tensor)."""

    name: str


class _Any:
    """An input slot the pattern does not look at."""

    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()


# -- matches -------------------------------------------------------------------------------------
@dataclass
class Match:
    """One binding of a pattern: captured nodes, values (tensor names) and constants; `swapped`
    is True when a commutative anchor matched with its first two inputs exchanged; `facts` holds
    what conditions computed for the rewrite."""

    anchor: Node
    nodes: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    consts: dict = field(default_factory=dict)
    swapped: bool = False
    facts: dict = field(default_factory=dict)

    def __getitem__(self, name: str):
        """The node, constant array or tensor name captured as `name`."""
        for table in (self.nodes, self.consts, self.values):
            if name in table:
                return table[name]
        raise KeyError(name)


class NoMatch(Exception):
    """The pattern does not bind; `reason` is None when an op differs (not this pattern at
    all), else why a structural constraint failed."""

    def __init__(self, reason: str | None = None):
        super().__init__(reason)
        self.reason = reason


def _label(node: Node) -> str:
    return f"{node.op} {node.name or node.outputs[0]!r}"


def _bind_slot(graph: Graph, slot, name: str | None, consumer: Node, m: Match) -> None:
    if slot is ANY:
        return
    if isinstance(slot, Value):
        if name is None:
            raise NoMatch(f"input {slot.name!r} of {_label(consumer)} is absent")
        bound = m.values.setdefault(slot.name, name)
        if bound != name:
            raise NoMatch(f"{_label(consumer)} reads {name!r} where the pattern needs "
                          f"{bound!r} again")
        return
    if isinstance(slot, Const):
        data = graph.constant(name)
        if data is None:
            raise NoMatch(f"{slot.name} {name!r} of {_label(consumer)} is not a constant")
        m.consts[slot.name] = data
        m.values[slot.name] = name
        return
    producer = graph.producer(name)
    if producer is None or producer.opaque or not slot.accepts(producer.op):
        raise NoMatch()
    if not slot.shared and graph.sole_reader(name) is not consumer:
        raise NoMatch(f"{_label(producer)} output {name!r} is read by more than "
                      f"{_label(consumer)} (other readers, a graph output or a subgraph)")
    _bind_node(graph, slot, producer, m, swapped=False)


def _bind_node(graph: Graph, pattern: Op, node: Node, m: Match, swapped: bool) -> None:
    if pattern.name in m.nodes and m.nodes[pattern.name] is not node:
        raise NoMatch(f"{pattern.name!r} binds two nodes")
    if pattern.where is not None and not pattern.where(graph, node):
        raise NoMatch()
    m.nodes[pattern.name] = node
    inputs = list(node.inputs)
    if swapped:
        inputs[0], inputs[1] = inputs[1], inputs[0]
    for i, slot in enumerate(pattern.inputs):
        if slot is ANY:
            continue
        if i >= len(inputs):
            raise NoMatch(f"{_label(node)} has no input {i}")
        _bind_slot(graph, slot, inputs[i], node, m)


def bindings(graph: Graph, pattern: Op, node: Node):
    """Yield each `Match` of `pattern` anchored at `node`, or the reason (a string) a binding
    failed a structural constraint; nothing when an op differs."""
    if node.opaque or not pattern.accepts(node.op):
        return
    orders = (False, True) if pattern.commutative and len(node.inputs) >= 2 else (False,)
    for swapped in orders:
        m = Match(node, swapped=swapped)
        try:
            _bind_node(graph, pattern, node, m, swapped)
        except NoMatch as miss:
            if miss.reason is not None:
                yield miss.reason
            continue
        yield m


def match(graph: Graph, pattern: Op, node: Node) -> Match | None:
    """The first binding of `pattern` anchored at `node`, or None (conditions not checked)."""
    for found in bindings(graph, pattern, node):
        if isinstance(found, Match):
            return found
    return None


def fires(graph: Graph, fusion: "Fusion", node: Node) -> bool:
    """True when `fusion` would rewrite at `node` now (a binding whose conditions all pass)."""
    return any(isinstance(found, Match) and fusion.why_not(graph, found) is None
               for found in bindings(graph, fusion.pattern, node))


# -- fusions -------------------------------------------------------------------------------------
@dataclass
class Edit:
    """What the rewrites of one sweep leave to its end: nodes to remove, nodes to put in an old
    node's place (one node or a list), constants to delete once nothing reads them."""

    removed: dict = field(default_factory=dict)       # id -> node
    replacements: dict = field(default_factory=dict)  # id(old node) -> node | [nodes]
    unread: list = field(default_factory=list)

    def remove(self, graph: Graph, node: Node) -> None:
        """Take `node` out of the graph (its reads and writes are forgotten now)."""
        graph.detach(node)
        self.removed[id(node)] = node

    def replace(self, graph: Graph, old: Node, new) -> None:
        """Put `new` (a node or a list of nodes, in order) where `old` is."""
        graph.detach(old)
        for n in new if isinstance(new, list) else [new]:
            graph.attach(n)
        self.replacements[id(old)] = new

    def drop_if_unread(self, names) -> None:
        """Delete the constants among `names` that nothing reads at the end of the sweep."""
        self.unread.extend(n for n in names if n is not None)

    def gone(self, node: Node) -> bool:
        return id(node) in self.removed or id(node) in self.replacements

    def finish(self, graph: Graph) -> None:
        if self.removed or self.replacements:
            graph.remove_nodes(self.removed.values(), self.replacements)
        graph.drop_unread_constants(self.unread)


@dataclass(frozen=True)
class Fusion:
    """A declared rewrite: `name` (the pass name), `summary` (its one-line description),
    `pattern`, `conditions` (each `(graph, match) -> reason | None`), `rewrite(graph, match,
    edit)`, and `when(context)`, a gate on the pass context (the target format)."""

    name: str
    summary: str
    pattern: Op
    conditions: tuple
    rewrite: Callable
    when: Callable | None = None

    def why_not(self, graph: Graph, m: Match) -> str | None:
        """The first failing condition's reason, or None when the fusion may fire."""
        for condition in self.conditions:
            reason = condition(graph, m)
            if reason is not None:
                return reason
        return None


def apply_fusion(graph: Graph, fusion: Fusion, context=None) -> int:
    """One sweep of `fusion` over `graph` in topological order; returns the rewrites made.
    Why a near miss was left alone goes to `context.skipped[fusion.name][anchor]`."""
    return apply_fusions(graph, (fusion,), context)


def apply_fusions(graph: Graph, fusions, context=None) -> int:
    """One sweep of the rule group `fusions` over `graph` in topological order; returns the
    rewrites made. At each node every fusion is tried in turn: a rewritten anchor that is still
    in the graph is offered, as it now is, to the fusions after the one that rewrote it (so
    "compose two transposes, then turn the result into a reshape" happens at one node in one
    visit), and every later anchor sees the producers earlier rewrites left, so chains
    (Transpose -> Transpose -> ..., Identity -> Identity -> ...) collapse in the one sweep.
    Why a near miss was left alone goes to `context.skipped[fusion.name][anchor]`."""
    active = [f for f in fusions if f.when is None or f.when(context)]
    if not active:
        return 0
    record = context is not None and getattr(context, "skipped", None) is not None
    skipped = [context.skipped.setdefault(f.name, {}) if record else None for f in active]
    rules = list(zip(active, skipped))
    anchors = set()  # the ops some rule's pattern is anchored at: other nodes are skipped fast
    for f in active:
        anchors.update((f.pattern.ops,) if isinstance(f.pattern.ops, str) else f.pattern.ops)
    edit = Edit()
    removed, replaced = edit.removed, edit.replacements
    count = 0
    for node in graph.nodes:
        if node.op not in anchors:
            continue
        for fusion, notes in rules:
            if id(node) in removed or id(node) in replaced:
                break
            count += _try_at(graph, fusion, node, edit, notes)
    edit.finish(graph)
    return count


def _try_at(graph: Graph, fusion: Fusion, node: Node, edit: Edit, notes: dict | None) -> int:
    """Rewrite at `node` with the first binding of `fusion` whose conditions pass (1), else
    note why the nearest miss did not fire (0)."""
    reason = None
    for found in bindings(graph, fusion.pattern, node):
        if isinstance(found, str):
            reason = reason or found
            continue
        why = None
        for condition in fusion.conditions:
            why = condition(graph, found)
            if why is not None:
                break
        if why is not None:
            reason = reason or why
            continue
        fusion.rewrite(graph, found, edit)
        if notes:
            notes.pop(_label(node), None)
        return 1
    if reason is not None and notes is not None:
        notes[_label(node)] = reason
    return 0


def run_fusion(graph: Graph, fusion: Fusion, context=None) -> int:
    """`apply_fusion`, then verify the graph when it rewrote something (what `run_passes` does
    after every registered pass), for fusions run as steps of a conversion. GraphError names
    the fusion."""
    from qconvert.ir.graph import GraphError

    count = apply_fusion(graph, fusion, context)
    if count:
        try:
            graph.verify()
        except GraphError as exc:
            raise GraphError(f"fusion {fusion.name!r} broke the graph: {exc}") from exc
    return count


def register_fusion(fusion: Fusion) -> Fusion:
    """Register `fusion` as the pass `fusion.name` (one `apply_fusion` sweep per run)."""

    def run(graph: Graph, context) -> int:
        return apply_fusion(graph, fusion, context)

    run.__doc__ = fusion.summary
    run.__name__ = fusion.name.replace("-", "_")
    register_pass(fusion.name)(run)
    return fusion


def register_rules(name: str, summary: str, fusions: tuple) -> tuple:
    """Register the rule group `fusions` as the pass `name` (one `apply_fusions` sweep per run,
    every rule tried at each node in the order given)."""

    def run(graph: Graph, context) -> int:
        return apply_fusions(graph, fusions, context)

    run.__doc__ = summary
    run.__name__ = name.replace("-", "_")
    register_pass(name)(run)
    return fusions


# -- conditions many fusions share ---------------------------------------------------------------
def distinct_operands(graph: Graph, m: Match) -> str | None:
    """A binary op reading one value twice (`y * y`) is not affine in it."""
    a = m.anchor
    if len(a.inputs) >= 2 and a.inputs[0] == a.inputs[1]:
        return f"{_label(a)} reads {a.inputs[0]!r} twice"
    return None


def same_dtype_constant(const: str):
    """A condition: constant `const` has the dtype of the anchor's output."""

    def check(graph: Graph, m: Match) -> str | None:
        k = m.consts[const]
        out = graph.tensors[m.anchor.outputs[0]].dtype
        if k.dtype != np.dtype(out):
            return f"{const} {m.values[const]!r} is {k.dtype}, the output {out}"
        return None

    check.__doc__ = f"The constant {const} has the dtype of the output."
    return check
