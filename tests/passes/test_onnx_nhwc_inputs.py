"""ONNX models with NHWC image inputs, as tf2onnx writes a TensorFlow model (input [1, H, W, C]
followed by a Transpose to NCHW): the TFLite input stays [1, H, W, C] with no TRANSPOSE (it was
[1, H, C, W] plus a TRANSPOSE). Oracles: onnxruntime (optimizations off) on the ONNX model and
LiteRT on the TFLite one, fed the same unpermuted data; TFLite Micro on the quantized model."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from helpers.oracles import litert_invoke, tflm_invoke
from qconvert.cli import main
from qconvert.formats.model_io import load_model


def _tf2onnx_like(path, extra_reader=False):
    rng = np.random.default_rng(0)
    w = (0.3 * rng.standard_normal((8, 3, 3, 3))).astype(np.float32)
    b = (0.1 * rng.standard_normal(8)).astype(np.float32)
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]),
             h.make_node("Conv", ["xt", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1])]
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [1, 24, 24, 8])]
    if extra_reader:  # the input read in NHWC by something else too: not a tf2onnx input
        nodes.append(h.make_node("Relu", ["x"], ["z"]))
        outputs.append(h.make_tensor_value_info("z", T.FLOAT, [1, 24, 24, 3]))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 24, 24, 3])],
                     outputs, [nh.from_array(w, "w"), nh.from_array(b, "b")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(path))


def _ort(path, x):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})


def test_nhwc_onnx_input_is_kept_without_transpose(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    _tf2onnx_like(src)
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--verify", "2"])
    assert result.exit_code == 0, result.output
    assert "input 'x': NHWC [1, 24, 24, 3] (NHWC in the ONNX model, kept" in result.output
    assert "transposes left: 0" in result.output
    graph = load_model(out).graph
    assert [n.op for n in graph.nodes] == ["Conv2D"]
    assert graph.tensors[graph.inputs[0]].shape == (1, 24, 24, 3)
    x = np.random.default_rng(3).standard_normal((1, 24, 24, 3)).astype(np.float32)
    np.testing.assert_allclose(litert_invoke(out.read_bytes(), [x])[0], _ort(src, x)[0],
                               rtol=1e-5, atol=1e-5)
    # quantize ONNX -> int8 TFLite with calibration data in the model's own (NHWC) layout
    q8 = tmp_path / "q.tflite"
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(4).standard_normal((32, 24, 24, 3)).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--io-type", "float32",
                                       "--verify", "4", "-o", str(q8)])
    assert result.exit_code == 0, result.output
    want = _ort(src, x)[0].astype(np.float64)
    got = tflm_invoke(q8.read_bytes(), [x], arena_size=1 << 20)[0]
    assert 10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2)) > 30


@pytest.mark.parametrize("layout", ["nchw", "extra-reader"])
def test_input_not_detected_when_it_is_not_only_transposed(tmp_path, layout):
    """must not: an input read by other ops too (or --input-layout nchw) is taken for NHWC."""
    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    _tf2onnx_like(src, extra_reader=layout == "extra-reader")
    flags = ["--input-layout", "nchw"] if layout == "nchw" else []
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), *flags])
    assert result.exit_code == 0, result.output
    assert "NHWC in the ONNX model" not in result.output
    x = np.random.default_rng(3).standard_normal((1, 24, 24, 3)).astype(np.float32)
    feed = x if layout == "nchw" else x.transpose(0, 2, 3, 1)  # NHWC perm of the ONNX dims
    want = _ort(src, x)[0]
    got = litert_invoke(out.read_bytes(), [feed])
    np.testing.assert_allclose(got[0] if got[0].shape == want.shape else got[1], want,
                               rtol=1e-5, atol=1e-5)
