"""The Python API (issue 27, item 1): `qconvert.load / fuse / convert / quantize / export_c /
export_c_header`, `Model.run / save / to_bytes / report / report_html`, `QconvertError`.

Oracles: the command line's own output files for "same input, same bytes" (the API and the CLI
fill the same request; the files are compared byte for byte), onnxruntime for the float
`Model.run`, TFLite Micro for the int8 `Model.run` (bit-exact)."""

from __future__ import annotations

import inspect
import re
import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import qconvert
from helpers.oracles import SAMPLE_MODELS
from qconvert import json_text
from qconvert.cli.app import main

DIGITS = SAMPLE_MODELS / "digits_cnn.onnx"    # float, input 'input' (N, 1, 16, 16)
CALIB = SAMPLE_MODELS / "digits_calib_nchw.npy"
KWS = SAMPLE_MODELS / "kws_ref_model.tflite"  # int8


def _cli(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def calib():
    return np.load(CALIB)


@pytest.fixture(scope="module")
def digits():
    return qconvert.load(DIGITS)


@pytest.fixture(scope="module")
def quantized(digits, calib):
    return qconvert.quantize(digits, calibration=calib, to="tflite")


# -- same input, same bytes -----------------------------------------------------------------
@pytest.mark.parametrize("to", ["tflite", "onnx"])
def test_quantize_same_bytes_as_cli(tmp_path, digits, calib, to):
    out, report = tmp_path / f"q.{to}", tmp_path / "r.json"
    _cli("quantize", DIGITS, "--calibration", CALIB, "-o", out, "--report", report,
         "--method", "minmax", "--fc-per-channel")
    from_path = qconvert.quantize(digits, calibration=str(CALIB), to=to, method="minmax",
                                  fc_per_channel=True)
    from_array = qconvert.quantize(digits, calibration=calib, to=to, method="minmax",
                                   fc_per_channel=True)
    assert from_path.to_bytes() == out.read_bytes()
    assert from_array.to_bytes() == out.read_bytes()
    assert json_text.dumps(from_array.report) + "\n" == report.read_text()


def test_fuse_and_convert_same_bytes_as_cli(tmp_path, digits):
    _cli("fuse", DIGITS, "-o", tmp_path / "f.onnx", "--report", tmp_path / "f.json")
    fused = qconvert.fuse(digits)
    assert fused.to_bytes() == (tmp_path / "f.onnx").read_bytes()
    assert fused.report == json.loads((tmp_path / "f.json").read_text())
    _cli("convert", DIGITS, "-o", tmp_path / "c.tflite", "--input-layout", "nchw")
    converted = qconvert.convert(digits, to="tflite", input_layout="nchw")
    assert converted.to_bytes() == (tmp_path / "c.tflite").read_bytes()
    assert converted.format == "tflite" and converted.name == "digits_cnn_converted.tflite"


def test_load_from_bytes_and_modelproto_same_bytes(digits, calib):
    import onnx

    data = DIGITS.read_bytes()
    a = qconvert.quantize(digits, calibration=calib, to="tflite")
    b = qconvert.quantize(qconvert.load(data, name=DIGITS.name), calibration=calib, to="tflite")
    c = qconvert.quantize(qconvert.load(onnx.load(str(DIGITS)), name=DIGITS.name),
                          calibration=calib, to="tflite")
    assert a.to_bytes() == b.to_bytes() == c.to_bytes()


def test_export_c_one_step_and_two_steps_same_files_as_cli(tmp_path, digits, calib, quantized):
    q_path = tmp_path / "digits_cnn_int8.tflite"
    _cli("quantize", DIGITS, "--calibration", CALIB, "-o", q_path)
    _cli("export-c", q_path, "-o", tmp_path / "two", "--report", tmp_path / "two.json")
    two = qconvert.export_c(quantized, tmp_path / "api_two")
    _cli("export-c", DIGITS, "--calibration", CALIB, "-o", tmp_path / "one", "--name", "dg",
         "--kernels", "cmsis-nn")
    one = qconvert.export_c(digits, calibration=str(CALIB), name="dg", kernels="cmsis-nn")
    # the same samples as an array: the same C but the provenance comment's data name
    arrays = qconvert.export_c(digits, calibration=calib, name="dg", kernels="cmsis-nn")
    assert arrays.files["dg.c"] != one.files["dg.c"]
    assert arrays.files["dg.c"].replace(b"arrays given in Python", CALIB.name.encode()) == \
        one.files["dg.c"]
    for result, folder in ((two, tmp_path / "two"), (one, tmp_path / "one")):
        cli_files = {p.name: p.read_bytes() for p in folder.iterdir()}
        assert result.files == cli_files
    assert {p.name: p.read_bytes() for p in (tmp_path / "api_two").iterdir()} == two.files
    assert two.report == json.loads((tmp_path / "two.json").read_text())
    assert two.report["totals"]["arena_bytes"] == two.summary.arena_size > 0


def test_export_c_header_same_bytes_as_cli(tmp_path):
    _cli("export-c-header", KWS, "-o", tmp_path / "w.h", "--name", "kws", "--with-kernels")
    h = qconvert.export_c_header(qconvert.load(KWS), tmp_path / "api" / "w.h", name="kws",
                                 with_kernels=True)
    assert h.to_bytes() == (tmp_path / "w.h").read_bytes()
    assert {p.name for p in (tmp_path / "api").iterdir()} == set(h.files)
    assert h.files == {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}


# -- calibration forms ----------------------------------------------------------------------
def test_calibration_dict_and_iterable_of_batches_match_the_array(digits, calib, quantized):
    by_name = qconvert.quantize(digits, calibration={"input": calib}, to="tflite")
    batches = (calib[i:i + 5].astype(np.float64) for i in range(0, len(calib), 5))
    streamed = qconvert.quantize(digits, calibration=batches, to="tflite")
    dict_batches = [{"input": calib[i:i + 7]} for i in range(0, len(calib), 7)]
    listed = qconvert.quantize(digits, calibration=dict_batches, to="tflite")
    assert by_name.to_bytes() == streamed.to_bytes() == listed.to_bytes() == quantized.to_bytes()


@pytest.mark.parametrize("calibration, words", [
    ({"x": np.zeros((2, 1, 16, 16), np.float32)}, "no array for input 'input'"),
    (np.zeros((2, 1, 15, 16), np.float32), "shape"),
    (np.full((2, 1, 16, 16), np.nan, np.float32), "NaN"),
    (iter([]), "no batches"),
    (3, "not int"),
])
def test_bad_calibration_arrays_are_one_line_errors(digits, calibration, words):
    with pytest.raises(qconvert.QconvertError) as info:
        qconvert.quantize(digits, calibration=calibration)
    message = str(info.value)
    assert "\n" not in message and words in message, message


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("call, words", [
    (lambda m: qconvert.quantize(m, calibration=np.zeros((1, 1, 16, 16)), method="best"),
     "method='best': give one of 'mse', 'minmax'"),
    (lambda m: qconvert.quantize(m, calibration_random=2, batch_size=0), "batch_size=0"),
    (lambda m: qconvert.quantize(m, percentile=float("nan"), calibration_random=2),
     "percentile=nan"),
    (lambda m: qconvert.quantize(m), "give exactly one of --calibration"),
    (lambda m: qconvert.export_c(m), "float model: to export C it must be int8"),
    (lambda m: qconvert.convert(m, to="keras"), "to='keras'"),
    (lambda m: qconvert.fuse(m, passes="nope"), "unknown pass 'nope'"),
])
def test_refusals_raise_qconvert_error_with_the_cli_line(digits, call, words):
    with pytest.raises(qconvert.QconvertError) as info:
        call(digits)
    assert words in str(info.value) and "\n" not in str(info.value)
    assert qconvert.QconvertError is qconvert.QConvertError


def test_load_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not a model")
    with pytest.raises(qconvert.QconvertError, match=r"bad\.onnx: not a TFLite or ONNX model"):
        qconvert.load(bad)
    with pytest.raises(qconvert.QconvertError, match="no such file"):
        qconvert.load(tmp_path / "missing.tflite")
    with pytest.raises(qconvert.QconvertError, match="expected a path, bytes"):
        qconvert.load(42)


# -- running --------------------------------------------------------------------------------
def test_run_float_matches_onnxruntime(digits, calib):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(DIGITS.read_bytes(), so, providers=["CPUExecutionProvider"])
    ours = digits.run(calib[:20], batch_size=8)
    theirs = np.concatenate([sess.run(None, {"input": calib[i:i + 1]})[0] for i in range(20)])
    assert list(ours) == digits.outputs
    np.testing.assert_allclose(ours[digits.outputs[0]], theirs, rtol=1e-4, atol=1e-4)


def test_run_int8_bit_exact_with_tflite_micro(quantized):
    from helpers.int8_models import tflm

    ir = quantized.ir()
    t = ir.graph.tensors[ir.graph.inputs[0]]
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (6, *t.shape[1:])).astype(np.int8)
    ours = quantized.run(x, batch_size=4)[ir.graph.outputs[0]]
    theirs = np.concatenate([tflm(quantized.to_bytes(), [x[i:i + 1]])[0] for i in range(6)])
    np.testing.assert_array_equal(ours, theirs)


def test_save_writes_model_and_reports(tmp_path, quantized):
    path = quantized.save(tmp_path / "q.tflite", report=tmp_path / "r.json",
                          report_html=tmp_path / "r.html")
    assert path.read_bytes() == quantized.to_bytes()
    assert json.loads((tmp_path / "r.json").read_text()) == quantized.report
    assert (tmp_path / "r.html").read_text() == quantized.report_html()
    assert quantized.report_html().startswith("<!DOCTYPE html>")


def test_a_model_without_report_refuses_report_html(digits):
    with pytest.raises(qconvert.QconvertError, match="only a quantized model has a report"):
        digits.report_html()


# -- the options ----------------------------------------------------------------------------
# CLI options that name files the API returns instead (methods and results)
FILE_OPTIONS = {"output", "report", "report_html", "quant_report"}
API_NAMES = {"eval_data": "eval", "pass_list": "passes", "outdir": "dir"}


@pytest.mark.parametrize("command, function", [
    ("quantize", qconvert.quantize), ("fuse", qconvert.fuse), ("convert", qconvert.convert),
    ("export-c", qconvert.export_c), ("export-c-header", qconvert.export_c_header)])
def test_every_cli_option_is_a_keyword_with_the_same_default(command, function):
    import click

    params = inspect.signature(function).parameters
    ctx = click.Context(main.commands[command])
    for option in main.commands[command].params:
        if not isinstance(option, click.Option) or option.name in FILE_OPTIONS \
                or option.expose_value is False:
            continue
        name = API_NAMES.get(option.name, option.name)
        assert name in params, f"{command} --{option.name} has no keyword"
        default = option.get_default(ctx)
        if type(default).__name__ == "Sentinel":  # click 8.2+: no default given
            default = () if option.multiple else None
        assert params[name].default == default, (command, name, params[name].default, default)
        if isinstance(option.type, click.Choice):
            from qconvert.cli.requests import CHOICES

            assert tuple(option.type.choices) == tuple(c for c in CHOICES[name] if c), name


def test_import_is_cheap():
    """`import qconvert` loads neither the API nor numpy / onnx (the CLI imports it on every
    run); the first use of `qconvert.load` does."""
    code = ("import sys, qconvert; assert 'numpy' not in sys.modules and 'onnx' not in "
            "sys.modules and 'qconvert.api' not in sys.modules, sorted(sys.modules); "
            "qconvert.load; assert 'qconvert.api' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names_have_docstrings_with_examples():
    for name in ("load", "fuse", "convert", "quantize", "export_c", "export_c_header"):
        doc = getattr(qconvert, name).__doc__
        assert doc and ">>>" in doc, name
    assert ">>>" in qconvert.Model.run.__doc__
    with pytest.raises(AttributeError):
        qconvert.not_a_name


def test_iterable_calibration_streams_in_bounded_memory():
    """An iterable of batches is never held whole: 2000 batches of 16 digits (32 MB as
    float32) read with at most a few MB allocated at once, into a memory-mapped array."""
    import tracemalloc

    from qconvert.quant.array_data import arrays_for_inputs
    from qconvert.quant.calibration_data import input_specs

    specs = input_specs(qconvert.load(DIGITS).ir())
    batch = np.random.default_rng(0).random((16, 1, 16, 16))  # float64: converted per batch
    tracemalloc.start()
    data = arrays_for_inputs((batch for _ in range(2000)), specs,
                             dict(mean=None, std=None, scale=None), None, "calibration")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert data["input"].shape == (32000, 1, 16, 16) and isinstance(data["input"], np.memmap)
    assert peak < 4 * 2**20, peak
    np.testing.assert_array_equal(data["input"][-16:], batch.astype(np.float32))


def test_quantize_inputs_is_tflites_quantize(quantized, calib):
    """`quantize_inputs` gives what TFLite's QUANTIZE gives (float32 division, half away from
    zero, saturated), so `q.run(q.quantize_inputs(x))` is the firmware's result."""
    t = quantized.ir().graph.tensors[quantized.inputs[0]]
    x = calib[:5].transpose(0, 2, 3, 1) * np.float32(1.7) - np.float32(0.2)  # some saturate
    r = x / np.float32(t.quant.scale[0])
    expected = np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5) + int(t.quant.zero_point[0]),
                       -128, 127).astype(np.int8)
    got = quantized.quantize_inputs(x)[quantized.inputs[0]]
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(qconvert.QconvertError, match="is float32, the model input is int8"):
        quantized.run(x)


def test_input_shapes_as_a_dict_are_the_cli_option(tmp_path, digits):
    _cli("convert", DIGITS, "-o", tmp_path / "c.tflite", "--input-shape", "input:1,1,16,16")
    api = qconvert.convert(digits, to="tflite", input_shapes={"input": (1, 1, 16, 16)})
    assert api.to_bytes() == (tmp_path / "c.tflite").read_bytes()
    with pytest.raises(qconvert.QconvertError,  # the shapes are applied: a wrong one refused
                       match=r"--input-shape input:2,1,16,16: the model cannot run"):
        qconvert.convert(digits, to="tflite", input_shapes={"input": (2, 1, 16, 16)})


def test_raw_pixel_arrays_get_the_files_scale_warning(digits, calib, capsys):
    """Arrays get the check a .npy file gets: whole numbers in 0..255 for a float input warn
    (stderr, naming `calibration`), and are refused under verify."""
    raw = np.round(calib * 255)
    qconvert.quantize(digits, calibration=raw, to="tflite", progress=False)
    err = capsys.readouterr().err
    assert "qconvert: warning: calibration:" in err and "--scale" in err
    with pytest.raises(qconvert.QconvertError, match="refuses data at a doubtful scale"):
        qconvert.quantize(digits, calibration=raw, to="tflite", verify=2)
    qconvert.quantize(digits, calibration=calib, to="tflite")  # 0..1 data: no warning
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("call, words", [
    (lambda q, d: q.save(d / "model.h"), "save() .h: this writes a model"),
    (lambda q, d: q.save(d / "model.onnx"), "save() .onnx: this model is tflite"),
    (lambda q, d: qconvert.export_c(q, d / "model.c"), "dir .c: export-c writes a folder"),
    (lambda q, d: qconvert.export_c_header(q, d / "w.c"), "path .c: this writes a C header"),
])
def test_output_names_that_do_not_match_are_refused(tmp_path, quantized, call, words):
    """Must not: the API writing a model named .h, a folder named .c (the CLI's sharp edges)."""
    with pytest.raises(qconvert.QconvertError, match=re.escape(words)):
        call(quantized, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_inspect_is_the_cli_json(tmp_path):
    cli = json.loads(_cli("inspect", KWS, "--json").stdout)
    api = qconvert.load(KWS).inspect()
    assert json.loads(json_text.dumps({**api, "model": str(KWS)})) == cli
