"""The `fold-constants` pass: PyTorch-style shape arithmetic, Cast, ConstantOfShape and weight
arithmetic fold into constants, with outputs unchanged in onnxruntime (its optimizations off) and
LiteRT; it must not fire on dynamic shapes, non-constant inputs, opaque ops, graph outputs,
oversized results, Dequantize, quantized tensors or results that contradict the declared tensor.
The kernels it uses are checked one by one against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import all_model_paths, run_litert, run_onnx
from qconvert.executor.float_kernels import KERNELS
from qconvert.ir import Graph, Model, Node, QuantParams, Tensor
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext, run_passes
from qconvert.passes.cleanup.fold_constants import MAX_FOLD_ELEMENTS

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _load(tmp_path, data):
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    return load_model(path)


def _assert_same(before, after):
    assert len(before) == len(after)
    for a, b in zip(before, after):
        assert a.shape == b.shape and a.dtype == b.dtype
        if a.dtype.kind == "f":
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(b, a)


def _fold(tmp_path, data):
    """Run fold-constants + eliminate; compare outputs before/after in onnxruntime."""
    model = _load(tmp_path, data)
    counts = run_passes(model, ["fold-constants", "eliminate"], PassContext("onnx"))
    out = serialize(model)
    for seed in range(2):
        _assert_same(run_onnx(data, seed), run_onnx(out, seed))
    return counts["fold-constants"], model


def _ops(model):
    return [n.op for n in model.graph.nodes]


# -- fires ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [11, 13, 17])
def test_pytorch_reshape_chain_folds_entirely(tmp_path, opset):
    """x -> Shape -> Gather(0) -> Unsqueeze -> Concat([.., -1]) -> Reshape(x, ..)."""
    unsq = (helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]) if opset >= 13
            else helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             unsq,
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    inits = [("zero", np.array(0, np.int64)), ("minus1", np.array([-1], np.int64))]
    if opset >= 13:
        inits.append(("axes0", np.array([0], np.int64)))
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [2, 3, 4, 5])], [_vi("y", [2, 60])],
                                          inits, opset))
    assert count == 4 and _ops(model) == ["Reshape", "Relu"]
    shape = model.graph.tensors["shape"]
    np.testing.assert_array_equal(shape.data, [2, -1])
    assert shape.dtype == "int64" and shape.shape == (2,) and not shape.data.flags.writeable
    assert set(model.graph.tensors) == {"x", "shape", "r", "y"}, "eliminate dropped the rest"


def test_shape_with_start_end_and_cast(tmp_path):
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),  # [3, 4]
             helper.make_node("Cast", ["s"], ["sf"], to=F),
             helper.make_node("Add", ["x", "sf"], ["y"])]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [2, 3, 4, 2])], [_vi("y", [2, 3, 4, 2])],
                                          opset=17))
    # Add of [2,3,4,2] and [2]: broadcast over the last axis
    assert count == 2 and _ops(model) == ["Add"]
    np.testing.assert_array_equal(model.graph.tensors["sf"].data, np.array([3, 4], np.float32))


def test_cast_and_integer_div_truncates_toward_zero(tmp_path):
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]),
             helper.make_node("Cast", ["q"], ["qf"], to=F),
             helper.make_node("Add", ["x", "qf"], ["y"])]
    inits = [("a", np.array([-7, 7, -8, 9, 6], np.int64)),
             ("b", np.array([2, -2, 3, 4, -3], np.int64))]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [5])], [_vi("y", [5])], inits))
    assert count == 2 and _ops(model) == ["Add"]
    np.testing.assert_array_equal(model.graph.tensors["qf"].data, [-3, -3, -2, 2, -2])


@pytest.mark.parametrize("value", [None, 2.5])
def test_constant_of_shape_folds(tmp_path, value):
    attrs = {} if value is None else {"value": numpy_helper.from_array(np.array([value], np.float32))}
    nodes = [helper.make_node("ConstantOfShape", ["shp"], ["c"], **attrs),
             helper.make_node("Mul", ["x", "c"], ["m"]),
             helper.make_node("Add", ["m", "c"], ["y"])]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [3, 4])], [_vi("y", [3, 4])],
                                          [("shp", np.array([1, 4], np.int64))]))
    assert count == 1 and _ops(model) == ["Mul", "Add"]
    c = model.graph.tensors["c"]
    assert c.dtype == "float32" and c.shape == (1, 4)
    np.testing.assert_array_equal(c.data, np.full((1, 4), value or 0.0, np.float32))


def test_weight_transpose_reshape_arithmetic_feeding_conv(tmp_path):
    rng = np.random.default_rng(0)
    hwio = rng.standard_normal((3, 3, 2, 4)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["w_hwio"], ["w_t"], perm=[3, 2, 0, 1]),
             helper.make_node("Mul", ["w_t", "w_scale"], ["w"]),
             helper.make_node("Reshape", ["b_2d", "b_shape"], ["b_flat"]),
             helper.make_node("Sub", ["b_flat", "b_off"], ["b"]),
             helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "k"], ["y"])]
    inits = [("w_hwio", hwio),
             ("w_scale", rng.uniform(0.5, 2, (4, 1, 1, 1)).astype(np.float32)),
             ("b_2d", rng.standard_normal((2, 2)).astype(np.float32)),
             ("b_shape", np.array([4], np.int64)),
             ("b_off", np.float32(0.25)),
             ("k", rng.standard_normal((4, 1, 1)).astype(np.float32))]
    data = _model(nodes, [_vi("x", [1, 2, 5, 5])], [_vi("y", [1, 4, 5, 5])], inits)
    source = _load(tmp_path, data)
    before = {name: t.data.copy() for name, t in source.graph.tensors.items() if t.data is not None}
    counts = run_passes(source, ["fold-constants"], PassContext("onnx"))
    assert counts["fold-constants"] == 4
    for name, array in before.items():  # inputs were not modified in place
        np.testing.assert_array_equal(source.graph.tensors[name].data, array)
    count, model = _fold(tmp_path, data)
    assert count == 4 and _ops(model) == ["Conv2D", "Add"]
    w = model.graph.tensors["w"]
    assert w.shape == (4, 2, 3, 3) and not w.data.flags.writeable
    assert model.graph.nodes[0].inputs == ["x", "w", "b"]


def test_range_slice_expand_and_friends_fold(tmp_path):
    """Range (float accumulation), Slice (negative step), Expand, Transpose, Flatten, Squeeze,
    Unsqueeze, Gather, Concat, Clip, Relu, Sigmoid, Tanh, Identity: one constant in the end."""
    nodes = [helper.make_node("Range", ["r0", "r1", "rd"], ["r"]),  # 8 floats
             helper.make_node("Slice", ["r", "s_start", "s_end", "s_axes", "s_step"], ["s"]),
             helper.make_node("Expand", ["s", "e_shape"], ["e"]),  # [2, 4]
             helper.make_node("Transpose", ["e"], ["t"]),  # [4, 2]
             helper.make_node("Flatten", ["t"], ["f"], axis=0),  # [1, 8]
             helper.make_node("Squeeze", ["f", "sq_axes"], ["sq"]),  # [8]
             helper.make_node("Gather", ["sq", "g_idx"], ["g"]),  # [6]
             helper.make_node("Concat", ["g", "g"], ["cc"], axis=-1),  # [12]
             helper.make_node("Clip", ["cc", "lo", "hi"], ["cl"]),
             helper.make_node("Sigmoid", ["cl"], ["sg"]),
             helper.make_node("Tanh", ["sg"], ["th"]),
             helper.make_node("Relu", ["th"], ["rl"]),
             helper.make_node("Identity", ["rl"], ["id"]),
             helper.make_node("Unsqueeze", ["id", "us_axes"], ["us"]),  # [1, 12]
             helper.make_node("Add", ["x", "us"], ["y"])]
    inits = [("r0", np.float32(0.5)), ("r1", np.float32(3.7)), ("rd", np.float32(0.4)),
             ("s_start", np.array([-1], np.int64)), ("s_end", np.array([-100], np.int64)),
             ("s_axes", np.array([0], np.int64)), ("s_step", np.array([-2], np.int64)),
             ("e_shape", np.array([2, 1], np.int64)), ("sq_axes", np.array([0], np.int64)),
             ("g_idx", np.array([0, -1, 3, 3, 5, -8], np.int64)),
             ("lo", np.float32(1.0)), ("hi", np.float32(3.0)),
             ("us_axes", np.array([-2], np.int64))]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [3, 12])], [_vi("y", [3, 12])], inits))
    assert count == 14 and _ops(model) == ["Add"]
    assert model.graph.tensors["us"].shape == (1, 12)


# -- must not fire --------------------------------------------------------------------------------
def test_shape_of_dynamic_input_does_not_fold(tmp_path):
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [("zero", np.array(0, np.int64)), ("minus1", np.array([-1], np.int64)),
             ("axes0", np.array([0], np.int64))]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", ["N", 3, 4])], [_vi("y", ["N", 12])],
                                          inits))
    assert count == 0 and _ops(model) == ["Shape", "Gather", "Unsqueeze", "Concat", "Reshape"]


def test_node_with_a_non_constant_input_does_not_fold(tmp_path):
    nodes = [helper.make_node("Concat", ["x", "c"], ["cc"], axis=0),
             helper.make_node("Mul", ["cc", "c2"], ["y"])]
    inits = [("c", np.ones(2, np.float32)), ("c2", np.float32(3.0))]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [2])], [_vi("y", [4])], inits))
    assert count == 0 and _ops(model) == ["Concat", "Mul"]


def test_opaque_node_with_constant_inputs_does_not_fold(tmp_path):
    nodes = [helper.make_node("CumSum", ["c", "axis"], ["cs"]),
             helper.make_node("Add", ["x", "cs"], ["y"])]
    inits = [("c", np.arange(4, dtype=np.float32)), ("axis", np.array(0, np.int64))]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [4])], [_vi("y", [4])], inits))
    assert model.graph.nodes[0].opaque, "CumSum must be outside the schema table for this test"
    assert count == 0 and _ops(model) == ["CumSum", "Add"]


def test_graph_output_is_not_folded(tmp_path):
    nodes = [helper.make_node("Cast", ["c"], ["cf"], to=F),
             helper.make_node("Relu", ["x"], ["y"])]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [3])], [_vi("y", [3]), _vi("cf", [3])],
                                          [("c", np.array([1, 2, 3], np.int64))]))
    assert count == 0 and _ops(model) == ["Cast", "Relu"]


@pytest.mark.parametrize("rows,folds", [(1024, True), (1025, False)])
def test_oversized_constant_of_shape_does_not_fold(tmp_path, rows, folds):
    assert rows * 1024 > MAX_FOLD_ELEMENTS or folds
    nodes = [helper.make_node("ConstantOfShape", ["shp"], ["c"]),
             helper.make_node("Add", ["x", "c"], ["y"])]
    data = _model(nodes, [_vi("x", [1, 1024])], [_vi("y", [rows, 1024])],
                  [("shp", np.array([rows, 1024], np.int64))])
    model = _load(tmp_path, data)
    count = run_passes(model, ["fold-constants"], PassContext("onnx"))["fold-constants"]
    assert count == int(folds)
    assert ("ConstantOfShape" in _ops(model)) is not folds


def test_dequantize_of_int8_weights_is_kept(tmp_path):
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
             helper.make_node("Conv", ["x", "w"], ["y"])]
    inits = [("wq", rng.integers(-127, 128, (2, 1, 1, 1)).astype(np.int8)),
             ("ws", np.float32(0.05)), ("wz", np.int8(0))]
    count, model = _fold(tmp_path, _model(nodes, [_vi("x", [1, 1, 3, 3])], [_vi("y", [1, 2, 3, 3])],
                                          inits))
    assert count == 0 and _ops(model) == ["Dequantize", "Conv2D"]


def _cast_model(tmp_path):
    nodes = [helper.make_node("Cast", ["c"], ["cf"], to=I64),
             helper.make_node("Add", ["x", "cf"], ["y"])]
    return _load(tmp_path, _model(nodes, [_vi("x", [3], I64)], [_vi("y", [3], I64)],
                                  [("c", np.array([1, 2, 3], np.int32))]))


@pytest.mark.parametrize("change", ["shape", "rank", "dtype_kind", "int_narrowing_loses"])
def test_result_contradicting_the_declared_tensor_does_not_fold(tmp_path, change):
    model = _cast_model(tmp_path)
    t = model.graph.tensors["cf"]
    if change == "shape":
        t.shape = (4,)
    elif change == "rank":
        t.shape = (1, 3)
    elif change == "dtype_kind":
        t.dtype = "float32"
    else:
        model.graph.tensors["c"].data = np.array([1, 2, 300], np.int32)
        t.dtype = "int8"
    count = run_passes(model, ["fold-constants"], PassContext("onnx"))["fold-constants"]
    assert count == 0 and _ops(model) == ["Cast", "Add"]


def test_symbolic_declared_dims_take_the_computed_value(tmp_path):
    model = _cast_model(tmp_path)
    model.graph.tensors["cf"].shape = ("n",)
    assert run_passes(model, ["fold-constants"], PassContext("onnx"))["fold-constants"] == 1
    assert model.graph.tensors["cf"].shape == (3,)


def test_integer_division_by_zero_is_left_alone(tmp_path):
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]),
             helper.make_node("Add", ["x", "q"], ["y"])]
    model = _load(tmp_path, _model(nodes, [_vi("x", [2], I64)], [_vi("y", [2], I64)],
                                   [("a", np.array([1, 2], np.int64)),
                                    ("b", np.array([1, 0], np.int64))]))
    assert run_passes(model, ["fold-constants"], PassContext("onnx"))["fold-constants"] == 0


def test_float_result_that_is_not_finite_is_left_alone(tmp_path):
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]),
             helper.make_node("Add", ["x", "q"], ["y"])]
    data = _model(nodes, [_vi("x", [2])], [_vi("y", [2])],
                  [("a", np.array([1, 2], np.float32)), ("b", np.array([1, 0], np.float32))])
    model = _load(tmp_path, data)
    assert run_passes(model, ["fold-constants"], PassContext("onnx"))["fold-constants"] == 0


@pytest.mark.parametrize("path", all_model_paths(), ids=lambda p: p.name)
def test_every_shipped_model_survives(path):
    """The pass keeps every shipped model valid (run_passes verifies it); where it folds nothing
    (today all of them: their Shape ops read a dynamic batch or are graph outputs) the written
    bytes are unchanged."""
    model = load_model(path)
    before = serialize(model)
    if run_passes(model, ["fold-constants"], PassContext(model.format))["fold-constants"] == 0:
        assert serialize(model) == before


# -- TFLite -------------------------------------------------------------------------------------
def _tflite_shape_model(quantized_weight: bool = False) -> Model:
    """x[1,2,3,4] -> SHAPE -> GATHER([0]) -> CONCATENATION([.., -1]) -> RESHAPE(x, ..) -> ADD
    with CAST(int32 const -> float) -> TRANSPOSE(const perm) as the addend."""
    g = Graph(name="main")
    t = g.add_tensor
    t(Tensor("x", (1, 2, 3, 4), "float32"))
    t(Tensor("s", (4,), "int32"))
    t(Tensor("idx", (1,), "int32", _ro(np.array([0], np.int32))))
    t(Tensor("n", (1,), "int32"))
    t(Tensor("minus1", (1,), "int32", _ro(np.array([-1], np.int32))))
    t(Tensor("shape", (2,), "int32"))
    t(Tensor("r", (1, 24), "float32"))
    t(Tensor("k_int", (24, 1), "int32", _ro(np.arange(-12, 12, dtype=np.int32).reshape(24, 1))))
    t(Tensor("k_f", (24, 1), "float32"))
    t(Tensor("perm", (2,), "int32", _ro(np.array([1, 0], np.int32))))
    t(Tensor("k", (1, 24), "float32"))
    t(Tensor("y", (1, 24), "float32"))
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes = [
        Node("Shape", ["x"], ["s"], {"out_type": "int32"}, "s"),
        Node("Gather", ["s", "idx"], ["n"], {"axis": 0, "batch_dims": 0}, "n"),
        Node("Concat", ["n", "minus1"], ["shape"], {"axis": 0, "activation": "NONE"}, "shape"),
        Node("Reshape", ["x", "shape"], ["r"], {}, "r"),
        Node("Cast", ["k_int"], ["k_f"], {}, "k_f"),
        Node("Transpose", ["k_f", "perm"], ["k"], {}, "k"),
        Node("Add", ["r", "k"], ["y"], {"activation": "RELU"}, "y"),
    ]
    if quantized_weight:
        g.tensors["k_int"].quant = QuantParams(np.array([0.5]), np.array([0]))
    model = Model("tflite", [g], {})
    model.verify()
    return model


def _ro(a):
    a.flags.writeable = False
    return a


def test_tflite_shape_chain_and_weight_cast_fold_in_litert():
    model = _tflite_shape_model()
    before = serialize(model)
    counts = run_passes(model, ["fold-constants", "eliminate"], PassContext("tflite"))
    assert counts["fold-constants"] == 5 and _ops(model) == ["Reshape", "Add"]
    np.testing.assert_array_equal(model.graph.tensors["shape"].data, [1, -1])
    assert model.graph.tensors["shape"].dtype == "int32"
    after = serialize(model)
    for seed in range(2):
        _assert_same(run_litert(before, seed), run_litert(after, seed))


def test_tflite_quantized_constant_is_not_folded():
    model = _tflite_shape_model(quantized_weight=True)
    run_passes(model, ["fold-constants"], PassContext("tflite"))
    assert "Cast" in _ops(model) and "Shape" not in _ops(model)


# -- kernels against onnxruntime ----------------------------------------------------------------
KERNEL_CASES = [
    ("Add", [np.array([[1.5], [2]], np.float32), np.array([3, 4, 5], np.float32)], {}),
    ("Sub", [np.array([5, -3], np.int32), np.array([7], np.int32)], {}),
    ("Mul", [np.array([2**40, 3], np.int64), np.array([5, -1], np.int64)], {}),
    ("Div", [np.array([-9, 9, -9, 9], np.int32), np.array([4, 4, -4, -4], np.int32)], {}),
    ("Div", [np.array([1, -3], np.float32), np.array([3, 7], np.float32)], {}),
    ("Cast", [np.array([-1.7, 2.9, 0.5], np.float32)], {"to": TensorProto.INT32}),
    ("Cast", [np.array([0, 3, -2], np.int64)], {"to": TensorProto.BOOL}),
    ("Cast", [np.array([1e-3, 70000.0], np.float32)], {"to": TensorProto.FLOAT16}),
    ("Shape", [np.ones((2, 3, 4, 5), np.float32)], {"start": -3, "end": 3}),
    ("Shape", [np.ones((2, 3), np.int8)], {}),
    ("Gather", [np.array([4, 5, 6], np.int64), np.array(-2, np.int64)], {}),
    ("Gather", [np.arange(12, dtype=np.float32).reshape(3, 4), np.array([[-1, 0], [2, 2]],
                                                                         np.int64)], {"axis": 1}),
    ("Unsqueeze", [np.ones((2, 3), np.float32), np.array([-1, 0], np.int64)], {}),
    ("Squeeze", [np.ones((1, 3, 1), np.float32), np.array([-1], np.int64)], {}),
    ("Squeeze", [np.ones((1, 3, 1), np.float32)], {}),
    ("Reshape", [np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.array([0, -1, 2], np.int64)],
     {}),
    ("Transpose", [np.arange(24, dtype=np.float32).reshape(2, 3, 4)], {}),
    ("Transpose", [np.arange(24, dtype=np.float32).reshape(2, 3, 4)], {"perm": [1, 0, 2]}),
    ("Concat", [np.ones((2, 1), np.int64), np.zeros((2, 3), np.int64)], {"axis": -1}),
    ("ConstantOfShape", [np.array([2, 3], np.int64)],
     {"value": numpy_helper.from_array(np.array([7], np.int32))}),
    ("ConstantOfShape", [np.array([], np.int64)], {}),  # a scalar 0.0
    ("Flatten", [np.ones((2, 3, 4, 5), np.float32)], {"axis": -2}),
    ("Slice", [np.arange(20, dtype=np.float32).reshape(4, 5), np.array([10, -2], np.int64),
               np.array([-10, 0], np.int64), np.array([0, 1], np.int64),
               np.array([-1, -1], np.int64)], {}),
    ("Slice", [np.arange(10, dtype=np.int64), np.array([1], np.int64),
               np.array([2**62], np.int64)], {}),
    ("Range", [np.array(10, np.int32), np.array(-3, np.int32), np.array(-4, np.int32)], {}),
    ("Range", [np.array(0.1, np.float32), np.array(7.3, np.float32), np.array(0.3, np.float32)],
     {}),
    ("Expand", [np.array([[1], [2]], np.float32), np.array([3, 1, 4], np.int64)], {}),
    ("Expand", [np.ones((2, 3), np.float32), np.array([1], np.int64)], {}),
    ("Clip", [np.array([-3, 0.5, 9], np.float32), np.array(0, np.float32), None], {}),
    ("Clip", [np.array([-3, 0.5, 9], np.float32), np.array(2, np.float32),
              np.array(1, np.float32)], {}),
    ("Relu", [np.array([-3, 0.5], np.float32)], {}),
    ("Sigmoid", [np.array([-30, -1, 0, 2, 50], np.float32)], {}),
    ("Tanh", [np.array([-3, 0.5, 20], np.float32)], {}),
    ("Identity", [np.array([1, 2], np.int64)], {}),
]


@pytest.mark.parametrize("op,arrays,attrs", KERNEL_CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(KERNEL_CASES)])
def test_kernel_matches_onnxruntime(tmp_path, op, arrays, attrs):
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(arrays)]
    inits = [(n, a) for n, a in zip(names, arrays) if a is not None]
    nodes = [helper.make_node(op, names, ["out"], **attrs)]
    graph = helper.make_graph(nodes, "k", [], [helper.make_empty_tensor_value_info("out")],
                              [numpy_helper.from_array(a, n) for n, a in inits])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    data = onnx.shape_inference.infer_shapes(proto, strict_mode=True).SerializeToString()
    expected = run_onnx(data)[0]
    model = _load(tmp_path, data)
    node = model.graph.nodes[0]
    assert node.op in KERNELS and not node.opaque
    out = model.graph.tensors["out"]
    # parameters ONNX spells as attributes (Transpose perm) are constant inputs in the IR
    params = node.inputs[len(arrays):]
    assert all(model.graph.tensors[p].extra.get("from_attribute") for p in params)
    copies = [None if a is None else a.copy() for a in arrays]
    copies += [model.graph.constant(p) for p in params]
    result = KERNELS[node.op](node, copies,
                              [None if out.extra.get("dtype_unknown") else out.dtype])[0]
    assert result.dtype == expected.dtype and result.shape == expected.shape
    # onnxruntime's vectorized Sigmoid/Tanh clamp their input (sigmoid(-30) is 0 there)
    atol = 1e-7 if op in ("Sigmoid", "Tanh") else 0
    np.testing.assert_allclose(result, expected, rtol=1e-6, atol=atol)
    for a, c in zip(arrays, copies):  # kernels never write into their inputs
        assert a is None or np.array_equal(a, c)


def test_tflite_kernel_attributes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    # the IR spelling of TFLite's options (qconvert.schemas.ops): new_shape and squeeze_dims
    # are inputs, a TFLite Reshape reads a 0 literally (allowzero 1)
    reshape = Node("Reshape", ["x", "s"], ["y"], {"allowzero": 1})
    assert KERNELS["Reshape"](reshape, [x, np.array([4, -1])], ["float32"])[0].shape == (4, 3)
    with pytest.raises(ValueError):  # a literal 0: no 0 x 12 view of 12 values
        KERNELS["Reshape"](reshape, [x, np.array([0, 12])], [None])
    copies = Node("Reshape", ["x", "s"], ["y"], {"allowzero": 0})
    assert KERNELS["Reshape"](copies, [x, np.array([0, -1])], [None])[0].shape == (3, 4)
    squeeze = Node("Squeeze", ["x", "axes"], ["y"], {})
    assert KERNELS["Squeeze"](squeeze, [np.ones((1, 3, 1)), np.array([0, 2])], [None])[0].shape \
        == (3,)
    shape = Node("Shape", ["x"], ["y"], {"out_type": "int32"})
    assert KERNELS["Shape"](shape, [x], ["int32"])[0].dtype == np.int32
    cast = Node("Cast", ["x"], ["y"], {"to": "int32"})
    np.testing.assert_array_equal(KERNELS["Cast"](cast, [np.array([-1.5, 2.5])], ["int32"])[0],
                                  np.array([-1, 2], np.int32))
    add = Node("Add", ["a", "b"], ["y"], {"activation": "RELU6"})
    np.testing.assert_array_equal(
        KERNELS["Add"](add, [np.array([-2.0, 3, 9]), np.array([1.0, 1, 1])], [None])[0], [0, 4, 6])
    gather = Node("Gather", ["a", "b"], ["y"], {"axis": 0, "batch_dims": 1})
    with pytest.raises(NotImplementedError):
        KERNELS["Gather"](gather, [x, np.array([[0], [1], [2]])], [None])
