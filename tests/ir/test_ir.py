"""Graph.verify() catches each broken invariant, and the schema table is consistent."""

import numpy as np
import pytest

from qconvert import schemas
from qconvert.ir import Graph, Node, Tensor
from qconvert.ir.graph import GraphError


def _graph():
    g = Graph()
    g.add_tensor(Tensor("x", (1, 4), "float32"))
    g.add_tensor(Tensor("w", (4, 4), "float32", np.ones((4, 4), np.float32)))
    g.add_tensor(Tensor("y", (1, 4), "float32"))
    g.add_tensor(Tensor("z", (1, 4), "float32"))
    g.inputs, g.outputs = ["x"], ["z"]
    g.nodes = [Node("FullyConnected", ["x", "w", None], ["y"]), Node("Relu", ["y"], ["z"])]
    return g


def test_valid_graph_verifies():
    _graph().verify()


@pytest.mark.parametrize("breakage, message", [
    (lambda g: g.nodes.reverse(), "before it is produced"),
    (lambda g: g.nodes.append(Node("Relu", ["x"], ["y"])), "more than one producer"),
    (lambda g: g.nodes[1].inputs.__setitem__(0, "nope"), "missing tensor"),
    (lambda g: g.outputs.append("x2") or g.add_tensor(Tensor("x2", (1,), "float32")),
     "never produced"),
    (lambda g: setattr(g.tensors["w"], "data", np.ones((2, 2), np.float32)), "has shape"),
    (lambda g: setattr(g.tensors["w"], "data", np.ones((4, 4), np.float64)), "holds float64"),
    (lambda g: setattr(g.tensors["y"], "dtype", "nonsense"), "unknown dtype"),
    (lambda g: setattr(g.tensors["y"], "shape", (1, -4)), "negative dimension"),
    (lambda g: g.inputs.append("w"), "is a constant"),
    (lambda g: g.nodes[0].inputs.__setitem__(1, None), "lacks its required input 'weights'"),
    (lambda g: setattr(g.nodes[1], "op", "NoSuchOp"), "not in the schema table"),
])
def test_verify_catches(breakage, message):
    g = _graph()
    breakage(g)
    with pytest.raises(GraphError, match=message):
        g.verify()


def test_duplicate_tensor_name_refused():
    g = _graph()
    with pytest.raises(GraphError, match="duplicate"):
        g.add_tensor(Tensor("x", (1,), "float32"))


def test_schema_table_is_consistent():
    for s in schemas.all_schemas():
        assert s.tflite or s.onnx, s.name
        assert s.doc
        if s.weight_layout:
            assert s.input_index("weights") is not None
            assert set(s.weight_channel_axis) == set(s.weight_layout)
        if s.tflite:
            assert schemas.by_tflite_code(s.tflite.code) is s
        if s.onnx:
            assert schemas.by_onnx_op(s.onnx.op_type) is s
    assert schemas.by_onnx_op("Conv", "ai.onnx") is schemas.get("Conv2D")
    assert schemas.get("LRN") is None
