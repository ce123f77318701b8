"""Graphs and models of the IR, and the invariant checker every pass is held to.

`Graph.verify()` checks what every reader, pass and writer relies on: unique tensor names, one
producer per tensor (SSA), inputs that exist and are defined before use (topological order),
graph outputs that are produced, and shapes/dtypes that agree with constant data. It raises
`GraphError` naming the first problem found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .tensor import RAW_DTYPES, Tensor


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

    # -- building -------------------------------------------------------------------------
    def add_tensor(self, tensor: Tensor) -> Tensor:
        if tensor.name in self.tensors:
            raise GraphError(f"duplicate tensor name {tensor.name!r}")
        self.tensors[tensor.name] = tensor
        return tensor

    def fresh_name(self, base: str) -> str:
        """A tensor name not used yet in this graph, derived from `base`."""
        if base not in self.tensors:
            return base
        i = 1
        while f"{base}_{i}" in self.tensors:
            i += 1
        return f"{base}_{i}"

    # -- queries --------------------------------------------------------------------------
    def producers(self) -> dict:
        """Map tensor name -> the node producing it."""
        return {out: n for n in self.nodes for out in n.outputs if out is not None}

    def consumers(self) -> dict:
        """Map tensor name -> list of nodes reading it (once per node)."""
        result: dict = {}
        for n in self.nodes:
            for name in dict.fromkeys(n.present_inputs()):
                result.setdefault(name, []).append(n)
        return result

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
        for key, t in self.tensors.items():
            if key != t.name:
                raise GraphError(f"tensor registered as {key!r} is named {t.name!r}")
            _check_tensor(t)
        defined = set(self.inputs)
        for name in self.inputs:
            if name not in self.tensors:
                raise GraphError(f"graph input {name!r} has no tensor")
            if self.tensors[name].is_constant:
                raise GraphError(f"graph input {name!r} is a constant")
        defined.update(n for n, t in self.tensors.items() if t.is_constant)
        for node in self.nodes:
            _check_arity(node)
            for name in node.present_inputs():
                if name not in self.tensors:
                    raise GraphError(f"node {node.name or node.op!r} reads missing tensor {name!r}")
                if name not in defined:
                    raise GraphError(
                        f"node {node.name or node.op!r} reads {name!r} before it is produced")
            for name in node.outputs:
                if name is None:
                    continue
                if name not in self.tensors:
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
