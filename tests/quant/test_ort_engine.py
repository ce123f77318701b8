"""`--engine onnxruntime`: calibration and the report's QDQ run on onnxruntime give the same
int8 model and report as qconvert's own executor (ranges equal up to float rounding, so the
scales agree to 1e-5 relative and the report's SQNRs to 0.05 dB); it is refused, in one line,
for TFLite models."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from helpers.oracles import TEST_MODELS
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model


def _quantize(tmp_path, src, out, *extra):
    r = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                  f"{TEST_MODELS / 'digits_data_nchw.npz'}:calib", "-o",
                                  str(out), "--report", str(tmp_path / f"{out.stem}.json"),
                                  *extra])
    assert r.exit_code == 0, r.output
    return json.loads((tmp_path / f"{out.stem}.json").read_text())


def test_onnxruntime_engine_matches_numpy_engine(tmp_path):
    src = TEST_MODELS / "digits_cnn.onnx"
    # minmax: the extremes do not depend on how samples are batched (histograms do: the
    # onnxruntime engine feeds this batch-1 model one sample at a time)
    ours = _quantize(tmp_path, src, tmp_path / "numpy.onnx", "--method", "minmax")
    ort = _quantize(tmp_path, src, tmp_path / "ort.onnx", "--engine", "onnxruntime",
                    "--method", "minmax")
    a, b = load_model(tmp_path / "numpy.onnx").graph, load_model(tmp_path / "ort.onnx").graph
    scales = [n for n in a.tensors if n.endswith("_scale")]
    assert scales and set(scales) == {n for n in b.tensors if n.endswith("_scale")}
    for name in scales:
        np.testing.assert_allclose(a.tensors[name].data, b.tensors[name].data, rtol=1e-5)
    assert ours["samples"] == ort["samples"] and ours["layer_samples"] == ort["layer_samples"]
    for x, y in zip(ours["layers"], ort["layers"]):
        assert x["layer"] == y["layer"]
        for key in ("sqnr_db", "added_sqnr_db"):
            if x[key] is None or x[key] == float("inf"):
                assert x[key] == y[key]
            else:
                assert abs(x[key] - y[key]) < 0.05, (x, y)
    for name, db in ours["output_sqnr_db"].items():
        assert abs(db - ort["output_sqnr_db"][name]) < 0.05


def test_onnxruntime_engine_refused_for_tflite(tmp_path):
    out = tmp_path / "x.tflite"
    r = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / "ad01_fp32.tflite"),
                                  "--calibration-random", "4", "-o", str(out),
                                  "--engine", "onnxruntime"])
    assert r.exit_code == 1
    assert "onnx graphs only" in r.output.lower() and "Traceback" not in r.output
    assert not out.exists()
