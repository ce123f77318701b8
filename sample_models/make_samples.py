"""Generate the small models qconvert ships beside the copies from ../shared/models.

Run once from the repository root: `python sample_models/make_samples.py`. Each model holds a
pattern the shared models lack:

- `opaque_ops.onnx`: Conv -> Relu -> Resize -> LRN, plus Size of the input: ops outside the
  schema table that must be carried through unchanged (runs in onnxruntime).
- `unknown_builtin.tflite`: CONV_2D -> COS -> FLOOR -> ADD: TFLite builtins outside the
  schema table (runs in LiteRT).
- `all_ops.tflite`: one of each TFLite builtin of the schema table the shared models lack (MEAN,
  SUB, MUL, LOGISTIC, TANH, RELU, RELU6, HARD_SWISH, CONCATENATION, PAD, TRANSPOSE, SQUEEZE,
  QUANTIZE, DEQUANTIZE), float, runs in LiteRT.
- `custom_op.tflite`: CONV_2D -> a custom op "QcvTestCustom" with raw custom options: a custom op
  carried through with its code and options untouched (no runtime has the kernel).
- `digits_calib_nhwc.npy`, `digits_calib_nchw.npy`: the first 32 calibration samples of
  `../shared/models/digits_data_*.npz` (`calib`), for the Quickstart's `qconvert quantize` of
  the bundled digits models.

The TFLite files are built with the `tflite` package's flatbuffer builders directly, not with
qconvert's writer, so that reading them tests the reader against an independent encoder.
"""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
import onnx
import tflite
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent


def make_opaque_onnx(path: Path) -> None:
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "conv_w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "conv_b")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [
        helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Resize", ["r", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("LRN", ["up"], ["y"], size=3),
        helper.make_node("Size", ["x"], ["s"]),
    ]
    graph = helper.make_graph(
        nodes, "opaque_ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [])],
        [w, b, scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="qconvert-samples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())


class _TfliteBuilder:
    """A tiny TFLite model builder on top of the flatc-generated `tflite` functions."""

    def __init__(self):
        self.b = flatbuffers.Builder(1024)
        self.buffers = [None]
        self.tensors = []
        self.ops = []
        self.opcodes = []

    def tensor(self, name, shape, ttype=0, data=None, quant=None):
        buf = 0
        if data is not None:
            self.buffers.append(np.ascontiguousarray(data).tobytes())
            buf = len(self.buffers) - 1
        self.tensors.append((name, list(shape), ttype, buf, quant))
        return len(self.tensors) - 1

    def opcode(self, code, custom=None):
        key = (code, custom)
        if key not in self.opcodes:
            self.opcodes.append(key)
        return self.opcodes.index(key)

    def op(self, code, inputs, outputs, options=None, custom=None, custom_options=None):
        self.ops.append((self.opcode(code, custom), inputs, outputs, options, custom_options))

    def _ivec(self, values):
        return self.b.CreateNumpyVector(np.asarray(values, np.int32))

    def _vec(self, start, offsets):
        start(self.b, len(offsets))
        for o in reversed(offsets):
            self.b.PrependUOffsetTRelative(o)
        return self.b.EndVector()

    def finish(self, inputs, outputs) -> bytes:
        b = self.b
        buf_offs = []
        for data in self.buffers:
            vec = b.CreateNumpyVector(np.frombuffer(data, np.uint8)) if data else None
            tflite.BufferStart(b)
            if vec is not None:
                tflite.BufferAddData(b, vec)
            buf_offs.append(tflite.BufferEnd(b))
        t_offs = []
        for name, shape, ttype, buf, quant in self.tensors:
            n, s = b.CreateString(name), self._ivec(shape)
            q = None
            if quant is not None:
                sv = b.CreateNumpyVector(np.array([quant[0]], np.float32))
                zv = b.CreateNumpyVector(np.array([quant[1]], np.int64))
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, sv)
                tflite.QuantizationParametersAddZeroPoint(b, zv)
                q = tflite.QuantizationParametersEnd(b)
            tflite.TensorStart(b)
            if q is not None:
                tflite.TensorAddQuantization(b, q)
            tflite.TensorAddShape(b, s)
            tflite.TensorAddType(b, ttype)
            tflite.TensorAddBuffer(b, buf)
            tflite.TensorAddName(b, n)
            t_offs.append(tflite.TensorEnd(b))
        op_offs = []
        for opcode, ins, outs, options, custom_options in self.ops:
            opts = options(b) if options else None
            iv, ov = self._ivec(ins), self._ivec(outs)
            cv = b.CreateNumpyVector(np.frombuffer(custom_options, np.uint8)) \
                if custom_options else None
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, opcode)
            tflite.OperatorAddInputs(b, iv)
            tflite.OperatorAddOutputs(b, ov)
            if opts:
                tflite.OperatorAddBuiltinOptionsType(b, opts[0])
                tflite.OperatorAddBuiltinOptions(b, opts[1])
            if cv is not None:
                tflite.OperatorAddCustomOptions(b, cv)
            op_offs.append(tflite.OperatorEnd(b))
        oc_offs = []
        for code, custom in self.opcodes:
            cs = b.CreateString(custom) if custom else None
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            tflite.OperatorCodeAddBuiltinCode(b, code)
            if cs is not None:
                tflite.OperatorCodeAddCustomCode(b, cs)
            tflite.OperatorCodeAddVersion(b, 1)
            oc_offs.append(tflite.OperatorCodeEnd(b))
        tv = self._vec(tflite.SubGraphStartTensorsVector, t_offs)
        iv, ov = self._ivec(inputs), self._ivec(outputs)
        opv = self._vec(tflite.SubGraphStartOperatorsVector, op_offs)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tv)
        tflite.SubGraphAddInputs(b, iv)
        tflite.SubGraphAddOutputs(b, ov)
        tflite.SubGraphAddOperators(b, opv)
        sg = tflite.SubGraphEnd(b)
        ocv = self._vec(tflite.ModelStartOperatorCodesVector, oc_offs)
        sgv = self._vec(tflite.ModelStartSubgraphsVector, [sg])
        bv = self._vec(tflite.ModelStartBuffersVector, buf_offs)
        desc = b.CreateString("qconvert sample")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, ocv)
        tflite.ModelAddSubgraphs(b, sgv)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, bv)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def _conv_options(b):
    tflite.Conv2DOptionsStart(b)
    tflite.Conv2DOptionsAddPadding(b, tflite.Padding.SAME)
    tflite.Conv2DOptionsAddStrideH(b, 1)
    tflite.Conv2DOptionsAddStrideW(b, 1)
    tflite.Conv2DOptionsAddFusedActivationFunction(b, tflite.ActivationFunctionType.RELU)
    return tflite.BuiltinOptions.Conv2DOptions, tflite.Conv2DOptionsEnd(b)


def _conv_front(m: _TfliteBuilder, rng) -> int:
    x = m.tensor("input", [1, 8, 8, 3])
    w = m.tensor("conv/w", [4, 3, 3, 3], data=rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    bias = m.tensor("conv/b", [4], data=rng.standard_normal(4).astype(np.float32))
    c = m.tensor("conv/out", [1, 8, 8, 4])
    m.op(tflite.BuiltinOperator.CONV_2D, [x, w, bias], [c], _conv_options)
    return c


def make_unknown_builtin_tflite(path: Path) -> None:
    rng = np.random.default_rng(2)
    m = _TfliteBuilder()
    c = _conv_front(m, rng)
    s = m.tensor("cos/out", [1, 8, 8, 4])
    m.op(tflite.BuiltinOperator.COS, [c], [s])
    g = m.tensor("floor/out", [1, 8, 8, 4])
    m.op(tflite.BuiltinOperator.FLOOR, [s], [g])
    k = m.tensor("add/k", [4], data=np.array([0.5, -1.0, 2.0, 0.25], np.float32))
    y = m.tensor("output", [1, 8, 8, 4])

    def add_options(b):
        tflite.AddOptionsStart(b)
        tflite.AddOptionsAddFusedActivationFunction(b, tflite.ActivationFunctionType.RELU6)
        return tflite.BuiltinOptions.AddOptions, tflite.AddOptionsEnd(b)

    m.op(tflite.BuiltinOperator.ADD, [g, k], [y], add_options)
    path.write_bytes(m.finish([0], [y]))


def _options(name, **fields):
    """Options builder for `tflite.<name>` with scalar `fields` (FieldName=value)."""

    def build(b):
        vectors = {k: b.CreateNumpyVector(np.asarray(v, np.int32))
                   for k, v in fields.items() if isinstance(v, list)}
        getattr(tflite, f"{name}Start")(b)
        for k, v in fields.items():
            getattr(tflite, f"{name}Add{k}")(b, vectors.get(k, v))
        return getattr(tflite.BuiltinOptions, name), getattr(tflite, f"{name}End")(b)

    return build


def make_all_ops_tflite(path: Path) -> None:
    rng = np.random.default_rng(4)
    m = _TfliteBuilder()
    op = tflite.BuiltinOperator
    x = m.tensor("input", [1, 6, 6, 4])
    k = m.tensor("k", [4], data=rng.standard_normal(4).astype(np.float32))
    sub = m.tensor("sub", [1, 6, 6, 4])
    m.op(op.SUB, [x, k], [sub], _options("SubOptions", FusedActivationFunction=0))
    mul = m.tensor("mul", [1, 6, 6, 4])
    m.op(op.MUL, [sub, k], [mul], _options("MulOptions", FusedActivationFunction=1))
    acts = []
    for code, name in ((op.LOGISTIC, "logistic"), (op.TANH, "tanh"), (op.RELU6, "relu6"),
                       (op.HARD_SWISH, "hard_swish"), (op.RELU, "relu")):
        t = m.tensor(name, [1, 6, 6, 4])
        m.op(code, [mul if not acts else acts[-1]], [t])
        acts.append(t)
    cat = m.tensor("concat", [1, 6, 6, 8])
    m.op(op.CONCATENATION, [acts[0], acts[-1]], [cat],
         _options("ConcatenationOptions", Axis=3, FusedActivationFunction=0))
    pads = m.tensor("pads", [4, 2], 2, np.array([[0, 0], [1, 1], [2, 0], [0, 0]], np.int32))
    pad = m.tensor("pad", [1, 8, 8, 8])
    m.op(op.PAD, [cat, pads], [pad], _options("PadOptions"))
    perm = m.tensor("perm", [4], 2, np.array([0, 3, 1, 2], np.int32))
    tr = m.tensor("transpose", [1, 8, 8, 8])
    m.op(op.TRANSPOSE, [pad, perm], [tr], _options("TransposeOptions"))
    axes = m.tensor("axes", [2], 2, np.array([2, 3], np.int32))
    mean = m.tensor("mean", [1, 8, 1, 1])
    m.op(op.MEAN, [tr, axes], [mean], _options("ReducerOptions", KeepDims=True))
    sq = m.tensor("squeeze", [1, 8])
    m.op(op.SQUEEZE, [mean], [sq], _options("SqueezeOptions", SqueezeDims=[2, 3]))
    q = m.tensor("quantized", [1, 8], 9, quant=(0.02, 3))
    m.op(op.QUANTIZE, [sq], [q])
    y = m.tensor("output", [1, 8])
    m.op(op.DEQUANTIZE, [q], [y])
    path.write_bytes(m.finish([x], [y]))


def make_custom_op_tflite(path: Path) -> None:
    rng = np.random.default_rng(3)
    m = _TfliteBuilder()
    c = _conv_front(m, rng)
    y = m.tensor("custom/out", [1, 8, 8, 4])
    m.op(tflite.BuiltinOperator.CUSTOM, [c], [y], custom="QcvTestCustom",
         custom_options=bytes(range(7)) + b"qconvert")
    path.write_bytes(m.finish([0], [y]))


def copy_digits_calibration(directory: Path, samples: int = 32) -> None:
    shared = HERE.parent.parent / "shared" / "models"
    for layout in ("nhwc", "nchw"):
        calib = np.load(shared / f"digits_data_{layout}.npz")["calib"][:samples]
        np.save(directory / f"digits_calib_{layout}.npy", calib.astype(np.float32))


if __name__ == "__main__":
    make_opaque_onnx(HERE / "opaque_ops.onnx")
    make_unknown_builtin_tflite(HERE / "unknown_builtin.tflite")
    make_custom_op_tflite(HERE / "custom_op.tflite")
    make_all_ops_tflite(HERE / "all_ops.tflite")
    copy_digits_calibration(HERE)
    print("wrote opaque_ops.onnx, unknown_builtin.tflite, custom_op.tflite, all_ops.tflite, "
          "digits_calib_nhwc.npy, digits_calib_nchw.npy")
