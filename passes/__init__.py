"""Graph passes, installed as `qconvert.passes`.

A pass is a registered function `(graph, context) -> int` (the number of rewrites it made) whose
docstring states its pattern, conditions and math. `run_passes` runs an ordered list of them and
verifies the graph after each one, naming the pass that broke an invariant.
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
    """What passes may consult: the target format and free-form options."""

    target_format: str
    options: dict = field(default_factory=dict)


_PASSES: dict = {}


def register_pass(name: str):
    """Decorator registering a pass under `name`; its docstring's first line is its summary."""

    def wrap(fn):
        if name in _PASSES:
            raise ValueError(f"pass {name!r} registered twice")
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _PASSES[name] = Pass(name, fn, summary)
        return fn

    return wrap


def get_pass(name: str) -> Pass:
    """The registered pass `name`; KeyError for an unknown one."""
    if name not in _PASSES:
        raise KeyError(name)
    return _PASSES[name]


def all_passes() -> list:
    """Every registered pass, in registration order."""
    return list(_PASSES.values())


def side_effect_nodes(graph) -> list:
    """The nodes of `graph` that have side effects (`qconvert.schemas.effects`): no pass may
    remove them, whatever reads their outputs."""
    from qconvert import schemas
    from qconvert.schemas.effects import is_pure

    return [n for n in graph.nodes
            if (n.opaque or not getattr(schemas.get(n.op), "pure", True)) and not is_pure(n)]


def check_side_effects_kept(graph, before: list, name: str) -> None:
    """Raise GraphError naming pass `name` when a node of `before` left the graph."""
    present = {id(n) for n in graph.nodes}
    lost = [n for n in before if id(n) not in present]
    if lost:
        raise GraphError(f"pass {name!r} removed node(s) with side effects: "
                         + ", ".join(f"{n.label} {n.name!r}" for n in lost))


def run_passes(model: Model, names: list, context: PassContext) -> dict:
    """Run the named passes in order over every graph; return {name: rewrites}. After each
    pass the graph is verified, and every node with side effects it had must still be there."""
    counts = {}
    for name in names:
        p = get_pass(name)
        total = 0
        for graph in model.graphs:
            effects = side_effect_nodes(graph)
            total += p.run(graph, context)
            try:
                graph.verify()
                check_side_effects_kept(graph, effects, name)
            except GraphError as exc:
                raise GraphError(f"pass {name!r} broke the graph: {exc}") from exc
        counts[name] = total
    return counts


from . import eliminate as _eliminate  # noqa: E402,F401  (registers the pass)
from . import fold_constants as _fold_constants  # noqa: E402,F401
from . import fuse_linear as _fuse_linear  # noqa: E402,F401
from . import matmul_add as _matmul_add  # noqa: E402,F401
from . import batchnorm_to_affine as _batchnorm_to_affine  # noqa: E402,F401
from . import fuse_activation as _fuse_activation  # noqa: E402,F401
from . import static_batch as _static_batch  # noqa: E402,F401
from . import cancel_transposes as _cancel_transposes  # noqa: E402,F401
from . import layout_nhwc as _layout_nhwc  # noqa: E402,F401  (layout-nhwc, tflite-legalize)
from . import equalize as _equalize  # noqa: E402,F401
