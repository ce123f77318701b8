"""Generators of long-chain models for the scaling benchmark and the scaling tests.

Each builds its file with the format's own library (onnx.helper; the `tflite` package's
flatbuffer builders), never with qconvert, so a slow or wrong qconvert writer cannot hide a slow
or wrong reader:

- `onnx_chain(op, n)`: x [1, 2, 4, 4] -> n nodes of `op` (Identity, Relu...) -> y;
- `onnx_fusion_chain(blocks)`: blocks of Conv(1x1) -> Mul(per-channel) -> Add(per-channel) ->
  BatchNormalization -> Relu, 5 nodes each, everything the fusion passes act on;
- `tflite_chain(op, n)`: x [1, 4, 4, 2] -> n builtin ops (RELU...) -> y.

    python bench/chain_models.py onnx-relu 200000 out.onnx
"""

from __future__ import annotations

import sys

import numpy as np

CHANNELS = 2


def _onnx_model(nodes, inits, shape=(1, CHANNELS, 4, 4)) -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    g = helper.make_graph(nodes, "chain", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def _names(n: int) -> list:
    """Tensor names x, t1, ..., t(n-1), y along a chain of n nodes."""
    return ["x"] + [f"t{i}" for i in range(1, n)] + ["y"]


def onnx_chain(op: str, n: int) -> bytes:
    """An ONNX model: a chain of `n` single-input nodes of `op` on a [1, 2, 4, 4] float input."""
    from onnx import NodeProto

    names = _names(n)
    nodes = []
    for i in range(n):
        node = NodeProto()
        node.op_type, node.name = op, f"n{i}"
        node.input.append(names[i])
        node.output.append(names[i + 1])
        nodes.append(node)
    return _onnx_model(nodes, [])


def onnx_fusion_chain(blocks: int, seed: int = 0) -> bytes:
    """An ONNX model of `blocks` x (Conv 1x1 -> Mul -> Add -> BatchNormalization -> Relu)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    c = CHANNELS
    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    x = "x"
    for b in range(blocks):
        p = f"b{b}_"
        w = const(p + "w", rng.standard_normal((c, c, 1, 1)) * 0.5)
        nodes.append(helper.make_node("Conv", [x, w], [p + "conv"], name=p + "conv",
                                      kernel_shape=[1, 1]))
        nodes.append(helper.make_node("Mul", [p + "conv", const(p + "k", rng.uniform(0.5, 1.5, (c, 1, 1)))],
                                      [p + "mul"], name=p + "mul"))
        nodes.append(helper.make_node("Add", [p + "mul", const(p + "a", rng.standard_normal((c, 1, 1)))],
                                      [p + "add"], name=p + "add"))
        bn = [const(p + s, v) for s, v in (("g", rng.uniform(0.5, 1.5, c)), ("be", rng.standard_normal(c)),
                                           ("m", rng.standard_normal(c)), ("v", rng.uniform(0.5, 1.5, c)))]
        nodes.append(helper.make_node("BatchNormalization", [p + "add", *bn], [p + "bn"], name=p + "bn"))
        out = "y" if b == blocks - 1 else p + "relu"
        nodes.append(helper.make_node("Relu", [p + "bn"], [out], name=p + "relu"))
        x = out
    return _onnx_model(nodes, inits)


def tflite_chain(op: str, n: int) -> bytes:
    """A TFLite model: a chain of `n` builtin `op` nodes (no options) on a [1, 4, 4, 2] input."""
    import flatbuffers
    import tflite

    code = getattr(tflite.BuiltinOperator, op)
    b = flatbuffers.Builder(1024 + 96 * n)
    names = _names(n)

    def int_vector(start, values):
        start(b, len(values))
        for v in reversed(values):
            b.PrependInt32(v)
        return b.EndVector()

    def offsets(start, items):
        start(b, len(items))
        for off in reversed(items):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    shape = [1, 4, 4, CHANNELS]
    tensors = []
    for name in names:
        s = b.CreateString(name)
        sh = int_vector(tflite.TensorStartShapeVector, shape)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, sh)
        tflite.TensorAddType(b, tflite.TensorType.FLOAT32)
        tflite.TensorAddBuffer(b, 0)
        tflite.TensorAddName(b, s)
        tensors.append(tflite.TensorEnd(b))
    ops = []
    for i in range(n):
        ins = int_vector(tflite.OperatorStartInputsVector, [i])
        outs = int_vector(tflite.OperatorStartOutputsVector, [i + 1])
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, 0)
        tflite.OperatorAddInputs(b, ins)
        tflite.OperatorAddOutputs(b, outs)
        ops.append(tflite.OperatorEnd(b))
    tvec = offsets(tflite.SubGraphStartTensorsVector, tensors)
    ovec = offsets(tflite.SubGraphStartOperatorsVector, ops)
    gin = int_vector(tflite.SubGraphStartInputsVector, [0])
    gout = int_vector(tflite.SubGraphStartOutputsVector, [n])
    gname = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tvec)
    tflite.SubGraphAddInputs(b, gin)
    tflite.SubGraphAddOutputs(b, gout)
    tflite.SubGraphAddOperators(b, ovec)
    tflite.SubGraphAddName(b, gname)
    graph = tflite.SubGraphEnd(b)
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, 1)
    opcode = tflite.OperatorCodeEnd(b)
    tflite.BufferStart(b)
    empty = tflite.BufferEnd(b)
    codes = offsets(tflite.ModelStartOperatorCodesVector, [opcode])
    graphs = offsets(tflite.ModelStartSubgraphsVector, [graph])
    buffers = offsets(tflite.ModelStartBuffersVector, [empty])
    desc = b.CreateString("qconvert scaling chain")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes)
    tflite.ModelAddSubgraphs(b, graphs)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, buffers)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


GENERATORS = {
    "onnx-identity": lambda n: onnx_chain("Identity", n),
    "onnx-relu": lambda n: onnx_chain("Relu", n),
    "onnx-fusion": lambda n: onnx_fusion_chain(max(1, n // 5)),
    "tflite-relu": lambda n: tflite_chain("RELU", n),
}


if __name__ == "__main__":
    kind, size, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(path, "wb") as f:
        f.write(GENERATORS[kind](size))
