"""Graphs and models of the IR, and the invariant checker every pass is held to.

`Graph.verify()` checks what every reader, pass and writer relies on: unique tensor names, one
producer per tensor (SSA), inputs that exist and are defined before use (topological order; a
TFLite variable tensor, an LSTM's state, is defined from the start),
graph outputs that are produced, and shapes/dtypes that agree with constant data. It raises
`GraphError` naming the first problem found. It is one walk over the tensors and one over the
nodes, without recursion, so it stays linear in the graph's size.

The Graph API every pass edits through (learnt from onnx-graphsurgeon's Graph, kept to what
the passes need):
- queries from the cached use index (`qconvert.ir.uses`, built on first use): `producer`,
  `readers`, `reader_count`, `sole_reader` (the one reader of a value nothing else needs: the
  condition of every fusion), `observed`, `observed_names`, `needed_names`, `constant`;
- edits that keep the index current: `add_constant` (the one way to add a constant),
  `set_constant` (new data for a constant, copied when others read it), `add_value` (a new
  activation tensor), `replace_uses`, `set_inputs`, `set_outputs`, `attach` / `detach` (a node's
  reads and writes), `remove_nodes` (remove and replace nodes in one walk over the list),
  `drop_unread_constants`.
Code that edits `node.inputs` / `node.outputs` or the node list in place must call
`invalidate_uses()`; `verify()` catches an index that went stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .tensor import RAW_DTYPES, Tensor
from .uses import UseIndex


def fresh_name(base: str, taken) -> str:
    """`base` when `taken` (a set or dict of names) lacks it, else `base_1`, `base_2`... the
    first one `taken` lacks: the one naming rule for tensors (`Graph.fresh_name`) and for the
    node names a writer must keep unique (`qconvert.formats.node_names`). Deterministic."""
    if base not in taken:
        return base
    i = 1
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


class GraphError(Exception):
    """An IR invariant is broken (a bug in a reader or pass, or an impossible model)."""


@dataclass
class Graph:
    """An ordered, topologically sorted node list over named tensors."""

    name: str = ""
    tensors: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    _uses: UseIndex | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, key, value):
        if key == "nodes":  # a new node list: the use index no longer describes it
            object.__setattr__(self, "_uses", None)
        object.__setattr__(self, key, value)

    # -- building -------------------------------------------------------------------------
    def add_tensor(self, tensor: Tensor) -> Tensor:
        if tensor.name in self.tensors:
            raise GraphError(f"duplicate tensor name {tensor.name!r}")
        self.tensors[tensor.name] = tensor
        return tensor

    def fresh_name(self, base: str) -> str:
        """A tensor name not used yet in this graph, derived from `base` (`fresh_name`)."""
        return fresh_name(base, self.tensors)

    def add_constant(self, base: str, data: np.ndarray, dtype: str | None = None,
                     share: bool = False) -> str:
        """Add a constant holding `data` under a fresh name derived from `base`; return the name.

        The one way passes add constants: the array is made C-contiguous (copied only when it is
        not; a scalar stays 0-d) and read-only, and its dtype is `dtype` or the array's. It is a
        new array object (a view: the caller's array is left alone) unless `share`: then a
        C-contiguous `data` is stored itself, made read-only: the caller hands the array over
        (it can no longer change the constant by writing into it), and tensors holding one array
        object are written as one TFLite buffer (the writer keys buffers by array identity).
        """
        name = self.fresh_name(base)
        data = np.asarray(data)
        if not data.flags.c_contiguous:
            data = data.copy(order="C")
        elif not share:
            data = data.view()
        data.flags.writeable = False
        self.add_tensor(Tensor(name, tuple(data.shape), dtype or str(data.dtype), data))
        return name

    def set_constant(self, name: str, data: np.ndarray, copy_base: str | None = None) -> str:
        """Give constant `name` new `data` (same dtype) for its one reader; return the name to
        read. A constant read by other nodes too, or that is a graph input or output, is left
        alone and a copy is added instead (named from `copy_base`, default `name` + "_fused")."""
        t = self.tensors[name]
        if self.reader_count(name) <= 1 and name not in self.outputs and name not in self.inputs:
            data = np.ascontiguousarray(data)
            data.flags.writeable = False
            t.data, t.shape = data, tuple(data.shape)
            return name
        return self.add_constant(copy_base or f"{name}_fused", data, t.dtype)

    def add_value(self, base: str, shape, dtype: str) -> str:
        """Add an activation tensor (no data) under a fresh name derived from `base`."""
        name = self.fresh_name(base)
        self.add_tensor(Tensor(name, shape, dtype))
        return name

    def drop_unread_constants(self, names) -> None:
        """Delete the constants among `names` that no node, subgraph body or graph output reads
        (operands a rewrite stopped reading)."""
        for name in dict.fromkeys(names):
            t = self.tensors.get(name)
            if (t is not None and t.data is not None and self.reader_count(name) == 0
                    and name not in self.outputs):
                del self.tensors[name]

    def copy(self) -> "Graph":
        """A copy that later edits of either graph leave alone: new tensor and node objects,
        lists and attribute dicts; constant arrays are shared (constants are immutable)."""
        g = Graph(name=self.name, inputs=list(self.inputs), outputs=list(self.outputs))
        g.tensors = {k: t.copy() for k, t in self.tensors.items()}
        g.nodes = [n.copy() for n in self.nodes]
        return g

    # -- the use index ------------------------------------------------------------------------
    @property
    def uses(self) -> UseIndex:
        """The use index of this graph (built on first use, kept current by the edit methods)."""
        if self._uses is None:
            object.__setattr__(self, "_uses", UseIndex(self.nodes))
        return self._uses

    def invalidate_uses(self) -> None:
        """Forget the use index: call after editing node inputs / outputs or the node list in
        place (not through the methods below)."""
        object.__setattr__(self, "_uses", None)

    def producer(self, name: str | None):
        """The node writing tensor `name`, or None (graph input, constant, unknown)."""
        return None if name is None else self.uses.producer.get(name)

    def readers(self, name: str) -> list:
        """The nodes reading tensor `name`, each once (subgraph bodies not included)."""
        return self.uses.readers_of(name)

    def read_in_body(self, name: str) -> bool:
        """True when a subgraph body of an opaque node (If, Loop, Scan) reads `name`."""
        return name in self.uses.hidden

    def observed_names(self) -> set:
        """The tensors something outside the node list needs by name (see `observed`)."""
        names = {n for n, t in self.tensors.items() if t.extra.get("signature")}
        names.update(self.uses.hidden)
        return names

    def needed_names(self) -> set:
        """Every tensor something needs: a node input, a graph output, an observed name."""
        names = set(self.uses.readers)
        names.update(self.outputs)
        names.update(self.observed_names())
        return names

    def observed(self, name: str) -> bool:
        """True when something outside the node list needs `name` by name, as it needs a graph
        output: a subgraph body reads it, or a TFLite signature def names it."""
        t = self.tensors.get(name)
        return name in self.uses.hidden or (t is not None and bool(t.extra.get("signature")))

    def reader_count(self, name: str) -> int:
        """How many nodes and subgraph bodies read `name`."""
        uses = self.uses
        return uses.count(name) + uses.hidden.get(name, 0)

    def sole_reader(self, name: str):
        """The only node reading `name` when nothing else needs it (no other reader, not a
        graph output, not `observed`): a fusion may then consume `name`."""
        uses = self.uses
        reader = uses.readers.get(name)
        if (reader is None or type(reader) is dict or name in self.outputs
                or self.observed(name)):
            return None
        return reader

    def replace_uses(self, old: str, new: str) -> None:
        """Make every node that reads `old` read `new` instead (graph outputs are not touched)."""
        for node in self.readers(old):
            self.set_inputs(node, [new if i == old else i for i in node.inputs])

    def set_inputs(self, node, inputs: list) -> None:
        """Rewire `node` (a node of this graph) to read `inputs`."""
        uses = self._uses
        if uses is not None:
            uses.remove(node)
        node.inputs = list(inputs)
        if uses is not None:
            uses.add(node)

    def set_outputs(self, node, outputs: list) -> None:
        """Make `node` (a node of this graph) write `outputs`."""
        uses = self._uses
        if uses is not None:
            uses.remove(node)
        node.outputs = list(outputs)
        if uses is not None:
            uses.add(node)

    def attach(self, node) -> None:
        """Record the reads and writes of `node`, a new node the caller puts in the node list
        (`remove_nodes` replacements), so later questions see it at once."""
        if self._uses is not None:
            self._uses.add(node)

    def detach(self, node) -> None:
        """Forget `node`'s reads and writes now; the caller removes it from the node list
        later (`remove_nodes`), so a sweep removing many nodes walks the list once."""
        if self._uses is not None:
            self._uses.remove(node)

    def remove_nodes(self, nodes, replacements: dict | None = None) -> None:
        """Remove `nodes` and put `replacements` ({id(old node): new node or [new nodes]}) in
        their old nodes' places, in one walk over the node list."""
        gone = {id(n): n for n in nodes}
        replacements = replacements or {}
        if not gone and not replacements:
            return
        uses = self._uses
        if uses is not None:
            for n in gone.values():
                uses.remove(n)
        kept = []
        for n in self.nodes:
            key = id(n)
            if key in gone:
                continue
            new = replacements.get(key)
            if new is None:
                kept.append(n)
                continue
            new = new if isinstance(new, list) else [new]
            if uses is not None:
                uses.remove(n)
                for m in new:
                    uses.add(m)
            kept.extend(new)
        self.nodes[:] = kept  # in place: the index stays

    # -- queries --------------------------------------------------------------------------
    def op_counts(self, keep) -> dict:
        """{node label: count} of the nodes for which `keep(node)` is true (for error lines
        that name every op a step cannot handle, see `list_ops`)."""
        counts: dict = {}
        for node in self.nodes:
            if keep(node):
                counts[node.label] = counts.get(node.label, 0) + 1
        return counts

    def constant(self, name: str | None) -> np.ndarray | None:
        """The constant data of tensor `name`, or None when it is not a constant."""
        if name is None:
            return None
        t = self.tensors.get(name)
        return None if t is None else t.data

    # -- invariants -----------------------------------------------------------------------
    def verify(self) -> None:
        """Raise GraphError if an IR invariant does not hold (see module docstring)."""
        tensors = self.tensors
        plain = set()  # (dtype, shape) of activations already found valid
        for key, t in tensors.items():
            if key != t.name:
                raise GraphError(f"tensor registered as {key!r} is named {t.name!r}")
            if t.data is None and t.quant is None:
                try:
                    meta = (t.dtype, t.shape)
                    if meta in plain:
                        continue
                except TypeError:  # a shape given as a list
                    meta = None
                _check_tensor(t)
                if meta is not None:
                    plain.add(meta)
            else:
                _check_tensor(t)
        defined = set(self.inputs)
        for name in self.inputs:
            if name not in tensors:
                raise GraphError(f"graph input {name!r} has no tensor")
            if tensors[name].is_constant:
                raise GraphError(f"graph input {name!r} is a constant")
        defined.update(n for n, t in tensors.items()
                       if t.data is not None or t.extra.get("is_variable"))  # TFLite state
        for node in self.nodes:
            if not node.opaque:
                inputs = node.inputs
                required, most = _arity(node)
                if most is not None and len(inputs) > most:
                    _check_arity(node)  # raises when one of the extra inputs is present
                for i in required:
                    if i >= len(inputs) or inputs[i] is None:
                        _check_arity(node)  # raises, naming the input
            for name in node.inputs:
                if name is not None and name not in defined:
                    if name not in tensors:
                        raise GraphError(
                            f"node {node.name or node.op!r} reads missing tensor {name!r}")
                    raise GraphError(
                        f"node {node.name or node.op!r} reads {name!r} before it is produced")
            for name in node.outputs:
                if name is None:
                    continue
                if name not in tensors:
                    raise GraphError(f"node {node.name or node.op!r} writes missing tensor {name!r}")
                if name in defined:
                    raise GraphError(f"tensor {name!r} has more than one producer")
                defined.add(name)
        for name in self.outputs:
            if name not in defined:
                raise GraphError(f"graph output {name!r} is never produced")
        if len(set(self.outputs)) != len(self.outputs):
            twice = next(n for i, n in enumerate(self.outputs) if n in self.outputs[:i])
            raise GraphError(f"graph output {twice!r} is listed more than once")
        if self._uses is not None and not self._uses.describes(self.nodes):
            raise GraphError("the use index is out of date: a node's inputs or outputs were "
                             "edited in place without Graph.invalidate_uses()")


_ARITY: dict = {}  # op -> (indices of its required inputs, most inputs or None)


def _arity(node) -> tuple:
    """(indices of the required inputs, the most inputs it takes or None when variadic) of
    known op `node.op` (GraphError for an unknown op)."""
    found = _ARITY.get(node.op)
    if found is None:
        from qconvert import schemas

        schema = schemas.get(node.op)
        if schema is None:
            raise GraphError(f"node {node.name!r} has op {node.op!r}, which is not in the "
                             "schema table")
        required = tuple(i for i, slot in enumerate(schema.inputs)
                         if not (slot.optional or slot.variadic))
        most = None if any(slot.variadic for slot in schema.inputs) else len(schema.inputs)
        found = _ARITY[node.op] = (required, most)
    return found


def _check_arity(node) -> None:
    """A known op has every required input of its schema."""
    if node.opaque:
        return
    from qconvert import schemas

    schema = schemas.get(node.op)
    if schema is None:
        raise GraphError(f"node {node.name!r} has op {node.op!r}, which is not in the schema table")
    for i, slot in enumerate(schema.inputs):
        if slot.optional or slot.variadic:
            continue
        if i >= len(node.inputs) or node.inputs[i] is None:
            raise GraphError(f"{node.op} {node.name!r} lacks its required input {slot.name!r}")
    if not any(slot.variadic for slot in schema.inputs):
        extra = [n for n in node.inputs[len(schema.inputs):] if n is not None]
        if extra:
            raise GraphError(f"{node.op} {node.name!r} has {len(schema.inputs) + len(extra)} "
                             f"inputs; it takes at most {len(schema.inputs)}")


def _check_tensor(t: Tensor) -> None:
    if t.dtype in RAW_DTYPES:
        return
    try:
        dtype = np.dtype(t.dtype)
    except TypeError as exc:
        raise GraphError(f"tensor {t.name!r} has unknown dtype {t.dtype!r}") from exc
    for d in t.shape or ():
        if isinstance(d, (int, np.integer)) and d < 0:
            raise GraphError(f"tensor {t.name!r} has negative dimension in {t.shape}")
    if t.data is not None:
        if t.data.dtype != dtype:
            raise GraphError(f"constant {t.name!r} holds {t.data.dtype}, declared {t.dtype}")
        if t.static_shape and tuple(int(d) for d in t.shape) != t.data.shape:
            raise GraphError(f"constant {t.name!r} has shape {t.data.shape}, declared {t.shape}")
    if t.quant is not None:
        q = t.quant
        if q.scale.size != q.zero_point.size and q.zero_point.size != 1:
            raise GraphError(f"tensor {t.name!r} has {q.scale.size} scales, {q.zero_point.size} zero points")
        if q.axis is not None and t.shape and not -len(t.shape) <= q.axis < len(t.shape):
            raise GraphError(f"tensor {t.name!r} quantized along axis {q.axis} of {t.shape}")


@dataclass
class Model:
    """A whole model: its graphs (the first is the main one) and file-level facts.

    `format` is ``"tflite"`` or ``"onnx"``; `meta` keeps file-level fields of that format
    (opsets, producer, description, signature defs, metadata buffers) for a faithful rewrite.
    """

    format: str
    graphs: list
    meta: dict = field(default_factory=dict)

    @property
    def graph(self) -> Graph:
        return self.graphs[0]

    def verify(self) -> None:
        for i, g in enumerate(self.graphs):
            try:
                g.verify()
            except GraphError as exc:
                prefix = f"subgraph {i}: " if len(self.graphs) > 1 else ""
                raise GraphError(prefix + str(exc)) from exc

    def opaque_nodes(self) -> list:
        return [n for g in self.graphs for n in g.nodes if n.opaque]


def list_ops(counts: dict) -> str:
    """"A, B (x2), C": op labels in sorted order with their counts, for one-line errors."""
    return ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in sorted(counts.items()))
