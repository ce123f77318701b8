"""Serialize the IR to an ONNX ModelProto.

The inverse of `onnx_reader`: constants become initializers, known ops are written from their
IR attributes (an attribute is written when the source had it or it differs from the schema's
default, so no attribute appears that the model's opset lacks), opaque ops get back their
op_type, domain and raw attributes. Model-level fields (IR version, opsets, producer, metadata,
functions) are kept. Serialization is deterministic.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from . import schemas
from .dtypes import IR_TO_ONNX
from .errors import QConvertError
from .ir import Model

MAX_PROTO_BYTES = 2**31 - 2**24
_NEUTRAL = {"strides": 1, "dilations": 1, "pads": 0}


def to_proto(model: Model) -> onnx.ModelProto:
    """Build the ModelProto of `model` (one graph; layout must be NCHW).

    Built in place (no helper.make_graph copies), so a 100 MB model is not copied twice.
    """
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
    graph.node.extend(_node(n) for n in g.nodes)
    for t in g.tensors.values():
        if t.data is not None:
            _fill_initializer(graph.initializer.add(), t)
    inputs = list(g.inputs) + [name for name in meta.get("initializer_inputs", [])
                               if name in g.tensors and g.tensors[name].data is not None]
    graph.input.extend(_value_info(g.tensors[name]) for name in inputs)
    graph.output.extend(_value_info(g.tensors[name]) for name in g.outputs)
    boundary = set(g.inputs) | set(g.outputs)
    graph.value_info.extend(_value_info(t) for t in g.tensors.values()
                            if t.extra.get("declared") and t.data is None
                            and t.name not in boundary)
    return proto


def write_onnx(model: Model) -> bytes:
    """Return the serialized ONNX bytes of `model` (raises QConvertError over 2 GB)."""
    weights = sum(t.data.nbytes for t in model.graph.tensors.values() if t.data is not None)
    if weights > MAX_PROTO_BYTES:
        raise QConvertError("model over 2 GB: ONNX external-data output is not supported yet")
    return to_proto(model).SerializeToString(deterministic=True)


def _node(n) -> onnx.NodeProto:
    inputs = ["" if i is None else i for i in n.inputs]
    outputs = ["" if o is None else o for o in n.outputs]
    origin = n.origin
    name = origin.get("name", n.name)
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
        spec = schema.onnx
        proto = helper.make_node(spec.op_type, inputs, outputs, name=name or None,
                                 domain=spec.domain or origin.get("domain") or None)
        present = set(origin.get("present", ()))
        for key, default in spec.attrs.items():
            value = n.attrs.get(key)
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
    if t.dtype not in IR_TO_ONNX:
        raise QConvertError(f"constant {t.name!r} has dtype {t.dtype}, which ONNX lacks")
    init.name = t.name
    init.data_type = IR_TO_ONNX[t.dtype]
    init.dims.extend(int(d) for d in t.data.shape)
    init.raw_data = np.ascontiguousarray(t.data, t.data.dtype.newbyteorder("<")).tobytes()


def _value_info(t) -> onnx.ValueInfoProto:
    if t.extra.get("dtype_unknown"):
        return helper.make_empty_tensor_value_info(t.name)
    if t.dtype not in IR_TO_ONNX:
        raise QConvertError(f"tensor {t.name!r} has dtype {t.dtype}, which ONNX lacks")
    shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None for d in t.shape]
    return helper.make_tensor_value_info(t.name, IR_TO_ONNX[t.dtype], shape)
