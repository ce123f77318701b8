"""The protobuf wire format of an ONNX model, read and written without protobuf: the reader
leaves large initializer payloads out of the parse (`strip_payloads`) and the writer streams
them after the serialized graph, so the weights are never copied into protobuf objects.
Field numbers come from onnx's descriptors, not retyped."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ..dtypes import ONNX_TO_IR
from ..ir.tensor import RAW_DTYPES

# Field numbers of onnx.proto3 (taken from the descriptors, not retyped).
MODEL_GRAPH = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number
GRAPH_INITIALIZER = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
TENSOR_DATA_TYPE = TensorProto.DESCRIPTOR.fields_by_name["data_type"].number
TENSOR_RAW_DATA = TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number
TENSOR_DATA_LOCATION = TensorProto.DESCRIPTOR.fields_by_name["data_location"].number
LEN = 2  # wire type of length-delimited fields


class UnusualWire(Exception):
    """A wire layout the lean parse does not handle; the full parse takes over."""


def _varint(buf: bytes, pos: int, end: int) -> tuple:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise UnusualWire
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def encode_varint(value: int) -> bytes:
    """A non-negative int as a protobuf base-128 varint."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def wire_fields(buf: bytes, start: int = 0, end: int | None = None):
    """Yield `(number, wire_type, field_start, value_start, value_end)` for each field of the
    message encoded in `buf[start:end]`; raise `UnusualWire` on groups or broken framing."""
    pos, end = start, len(buf) if end is None else end
    while pos < end:
        field_start = pos
        key, pos = _varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise UnusualWire
        if wire_type == 0:
            value_end = _varint(buf, pos, end)[1]
        elif wire_type == 1:
            value_end = pos + 8
        elif wire_type == LEN:
            length, pos = _varint(buf, pos, end)
            value_end = pos + length
        elif wire_type == 5:
            value_end = pos + 4
        else:
            raise UnusualWire
        if value_end > end:
            raise UnusualWire
        yield number, wire_type, field_start, pos, value_end
        pos = value_end


def strip_payloads(data: bytes, small: int) -> tuple:
    """(ModelProto bytes without the numeric initializer payloads larger than `small` bytes,
    {initializer index: (offset, length)})."""
    view = memoryview(data)
    pieces, payloads, copied, graphs = [], {}, 0, 0
    for number, wire_type, start, value, end in wire_fields(data):
        if number != MODEL_GRAPH or wire_type != LEN:
            continue
        graphs += 1
        if graphs > 1:
            raise UnusualWire  # repeated graph fields merge; leave that to protobuf
        lean = _strip_graph(data, view, value, end, payloads, small)
        if lean is not None:
            pieces += [view[copied:start], field_key(MODEL_GRAPH), encode_varint(len(lean)), lean]
            copied = end
    if not payloads:
        return None, {}
    pieces.append(view[copied:])
    return b"".join(pieces), payloads


def _strip_graph(data: bytes, view, begin: int, finish: int, payloads: dict, small: int):
    pieces, copied, index = [], begin, 0
    for number, wire_type, start, value, end in wire_fields(data, begin, finish):
        if number != GRAPH_INITIALIZER or wire_type != LEN:
            continue
        stripped = _strip_tensor(data, view, value, end, small)
        if stripped is not None:
            lean, offset, length = stripped
            pieces += [view[copied:start], field_key(GRAPH_INITIALIZER), encode_varint(len(lean)),
                       lean]
            copied = end
            payloads[index] = (offset, length)
        index += 1
    if not pieces:
        return None
    pieces.append(view[copied:finish])
    return b"".join(pieces)


def _strip_tensor(data: bytes, view, begin: int, finish: int, small: int):
    """(TensorProto bytes without raw_data, offset, length) for a large numeric in-file
    payload; None when the tensor is kept whole."""
    fields = list(wire_fields(data, begin, finish))
    data_type = location = 0
    raw = None
    for number, wire_type, _, value, end in fields:
        if number == TENSOR_RAW_DATA and wire_type == LEN:
            raw = (value, end)  # the last occurrence wins, as in protobuf
        elif number == TENSOR_DATA_TYPE and wire_type == 0:
            data_type = _varint(data, value, end)[0]
        elif number == TENSOR_DATA_LOCATION and wire_type == 0:
            location = _varint(data, value, end)[0]
    if raw is None or raw[1] - raw[0] <= small:
        return None
    dtype = ONNX_TO_IR.get(data_type)
    if dtype is None or dtype in RAW_DTYPES or location == TensorProto.EXTERNAL:
        return None
    lean = b"".join(view[start:end] for number, wire_type, start, _, end in fields
                    if not (number == TENSOR_RAW_DATA and wire_type == LEN))
    return lean, raw[0], raw[1] - raw[0]


def field_key(number: int, wire_type: int = LEN) -> bytes:
    """The key of field `number` (length-delimited unless `wire_type` says otherwise)."""
    return encode_varint(number << 3 | wire_type)
