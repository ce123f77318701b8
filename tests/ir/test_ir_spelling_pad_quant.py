"""One IR spelling for Pad's pads, Quantize / Dequantize parameters and Shape's out_type.

- Pad: ONNX's flat pads [begins..., ends...] (an initializer, a Constant node, computed in the
  graph, shared with another op; opset 11 and opset 18 `axes`) and TFLite's PAD / PADV2
  paddings [rank, 2] read to one spelling, rows [k, 2]; written back, every node and
  initializer is the source's; onnxruntime / LiteRT compute what the float executor computes.
- Quantize / Dequantize: ONNX's scale / zero-point inputs and TFLite's tensor quantization
  reach the kernel in one form (the inputs); rounding is the IR's `rounding`; nothing new is
  written; the float executor agrees bit for bit with onnxruntime and LiteRT at the rounding
  ties.
- Shape: `out_type` is a dtype name (TFLite's code, ONNX's int64), written back as the code.
- The kernels of these ops do not look at the format: no `ctx`, no rank test of the pads; a
  scan of passes/, executor, int8, c_export and quant finds no code that tells the formats'
  spellings of these ops apart (`format_branches`, itself tested on code that does).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import litert_invoke, run_litert, run_onnx
from qconvert.executor.float_executor import run_float
from qconvert.ir import Graph, Model, Node, QuantParams, Tensor
from qconvert.formats.model_io import load_model, serialize

F32 = TensorProto.FLOAT


def _onnx_pad(shape, pads, mode="constant", value=None, opset=11, axes=None,
              constant_node=False) -> bytes:
    """x -> Pad -> y, pads (and value / axes) as initializers or Constant nodes."""
    rank = len(shape)
    inits, nodes = [], []

    def const(name, array):
        if constant_node:
            nodes.append(helper.make_node("Constant", [], [name],
                                          value=numpy_helper.from_array(array, name)))
        else:
            inits.append(numpy_helper.from_array(array, name))

    const("pads", np.array(pads, np.int64))
    inputs = ["x", "pads"]
    if value is not None:
        const("value", np.array(value, np.float32))
        inputs.append("value")
    if axes is not None:
        if value is None:
            inputs.append("")
        const("axes", np.array(axes, np.int64))
        inputs.append("axes")
    nodes.append(helper.make_node("Pad", inputs, ["y"], mode=mode))
    g = helper.make_graph(nodes, "pad", [helper.make_tensor_value_info("x", F32, shape)],
                          [helper.make_tensor_value_info("y", F32, None)], inits)
    del rank
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8).SerializeToString()


# (shape, flat ONNX pads, mode, value, opset, axes) -> rows the IR holds
PAD_CASES = [
    ((2, 5), [1, 0, 2, 3], "constant", None, 11, None, [[1, 2], [0, 3]]),
    ((1, 3, 4), [0, 1, 2, 0, 2, 1], "constant", 1.5, 13, None, [[0, 0], [1, 2], [2, 1]]),
    ((1, 2, 4, 5), [0, 0, 1, 2, 0, 0, 3, 1], "reflect", None, 13, None,
     [[0, 0], [0, 0], [1, 3], [2, 1]]),
    ((1, 2, 3, 3), [0, 0, 2, 1, 0, 0, 1, 2], "edge", None, 11, None,
     [[0, 0], [0, 0], [2, 1], [1, 2]]),
    ((1, 2, 4, 5), [1, 2, 3, 0], "constant", -2.0, 18, [2, -1], [[1, 3], [2, 0]]),
    ((1, 2, 4, 5), [0, 1, 0, 2], "wrap", None, 19, [1, 3], [[0, 0], [1, 2]]),
    ((1, 3, 6), [0, 0, -1, 0, 1, -2], "constant", None, 13, None, [[0, 0], [0, 1], [-1, -2]]),
]


def _pad_node(model):
    return next(n for n in model.graph.nodes if n.op == "Pad")


def _assert_written_as_source(source: bytes, written: bytes) -> None:
    """Node for node and initializer for initializer, the written model is the source
    (Constant nodes become initializers of the same name and value)."""
    src, out = onnx.load_from_string(source).graph, onnx.load_from_string(written).graph
    nodes = [n for n in src.node if n.op_type != "Constant"]
    assert [(n.op_type, list(n.input), list(n.output)) for n in out.node] == \
        [(n.op_type, list(n.input), list(n.output)) for n in nodes]
    for a, b in zip(nodes, out.node):
        assert list(a.attribute) == list(b.attribute)
    want = {t.name: numpy_helper.to_array(t) for t in src.initializer}
    want.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in src.node
                 if n.op_type == "Constant"})
    got = {t.name: numpy_helper.to_array(t) for t in out.initializer}
    assert got.keys() == want.keys()
    for name, array in want.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        np.testing.assert_array_equal(got[name], array)


@pytest.mark.parametrize("shape,pads,mode,value,opset,axes,rows", PAD_CASES)
@pytest.mark.parametrize("constant_node", [False, True])
def test_onnx_pads_read_as_rows_and_write_back(tmp_path, shape, pads, mode, value, opset, axes,
                                               rows, constant_node):
    source = _onnx_pad(shape, pads, mode, value, opset, axes, constant_node)
    path = tmp_path / "pad.onnx"
    path.write_bytes(source)
    model = load_model(str(path))
    node = _pad_node(model)
    g = model.graph
    assert g.constant(node.inputs[1]).tolist() == rows
    assert node.attrs["mode"] == mode
    written = serialize(model, "onnx")
    _assert_written_as_source(source, written)
    again = tmp_path / "again.onnx"
    again.write_bytes(written)
    assert serialize(load_model(str(again)), "onnx") == written  # a fixpoint
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = run_float(model, {"x": x})["y"]
    import onnxruntime as ort

    want = ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None,
                                                                               {"x": x})[0]
    np.testing.assert_array_equal(got, want)


def test_onnx_pads_shared_with_another_op_keep_their_initializer(tmp_path):
    """pads read by two Pads and by an Add: the Pads read a converted copy; written back, the
    model has the one initializer and every node as in the source."""
    pads = numpy_helper.from_array(np.array([0, 1, 0, 2], np.int64), "pads")
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p1"]),
             helper.make_node("Pad", ["p1", "pads"], ["p2"], mode="edge"),
             helper.make_node("Add", ["pads", "pads"], ["twice"])]
    g = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", F32, [2, 3])],
                          [helper.make_tensor_value_info("p2", F32, [2, 9]),
                           helper.make_tensor_value_info("twice", TensorProto.INT64, [4])],
                          [pads])
    source = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                               ir_version=8).SerializeToString()
    path = tmp_path / "shared.onnx"
    path.write_bytes(source)
    model = load_model(str(path))
    pad_nodes = [n for n in model.graph.nodes if n.op == "Pad"]
    assert pad_nodes[0].inputs[1] == pad_nodes[1].inputs[1] != "pads"
    assert model.graph.constant(pad_nodes[0].inputs[1]).tolist() == [[0, 0], [1, 2]]
    assert model.graph.constant("pads").tolist() == [0, 1, 0, 2]
    _assert_written_as_source(source, serialize(model, "onnx"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = run_float(model, {"x": x})
    import onnxruntime as ort

    want = ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got["p2"], want[0])
    np.testing.assert_array_equal(got["twice"], want[1])


def _computed_pads_model() -> bytes:
    """pads computed in the graph: Concat of the begins and the ends (an input decides one)."""
    begins = numpy_helper.from_array(np.array([0, 1], np.int64), "begins")
    nodes = [helper.make_node("Concat", ["begins", "ends"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"])]
    g = helper.make_graph(nodes, "computed",
                          [helper.make_tensor_value_info("x", F32, [2, 3]),
                           helper.make_tensor_value_info("ends", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", F32, None)], [begins])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def test_computed_onnx_pads_become_rows_in_the_graph_and_are_written_as_they_were(tmp_path):
    import onnxruntime as ort

    source = _computed_pads_model()
    path = tmp_path / "computed.onnx"
    path.write_bytes(source)
    model = load_model(str(path))
    ops = [n.op for n in model.graph.nodes]
    assert ops == ["Concat", "Reshape", "Transpose", "Pad"]
    from qconvert.formats.layer_table import layers

    assert [row["op"] for row in layers(model)] == ["Concat", "Pad"]  # inspect: the file's
    from click.testing import CliRunner

    from qconvert.cli.app import main

    result = CliRunner().invoke(main, ["fuse", str(path), "-o", str(tmp_path / "f.onnx")])
    assert result.exit_code == 0 and "nodes: 2 -> 2" in result.output, result.output
    _assert_written_as_source(source, serialize(model, "onnx"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ends = np.array([2, 3], np.int64)
    got = run_float(model, {"x": x, "ends": ends})["y"]
    want = ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "ends": ends})[0]
    assert got.shape == (4, 7)
    np.testing.assert_array_equal(got, want)


def test_computed_rows_without_their_pair_are_refused_by_the_onnx_writer(tmp_path):
    """Must not fire silently: when the Reshape / Transpose pair is gone (here replaced by a
    plain Transpose), the Pad would read rows where ONNX reads flat pads: the writer refuses."""
    from qconvert.errors import QConvertError
    from qconvert.formats.onnx_writer import write_onnx

    path = tmp_path / "computed.onnx"
    path.write_bytes(_computed_pads_model())
    model = load_model(str(path))
    for n in model.graph.nodes:
        n.origin.pop("pads_spelling", None)
    model.graph.invalidate_uses()
    with pytest.raises(QConvertError, match="rows computed in the graph"):
        write_onnx(model)


def _tflite_pad(paddings: np.ndarray, value=None, shape=(1, 4, 5, 3)) -> bytes:
    """x -> PAD (PADV2 with `value`) -> y, written by qconvert from an IR graph."""
    g = Graph("main")
    g.add_tensor(Tensor("x", shape, "float32"))
    paddings = np.asarray(paddings)
    out = tuple(d + int(b) + int(e) for d, (b, e) in zip(shape, paddings.tolist()))
    g.add_tensor(Tensor("y", out, "float32"))
    g.add_tensor(Tensor("paddings", paddings.shape, str(paddings.dtype), paddings))
    inputs, op = ["x", "paddings"], "Pad"
    if value is not None:
        g.add_tensor(Tensor("value", (1,), "float32", np.array([value], np.float32)))
        inputs, op = inputs + ["value"], "PadV2"
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes.append(Node(op, inputs, ["y"], {}, "y"))
    return serialize(Model("tflite", [g]))


@pytest.mark.parametrize("paddings,value,shape", [
    (np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32), None, (1, 4, 5, 3)),
    (np.array([[0, 0], [0, 3], [1, 1]], np.int64), -1.5, (1, 4, 3)),
    (np.array([[2, 1], [0, 2]], np.int32), 0.25, (3, 2)),
])
def test_tflite_paddings_are_the_ir_rows_and_match_onnx(tmp_path, paddings, value, shape):
    """A TFLite PAD / PADV2 reads to the IR an ONNX Pad of the same padding reads to (rows,
    value, mode); LiteRT, onnxruntime and the float executor agree; written back, the same
    bytes."""
    data = _tflite_pad(paddings, value, shape)
    path = tmp_path / "pad.tflite"
    path.write_bytes(data)
    model = load_model(str(path))
    node = model.graph.nodes[0]
    rows = model.graph.constant(node.inputs[1])
    assert rows.tolist() == paddings.tolist()
    assert serialize(model, "tflite") == data
    flat = list(paddings[:, 0]) + list(paddings[:, 1])
    onnx_path = tmp_path / "pad.onnx"
    onnx_source = _onnx_pad(shape, flat, value=value, opset=13)
    onnx_path.write_bytes(onnx_source)
    onnx_model = load_model(str(onnx_path))
    onnx_node = _pad_node(onnx_model)
    assert onnx_model.graph.constant(onnx_node.inputs[1]).tolist() == rows.tolist()
    assert onnx_node.attrs == node.attrs == {"mode": "constant"}
    if value is not None:
        assert onnx_model.graph.constant(onnx_node.inputs[2]).reshape(-1).tolist() == \
            model.graph.constant(node.inputs[2]).reshape(-1).tolist()
    want = run_litert(data)[0]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(run_float(model, {"x": x})["y"],
                                  run_float(onnx_model, {"x": x})["y"])
    np.testing.assert_array_equal(run_onnx(onnx_source)[0], want)
    from helpers.oracles import random_inputs

    x = random_inputs([(shape, np.float32)])[0]
    np.testing.assert_array_equal(run_float(model, {"x": x})["y"], want)


def test_pad_models_convert_to_tflite_that_litert_runs_as_onnxruntime(tmp_path):
    """ONNX Pads of several ranks, values and axes convert to PAD / PADV2 whose paddings are
    the IR rows in NHWC order; LiteRT runs them as onnxruntime runs the source."""
    from click.testing import CliRunner

    from qconvert.cli.app import main

    converted = 0
    for i, (shape, pads, mode, value, opset, axes, _) in enumerate(PAD_CASES):
        if mode != "constant" or min(pads) < 0:
            continue
        src = tmp_path / f"p{i}.onnx"
        src.write_bytes(_onnx_pad(shape, pads, mode, value, opset, axes))
        out = tmp_path / f"p{i}.tflite"
        result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out)])
        assert result.exit_code == 0, result.output
        x = np.random.default_rng(i).standard_normal(shape).astype(np.float32)
        import onnxruntime as ort
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        want = ort.InferenceSession(src.read_bytes(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        it = Interpreter(model_content=out.read_bytes(),
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        nhwc = tuple(it.get_input_details()[0]["shape"]) != shape
        it.set_tensor(it.get_input_details()[0]["index"], np.moveaxis(x, 1, -1) if nhwc else x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_array_equal(np.moveaxis(got, -1, 1) if nhwc else got, want)
        converted += 1
    assert converted == 3


# -- Shape --------------------------------------------------------------------------------------
def _tflite_shape(out_type: str) -> bytes:
    g = Graph("main")
    g.add_tensor(Tensor("x", (1, 4, 5, 3), "float32"))
    g.add_tensor(Tensor("s", (4,), out_type))
    g.inputs, g.outputs = ["x"], ["s"]
    g.nodes.append(Node("Shape", ["x"], ["s"], {"out_type": out_type}, "s"))
    return serialize(Model("tflite", [g]))


@pytest.mark.parametrize("out_type,code", [("int32", 2), ("int64", 4)])
def test_shape_out_type_is_a_dtype_name(tmp_path, out_type, code):
    """TFLite SHAPE's out_type code is the dtype name in the IR, the code again when written
    (read with the `tflite` package); ONNX Shape reads as int64 and writes no attribute;
    LiteRT and the float executor give the same values and type."""
    import tflite

    data = _tflite_shape(out_type)
    op = tflite.Model.GetRootAs(data, 0).Subgraphs(0).Operators(0)
    options = tflite.ShapeOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    assert options.OutType() == code
    path = tmp_path / "shape.tflite"
    path.write_bytes(data)
    model = load_model(str(path))
    assert model.graph.nodes[0].attrs == {"out_type": out_type}
    assert serialize(model, "tflite") == data
    want = run_litert(data)[0]
    got = run_float(model, {"x": np.zeros((1, 4, 5, 3), np.float32)})["s"]
    assert got.dtype == want.dtype == np.dtype(out_type)
    np.testing.assert_array_equal(got, want)

    node = helper.make_node("Shape", ["x"], ["s"])
    gr = helper.make_graph([node], "shape", [helper.make_tensor_value_info("x", F32, [1, 3, 4])],
                           [helper.make_tensor_value_info("s", TensorProto.INT64, [3])])
    source = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)],
                               ir_version=8).SerializeToString()
    onnx_path = tmp_path / "shape.onnx"
    onnx_path.write_bytes(source)
    onnx_model = load_model(str(onnx_path))
    assert onnx_model.graph.nodes[0].attrs == {"start": 0, "out_type": "int64"}
    _assert_written_as_source(source, serialize(onnx_model, "onnx"))


def test_onnx_writer_refuses_a_shape_it_cannot_spell(tmp_path):
    """An IR Shape giving int32 (read from TFLite) has no ONNX spelling: the writer says so
    (the CLI has no TFLite -> ONNX route; the writer still holds the IR's contract)."""
    from qconvert.errors import QConvertError
    from qconvert.formats.onnx_writer import write_onnx

    path = tmp_path / "shape.tflite"
    path.write_bytes(_tflite_shape("int32"))
    model = load_model(str(path))
    with pytest.raises(QConvertError, match="out_type int32 has no ONNX spelling"):
        write_onnx(model)


# -- Quantize / Dequantize ----------------------------------------------------------------------
# x / 0.5 at these values: -2.5, -1.5, -0.5, 0.5, 1.5, 2.5 (ties), 7.2 and far beyond the range
TIES = np.array([[-1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 3.6, 400.0]], np.float32)


def _tflite_qdq(zero=-3) -> bytes:
    """x -> QUANTIZE (int8, scale 0.5) -> q -> DEQUANTIZE -> y; q is an output too."""
    g = Graph("main")
    g.add_tensor(Tensor("x", (1, 8), "float32"))
    g.add_tensor(Tensor("q", (1, 8), "int8",
                        quant=QuantParams(np.array([0.5], np.float32), np.array([zero]))))
    g.add_tensor(Tensor("y", (1, 8), "float32"))
    g.inputs, g.outputs = ["x"], ["y", "q"]
    g.nodes += [Node("Quantize", ["x"], ["q"], {}, "q", origin={"version": 1}),
                Node("Dequantize", ["q"], ["y"], {}, "y", origin={"version": 1})]
    return serialize(Model("tflite", [g]))


def _onnx_qdq(zero=-3) -> bytes:
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
             numpy_helper.from_array(np.array(zero, np.int8), "zero")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"])]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", F32, [1, 8])],
                          [helper.make_tensor_value_info("y", F32, [1, 8]),
                           helper.make_tensor_value_info("q", TensorProto.INT8, [1, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def test_quantize_parameters_reach_the_kernel_in_one_form(tmp_path):
    """A TFLite QUANTIZE / DEQUANTIZE pair and its ONNX twin: the kernels get the same scale and
    zero point inputs (the TFLite ones from the tensors' quantization); only `rounding` tells
    the two ops apart. Bit for bit, the float executor computes what LiteRT computes for the
    TFLite model (half away from zero at the ties) and what onnxruntime computes for the ONNX
    one (half to even); written back, each file is the same bytes (TFLite: no new input or
    tensor) / the same nodes and initializers."""
    import onnxruntime as ort

    from qconvert.executor.float_kernels import implied_inputs

    data = _tflite_qdq()
    path = tmp_path / "qdq.tflite"
    path.write_bytes(data)
    model = load_model(str(path))
    assert serialize(model, "tflite") == data
    source = _onnx_qdq()
    onnx_path = tmp_path / "qdq.onnx"
    onnx_path.write_bytes(source)
    onnx_model = load_model(str(onnx_path))
    _assert_written_as_source(source, serialize(onnx_model, "onnx"))

    g, og = model.graph, onnx_model.graph
    x = TIES
    for tfl, onx in zip(g.nodes, og.nodes):
        assert tfl.op == onx.op and len(tfl.inputs) == 1 and len(onx.inputs) == 3
        got = implied_inputs(g, tfl, [x])
        want = [og.constant(i) for i in onx.inputs[1:]]
        for a, b in zip(got[1:], want):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()
    assert g.nodes[0].attrs == {"rounding": "half_away_from_zero"}
    assert "rounding" not in og.nodes[0].attrs

    ours = run_float(model, {"x": x})
    litert = dict(zip(("y", "q"), litert_invoke(data, [x])))
    assert litert["q"].tolist() == [[-6, -5, -4, -2, -1, 0, 4, 127]]  # half away from zero
    for name in ("q", "y"):
        assert ours[name].dtype == litert[name].dtype
        np.testing.assert_array_equal(ours[name], litert[name])
    ours = run_float(onnx_model, {"x": x}, keep=["q"])
    sess = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    want = dict(zip(("y", "q"), sess.run(None, {"x": x})))
    assert want["q"].tolist() == [[-5, -5, -3, -3, -1, -1, 4, 127]]  # half to even
    for name in ("q", "y"):
        np.testing.assert_array_equal(ours[name], want[name])


def test_tflite_micro_runs_the_pair_as_the_float_executor(tmp_path):
    """TFLite Micro's QUANTIZE / DEQUANTIZE give, bit for bit, what the float executor gives
    for the same TFLite model."""
    from tflite_micro.python.tflite_micro import runtime

    data = _tflite_qdq(zero=5)
    path = tmp_path / "qdq.tflite"
    path.write_bytes(data)
    ours = run_float(load_model(str(path)), {"x": TIES})
    it = runtime.Interpreter.from_bytes(data)
    it.set_input(TIES, 0)
    it.invoke()
    np.testing.assert_array_equal(np.array(it.get_output(0)), ours["y"])
    np.testing.assert_array_equal(np.array(it.get_output(1)), ours["q"])


def test_per_channel_tflite_dequantize_reads_its_axis(tmp_path):
    """DEQUANTIZE of int8 weights quantized along axis 0 (3 scales): the IR's `axis` is the
    quantized dimension, the kernel gets one scale and zero point per channel, LiteRT agrees;
    written back, the same bytes."""
    g = Graph("main")
    w = np.array([[-128, 5], [7, 127], [0, -3]], np.int8)
    scales, zeros = np.array([0.5, 0.25, 2.0], np.float32), np.array([0, 0, 0])
    g.add_tensor(Tensor("w", (3, 2), "int8", w, quant=QuantParams(scales, zeros, axis=0)))
    g.add_tensor(Tensor("wf", (3, 2), "float32"))
    g.add_tensor(Tensor("x", (3, 2), "float32"))
    g.add_tensor(Tensor("y", (3, 2), "float32"))
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes += [Node("Dequantize", ["w"], ["wf"], {}, "wf", origin={"version": 2}),
                Node("Add", ["x", "wf"], ["y"], {"activation": "NONE"}, "y")]
    data = serialize(Model("tflite", [g]))
    path = tmp_path / "pc.tflite"
    path.write_bytes(data)
    model = load_model(str(path))
    assert model.graph.nodes[0].attrs == {"axis": 0}
    assert serialize(model, "tflite") == data
    x = np.zeros((3, 2), np.float32)
    want = litert_invoke(data, [x])[0]
    np.testing.assert_array_equal(want, w * scales[:, None])
    np.testing.assert_array_equal(run_float(model, {"x": x})["y"], want)


def test_onnx_writer_refuses_tflite_rounding():
    from qconvert.errors import QConvertError
    from qconvert.formats.onnx_writer import write_onnx
    from qconvert.formats.tflite_reader import read_tflite

    with pytest.raises(QConvertError, match="rounding half_away_from_zero has no ONNX spelling"):
        write_onnx(read_tflite(_tflite_qdq()))


# -- no format test in the kernels of these ops ---------------------------------------------------
def _kernel_tree(op: str) -> ast.AST:
    from qconvert.executor.float_kernels import KERNELS

    fn = KERNELS[op]
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body.pop(0)  # the docstring may name the formats
    return tree


@pytest.mark.parametrize("op", ["Pad", "PadV2", "Quantize", "Dequantize", "Shape"])
def test_kernels_of_respelled_ops_do_not_look_at_the_format(op):
    """The kernel reads the IR spelling only: no `ctx` (tensor quantization), no rank test of
    the pads, no declared output type (Shape's is `out_type`), no word of either format."""
    from qconvert.executor.float_kernels import CONTEXT_KERNELS

    assert op not in CONTEXT_KERNELS
    tree = _kernel_tree(op)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    args = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    assert "ctx" not in names | args
    if op == "Shape":
        assert "out_dtypes" not in names
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr == "ndim":
            assert not (isinstance(n.value, ast.Name) and n.value.id == "pads"), op
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            assert "tflite" not in n.value.lower() and "onnx" not in n.value.lower(), n.value
    assert len(names) > 5  # the scan saw the function


def test_pads_initializer_that_is_a_graph_input_keeps_its_flat_declaration(tmp_path):
    """An initializer listed as a graph input too (a default a caller may override) keeps its
    flat values and declaration; the Pad reads a converted copy; written back, the model is the
    source (its graph inputs included)."""
    source_model = onnx.load_from_string(_onnx_pad((2, 5), [1, 0, 2, 3], opset=13))
    source_model.graph.input.append(helper.make_tensor_value_info("pads", TensorProto.INT64, [4]))
    source = source_model.SerializeToString()
    path = tmp_path / "pads_input.onnx"
    path.write_bytes(source)
    model = load_model(str(path))
    node = _pad_node(model)
    assert node.inputs[1] != "pads" and model.graph.constant("pads").tolist() == [1, 0, 2, 3]
    assert model.graph.constant(node.inputs[1]).tolist() == [[1, 2], [0, 3]]
    written = serialize(model, "onnx")
    _assert_written_as_source(source, written)
    assert onnx.load_from_string(written).graph.input == source_model.graph.input


# -- no format branch on these ops anywhere past the readers ----------------------------------------
SCANNED = ["passes", "qconvert/executor", "qconvert/int8", "qconvert/c_export", "qconvert/quant"]


def _pads_name(node) -> bool:
    return isinstance(node, ast.Name) and "pad" in node.id.lower()


def format_branches(source: str) -> list:
    """(line, what) of the code in `source` that tells the formats' spellings of these ops
    apart: a rank test of pads (`pads.ndim`, `len(pads.shape)`), pads reshaped to or from
    pairs (`pads.reshape(-1, 2)`), Shape's `out_type` compared with a type code, a tensor's
    quantization read next to a Quantize / Dequantize op name in one function."""
    found = []
    tree = ast.parse(source)
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr == "ndim" and _pads_name(n.value):
            found.append((n.lineno, "rank test of pads"))
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len"
                and n.args and isinstance(n.args[0], ast.Attribute)
                and n.args[0].attr == "shape" and _pads_name(n.args[0].value)):
            found.append((n.lineno, "rank test of pads"))
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "reshape" and _pads_name(n.func.value)
                and any(isinstance(a, ast.Constant) and a.value == 2 for a in n.args)):
            found.append((n.lineno, "pads reshaped to pairs"))
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            text = [ast.unparse(s) for s in sides]
            if any("out_type" in t for t in text) and any(
                    isinstance(s, ast.Constant) and isinstance(s.value, int) for s in sides):
                found.append((n.lineno, "out_type compared with a code"))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = ast.unparse(n)
            if (("'Quantize'" in body or "'Dequantize'" in body)
                    and re.search(r"\.(in_quant|out_quant|input_quant|output_quant)\b", body)):
                found.append((n.lineno, f"{n.name}: tensor quantization beside Quantize"))
    return found


def test_format_scan_finds_each_kind_of_branch():
    """The scan fires on each pattern it looks for (the Pad kernel's rank test and the
    Quantize kernel's tensor quantization are what the kernels did before), and not on the
    IR spelling."""
    bad = textwrap.dedent('''
        def pad(node, inputs, out_dtypes):
            pads = inputs[1]
            if pads.ndim == 2:
                pass
            if len(paddings.shape) == 1:
                pass
            rows = pads.reshape(-1, 2)
            if node.attrs["out_type"] == 2:
                pass

        @kernel("Quantize", context=True)  # the kernels' form before the one spelling
        def quantize(node, inputs, out_dtypes, ctx=None):
            scale = inputs[1] if len(inputs) > 1 else None
            if scale is None:
                q = ctx.out_quant(0)
    ''')
    assert sorted(what for _, what in format_branches(bad)) == [
        "out_type compared with a code", "pads reshaped to pairs",
        "quantize: tensor quantization beside Quantize", "rank test of pads",
        "rank test of pads"]
    good = textwrap.dedent('''
        def pad(node, inputs, out_dtypes):
            pads = inputs[1]
            if pads.shape != (3, 2):
                raise ValueError(node.attrs.get("out_type") == "int32")
    ''')
    assert format_branches(good) == []


def test_no_pass_or_kernel_branches_on_the_format_of_these_ops():
    import qconvert

    root = Path(qconvert.__file__).resolve().parent.parent
    files = [p for folder in SCANNED for p in sorted((root / folder).rglob("*.py"))]
    assert len(files) > 60  # the scan saw the packages
    found = [f"{p.relative_to(root)}:{line}: {what}" for p in files
             for line, what in format_branches(p.read_text())]
    assert found == []
