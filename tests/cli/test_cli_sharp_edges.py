"""The command line's sharp edges a new user met (issue 27, item 4): each refusal is one line,
exit status 1, nothing written; each help text says what the option does."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from helpers.oracles import SAMPLE_MODELS
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model
from qconvert.quant.report import render_text

KWS = SAMPLE_MODELS / "kws_ref_model.tflite"  # int8
DIGITS = SAMPLE_MODELS / "digits_cnn.onnx"    # float, input 'input' 1x1x16x16
CALIB = SAMPLE_MODELS / "digits_calib_nchw.npy"


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("command, name, expected", [
    (["quantize", DIGITS, "--calibration", CALIB], "model.h", ".tflite or .onnx"),
    (["quantize", DIGITS, "--calibration", CALIB], "model.c", ".tflite or .onnx"),
    (["convert", DIGITS], "model.json", ".tflite or .onnx"),
    (["fuse", DIGITS], "model.txt", ".tflite or .onnx"),
    (["export-c-header", KWS], "weights.c", ".h"),
    (["export-c", KWS], "model.c", "without a file extension"),
    (["export-c", KWS], "model.h", "without a file extension"),
])
def test_output_extension_that_does_not_match_is_refused(tmp_path, command, name, expected):
    out = tmp_path / name
    line = _one_line_error(_invoke([*command, "-o", out]))
    assert str(out) in line and expected in line and f"-o {out.suffix}" in line
    assert list(tmp_path.iterdir()) == []  # nothing written: no file, no folder


@pytest.mark.parametrize("command, name", [
    (["quantize", DIGITS, "--calibration", CALIB], "m.ONNX"),   # the extension, any case
    (["convert", DIGITS], "m.tflite"),
    (["export-c-header", KWS], "w.h"),
    (["export-c", KWS], "model_c"),
    (["export-c", KWS], "model.v2"),  # a dot in a folder name is not a file extension
    (["convert", DIGITS], "copy.bin"),  # an extension qconvert does not know: the input's format
])
def test_matching_or_neutral_output_names_are_taken(tmp_path, command, name):
    """Must not refuse: the expected extensions (any case) and export-c folders whose dot is
    not a file extension."""
    out = tmp_path / name
    result = _invoke([*command, "-o", out])
    assert result.exit_code == 0, result.output
    assert out.exists()


def test_existing_folder_with_a_dot_is_taken_by_export_c(tmp_path):
    """A folder the user already made is used even when its name ends like a file's."""
    out = tmp_path / "build.c"
    out.mkdir()
    assert _invoke(["export-c", KWS, "-o", out, "--name", "kws"]).exit_code == 0
    assert (out / "kws.c").is_file()


def test_missing_option_punctuation():
    line = _one_line_error(_invoke(["export-c", KWS]))
    assert "Missing option '-o' / '--output'; see qconvert export-c --help" in line
    assert ".;" not in line


def test_dynamic_shape_error_suggests_input_shape(tmp_path):
    model = onnx.load(DIGITS)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for i, label in ((2, "H"), (3, "W")):
        dims[i].ClearField("dim_value")
        dims[i].dim_param = label
    del model.graph.value_info[:]
    src = tmp_path / "dyn.onnx"
    onnx.save(model, src)
    line = _one_line_error(_invoke(["convert", src, "-o", tmp_path / "dyn.tflite"]))
    assert "--input-shape input:1,1,H,W" in line
    assert not (tmp_path / "dyn.tflite").exists()
    # the suggestion, filled in, works
    fixed = _invoke(["convert", src, "-o", tmp_path / "dyn.tflite",
                     "--input-shape", "input:1,1,16,16"])
    assert fixed.exit_code == 0, fixed.output


def test_static_model_gets_no_shape_hint():
    """Must not suggest --input-shape when every input is static."""
    from qconvert.errors import QConvertError
    from qconvert.cli.input_shapes import suggest_input_shapes, with_shape_hint

    graph = load_model(DIGITS).graph
    assert suggest_input_shapes(graph) is None
    assert with_shape_hint(QConvertError("dynamic shapes"), graph).cause == "dynamic shapes"


def test_int8_model_with_float_calibration_data(tmp_path):
    data = tmp_path / "float.npy"
    np.save(data, np.zeros((2, 49, 10, 1), np.float32))
    out = tmp_path / "q.tflite"
    line = _one_line_error(_invoke(["quantize", KWS, "--calibration", data, "-o", out]))
    assert "is int8: give int8 samples" in line and "give the float model" in line
    assert "scale" in line and "zero point" in line
    assert not out.exists()


def test_option_help_texts():
    text = " ".join(_invoke(["quantize", "--help"]).output.split())
    batch = text.split("--batch-size N", 1)[1].split("[default: 16", 1)[0]
    assert "Calibration samples" in batch  # --batch-size has help
    engine = text.split("--engine [numpy|onnxruntime]", 1)[1].split("--batch-size", 1)[0]
    assert "faster" not in engine and "slower than numpy on fixed-batch models" in engine
    per_channel = text.split("--per-channel / --per-tensor", 1)[1].split("--fc-per-channel", 1)[0]
    assert "the default" in per_channel and "every layer's weights with one scale" in per_channel
    assert "[default: per-channel]" in per_channel


def test_per_channel_flag_is_the_default(tmp_path):
    """--per-channel names the default: the same bytes as without it (--per-tensor:
    quant/test_per_tensor.py)."""
    a, b = tmp_path / "a.tflite", tmp_path / "b.tflite"
    assert _invoke(["quantize", DIGITS, "--calibration", CALIB, "-o", a]).exit_code == 0
    assert _invoke(["quantize", DIGITS, "--calibration", CALIB, "-o", b,
                    "--per-channel"]).exit_code == 0
    assert a.read_bytes() == b.read_bytes()


def _report(widened: dict) -> dict:
    layers = [{"layer": name, "op": "Conv2D", "output": {"scale": 0.1, "zero_point": 0},
               "sqnr_db": 30.0, "widened_channels": channels}
              for name, channels in widened.items()]
    return {"layers": layers, "output_sqnr_db": {"y": 30.0}, "samples": 4}


def test_widened_scales_summarised_in_one_line():
    long_names = {f"functional_1/block_{i}/depthwise_conv2d_{i}/BiasAdd/ReadVariableOp_and_more"
                  f"{'x' * 200}": list(range(i, 3 * i + 1)) for i in range(1, 10)}
    lines = [line for line in render_text(_report(long_names)).splitlines()
             if line.startswith("widened weight scales")]
    n = sum(len(c) for c in long_names.values())
    assert lines == [f"widened weight scales (int32 bias guard): {n} channels in 9 layers "
                     "(listed by --report)"]
    assert len(lines[0]) <= 100


def test_one_short_widened_layer_is_named():
    lines = [line for line in render_text(_report({"conv": [0, 4, 5]})).splitlines()
             if line.startswith("widened weight scales")]
    assert lines == ["widened weight scales (int32 bias guard): conv channels 0, 4-5"]


def test_one_long_widened_layer_is_counted():
    lines = [line for line in render_text(_report({"n" * 120: [3]})).splitlines()
             if line.startswith("widened weight scales")]
    assert lines == ["widened weight scales (int32 bias guard): 1 channel in 1 layer "
                     "(listed by --report)"]
