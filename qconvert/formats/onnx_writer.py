"""Serialize the IR to an ONNX ModelProto.

The inverse of `onnx_reader`: constants become initializers, known ops are written from their
IR attributes (an attribute is written when the source had it or it differs from the schema's
default, so no attribute appears that the model's opset lacks), opaque ops get back their
op_type, domain and raw attributes. Model-level fields (IR version, opsets, producer, metadata,
functions) are kept. Serialization is deterministic.

Inputs the IR spells as constants where the model's opset wants an attribute (Transpose `perm`,
Squeeze `axes` before opset 13...: `OnnxSpec.attr_inputs`) are written as that attribute, and
a constant read only that way is not written as an initializer.

Node names are unique (`node_names`: the source's names kept, names passes made up given a
suffix where they meet another), so onnxruntime and the tools keyed by node name accept the file.

`write_onnx` never copies a weight into a protobuf message: it serializes the model without its
initializers, then splices each initializer in as a small encoded header followed by the
constant's own buffer, in the field order protobuf uses, so the bytes are exactly those of
`to_proto(model).SerializeToString(deterministic=True)` while the weights are copied only once,
into the returned bytes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from .. import schemas
from ..dtypes import IR_TO_ONNX
from ..errors import QConvertError
from ..ir import Model, Tensor
from .onnx_reader import DTYPE_ATTRIBUTES
from .node_names import written_node_names
from .onnx_wire import (GRAPH_INITIALIZER, MODEL_GRAPH, TENSOR_RAW_DATA, encode_varint,
                        field_key, wire_fields)
from .pads_spelling import check_written_pads, flat_pads, pads_constants, spelling_nodes

MAX_PROTO_BYTES = 2**31 - 2**24
_NEUTRAL = {"strides": 1, "dilations": 1, "pads": 0}


def to_proto(model: Model) -> onnx.ModelProto:
    """Build the ModelProto of `model` (one graph; layout must be NCHW).

    Built in place (no helper.make_graph copies), so a 100 MB model is not copied twice.
    """
    proto = _skeleton(model)
    for t in _constants(model):
        _fill_initializer(proto.graph.initializer.add(), t)
    return proto


def write_onnx(model: Model) -> bytes:
    """Return the serialized ONNX bytes of `model` (raises QConvertError over 2 GB)."""
    weights = sum(t.data.nbytes for t in model.graph.tensors.values() if t.data is not None)
    if weights > MAX_PROTO_BYTES:
        raise QConvertError("model over 2 GB: ONNX external-data output is not supported yet")
    return b"".join(serialized_chunks(model))


def serialized_chunks(model: Model) -> list:
    """The serialized model as a list of bytes-like chunks (weights are the constants' own
    buffers, not copies); joined, they equal `to_proto(model).SerializeToString(deterministic=True)`.
    """
    proto = _skeleton(model)
    inits = []
    for t in _constants(model):
        inits += _initializer_chunks(t)
    graph_head, graph_tail = _split(proto.graph.SerializeToString(deterministic=True),
                                    GRAPH_INITIALIZER)
    proto.ClearField("graph")
    model_head, model_tail = _split(proto.SerializeToString(deterministic=True), MODEL_GRAPH)
    graph_size = len(graph_head) + sum(_nbytes(c) for c in inits) + len(graph_tail)
    return [model_head, field_key(MODEL_GRAPH), encode_varint(graph_size), graph_head, *inits,
            graph_tail, model_tail]


def _skeleton(model: Model) -> onnx.ModelProto:
    """The ModelProto of `model` without initializers."""
    if len(model.graphs) != 1:
        raise QConvertError("an ONNX model has one graph; this model has several subgraphs")
    g, meta = model.graph, model.meta
    proto = onnx.ModelProto()
    proto.ir_version = meta.get("ir_version", 8)
    for domain, version in meta.get("opset_import", [("", 13)]):
        proto.opset_import.add(domain=domain, version=version)
    for field in ("producer_name", "producer_version", "domain", "doc_string"):
        if meta.get(field):
            setattr(proto, field, meta[field])
    if meta.get("model_version"):
        proto.model_version = meta["model_version"]
    for key, value in meta.get("metadata_props", []):
        proto.metadata_props.add(key=key, value=value)
    for raw in meta.get("functions", []):
        proto.functions.add().ParseFromString(raw)

    graph = proto.graph
    graph.name = g.name or "qconvert"
    if meta.get("graph_doc_string"):
        graph.doc_string = meta["graph_doc_string"]
    opset = model_opset(model)
    skip, rename = spelling_nodes(g)
    written = [n for n in g.nodes if id(n) not in skip]
    graph.node.extend(_node(n, g, opset, rename, name)
                      for n, name in zip(written, written_node_names(written)))
    inputs = list(g.inputs) + [name for name in meta.get("initializer_inputs", [])
                               if name in g.tensors and g.tensors[name].data is not None]
    graph.input.extend(_value_info(g.tensors[name]) for name in inputs)
    graph.output.extend(_value_info(g.tensors[name]) for name in g.outputs)
    boundary = set(g.inputs) | set(g.outputs)
    graph.value_info.extend(_value_info(t) for t in g.tensors.values()
                            if t.extra.get("declared") and t.data is None
                            and t.name not in boundary)
    return proto


def _constants(model: Model) -> list:
    """The tensors written as initializers, in the graph's tensor order (index constants that
    ONNX wants as int64, `INT64_INPUTS`, widened)."""
    g = model.graph
    skip, rename = spelling_nodes(g)
    attributes = _attribute_constants(g, model_opset(model), skip) | set(rename)
    widen = _int64_constants(g)
    flatten = pads_constants(g)
    return [_widened(t) if t.name in widen else flat_pads(t) if t.name in flatten else t
            for t in g.tensors.values() if t.data is not None and t.name not in attributes]


# IR attributes with no ONNX spelling but one value: (IR op, attribute) -> ONNX's value
ONNX_FIXED = {("Shape", "out_type"): "int64", ("Quantize", "rounding"): None}

# (IR op, input position) whose tensor ONNX requires to be int64 (the IR takes any integer)
INT64_INPUTS = frozenset({("Reshape", 1)})


def _int64_constants(g) -> set:
    """int32 constants read only at `INT64_INPUTS` positions."""
    wide, other = set(), set(g.inputs) | set(g.outputs)
    for n in g.nodes:
        for i, name in enumerate(n.inputs):
            if name is not None:
                (wide if not n.opaque and (n.op, i) in INT64_INPUTS else other).add(name)
    return {name for name in wide - other if g.tensors[name].dtype == "int32"
            and g.tensors[name].data is not None}


def _widened(t):
    """A copy of int32 constant `t` holding int64."""
    data = t.data.astype(np.int64)
    data.flags.writeable = False
    return Tensor(t.name, t.shape, "int64", data)


def model_opset(model: Model) -> int:
    """The default-domain opset the model is written with."""
    opset = model.meta.get("opset")
    if opset is None:
        opset = dict(model.meta.get("opset_import", [("", 13)])).get("", 13)
    return int(opset)


def _attribute_slots(node, opset: int) -> dict:
    """{input position: attribute name} of `node`'s inputs written as attributes."""
    schema = None if node.opaque else schemas.get(node.op)
    return {} if schema is None else schema.onnx_attribute_slots(opset)


def _attribute_constants(g, opset: int, skip: set = frozenset()) -> set:
    """Constants written only as node attributes (never as initializers): those every reader
    takes as an attribute, and those the reader made of an attribute that nothing written
    reads (`skip`: the ids of nodes not written)."""
    as_attribute, as_input = set(), set(g.inputs) | set(g.outputs)
    for n in g.nodes:
        if id(n) in skip:
            continue
        slots = _attribute_slots(n, opset)
        for i, name in enumerate(n.inputs):
            if name is not None:
                (as_attribute if i in slots else as_input).add(name)
        as_input.update(n.origin.get("body_reads", ()))
    born = {name for name, t in g.tensors.items() if t.extra.get("from_attribute")}
    return (as_attribute | born) - as_input


def _nbytes(chunk) -> int:
    return chunk.nbytes if isinstance(chunk, np.ndarray) else len(chunk)


def _split(encoded: bytes, number: int) -> tuple:
    """`encoded` cut before its first field numbered above `number` (protobuf writes fields in
    number order), where the fields numbered `number` belong."""
    for field_number, _, start, _, _ in wire_fields(encoded):
        if field_number > number:
            return encoded[:start], encoded[start:]
    return encoded, b""


def _initializer_chunks(t) -> list:
    """Encoded initializer field of constant `t`: key, length, then the TensorProto as chunks."""
    if "onnx_tensor" in t.extra:
        body = [t.extra["onnx_tensor"].SerializeToString(deterministic=True)]
    else:
        header = TensorProto()
        data = _header(header, t)
        # the header holds dims, data_type and name, all numbered below raw_data: raw_data
        # comes last, where protobuf would write it
        body = [header.SerializeToString(deterministic=True), field_key(TENSOR_RAW_DATA),
                encode_varint(data.nbytes), data]
    size = sum(_nbytes(c) for c in body)
    return [field_key(GRAPH_INITIALIZER), encode_varint(size), *body]


def _node(n, g, opset: int, rename: dict, name: str) -> onnx.NodeProto:
    """The NodeProto of `n`, written under `name` ("": unnamed; `node_names`)."""
    inputs = ["" if i is None else rename.get(i, i) for i in n.inputs]
    outputs = ["" if o is None else o for o in n.outputs]
    origin = n.origin
    if n.opaque:
        if "attributes" not in origin:
            raise QConvertError(f"op {n.op} (from TFLite, unknown to qconvert) has no ONNX form")
        proto = helper.make_node(n.op, inputs, outputs, name=name or None,
                                 domain=origin.get("domain") or None)
        for raw in origin["attributes"]:
            proto.attribute.add().ParseFromString(raw)
    else:
        schema = schemas.get(n.op)
        if schema is None or schema.onnx is None:
            raise QConvertError(f"op {n.op} has no ONNX mapping")
        if n.attrs.get("activation", "NONE") != "NONE":
            raise QConvertError(f"{n.op} {n.name!r} carries a fused {n.attrs['activation']}, "
                                "which ONNX cannot express")
        if schema.layout_sensitive and n.attrs.get("layout", "NCHW") != "NCHW":
            raise QConvertError(f"{n.op} {n.name!r} is NHWC; ONNX needs NCHW")
        if schema.name == "Pad":
            check_written_pads(n, g, rename)
        for (op, key), value in ONNX_FIXED.items():
            if schema.name == op and n.attrs.get(key, value) != value:
                raise QConvertError(f"{op} {n.name!r}: {key} {n.attrs[key]} has no ONNX "
                                    f"spelling (ONNX's {op}: {value or 'absent'})")
        spec = schema.onnx
        from_inputs = {}
        for index, attr in schema.onnx_attribute_slots(opset).items():
            if index < len(inputs) and inputs[index]:
                data = g.constant(inputs[index])
                if data is None:
                    raise QConvertError(f"{spec.op_type} {n.name!r}: its {attr} must be a "
                                        f"constant to be written as an attribute (opset {opset})")
                from_inputs[attr] = [int(v) for v in np.asarray(data).reshape(-1)]
                inputs[index] = ""
        while from_inputs and inputs and inputs[-1] == "":
            inputs.pop()
        proto = helper.make_node(spec.op_type, inputs, outputs, name=name or None,
                                 domain=spec.domain or origin.get("domain") or None)
        present = set(origin.get("present", ()))
        for key, default in spec.attrs.items():
            value = from_inputs[key] if key in from_inputs else n.attrs.get(key)
            if (schema.name, key) in DTYPE_ATTRIBUTES:  # the IR's dtype name as a type code
                value = IR_TO_ONNX[value] if value else (0 if default == 0 else None)
            if value is None or (key not in present and _is_default(key, value, default)):
                continue
            proto.attribute.append(_make_attribute(key, value))
        for raw in origin.get("extra_attributes", []):
            proto.attribute.add().ParseFromString(raw)
    if origin.get("doc_string"):
        proto.doc_string = origin["doc_string"]
    return proto


def _is_default(key, value, default) -> bool:
    if default is not None:
        return _plain(value) == default
    if key in _NEUTRAL:
        return all(int(v) == _NEUTRAL[key] for v in value)
    return False


def _plain(value):
    """Python scalars and lists in place of numpy ones (what make_attribute understands)."""
    if isinstance(value, np.ndarray) and value.ndim > 0 and value.dtype.kind in "iuf":
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _make_attribute(key, value) -> AttributeProto:
    if isinstance(value, np.ndarray):
        return helper.make_attribute(key, numpy_helper.from_array(value))
    if isinstance(value, (list, tuple)) and not value:  # every list attribute in the table is ints
        return helper.make_attribute(key, [], attr_type=AttributeProto.INTS)
    return helper.make_attribute(key, _plain(value))


def _fill_initializer(init: TensorProto, t) -> None:
    """Write constant `t` into the empty initializer `init` (raw little-endian data)."""
    if "onnx_tensor" in t.extra:
        init.CopyFrom(t.extra["onnx_tensor"])
        return
    init.raw_data = _header(init, t).tobytes()


def _header(init: TensorProto, t) -> np.ndarray:
    """Set name, type and dims of numeric constant `t` in `init`; return its data as a
    C-contiguous little-endian array (`t.data` itself when it already is one)."""
    if t.dtype not in IR_TO_ONNX:
        raise QConvertError(f"constant {t.name!r} has dtype {t.dtype}, which ONNX lacks")
    init.name = t.name
    init.data_type = IR_TO_ONNX[t.dtype]
    init.dims.extend(int(d) for d in t.data.shape)
    return np.ascontiguousarray(t.data, t.data.dtype.newbyteorder("<"))


def _value_info(t) -> onnx.ValueInfoProto:
    if t.extra.get("dtype_unknown"):
        return helper.make_empty_tensor_value_info(t.name)
    if t.dtype not in IR_TO_ONNX:
        raise QConvertError(f"tensor {t.name!r} has dtype {t.dtype}, which ONNX lacks")
    shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None for d in t.shape]
    return helper.make_tensor_value_info(t.name, IR_TO_ONNX[t.dtype], shape)
