"""Float16 weights behind DEQUANTIZE (the TFLite converter's `supported_types=[tf.float16]`
output) fold into float32 constants (`fold-constants`), so `quantize` and `fuse` work on such
models. The model is built through the IR and written by qconvert's own TFLite writer (no
TensorFlow). Oracles: LiteRT runs the float16 model (its DEQUANTIZE widens the weights) and
TFLite Micro runs the int8 result."""

from __future__ import annotations

import numpy as np
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


def test_int8_dequantize_is_not_folded(tmp_path):
    """must not: int8 weights behind a DEQUANTIZE (quantization parameters) stay as they are."""
    from qconvert.ir import QuantParams
    import qconvert.passes.cleanup.fold_constants as fc

    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, 4), "float32"))
    g.add_tensor(Tensor("y", (1, 4), "float32"))
    g.add_tensor(Tensor("wq", (4,), "int8", np.arange(4, dtype=np.int8),
                        quant=QuantParams(np.array([0.5], np.float32), np.array([0]), None)))
    g.add_tensor(Tensor("w", (4,), "float32"))
    g.nodes = [Node("Dequantize", ["wq"], ["w"], {}, "w"),
               Node("Add", ["x", "w"], ["y"], {"activation": "NONE"}, "y")]
    assert fc.fold_constants(g, None) == 0
    assert [n.op for n in g.nodes] == ["Dequantize", "Add"]
