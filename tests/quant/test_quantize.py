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

from helpers.oracles import (SAMPLE_MODELS, TEST_MODELS, litert_per_sample, random_inputs,
                             run_litert, run_tflm)
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.int8.prepare import layer_params
from qconvert.ir import Tensor
from qconvert.formats.model_io import load_model

DIGITS = TEST_MODELS / "digits_data_nchw.npz"


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
    result = _invoke(["quantize", TEST_MODELS / name, "--calibration-random", 16, "-o", out,
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
    result = _invoke(["quantize", TEST_MODELS / "digits_cnn.onnx", "--calibration",
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

    float_acc, int8_acc = top1(TEST_MODELS / "digits_cnn.onnx"), top1(out)
    assert float_acc > 0.9 and int8_acc >= float_acc - 0.01
    ops = [n.op for n in load_model(out).graph.nodes]
    assert "Quantize" in ops and "Dequantize" in ops and "BatchNorm" not in ops


def _litert_outputs(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    """LiteRT (reference kernels) on each sample of `x`, outputs stacked."""
    return litert_per_sample(model_bytes, x)


def _tflm_outputs(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    """TFLite Micro on each sample of `x`, outputs stacked."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model_bytes)
    rows = []
    for sample in x:
        it.set_input(sample[None], 0)
        it.invoke()
        rows.append(np.array(it.get_output(0))[0])
    return np.stack(rows)


@pytest.mark.parametrize("io_type", ["int8", "float32"])
def test_digits_tflite_int8_top1_within_one_point_in_tflm_and_litert(tmp_path, io_type):
    """The Keras model's dynamic-batch flatten (Shape -> STRIDED_SLICE -> PACK -> Reshape)
    becomes a static Reshape; the int8 model runs in TFLite Micro and LiteRT, our integer
    executor equals TFLite Micro on the whole test set, and top-1 stays within 1 point."""
    data = np.load(TEST_MODELS / "digits_data_nhwc.npz")
    x, labels = data["test"].astype(np.float32), data["labels"][-len(data["test"]):]
    src = TEST_MODELS / "digits_cnn.tflite"
    out = tmp_path / "digits_int8.tflite"
    result = _invoke(["quantize", src, "--calibration",
                      f"{TEST_MODELS / 'digits_data_nhwc.npz'}:calib", "--io-type", io_type,
                      "-o", out])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    assert [n.op for n in graph.nodes if n.op in ("Shape", "StridedSlice", "Pack")] == []
    assert graph.tensors[graph.inputs[0]].shape == (1, 16, 16, 1)
    float_logits = _litert_outputs(src.read_bytes(), x)
    if io_type == "int8":
        q = graph.tensors[graph.inputs[0]].quant
        xq = np.clip(np.floor(x / q.scale[0] + 0.5) + q.zero_point[0], -128, 127).astype(np.int8)
    else:
        xq = x
    tflm = _tflm_outputs(out.read_bytes(), xq)
    litert = _litert_outputs(out.read_bytes(), xq)
    ours = run_int8(graph, {graph.inputs[0]: xq})[graph.outputs[0]]
    np.testing.assert_array_equal(ours, tflm)
    float_acc = float(np.mean(float_logits.argmax(1) == labels))
    tflm_acc = float(np.mean(tflm.argmax(1) == labels))
    litert_acc = float(np.mean(litert.argmax(1) == labels))
    assert float_acc > 0.85
    assert tflm_acc >= float_acc - 0.01 and litert_acc >= float_acc - 0.01


def test_percentile_method_end_to_end_clips_an_outlier(tmp_path):
    """With one extreme calibration sample, percentile ranges ignore it (smaller input scale
    than minmax) and the int8 model still runs bit-exactly in TFLite Micro."""
    rng = np.random.default_rng(3)
    calib = rng.standard_normal((32, 1, 640)).astype(np.float32)
    calib[0, 0, 0] = 400.0
    np.save(tmp_path / "calib.npy", calib)
    scales = {}
    for method in ("minmax", "percentile"):
        out = tmp_path / f"{method}.tflite"
        result = _invoke(["quantize", TEST_MODELS / "ad01_fp32.tflite", "--calibration",
                          tmp_path / "calib.npy", "--method", method, "--percentile", 99.9,
                          "-o", out])
        assert result.exit_code == 0, result.output
        graph = load_model(out).graph
        scales[method] = float(graph.tensors[graph.inputs[0]].quant.scale[0])
        x = _tflm_inputs(out, 0)[0]
        np.testing.assert_array_equal(run_tflm(out.read_bytes(), 0)[0],
                                      run_int8(graph, {graph.inputs[0]: x})[graph.outputs[0]])
    assert scales["minmax"] >= 400 / 255 * 0.99
    assert scales["percentile"] < scales["minmax"] / 10


def test_image_folder_calibration_through_the_cli(tmp_path):
    """A folder of PNGs, resized to the input and normalized with --scale, calibrates the model:
    the input range equals what the same pixels give by hand (scale and zero point of [0, 1])."""
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(6):
        pixels = rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)
        pixels[0, 0] = (0, 0, 0)
        pixels[-1, -1] = (255, 255, 255)
        Image.fromarray(pixels).save(folder / f"img{i}.png")
    out = tmp_path / "resnet_int8.tflite"
    result = _invoke(["quantize", TEST_MODELS / "pretrainedResnet.tflite", "--calibration",
                      folder, "--scale", 1 / 255, "-o", out])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    q = graph.tensors[graph.inputs[0]].quant
    # resizing keeps pixel values within [0, 255]; the extremes of each image survive only
    # approximately, so the range is [0, 1] up to resampling
    assert q.scale[0] == pytest.approx(1 / 255, rel=0.05) and -128 <= q.zero_point[0] <= -120
    assert len(run_tflm(out.read_bytes())) == 1


def test_bad_calibration_and_models_fail_cleanly(tmp_path):
    bad = {
        "shape.npy": np.zeros((4, 1, 8, 8), np.float32),
        "nan.npy": np.full((4, 1, 16, 16), np.nan, np.float32),
    }
    for name, array in bad.items():
        np.save(tmp_path / name, array)
    (tmp_path / "empty").mkdir()
    cases = [
        (TEST_MODELS / "digits_cnn.onnx", ["--calibration", tmp_path / "shape.npy"], "shape"),
        (TEST_MODELS / "digits_cnn.onnx", ["--calibration", tmp_path / "nan.npy"], "NaN"),
        (TEST_MODELS / "digits_cnn.onnx", ["--calibration", tmp_path / "empty"], "empty"),
        (TEST_MODELS / "kws_ref_model.tflite", ["--calibration-random", 2], "already quantized"),
        (SAMPLE_MODELS / "unknown_builtin.tflite", ["--calibration-random", 2],
         "no int8 rule: COS (unknown), FLOOR (unknown)"),
        (TEST_MODELS / "digits_cnn.onnx", [], "exactly one of"),
    ]
    for model, extra, words in cases:
        before = sorted(os.listdir(tmp_path))
        result = _invoke(["quantize", model, "-o", tmp_path / ("o" + model.suffix)] + extra)
        assert result.exit_code == 1, (model, extra, result.output)
        assert "qconvert: error:" in result.output and "Traceback" not in result.output
        assert words.lower() in result.output.lower(), result.output
        assert sorted(os.listdir(tmp_path)) == before


def test_scalar_constant_operands_stay_scalars_in_int8(tmp_path):
    """A float TFLite model whose Mul and Maximum take 0-d constants: the int8 model keeps them
    0-d, runs in TFLite Micro and equals our integer executor bit for bit."""
    from helpers.float_tflite_nets import TfNet

    net = TfNet(seed=4)
    x = net.input("x", (1, 8, 8, 3))
    c = net.conv(x, 4, "conv")
    net.g.add_tensor(Tensor("k", (), "float32", np.array(0.75, np.float32)))
    net.g.add_tensor(Tensor("floor", (), "float32", np.array(-0.5, np.float32)))
    m = net.node("Mul", [c, "k"], "scaled", (1, 6, 6, 4), activation="NONE")
    net.node("Maximum", [m, "floor"], "y", (1, 6, 6, 4))
    src = tmp_path / "scalar.tflite"
    src.write_bytes(net.build(["y"]))
    out = tmp_path / "scalar_int8.tflite"
    result = _invoke(["quantize", src, "--calibration-random", 8, "--no-fuse", "-o", out])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    assert graph.tensors["k"].shape == () and graph.tensors["k"].dtype == "int8"
    for seed in (0, 1):
        x = _tflm_inputs(out, seed)[0]
        np.testing.assert_array_equal(run_tflm(out.read_bytes(), seed)[0],
                                      run_int8(graph, {graph.inputs[0]: x})["y"])


def test_tflite_report_sqnr_is_tflm_against_litert(tmp_path):
    """The report's output SQNR (and the last layer's end-to-end SQNR) equal the SQNR between
    LiteRT's float outputs and TFLite Micro's dequantized int8 outputs on the same samples."""
    rng = np.random.default_rng(5)
    calib = rng.uniform(-1, 1, (12, 640)).astype(np.float32)
    np.save(tmp_path / "calib.npy", calib)
    out = tmp_path / "ad01_int8.tflite"
    result = _invoke(["quantize", TEST_MODELS / "ad01_fp32.tflite", "--calibration",
                      tmp_path / "calib.npy", "--batch-size", 5, "-o", out,
                      "--report", tmp_path / "q.json"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "q.json").read_text())
    assert report["samples"] == report["layer_samples"] == 12
    graph = load_model(out).graph
    qi, qo = graph.tensors[graph.inputs[0]].quant, graph.tensors[graph.outputs[0]].quant
    xq = np.clip(np.floor(calib / qi.scale[0] + 0.5) + qi.zero_point[0], -128, 127).astype(np.int8)
    ref = _litert_outputs((TEST_MODELS / "ad01_fp32.tflite").read_bytes(), calib)
    got = (_tflm_outputs(out.read_bytes(), xq).astype(np.float64) - qo.zero_point[0]) * qo.scale[0]
    expected = 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2))
    (db,) = report["output_sqnr_db"].values()
    assert db == pytest.approx(expected, abs=0.05)
    assert report["layers"][-1]["sqnr_db"] == pytest.approx(expected, abs=0.05)
