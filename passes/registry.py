"""The pass registry: `register_pass` (the decorator every pass module applies), `get_pass`,
`all_passes`, the `PassContext` passes consult, and `run_passes`, which runs named passes and
verifies the graph after each.

Kept apart from the package's `__init__` so that the pass modules import the decorator
without importing the package that imports them: the registry is filled at one place (the
package imports every pass module) and read through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from qconvert.ir import Model
from qconvert.ir.graph import GraphError


@dataclass(frozen=True)
class Pass:
    """A registered pass: its name, its function `(graph, context) -> rewrites`, its summary."""

    name: str
    run: Callable
    summary: str


@dataclass
class PassContext:
    """What passes may consult: the target format and free-form options. Fusions record in
    `skipped` why each near miss did not fire: {pass name: {"Op 'node'": reason}} (a node that
    fired later, in a fixed-point round, is taken out again)."""

    target_format: str
    options: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)


PASSES: dict = {}


def register_pass(name: str):
    """Decorator registering a pass under `name`; its docstring's first line is its summary."""

    def wrap(fn):
        if name in PASSES:
            raise ValueError(f"pass {name!r} registered twice")
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        PASSES[name] = Pass(name, fn, summary)
        return fn

    return wrap


def get_pass(name: str) -> Pass:
    """The registered pass `name`; KeyError for an unknown one."""
    if name not in PASSES:
        raise KeyError(name)
    return PASSES[name]


def all_passes() -> list:
    """Every registered pass, in registration order."""
    return list(PASSES.values())


def side_effect_nodes(graph) -> list:
    """The nodes of `graph` that have side effects (`qconvert.schemas.effects`): no pass may
    remove them, whatever reads their outputs. A known op's purity is its schema's, looked up
    once per op."""
    from qconvert import schemas
    from qconvert.schemas.effects import is_pure

    impure_ops: dict = {}  # known op -> True when it has side effects
    found = []
    for n in graph.nodes:
        if n.opaque:
            if not is_pure(n):
                found.append(n)
            continue
        impure = impure_ops.get(n.op)
        if impure is None:
            impure = impure_ops[n.op] = (not getattr(schemas.get(n.op), "pure", True)
                                         and not is_pure(n))
        if impure:
            found.append(n)
    return found


def check_side_effects_kept(graph, before: list, name: str) -> None:
    """Raise GraphError naming pass `name` when a node of `before` left the graph."""
    present = {id(n) for n in graph.nodes}
    lost = [n for n in before if id(n) not in present]
    if lost:
        raise GraphError(f"pass {name!r} removed node(s) with side effects: "
                         + ", ".join(f"{n.label} {n.name!r}" for n in lost))


def run_passes(model: Model, names: list, context: PassContext, keep_uses: bool = False) -> dict:
    """Run the named passes in order over every graph; return {name: rewrites}. After each
    pass that rewrote something the graph is verified, and every node with side effects it had
    must still be there. The graphs' use indexes are dropped at the end (code outside the passes
    edits nodes in place) unless `keep_uses` (the pipeline, between its passes)."""
    counts = {}
    for name in names:
        p = get_pass(name)
        total = 0
        for graph in model.graphs:
            effects = side_effect_nodes(graph)
            count = p.run(graph, context)
            total += count
            if not count:  # nothing rewritten, nothing removed: the graph is as it was
                continue
            try:
                graph.verify()
                check_side_effects_kept(graph, effects, name)
            except GraphError as exc:
                raise GraphError(f"pass {name!r} broke the graph: {exc}") from exc
        counts[name] = total
    if not keep_uses:
        for graph in model.graphs:
            graph.invalidate_uses()
    return counts
