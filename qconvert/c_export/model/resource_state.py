"""Streaming models in `qconvert export-c`: TFLite resource variables as static C state.

A streaming model (a wake-word detector fed one feature frame per call) keeps its state in
resource variables: VAR_HANDLE names a variable, READ_VARIABLE copies its value into a tensor,
ASSIGN_VARIABLE copies a tensor into it, and CALL_ONCE runs an init subgraph (which assigns the
initial values) on the first call. TFLite Micro runs these ops in the main subgraph's order, so
a READ after an ASSIGN of the same variable in the same call sees the value just assigned.

    graph, state = split_state(model)      # the main graph without resource ops, the state
    steps = state.splice(lower_graph(graph, options))

The export keeps that meaning with no interpreter:

- every variable is a region of one static buffer, `NAME_state` (`NAME_STATE_SIZE` bytes,
  4-byte aligned regions), outside the per-call arena plan since it lives across calls;
- its initial value is computed at export time (the constants the init subgraph assigns, or the
  init subgraph run by qconvert's integer executor when it computes them: it has no inputs)
  and written by `NAME_init()`, which `NAME_invoke` calls on its first call when the user did
  not; `NAME_reset()` writes it again (a new stream);
- READ_VARIABLE is a copy from the state into the arena at its place in the call, or no code at
  all (its readers read the state buffer) when nothing writes the variable between the READ and
  the last reader of its tensor (or of a Reshape of it);
- ASSIGN_VARIABLE is a copy into the state at its place, or no code when the layer producing
  the value writes it straight into the state buffer: allowed when the variable is assigned once
  per call, the value is no graph input or output, and no READ of the variable runs between
  that layer and the ASSIGN (it would see the new value early; a READ before the layer whose
  tensor is still read after it is then a copy); an ASSIGN of a variable's own aliased READ is
  no code either.

The tensors that live in the state buffer take 0 bytes in the arena plan (`plan_sizes`) and
their pointers are the state's (`pointer`). These decisions hold for the step order of
`splice` (the graph's): whatever reorders steps afterwards must keep every READ / ASSIGN and
every layer reading or writing a state tensor in that order. The C text is `state_source`'s;
which multi-graph models are streaming models, `executor.streaming`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from string import Template

import numpy as np

from qconvert.errors import QConvertError
from qconvert.executor.streaming import (_assigned, strip_state, init_subgraph_indices,
                                         is_resource_op, streaming_problems,
                                         variable_key)
from qconvert.ir import Graph
from qconvert.ir.graph import list_ops

from ..c_text import c_comment
from .memory_plan import PlanStep

_VAR_OPS = ("READ_VARIABLE", "ASSIGN_VARIABLE")
# what each READ / ASSIGN became, for NAME.c's comment
_HOW = {"alias": "no copy, its readers read the state", "copy": "a copy",
        "direct": "no copy, the layer computing the value writes the state",
        "same": "no copy, the value is the variable itself"}


@dataclass
class Variable:
    """One resource variable as C state: `offset` and `nbytes` in the state buffer."""

    key: str            # container/shared_name (VAR_HANDLE's identity)
    dtype: str
    dims: tuple
    nbytes: int
    quant: object = None
    offset: int = 0
    init: dict | None = None   # {"double": raw values, "single": raw values} or None

    @property
    def label(self) -> str:
        return self.key.lstrip("/")


@dataclass
class _Event:
    """A READ_VARIABLE or ASSIGN_VARIABLE of the main graph, after `before` other nodes."""

    node: object
    var: str
    tensor: str
    before: int


@dataclass
class StateProgram:
    """The variables of a streaming model and how its main graph's READ / ASSIGN run."""

    graph: Graph
    variables: list
    events: list
    size: int
    placed: dict = field(default_factory=dict)   # tensor -> Variable it lives in
    notes: list = field(default_factory=list)     # one line per READ / ASSIGN for NAME.c

    def var(self, key) -> Variable:
        return next(v for v in self.variables if v.key == key)

    # -- the steps ----------------------------------------------------------------------------
    def splice(self, steps: list) -> list:
        """`steps` (one per node of `graph`, in order) with a step per READ / ASSIGN at its
        place, renumbered; decides the copies, aliases and direct writes (module docstring)."""
        out, k = [], 0
        marks = []
        for event in self.events:
            while k < event.before:
                out.append(steps[k])
                k += 1
            marks.append(len(out))
            out.append(None)
        out += steps[k:]
        decided = _decide(self, out, marks)
        for pos, event in zip(marks, self.events):
            out[pos] = self._step(event, decided[id(event)], pos)
        for index, step in enumerate(out):
            step.index = index
            if step.plan.overlap and any(t in self.placed for t in
                                         step.plan.outputs + step.plan.inputs):
                step.plan.overlap = None  # a state tensor takes no arena bytes to overlap
        return out

    def _step(self, event, how, pos):
        from .steps import Step

        v = self.var(event.var)
        where = f"state_s8 + {v.offset}"
        label = c_comment(v.label)
        arrays, inputs, outputs = [], [], []
        if event.node.op == "READ_VARIABLE":
            outputs = [event.tensor]
            if how == "alias":
                call = ""  # no code (NAME.c's opening comment says why)
            else:
                call = f"memcpy($out0, {where}, {v.nbytes});"
        else:
            data = self.graph.tensors[event.tensor].data
            if how == "direct":
                inputs = [event.tensor]
                call = ""  # no code (NAME.c's opening comment says why)
            elif how == "same":
                inputs = [event.tensor]
                call = ""  # no code (NAME.c's opening comment says why)
            elif data is not None:
                arrays = [("value", "int8_t", np.ascontiguousarray(data).view(np.int8))]
                call = f"memcpy({where}, @L_value, {v.nbytes});"
            else:
                inputs = [event.tensor]
                call = f"memcpy({where}, $in0, {v.nbytes});"
        self.notes.append(f"layer {pos}: {event.node.op} {label}: {how} ({_HOW[how]})")
        return Step(pos, event.node, PlanStep(inputs=inputs, outputs=outputs),
                    Template(call), arrays)

    # -- the plan -----------------------------------------------------------------------------
    def plan_sizes(self, sizes: dict) -> None:
        """Tensors living in the state buffer take no arena bytes."""
        for name in self.placed:
            if name in sizes:
                sizes[name] = 0

    def after_plan(self, plan) -> None:
        """Drop the state tensors from the arena plan's offsets (their pointers are the
        state's)."""
        for name in self.placed:
            plan.offset.pop(name, None)

    def pointer(self, graph, tensor):
        """The C pointer of `tensor` when it lives in the state buffer, else None."""
        from .steps import DTYPES

        v = self.placed.get(tensor)
        if v is None:
            return None
        ctype = DTYPES[graph.tensors[tensor].dtype][0]
        if ctype == "int8_t":
            return f"(state_s8 + {v.offset})"
        return f"(({ctype} *)(void *)(state_s8 + {v.offset}))"

    # -- the text (`state_source`) -------------------------------------------------------------
    def header_lines(self, name: str) -> list:
        from .state_source import header_lines

        return header_lines(self, name)

    def comment_lines(self) -> list:
        from .state_source import comment_lines

        return comment_lines(self)

    def source_lines(self, name: str) -> list:
        from .state_source import source_lines

        return source_lines(self, name)

    @staticmethod
    def prototypes(name: str) -> list:
        from .state_source import prototypes

        return prototypes(name)

    @staticmethod
    def invoke_prologue(name: str) -> list:
        from .state_source import invoke_prologue

        return invoke_prologue(name)


# -- the model --------------------------------------------------------------------------------
def split_state(model) -> tuple:
    """(the main graph without resource ops, its `StateProgram`) of a streaming int8 model;
    refuses in one line what export-c cannot do with it (every op it cannot emit named)."""
    from .lowering import unsupported_ops

    graph = model.graph
    handles, events, nodes = {}, [], []
    for node in graph.nodes:
        if not is_resource_op(node):
            nodes.append(node)
        elif node.op == "VAR_HANDLE":
            handles[node.outputs[0]] = variable_key(node)
        elif node.op in _VAR_OPS:
            if node.inputs[0] not in handles:
                raise QConvertError(f"{node.op} {node.name!r} reads resource {node.inputs[0]!r} "
                                    "that no VAR_HANDLE of the main graph makes")
            tensor = node.outputs[0] if node.op == "READ_VARIABLE" else node.inputs[1]
            events.append(_Event(node, handles[node.inputs[0]], tensor, len(nodes)))
        elif events:
            raise QConvertError("cannot export C: a CALL_ONCE after a READ_VARIABLE or "
                                "ASSIGN_VARIABLE of the main graph")
    stateless = Graph(graph.name, graph.tensors, nodes, list(graph.inputs), list(graph.outputs))
    counts = streaming_problems(model)
    for label, n in unsupported_ops(stateless).items():
        counts[label] = counts.get(label, 0) + n
    for event in events:
        t = graph.tensors[event.tensor]
        if t.data is None and t.dtype not in ("int8", "int16", "float32"):
            label = f"{event.node.op} of a {t.dtype} variable"
            counts[label] = counts.get(label, 0) + 1
    if counts:
        raise QConvertError(f"cannot export C: ops it cannot emit: {list_ops(counts)}")
    variables = _variables(model, events)
    return stateless, StateProgram(stateless, variables, events,
                                   sum(_align4(v.nbytes) for v in variables))


def _align4(n: int) -> int:
    return (int(n) + 3) // 4 * 4


def _variables(model, events) -> list:
    """The variables the main graph reads or assigns, in order of first use, with their
    layout and initial values; refuses a variable read before any value is given it."""
    from .steps import tensor_dims

    graph = model.graph
    init = initial_values(model)
    out: dict = {}
    offset = 0
    assigned, read = set(), set()
    for e in events:
        t = graph.tensors[e.tensor]
        dims = tuple(int(d) for d in (t.data.shape if t.data is not None
                                      else tensor_dims(graph, e.tensor)))
        nbytes = int(np.prod(dims, dtype=np.int64)) * np.dtype(t.dtype).itemsize
        if e.var not in out:
            out[e.var] = Variable(e.var, t.dtype, dims, nbytes, t.quant, offset,
                                  init.get(e.var))
            offset += _align4(nbytes)
        v = out[e.var]
        if (t.dtype, nbytes) != (v.dtype, v.nbytes):
            raise QConvertError(f"cannot export C: variable {v.label!r} is used as {v.dtype} "
                                f"({v.nbytes} bytes) and as {t.dtype} ({nbytes} bytes)")
        if e.node.op == "READ_VARIABLE":
            if e.var not in read:
                v.quant = t.quant  # the variable's parameters: those its READs see
                read.add(e.var)
            if e.var not in assigned and v.init is None:
                raise QConvertError(f"cannot export C: variable {v.label!r} is read before "
                                    "any assignment (no CALL_ONCE init subgraph assigns it)")
        else:
            assigned.add(e.var)
    for v in out.values():
        for r, a in (v.init or {}).items():
            a = np.asarray(a)
            if (str(a.dtype), a.nbytes) != (v.dtype, v.nbytes):
                raise QConvertError(f"cannot export C: the init subgraph assigns {a.dtype} "
                                    f"({a.nbytes} bytes) to variable {v.label!r} of {v.dtype} "
                                    f"({v.nbytes} bytes)")
    return list(out.values())


def initial_values(model) -> dict:
    """{variable: {"double": values, "single": values}} the CALL_ONCE init subgraphs assign,
    the last assignment winning: constants as they are, computed values from qconvert's
    integer executor (bit-exact with TFLite Micro's kernels) under each rounding."""
    from qconvert.executor.int_executor import run_int8

    values: dict = {}
    for index in init_subgraph_indices(model):
        if not 0 < index < len(model.graphs):
            raise QConvertError(f"cannot export C: CALL_ONCE names subgraph {index}, which "
                                "does not exist")
        init, reads, writes, calls = strip_state(model.graphs[index])
        if reads or calls or init.inputs:
            raise QConvertError(f"cannot export C: init subgraph {index} reads variables or "
                                "takes inputs")
        runs = {r: (run_int8(init, {}, rounding=r) if init.outputs else {})
                for r in ("double", "single")}
        for r, outs in runs.items():
            for var, value in _assigned(init, writes, outs, {}).items():
                values.setdefault(var, {})[r] = np.asarray(value)
    return values


# -- copies, aliases, direct writes -----------------------------------------------------------
def _decide(state: StateProgram, steps: list, marks: list) -> dict:
    """{id(event): "copy" | "alias" | "direct" | "same"} for the READ / ASSIGN events at
    positions `marks` of `steps` (None there); fills `state.placed`."""
    graph = state.graph
    events = state.events
    pos = {id(e): p for e, p in zip(events, marks)}
    root: dict = {}
    producer: dict = {}
    readers: dict = {}
    for index, step in enumerate(steps):
        if step is None:
            continue
        if step.plan.alias:
            root[step.plan.outputs[0]] = root.get(step.plan.inputs[0], step.plan.inputs[0])
        else:
            for t in step.plan.outputs:
                producer.setdefault(t, index)
        for t in step.plan.inputs:
            readers.setdefault(t, []).append(index)
    for e in events:  # an ASSIGN reads its value too
        if e.node.op == "ASSIGN_VARIABLE":
            readers.setdefault(e.tensor, []).append(pos[id(e)])

    def group(t):
        r = root.get(t, t)
        return [n for n in set(root) | {r} if root.get(n, n) == r]

    ends = set(graph.outputs)
    last = len(steps)

    def last_use(t):
        members = group(t)
        if any(m in ends for m in members):
            return last
        return max([i for m in members for i in readers.get(m, [])] + [-1])

    how: dict = {}
    writes: dict = {}  # variable -> indices where its state bytes change
    same: dict = {}  # ASSIGN(v, READ(v)) -> that READ
    for e in events:
        if e.node.op != "ASSIGN_VARIABLE":
            continue
        k = pos[id(e)]
        reads = [r for r in events if r.node.op == "READ_VARIABLE" and r.var == e.var and
                 pos[id(r)] < k and root.get(e.tensor, e.tensor) == root.get(r.tensor, r.tensor)]
        if reads:
            same[id(e)] = reads[-1]
        elif _direct_ok(state, e, k, pos, root, producer, group, ends):
            how[id(e)] = "direct"
            for m in group(e.tensor):
                state.placed[m] = state.var(e.var)
            writes.setdefault(e.var, []).append(producer[root.get(e.tensor, e.tensor)])
        else:
            how[id(e)] = "copy"
            writes.setdefault(e.var, []).append(k)
    for e in events:  # ASSIGN(v, READ(v)) with no other write between: writes nothing new
        if e.node.op == "ASSIGN_VARIABLE" and id(e) in same:
            r, k = pos[id(same[id(e)])], pos[id(e)]
            if any(r < w < k for w in writes.get(e.var, [])):
                how[id(e)] = "copy"
                writes[e.var].append(k)
    for e in events:
        if e.node.op != "READ_VARIABLE":
            continue
        r = pos[id(e)]
        end = last_use(e.tensor)
        safe = end < last and not any(r < w <= end for w in writes.get(e.var, []))
        if safe and not any(m in state.placed for m in group(e.tensor)):
            how[id(e)] = "alias"
            for m in group(e.tensor):
                state.placed[m] = state.var(e.var)
        else:
            how[id(e)] = "copy"
    for e in events:  # ASSIGN(v, READ(v)): no code when that READ is the state itself
        if e.node.op == "ASSIGN_VARIABLE" and id(e) not in how:
            placed = state.placed.get(e.tensor)
            how[id(e)] = "same" if placed is not None and placed.key == e.var else "copy"
    return how


def _direct_ok(state, e, k, pos, root, producer, group, ends) -> bool:
    """Whether the layer producing ASSIGN `e`'s value may write it into the state itself."""
    graph = state.graph
    if graph.tensors[e.tensor].data is not None:
        return False
    if sum(1 for x in state.events if x.node.op == "ASSIGN_VARIABLE" and x.var == e.var) != 1:
        return False
    members = group(e.tensor)
    if any(m in ends or m in graph.inputs or m in state.placed for m in members):
        return False
    p = producer.get(root.get(e.tensor, e.tensor))
    if p is None or p >= k:
        return False
    # a READ between the producer and the ASSIGN would see the new value early; a READ before
    # the producer whose tensor is read on past it becomes a copy (`_decide`), one after the
    # ASSIGN sees the value assigned, which the state then holds
    return not any(r.node.op == "READ_VARIABLE" and r.var == e.var and p < pos[id(r)] < k
                   for r in state.events)
