"""Serialize the IR to a `.tflite` flatbuffer.

The inverse of `tflite_reader`: tensors in IR order, constants in 16-byte aligned buffers (one
buffer per distinct array), operator codes in order of first use with the op version the source
carried (schema default for new nodes), options rebuilt from IR attributes through the generic
options writer. Explicit pads are written as SAME or VALID; pads TFLite cannot express are an
error here (the layout pass inserts an explicit PAD first). Inputs the IR spells as constants
where TFLite has an option (SQUEEZE `squeeze_dims`: `TfliteSpec.option_inputs`) are written as
that option, and a constant read only that way is not written as a tensor. Output is
deterministic: the same IR gives the same bytes.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
import tflite

from .. import schemas
from ..dtypes import IR_TO_TFLITE
from ..errors import QConvertError
from ..ir import Model
from ..padding import tflite_padding_of
from .tflite_options import BUILTIN_CODES, OPTIONS_CODES, options_from_attrs, write_options

BUFFER_ALIGNMENT = 16
PLACEHOLDER_FOR_GREATER_OP_CODES = 127


def write_tflite(model: Model) -> bytes:
    """Return the flatbuffer bytes of `model` (raises QConvertError if it cannot be expressed)."""
    return _Writer(model).write()


class _Writer:
    def __init__(self, model: Model):
        self.model = model
        size = sum(t.data.nbytes for g in model.graphs for t in g.tensors.values()
                   if t.data is not None)
        if size > 2**31 - 2**24:
            raise QConvertError("model too large for one flatbuffer (2 GB limit)")
        self.b = flatbuffers.Builder(size + 2**16)
        self.buffer_data: list = [None]  # buffer 0: the empty sentinel
        self.buffer_of: dict = {}  # id(array) -> buffer index
        self.opcodes: dict = {}  # (code, custom_code, version) -> index
        self.tensor_index: list = []  # per graph, tensor name -> index

    # -- helpers ----------------------------------------------------------------------------
    def int_vector(self, values, dtype=np.int32) -> int:
        return self.b.CreateNumpyVector(np.asarray(list(values), dtype=dtype))

    def offsets_vector(self, start, offsets) -> int:
        start(self.b, len(offsets))
        for off in reversed(offsets):
            self.b.PrependUOffsetTRelative(off)
        return self.b.EndVector()

    def bytes_vector(self, data: bytes) -> int:
        b = self.b
        b.StartVector(1, len(data), BUFFER_ALIGNMENT)
        b.head -= len(data)
        b.Bytes[b.head:b.head + len(data)] = data
        return b.EndVector()

    def buffer_index(self, data: np.ndarray | bytes) -> int:
        key = id(data)
        if key not in self.buffer_of:
            self.buffer_of[key] = len(self.buffer_data)
            self.buffer_data.append(data)
        return self.buffer_of[key]

    # -- model ------------------------------------------------------------------------------
    def write(self) -> bytes:
        b, model = self.b, self.model
        self.written = [_written_tensors(g) for g in model.graphs]
        graphs_ops = [[self.operator_parts(node, g) for node in g.nodes] for g in model.graphs]
        for g, names in zip(model.graphs, self.written):
            for t in map(g.tensors.__getitem__, names):
                if t.data is not None:
                    self.buffer_index(t.data)
                elif "variable_init" in t.extra:
                    self.buffer_index(t.extra["variable_init"])
        metadata = [(name, self.buffer_index(data)) for name, data in model.meta.get("metadata", [])]

        # Buffers first: they are the bulk, and children must precede their parents.
        buffer_offsets = []
        for data in self.buffer_data:
            raw = None if data is None else (data if isinstance(data, bytes)
                                             else np.ascontiguousarray(data).tobytes())
            vec = self.bytes_vector(raw) if raw else None
            tflite.BufferStart(b)
            if vec is not None:
                tflite.BufferAddData(b, vec)
            buffer_offsets.append(tflite.BufferEnd(b))

        subgraphs = [self.subgraph(g, ops) for g, ops in zip(model.graphs, graphs_ops)]
        opcode_offsets = [self.opcode(*key) for key in self.opcodes]
        signature_offsets = [self.signature(sd) for sd in model.meta.get("signature_defs", [])]
        metadata_offsets = []
        for name, index in metadata:
            name_off = b.CreateString(name)
            tflite.MetadataStart(b)
            tflite.MetadataAddName(b, name_off)
            tflite.MetadataAddBuffer(b, index)
            metadata_offsets.append(tflite.MetadataEnd(b))
        description = b.CreateString(model.meta.get("description", "qconvert"))

        opcodes_vec = self.offsets_vector(tflite.ModelStartOperatorCodesVector, opcode_offsets)
        subgraphs_vec = self.offsets_vector(tflite.ModelStartSubgraphsVector, subgraphs)
        buffers_vec = self.offsets_vector(tflite.ModelStartBuffersVector, buffer_offsets)
        metadata_vec = self.offsets_vector(tflite.ModelStartMetadataVector, metadata_offsets)
        signature_vec = self.offsets_vector(tflite.ModelStartSignatureDefsVector, signature_offsets)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, model.meta.get("version", 3))
        tflite.ModelAddOperatorCodes(b, opcodes_vec)
        tflite.ModelAddSubgraphs(b, subgraphs_vec)
        tflite.ModelAddDescription(b, description)
        tflite.ModelAddBuffers(b, buffers_vec)
        if metadata_offsets:
            tflite.ModelAddMetadata(b, metadata_vec)
        if signature_offsets:
            tflite.ModelAddSignatureDefs(b, signature_vec)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def opcode(self, code: int, custom_code, version: int) -> int:
        b = self.b
        custom = b.CreateString(custom_code) if custom_code is not None else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, PLACEHOLDER_FOR_GREATER_OP_CODES))
        tflite.OperatorCodeAddBuiltinCode(b, code)
        if custom is not None:
            tflite.OperatorCodeAddCustomCode(b, custom)
        tflite.OperatorCodeAddVersion(b, version)
        return tflite.OperatorCodeEnd(b)

    def signature(self, sd: dict) -> int:
        b = self.b
        index = self.tensor_index[sd["subgraph"]]

        def maps(pairs):
            offs = []
            for name, tensor in pairs:
                name_off = b.CreateString(name)
                tflite.TensorMapStart(b)
                tflite.TensorMapAddName(b, name_off)
                tflite.TensorMapAddTensorIndex(b, index[tensor])
                offs.append(tflite.TensorMapEnd(b))
            return offs

        inputs = self.offsets_vector(tflite.SignatureDefStartInputsVector, maps(sd["inputs"]))
        outputs = self.offsets_vector(tflite.SignatureDefStartOutputsVector, maps(sd["outputs"]))
        key = b.CreateString(sd["key"])
        tflite.SignatureDefStart(b)
        tflite.SignatureDefAddInputs(b, inputs)
        tflite.SignatureDefAddOutputs(b, outputs)
        tflite.SignatureDefAddSignatureKey(b, key)
        tflite.SignatureDefAddSubgraphIndex(b, sd["subgraph"])
        return tflite.SignatureDefEnd(b)

    # -- operators --------------------------------------------------------------------------
    def operator_parts(self, node, graph) -> tuple:
        """(opcode index, options type, options values, custom options, inputs) of a node."""
        inputs = node.inputs
        origin = node.origin
        if node.opaque:
            if "code" not in origin:
                raise QConvertError(f"op {node.op} (from ONNX, unknown to qconvert) has no TFLite form")
            key = (origin["code"], origin.get("custom_code"), origin.get("version", 1))
            options_type, values = origin.get("options_type"), origin.get("options", {})
            custom = (origin.get("custom_options"), origin.get("custom_options_format", 0))
        else:
            schema = schemas.get(node.op)
            if schema is None or schema.tflite is None:
                raise QConvertError(f"op {node.op} has no TFLite mapping")
            spec = schema.tflite
            key = (BUILTIN_CODES[spec.code], None, origin.get("version", spec.version))
            options_type = spec.options
            values = {}
            attrs = dict(node.attrs)
            inputs = _options_from_inputs(node, graph, schema, attrs)
            if options_type is not None:
                if schema.layout_sensitive:
                    attrs["padding"] = _tflite_padding(node, graph)
                values = options_from_attrs(options_type, attrs)
            custom = (None, 0)
        self.opcodes.setdefault(key, len(self.opcodes))
        return self.opcodes[key], options_type, values, custom, inputs

    def subgraph(self, g, ops) -> int:
        b = self.b
        names = self.written[len(self.tensor_index)]
        index = {name: i for i, name in enumerate(names)}
        self.tensor_index.append(index)

        def idx(name):
            return -1 if name is None else index[name]

        tensor_offsets = [self.tensor(g.tensors[name]) for name in names]
        op_offsets = []
        for node, (opcode_index, options_type, values, custom, inputs) in zip(g.nodes, ops):
            op_offsets.append(self.operator(node, opcode_index, options_type, values, custom,
                                            inputs, idx))
        tensors_vec = self.offsets_vector(tflite.SubGraphStartTensorsVector, tensor_offsets)
        inputs_vec = self.int_vector(idx(n) for n in g.inputs)
        outputs_vec = self.int_vector(idx(n) for n in g.outputs)
        ops_vec = self.offsets_vector(tflite.SubGraphStartOperatorsVector, op_offsets)
        name = b.CreateString(g.name) if g.name else None
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tensors_vec)
        tflite.SubGraphAddInputs(b, inputs_vec)
        tflite.SubGraphAddOutputs(b, outputs_vec)
        tflite.SubGraphAddOperators(b, ops_vec)
        if name is not None:
            tflite.SubGraphAddName(b, name)
        return tflite.SubGraphEnd(b)

    def operator(self, node, opcode_index, options_type, values, custom, inputs, idx) -> int:
        b = self.b
        options = write_options(b, options_type, values) if options_type not in (None, "NONE") else None
        inputs = self.int_vector(idx(n) for n in inputs)
        outputs = self.int_vector(idx(n) for n in node.outputs)
        intermediates = node.origin.get("intermediates")
        inter_vec = self.int_vector(idx(n) for n in intermediates) if intermediates else None
        custom_data, custom_format = custom
        custom_vec = self.b.CreateNumpyVector(np.frombuffer(custom_data, np.uint8)) \
            if custom_data is not None else None
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, opcode_index)
        tflite.OperatorAddInputs(b, inputs)
        tflite.OperatorAddOutputs(b, outputs)
        if options is not None:
            tflite.OperatorAddBuiltinOptionsType(b, OPTIONS_CODES[options_type])
            tflite.OperatorAddBuiltinOptions(b, options)
        if custom_vec is not None:
            tflite.OperatorAddCustomOptions(b, custom_vec)
            tflite.OperatorAddCustomOptionsFormat(b, custom_format)
        if inter_vec is not None:
            tflite.OperatorAddIntermediates(b, inter_vec)
        return tflite.OperatorEnd(b)

    # -- tensors ----------------------------------------------------------------------------
    def tensor(self, t) -> int:
        b = self.b
        if t.dtype not in IR_TO_TFLITE:
            raise QConvertError(f"tensor {t.name!r} has dtype {t.dtype}, which TFLite lacks")
        _check_int32_shape(t)
        name = b.CreateString(t.extra.get("tflite_name", t.name))
        shape = self.int_vector(d if isinstance(d, (int, np.integer)) else 1 for d in t.shape)
        signature = t.extra.get("shape_signature")
        if signature is None and not t.static_shape:
            signature = [d if isinstance(d, (int, np.integer)) else -1 for d in t.shape]
        sig_vec = self.int_vector(signature) if signature is not None else None
        quant = self.quantization(t.quant) if t.quant is not None else None
        if t.data is not None:
            buffer = self.buffer_of[id(t.data)]
        elif "variable_init" in t.extra:
            buffer = self.buffer_of[id(t.extra["variable_init"])]
        else:
            buffer = 0
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, IR_TO_TFLITE[t.dtype])
        tflite.TensorAddBuffer(b, buffer)
        tflite.TensorAddName(b, name)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        if t.extra.get("is_variable"):
            tflite.TensorAddIsVariable(b, True)
        if sig_vec is not None:
            tflite.TensorAddShapeSignature(b, sig_vec)
        tflite.TensorAddHasRank(b, t.extra.get("has_rank", True))
        return tflite.TensorEnd(b)

    def quantization(self, q) -> int:
        b = self.b
        vecs = {}
        for field, values, dtype in (("Min", q.min, np.float32), ("Max", q.max, np.float32),
                                     ("Scale", q.scale, np.float32),
                                     ("ZeroPoint", q.zero_point, np.int64)):
            if values is not None and np.size(values):
                vecs[field] = b.CreateNumpyVector(np.asarray(values, dtype).reshape(-1))
        tflite.QuantizationParametersStart(b)
        for field, off in vecs.items():
            getattr(tflite, f"QuantizationParametersAdd{field}")(b, off)
        tflite.QuantizationParametersAddQuantizedDimension(b, q.axis or 0)
        return tflite.QuantizationParametersEnd(b)


_INT32_MAX = 2**31 - 1


def _option_slots(node, graph) -> dict:
    """{input position: option attribute} of `node`'s inputs written as options: the slots
    TFLite spells only as options, and those holding a constant the reader made of one."""
    schema = None if node.opaque else schemas.get(node.op)
    if schema is None:
        return {}
    slots = {}
    for index, attr in schema.tflite_option_slots().items():
        name = node.inputs[index] if index < len(node.inputs) else None
        if name is None:
            continue
        slot = schema.inputs[index].name
        if slot not in schema.tflite.input_too or graph.tensors[name].extra.get("from_attribute"):
            slots[index] = attr
    return slots


def _options_from_inputs(node, graph, schema, attrs: dict) -> list:
    """`node`'s inputs without those written as options; their values go into `attrs`, with
    the options that have no IR meaning (kept in `origin`)."""
    attrs.update(node.origin.get("kept_options", ()))
    slots = _option_slots(node, graph)
    for index, attr in schema.tflite_option_slots().items():
        if index not in slots and schema.inputs[index].name in schema.tflite.input_too:
            # an input TFLite also has, and repeats as an option
            value = _repeated_option(node, graph, index, attr)
            if value is not None:
                attrs[attr] = value
    if not slots:
        return node.inputs
    inputs = list(node.inputs)
    for index, attr in slots.items():
        data = graph.constant(inputs[index])
        if data is None:
            raise QConvertError(f"{node.op} {node.name!r}: its {attr} must be a constant "
                                "(TFLite spells it as an option)")
        attrs[attr] = [int(v) for v in np.asarray(data).reshape(-1)]
        inputs[index] = None
    while inputs and inputs[-1] is None:
        inputs.pop()
    return inputs


def _repeated_option(node, graph, index: int, attr: str):
    """The option value repeating input `index` (RESHAPE `new_shape`): what the source had
    while the node reads the input it came with, else the input's values (None when it has
    none, or is not a constant)."""
    name = node.inputs[index] if index < len(node.inputs) else None
    if attr in node.origin:
        literal, came_with = node.origin[attr]
        if literal is None or came_with == name:
            return literal
    data = graph.constant(name)
    return None if data is None else [int(v) for v in np.asarray(data).reshape(-1)]


def _written_tensors(g) -> list:
    """Names of the tensors written, in IR order: all but the constants only read as
    options (and those the reader made of an option that nothing reads any more)."""
    as_option, as_input = set(), set(g.inputs) | set(g.outputs)
    for node in g.nodes:
        slots = _option_slots(node, g)
        for i, name in enumerate(node.inputs):
            if name is not None:
                (as_option if i in slots else as_input).add(name)
        as_input.update(node.outputs)
        as_input.update(node.origin.get("intermediates") or ())
    born = {name for name, t in g.tensors.items() if t.extra.get("from_attribute")}
    omitted = (as_option | born) - as_input
    return [name for name in g.tensors if name not in omitted]


def _check_int32_shape(t) -> None:
    """TFLite stores shapes as int32: refuse a dimension outside it, naming the tensor."""
    for d in t.shape or ():
        if isinstance(d, (int, np.integer)) and not -1 <= int(d) <= _INT32_MAX:
            raise QConvertError(f"tensor {t.name!r} has dimension {int(d)}, outside the int32 "
                                "range of TFLite shapes")


def _tflite_padding(node, graph) -> str:
    """SAME or VALID for a spatial node's explicit pads, or an error naming the node."""
    attrs = node.attrs
    if attrs.get("auto_pad") in ("SAME_UPPER", "SAME"):
        return "SAME"
    x = graph.tensors[node.inputs[0]]
    spatial = x.shape[1:3] if len(x.shape) == 4 and all(
        isinstance(d, (int, np.integer)) for d in x.shape[1:3]) else None
    padding = tflite_padding_of(attrs.get("pads", [0, 0, 0, 0]), spatial, attrs["kernel_shape"],
                                attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]))
    if padding is None:
        raise QConvertError(f"{node.op} {node.name!r} has pads {attrs['pads']} that TFLite "
                            "cannot express as SAME or VALID")
    return padding
