"""The `static-batch` pass: a dynamic batch becomes 1 and every shape static, so the Keras
flatten's run-time shape arithmetic folds away; outputs are unchanged in LiteRT and onnxruntime.
It must not touch a static graph, and must refuse a dynamic dimension other than the batch."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import TEST_MODELS, assert_close, run_litert, run_onnx
from qconvert.errors import QConvertError
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext, run_passes

STATIC = ["static-batch", "fold-constants", "eliminate"]


def test_keras_dynamic_flatten_becomes_a_static_reshape():
    src = TEST_MODELS / "digits_cnn.tflite"
    model = load_model(src)
    assert any(not t.static_shape for t in model.graph.tensors.values())
    counts = run_passes(model, STATIC, PassContext("tflite"))
    assert counts["static-batch"] > 0 and counts["fold-constants"] == 3
    graph = model.graph
    assert [n.op for n in graph.nodes].count("Reshape") == 1
    assert not {"Shape", "StridedSlice", "Pack"} & {n.op for n in graph.nodes}
    assert all(t.static_shape for t in graph.tensors.values())
    reshape = next(n for n in graph.nodes if n.op == "Reshape")
    assert graph.tensors[reshape.inputs[1]].data.tolist() == [1, 24]
    data = serialize(model)
    for seed in (0, 1):
        assert_close(run_litert(src.read_bytes(), seed), run_litert(data, seed))


def test_static_model_is_left_alone(tmp_path):
    model = load_model(TEST_MODELS / "ad01_fp32.tflite")  # batch -1 in its signatures
    dynamic = sum(not t.static_shape for t in model.graph.tensors.values())
    assert dynamic > 0
    assert run_passes(model, ["static-batch"], PassContext("tflite"))["static-batch"] == dynamic
    before = serialize(model)
    assert run_passes(model, ["static-batch"], PassContext("tflite"))["static-batch"] == 0
    assert serialize(model) == before
    (tmp_path / "s.tflite").write_bytes(before)
    assert load_model(tmp_path / "s.tflite").graph.tensors["input_1"].shape == (1, 640)


def _onnx(tmp_path, input_shape):
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["c"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["c", "shape"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0), "zero"),
         numpy_helper.from_array(np.array([0]), "axes"),
         numpy_helper.from_array(np.array([-1]), "minus1")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def test_onnx_symbolic_batch_becomes_one_and_the_shape_chain_folds(tmp_path):
    path = _onnx(tmp_path, ["N", 3, 8, 8])
    model = load_model(path)
    run_passes(model, STATIC, PassContext("onnx"))
    graph = model.graph
    assert graph.tensors["x"].shape == (1, 3, 8, 8) and graph.tensors["y"].shape == (1, 256)
    assert [n.op for n in graph.nodes] == ["Conv2D", "Reshape"]
    out = serialize(model)
    for seed in (0, 1):  # the original runs with batch 1 too: same outputs
        assert_close(run_onnx(path.read_bytes(), seed), run_onnx(out, seed))


@pytest.mark.parametrize("shape, words", [
    (["N", 3, "H", "W"], "x (dimension 2, 3 of ?x3x?x?)"),
    ([1, 3, 8, "W"], "x (dimension 3 of 1x3x8x?)"),
])
def test_dynamic_dimension_beyond_the_batch_is_refused(tmp_path, shape, words):
    model = load_model(_onnx(tmp_path, shape))
    with pytest.raises(QConvertError) as info:
        run_passes(model, ["static-batch"], PassContext("onnx"))
    assert words in str(info.value)
