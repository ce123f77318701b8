"""The bookkeeping of the NCHW -> NHWC conversion: where each ONNX value lives in the TFLite graph.

Every ONNX activation `t` is held by a TFLite tensor whose values are `transpose(t, perm)`: its
`Layout`. Spatial ops produce `perm = NHWC = (0, 2, 3, 1)`; elementwise ops keep their input's;
an ONNX Transpose only changes the perm (no node); a Flatten / Reshape of a permuted tensor to
[N, K] keeps the TFLite element order and records where the columns came from (`Layout.flat`),
so the fully connected layer that reads it permutes its weight columns instead of the data
being transposed. `Converter.relayout` gives a value in the layout an op needs, inserting a
TRANSPOSE only when the data really moves (a permutation that moves only size-1 axes is a
RESHAPE) and remembering it, so each tensor is transposed at most once per layout.

`Converter` builds the TFLite graph (`dst`) while the rules of `layout_rules` and
`ops` walk the ONNX graph (`src`): `define` creates the TFLite tensor of an ONNX
output, `emit` adds a node, `add_const` / `copy_const` / `permute_const` place constants. A rule
that meets something TFLite cannot express raises `Unmappable`; the pass collects every such
problem and reports them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert.ir import Graph, Node, Tensor

NHWC = (0, 2, 3, 1)


class Unmappable(Exception):
    """A node (or value) TFLite cannot express; `category` groups problems in the report."""

    def __init__(self, detail: str, category: str = "cannot be expressed in TFLite"):
        super().__init__(detail)
        self.detail = detail
        self.category = category


def onnx_op(node) -> str:
    """The ONNX op_type of an IR node, for messages (Conv, not Conv2D)."""
    from qconvert import schemas

    schema = None if node.opaque else schemas.get(node.op)
    return schema.onnx.op_type if schema is not None and schema.onnx is not None else node.op


def identity(rank: int) -> tuple:
    """The identity permutation of `rank` axes."""
    return tuple(range(rank))


@dataclass(frozen=True)
class Layout:
    """`tflite = transpose(onnx, perm)`; `flat` = (ONNX shape, perm) of the tensor a 2-D
    [N, K] value was flattened from while permuted: its columns are in `columns()` order."""

    perm: tuple
    flat: tuple | None = None

    @property
    def is_identity(self) -> bool:
        return self.flat is None and self.perm == identity(len(self.perm))


def columns(layout: Layout) -> np.ndarray:
    """For a flattened layout: `tflite[:, j] == onnx[:, columns[j]]`."""
    shape, perm = layout.flat
    index = np.arange(int(np.prod(shape[1:], dtype=np.int64))).reshape(shape[1:])
    return np.transpose(index, [p - 1 for p in perm[1:]]).reshape(-1)


def order_preserving(shape, perm) -> bool:
    """True when `transpose(x, perm)` keeps the element order of `x` (only size-1 axes move),
    i.e. the transpose is a reshape."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def remaining_perm(perm, removed) -> tuple:
    """The perm of what is left after removing ONNX axes `removed` from both sides."""
    kept = [p for p in perm if p not in removed]
    order = sorted(kept)
    return tuple(order.index(p) for p in kept)


def inverse(perm) -> tuple:
    """The permutation that undoes `perm`."""
    return tuple(int(i) for i in np.argsort(perm))


@dataclass
class Value:
    """An ONNX activation as the TFLite graph holds it: tensor `name` in `layout`; `shape` is
    the ONNX shape (static)."""

    name: str
    layout: Layout
    shape: tuple
    dtype: str

    @property
    def dst_shape(self) -> tuple:
        if self.layout.flat is not None:
            return self.shape
        return tuple(self.shape[p] for p in self.layout.perm)


class Converter:
    """Builds the TFLite graph from the ONNX graph `src` (see the module docstring)."""

    def __init__(self, src: Graph, opset: int | None, input_layout: str = "nhwc"):
        self.src = src
        self.opset = opset or 13
        self.input_layout = input_layout
        self.dst = Graph(name=src.name or "main")
        self.values: dict = {}       # ONNX tensor name -> Value
        self.copied: dict = {}       # ONNX constant name -> TFLite tensor name
        self.relayouts: dict = {}    # (TFLite tensor, transpose of its data) -> TFLite tensor
        self.transposes: list = []   # names of the TRANSPOSE nodes inserted

    # -- names and tensors ----------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A tensor name used by neither graph."""
        name, i = base, 1
        while name in self.dst.tensors or name in self.src.tensors:
            name = f"{base}_{i}"
            i += 1
        return name

    def shape(self, name: str) -> tuple:
        """The static ONNX shape of `name`."""
        t = self.src.tensors[name]
        if not t.static_shape:
            raise Unmappable(f"{name!r} {list(t.shape) if t.shape else '(unknown rank)'}",
                             "dynamic shapes")
        return tuple(int(d) for d in t.shape)

    def constant(self, name: str | None) -> np.ndarray | None:
        return None if name is None else self.src.constant(name)

    def require_constant(self, node, index: int, what: str) -> np.ndarray:
        name = node.inputs[index] if index < len(node.inputs) else None
        data = self.constant(name)
        if data is None:
            raise Unmappable(f"{onnx_op(node)} {node.name!r} ({what} {name!r} is not a constant)",
                             "non-constant weights or parameters")
        return data

    def add_const(self, base: str, array: np.ndarray) -> str:
        """A new constant tensor holding `array` (never written to afterwards)."""
        return self.dst.add_constant(self.fresh(base), array)

    def int32_const(self, base: str, values) -> str:
        return self.add_const(base, np.asarray(list(values), dtype=np.int32))

    def copy_const(self, name: str) -> str:
        """The ONNX constant `name` itself, under its own name."""
        if name not in self.copied:
            t = self.src.tensors[name]
            self.copied[name] = self.dst.add_constant(name, t.data, t.dtype, share=True)
        return self.copied[name]

    def new_value(self, base: str, layout: Layout, shape: tuple, dtype: str) -> Value:
        """A fresh TFLite tensor for an intermediate of a rule."""
        v = Value(self.fresh(base), layout, tuple(shape), dtype)
        self.dst.add_tensor(Tensor(v.name, v.dst_shape, dtype))
        return v

    def define(self, onnx_name: str, layout: Layout, dtype: str | None = None) -> Value:
        """The TFLite tensor holding ONNX output `onnx_name` in `layout` (same name if free)."""
        t = self.src.tensors[onnx_name]
        shape = self.shape(onnx_name)
        name = onnx_name if onnx_name not in self.dst.tensors else self.fresh(onnx_name)
        v = Value(name, layout, shape, dtype or t.dtype)
        self.dst.add_tensor(Tensor(name, v.dst_shape, v.dtype))
        self.values[onnx_name] = v
        return v

    def alias(self, onnx_name: str, value: Value) -> None:
        """ONNX tensor `onnx_name` is `value` (Identity, Transpose absorbed into the layout)."""
        self.values[onnx_name] = value

    def value(self, name: str) -> Value:
        """The Value of an ONNX activation (a constant read as data is copied as is)."""
        if name in self.values:
            return self.values[name]
        data = self.constant(name)
        if data is None:
            raise Unmappable(f"{name!r} is read before it is produced")
        v = Value(self.copy_const(name), Layout(identity(data.ndim)), tuple(data.shape),
                  str(data.dtype))
        self.values[name] = v
        return v

    def emit(self, op: str, inputs: list, outputs: list, attrs: dict, name: str) -> Node:
        node = Node(op, list(inputs), list(outputs), dict(attrs), name)
        self.dst.nodes.append(node)
        return node

    # -- layout changes -------------------------------------------------------------------------
    def reshape(self, v: Value, layout: Layout, shape: tuple, base: str) -> Value:
        """RESHAPE of `v`'s TFLite data into a new value (ONNX `shape`, `layout`)."""
        out = self.new_value(base, layout, shape, v.dtype)
        dims = list(out.dst_shape)
        self.emit("Reshape", [v.name, self.int32_const(f"{out.name}_shape", dims)], [out.name],
                  {}, out.name)
        return out

    def relayout(self, v: Value, perm: tuple) -> Value:
        """`v` with TFLite data `transpose(onnx, perm)` (a TRANSPOSE or RESHAPE if needed)."""
        if v.layout.flat is not None:
            v = self._unflatten(v)
        perm = tuple(perm)
        if v.layout.perm == perm:
            return v
        rel = tuple(inverse(v.layout.perm)[p] for p in perm)  # TFLite data: transpose by rel
        key = (v.name, rel)
        if key not in self.relayouts:
            tag = {NHWC: "nhwc", identity(len(perm)): "nchw" if len(perm) == 4 else "onnx"}
            base = f"{v.name}_{tag.get(perm, 'perm')}"
            if order_preserving(v.dst_shape, rel):
                out = self.reshape(v, Layout(perm), v.shape, base)
            else:
                out = self.new_value(base, Layout(perm), v.shape, v.dtype)
                self.emit("Transpose", [v.name, self.int32_const(f"{out.name}_perm", rel)],
                          [out.name], {}, out.name)
                self.transposes.append(out.name)
            self.relayouts[key] = out.name
        return Value(self.relayouts[key], Layout(perm), v.shape, v.dtype)

    def _unflatten(self, v: Value) -> Value:
        """A flattened value back in ONNX column order (reshape, transpose, reshape)."""
        shape, perm = v.layout.flat
        spread = self.reshape(v, Layout(perm), shape, f"{v.name}_unflat")
        onnx = self.relayout(spread, identity(len(shape)))
        return self.reshape(onnx, Layout(identity(len(v.shape))), v.shape, f"{v.name}_onnx")

    def broadcast_operand(self, v: Value, perm: tuple) -> Value:
        """Operand `v` of an elementwise op whose output (rank len(perm)) is in `perm`, so that
        TFLite's right-aligned broadcasting pairs the same elements as ONNX's did."""
        rank, k = len(perm), len(perm) - len(v.shape)
        if k == 0:
            return self.relayout(v, perm)
        if perm[:k] == identity(k):
            return self.relayout(v, tuple(p - k for p in perm[k:]))
        v = self.relayout(v, identity(len(v.shape)))
        padded = self.reshape(v, Layout(identity(rank)), (1,) * k + v.shape, f"{v.name}_rank{rank}")
        return self.relayout(padded, perm)

    def permute_const(self, data: np.ndarray, layout: Layout, rank: int, strip: bool) -> np.ndarray:
        """A constant operand of an elementwise op whose output is in `layout` (rank `rank`):
        padded to the rank, transposed, and (`strip`) with leading size-1 axes dropped."""
        if layout.flat is not None:
            if data.ndim and data.shape[-1] != 1:
                data = data[..., columns(layout)]
            return data.reshape(1) if data.ndim == 0 else data
        data = data.reshape((1,) * (rank - data.ndim) + data.shape)
        data = np.transpose(data, layout.perm)
        while strip and data.ndim > 1 and data.shape[0] == 1:
            data = data[0]
        return data.reshape(1) if data.ndim == 0 else data  # scalars as [1], as TFLite writes

    def graph_output(self, onnx_name: str, perm: tuple) -> None:
        """Make ONNX graph output `onnx_name` a TFLite tensor of that name in `perm`."""
        final = self.relayout(self.value(onnx_name), perm)
        if final.name == onnx_name:
            self.dst.outputs.append(onnx_name)
            return
        if onnx_name in self.dst.tensors:  # the name holds the value in another layout
            self._rename(onnx_name, self.fresh(f"{onnx_name}_raw"))
        if final.name in self.dst.inputs or final.name in self.dst.outputs:
            dims = list(final.dst_shape)  # the tensor has a name already: copy it
            self.dst.add_tensor(Tensor(onnx_name, tuple(dims), final.dtype))
            self.emit("Reshape", [final.name, self.int32_const(f"{onnx_name}_shape", dims)],
                      [onnx_name], {}, onnx_name)
        else:
            self._rename(final.name, onnx_name)
        self.dst.outputs.append(onnx_name)

    def _rename(self, old: str, new: str) -> None:
        t = self.dst.tensors.pop(old)
        t.name = new
        self.dst.tensors[new] = t
        for node in self.dst.nodes:
            node.inputs = [new if i == old else i for i in node.inputs]
            node.outputs = [new if o == old else o for o in node.outputs]
        for node in self.dst.nodes:
            if node.name == old:
                node.name = new
        self.dst.inputs = [new if i == old else i for i in self.dst.inputs]
        self.dst.outputs = [new if i == old else i for i in self.dst.outputs]
        self.transposes = [new if i == old else i for i in self.transposes]
        for key, v in list(self.values.items()):
            if v.name == old:
                self.values[key] = Value(new, v.layout, v.shape, v.dtype)
        self.relayouts = {(new if k[0] == old else k[0], k[1]): (new if v == old else v)
                          for k, v in self.relayouts.items()}
