"""The `eliminate` pass: remove nodes and tensors that compute nothing.

Pass-through rules (`PASS_THROUGH`, one matcher sweep, `matcher.apply_fusions`), each a node
whose output equals its input:
- `remove-identity`: Identity;
- `remove-dropout`: Dropout at inference whose mask output is absent or unread;
- `remove-noop-reshape`: Reshape whose static output shape and dtype equal its input's;
- `remove-identity-transpose`: Transpose whose permutation (a constant input) is the identity.
Rewrite (`bypass`): readers of the output read the input instead. When the output is a graph
output, the producer of the input is renamed to it instead (graph output names are kept).
Conditions (else the node stays):
- the output is not read by a subgraph (If / Loop / Scan) body nor named by a TFLite
  signature def (`output_not_observed`): those need the name itself;
- for a graph output: the input is not a graph input (`input_not_graph_input`) nor a constant
  (`input_computed`: there is a producer to rename), and the node is the input's sole reader
  (`sole_reader_of_input`: no other reader, not a graph output itself, not observed).
A chain (Identity -> Identity -> ...) goes in the one sweep: each bypass rewires the readers
before the next node is visited.

Then dead nodes (no output read by any node, graph output or subgraph body) and unused
tensors, constants included, by one walk in reverse topological order (a liveness walk, not a
pattern). A node with side effects is never dead, whatever reads its outputs: TFLite
ASSIGN_VARIABLE (no outputs at all), CALL_ONCE, custom ops, any op not known to be pure
(`qconvert.schemas.effects`); its inputs stay live. Subgraphs are never removed (a CALL_ONCE
names its init subgraph by index).
Math: none; outputs are unchanged bit for bit.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph
from qconvert.schemas.effects import is_pure

from ..registry import register_pass
from ..matcher import Edit, Fusion, Match, Op, apply_fusions


# -- what passes its input through ---------------------------------------------------------------
def _unused_mask(graph: Graph, node) -> bool:
    """A Dropout whose mask output is absent or read by nothing."""
    mask = node.outputs[1] if len(node.outputs) > 1 else None
    return mask is None or not (graph.reader_count(mask) > 0 or mask in graph.outputs)


def _same_shape(graph: Graph, node) -> bool:
    """A Reshape whose static output shape and dtype are its input's."""
    x, y = graph.tensors[node.inputs[0]], graph.tensors[node.outputs[0]]
    return bool(x.static_shape and y.static_shape and tuple(x.shape) == tuple(y.shape)
                and x.dtype == y.dtype)


def _identity_perm(graph: Graph, node) -> bool:
    """A Transpose whose permutation is a constant input and the identity."""
    perm = graph.constant(node.inputs[1]) if len(node.inputs) > 1 else None
    x = graph.tensors[node.inputs[0]]
    return perm is not None and x.shape is not None and \
        list(np.asarray(perm).reshape(-1)) == list(range(len(x.shape)))


# -- conditions ----------------------------------------------------------------------------------
def output_not_observed(graph: Graph, m: Match) -> str | None:
    """The output is not needed by name outside the node list (a subgraph body reads it, or a
    TFLite signature def names it)."""
    dst = m.anchor.outputs[0]
    if graph.observed(dst):
        return f"{dst!r} is read by a subgraph body or named by a signature def"
    return None


def input_not_graph_input(graph: Graph, m: Match) -> str | None:
    """For a graph output: the input is not a graph input (both names must stay)."""
    src, dst = m.anchor.inputs[0], m.anchor.outputs[0]
    if dst in graph.outputs and src in graph.inputs:
        return f"graph output {dst!r} passes graph input {src!r} through"
    return None


def input_computed(graph: Graph, m: Match) -> str | None:
    """For a graph output: a node computes the input (a constant has no producer to rename)."""
    src, dst = m.anchor.inputs[0], m.anchor.outputs[0]
    if dst in graph.outputs and graph.producer(src) is None:
        return f"graph output {dst!r} passes {src!r} through, which no node computes"
    return None


def sole_reader_of_input(graph: Graph, m: Match) -> str | None:
    """For a graph output: the node is the sole reader of its input (no other reader, not a
    graph output, not observed), so renaming the input changes nothing else."""
    src, dst = m.anchor.inputs[0], m.anchor.outputs[0]
    if dst in graph.outputs and graph.sole_reader(src) is not m.anchor:
        return f"{src!r} is needed beside graph output {dst!r}"
    return None


CONDITIONS = (output_not_observed, input_not_graph_input, input_computed, sole_reader_of_input)


def bypass(graph: Graph, m: Match, edit: Edit) -> None:
    """Readers of the output read the input; a graph output's name moves to the input's
    producer. The node goes."""
    node = m.anchor
    src, dst = node.inputs[0], node.outputs[0]
    if dst not in graph.outputs:
        graph.replace_uses(dst, src)
    else:
        producer = graph.producer(src)
        graph.set_outputs(producer, [dst if o == src else o for o in producer.outputs])
    edit.remove(graph, node)


REMOVE_IDENTITY = Fusion(
    name="remove-identity", summary="Identity -> its input.",
    pattern=Op("Identity", "node"), conditions=CONDITIONS, rewrite=bypass)
REMOVE_DROPOUT = Fusion(
    name="remove-dropout", summary="Dropout at inference, mask unread -> its input.",
    pattern=Op("Dropout", "node", where=_unused_mask), conditions=CONDITIONS, rewrite=bypass)
REMOVE_NOOP_RESHAPE = Fusion(
    name="remove-noop-reshape", summary="Reshape to its input's shape and dtype -> its input.",
    pattern=Op("Reshape", "node", where=_same_shape), conditions=CONDITIONS, rewrite=bypass)
REMOVE_IDENTITY_TRANSPOSE = Fusion(
    name="remove-identity-transpose", summary="Transpose by the identity -> its input.",
    pattern=Op("Transpose", "node", where=_identity_perm), conditions=CONDITIONS,
    rewrite=bypass)
PASS_THROUGH = (REMOVE_IDENTITY, REMOVE_DROPOUT, REMOVE_NOOP_RESHAPE, REMOVE_IDENTITY_TRANSPOSE)


@register_pass("eliminate")
def eliminate(graph: Graph, context) -> int:
    """Remove Identity, inference Dropout, no-op Reshape/Transpose, dead nodes, unused tensors."""
    count = apply_fusions(graph, PASS_THROUGH, context)
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
