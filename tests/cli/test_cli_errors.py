"""Bad input ends with one clear line naming the file, a non-zero exit, no traceback, nothing
written — for both `inspect` and `convert`. The format is recognized by content."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS
from qconvert.cli.app import main
from qconvert.errors import QConvertError
from qconvert.formats.model_io import load_model

TFLITE = TEST_MODELS / "kws_ref_model.tflite"
ONNX = TEST_MODELS / "digits_cnn.onnx"


def _bad_files(tmp_path):
    rng = np.random.default_rng(7)
    tfl, onx = TFLITE.read_bytes(), ONNX.read_bytes()
    files = {
        "empty.tflite": b"",
        "truncated.tflite": tfl[: len(tfl) // 2],
        "truncated_head.tflite": tfl[:64],
        "truncated.onnx": onx[: len(onx) // 3],
        "random.onnx": rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(),
        "random_tfl3.tflite": b"\x20\x00\x00\x00TFL3" + rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(),
        "text.tflite": b"this is not a model\n" * 10,
    }
    paths = {}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths[name] = tmp_path / name
    paths["missing.tflite"] = tmp_path / "missing.tflite"
    return paths


def _invoke(args):
    runner = CliRunner()
    return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)


def _assert_clean_failure(result, path):
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("qconvert: error: ")
    assert str(path) in lines[0]
    assert "Traceback" not in result.output + result.stderr


BAD = ["empty.tflite", "truncated.tflite", "truncated_head.tflite", "truncated.onnx",
       "random.onnx", "random_tfl3.tflite", "text.tflite", "missing.tflite"]


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("command", ["inspect", "convert", "fuse"])
def test_bad_model_fails_cleanly(tmp_path, name, command):
    path = _bad_files(tmp_path)[name]
    before = sorted(os.listdir(tmp_path))
    args = [command, path]
    if command == "convert":
        args += ["-o", tmp_path / "out.tflite"]
    if command == "fuse":
        args += ["--report", tmp_path / "fuse.json"]
    result = _invoke(args)
    _assert_clean_failure(result, path)
    assert sorted(os.listdir(tmp_path)) == before, "something was written"


@pytest.mark.parametrize("command", ["inspect", "convert", "fuse"])
def test_empty_file_says_empty(tmp_path, command):
    path = _bad_files(tmp_path)["empty.tflite"]
    result = _invoke([command, path])
    assert "file is empty" in result.stderr


@pytest.mark.parametrize("source", [TFLITE, ONNX], ids=["tflite", "onnx"])
def test_output_in_missing_directory(tmp_path, tmp_copy, source):
    model = tmp_copy(source)
    out = tmp_path / "no" / "such" / "dir" / source.name
    before = sorted(os.listdir(tmp_path))
    result = _invoke(["convert", model, "-o", out])
    _assert_clean_failure(result, out)
    assert "output directory does not exist" in result.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_inspect_of_missing_file_and_directory(tmp_path):
    result = _invoke(["inspect", tmp_path])
    _assert_clean_failure(result, tmp_path)


def test_convert_never_overwrites_input(tmp_copy):
    model = tmp_copy(TFLITE)
    data = model.read_bytes()
    result = _invoke(["convert", model, "-o", model])
    _assert_clean_failure(result, model)
    assert model.read_bytes() == data


@pytest.mark.parametrize("source", [TFLITE, ONNX], ids=["tflite", "onnx"])
def test_format_recognized_by_content_not_extension(tmp_copy, source):
    swapped = ".onnx" if source.suffix == ".tflite" else ".tflite"
    model = tmp_copy(source, "model" + swapped)
    result = _invoke(["inspect", model, "--json"])
    assert result.exit_code == 0, result.stderr
    assert f'"format": "{source.suffix[1:]}"' in result.output
    out = model.with_name("copy.bin")
    result = _invoke(["convert", model, "-o", out])
    assert result.exit_code == 0, result.stderr
    assert load_model(out).format == source.suffix[1:]


def test_convert_default_output_goes_next_to_input(tmp_copy):
    model = tmp_copy(SAMPLE_MODELS / "digits_cnn.onnx")
    result = _invoke(["convert", model])
    assert result.exit_code == 0, result.stderr
    out = model.with_name("digits_cnn_converted.onnx")
    assert out.exists() and str(out) in result.output


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), source=st.sampled_from([TEST_MODELS / "digits_cnn.tflite", ONNX]))
def test_corrupted_model_never_crashes(tmp_path, data, source):
    """Random byte flips or cuts in a real model either load, inspect and write, or raise
    QConvertError naming the file."""
    from qconvert.formats.layer_table import render, summary
    from qconvert.formats.model_io import serialize

    mutated = bytearray(source.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(8, len(mutated) - 1))
        mutated[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        mutated = mutated[: data.draw(st.integers(8, len(mutated)))]
    path = tmp_path / ("mutated" + source.suffix)
    path.write_bytes(bytes(mutated))
    try:
        model = load_model(path)
    except QConvertError as exc:
        assert str(path) in str(exc)
        return
    render(summary(model, str(path)))
    try:
        serialize(model)
    except QConvertError:
        pass
