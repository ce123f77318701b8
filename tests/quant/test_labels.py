"""`quantize --eval DATA --labels FILE` (issue 27, item 2): float and int8 top-1 over every
evaluation sample (no cap) and both confusion matrices, in the printed report, the JSON and the
HTML. Oracles: onnxruntime (float, optimizations off) and TFLite Micro (int8), each run on all
497 labelled digits test samples; the confusion matrices counted here from their predictions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import qconvert
from helpers.oracles import SAMPLE_MODELS, TEST_MODELS
from qconvert.cli.app import main

DIGITS = SAMPLE_MODELS / "digits_cnn.onnx"
DATA = TEST_MODELS / "digits_data_nchw.npz"


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _confusion(labels, predicted, classes):
    m = [[0] * classes for _ in range(classes)]
    for t, p in zip(labels.tolist(), predicted.tolist()):
        m[t][p] += 1
    return m


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("labels")
    result = _invoke("quantize", DIGITS, "--calibration", f"{DATA}:calib", "--eval",
                     f"{DATA}:test", "--labels", f"{DATA}:labels", "-o", tmp / "q.tflite",
                     "--report", tmp / "r.json", "--report-html", tmp / "r.html")
    assert result.exit_code == 0, result.output
    return tmp, result.output


def test_float_and_int8_top1_over_every_sample_match_the_runtimes(labelled):
    import onnxruntime as ort
    from tflite_micro.python.tflite_micro import runtime

    tmp, output = labelled
    data = np.load(DATA)
    x, labels = data["test"], data["labels"]
    report = json.loads((tmp / "r.json").read_text())["labelled"]

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(DIGITS.read_bytes(), so, providers=["CPUExecutionProvider"])
    float_pred = np.array([sess.run(None, {"input": x[i:i + 1]})[0].argmax()
                           for i in range(len(x))])

    blob = (tmp / "q.tflite").read_bytes()
    it = runtime.Interpreter.from_bytes(blob)
    q = it.get_input_details(0)["quantization_parameters"]
    s, z = float(q["scales"][0]), int(q["zero_points"][0])
    v = x.transpose(0, 2, 3, 1) / s
    xq = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + z, -128, 127).astype(np.int8)
    int_pred = []
    for i in range(len(x)):
        it.set_input(xq[i:i + 1], 0)
        it.invoke()
        int_pred.append(np.array(it.get_output(0)).argmax())
    int_pred = np.array(int_pred)

    assert report["samples"] == len(x) == 497 and report["classes"] == 10
    assert report["float_top1"] == pytest.approx(np.mean(float_pred == labels))
    assert report["int8_top1"] == pytest.approx(np.mean(int_pred == labels))
    assert report["agreement"] == pytest.approx(np.mean(float_pred == int_pred))
    assert report["confusion_float"] == _confusion(labels, float_pred, 10)
    assert report["confusion_int8"] == _confusion(labels, int_pred, 10)
    assert f"labelled top-1 over 497 samples: float {100 * np.mean(float_pred == labels):.2f}%" \
        in output
    assert "over the first 64 of 497 samples" in output  # the SQNR's cap said, not silent


def test_html_has_both_confusion_matrices(labelled):
    tmp, _ = labelled
    page = (tmp / "r.html").read_text()
    assert "Labelled accuracy" in page and page.count('<table class="confusion">') == 2
    assert "<caption>float model</caption>" in page and "<caption>int8 model</caption>" in page


def test_api_labels_as_arrays_give_the_same_figures(labelled):
    tmp, _ = labelled
    data = np.load(DATA)
    q = qconvert.quantize(qconvert.load(DIGITS), calibration=data["calib"], eval=data["test"],
                          labels=np.eye(10, dtype=np.int64)[data["labels"]], to="tflite")
    assert q.report["labelled"] == json.loads((tmp / "r.json").read_text())["labelled"]


@pytest.mark.parametrize("labels, words", [
    ("short", "100 labels for 497 evaluation samples"),
    ("big", "label 10 is not a class of the model's 10 outputs"),
    ("float", "labels must be one class index"),
    ("noeval", "--labels gives the classes of --eval's samples"),
])
def test_bad_labels_are_one_line_and_write_nothing(tmp_path, labels, words):
    data = np.load(DATA)
    path = tmp_path / "labels.npy"
    np.save(path, {"short": data["labels"][:100], "big": np.full(497, 10),
                   "float": data["labels"].astype(np.float32),
                   "noeval": data["labels"]}[labels])
    evaluation = [] if labels == "noeval" else ["--eval", f"{DATA}:test"]
    out = tmp_path / "q.tflite"
    result = _invoke("quantize", DIGITS, "--calibration", f"{DATA}:calib", *evaluation,
                     "--labels", path, "-o", out)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert not out.exists()


def test_qdq_onnx_labelled_top1_matches_onnxruntime():
    """ONNX QDQ output: the int8 figures are the QDQ model's as onnxruntime runs it."""
    import onnxruntime as ort

    data = np.load(DATA)
    q = qconvert.quantize(qconvert.load(DIGITS), calibration=data["calib"], eval=data["test"],
                          labels=data["labels"], to="onnx", progress=False)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(q.to_bytes(), so, providers=["CPUExecutionProvider"])
    x = data["test"]
    pred = np.array([sess.run(None, {"input": x[i:i + 1]})[0].argmax() for i in range(len(x))])
    acc = q.report["labelled"]
    assert acc["int8_top1"] == pytest.approx(np.mean(pred == data["labels"]))
    assert acc["confusion_int8"] == _confusion(data["labels"], pred, 10)
