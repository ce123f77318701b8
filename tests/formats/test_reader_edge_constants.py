"""Valid models the readers used to refuse: an ONNX Clip with an infinite bound (what
`torch.clamp(min=...)` exports: Clip(x, 1e-10, +inf)) reads as a Clip without that bound; a
TFLite int32 constant of shape [0] with an empty buffer reads as an empty constant. Oracles:
onnxruntime on the ONNX model against LiteRT on the converted TFLite; LiteRT on the TFLite
model against LiteRT on qconvert's rewrite."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import run_litert, run_onnx
from qconvert.cli.app import main


def _clip_model(lo: float, hi: float, extra_reader: bool = False) -> bytes:
    inits = [numpy_helper.from_array(np.array(lo, np.float32), "lo"),
             numpy_helper.from_array(np.array(hi, np.float32), "hi"),
             numpy_helper.from_array(np.array(3.0, np.float32), "three")]
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["c"], name="clip"),
             helper.make_node("Mul", ["c", "three"], ["y"], name="mul")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])]
    if extra_reader:  # the infinite constant used as a value, not a bound
        nodes.append(helper.make_node("Add", ["x", "hi"], ["z"], name="add"))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 8]))
    graph = helper.make_graph(nodes, "clamp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.mark.parametrize("lo, hi", [(1e-10, np.inf), (-np.inf, 0.5), (-np.inf, np.inf)])
def test_onnx_clip_with_infinite_bound_converts_like_onnxruntime(tmp_path, lo, hi):
    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    src.write_bytes(_clip_model(lo, hi))
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--verify", "4"])
    assert result.exit_code == 0, result.output
    for seed in (0, 1):
        want = run_onnx(src.read_bytes(), seed)[0]
        got = run_litert(out.read_bytes(), seed)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_onnx_infinite_constant_read_as_a_value_is_refused(tmp_path):
    """must not: an infinite constant read by anything but a Clip bound stays refused."""
    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    src.write_bytes(_clip_model(1e-10, np.inf, extra_reader=True))
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out)])
    assert result.exit_code != 0
    assert "'hi' contains NaN or infinity" in result.output
    assert not out.exists()


def _empty_shape_model() -> bytes:
    """x [1, 1] -> Mul(x, 2) -> Reshape(., shape = int32 [] of shape [0]) -> y, a scalar; the
    shape constant's buffer is empty (nothing to store), as in a bird-sound model's STFT."""
    from qconvert.ir import Graph, Model, Node, Tensor
    from qconvert.formats.model_io import serialize

    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, 1), "float32"))
    g.add_tensor(Tensor("m", (1, 1), "float32"))
    g.add_tensor(Tensor("y", (), "float32"))
    g.add_tensor(Tensor("two", (), "float32", np.array(2.0, np.float32)))
    g.add_tensor(Tensor("shape", (0,), "int32", np.zeros(0, np.int32)))
    g.nodes = [Node("Mul", ["x", "two"], ["m"], {"activation": "NONE"}, "m"),
               Node("Reshape", ["m", "shape"], ["y"], {}, "y")]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


def test_tflite_empty_int32_constant_reads_as_an_empty_constant(tmp_path):
    from qconvert.formats.model_io import load_model

    src, out = tmp_path / "m.tflite", tmp_path / "m_out.tflite"
    src.write_bytes(_empty_shape_model())
    graph = load_model(src).graph
    t = graph.tensors["shape"]
    assert t.data is not None and t.data.shape == (0,) and t.data.dtype == np.int32
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--verify", "4"])
    assert result.exit_code == 0, result.output
    for seed in (0, 1):
        want = run_litert(src.read_bytes(), seed)[0]
        got = run_litert(out.read_bytes(), seed)[0]
        assert want.shape == got.shape == ()
        np.testing.assert_array_equal(got, want)


def test_tflite_empty_activation_buffer_stays_an_activation(tmp_path):
    """must not: an activation's empty buffer (every TFLite converter output has them) is not
    a constant."""
    from qconvert.formats.model_io import load_model

    src = tmp_path / "m.tflite"
    src.write_bytes(_empty_shape_model())
    graph = load_model(src).graph
    assert graph.tensors["m"].data is None and graph.tensors["y"].data is None
