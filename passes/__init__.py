"""Graph passes, installed as `qconvert.passes`.

A pass is a registered function `(graph, context) -> int` (the number of rewrites it made) whose
docstring states its pattern, conditions and math. `run_passes` runs an ordered list of them and
verifies the graph after each one that rewrote something, naming the pass that broke an
invariant (a pass reporting no rewrite has left the graph as the last verification saw it; at
200,000 nodes a verification costs about what a pass does, and a fixed-point round ends with
every pass of the group reporting none).

Passes find producers and readers through the graph's use index (`Graph.producer`,
`Graph.readers`, `Graph.sole_reader`) and edit through the Graph API (`qconvert.ir.graph`:
`add_constant`, `set_constant`, `replace_uses`, `set_inputs`, `remove_nodes`...), which keeps
it current: every pass is linear in the graph's size. A fusion declares its pattern, its
conditions and its rewrite for the one pattern matcher (`matcher`), which finds the matches in
topological order, says why a near miss did not fire and counts the rewrites.

The passes live in subpackages by family: `cleanup/` (eliminate, fold-constants, static-batch),
`fusion/` (one file per fusion into a layer: conv_batchnorm, conv_mul, conv_add, matmul_add,
batchnorm_to_affine, fuse_activation, equalize), `onnx_to_tflite/` (the ONNX -> TFLite
conversion: the pre-conversion hard_swish, rsqrt, channel_shuffle, layout-nhwc and its rules,
tflite-legalize, cancel-transposes, merge_reshapes). `pipeline` lists the default order.
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


# the passes register themselves when imported; this order is the order of `all_passes()`
from .cleanup import eliminate as _eliminate  # noqa: E402,F401  (registers the pass)
from .cleanup import fold_constants as _fold_constants  # noqa: E402,F401
from .fusion import conv_batchnorm as _conv_batchnorm  # noqa: E402,F401
from .fusion import conv_mul as _conv_mul  # noqa: E402,F401
from .fusion import conv_add as _conv_add  # noqa: E402,F401
from .fusion import matmul_add as _matmul_add  # noqa: E402,F401
from .fusion import batchnorm_to_affine as _batchnorm_to_affine  # noqa: E402,F401
from .fusion import fuse_activation as _fuse_activation  # noqa: E402,F401
from .cleanup import static_batch as _static_batch  # noqa: E402,F401
from .onnx_to_tflite import cancel_transposes as _cancel_transposes  # noqa: E402,F401
from .onnx_to_tflite import tflite_legalize as _tflite_legalize  # noqa: E402,F401
from .onnx_to_tflite import convert as _onnx_to_tflite  # noqa: E402,F401  (lift-1d, ..., tflite-legalize)
from .fusion import equalize as _equalize  # noqa: E402,F401
