"""Detector heads: a concatenation whose inputs' ranges differ by more than 16x (box pixels next
to 0..1 scores, `tests/models/corpus/yolo_head.onnx`) is quantized per branch: TFLite keeps the
concat in int16 with each branch requantized into it, QDQ leaves its output float with each
branch on its own int8 scale; the report names it. With one int8 scale the scores kept 14-16 dB
while the output SQNR (44 dB, the boxes') hid it. Oracles: onnxruntime (optimizations off) for
the float model and the QDQ result, LiteRT and TFLite Micro for the TFLite result (16x8 kernels;
the integer executor bit-exact with TFLite Micro)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner

from helpers.oracles import ROOT, tflm_invoke
from qconvert.cli import main

MODEL = ROOT / "tests" / "models" / "corpus" / "yolo_head.onnx"
CALIB = ROOT / "tests" / "models" / "corpus" / "yolo_head_calib.npy"


def _ort(path, x):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(
        None, {"images": x})[0]


def _sqnr(want, got):
    want = want.astype(np.float64)
    return 10 * np.log10(np.sum(want ** 2) / np.sum((want - got) ** 2))


def _branches(want, got) -> dict:
    """SQNR of boxes (channels 0..3), objectness (4) and class scores (5..7)."""
    return {k: _sqnr(want[:, s], got[:, s]) for k, s in
            (("boxes", slice(0, 4)), ("objectness", slice(4, 5)), ("classes", slice(5, 8)))}


def _images(seed):
    rng = np.random.default_rng(seed)
    smooth = np.kron(rng.uniform(0, 1, (1, 3, 8, 8)), np.ones((1, 1, 8, 8)))
    return np.clip(smooth + rng.normal(0, 0.05, smooth.shape), 0, 1).astype(np.float32)


@pytest.mark.parametrize("verify", [[], ["--verify", "4"]], ids=["plain", "verify"])
def test_tflite_keeps_the_detector_concat_in_int16(tmp_path, verify):
    out = tmp_path / "yolo_int8.tflite"
    result = CliRunner().invoke(main, ["quantize", str(MODEL), "--calibration", str(CALIB),
                                       "-o", str(out), *verify])
    assert result.exit_code == 0, result.output
    assert "per-branch concat: 'detections'" in result.output
    assert "kept in int16" in result.output
    data = out.read_bytes()
    for seed in (0, 1):
        x = _images(seed)
        want = _ort(MODEL, x)
        raw = tflm_invoke(data, [np.clip(np.round(x.transpose(0, 2, 3, 1) / (1 / 255)) - 128,
                                         -128, 127).astype(np.int8)], arena_size=1 << 20)[0]
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(model_content=data)
        od = it.get_output_details()[0]
        assert od["dtype"] == np.int16  # the detections output is int16
        scale, zp = od["quantization"]
        got = (raw.astype(np.float64) - zp) * scale
        sq = _branches(want, got)
        assert min(sq.values()) > 35, sq


def test_qdq_leaves_the_detector_concat_float(tmp_path):
    out = tmp_path / "yolo_qdq.onnx"
    result = CliRunner().invoke(main, ["quantize", str(MODEL), "--calibration", str(CALIB),
                                       "-o", str(out), "--verify", "4"])
    assert result.exit_code == 0, result.output
    assert "per-branch concat" in result.output and "left float" in result.output
    for seed in (0, 1):
        x = _images(seed)
        sq = _branches(_ort(MODEL, x), _ort(out, x))
        assert min(sq.values()) > 35, sq


def test_one_int8_scale_would_swamp_the_scores():
    """The oracle that makes the case: the same concat at one int8 scale (its output's range)
    leaves the scores far below the boxes."""
    x = _images(0)
    want = _ort(MODEL, x)
    scale = (want.max() - min(want.min(), 0)) / 255
    got = np.round(want / scale) * scale
    sq = _branches(want, got)
    assert sq["boxes"] > 40 and sq["classes"] < 25 and sq["objectness"] < 25, sq


def test_close_ranges_are_left_alone():
    """must not: a concat whose inputs' ranges are within 16x goes int16 or float."""
    from qconvert.ir import Graph, Node, Tensor
    from qconvert.quant.concat_branches import swamped_concats

    g = Graph("main", inputs=["a", "b"], outputs=["y"])
    for name in ("a", "b"):
        g.add_tensor(Tensor(name, (1, 4), "float32"))
    g.add_tensor(Tensor("y", (1, 8), "float32"))
    g.nodes = [Node("Concat", ["a", "b"], ["y"], {"axis": 1}, "y")]
    assert swamped_concats(g, {"a": (-1.0, 2.4), "b": (0.0, 1.0), "y": (-1.0, 2.4)}) == []
    assert swamped_concats(g, {"a": (0.0, 15.0), "b": (0.0, 1.0), "y": (0.0, 15.0)}) == []
    found = swamped_concats(g, {"a": (0.0, 96.0), "b": (0.0, 1.0), "y": (0.0, 96.0)})
    assert [(f["layer"], f["input"]) for f in found] == [("y", "b")]


def test_concat_whose_group_has_no_16x8_kernel_is_marked():
    """must not: a swamped concat sharing its scale with an op TFLite Micro has no 16x8 kernel
    for (Gather here) is sent to --int16-layers (which would refuse naming an option the user
    never gave): it is marked with that op and stays int8."""
    import numpy as np

    from qconvert.ir import Graph, Node, Tensor
    from qconvert.quant.concat_branches import swamped_concats

    g = Graph("main", inputs=["a", "b"], outputs=["z"])
    for name in ("a", "b"):
        g.add_tensor(Tensor(name, (1, 4), "float32"))
    g.add_tensor(Tensor("y", (1, 8), "float32"))
    g.add_tensor(Tensor("i", (2,), "int32", np.array([0, 5], np.int32)))
    g.add_tensor(Tensor("z", (1, 2), "float32"))
    g.nodes = [Node("Concat", ["a", "b"], ["y"], {"axis": 1}, "y"),
               Node("Gather", ["y", "i"], ["z"], {"axis": 1, "batch_dims": 0}, "z")]
    found = swamped_concats(g, {"a": (0.0, 96.0), "b": (0.0, 1.0), "y": (0.0, 96.0),
                                "z": (0.0, 96.0)})
    assert len(found) == 1 and "Gather" in found[0].get("blocker", ""), found


def test_qdq_concat_read_by_a_layer_keeps_one_int8_scale():
    """must not: a swamped concat whose output a conv / FC layer reads (through same-scale ops
    too) is not left float in QDQ output (the layer needs an int8 input): it keeps one scale and
    is marked; one that only reaches the output is left float. 16x8 blockers mean nothing there."""
    import numpy as np

    from qconvert.ir import Graph, Node, Tensor
    from qconvert.quant.concat_branches import float_tails, swamped_concats

    g = Graph("main", inputs=["a", "b"], outputs=["z", "y2"])
    for name in ("a", "b"):
        g.add_tensor(Tensor(name, (1, 4), "float32"))
    for name in ("y", "r", "y2"):
        g.add_tensor(Tensor(name, (1, 8), "float32"))
    g.add_tensor(Tensor("w", (2, 8), "float32", np.ones((2, 8), np.float32)))
    g.add_tensor(Tensor("z", (1, 2), "float32"))
    g.nodes = [Node("Concat", ["a", "b"], ["y"], {"axis": 1}, "y"),
               Node("Reshape", ["y"], ["r"], {"shape": [1, 8]}, "r"),
               Node("Gemm", ["r", "w"], ["z"], {"transB": 1}, "z"),
               Node("Concat", ["b", "a"], ["y2"], {"axis": 1}, "y2")]
    ranges = {"a": (0.0, 96.0), "b": (0.0, 1.0), "y": (0.0, 96.0), "r": (0.0, 96.0),
              "z": (0.0, 900.0), "y2": (0.0, 96.0)}
    found = swamped_concats(g, ranges)
    assert sorted(f["output"] for f in found) == ["y", "y2"]
    floats = float_tails(g, found, dict.fromkeys(ranges), layers={"z"})
    assert floats == ["y2"]
    marked = {f["output"]: f.get("blocker") for f in found}
    assert marked == {"y": "a layer reads its output", "y2": None}
