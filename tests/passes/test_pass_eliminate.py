"""The `eliminate` pass: fires on Identity, inference Dropout, no-op Reshape/Transpose, dead
nodes and unused constants; must not fire where names or readers forbid it. Outputs before and
after agree in onnxruntime (its own optimizations off)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import run_onnx
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext, run_passes

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _eliminate(tmp_path, data):
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    model = load_model(path)
    counts = run_passes(model, ["eliminate"], PassContext("onnx"))
    out = serialize(model)
    for a, b in zip(run_onnx(data), run_onnx(out)):
        np.testing.assert_array_equal(a, b)
    return counts["eliminate"], model


def _ops(model):
    return [n.op for n in model.graph.nodes]


def test_identity_dropout_noop_reshape_transpose_removed(tmp_path):
    shape = numpy_helper.from_array(np.array([1, 4, 3], np.int64), "shape")
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Identity", ["a"], ["b"]),
             helper.make_node("Dropout", ["b"], ["c"]),
             helper.make_node("Reshape", ["c", "shape"], ["d"]),
             helper.make_node("Transpose", ["d"], ["e"], perm=[0, 1, 2]),
             helper.make_node("Sigmoid", ["e"], ["y"])]
    count, model = _eliminate(tmp_path, _model(nodes, [_vi("x", [1, 4, 3])], [_vi("y", [1, 4, 3])],
                                               [shape]))
    assert count == 4 and _ops(model) == ["Relu", "Sigmoid"]
    assert "shape" not in model.graph.tensors, "unused constant removed"


def test_identity_to_graph_output_renames_producer(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"])]
    count, model = _eliminate(tmp_path, _model(nodes, [_vi("x", [2])], [_vi("y", [2])]))
    assert count == 1 and model.graph.nodes[0].outputs == ["y"]


@pytest.mark.parametrize("case", ["input_is_graph_input", "input_has_other_reader",
                                  "input_is_graph_output"])
def test_identity_to_graph_output_must_not_fire(tmp_path, case):
    if case == "input_is_graph_input":
        nodes = [helper.make_node("Identity", ["x"], ["y"])]
        outputs = [_vi("y", [2])]
    elif case == "input_has_other_reader":
        nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"]),
                 helper.make_node("Sigmoid", ["a"], ["z"])]
        outputs = [_vi("y", [2]), _vi("z", [2])]
    else:
        nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"])]
        outputs = [_vi("a", [2]), _vi("y", [2])]
    count, model = _eliminate(tmp_path, _model(nodes, [_vi("x", [2])], outputs))
    assert "Identity" in _ops(model) and count == 0


def test_reshape_that_changes_shape_and_real_transpose_stay(tmp_path):
    shape = numpy_helper.from_array(np.array([4, 3], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["a"]),
             helper.make_node("Transpose", ["a"], ["y"], perm=[1, 0])]
    count, model = _eliminate(tmp_path, _model(nodes, [_vi("x", [1, 4, 3])], [_vi("y", [3, 4])],
                                               [shape]))
    assert count == 0 and _ops(model) == ["Reshape", "Transpose"]


def test_dropout_with_used_mask_stays(tmp_path):
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"])]
    outputs = [_vi("y", [2]), _vi("mask", [2], TensorProto.BOOL)]
    count, model = _eliminate(tmp_path, _model(nodes, [_vi("x", [2])], outputs))
    assert count == 0 and _ops(model) == ["Dropout"]


def test_dead_nodes_removed_but_subgraph_reads_kept(tmp_path):
    then_graph = helper.make_graph([helper.make_node("Identity", ["outer"], ["t"])], "then", [],
                                   [_vi("t", [2])])
    else_graph = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                                   [_vi("e", [2])])
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("Relu", ["x"], ["dead"]),
             helper.make_node("Sigmoid", ["dead"], ["dead2"]),
             helper.make_node("Tanh", ["x"], ["outer"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_graph,
                              else_branch=else_graph)]
    count, model = _eliminate(tmp_path, _model(nodes, [_vi("x", [2])], [_vi("y", [2])], [cond]))
    assert count == 2 and _ops(model) == ["Tanh", "If"]


def _load(tmp_path, data):
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    return load_model(path)


def test_dead_standard_opaque_op_removed_custom_domain_kept(tmp_path):
    """An unused output of a standard-domain op qconvert does not know (LRN) is dead; a
    custom-domain op is not known to be pure and stays, with what it reads."""
    nodes = [helper.make_node("Relu", ["x"], ["y"]),
             helper.make_node("LRN", ["x"], ["dead"], size=3),
             helper.make_node("Tanh", ["x"], ["t"]),
             helper.make_node("Log", ["t"], ["logged"], domain="com.example")]
    m = helper.make_model(helper.make_graph(nodes, "g", [_vi("x", [1, 4, 2, 2])],
                                            [_vi("y", [1, 4, 2, 2])]),
                          opset_imports=[helper.make_opsetid("", 13),
                                         helper.make_opsetid("com.example", 1)])
    model = _load(tmp_path, m.SerializeToString())
    count = run_passes(model, ["eliminate"], PassContext("onnx"))["eliminate"]
    assert count == 1 and _ops(model) == ["Relu", "Tanh", "Log"]


def test_loop_with_custom_op_in_its_body_is_kept(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Print", ["x"], [], domain="com.example")],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL)],
        [_vi("cond_out", [], TensorProto.BOOL)])
    pure_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL)],
        [_vi("cond_out", [], TensorProto.BOOL)])
    trips = numpy_helper.from_array(np.array(2, np.int64), "trips")
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("Relu", ["x"], ["y"]),
             helper.make_node("Loop", ["trips", "cond"], [], body=body),
             helper.make_node("Loop", ["trips", "cond"], [], body=pure_body)]
    m = helper.make_model(helper.make_graph(nodes, "g", [_vi("x", [2])], [_vi("y", [2])],
                                            [trips, cond]),
                          opset_imports=[helper.make_opsetid("", 13),
                                         helper.make_opsetid("com.example", 1)])
    model = _load(tmp_path, m.SerializeToString())
    count = run_passes(model, ["eliminate"], PassContext("onnx"))["eliminate"]
    assert count == 1 and _ops(model) == ["Relu", "Loop"]
    assert model.graph.nodes[1].origin["attributes"]  # the impure one, with its body


def test_tflite_side_effects_and_custom_ops_are_never_dead():
    from qconvert.ir import Node
    from qconvert.schemas.effects import is_pure

    def tfl(op, custom=None):
        return Node(custom or op, [], [], {}, op, True, {"code": 0, "custom_code": custom})

    assert not is_pure(tfl("ASSIGN_VARIABLE")) and not is_pure(tfl("CALL_ONCE"))
    assert not is_pure(tfl("WHILE")) and not is_pure(tfl("X", custom="MyOp"))
    assert is_pure(tfl("READ_VARIABLE")) and is_pure(tfl("VAR_HANDLE"))
    assert is_pure(Node("Conv2D", ["x", "w"], ["y"]))
