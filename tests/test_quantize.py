"""`qconvert quantize` end to end: int8 TFLite models run in TFLite Micro and LiteRT and our
integer executor matches TFLite Micro bit for bit on them; ONNX QDQ output runs in onnxruntime
and keeps the digits test-set top-1 within 1 point of float; the report's multipliers and shifts
are the ones TFLite Micro derives; bad input fails cleanly with nothing written."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import SHARED_MODELS, random_inputs, run_litert, run_tflm
from qconvert.cli import main
from qconvert.executor.int_executor import layer_params, run_int8
from qconvert.model_io import load_model

DIGITS = SHARED_MODELS / "digits_data_nchw.npz"


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _tflm_inputs(path, seed):
    from tflite_micro.python.tflite_micro import runtime

    d = runtime.Interpreter.from_bytes(path.read_bytes()).get_input_details(0)
    return random_inputs([(d["shape"], d["dtype"])], seed)


@pytest.mark.parametrize("name", ["pretrainedResnet.tflite", "ad01_fp32.tflite",
                                  "kws_ref_model_float32.tflite"])
@pytest.mark.parametrize("io_type", ["int8", "float32"])
def test_int8_tflite_runs_in_tflm_and_matches_our_integer_executor(tmp_path, name, io_type):
    out = tmp_path / "int8.tflite"
    result = _invoke(["quantize", SHARED_MODELS / name, "--calibration-random", 16, "-o", out,
                      "--io-type", io_type, "--report", tmp_path / "q.json"])
    assert result.exit_code == 0, result.output
    model = load_model(out)
    graph = model.graph
    assert all(graph.tensors[n].dtype == ("int8" if io_type == "int8" else "float32")
               for n in graph.inputs + graph.outputs)
    for seed in (0, 1, 2):
        tflm = run_tflm(out.read_bytes(), seed)
        x = _tflm_inputs(out, seed)[0]
        ours = run_int8(graph, {graph.inputs[0]: x})
        for a, b in zip(tflm, [ours[o] for o in graph.outputs]):
            np.testing.assert_array_equal(a, b)
    assert len(run_litert(out.read_bytes())) == len(graph.outputs)
    report = json.loads((tmp_path / "q.json").read_text())
    layers = [n for n in graph.nodes if n.op in ("Conv2D", "DepthwiseConv2D", "FullyConnected")]
    rows = [row for row in report["layers"] if "multiplier" in row]
    assert len(rows) == len(layers)
    checked = 0
    for row, node in zip(rows, layers):  # both in graph order
        params = layer_params(graph, node)
        assert row["multiplier"] == params["output_multiplier"].tolist()
        assert row["shift"] == params["output_shift"].tolist()
        checked += 1
    assert checked > 0


def test_digits_onnx_qdq_top1_within_one_point_in_onnxruntime(tmp_path):
    import onnxruntime as ort

    out = tmp_path / "digits_int8.onnx"
    result = _invoke(["quantize", SHARED_MODELS / "digits_cnn.onnx", "--calibration",
                      f"{DIGITS}:calib", "-o", out])
    assert result.exit_code == 0, result.output
    data = np.load(DIGITS)
    x, labels = data["test"].astype(np.float32), data["labels"]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL

    def top1(path):
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        preds = [np.argmax(sess.run(None, {name: x[i:i + 1]})[0]) for i in range(len(x))]
        return float(np.mean(np.array(preds) == labels[-len(x):]))

    float_acc, int8_acc = top1(SHARED_MODELS / "digits_cnn.onnx"), top1(out)
    assert float_acc > 0.9 and int8_acc >= float_acc - 0.01
    ops = [n.op for n in load_model(out).graph.nodes]
    assert "Quantize" in ops and "Dequantize" in ops and "BatchNorm" not in ops


def test_bad_calibration_and_models_fail_cleanly(tmp_path):
    bad = {
        "shape.npy": np.zeros((4, 1, 8, 8), np.float32),
        "nan.npy": np.full((4, 1, 16, 16), np.nan, np.float32),
    }
    for name, array in bad.items():
        np.save(tmp_path / name, array)
    (tmp_path / "empty").mkdir()
    cases = [
        (SHARED_MODELS / "digits_cnn.onnx", ["--calibration", tmp_path / "shape.npy"], "shape"),
        (SHARED_MODELS / "digits_cnn.onnx", ["--calibration", tmp_path / "nan.npy"], "NaN"),
        (SHARED_MODELS / "digits_cnn.onnx", ["--calibration", tmp_path / "empty"], "empty"),
        (SHARED_MODELS / "kws_ref_model.tflite", ["--calibration-random", 2], "already quantized"),
        (SHARED_MODELS / "digits_cnn.tflite", ["--calibration-random", 2], "STRIDED_SLICE"),
        (SHARED_MODELS / "digits_cnn.onnx", [], "exactly one of"),
    ]
    for model, extra, words in cases:
        before = sorted(os.listdir(tmp_path))
        result = _invoke(["quantize", model, "-o", tmp_path / ("o" + model.suffix)] + extra)
        assert result.exit_code == 1, (model, extra, result.output)
        assert "qconvert: error:" in result.output and "Traceback" not in result.output
        assert words.lower() in result.output.lower(), result.output
        assert sorted(os.listdir(tmp_path)) == before
