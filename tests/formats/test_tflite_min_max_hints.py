"""A float TFLite model whose tensors carry an old converter's min / max hints (quantization
entries with min and max but no scales, as TOCO wrote for DeepLabV3) is a float model: the hints
are dropped on read, so `quantize` calibrates it (it was refused as "already quantized") and
`convert` writes it without them. Oracles: LiteRT runs the hinted file; TFLite Micro the int8
result."""

from __future__ import annotations

import numpy as np
import tflite
from click.testing import CliRunner

from helpers.oracles import run_litert, run_tflm
from qconvert.cli import main
from qconvert.ir import Graph, Model, Node, QuantParams, Tensor
from qconvert.formats.model_io import load_model, serialize


def _hinted_model() -> bytes:
    rng = np.random.default_rng(4)
    g = Graph("main", inputs=["x"], outputs=["y"])

    def hint(lo, hi):
        return QuantParams(np.zeros(0), np.zeros(0), None, np.array([lo], np.float32),
                           np.array([hi], np.float32))

    g.add_tensor(Tensor("x", (1, 12), "float32", quant=hint(-3, 3)))
    g.add_tensor(Tensor("w", (8, 12), "float32", rng.standard_normal((8, 12)).astype(np.float32),
                        quant=hint(-2, 2)))
    g.add_tensor(Tensor("h", (1, 8), "float32", quant=hint(0, 6)))
    g.add_tensor(Tensor("y", (1, 8), "float32", quant=hint(0, 1)))
    g.nodes = [Node("FullyConnected", ["x", "w"], ["h"],
                    {"activation": "RELU", "keep_num_dims": False}, "h"),
               Node("Sigmoid", ["h"], ["y"], {}, "y")]
    data = serialize(Model("tflite", [g]))
    t = tflite.Model.GetRootAs(data, 0).Subgraphs(0).Tensors(0)  # the file carries the hint
    assert t.Quantization().MinLength() == 1 and t.Quantization().ScaleLength() == 0
    return data


def test_min_max_hints_are_dropped_and_the_model_quantizes(tmp_path):
    src = tmp_path / "hinted.tflite"
    src.write_bytes(_hinted_model())
    assert all(t.quant is None for t in load_model(src).graph.tensors.values())
    conv = tmp_path / "conv.tflite"
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(conv), "--verify", "2"])
    assert result.exit_code == 0, result.output
    fb = tflite.Model.GetRootAs(conv.read_bytes(), 0).Subgraphs(0)
    assert all(fb.Tensors(i).Quantization() is None
               or fb.Tensors(i).Quantization().MinLength() == 0
               for i in range(fb.TensorsLength()))
    np.testing.assert_array_equal(run_litert(conv.read_bytes(), 0)[0],
                                  run_litert(src.read_bytes(), 0)[0])
    out = tmp_path / "int8.tflite"
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(1).standard_normal((64, 12)).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--io-type", "float32",
                                       "--verify", "4", "-o", str(out)])
    assert result.exit_code == 0, result.output
    for seed in (0, 1):
        want = run_litert(src.read_bytes(), seed)[0].astype(np.float64)
        got = run_tflm(out.read_bytes(), seed)[0]
        assert 10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2)) > 30


def test_int8_model_keeps_its_quantization(tmp_path):
    """must not: an int8 tensor's quantization (scales present) is dropped with the hints."""
    from qconvert.formats.model_io import load_model as load

    from helpers.oracles import ROOT

    m = load(ROOT / "tests" / "models" / "kws_ref_model.tflite")
    q = [t for t in m.graph.tensors.values() if t.quant is not None]
    assert q and all(t.quant.scale.size for t in q)
