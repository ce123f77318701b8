"""Read an ONNX model (opsets 11 to 21) into the IR.

Initializers and Constant nodes become IR constants. Tensor shapes and dtypes come from the
graph's declarations and ONNX shape inference (run on a copy without the large weights, so it
costs little memory). Ops in the schema table get normalized attributes: spatial ops have
`auto_pad` resolved to explicit `pads`, default strides/dilations filled in and `layout` NCHW;
Softmax gets its opset's default axis. Other ops are opaque: op_type, domain and raw attributes
are kept and written back as they were. External data is read only from files inside the
model's own directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from . import schemas
from .dtypes import ONNX_TO_IR
from .errors import QConvertError
from .ir import Graph, Model, Node, Tensor
from .ir.tensor import RAW_DTYPES
from .padding import same_pads, valid_pads

MIN_OPSET, MAX_OPSET = 11, 21
SMALL_INITIALIZER = 4096  # bytes; larger ones are left out of the shape-inference copy


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


def read_onnx(data: bytes, path: str | Path) -> Model:
    """Parse ONNX bytes (read from `path`, which locates external data) into a Model."""
    return read_onnx_proto(parse_onnx(data), path)


def read_onnx_proto(proto: onnx.ModelProto, path: str | Path) -> Model:
    """Build a Model from a parsed ModelProto (`path` locates external data)."""
    try:
        return _Reader(proto, Path(path)).read()
    except QConvertError:
        raise
    except Exception as exc:
        raise QConvertError(f"corrupt ONNX model ({type(exc).__name__}: {exc})") from exc


class _Reader:
    def __init__(self, proto: onnx.ModelProto, path: Path):
        self.proto = proto
        self.path = path
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
        for t in g.initializer:
            graph.add_tensor(self.constant(t.name, t))
        initializer_inputs = []
        for vi in g.input:
            if vi.name in init_names:
                initializer_inputs.append(vi.name)
                continue
            graph.add_tensor(self.tensor(vi.name, types))
            graph.inputs.append(vi.name)
        declared = {vi.name for vi in g.value_info}
        for i, n in enumerate(g.node):
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
        lg.input.extend(vi for vi in g.input)
        lg.output.extend(g.output)
        lg.value_info.extend(g.value_info)
        input_names = {vi.name for vi in g.input}
        for t in g.initializer:
            if t.data_location != TensorProto.EXTERNAL and t.ByteSize() <= SMALL_INITIALIZER:
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
        extra = {}
        if ttype is None or not ttype.tensor_type.elem_type:
            return Tensor(name, None, "float32", extra={"dtype_unknown": True})
        tt = ttype.tensor_type
        dtype = ONNX_TO_IR.get(tt.elem_type)
        if dtype is None:
            raise QConvertError(f"tensor {name!r} has unsupported ONNX type {tt.elem_type}")
        shape = None
        if tt.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value")
                          else (d.dim_param if d.HasField("dim_param") else None)
                          for d in tt.shape.dim)
        return Tensor(name, shape, dtype, extra=extra)

    def constant(self, name: str, t: TensorProto) -> Tensor:
        dtype = ONNX_TO_IR.get(t.data_type)
        if dtype is None:
            raise QConvertError(f"constant {name!r} has unsupported ONNX type {t.data_type}")
        if t.data_location == TensorProto.EXTERNAL:
            t = self.load_external(t)
        shape = tuple(int(d) for d in t.dims)
        if dtype in RAW_DTYPES:
            kept = TensorProto()
            kept.CopyFrom(t)
            kept.name = name
            raw = np.frombuffer(t.raw_data, np.uint8) if t.raw_data else np.zeros(0, np.uint8)
            return Tensor(name, shape, dtype, raw, extra={"onnx_tensor": kept})
        if t.raw_data:
            raw = t.raw_data
            count = int(np.prod(shape, dtype=np.int64))
            if len(raw) != count * np.dtype(dtype).itemsize:
                raise QConvertError(f"constant {name!r} holds {len(raw)} bytes for shape "
                                    f"{list(shape)} of {dtype}")
            data = np.frombuffer(raw, dtype=dtype).reshape(shape)
        else:
            data = numpy_helper.to_array(t)
        if data.dtype != np.dtype(dtype):
            data = data.astype(dtype)
        if data.shape != shape:
            raise QConvertError(f"constant {name!r} holds {data.size} values for shape {list(shape)}")
        if data.dtype.kind == "f" and not np.isfinite(data).all():
            raise QConvertError(f"constant {name!r} contains NaN or infinity")
        data.flags.writeable = False
        return Tensor(name, shape, dtype, data)

    def load_external(self, t: TensorProto) -> TensorProto:
        """Copy of `t` with its external data read in, refusing files outside the model's folder."""
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
        with open(target, "rb") as f:
            f.seek(offset)
            raw = f.read(int(info["length"])) if "length" in info else f.read()
        loaded = TensorProto()
        loaded.CopyFrom(t)
        del loaded.external_data[:]
        loaded.data_location = TensorProto.DEFAULT
        loaded.raw_data = raw
        return loaded

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
            origin.update(domain=n.domain, attributes=[a.SerializeToString() for a in n.attribute])
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
        if schema.name == "Softmax" and attrs.get("axis") is None:
            attrs["axis"] = 1 if self.opset < 13 else -1
        if spec.spatial:
            _normalize_spatial(n.op_type, attrs, inputs, graph)
            _check_spatial(name, attrs)
        return Node(schema.name, inputs, outputs, attrs, name, False, origin)


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
