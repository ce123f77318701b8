"""Read an ONNX model (opsets 11 to 21) into the IR.

Initializers and Constant nodes become IR constants. Tensor shapes and dtypes come from the
graph's declarations and ONNX shape inference (run on a copy without the large weights, so it
costs little memory). Ops in the schema table get normalized attributes: spatial ops have
`auto_pad` resolved to explicit `pads`, default strides/dilations filled in and `layout` NCHW;
Softmax gets its opset's default axis. What onnxruntime rejects is refused naming the node:
two nodes with one name, a Conv group that does not fit its channels, a conv / pool window
larger than its padded input or an output of more than 2^31 elements. Other ops are opaque:
op_type, domain and raw attributes are kept and written back as they were. External data is
read only from files inside the model's own directory.

Large weights are not copied. `parse_onnx_lean` walks the protobuf wire format of the file's
bytes and parses a copy of the model without the `raw_data` payloads of large numeric
initializers (a few hundred KB for a 100 MB model); the constants become read-only numpy views
of the file's bytes. Anything unusual in the layout (the graph field twice, a group, a framing
the walker does not accept) falls back to the full parse, which also reports corrupt files.
"""

from __future__ import annotations

import copy
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from .. import schemas
from ..schemas.effects import ONNX_STANDARD_DOMAINS
from ..dtypes import ONNX_TO_IR
from ..errors import QConvertError
from ..ir import Graph, Model, Node, Tensor
from ..ir.graph import GraphError
from ..ir.tensor import RAW_DTYPES
from .onnx_wire import UnusualWire, strip_payloads
from ..padding import same_pads, valid_pads
from .pads_spelling import pads_to_rows

MIN_OPSET, MAX_OPSET = 11, 21
# (IR op, attribute) holding an ONNX TensorProto type code: the IR holds the dtype name instead
# (absent for the code 0, "unset"); the writer turns it back into the code.
DTYPE_ATTRIBUTES = (("Cast", "to"), ("Quantize", "output_dtype"))
SMALL_INITIALIZER = 4096  # bytes; larger ones are left out of the shape-inference copy
MAX_ELEMENTS = 2 ** 31  # a conv / pool output above this is a broken model (int32 indexing)



def _dim(d):
    """One declared dimension: its size, its symbolic name, or None. A size of -1 or 0 (what
    PaddlePaddle and some other exporters write for a dynamic axis, and onnxruntime accepts) is
    read as dynamic."""
    if d.HasField("dim_value"):
        return d.dim_value if d.dim_value > 0 else (d.dim_param or None)
    return d.dim_param if d.HasField("dim_param") else None


def _dynamic_dims(vi):
    """A copy of ValueInfo `vi` with its -1 / 0 dimensions unknown (for shape inference)."""
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if tt is None or not tt.HasField("shape") or all(
            not d.HasField("dim_value") or d.dim_value > 0 for d in tt.shape.dim):
        return vi
    vi = copy.deepcopy(vi)
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value <= 0:
            d.ClearField("dim_value")
    return vi


@dataclass
class ParsedOnnx:
    """A parsed model whose large initializer payloads stay in the file's bytes.

    `payloads` maps the index of an initializer in `proto.graph.initializer` to the
    `(offset, length)` of its `raw_data` inside `buffer`; those initializers have no `raw_data`
    in `proto`. Empty when the model was parsed in full.
    """

    proto: onnx.ModelProto
    buffer: bytes = b""
    payloads: dict = field(default_factory=dict)


def parse_onnx(data: bytes) -> onnx.ModelProto:
    """Parse protobuf bytes; raise QConvertError unless they hold an ONNX model with a graph."""
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:
        raise QConvertError(f"not a valid ONNX model ({type(exc).__name__})") from exc
    if proto.ir_version <= 0 or not proto.HasField("graph") or not proto.graph.output:
        raise QConvertError("not an ONNX model (no IR version or no graph with outputs)")
    return proto


def parse_onnx_lean(data) -> ParsedOnnx:
    """Parse `data` like `parse_onnx`, leaving large numeric `raw_data` payloads in `data`.

    `data`: bytes, whose result holds them (the constants read from it are views of it, not
    copies), or a read-only `mmap.mmap` of the file (`model_io.load_model`), from which each
    constant is copied into an array of its own as it is read, the file's pages dropped behind
    it: the weights are then in memory once, and the file never is.
    """
    if not isinstance(data, mmap.mmap):
        data = bytes(data)  # immutable: the numpy views must never see it change
    try:
        lean, payloads = strip_payloads(data, SMALL_INITIALIZER)
    except UnusualWire:
        lean, payloads = None, {}
    if not payloads:
        return ParsedOnnx(parse_onnx(data if isinstance(data, bytes) else data[:]))
    return ParsedOnnx(parse_onnx(lean), data, payloads)


def _payload_array(buffer, dtype, count: int, offset: int, out=None) -> np.ndarray:
    """`count` values of `dtype` at `offset` of `buffer`: a read-only view of bytes (possibly
    unaligned), or, from a mapped file, a copy of its own (into `out` when given, a flat
    array) with the file's pages released from this process (they stay in the page cache)."""
    if not isinstance(buffer, mmap.mmap):
        return np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    source = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    if out is None:
        data = source.copy()
    else:
        np.copyto(out, source)
        data = out
    del source
    start = offset - offset % mmap.PAGESIZE
    end = offset + data.nbytes
    try:
        buffer.madvise(mmap.MADV_DONTNEED, start, end - start)
    except (AttributeError, OSError, ValueError):  # no madvise here: the pages just stay
        pass
    return data


def copy_deferred(deferred: list, infinite: set | None = None) -> None:
    """Copy each deferred initializer (name, its array, the mapped file, offset) out of the
    file (`_payload_array`) into its array, the constants shared among the CPUs (the copies
    and the page faults of the fresh arrays are most of reading a large model), then check
    each is finite, in file order, and make it read-only."""
    import threading

    items = iter(range(len(deferred)))  # next() on a range iterator is atomic under the GIL
    finite = [True] * len(deferred)
    failed: list = []

    def run():
        try:
            for k in items:
                _, data, buffer, offset = deferred[k]
                _payload_array(buffer, data.dtype, data.size, offset, out=data.reshape(-1))
                finite[k] = data.dtype.kind != "f" or _all_finite(data)
        except Exception as exc:  # noqa: BLE001  (raised again below, in this thread)
            failed.append(exc)

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    helpers = [threading.Thread(target=run) for _ in range(min(cpus, len(deferred)) - 1)]
    for h in helpers:
        h.start()
    run()
    for h in helpers:
        h.join()
    if failed:
        raise failed[0]
    for (name, data, _, _), ok in zip(deferred, finite):
        if not ok and infinite is not None and _infinite_scalar(data):
            infinite.add(name)  # a Clip bound, perhaps (`_drop_infinite_clip_bounds`)
        elif not ok:
            raise QConvertError(f"constant {name!r} contains NaN or infinity")
        data.flags.writeable = False


def read_onnx(data: bytes, path: str | Path) -> Model:
    """Parse ONNX bytes (read from `path`, which locates external data) into a Model."""
    return read_onnx_parsed(parse_onnx_lean(data), path)


def read_onnx_proto(proto: onnx.ModelProto, path: str | Path) -> Model:
    """Build a Model from a parsed ModelProto (`path` locates external data)."""
    return read_onnx_parsed(ParsedOnnx(proto), path)


def read_onnx_parsed(parsed: ParsedOnnx, path: str | Path) -> Model:
    """Build a Model from `parse_onnx_lean`'s result (`path` locates external data)."""
    try:
        return _Reader(parsed.proto, Path(path), parsed.buffer, parsed.payloads).read()
    except QConvertError:
        raise
    except GraphError as exc:  # a well-formed file whose graph breaks an invariant
        raise QConvertError(f"invalid model graph: {exc}") from exc
    except Exception as exc:
        raise QConvertError(f"corrupt ONNX model ({type(exc).__name__}: {exc})") from exc


class _Reader:
    def __init__(self, proto: onnx.ModelProto, path: Path, buffer: bytes = b"",
                 payloads: dict | None = None):
        self.proto = proto
        self.path = path
        self.buffer = buffer
        self.payloads = payloads or {}
        self._types: dict = {}
        self.external_files: set = set()
        self.deferred: list | None = None  # initializers still to copy out of the mapped file
        self.infinite: set = set()  # scalar constants of +-inf: Clip bounds only
        self.opset = None
        for imp in proto.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = imp.version
        if self.opset is None:
            raise QConvertError("ONNX model imports no default-domain opset")
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise QConvertError(f"ONNX opset {self.opset} is not supported "
                                f"(opsets {MIN_OPSET} to {MAX_OPSET})")

    def read(self) -> Model:
        p, g = self.proto, self.proto.graph
        if g.sparse_initializer:
            raise QConvertError("sparse initializers are not supported")
        graph = Graph(name=g.name)
        init_names = {t.name for t in g.initializer}
        types = self.inferred_types()
        self.deferred = []
        for i, t in enumerate(g.initializer):
            payload = self.payloads.get(i)
            if payload is not None:
                payload = (self.buffer, *payload)
            graph.add_tensor(self.constant(t.name, t, payload))
        copy_deferred(self.deferred, self.infinite)
        self.deferred = None
        initializer_inputs = []
        for vi in g.input:
            if vi.name in init_names:
                initializer_inputs.append(vi.name)
                continue
            graph.add_tensor(self.tensor(vi.name, types))
            graph.inputs.append(vi.name)
        declared = {vi.name for vi in g.value_info}
        node_names = set()
        for i, n in enumerate(g.node):
            if n.name:  # onnxruntime refuses a graph where two nodes share a name
                if n.name in node_names:
                    raise QConvertError(f"two nodes are named {n.name!r} (node names must be "
                                        "unique)")
                node_names.add(n.name)
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
                graph.add_tensor(self.constant(n.output[0], _constant_value(n)))
                continue
            for out in n.output:
                if out and out not in graph.tensors:
                    t = self.tensor(out, types)
                    if out in declared:
                        t.extra["declared"] = True
                    graph.add_tensor(t)
            graph.nodes.append(self.node(n, i, graph))
        graph.outputs = [vi.name for vi in g.output]
        for name in graph.outputs:
            if name not in graph.tensors:
                raise QConvertError(f"graph output {name!r} is produced by no node")
        _drop_infinite_clip_bounds(graph, self.infinite, initializer_inputs)
        pads_to_rows(graph, initializer_inputs)  # Pad's pads as rows [k, 2] (the IR spelling)
        meta = {
            "ir_version": p.ir_version,
            "opset_import": [(imp.domain, imp.version) for imp in p.opset_import],
            "opset": self.opset,
            "producer_name": p.producer_name, "producer_version": p.producer_version,
            "domain": p.domain, "model_version": p.model_version, "doc_string": p.doc_string,
            "metadata_props": [(m.key, m.value) for m in p.metadata_props],
            "functions": [f.SerializeToString() for f in p.functions],
            "graph_doc_string": g.doc_string,
            "initializer_inputs": initializer_inputs,
        }
        model = Model("onnx", [graph], meta)
        model.meta["external_files"] = sorted(self.external_files)
        _check_text(model)
        return model

    # -- shapes and types -------------------------------------------------------------------
    def inferred_types(self) -> dict:
        """name -> TypeProto from declarations plus shape inference on a weight-free copy."""
        g = self.proto.graph
        light = onnx.ModelProto()
        light.ir_version = self.proto.ir_version
        light.opset_import.extend(self.proto.opset_import)
        light.functions.extend(self.proto.functions)
        lg = light.graph
        lg.node.extend(g.node)
        lg.input.extend(_dynamic_dims(vi) for vi in g.input)
        lg.output.extend(_dynamic_dims(vi) for vi in g.output)
        lg.value_info.extend(_dynamic_dims(vi) for vi in g.value_info)
        input_names = {vi.name for vi in g.input}
        for i, t in enumerate(g.initializer):
            if (i not in self.payloads and t.data_location != TensorProto.EXTERNAL
                    and t.ByteSize() <= SMALL_INITIALIZER):
                lg.initializer.append(t)
            elif t.name not in input_names:
                lg.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        try:
            inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False).graph
        except Exception:
            inferred = lg
        types = {}
        for vi in list(inferred.value_info) + list(inferred.input) + list(inferred.output):
            if vi.type.HasField("tensor_type"):
                types.setdefault(vi.name, vi.type)
        return types

    def tensor(self, name: str, types: dict) -> Tensor:
        ttype = types.get(name)
        if ttype is None:
            return Tensor(name, None, "float32", extra={"dtype_unknown": True})
        key = ttype.SerializeToString(deterministic=True)
        found = self._types.get(key)  # tensors of one type are many: decode each type once
        if found is None:
            found = self._types[key] = self._decode_type(name, ttype)
        if found[0] is None:
            return Tensor(name, None, "float32", extra={"dtype_unknown": True})
        return Tensor(name, found[1], found[0], extra={})

    @staticmethod
    def _decode_type(name: str, ttype) -> tuple:
        """(IR dtype or None when unknown, shape) of a TypeProto."""
        if not ttype.tensor_type.elem_type:
            return None, None
        tt = ttype.tensor_type
        dtype = ONNX_TO_IR.get(tt.elem_type)
        if dtype is None:
            raise QConvertError(f"tensor {name!r} has unsupported ONNX type {tt.elem_type}")
        shape = None
        if tt.HasField("shape"):
            shape = tuple(_dim(d) for d in tt.shape.dim)
        return dtype, shape

    def constant(self, name: str, t: TensorProto, payload: tuple | None = None) -> Tensor:
        """IR constant of TensorProto `t`; `payload` is `(buffer, offset, length)` of its raw
        data when that was left out of `t` (see `parse_onnx_lean`)."""
        dtype = ONNX_TO_IR.get(t.data_type)
        if dtype is None:
            raise QConvertError(f"constant {name!r} has unsupported ONNX type {t.data_type}")
        if t.data_location == TensorProto.EXTERNAL:
            raw = self.read_external(t)
            if dtype in RAW_DTYPES or not raw:
                t = _with_raw_data(t, raw)
            else:
                payload = (raw, 0, len(raw))
        shape = tuple(int(d) for d in t.dims)
        if dtype in RAW_DTYPES:
            kept = TensorProto()
            kept.CopyFrom(t)
            kept.name = name
            raw = np.frombuffer(t.raw_data, np.uint8) if t.raw_data else np.zeros(0, np.uint8)
            return Tensor(name, shape, dtype, raw, extra={"onnx_tensor": kept})
        if payload is None and t.raw_data:
            raw = t.raw_data
            payload = (raw, 0, len(raw))
        if payload is not None:
            buffer, offset, length = payload
            count = int(np.prod(shape, dtype=np.int64))
            if length != count * np.dtype(dtype).itemsize:
                raise QConvertError(f"constant {name!r} holds {length} bytes for shape "
                                    f"{list(shape)} of {dtype}")
            if isinstance(buffer, mmap.mmap) and self.deferred is not None:
                # copied with the others once every constant is read (`copy_deferred`)
                data = np.empty(shape, dtype)
                self.deferred.append((name, data, buffer, offset))
                return Tensor(name, shape, dtype, data)
            data = _payload_array(buffer, dtype, count, offset).reshape(shape)
        else:
            data = numpy_helper.to_array(t)
        if data.dtype != np.dtype(dtype):
            data = data.astype(dtype)
        if data.shape != shape:
            raise QConvertError(f"constant {name!r} holds {data.size} values for shape {list(shape)}")
        if data.dtype.kind == "f" and not _all_finite(data):
            if not _infinite_scalar(data):
                raise QConvertError(f"constant {name!r} contains NaN or infinity")
            self.infinite.add(name)  # a Clip bound, perhaps (`_drop_infinite_clip_bounds`)
        data.flags.writeable = False
        return Tensor(name, shape, dtype, data)

    def read_external(self, t: TensorProto) -> bytes:
        """The external data of `t`, refusing files outside the model's folder."""
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        base = self.path.resolve().parent
        target = (base / location).resolve()
        if not location or os.path.isabs(location) or base not in target.parents:
            raise QConvertError(f"external data {location!r} of {t.name!r} lies outside the "
                                "model's directory; refusing to read it")
        if not target.is_file():
            raise QConvertError(f"external data file {location!r} of {t.name!r} is missing")
        offset = int(info.get("offset", 0))
        self.external_files.add(str(target))
        with open(target, "rb") as f:
            f.seek(offset)
            return f.read(int(info["length"])) if "length" in info else f.read()

    # -- nodes ------------------------------------------------------------------------------
    def node(self, n, index: int, graph: Graph) -> Node:
        inputs = [name or None for name in n.input]
        outputs = [name or None for name in n.output]
        for name in inputs:
            if name is not None and name not in graph.tensors:
                # outer-scope or forward references make the model invalid for us
                raise QConvertError(f"node {n.name or n.op_type!r} reads {name!r}, "
                                    "which is not defined before it")
        name = n.name or f"{n.op_type}_{index}"
        origin = {"name": n.name, "doc_string": n.doc_string}
        schema = schemas.by_onnx_op(n.op_type, n.domain)
        if schema is None:
            origin.update(opaque_origin(n))
            return Node(n.op_type, inputs, outputs, {}, name, True, origin)
        spec = schema.onnx
        attrs, extra, present = {}, [], []
        for a in n.attribute:
            if a.name in spec.attrs:
                attrs[a.name] = _attr_value(a)
                present.append(a.name)
            else:
                extra.append(a.SerializeToString())
        for key, default in spec.attrs.items():
            if key not in attrs and default is not None:
                attrs[key] = default
        origin.update(domain=n.domain, present=present, extra_attributes=extra)
        for slot in spec.attr_inputs:  # the IR spelling: a constant input (see schemas.ops)
            if attrs.get(slot) is not None:
                inputs = attribute_input(graph, schema, name, slot, attrs.pop(slot), inputs)
        for op, key in DTYPE_ATTRIBUTES:  # the IR holds dtype names, not TensorProto codes
            if schema.name == op and key in attrs:
                code = attrs.pop(key)
                if code:
                    if code not in ONNX_TO_IR:
                        raise QConvertError(f"{n.op_type} {name!r}: unsupported ONNX type {code} "
                                            f"({key})")
                    attrs[key] = ONNX_TO_IR[code]
        if schema.name == "Shape":  # ONNX's Shape is int64 (TFLite's says so in out_type)
            attrs["out_type"] = "int64"
        if schema.name == "Softmax":  # the IR spells the opset's meaning, not the opset
            if attrs.get("axis") is None:
                attrs["axis"] = 1 if self.opset < 13 else -1
            if self.opset < 13:
                attrs["coerce_2d"] = 1
        if spec.spatial:
            _normalize_spatial(n.op_type, attrs, inputs, graph)
            _check_spatial(name, attrs)
            _check_window_geometry(n.op_type, name, attrs, inputs, graph)
        return Node(schema.name, inputs, outputs, attrs, name, False, origin)


def attribute_input(graph: Graph, schema, node_name: str, slot: str, value, inputs: list,
                    dtype=np.int64) -> list:
    """`inputs` with input `slot` of `schema` holding a new constant of `value`: the IR
    spelling of a parameter the format wrote as an attribute or option. The constant is
    marked `from_attribute`, so that a writer spelling it as an attribute again never writes
    it as a tensor, and inspect does not count it as a weight."""
    index = schema.slot_index(slot)
    inputs = list(inputs) + [None] * (index + 1 - len(inputs))
    if inputs[index] is not None:
        raise QConvertError(f"{schema.name} {node_name!r} has {slot!r} both as an input and as "
                            "an attribute")
    data = np.asarray(value, dtype).reshape(-1)
    data.flags.writeable = False
    name = graph.fresh_name(f"{node_name}@{slot}")
    graph.add_tensor(Tensor(name, data.shape, str(data.dtype), data,
                            extra={"from_attribute": True}))
    inputs[index] = name
    return inputs


def opaque_origin(n: onnx.NodeProto) -> dict:
    """What an opaque node keeps of NodeProto `n`: its domain and raw attributes (written back
    as they were), and two facts about its subgraph bodies (If / Loop / Scan), found here once so
    that no pass parses protobuf: `body_reads`, the outer-scope tensors the bodies read without
    listing them as inputs (sorted), and `body_pure`, False when a body holds a custom-domain op
    (which may have side effects; see `qconvert.schemas.effects`)."""
    reads: set = set()
    pure = True
    stack = [g for a in n.attribute for g in _bodies(a)]
    while stack:  # no recursion: bodies may nest deeply
        g = stack.pop()
        for inner in g.node:
            reads.update(i for i in inner.input if i)
            if inner.domain not in ONNX_STANDARD_DOMAINS:
                pure = False
            for a in inner.attribute:
                stack.extend(_bodies(a))
    return {"domain": n.domain, "attributes": [a.SerializeToString() for a in n.attribute],
            "body_reads": tuple(sorted(reads)), "body_pure": pure}


def _bodies(a: AttributeProto) -> list:
    """The subgraphs an attribute holds."""
    if a.type == AttributeProto.GRAPH:
        return [a.g]
    if a.type == AttributeProto.GRAPHS:
        return list(a.graphs)
    return []


def _with_raw_data(t: TensorProto, raw: bytes) -> TensorProto:
    """Copy of `t` holding `raw` as its raw data instead of a reference to external data."""
    loaded = TensorProto()
    loaded.CopyFrom(t)
    del loaded.external_data[:]
    loaded.data_location = TensorProto.DEFAULT
    loaded.raw_data = raw
    return loaded


def _infinite_scalar(data: np.ndarray) -> bool:
    """One value, +inf or -inf (what torch.clamp(min=...) exports as Clip's other bound)."""
    return data.size == 1 and bool(np.isinf(data).all())


def _drop_infinite_clip_bounds(graph: Graph, infinite: set, initializer_inputs: list) -> None:
    """A Clip's min of -inf or max of +inf bounds nothing: the input becomes absent (ONNX Clip's
    optional bounds). Any other reader of an infinite constant is refused, as a weight with NaN
    or infinity is; infinite constants no node reads any more are dropped."""
    if not infinite:
        return
    for node in graph.nodes:
        if node.op != "Clip" or node.opaque:
            continue
        inputs = list(node.inputs)
        for slot, sign in ((1, -1), (2, 1)):
            name = inputs[slot] if slot < len(inputs) else None
            if name in infinite and float(graph.tensors[name].data.reshape(-1)[0]) * sign > 0:
                inputs[slot] = None
        while len(inputs) > 1 and inputs[-1] is None:
            inputs.pop()
        node.inputs = inputs
    read = {i for n in graph.nodes for i in n.present_inputs()}
    for name in sorted(infinite):
        if name in read or name in graph.outputs:
            raise QConvertError(f"constant {name!r} contains NaN or infinity")
        del graph.tensors[name]
        if name in initializer_inputs:
            initializer_inputs.remove(name)


def _all_finite(data: np.ndarray) -> bool:
    """No NaN or infinity in `data`. A finite sum proves it in one pass without a temporary
    array; a non-finite sum (a NaN, an infinity, or an overflow) is settled element-wise."""
    with np.errstate(all="ignore"):
        if np.isfinite(data.sum()):
            return True
    return bool(np.isfinite(data).all())


def _check_text(model: Model) -> None:
    """Protobuf hands back invalid UTF-8 in string fields as bytes; refuse such a model."""
    g = model.graph
    texts = [g.name, *g.tensors, *g.inputs, *g.outputs]
    for n in g.nodes:
        texts += [n.op, n.name, n.origin.get("name", ""), n.origin.get("domain", ""),
                  n.origin.get("doc_string", ""), *[i for i in n.inputs + n.outputs if i]]
    meta = model.meta
    texts += [meta[k] for k in ("producer_name", "producer_version", "domain", "doc_string",
                                "graph_doc_string")]
    texts += [d for d, _ in meta["opset_import"]]
    texts += [t for kv in meta["metadata_props"] for t in kv]
    if not all(isinstance(t, str) for t in texts):
        raise QConvertError("corrupt ONNX model: a name or text field is not valid UTF-8")


def _attr_value(a: AttributeProto):
    value = helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [v.decode("utf-8") if isinstance(v, bytes) else v for v in value]
    return value


def _constant_value(n) -> TensorProto:
    """The TensorProto a Constant node produces, whatever attribute form it uses."""
    a = n.attribute[0] if len(n.attribute) == 1 else None
    if a is None:
        raise QConvertError(f"Constant node {n.name!r} needs exactly one attribute")
    if a.name == "value":
        return a.t
    if a.name == "sparse_value":
        raise QConvertError(f"Constant node {n.name!r} is sparse; not supported")
    value = helper.get_attribute_value(a)
    arrays = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
              "value_ints": np.int64}
    if a.name not in arrays:
        raise QConvertError(f"Constant node {n.name!r} has unsupported attribute {a.name!r}")
    return numpy_helper.from_array(np.array(value, dtype=arrays[a.name]))


def _check_spatial(name: str, attrs: dict) -> None:
    """Spatial attributes must agree with the kernel rank and be in range."""
    kernel = attrs.get("kernel_shape")
    if kernel is None:
        return
    rank = len(kernel)
    expect = {"kernel_shape": (rank, 1), "strides": (rank, 1), "dilations": (rank, 1),
              "pads": (2 * rank, 0)}
    for key, (length, low) in expect.items():
        value = attrs.get(key)
        if value is not None and (len(value) != length or any(int(v) < low for v in value)):
            raise QConvertError(f"node {name!r}: {key} {list(value)} is invalid for a "
                                f"{rank}-D kernel")
    if rank == 0:
        raise QConvertError(f"node {name!r}: empty kernel_shape")


def _static_dims(shape) -> list | None:
    """The dims of `shape` as positive ints, None where any is unknown (or a 0 read as dynamic)."""
    if shape is None or not all(isinstance(d, (int, np.integer)) and d > 0 for d in shape):
        return None
    return [int(d) for d in shape]


def _check_window_geometry(op_type: str, name: str, attrs: dict, inputs: list,
                           graph: Graph) -> None:
    """Refuse a Conv / MaxPool / AveragePool that onnxruntime rejects: a group that does not
    divide the channels or a weight shape that disagrees with it, a kernel (dilated) larger
    than the padded input, or an output of more than `MAX_ELEMENTS` elements."""
    if op_type not in ("Conv", "MaxPool", "AveragePool") or attrs.get("kernel_shape") is None:
        return
    kernel = attrs["kernel_shape"]
    rank = len(kernel)
    x = graph.tensors[inputs[0]].shape
    cin = x[1] if x is not None and len(x) > 1 and isinstance(x[1], (int, np.integer)) \
        and x[1] > 0 else None
    channels = cin
    if op_type == "Conv" and len(inputs) > 1 and inputs[1] in graph.tensors:
        w = _static_dims(graph.tensors[inputs[1]].shape)
        group = int(attrs.get("group", 1) or 1)
        if w is not None:
            if len(w) != rank + 2 or list(w[2:]) != list(kernel):
                raise QConvertError(f"node {name!r}: weights {w} disagree with kernel_shape "
                                    f"{list(kernel)}")
            if group < 1 or w[0] % group or (cin is not None and cin != w[1] * group):
                raise QConvertError(f"node {name!r}: group {group} does not fit weights {w} "
                                    f"and {cin if cin is not None else '?'} input channels "
                                    "(input channels must be weight channels x group, output "
                                    "channels a multiple of group)")
            channels = w[0]
    if x is None or len(x) != rank + 2 or attrs.get("auto_pad", "NOTSET") != "NOTSET":
        return
    spatial = _static_dims(x[2:])
    if spatial is None:
        return
    strides = [int(v) for v in attrs.get("strides") or [1] * rank]
    dilations = [int(v) for v in attrs.get("dilations") or [1] * rank]
    pads = [int(v) for v in attrs.get("pads") or [0] * (2 * rank)]
    out = []
    for i in range(rank):
        span = (kernel[i] - 1) * dilations[i] + 1
        padded = spatial[i] + pads[i] + pads[rank + i]
        if span > padded:
            raise QConvertError(f"node {name!r}: kernel {list(kernel)} with dilations "
                                f"{dilations} spans more than the padded input "
                                f"{spatial} + pads {pads}")
        out.append((padded - span) // strides[i] + 1)
    batch = x[0] if isinstance(x[0], (int, np.integer)) and x[0] > 0 else 1
    if batch * (channels or 1) * int(np.prod(out, dtype=object)) > MAX_ELEMENTS:
        raise QConvertError(f"node {name!r}: output spatial size {out} (pads {pads}, "
                            f"dilations {dilations}) is implausibly large")


def _normalize_spatial(op_type: str, attrs: dict, inputs: list, graph: Graph) -> None:
    """Explicit strides, dilations and pads for Conv / ConvTranspose / pools (layout NCHW)."""
    attrs["layout"] = "NCHW"
    x = graph.tensors[inputs[0]]
    kernel = attrs.get("kernel_shape")
    if kernel is None and len(inputs) > 1 and inputs[1] in graph.tensors:
        w = graph.tensors[inputs[1]]
        if w.shape is not None and len(w.shape) > 2:
            kernel = list(w.shape[2:])
    if kernel is None:
        return  # cannot normalize (weights of unknown shape); attributes stay as they were
    attrs["kernel_shape"] = kernel = [int(k) for k in kernel]
    rank = len(kernel)
    attrs.setdefault("strides", [1] * rank)
    if op_type != "AveragePool" or "dilations" in attrs:
        attrs.setdefault("dilations", [1] * rank)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        attrs.setdefault("pads", valid_pads(rank))
    elif auto_pad == "VALID":
        attrs["pads"] = valid_pads(rank)
        attrs["auto_pad"] = "NOTSET"
    elif op_type != "ConvTranspose" and x.shape is not None and all(
            isinstance(d, int) for d in x.shape[2:]):
        attrs["pads"] = same_pads(x.shape[2:], kernel, attrs["strides"],
                                  attrs.get("dilations", [1] * rank),
                                  lower=auto_pad == "SAME_LOWER")
        attrs["auto_pad"] = "NOTSET"
