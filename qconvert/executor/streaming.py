"""Run models that keep state in TFLite resource variables, frame after frame.

A streaming model (a keyword spotter fed one feature frame per call) holds its state in resource
variables: VAR_HANDLE names a variable, READ_VARIABLE reads it, ASSIGN_VARIABLE writes it, and a
CALL_ONCE runs an init subgraph (which assigns the initial values) on the first call only.

The reference executors run one graph without state, so `StatefulStep` turns the main graph into
one step function without resource ops: each READ_VARIABLE output becomes an extra graph input
fed with the variable's current value, each value assigned becomes an extra graph output, and
VAR_HANDLE / CALL_ONCE disappear (the CALL_ONCE's init subgraph is evaluated once, up front, the
same way). `run_frames` then runs the step over a sequence of frames, carrying the variables from
one frame to the next, exactly as LiteRT and TFLite Micro do. A READ_VARIABLE after an
ASSIGN_VARIABLE of the same variable in the same call reads the value just assigned.

Variables are identified by VAR_HANDLE's `shared_name` (and container), the same in every
subgraph. Other control flow (IF, WHILE, CALL, a resource passed between subgraphs) is left in
the graph, so the executors refuse it by name.

An op may keep state of its own in TFLite *variable* tensors: UNIDIRECTIONAL_SEQUENCE_LSTM reads
its hidden and cell state from two of its inputs (`STATE_SLOTS`) and TFLite writes the last
step's values back into them, so the next invoke goes on from there. The executors do the same
when handed a `carry` dict (`run_float`, `run_int8`: a variable read from it when there, its
final value written into it), and `run_frames` keeps one `carry` for the whole stream: a model
with such state (`has_variable_state`) runs as a stream like a resource-variable model
(`carries_state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Graph, Model, Node

RESOURCE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"})


def is_resource_op(node: Node) -> bool:
    """A TFLite resource-variable op (opaque in the IR: no schema entry)."""
    return node.opaque and node.op in RESOURCE_OPS and "code" in node.origin


def has_state(model: Model) -> bool:
    """True when any subgraph of `model` uses resource variables."""
    return any(is_resource_op(n) for g in model.graphs for n in g.nodes)


# op -> the input slots holding state TFLite carries from one invoke to the next (variables)
STATE_SLOTS = {"UnidirectionalSequenceLSTM": (18, 19)}


def state_inputs(graph: Graph, node: Node) -> list:
    """The variable tensors `node` keeps its state in (`STATE_SLOTS`), as (slot, name)."""
    slots = () if node.opaque else STATE_SLOTS.get(node.op, ())
    found = []
    for slot in slots:
        name = node.inputs[slot] if slot < len(node.inputs) else None
        t = graph.tensors.get(name) if name else None
        if t is not None and t.extra.get("is_variable") and graph.producer(name) is None:
            found.append((slot, name))
    return found


def has_variable_state(model: Model) -> bool:
    """True when an op of the main graph keeps state in variable tensors (an LSTM)."""
    return any(state_inputs(model.graph, n) for n in model.graph.nodes)


def carries_state(model: Model) -> bool:
    """True when consecutive calls of `model` depend on each other (resource variables or an
    op's variable state): its samples are a stream, run in order with the state carried."""
    return has_state(model) or has_variable_state(model)


def store_final_state(graph: Graph, node: Node, finals: list, carry: dict) -> None:
    """Write the final values a stateful op returned (after its outputs) into `carry`, under
    its variable state tensors' names, in their dtypes."""
    by_slot = dict(zip(STATE_SLOTS.get(node.op, ()), finals))
    for slot, name in state_inputs(graph, node):
        if slot in by_slot:
            carry[name] = np.asarray(by_slot[slot]).astype(graph.tensors[name].dtype)


def variable_key(node: Node) -> str:
    """The identity of the variable a VAR_HANDLE names: container/shared_name."""
    opts = node.origin.get("options") or {}

    def text(v):
        return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v or "")

    return f"{text(opts.get('Container'))}/{text(opts.get('SharedName'))}"


@dataclass
class StatefulStep:
    """One call of a stateful graph as a stateless one.

    `graph`: the main graph without resource ops; `reads`: {extra input tensor: variable};
    `writes`: [(variable, tensor assigned)] in call order (a tensor may be a graph input or a
    constant); `init`: {variable: value} from the CALL_ONCE init subgraphs (already evaluated);
    `variables`: {variable: (shape, dtype, quant)} as READ_VARIABLE sees them.
    """

    graph: Graph
    reads: dict = field(default_factory=dict)
    writes: list = field(default_factory=list)
    init: dict = field(default_factory=dict)
    variables: dict = field(default_factory=dict)


def strip_state(graph: Graph) -> tuple:
    """(stateless graph, reads, writes, CALL_ONCE subgraph indices) of one subgraph."""
    handles = {}  # resource tensor -> variable
    reads, writes, calls = {}, [], []
    latest: dict = {}  # variable -> tensor assigned so far in this call
    rename: dict = {}  # READ output after an ASSIGN -> the tensor assigned
    nodes = []
    for node in graph.nodes:
        if not is_resource_op(node):
            if rename:
                node = Node(node.op, [rename.get(i, i) for i in node.inputs], node.outputs,
                            node.attrs, node.name, node.opaque, node.origin)
            nodes.append(node)
            continue
        if node.op == "VAR_HANDLE":
            handles[node.outputs[0]] = variable_key(node)
        elif node.op == "CALL_ONCE":
            calls.append(int((node.origin.get("options") or {}).get("InitSubgraphIndex", 0)))
        else:
            handle = node.inputs[0]
            if handle not in handles:
                raise QConvertError(f"{node.op} {node.name!r} reads resource {handle!r} that no "
                                    "VAR_HANDLE of its subgraph makes")
            var = handles[handle]
            if node.op == "ASSIGN_VARIABLE":
                value = rename.get(node.inputs[1], node.inputs[1])
                writes.append((var, value))
                latest[var] = value
            elif var in latest:
                if node.outputs[0] in graph.outputs:
                    raise QConvertError(f"READ_VARIABLE {node.name!r} after an assignment is a "
                                        "graph output; not supported")
                rename[node.outputs[0]] = latest[var]
            else:
                reads[node.outputs[0]] = var
    step = Graph(graph.name, dict(graph.tensors), nodes, list(graph.inputs) + list(reads),
                 list(graph.outputs))
    produced = {o for n in nodes for o in n.outputs if o is not None}
    step.outputs += [t for _, t in writes if t in produced and t not in step.outputs]
    return step, reads, writes, calls


def stateful_step(model: Model, runner: Callable) -> StatefulStep:
    """The main graph of `model` as a `StatefulStep`; `runner(graph, feeds) -> {output: array}`
    (the float or the integer executor) evaluates the CALL_ONCE init subgraphs."""
    step, reads, writes, calls = strip_state(model.graph)
    result = StatefulStep(step, reads, writes)
    for index in calls:
        if not 0 < index < len(model.graphs):
            raise QConvertError(f"CALL_ONCE names subgraph {index}, which does not exist")
        init, init_reads, init_writes, init_calls = strip_state(model.graphs[index])
        if init_reads or init_calls or init.inputs:
            raise QConvertError(f"init subgraph {index} reads variables or takes inputs; "
                                "not supported")
        values = _assigned(init, init_writes, runner(init, {}) if init.outputs else {}, {})
        result.init.update(values)
    for name, var in reads.items():
        t = model.graph.tensors[name]
        result.variables[var] = (t.shape, t.dtype, t.quant)
    return result


def _assigned(graph: Graph, writes: list, outputs: dict, feeds: dict) -> dict:
    values = {}
    for var, name in writes:
        if name in outputs:
            values[var] = outputs[name]
        elif name in feeds:
            values[var] = feeds[name]
        else:
            data = graph.tensors[name].data
            if data is None:
                raise QConvertError(f"the value assigned from {name!r} is never computed")
            values[var] = data
    return values


def run_frames(model: Model, frames: list, runner: Callable, observe: Callable | None = None,
               keep=()) -> list:
    """Run `frames` ([{input name: array}] one call each) through `model` with its state.

    `runner(graph, feeds, observe, keep, carry) -> {name: array}` is the executor (`carry`: the
    dict of an op's variable state, the same for every frame). Returns, per frame, the graph
    outputs and the tensors named in `keep`. A model without any state runs each frame on its
    own.
    """
    step = stateful_step(model, lambda g, f: runner(g, f, None, (), None))
    carry: dict = {}  # the ops' own variable state (an LSTM's hidden and cell), frame to frame
    state = dict(step.init)
    missing = sorted(set(step.reads.values()) - set(state))
    if missing:
        raise QConvertError(f"variable(s) {', '.join(missing)} are read before any assignment")
    results = []
    for frame in frames:
        feeds = dict(frame)
        for name, var in step.reads.items():
            shape, dtype, _ = step.variables[var]
            value = np.asarray(state[var]).astype(dtype, copy=False)
            feeds[name] = value.reshape([int(d) for d in shape]) if shape else value
        out = runner(step.graph, feeds, observe, keep, carry)
        state.update(_assigned(step.graph, step.writes, out, feeds))
        results.append({k: v for k, v in out.items()
                         if k in model.graph.outputs or k in keep})
    return results


# -- which multi-graph models are streaming models (export-c takes them) -----------------------
_CALLING_OPS = ("CALL_ONCE", "CALL", "WHILE", "IF", "If", "Loop", "Scan")


def init_subgraph_indices(model: Model) -> list:
    """The subgraph indices the main graph's CALL_ONCE nodes run, in node order."""
    return [int((n.origin.get("options") or {}).get("InitSubgraphIndex", -1))
            for n in model.graph.nodes if is_resource_op(n) and n.op == "CALL_ONCE"]


def streaming_problems(model: Model) -> dict:
    """{op label: count} of what makes `model` more than a main graph with resource variables
    and CALL_ONCE init subgraphs: ops that run a subgraph other than CALL_ONCE, the ops of a
    subgraph no CALL_ONCE runs, ops in an init subgraph that run subgraphs or read variables
    (empty for a plain streaming model)."""
    inits = set(init_subgraph_indices(model))
    counts = model.graph.op_counts(lambda n: n.op in _CALLING_OPS and not (
        is_resource_op(n) and n.op == "CALL_ONCE"))
    for index, g in enumerate(model.graphs[1:], start=1):
        bad = (lambda n: True) if index not in inits else (
            lambda n: n.op in _CALLING_OPS or (is_resource_op(n) and n.op == "READ_VARIABLE"))
        for label, n in g.op_counts(bad).items():
            counts[label] = counts.get(label, 0) + n
    return counts


def is_streaming_model(model: Model) -> bool:
    """True for a streaming model: resource variables, and subgraphs that only the main
    graph's CALL_ONCE runs, as init subgraphs (what `qconvert export-c` exports)."""
    return len(model.graphs) > 1 and has_state(model) and not streaming_problems(model)


def require_one_graph_or_state(model: Model, purpose: str) -> None:
    """export-c's route check: a one-graph model or a streaming model passes; any other
    multi-graph model is refused in one line naming its ops (`model_io.require_one_graph`)."""
    from qconvert.formats.model_io import require_one_graph

    if not is_streaming_model(model):
        require_one_graph(model, purpose)


def require_known_ops_or_state(model: Model, purpose: str) -> None:
    """`model_io.require_known_ops`, the resource-variable ops of a streaming model aside."""
    from qconvert.ir.graph import list_ops
    from qconvert.formats.model_io import require_known_ops

    if not is_streaming_model(model):
        require_known_ops(model, purpose)
        return
    counts: dict = {}
    for node in model.opaque_nodes():
        if not is_resource_op(node):
            counts[node.op] = counts.get(node.op, 0) + 1
    if counts:
        raise QConvertError(f"cannot {purpose}: ops unknown to qconvert: {list_ops(counts)}")
