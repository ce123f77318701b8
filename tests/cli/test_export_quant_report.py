"""The one-step `export-c model.onnx --calibration ...` / `export-c-header` print and write the
quantization report `quantize` does (issue 27, item 2): the table, --quant-report JSON,
--report-html, --eval / --labels, --verify. Oracle: `quantize` run on the same input; its
report must be the same, figure for figure."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS
from qconvert.cli.app import main

DIGITS = SAMPLE_MODELS / "digits_cnn.onnx"
KWS = SAMPLE_MODELS / "kws_ref_model.tflite"  # int8
DATA = TEST_MODELS / "digits_data_nchw.npz"
CALIB = ["--calibration", f"{DATA}:calib", "--eval", f"{DATA}:test", "--labels",
         f"{DATA}:labels"]


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("q")
    result = _invoke("quantize", DIGITS, *CALIB, "-o", tmp / "q.tflite", "--report",
                     tmp / "q.json", "--verify", 3)
    assert result.exit_code == 0, result.output
    return tmp, result.stdout


@pytest.mark.parametrize("command, out", [("export-c", "c"), ("export-c-header", "w.h")])
def test_one_step_export_prints_and_writes_the_quantize_report(tmp_path, quantized, command,
                                                              out):
    qdir, q_stdout = quantized
    result = _invoke(command, DIGITS, *CALIB, "-o", tmp_path / out, "--quant-report",
                     tmp_path / "r.json", "--report-html", tmp_path / "r.html", "--verify", 3)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.json").read_text() == (qdir / "q.json").read_text()
    table = [line for line in q_stdout.splitlines() if not line.startswith(("wrote", "input ",
                                                                            "transposes"))]
    assert all(line in result.stdout.splitlines() for line in table)
    assert "labelled top-1 over 497 samples" in result.stdout
    assert "Labelled accuracy" in (tmp_path / "r.html").read_text()
    assert "calibrating" not in result.output  # no progress bar: the output is not a terminal


@pytest.mark.parametrize("command, out", [("export-c", "c"), ("export-c-header", "w.h")])
@pytest.mark.parametrize("extra, words", [
    (["--quant-report", "r.json"], "--quant-report and --report-html describe a quantization"),
    (["--eval", f"{DATA}:test"], "--eval, --labels and --verify check a quantization"),
    (["--verify", "2"], "--eval, --labels and --verify check a quantization"),
])
def test_report_options_on_an_int8_model_are_refused(tmp_path, command, out, extra, words):
    """Must not: an int8 model has no quantization to report; nothing written."""
    extra = [str(tmp_path / e) if e.endswith(".json") else e for e in extra]
    result = _invoke(command, KWS, "-o", tmp_path / out, *extra)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("stem, expected", [
    ("vww_96_float", "vww_96"), ("net-fp32", "net"), ("digits.float32", "digits"),
    ("float_net", "float_net"), ("floater", "floater")])
def test_one_step_c_name_drops_the_float_tag(tmp_path, stem, expected):
    """A float model's file tag does not name the int8 C (`vww_96_float_invoke`); an int8 model
    keeps its stem whatever it says."""
    import shutil

    model = tmp_path / f"{stem}.onnx"
    shutil.copy(DIGITS, model)
    result = _invoke("export-c", model, "--calibration", f"{DATA}:calib", "-o", tmp_path / "c")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "c" / f"{expected}.h").exists()
    assert f"int {expected}_invoke(" in (tmp_path / "c" / f"{expected}.h").read_text()
    int8 = tmp_path / "kws_float.tflite"
    shutil.copy(KWS, int8)
    assert _invoke("export-c", int8, "-o", tmp_path / "k").exit_code == 0
    assert (tmp_path / "k" / "kws_float.h").exists()


@pytest.mark.parametrize("extra", [["--eval", f"{DATA}:test"], ["--per-tensor"],
                                   ["--example"]])
def test_q7_scheme_refuses_the_int8_report_options(tmp_path, extra):
    """Must not: --scheme q7 silently ignoring an option of the int8 path; nothing written."""
    result = _invoke("export-c", DIGITS, "--calibration", f"{DATA}:calib", "--scheme", "q7",
                     "-o", tmp_path / "c", *extra)
    assert result.exit_code == 1 and "not with --scheme q7" in result.stderr
    assert not (tmp_path / "c").exists()


def test_q7_scheme_is_command_line_only_in_the_api():
    import qconvert

    with pytest.raises(qconvert.QconvertError, match="on the command line only so far"):
        qconvert.export_c(qconvert.load(DIGITS), calibration_random=2, scheme="q7")
