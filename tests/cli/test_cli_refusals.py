"""Regressions from the adversarial QA pass over the CLI: each case once made a command exit 0
with a wrong file, crash with a traceback, or fail with a misleading line."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS
from qconvert.cli.app import main

ONNX = TEST_MODELS / "digits_cnn.onnx"
CAL = SAMPLE_MODELS / "digits_calib_nchw.npy"


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _one_line_error(result, *needles, warnings_ok=False):
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    if warnings_ok:  # --calibration-random's warning comes first
        lines = [ln for ln in lines if not ln.startswith("qconvert: warning: ")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("qconvert: error: "), lines[0]
    for needle in needles:
        assert str(needle) in lines[0], lines[0]
    return lines[0]


# 1. Two outputs of one command resolving to one file: refused before any work, nothing written.
@pytest.mark.parametrize("args", [
    ["fuse", ONNX, "-o", "x.onnx", "--report", "x.onnx"],
    ["quantize", ONNX, "--calibration", CAL, "-o", "y.tflite", "--report", "y.tflite"],
    ["quantize", ONNX, "--calibration", CAL, "-o", "z.onnx", "--report-html", "z.onnx"],
    ["quantize", ONNX, "--calibration", CAL, "-o", "w.onnx", "--report", "r.json",
     "--report-html", "r.json"],
    ["quantize", ONNX, "--calibration", CAL, "-o", "w.onnx", "--report", "r.json",
     "--report-html", "./r.json"],
])
def test_two_outputs_on_one_path_are_refused(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    result = _invoke(args)
    _one_line_error(result, "same file")
    assert list(tmp_path.iterdir()) == []


def test_report_on_the_default_output_path_is_refused(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(ONNX.read_bytes())
    result = _invoke(["fuse", model, "--report", tmp_path / "m_fused.onnx"])
    _one_line_error(result, "same file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_distinct_outputs_still_written(tmp_path):
    """Must not fire: -o with its own path (convert adds it once) and a separate report."""
    out, report = tmp_path / "x.onnx", tmp_path / "x.json"
    assert _invoke(["convert", ONNX, "-o", out]).exit_code == 0
    result = _invoke(["fuse", ONNX, "-o", out, "--report", report])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:1] != b"{" and report.read_bytes()[:1] == b"{"


def _onnx_model(path, nodes, outputs, initializers=()):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    outs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in outputs]
    graph = helper.make_graph(nodes, "g", [x], outs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _conv_model(path, outputs):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float32), "B")
    conv = helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1], name="c")
    return _onnx_model(path, [conv], outputs, [w, b])


def _calibration(tmp_path, n=6):
    path = tmp_path / "cal.npy"
    np.save(path, np.random.default_rng(1).standard_normal((n, 1, 3, 8, 8)).astype(np.float32))
    return path


def _ort(path, x):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess, dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))


# 2. A graph output that is an initializer: one line naming it, for every output format and
# batch, also after conversion to TFLite (it once was a KeyError traceback, or a batch error).
@pytest.mark.parametrize("suffix", [".onnx", ".tflite"])
def test_constant_graph_output_is_refused_by_name(tmp_path, suffix):
    model = _conv_model(tmp_path / "m.onnx", [("y", [1, 4, 8, 8]), ("B", [4])])
    out = tmp_path / f"q{suffix}"
    result = _invoke(["quantize", model, "--calibration", _calibration(tmp_path), "-o", out])
    _one_line_error(result, model, "'B'", "constant")
    assert not out.exists()


def test_constant_graph_output_after_conversion_names_the_cause(tmp_path):
    model = _conv_model(tmp_path / "m.onnx", [("y", [1, 4, 8, 8]), ("B", [4])])
    converted = tmp_path / "m.tflite"
    assert _invoke(["convert", model, "-o", converted]).exit_code == 0
    result = _invoke(["quantize", converted, "--calibration-random", "2", "-o",
                      tmp_path / "q.tflite"])
    line = _one_line_error(result, converted, "'B'", "constant", warnings_ok=True)
    assert "batch" not in line


# 3. A graph input that is also a graph output: the QDQ model keeps the input's name (it once
# renamed it, and the report's run failed with "feeds must share one sample count ... got []").
def test_input_that_is_also_an_output_keeps_its_name_and_value(tmp_path):
    model = _conv_model(tmp_path / "m.onnx", [("y", [1, 4, 8, 8]), ("x", [1, 3, 8, 8])])
    out = tmp_path / "q.onnx"
    result = _invoke(["quantize", model, "--calibration", _calibration(tmp_path), "-o", out])
    assert result.exit_code == 0, result.output
    x = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)
    sess, got = _ort(out, x)
    assert [i.name for i in sess.get_inputs()] == ["x"]
    assert list(got) == ["y", "x"]
    np.testing.assert_array_equal(got["x"], x)  # passed through, not quantized
    _, ref = _ort(model, x)
    err = got["y"] - ref["y"]
    assert 10 * np.log10(np.sum(ref["y"] ** 2) / np.sum(err ** 2)) > 25


def test_zero_node_passthrough_quantizes_to_itself(tmp_path):
    model = _onnx_model(tmp_path / "m.onnx", [], [("x", [1, 3, 8, 8])])
    out = tmp_path / "q.onnx"
    result = _invoke(["quantize", model, "--calibration", _calibration(tmp_path), "-o", out])
    assert result.exit_code == 0, result.output
    x = np.random.default_rng(6).standard_normal((1, 3, 8, 8)).astype(np.float32)
    sess, got = _ort(out, x)
    assert [i.name for i in sess.get_inputs()] == ["x"] and list(got) == ["x"]
    np.testing.assert_array_equal(got["x"], x)


# 4. An int8 model far from float (here a difference of two nearly equal conv outputs, each
# quantized on its own large range) is written with a one-line warning, exit 0.
def _cancelling_model(path):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W1"),
             numpy_helper.from_array(w + 1e-3 * rng.standard_normal(w.shape).astype(np.float32),
                                     "W2")]
    nodes = [helper.make_node("Conv", ["x", "W1"], ["a"], pads=[1, 1, 1, 1], name="c1"),
             helper.make_node("Conv", ["x", "W2"], ["b"], pads=[1, 1, 1, 1], name="c2"),
             helper.make_node("Sub", ["a", "b"], ["y"], name="d")]
    return _onnx_model(path, nodes, [("y", [1, 4, 8, 8])], inits)


def test_low_output_sqnr_warns_in_one_line(tmp_path):
    model = _cancelling_model(tmp_path / "m.onnx")
    out = tmp_path / "q.onnx"
    cal = _calibration(tmp_path)
    result = _invoke(["quantize", model, "--calibration", cal, "-o", out, "--report",
                      tmp_path / "r.json"])
    assert result.exit_code == 0, result.output
    assert out.exists()
    import json

    db = json.loads((tmp_path / "r.json").read_text())["output_sqnr_db"]["y"]
    # independent check of the figure: onnxruntime on both models, the calibration samples
    x = np.load(cal)
    ref = np.concatenate([_ort(model, s)[1]["y"] for s in x])
    got = np.concatenate([_ort(out, s)[1]["y"] for s in x])
    assert 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - got) ** 2)) < 10 and db < 10
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: warning: "), result.stderr
    assert "'y'" in lines[0] and "--verify" in lines[0] and "--method" in lines[0]


def test_good_output_sqnr_does_not_warn(tmp_path):
    result = _invoke(["quantize", ONNX, "--calibration", CAL, "-o", tmp_path / "q.onnx"])
    assert result.exit_code == 0, result.output
    import re

    db = float(re.search(r"output logits: SQNR ([\d.]+) dB", result.output).group(1))
    assert db > 20  # ~35 dB, well above the floor
    assert result.stderr == ""


# 5. Message quality.
@pytest.mark.parametrize("args", [
    ["quantize", ONNX, "--calibration", CAL, "--io-type", "bogus", "-o", "a.tflite"],
    ["quantize", "--io-type", "bogus", "--calibration", CAL, ONNX, "-o", "a.tflite"],
    ["export-c-header", ONNX, "--calibration-random", "0"],
    ["inspect", "--nope", ONNX],
])
def test_usage_errors_name_the_model(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    _one_line_error(_invoke(args), f"error: {ONNX}: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["convert", "fuse", "quantize"])
def test_empty_output_path_names_the_model(command):
    extra = ["--calibration", CAL] if command == "quantize" else []
    _one_line_error(_invoke([command, ONNX, *extra, "-o", ""]), ONNX, "output path is empty")


@pytest.mark.parametrize("command", ["export-c", "export-c-header"])
def test_export_refuses_a_bad_engine_before_the_random_data_warning(tmp_path, command):
    out = tmp_path / ("c" if command == "export-c" else "w.h")
    result = _invoke([command, ONNX, "--calibration-random", "2", "--engine", "onnxruntime",
                      "-o", out])
    _one_line_error(result, ONNX, "--engine onnxruntime")  # one line: no warning before it
    assert not out.exists()


def test_fuse_to_tflite_points_to_convert(tmp_path):
    result = _invoke(["fuse", ONNX, "-o", tmp_path / "x.tflite"])
    _one_line_error(result, ONNX, "qconvert convert")
    assert not (tmp_path / "x.tflite").exists()


def test_input_shape_errors_quote_the_shape_given(tmp_path):
    result = _invoke(["convert", ONNX, "--input-shape", "input:1,1,9,9", "-o", tmp_path / "s.onnx"])
    line = _one_line_error(result, ONNX, "--input-shape input:1,1,9,9:")
    assert "--input-shape input:1,1,16,16" not in line
    result = _invoke(["convert", ONNX, "--input-shape", "input:1,2", "-o", tmp_path / "s.onnx"])
    _one_line_error(result, "--input-shape input:1,2:", "rank 4")


def test_verify_error_names_the_output_as_the_docs_show(tmp_path, monkeypatch):
    """docs/verify.md's `--verify` example (a fusion that scales the first conv's weights by 1.5) is
    what the command prints: the pass and the output 'logits' with its figures."""
    import re
    from pathlib import Path

    import qconvert.passes as passes

    original = passes.get_pass("fuse-conv-batchnorm")

    def broken(graph, context):
        count = original.run(graph, context)
        conv = next((n for n in graph.nodes if n.op == "Conv2D"), None)
        if count and conv is not None:
            w = graph.tensors[conv.inputs[1]]
            w.data = w.data * np.float32(1.5)
        return count

    monkeypatch.setitem(passes.registry.PASSES, "fuse-conv-batchnorm",
                        passes.Pass("fuse-conv-batchnorm", broken, original.summary))
    model = tmp_path / "model.onnx"
    model.write_bytes((SAMPLE_MODELS / "digits_cnn.onnx").read_bytes())
    monkeypatch.chdir(tmp_path)
    line = _one_line_error(_invoke(["fuse", "model.onnx", "-o", "fused.onnx", "--verify", "8"]))
    page = (Path(__file__).resolve().parents[2] / "docs" / "verify.md").read_text()
    shown = re.search(r"\$ qconvert fuse model.onnx -o fused.onnx --verify 8\n\s+(.*)\n",
                      page).group(1)
    assert "output 'logits'" in line and line == shown
