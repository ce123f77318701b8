"""Float16 weights behind DEQUANTIZE (the TFLite converter's `supported_types=[tf.float16]`
output) fold into float32 constants (`fold-constants`), so `quantize` and `fuse` work on such
models. The model is built through the IR and written by qconvert's own TFLite writer (no
TensorFlow). Oracles: LiteRT runs the float16 model (its DEQUANTIZE widens the weights) and
TFLite Micro runs the int8 result."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import run_litert, run_tflm
from qconvert.cli.app import main
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize

CONV = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "pads": [1, 1, 1, 1],
        "activation": "NONE", "group": 1, "kernel_shape": [3, 3]}


def _float16_model() -> bytes:
    """x -> CONV_2D (weights, bias: float16 -> DEQUANTIZE) -> RELU -> y."""
    rng = np.random.default_rng(8)
    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, 6, 6, 3), "float32"))
    g.add_tensor(Tensor("c", (1, 6, 6, 8), "float32"))
    g.add_tensor(Tensor("y", (1, 6, 6, 8), "float32"))
    w16 = (0.3 * rng.standard_normal((8, 3, 3, 3))).astype(np.float16)
    b16 = (0.1 * rng.standard_normal(8)).astype(np.float16)
    g.add_tensor(Tensor("w16", w16.shape, "float16", w16))
    g.add_tensor(Tensor("b16", b16.shape, "float16", b16))
    g.add_tensor(Tensor("w", w16.shape, "float32"))
    g.add_tensor(Tensor("b", b16.shape, "float32"))
    g.nodes = [Node("Dequantize", ["w16"], ["w"], {}, "w"),
               Node("Dequantize", ["b16"], ["b"], {}, "b"),
               Node("Conv2D", ["x", "w", "b"], ["c"], dict(CONV), "c"),
               Node("Relu", ["c"], ["y"], {}, "y")]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


def test_fold_constants_folds_float16_dequantize(tmp_path):
    src, out = tmp_path / "m.tflite", tmp_path / "m_fused.tflite"
    src.write_bytes(_float16_model())
    result = CliRunner().invoke(main, ["fuse", str(src), "--passes", "fold-constants,eliminate",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    assert [n.op for n in graph.nodes if n.op == "Dequantize"] == []
    w_name = next(n for n in graph.nodes if n.op == "Conv2D").inputs[1]
    w = graph.tensors[w_name]
    assert w.dtype == "float32"
    src_graph = load_model(src).graph
    np.testing.assert_array_equal(w.data, src_graph.tensors["w16"].data.astype(np.float32))
    for seed in (0, 1):  # the folded float32 model computes what LiteRT computes on float16
        np.testing.assert_allclose(run_litert(out.read_bytes(), seed)[0],
                                   run_litert(src.read_bytes(), seed)[0], rtol=1e-5, atol=1e-5)


def test_quantize_of_float16_model_matches_litert(tmp_path):
    src, out = tmp_path / "m.tflite", tmp_path / "m_int8.tflite"
    src.write_bytes(_float16_model())
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(6).standard_normal((32, 6, 6, 3)).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--io-type", "float32",
                                       "--verify", "4", "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    conv = next(n for n in graph.nodes if n.op == "Conv2D")
    assert graph.tensors[conv.inputs[1]].dtype == "int8"
    for seed in (0, 1):
        want = run_litert(src.read_bytes(), seed)[0]
        got = run_tflm(out.read_bytes(), seed)[0]
        sqnr = 10 * np.log10(np.sum(want.astype(np.float64) ** 2) / np.sum((got - want) ** 2))
        assert sqnr > 30, sqnr


def _hybrid_model(per_channel: bool) -> bytes:
    """x -> FULLY_CONNECTED (weights: int8 + scale -> DEQUANTIZE, the TFLite converter's
    weight-only ("dynamic range") output for ops without a hybrid kernel) -> y."""
    from qconvert.ir import QuantParams

    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 10)).astype(np.float32)
    scale = (np.abs(w).max(axis=1) / 127 if per_channel else np.array([np.abs(w).max() / 127]))
    q = np.clip(np.round(w / (scale[:, None] if per_channel else scale)), -127, 127)
    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, 10), "float32"))
    g.add_tensor(Tensor("y", (1, 6), "float32"))
    g.add_tensor(Tensor("wq", (6, 10), "int8", q.astype(np.int8),
                        quant=QuantParams(scale.astype(np.float32), np.zeros(scale.size),
                                          0 if per_channel else None)))
    g.add_tensor(Tensor("w", (6, 10), "float32"))
    g.nodes = [Node("Dequantize", ["wq"], ["w"], {"axis": 0} if per_channel else {}, "w"),
               Node("FullyConnected", ["x", "w"], ["y"],
                    {"activation": "NONE", "keep_num_dims": False}, "y")]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_fold_constants_folds_int8_weight_only_dequantize(tmp_path, per_channel):
    """The DEQUANTIZE of int8 weights in a float model folds to what LiteRT's DEQUANTIZE
    computes (outputs equal bit for bit); quantize then works on the model (vs LiteRT)."""
    src, out = tmp_path / "m.tflite", tmp_path / "m_fused.tflite"
    src.write_bytes(_hybrid_model(per_channel))
    result = CliRunner().invoke(main, ["fuse", str(src), "--passes", "fold-constants,eliminate",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    assert [n.op for n in graph.nodes] == ["FullyConnected"]
    assert graph.tensors[graph.nodes[0].inputs[1]].dtype == "float32"
    for seed in (0, 1, 2):
        np.testing.assert_array_equal(run_litert(out.read_bytes(), seed)[0],
                                      run_litert(src.read_bytes(), seed)[0])
    q8 = tmp_path / "m_int8.tflite"
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(6).standard_normal((32, 10)).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--io-type", "float32",
                                       "--verify", "4", "-o", str(q8)])
    assert result.exit_code == 0, result.output
    want = run_litert(src.read_bytes(), 0)[0].astype(np.float64)
    got = run_tflm(q8.read_bytes(), 0)[0]
    assert 10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2)) > 30


def test_int8_dequantize_of_a_quantized_model_is_not_folded():
    """must not: the DEQUANTIZE of int8 weights in a model whose activations are quantized
    (an int8 TFLite model; a QDQ ONNX model's DequantizeLinear) stays as it is."""
    from qconvert.ir import QuantParams
    import qconvert.passes.cleanup.fold_constants as fc

    qp = QuantParams(np.array([0.5], np.float32), np.array([0]), None)
    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, 4), "int8", quant=qp.copy()))
    g.add_tensor(Tensor("xf", (1, 4), "float32"))
    g.add_tensor(Tensor("y", (1, 4), "float32"))
    g.add_tensor(Tensor("wq", (4,), "int8", np.arange(4, dtype=np.int8), quant=qp.copy()))
    g.add_tensor(Tensor("w", (4,), "float32"))
    g.nodes = [Node("Dequantize", ["x"], ["xf"], {}, "xf"),
               Node("Dequantize", ["wq"], ["w"], {}, "w"),
               Node("Add", ["xf", "w"], ["y"], {"activation": "NONE"}, "y")]
    assert fc.fold_constants(g, None) == 0
    assert [n.op for n in g.nodes] == ["Dequantize", "Dequantize", "Add"]


def _float16_onnx(path) -> np.ndarray:
    """An ONNX model whose conv weights are float16 initializers behind Cast (what
    onnxconverter-common's float16 conversion with keep_io_types writes); returns them."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    w = (0.3 * rng.standard_normal((8, 3, 3, 3))).astype(np.float16)
    b = (0.1 * rng.standard_normal(8)).astype(np.float16)
    nodes = [h.make_node("Cast", ["w16"], ["w"], to=T.FLOAT),
             h.make_node("Cast", ["b16"], ["b"], to=T.FLOAT),
             h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 8, 8])],
                     [nh.from_array(w, "w16"), nh.from_array(b, "b16")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(path))
    return w


def test_convert_keep_float16_writes_float16_weights(tmp_path):
    """ONNX float16 weights -> TFLite float16 constants behind DEQUANTIZE, the same values bit
    for bit; LiteRT on the output == onnxruntime on the input; without the option, float32."""
    import onnxruntime as ort

    src = tmp_path / "m.onnx"
    w = _float16_onnx(src)
    outs = {}
    for flag in ([], ["--keep-float16"]):
        out = tmp_path / f"m{len(flag)}.tflite"
        result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--verify", "2",
                                           *flag])
        assert result.exit_code == 0, result.output
        outs[bool(flag)] = out
    g16 = load_model(outs[True]).graph
    halves = [t for t in g16.tensors.values() if t.data is not None and t.dtype == "float16"]
    assert len(halves) == 1 and [n.op for n in g16.nodes].count("Dequantize") == 1
    np.testing.assert_array_equal(np.sort(halves[0].data.reshape(-1)), np.sort(w.reshape(-1)))
    assert not any(t.dtype == "float16" for t in load_model(outs[False]).graph.tensors.values())
    assert outs[True].stat().st_size < outs[False].stat().st_size
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(src), opts, providers=["CPUExecutionProvider"])
    from helpers.oracles import litert_invoke

    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = sess.run(None, {"x": x})[0].transpose(0, 2, 3, 1)
    got = litert_invoke(outs[True].read_bytes(), [x.transpose(0, 2, 3, 1)])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_keep_float16_refuses_a_model_without_float16_weights(tmp_path):
    """must not: --keep-float16 on a float32 model (or with an ONNX output) silently does
    nothing: one line, nothing written."""
    src = tmp_path / "m.onnx"
    _float16_onnx(src)
    out = tmp_path / "o.onnx"
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--keep-float16"])
    assert result.exit_code == 1 and "the output is onnx" in result.output
    assert not out.exists()
    f32 = tmp_path / "f32.tflite"
    assert CliRunner().invoke(main, ["convert", str(src), "-o", str(f32)]).exit_code == 0
    out2 = tmp_path / "o2.tflite"
    result = CliRunner().invoke(main, ["convert", str(f32), "-o", str(out2), "--keep-float16"])
    assert result.exit_code == 1 and "has none" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not out2.exists()
