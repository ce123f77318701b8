"""Read a `.tflite` flatbuffer into the IR.

Every subgraph becomes a `Graph`; tensors keep their quantization (per-tensor or per-channel;
a float tensor's min / max hint without scales, as old converters wrote, is dropped: the model is
float), sparse constants are densified (`tflite_sparsity`), constants are numpy views of the file's buffers (no copy). Builtin ops in the schema table get
IR attributes (explicit pads, strides, dilations, group, fused activation, layout NHWC); any other
builtin or custom op is carried opaquely with its opcode, version and raw options. Signature defs,
description and metadata buffers are kept; `OfflineMemoryAllocation` metadata is dropped on
purpose (it indexes tensors, which passes renumber).

A corrupt file must never hang or crash the reader: every vector length read from the file is
checked against the file size before it is iterated, and any failure below becomes one
`QConvertError`.
"""

from __future__ import annotations

import struct

import numpy as np
import tflite
from flatbuffers.table import Table

from .. import schemas
from ..dtypes import TFLITE_TO_IR
from ..errors import QConvertError
from ..ir import Graph, Model, Node, QuantParams, Tensor
from ..ir.tensor import RAW_DTYPES
from .onnx_reader import attribute_input
from ..padding import same_pads, valid_pads
from ..schemas.ops import HALF_AWAY
from .tflite_sparsity import densified_notice, densify, fold_densify, read_sparsity
from .tflite_options import BUILTIN_CODE_NAMES, OPTIONS_NAMES, attrs_from_options, read_options

DROPPED_METADATA = {"OfflineMemoryAllocation"}
# Float tensors whose quantization entry is only a min / max hint (TOCO-era files): the hint is
# dropped on read, so the model is the float model it is (quantize calibrates its own ranges).
_FLOATS = frozenset({"float32", "float16", "float64"})

_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U16 = struct.Struct("<H").unpack_from

# vtable slots (field order of the TFLite schema) read by the lean table access below
_T_SHAPE, _T_TYPE, _T_BUFFER, _T_NAME, _T_QUANT, _T_VARIABLE, _T_SPARSITY, _T_SIGNATURE, \
    _T_HAS_RANK = range(9)
_O_OPCODE, _O_INPUTS, _O_OUTPUTS, _O_OPTIONS_TYPE, _O_OPTIONS = range(5)
_O_INTERMEDIATES, _O_OPTIONS2_TYPE = 8, 11


def read_tflite(data: bytes) -> Model:
    """Parse TFLite flatbuffer bytes into a Model (raises QConvertError when corrupt)."""
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise QConvertError("not a TFLite flatbuffer (no TFL3 file identifier)")
    try:
        return _Reader(data).read()
    except QConvertError:
        raise
    except Exception as exc:  # any parse failure of a corrupt buffer
        raise QConvertError(f"corrupt or truncated TFLite file ({type(exc).__name__}: {exc})") from exc


def _utf8(raw, what: str) -> str:
    """A FlatBuffers string the model's API depends on (a signature key or name, a custom op's
    name), which must be UTF-8: decoded, or refused naming what and the bytes (a name cannot
    be replaced silently: LiteRT's users call the model by it)."""
    try:
        return (raw or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise QConvertError(f"{what} is not valid UTF-8 ({bytes(raw)[:40]!r}); FlatBuffers "
                            "strings must be") from None


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)
        self.fb = tflite.Model.GetRootAs(data, 0)
        self.tensor_names: list = []  # per subgraph, tensor index -> IR name
        self.densified: list = []  # sparse constants made dense (`tflite_sparsity`)

    def count(self, n: int, what: str, elem_size: int = 4) -> int:
        """A vector length from the file, checked to fit inside the file."""
        if n < 0 or n * elem_size > self.size:
            raise QConvertError(f"corrupt TFLite file: {what} claims {n} entries")
        return n

    def read(self) -> Model:
        fb = self.fb
        self.buffers = [self.buffer(fb.Buffers(i))
                        for i in range(self.count(fb.BuffersLength(), "buffers"))]
        opcodes = []
        for i in range(self.count(fb.OperatorCodesLength(), "operator codes")):
            oc = fb.OperatorCodes(i)
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            custom = oc.CustomCode()
            opcodes.append((code, _utf8(custom, "a custom op's name") if custom is not None
                            else None, oc.Version()))
        graphs = [self.subgraph(fb.Subgraphs(i), opcodes)
                  for i in range(self.count(fb.SubgraphsLength(), "subgraphs"))]
        if not graphs:
            raise QConvertError("TFLite file has no subgraph")
        meta = {
            "version": fb.Version(),
            "description": (fb.Description() or b"").decode("utf-8", "replace"),
            "metadata": [],
            "signature_defs": [],
        }
        for i in range(self.count(fb.MetadataLength(), "metadata")):
            md = fb.Metadata(i)
            name = (md.Name() or b"").decode("utf-8", "replace")
            if name in DROPPED_METADATA:
                continue
            meta["metadata"].append((name, bytes(self.buffers[md.Buffer()])))
        for i in range(self.count(fb.SignatureDefsLength(), "signature defs")):
            sd = fb.SignatureDefs(i)
            index = sd.SubgraphIndex()
            names = self.tensor_names[index]
            meta["signature_defs"].append({
                "key": _utf8(sd.SignatureKey(), "a signature def's key"),
                "subgraph": index,
                "inputs": [(_utf8(sd.Inputs(j).Name(), "a signature input's name"),
                            names[sd.Inputs(j).TensorIndex()])
                           for j in range(self.count(sd.InputsLength(), "signature inputs"))],
                "outputs": [(_utf8(sd.Outputs(j).Name(), "a signature output's name"),
                             names[sd.Outputs(j).TensorIndex()])
                            for j in range(self.count(sd.OutputsLength(), "signature outputs"))],
            })
        for sd in meta["signature_defs"]:  # a tensor a signature names must survive the passes
            for _, name in sd["inputs"] + sd["outputs"]:
                graphs[sd["subgraph"]].tensors[name].extra["signature"] = True
        if self.densified:
            meta["read_notices"] = [densified_notice(self.densified)]
        return Model("tflite", graphs, meta)

    def buffer(self, buf) -> np.ndarray:
        offset, size = buf.Offset(), buf.Size()
        if offset > 1:  # large models keep buffer data after the flatbuffer
            if offset + size > self.size:
                raise QConvertError("corrupt TFLite file: buffer lies past the end of the file")
            return np.frombuffer(self.data, np.uint8, size, offset)
        if buf.DataIsNone():
            return np.zeros(0, np.uint8)
        self.count(buf.DataLength(), "buffer", 1)
        return buf.DataAsNumpy()

    # -- subgraphs --------------------------------------------------------------------------
    def subgraph(self, sg, opcodes) -> Graph:
        graph = Graph(name=(sg.Name() or b"").decode("utf-8", "replace"))
        names = []
        for i, pos in enumerate(self.table_vector(sg, 0, "tensors")):
            tensor = self.tensor(pos, i, graph)
            graph.add_tensor(tensor)
            names.append(tensor.name)
        self.tensor_names.append(names)

        def name_of(index: int):
            if index < 0:
                return None
            if index >= len(names):
                raise QConvertError(f"corrupt TFLite file: tensor index {index} out of range")
            return names[index]

        graph.inputs = [name_of(int(i)) for i in self.ints(sg, "Inputs")]
        graph.outputs = [name_of(int(i)) for i in self.ints(sg, "Outputs")]
        for i, pos in enumerate(self.table_vector(sg, 3, "operators")):
            graph.nodes.append(self.operator(pos, i, opcodes, name_of, graph))
        _empty_constants(graph)
        self.densified += fold_densify(graph)
        return graph

    # -- lean table access: the per-tensor and per-operator fields, without an accessor object
    # per field (a 200,000-node model reads 2 million fields)
    def fields(self, pos: int) -> list:
        """Absolute positions of the fields of the table at `pos`, by vtable slot (0: absent)."""
        if not 0 <= pos <= self.size - 4:
            raise QConvertError("corrupt TFLite file: a table lies outside the file")
        vtable = pos - _I32(self.data, pos)[0]
        if not 0 <= vtable <= self.size - 4:
            raise QConvertError("corrupt TFLite file: a vtable lies outside the file")
        n = (_U16(self.data, vtable)[0] - 4) // 2
        if n <= 0:
            return []
        offsets = struct.unpack_from(f"<{n}H", self.data, vtable + 4)
        return [pos + o if o else 0 for o in offsets]

    def vector(self, field_pos: int, what: str, elem_size: int = 4) -> tuple:
        """(start, length) of the vector a field points at (length checked against the file)."""
        start = field_pos + _U32(self.data, field_pos)[0]
        n = self.count(_U32(self.data, start)[0], what, elem_size)
        if start + 4 + n * elem_size > self.size:
            raise QConvertError(f"corrupt TFLite file: {what} runs past the end of the file")
        return start + 4, n

    def int_vector(self, fields: list, slot: int, what: str) -> list:
        """The int32 vector in `slot` as a list ([] when absent)."""
        if slot >= len(fields) or not fields[slot]:
            return []
        start, n = self.vector(fields[slot], what)
        return np.frombuffer(self.data, "<i4", n, start).tolist()

    def table_vector(self, obj, slot: int, what: str) -> list:
        """Positions of the tables of the vector of tables in `slot` of flatbuffers `obj`."""
        fields = self.fields(obj._tab.Pos)
        if slot >= len(fields) or not fields[slot]:
            return []
        start, n = self.vector(fields[slot], what)
        at = start + 4 * np.arange(n, dtype=np.int64)
        return (at + np.frombuffer(self.data, "<u4", n, start)).tolist()

    def ints(self, obj, field: str) -> np.ndarray:
        if getattr(obj, f"{field}IsNone")():
            return np.zeros(0, np.int32)
        self.count(getattr(obj, f"{field}Length")(), field.lower())
        return getattr(obj, f"{field}AsNumpy")()

    def tensor(self, pos: int, index: int, graph: Graph) -> Tensor:
        f = self.fields(pos)
        f += [0] * (9 - len(f))
        data_bytes = self.data
        name = ""
        if f[_T_NAME]:
            start, n = self.vector(f[_T_NAME], "tensor name", 1)
            name = bytes(data_bytes[start:start + n]).decode("utf-8", "replace")
        name = name or f"tensor_{index}"
        extra = {}
        unique = graph.fresh_name(name)
        if unique != name:
            extra["tflite_name"] = name
        code = struct.unpack_from("<b", data_bytes, f[_T_TYPE])[0] if f[_T_TYPE] else 0
        dtype = TFLITE_TO_IR.get(code)
        if dtype is None:
            raise QConvertError(f"tensor {name!r} has unknown TFLite type {code}")
        shape = tuple(self.int_vector(f, _T_SHAPE, "shape"))
        if f[_T_SIGNATURE]:
            extra["shape_signature"] = self.int_vector(f, _T_SIGNATURE, "shapesignature")
            shape = tuple(d if s >= 0 else None for d, s in zip(shape, extra["shape_signature"]))
        is_variable = bool(f[_T_VARIABLE] and data_bytes[f[_T_VARIABLE]])
        if is_variable:
            extra["is_variable"] = True
        if not (f[_T_HAS_RANK] and data_bytes[f[_T_HAS_RANK]]) and not shape:
            extra["has_rank"] = False  # rank unknown, not a scalar
        data = None
        buffer_index = _U32(data_bytes, f[_T_BUFFER])[0] if f[_T_BUFFER] else 0
        if buffer_index >= len(self.buffers):
            raise QConvertError(f"corrupt TFLite file: tensor {name!r} names buffer {buffer_index}")
        raw = self.buffers[buffer_index] if buffer_index > 0 else None
        if raw is not None and raw.size:
            if is_variable:
                extra["variable_init"] = bytes(raw)
            elif dtype in RAW_DTYPES:
                data = raw
            elif f[_T_SPARSITY]:
                data = self.sparse_constant(f[_T_SPARSITY], raw, name, shape, dtype)
                extra["densified"] = True
            else:
                expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                if raw.size != expected or None in shape:
                    raise QConvertError(
                        f"corrupt TFLite file: constant {name!r} has {raw.size} bytes, "
                        f"shape {list(shape)} of {dtype} needs {expected}")
                data = raw.view(dtype).reshape(shape)
        quant = None
        if f[_T_QUANT]:
            q = tflite.QuantizationParameters()
            q.Init(data_bytes, f[_T_QUANT] + _U32(data_bytes, f[_T_QUANT])[0])
            quant = self.quantization(q, name)
            if quant is not None and not quant.scale.size and dtype in _FLOATS:
                quant = None  # an old converter's min / max hint on a float tensor: dropped
        return Tensor(unique, shape, dtype, data, quant, extra)

    def sparse_constant(self, field_pos: int, raw, name: str, shape: tuple, dtype: str):
        """The dense array of a sparse constant (see `tflite_sparsity`), errors naming it."""
        sp = tflite.SparsityParameters()
        sp.Init(self.data, field_pos + _U32(self.data, field_pos)[0])
        if None in shape or raw.size % np.dtype(dtype).itemsize:
            raise QConvertError(f"corrupt TFLite file: sparse constant {name!r} has "
                                f"{raw.size} bytes of {dtype}, shape {list(shape)}")
        try:
            data = densify(raw.view(dtype), shape, read_sparsity(sp))
        except QConvertError as exc:
            raise QConvertError(f"tensor {name!r}: {exc}") from None
        data.flags.writeable = False
        return data

    def quantization(self, q, name: str) -> QuantParams | None:
        if q is None:
            return None
        scale = self.floats(q, "Scale")
        zero = self.ints64(q, "ZeroPoint")
        qmin, qmax = self.floats(q, "Min"), self.floats(q, "Max")
        if q.DetailsType() != 0:
            raise QConvertError(f"tensor {name!r} uses custom quantization details; not supported")
        if scale is None and qmin is None:
            return None
        if scale is None:
            scale, zero = np.zeros(0, np.float32), np.zeros(0, np.int64)
        if zero is None:
            zero = np.zeros(scale.size, np.int64)
        axis = int(q.QuantizedDimension()) if scale.size > 1 else None
        return QuantParams(scale, zero, axis, qmin, qmax)

    def floats(self, q, field):
        if getattr(q, f"{field}IsNone")() or getattr(q, f"{field}Length")() == 0:
            return None
        self.count(getattr(q, f"{field}Length")(), field.lower())
        return np.array(getattr(q, f"{field}AsNumpy")(), np.float32)

    def ints64(self, q, field):
        if getattr(q, f"{field}IsNone")() or getattr(q, f"{field}Length")() == 0:
            return None
        self.count(getattr(q, f"{field}Length")(), field.lower(), 8)
        return np.array(getattr(q, f"{field}AsNumpy")(), np.int64)

    # -- operators --------------------------------------------------------------------------
    def operator(self, pos: int, index: int, opcodes, name_of, graph: Graph) -> Node:
        f = self.fields(pos)
        f += [0] * (13 - len(f))
        data_bytes = self.data
        opcode_index = _U32(data_bytes, f[_O_OPCODE])[0] if f[_O_OPCODE] else 0
        if opcode_index >= len(opcodes):
            raise QConvertError(f"corrupt TFLite file: operator {index} has opcode {opcode_index}")
        code, custom_code, version = opcodes[opcode_index]
        code_name = BUILTIN_CODE_NAMES.get(code, f"BUILTIN_{code}")
        schema = schemas.by_tflite_code(code_name) if custom_code is None else None
        if schema is None:  # opaque: every field kept, through the full accessor object
            op = tflite.Operator()
            op.Init(data_bytes, pos)
            return self.opaque_operator(op, index, opcodes, name_of)
        inputs = [name_of(i) for i in self.int_vector(f, _O_INPUTS, "inputs")]
        outputs = [name_of(i) for i in self.int_vector(f, _O_OUTPUTS, "outputs")]
        options_type = OPTIONS_NAMES.get(data_bytes[f[_O_OPTIONS_TYPE]] if f[_O_OPTIONS_TYPE]
                                         else 0)
        options = {}
        if options_type is not None and options_type != "NONE" and f[_O_OPTIONS]:
            table = Table(data_bytes, f[_O_OPTIONS] + _U32(data_bytes, f[_O_OPTIONS])[0])
            options = read_options(table, options_type)
        origin = {"version": version}
        intermediates = self.int_vector(f, _O_INTERMEDIATES, "intermediates")
        if intermediates:
            origin["intermediates"] = [name_of(i) for i in intermediates]
        if f[_O_OPTIONS2_TYPE] and data_bytes[f[_O_OPTIONS2_TYPE]] != 0:
            raise QConvertError(f"operator {index} ({code_name}) uses builtin_options_2; not supported")
        node_name = outputs[0] if outputs and outputs[0] else f"op_{index}"
        attrs = attrs_from_options(options)
        inputs = _option_inputs(schema, attrs, inputs, node_name, origin, graph)
        _ir_spelling(schema.name, attrs, inputs, outputs, origin, graph)
        if schema.layout_sensitive:
            _normalize_spatial(schema.name, attrs, inputs, graph)
        return Node(schema.name, inputs, outputs, attrs, node_name, False, origin)

    def opaque_operator(self, op, index: int, opcodes, name_of) -> Node:
        """An operator outside the schema table, kept opaquely with its raw options."""
        code, custom_code, version = opcodes[op.OpcodeIndex()]
        code_name = BUILTIN_CODE_NAMES.get(code, f"BUILTIN_{code}")
        inputs = [name_of(int(i)) for i in self.ints(op, "Inputs")]
        outputs = [name_of(int(i)) for i in self.ints(op, "Outputs")]
        options_type = OPTIONS_NAMES.get(op.BuiltinOptionsType())
        options = {}
        if options_type is not None and options_type != "NONE" and op.BuiltinOptions() is not None:
            options = read_options(op.BuiltinOptions(), options_type)
        origin = {"version": version}
        intermediates = self.ints(op, "Intermediates")
        if len(intermediates):
            origin["intermediates"] = [name_of(int(i)) for i in intermediates]
        if op.BuiltinOptions2Type() != 0:
            raise QConvertError(f"operator {index} ({code_name}) uses builtin_options_2; not supported")
        node_name = outputs[0] if outputs and outputs[0] else f"op_{index}"
        origin.update(code=code, custom_code=custom_code, options_type=options_type,
                      options=options, custom_options=None,
                      custom_options_format=op.CustomOptionsFormat())
        if not op.CustomOptionsIsNone():
            self.count(op.CustomOptionsLength(), "custom options", 1)
            origin["custom_options"] = bytes(op.CustomOptionsAsNumpy())
        return Node(custom_code or code_name, inputs, outputs, {}, node_name, True, origin)


def _option_inputs(schema, attrs: dict, inputs: list, node_name: str, origin: dict,
                   graph: Graph) -> list:
    """The IR spelling of the options TFLite spells in place of an input (SQUEEZE
    `squeeze_dims`): a constant input (int32, as TFLite's option vectors). Where the node has
    the input too (a slot in `input_too`), the option is a TFLite detail the writer needs:
    kept in `origin` with the input it came with."""
    spec = schema.tflite
    for slot, attr in spec.option_inputs.items():
        index = schema.slot_index(slot)
        value = attrs.pop(attr, None)
        if index < len(inputs) and inputs[index] is not None:
            origin[attr] = (value, inputs[index])
        elif value is not None:
            inputs = attribute_input(graph, schema, node_name, slot, value, inputs, np.int32)
    return inputs


_REDUCERS = frozenset({"Mean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"})
_CAST_TYPES = ("in_data_type", "out_data_type")


def _ir_spelling(op: str, attrs: dict, inputs: list, outputs: list, origin: dict,
                 graph: Graph) -> None:
    """TFLite semantics in the IR's attributes (see `qconvert.schemas.ops`): a reduction's
    `keepdims` (0 when the option is absent) and `noop_with_empty_axes` (empty axes reduce
    nothing); Reshape's `allowzero` (TFLite reads a 0 literally); Softmax's `axis` (the last);
    Cast's `to` (the output tensor's type; CastOptions' type codes have no effect and stay in
    `origin`); Pad's `mode` (constant, ONNX's name); Quantize's `rounding` (half away from
    zero) and a per-channel Quantize / Dequantize's `axis` (the quantized dimension: the scale
    and zero point stay on the tensor, see `Input.from_quantization`)."""
    if op in _REDUCERS:
        attrs.setdefault("keepdims", 0)
        attrs["noop_with_empty_axes"] = 1
    elif op == "Reshape":
        attrs["allowzero"] = 1
    elif op == "Softmax":
        attrs["axis"] = -1
    elif op in ("Pad", "PadV2"):
        attrs["mode"] = "constant"
    elif op in ("Quantize", "Dequantize"):
        if op == "Quantize":
            attrs["rounding"] = HALF_AWAY
        name = (outputs if op == "Quantize" else inputs)[0]
        q = graph.tensors[name].quant if name is not None else None
        if q is not None and q.scale.size > 1:
            attrs["axis"] = int(q.axis or 0)
    elif op == "Cast":
        types = {k: attrs.pop(k) for k in _CAST_TYPES if k in attrs}
        if types:
            origin["kept_options"] = types
        if outputs and outputs[0] is not None:
            attrs["to"] = graph.tensors[outputs[0]].dtype


def _normalize_spatial(op: str, attrs: dict, inputs: list, graph: Graph) -> None:
    """Give a TFLite spatial op the IR's explicit attributes (layout, kernel, group, pads)."""
    attrs["layout"] = "NHWC"
    attrs.setdefault("strides", [1, 1])
    attrs.setdefault("dilations", [1, 1])
    x = graph.tensors[inputs[0]]
    if op in ("Conv2D", "DepthwiseConv2D"):
        w = graph.tensors[inputs[1]]
        attrs["kernel_shape"] = [int(w.shape[1]), int(w.shape[2])]
        if op == "Conv2D":
            cin = x.shape[3] if len(x.shape) == 4 else None
            attrs["group"] = int(cin) // int(w.shape[3]) if isinstance(cin, int) and w.shape[3] else 1
    padding = attrs.pop("padding", "VALID")
    spatial = x.shape[1:3] if len(x.shape) == 4 else (None, None)
    if padding == "VALID":
        attrs["pads"] = valid_pads(2)
    elif all(isinstance(d, int) for d in spatial):
        attrs["pads"] = same_pads(spatial, attrs["kernel_shape"], attrs["strides"],
                                  attrs["dilations"])
    else:  # SAME on a dynamic input: keep it symbolic
        attrs["auto_pad"] = "SAME_UPPER"


def _empty_constants(graph: Graph) -> None:
    """A tensor of static shape with no elements (an int32 shape [0]: "reshape to a scalar"),
    produced by no node, not a graph input, a variable or an operator's intermediate (an
    integer LSTM's, which TFLite Micro wants of size 0), is an empty constant: its buffer is
    empty because there is nothing to store, not because it is computed at run time."""
    produced = {o for n in graph.nodes for o in n.outputs if o}
    produced.update(i for n in graph.nodes for i in n.origin.get("intermediates") or ())
    for name, t in graph.tensors.items():
        if (t.data is None and name not in produced and name not in graph.inputs
                and not t.extra.get("is_variable") and t.shape is not None
                and all(isinstance(d, (int, np.integer)) for d in t.shape)
                and 0 in t.shape and t.dtype not in RAW_DTYPES):
            data = np.zeros(tuple(int(d) for d in t.shape), t.dtype)
            data.flags.writeable = False
            t.data = data

