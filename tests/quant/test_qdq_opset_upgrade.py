"""`quantize` to QDQ ONNX of an opset-11 model raises the opset to 13 (per-axis
DequantizeLinear needs it) instead of refusing: attributes that became inputs (Squeeze axes) are
written the opset-13 way, an opset-11 Softmax over the last axis becomes the opset-13 one, and
the output says so. Oracle: onnxruntime (graph optimizations off) runs the float opset-11 model
and the QDQ result; onnx.checker checks the file."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from qconvert.cli import main


def _ort(path, x):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _opset11_model(path, softmax_input_rank: int = 2):
    rng = np.random.default_rng(0)
    w = (0.3 * rng.standard_normal((8, 3, 3, 3))).astype(np.float32)
    b = (0.1 * rng.standard_normal(8)).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("GlobalAveragePool", ["r"], ["p"])]
    if softmax_input_rank == 2:
        nodes += [h.make_node("Squeeze", ["p"], ["f"], axes=[2, 3]),
                  h.make_node("Softmax", ["f"], ["y"], axis=1)]
        out_shape = [1, 8]
    else:  # [1, 8, 1, 1] with axis 1: opset 11 flattens to [1, 8]; opset 13 would not
        nodes += [h.make_node("Softmax", ["p"], ["y"], axis=1)]
        out_shape = [1, 8, 1, 1]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, out_shape)],
                     [nh.from_array(w, "w"), nh.from_array(b, "b")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 11)])
    m.ir_version = 6
    onnx.save(m, str(path))


def test_opset11_model_quantizes_to_qdq_opset13(tmp_path):
    src, out = tmp_path / "m11.onnx", tmp_path / "m_qdq.onnx"
    _opset11_model(src)
    calib = np.random.default_rng(1).standard_normal((32, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "calib.npy", calib)
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--verify", "4",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "ONNX opset raised 11 -> 13" in result.output
    m = onnx.load(str(out))
    onnx.checker.check_model(m)
    assert {i.domain: i.version for i in m.opset_import}[""] == 13 and m.ir_version >= 7
    assert any(n.op_type == "DequantizeLinear" for n in m.graph.node)
    sq = next(n for n in m.graph.node if n.op_type == "Squeeze")
    assert len(sq.input) == 2 and not sq.attribute  # opset 13: axes as an input
    for seed in (0, 1):
        x = np.random.default_rng(10 + seed).standard_normal((1, 3, 8, 8)).astype(np.float32)
        want, got = _ort(src, x).astype(np.float64), _ort(out, x)
        assert 10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2)) > 25


def test_softmax_that_opset13_spells_differently_is_refused(tmp_path):
    """must not: an opset-11 Softmax flattening [1, 8, 1, 1] at axis 1 is written as the
    opset-13 Softmax along the last axis (of size 1: all ones)."""
    src, out = tmp_path / "m11.onnx", tmp_path / "m_qdq.onnx"
    _opset11_model(src, softmax_input_rank=4)
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(1).standard_normal((16, 3, 8, 8)).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "-o", str(out)])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Softmax 'Softmax_3'" in lines[0] and "opset 13" in lines[0]
    assert not out.exists()
