"""Reliability 3 (issue 29), the second adversarial sweep's findings: calibration data at the
wrong scale (item 7), the HTML / JSON reports' well-formedness (item 3), control characters
in the terminal (item 4), generated file names that shadow headers (item 2), the tracebacks
of item 5 and unbounded work (item 6). Every refusal is the tool's one line, exit 1, nothing
written; every "must not" (no warning, no refusal) has its case.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers.oracles import ROOT, TEST_MODELS
from qconvert.cli.app import main
from qconvert.quant import calibration_data as cd

DIGITS = TEST_MODELS / "digits_cnn.tflite"
DIGITS_CALIB = ROOT / "sample_models" / "digits_calib_nhwc.npy"  # float 0..1, (32, 16, 16, 1)
SETTINGS = settings(max_examples=int(os.environ.get("QCONVERT_SWEEP_EXAMPLES", "12")),
                    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def assert_refused(result, out: Path, *words):
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: "), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not out.exists()


def scale_warnings(result) -> list:
    return [line for line in result.stderr.splitlines() if "unnormalized, for a float model"
            in line]


# -- item 7: calibration data at the wrong scale -----------------------------------------------
def digits_as(tmp_path, dtype, factor=255.0) -> Path:
    """The digits calibration samples (0..1) times `factor`, rounded, as `dtype`."""
    data = np.load(DIGITS_CALIB)
    path = tmp_path / f"calib_{np.dtype(dtype).name}.npy"
    np.save(path, np.round(data * factor).astype(dtype))
    return path


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32"])
def test_pixels_0_255_for_a_float_model_warn_with_range_and_fix(tmp_path, dtype):
    calib = digits_as(tmp_path, dtype)
    out = tmp_path / "q.tflite"
    result = run(["quantize", DIGITS, "--calibration", calib, "-o", out])
    assert result.exit_code == 0, result.output
    warned = scale_warnings(result)
    assert len(warned) == 1, result.stderr
    line = warned[0]
    assert line.startswith("qconvert: warning: ") and f"{dtype} data 0..255" in line
    assert "(float32 [?, 16, 16, 1])" in line or "(float32 [1, 16, 16, 1])" in line
    assert "--scale 0.00392156862745098" in line and "--mean/--std" in line
    # the report shows the range and the scale chosen for the input: 255 / 255 steps
    shown = [x for x in result.stdout.splitlines() if x.startswith("input ")]
    assert len(shown) == 1 and "data 0..255, scale 1," in shown[0], result.stdout
    assert out.exists()


def test_pixels_0_255_are_refused_under_verify(tmp_path):
    calib = digits_as(tmp_path, np.uint8)
    out = tmp_path / "q.tflite"
    result = run(["quantize", DIGITS, "--calibration", calib, "-o", out, "--verify", 2])
    assert_refused(result, out, str(calib), "uint8 data 0..255", "--verify refuses")


def test_image_folder_without_normalization_warns(tmp_path):
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    for i, sample in enumerate(np.load(DIGITS_CALIB)[:4]):
        Image.fromarray(np.round(sample[:, :, 0] * 255).astype(np.uint8)).save(folder / f"{i}.png")
    out = tmp_path / "q.tflite"
    result = run(["quantize", DIGITS, "--calibration", folder, "-o", out])
    assert result.exit_code == 0 and len(scale_warnings(result)) == 1, result.stderr
    refused = tmp_path / "refused.tflite"
    assert_refused(run(["quantize", DIGITS, "--calibration", folder, "-o", refused, "--verify",
                        1]), refused, "--verify refuses")
    # must not: the same folder with the normalization the model was trained with
    result = run(["quantize", DIGITS, "--calibration", folder, "-o", out, "--verify", 1,
                  "--scale", 1 / 255])
    assert result.exit_code == 0 and not scale_warnings(result), result.output


@pytest.mark.parametrize("options", [[], ["--verify", 2]])
def test_correctly_scaled_data_is_not_warned(tmp_path, options):
    out = tmp_path / "q.tflite"
    result = run(["quantize", DIGITS, "--calibration", DIGITS_CALIB, "-o", out, *options])
    assert result.exit_code == 0 and not scale_warnings(result), result.output
    assert "data 0..1, scale 0.00392157" in result.stdout


@pytest.mark.parametrize("options", [["--scale", "1"], ["--scale", "0.00392156862745098"],
                                     ["--mean", "0", "--std", "255"]])
def test_data_with_normalization_options_is_not_warned(tmp_path, options):
    calib = digits_as(tmp_path, np.uint8)
    out = tmp_path / "q.tflite"
    result = run(["quantize", DIGITS, "--calibration", calib, "-o", out, "--verify", 2, *options])
    assert result.exit_code == 0 and not scale_warnings(result), result.output


def test_an_int8_inputs_integer_data_is_not_looked_at():
    spec = cd.InputSpec("x", (1, 16, 16, 1), "int8", "NHWC")
    ranges: dict = {}
    data = np.random.default_rng(0).integers(-128, 128, (4, 16, 16, 1), dtype=np.int8)
    path = Path(__file__).parent / "_int8_calib.npy"
    np.save(path, data)
    try:
        cd.load_calibration(path, [spec], ranges=ranges)
    finally:
        path.unlink()
    assert ranges == {} and cd.scale_warning(ranges) is None


def test_export_c_warns_too(tmp_path):
    calib = digits_as(tmp_path, np.uint8)
    result = run(["export-c", DIGITS, "--calibration", calib, "-o", tmp_path / "c"])
    assert result.exit_code == 0 and len(scale_warnings(result)) == 1, result.output


@SETTINGS
@given(st.integers(1, 4), st.floats(0, 1), st.integers(0, 2**31 - 1))
def test_scale_signature(n, top, seed):
    """Floats within 0..1 never warn, whatever their values; integer-typed data above 1 and
    whole numbers in 0..255 reaching above 1 always do; fractional floats above 1 do not."""
    rng = np.random.default_rng(seed)
    unit = rng.random((n, 8)) * top
    ranges: dict = {}
    spec = cd.InputSpec("x", (1, 8), "float32")
    cd._note_range(ranges, spec, unit.astype(np.float32), "f")
    assert cd.scale_warning(ranges) is None
    pixels = rng.integers(0, 256, (n, 8))
    pixels[0, 0] = 2 + seed % 254
    for dtype in (np.uint8, np.int16, np.int32, np.float32, np.float64):
        ranges = {}
        cd._note_range(ranges, spec, pixels.astype(dtype), "f")
        assert cd.scale_warning(ranges) is not None, dtype
    ranges = {}
    cd._note_range(ranges, spec, (pixels + 0.5).astype(np.float32), "f")
    assert cd.scale_warning(ranges) is None


# -- items 3 and 4: hostile names in the HTML, JSON and terminal; infinite SQNR -----------------
HOSTILE = "r\x00\x1b[31m\x07\x08\r\x9b2J\u202e\ufffe<&\">"


def relu_onnx(path: Path, node_name="r", input_name="x") -> Path:
    """x -> Relu -> y, the layer and tensors named as given."""
    import onnx
    from onnx import TensorProto as TP, helper as h

    graph = h.make_graph([h.make_node("Relu", [input_name], ["y"], name=node_name)], "g",
                         [h.make_tensor_value_info(input_name, TP.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [1, 4])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), path)
    return path


def _no_constants(name):
    raise AssertionError(f"the JSON holds {name}, which is not JSON")


@pytest.mark.parametrize("suffix", [".onnx", ".tflite"])
def test_json_report_of_an_infinite_sqnr_is_strict_json(tmp_path, suffix):
    """A Relu of negative data: the int8 output is exactly the float one, SQNR infinite; the
    JSON report writes null where Python's json would write Infinity."""
    import json

    model = relu_onnx(tmp_path / "relu.onnx")
    calib = tmp_path / "neg.npy"
    np.save(calib, -np.random.default_rng(0).random((8, 1, 4)).astype(np.float32) - 0.1)
    report = tmp_path / "q.json"
    result = run(["quantize", model, "--calibration", calib, "-o", tmp_path / f"q{suffix}",
                  "--report", report])
    assert result.exit_code == 0, result.output
    assert "SQNR inf dB" in result.stdout  # the text still says what the figure is
    doc = json.loads(report.read_text(), parse_constant=_no_constants)
    assert list(doc["output_sqnr_db"].values()) == [None]
    assert [row["sqnr_db"] for row in doc["layers"]] == [None]


def test_inspect_json_is_strict_json():
    import json

    result = run(["inspect", DIGITS, "--json"])
    assert result.exit_code == 0
    json.loads(result.stdout, parse_constant=_no_constants)


def test_json_text_nulls_every_non_finite_float():
    import json
    from qconvert.json_text import dumps

    doc = {"a": float("inf"), "b": [float("-inf"), (float("nan"), 1.5)], "c": {"d": 2}}
    assert json.loads(dumps(doc), parse_constant=_no_constants) == {
        "a": None, "b": [None, [None, 1.5]], "c": {"d": 2}}


_ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), min_size=1,
                    max_size=40)


@SETTINGS
@given(_ANY_TEXT, _ANY_TEXT, _ANY_TEXT)
def test_html_report_is_well_formed_xml_for_any_names(layer, output, model_name):
    """Every character a name can hold (NUL, controls, lone surrogates, U+FFFE...) leaves the
    page well-formed XML (expat, a strict parser), and encodable as UTF-8."""
    import xml.etree.ElementTree as ET
    from qconvert.quant.report_html import render_html

    result = {"layers": [{"layer": layer, "op": output, "sqnr_db": 12.0,
                          "output": {"tensor": layer, "scale": 0.1, "zero_point": 0}}],
              "samples": 1, "method": "minmax", "output_sqnr_db": {output: float("inf")}}
    text = render_html(result, model_name)
    ET.fromstring(text.encode("utf-8"))


def test_html_report_of_a_hostile_layer_name_parses(tmp_path):
    import xml.etree.ElementTree as ET

    model = relu_onnx(tmp_path / "relu.onnx", node_name=HOSTILE)
    calib = tmp_path / "c.npy"
    np.save(calib, np.random.default_rng(0).standard_normal((8, 1, 4)).astype(np.float32))
    html = tmp_path / "q.html"
    result = run(["quantize", model, "--calibration", calib, "-o", tmp_path / "q.onnx",
                  "--report-html", html])
    assert result.exit_code == 0, result.output
    ET.fromstring(html.read_bytes())
    assert "\\x1b[31m" in html.read_text()  # the name is still there, as visible text


def _has_control(text: str) -> bool:
    return any(not c.isprintable() and c not in " \n" for c in text)


@pytest.mark.parametrize("command", ["quantize", "inspect"])
def test_control_characters_in_names_reach_the_terminal_escaped(tmp_path, command):
    model = relu_onnx(tmp_path / "relu.onnx", node_name=HOSTILE, input_name="x\x1b]0;t\x07")
    calib = tmp_path / "c.npy"
    np.save(calib, np.random.default_rng(0).standard_normal((8, 1, 4)).astype(np.float32))
    args = ([command, model] if command == "inspect" else
            [command, model, "--calibration", calib, "-o", tmp_path / "q.onnx"])
    result = run(args)
    assert result.exit_code == 0, result.output
    assert not _has_control(result.stdout) and not _has_control(result.stderr), result.output
    assert "r\\x00\\x1b[31m" in result.stdout, result.stdout  # the layer is listed, escaped


# -- item 2: generated file names that shadow headers -----------------------------------------
AD01 = TEST_MODELS / "ad01_int8.tflite"


@pytest.mark.parametrize("name", ["stdint", "STDINT", "Math", "stdatomic", "arm_nnfunctions",
                                  "arm_nn_types", "ARM_NN_MATH_TYPES", "arm_convolve_s8",
                                  "qconvert_nn", "qconvert_fc_1x4", "qconvert_nn_s16"])
def test_name_that_shadows_a_header_is_refused(tmp_path, name):
    out = tmp_path / "c"
    assert_refused(run(["export-c", AD01, "-o", out, "--name", name]), out, repr(name), "shadow")


@SETTINGS
@given(st.data())
def test_every_reserved_name_in_any_case_is_refused(data):
    from qconvert.c_export import c_names
    from qconvert.errors import QConvertError

    pool = sorted(c_names.C_STANDARD_HEADERS | c_names.CMSIS_NN_FILES
                  | c_names.kernel_file_stems())
    name = data.draw(st.sampled_from(pool))
    cased = "".join(c.upper() if data.draw(st.booleans()) else c for c in name)
    assert c_names.shadowed(cased) is not None
    with pytest.raises(QConvertError, match="shadow"):
        c_names.check_file_prefix(cased)
    assert c_names.shadowed(cased + "_model") is None  # must not: a longer name is free


def test_model_file_named_like_a_header_gets_a_prefix_and_compiles(tmp_path):
    """A model file `stdint.tflite`: its C is m_stdint.h / .c (said on stdout), and the folder
    builds with -I DIR, the system <stdint.h> still the one included."""
    import shutil
    import subprocess

    model = tmp_path / "stdint.tflite"
    shutil.copy(AD01, model)
    out = tmp_path / "c"
    result = run(["export-c", model, "-o", out])
    assert result.exit_code == 0, result.output
    assert "named m_stdint, not stdint" in result.stdout
    assert not (out / "stdint.h").exists() and (out / "m_stdint.h").exists()
    for source in sorted(out.glob("*.c")):
        subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I",
                        str(out), "-c", str(source), "-o", str(tmp_path / "x.o")], check=True)


def test_names_that_shadow_nothing_are_kept(tmp_path):
    """Must not: a name beside a header's (stdint2, my_math) is used as it is, and
    export-c-header, whose --name names no file, takes even `stdint`."""
    result = run(["export-c", AD01, "-o", tmp_path / "c", "--name", "stdint2"])
    assert result.exit_code == 0 and (tmp_path / "c" / "stdint2.h").exists(), result.output
    assert "named m_" not in result.stdout
    result = run(["export-c-header", AD01, "-o", tmp_path / "w.h", "--name", "stdint"])
    assert result.exit_code == 0, result.output


def test_reserved_table_covers_the_cmsis_nn_copy():
    """The table in c_names holds every header and source of the CMSIS-NN copy beside the
    repository, and every include guard there is a table name + _H (so NAME.h's guard NAME_H
    cannot hide one)."""
    import re

    from helpers.export_c_harness import CMSIS_NN, cmsis_nn_available
    from qconvert.c_export import c_names

    if not cmsis_nn_available():
        pytest.skip("CMSIS-NN is not at ../shared/third_party/CMSIS-NN")
    files = [*CMSIS_NN.joinpath("Include").rglob("*.h"), *CMSIS_NN.joinpath("Source").rglob(
        "*.c"), *CMSIS_NN.joinpath("Source").rglob("*.h")]
    stems = {f.name.rsplit(".", 1)[0].lower() for f in files}
    assert len(stems) > 100 and stems <= c_names.CMSIS_NN_FILES, stems - c_names.CMSIS_NN_FILES
    for header in CMSIS_NN.joinpath("Include").rglob("*.h"):
        for guard in re.findall(r"^#define (\w+_H)\s*$", header.read_text(), re.M):
            assert guard[:-2].lower() in c_names.CMSIS_NN_FILES, (header.name, guard)


# -- item 5: tracebacks that are now one line ---------------------------------------------------
DIGITS_ONNX = TEST_MODELS / "digits_cnn.onnx"
HUGE_MEMORY = ["99999999999999999999T", "9" * 400, "2000T"]


def onnx_file(path: Path, nodes, inputs, outputs, inits=()) -> Path:
    import onnx
    from onnx import helper as h

    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), path)
    return path


@pytest.mark.parametrize("size", HUGE_MEMORY)
@pytest.mark.parametrize("command", ["quantize", "export-c-header", "export-c"])
def test_huge_max_memory_is_one_line(tmp_path, command, size):
    out = tmp_path / ("out" if command == "export-c" else "out.h" if command != "quantize"
                      else "out.tflite")
    result = run([command, DIGITS, "--calibration", DIGITS_CALIB, "-o", out, "--max-memory",
                  size])
    assert_refused(result, out, "--max-memory", "beyond any machine")


def test_large_but_sane_max_memory_is_taken(tmp_path):
    """Must not: a limit above the machine's memory but below 1024T is a valid choice."""
    out = tmp_path / "q.tflite"
    result = run(["quantize", DIGITS, "--calibration", DIGITS_CALIB, "-o", out,
                  "--max-memory", "1000T"])
    assert result.exit_code == 0 and out.exists(), result.output


@SETTINGS
@given(st.sampled_from(["convert", "quantize", "export-c"]),
       st.sampled_from([(DIGITS_ONNX, "input", (1, 1)), (DIGITS, "serving_default_keras_tensor:0",
                                                         (1,))]),
       st.integers(0, 2), st.one_of(st.integers(2**31, 2**70), st.integers(70000, 2**31 - 1)))
def test_huge_input_shapes_are_one_line(tmp_path_factory, command, model_input, axis, big):
    """Dimensions beyond int32, or inputs beyond the memory limit, on every command that takes
    --input-shape: one line, nothing written."""
    model, name, lead = model_input
    dims = [16, 16, 1] if model == DIGITS else [16, 16]
    dims[axis % len(dims)] = big
    dims[(axis + 1) % len(dims)] = max(dims[(axis + 1) % len(dims)], 70000)
    shape = ",".join(map(str, (*lead, *dims)))
    tmp = tmp_path_factory.mktemp("shape")
    out = tmp / ("c" if command == "export-c" else "m.tflite")
    extra = [] if command == "convert" else ["--calibration-random", 1]
    result = run([command, model, "-o", out, "--input-shape", f"{name}:{shape}", *extra])
    assert_refused(result, out, "--input-shape")


def test_float_io_of_an_input_that_is_an_output_is_one_line(tmp_path):
    from onnx import TensorProto as TP, helper as h

    x = h.make_tensor_value_info("x", TP.FLOAT, [1, 4])
    model = onnx_file(tmp_path / "through.onnx", [h.make_node("Relu", ["x"], ["y"], name="r")],
                      [x], [h.make_tensor_value_info("y", TP.FLOAT, [1, 4]), x])
    calib = tmp_path / "c.npy"
    np.save(calib, np.random.default_rng(0).standard_normal((8, 1, 4)).astype(np.float32))
    out = tmp_path / "q.tflite"
    result = run(["quantize", model, "--calibration", calib, "-o", out, "--io-type", "float32"])
    assert_refused(result, out, "'x' is also an output", "--io-type int8")
    # must not: int8 edges of the same model are written, and run in TFLite Micro
    result = run(["quantize", model, "--calibration", calib, "-o", out])
    assert result.exit_code == 0 and out.exists(), result.output


@pytest.mark.parametrize("command,suffix", [("quantize", ".tflite"), ("export-c", ""),
                                            ("export-c-header", ".h")])
def test_scalar_input_to_tflite_is_one_line(tmp_path, command, suffix):
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh

    model = onnx_file(tmp_path / "scalar.onnx", [h.make_node("Mul", ["x", "c"], ["y"], name="m")],
                      [h.make_tensor_value_info("x", TP.FLOAT, [])],
                      [h.make_tensor_value_info("y", TP.FLOAT, [])],
                      [nh.from_array(np.array(2.0, np.float32), "c")])
    calib = tmp_path / "c.npy"
    np.save(calib, np.random.default_rng(0).standard_normal(8).astype(np.float32))
    out = tmp_path / f"out{suffix}"
    assert_refused(run([command, model, "--calibration", calib, "-o", out]), out,
                   "'x' is a scalar (rank 0)")


# -- item 6: unbounded work, absurd normalization ------------------------------------------------
@pytest.mark.parametrize("n", ["1001", "1000000", str(2**63), "0", "-3"])
@pytest.mark.parametrize("command", ["convert", "fuse"])
def test_verify_n_is_bounded(tmp_path, command, n):
    out = tmp_path / "m.onnx"
    assert_refused(run([command, DIGITS_ONNX, "-o", out, "--verify", n]), out, "--verify",
                   "1<=x<=1000")


def test_verify_bound_is_in_help():
    assert "(1..1000)" in " ".join(run(["fuse", "--help"]).stdout.split())


@pytest.mark.parametrize("options,words", [
    (["--std", "1e-30"], "magnitudes of 1e+30"), (["--scale", "1e30"], "magnitudes of 1e+30"),
    (["--scale", "1e-30"], "magnitudes of 1e-30"), (["--mean", "1e30"], "magnitudes of 1e+30"),
    (["--std", "0"], "--std must be positive"), (["--std", "-1"], "--std must be positive"),
    (["--scale", "-0.5"], "--scale must be positive"),
    (["--std", "1,0,1"], "--std must be positive"),
    (["--percentile", "nan", "--method", "percentile"], "nan is not a number")])
def test_absurd_normalization_is_refused(tmp_path, options, words):
    out = tmp_path / "q.tflite"
    assert_refused(run(["quantize", DIGITS, "--calibration", DIGITS_CALIB, "-o", out,
                        *options]), out, words)


@SETTINGS
@given(st.floats(1e-3, 1e3), st.floats(-1, 1))
def test_sane_normalization_is_taken(tmp_path_factory, std, mean):
    """Must not: any std within 1e-3..1e3 and mean within -1..1 on 0..1 data is accepted."""
    spec = cd.InputSpec("x", (1, 16, 16, 1), "float32", "NHWC")
    path = tmp_path_factory.mktemp("norm") / "c.npy"
    np.save(path, np.load(DIGITS_CALIB)[:4])
    data = cd.load_calibration(path, [spec], mean=mean, std=std)
    expected = (np.load(DIGITS_CALIB)[:4].astype(np.float64) - mean) / std
    np.testing.assert_allclose(data["x"], expected.astype(np.float32), rtol=1e-6)


# -- item 8: export-c's output folder, --engine's line, NaN outputs under --verify ---------------
@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_export_c_into_a_broken_symlink_is_one_line(tmp_path, kind):
    link = tmp_path / "out"
    link.symlink_to(tmp_path / ("nowhere" if kind == "dangling" else "out"))
    result = run(["export-c", AD01, "-o", link])
    assert_refused_keeps(result, link, "symbolic link to nothing")
    assert not (tmp_path / "nowhere").exists()


def assert_refused_keeps(result, path: Path, *words):
    """`assert_refused` for an output that existed before (a link): it is still what it was."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: "), result.stderr
    for word in words:
        assert word in lines[0]
    assert path.is_symlink()


def test_export_c_folder_that_cannot_be_created_is_one_line(tmp_path, monkeypatch):
    """A folder under a read-only parent (simulated: the tests may run as root)."""
    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    out = tmp_path / "c"
    assert_refused(run(["export-c", AD01, "-o", out]), out, "cannot create the output folder",
                   "Permission denied")


@pytest.mark.parametrize("inside", [False, True])
def test_export_c_into_the_calibration_folder_is_refused(tmp_path, inside):
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    for i, sample in enumerate(np.load(DIGITS_CALIB)[:2]):
        Image.fromarray(np.round(sample[:, :, 0] * 255).astype(np.uint8)).save(folder / f"{i}.png")
    before = sorted(os.listdir(folder))
    out = folder / "c" if inside else folder
    result = run(["export-c", DIGITS, "--calibration", folder, "--scale", 1 / 255, "-o", out])
    assert result.exit_code == 1 and "calibration data folder" in result.stderr, result.output
    assert sorted(os.listdir(folder)) == before
    # must not: a folder beside it is fine
    result = run(["export-c", DIGITS, "--calibration", folder, "--scale", 1 / 255, "-o",
                  tmp_path / "images_c"])
    assert result.exit_code == 0, result.output


def test_engine_onnxruntime_on_export_c_says_why(tmp_path):
    out = tmp_path / "c"
    assert_refused(run(["export-c", DIGITS_ONNX, "--calibration",
                        ROOT / "sample_models" / "digits_calib_nchw.npy", "--engine",
                        "onnxruntime", "-o", out]), out, "calibrated as a TFLite graph",
                   "export-c")


def test_verify_takes_nan_where_the_input_model_has_nan(tmp_path):
    """Sqrt of the random (normal) inputs: NaN in both models at the same places is equal;
    NaN against a number still fails."""
    from onnx import TensorProto as TP, helper as h
    from qconvert.cli.verify import _Check

    model = onnx_file(tmp_path / "sqrt.onnx", [h.make_node("Sqrt", ["x"], ["y"], name="s")],
                      [h.make_tensor_value_info("x", TP.FLOAT, [1, 8])],
                      [h.make_tensor_value_info("y", TP.FLOAT, [1, 8])])
    for command, out in (("fuse", "f.onnx"), ("convert", "c.tflite")):
        result = run([command, model, "-o", tmp_path / out, "--verify", 3])
        assert result.exit_code == 0, result.output
    nan = np.array([np.nan, 1.0])
    assert _Check("float").fails([nan], [nan.copy()]) is None
    assert _Check("float").fails([nan], [np.array([0.0, 1.0])]) is not None
    assert _Check("float").fails([np.array([0.0, 1.0])], [nan]) is not None


# -- item 9: export-c-header of tensor types no runtime takes ---------------------------------
KWS = TEST_MODELS / "kws_ref_model.tflite"  # int8


@pytest.mark.parametrize("which", ["input", "middle"])
def test_export_c_header_refuses_a_string_tensor_feeding_conv(tmp_path, which):
    """A STRING tensor read by a CONV_2D: LiteRT refuses the model (the oracle), and so does
    export-c-header, in one line, writing nothing; the model as it was exports (must not)."""
    from ai_edge_litert.interpreter import Interpreter
    from qconvert.formats.model_io import load_model, serialize

    m = load_model(KWS)
    convs = [n for n in m.graph.nodes if n.op == "Conv2D"]
    name = convs[0].inputs[0] if which == "input" else convs[1].inputs[0]
    m.graph.tensors[name].dtype = "string"
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(serialize(m, "tflite"))
    with pytest.raises(RuntimeError, match="CONV_2D|DEPTHWISE_CONV_2D"):
        Interpreter(model_path=str(bad)).allocate_tensors()
    out = tmp_path / "w.h"
    assert_refused(run(["export-c-header", bad, "-o", out]), out, repr(name), "is string")
    result = run(["export-c-header", KWS, "-o", out])
    assert result.exit_code == 0 and out.exists(), result.output


@pytest.mark.parametrize("text,what", [(b"serving_default", "signature def's key"),
                                       (b"output_0", "signature output's name")])
@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_non_utf8_signature_name_says_so(tmp_path, text, what, command):
    data = bytearray(DIGITS.read_bytes())
    at = bytes(data).index(text)
    data[at] = 0xFF
    model = tmp_path / "bad.tflite"
    model.write_bytes(bytes(data))
    out = tmp_path / "o.tflite"
    args = [command, model] + ([] if command == "inspect" else ["-o", out])
    result = run(args)
    assert_refused(result, out, what, "not valid UTF-8")
    assert "corrupt or truncated" not in result.stderr


# -- item 8: signals during the heavy imports and during temp-file creation ---------------------
def test_a_signal_inside_deferred_signals_is_raised_when_the_block_ends():
    import signal

    from qconvert.formats import output_files

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with output_files.handle_termination():
            with output_files.deferred_signals():
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):  # the handler runs between bytecodes: here, deferred
                    pass
                reached.append(True)
    assert reached == [True]


def test_a_signal_as_a_temp_file_is_created_leaves_no_file(tmp_path, monkeypatch):
    """SIGTERM arriving right after the temporary file is created (before it was recorded for
    removal, which left a 0-byte file): the command ends, nothing is left."""
    import signal

    from qconvert.formats import output_files

    real_open = os.open

    def open_then_signal(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
        return fd

    monkeypatch.setattr(output_files.os, "open", open_then_signal)
    with pytest.raises(output_files.Terminated):
        with output_files.handle_termination():
            output_files.write_outputs({tmp_path / "a.bin": b"x" * 10})
    assert os.listdir(tmp_path) == []


def test_signals_during_startup_never_crash_the_process(tmp_path):
    """SIGINT / SIGTERM at staggered moments of a quantize run's first second (the onnx /
    protobuf imports among them): the process ends by exit status (0, 1, 130, 143) or by the
    default action before qconvert's handlers exist, never by SIGABRT / SIGSEGV, and leaves no
    temporary file."""
    import signal
    import subprocess
    import sys
    import time

    code = "from qconvert.cli import run; run()"
    for i, delay in enumerate([0.05, 0.1, 0.15, 0.2, 0.3, 0.45]):
        out = tmp_path / f"o{i}.onnx"
        proc = subprocess.Popen([sys.executable, "-c", code, "quantize", str(DIGITS_ONNX),
                                 "--calibration-random", "2", "-o", str(out)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT if i % 2 else signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1, 130, 143, -signal.SIGTERM, -signal.SIGINT), (
            proc.returncode, err[-500:])
        assert b"Fatal Python error" not in err and b"Segmentation" not in err
        assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


# -- item 8: a fixed batch above 1 ----------------------------------------------------------------
def _batch_model(tmp_path, batch: int) -> Path:
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh

    w = np.random.default_rng(0).standard_normal((2, 1, 3, 3)).astype(np.float32)
    return onnx_file(tmp_path / f"b{batch}.onnx",
                     [h.make_node("Conv", ["x", "w"], ["y"], name="c", kernel_shape=[3, 3]),
                      h.make_node("Relu", ["y"], ["z"], name="r")],
                     [h.make_tensor_value_info("x", TP.FLOAT, [batch, 1, 8, 8])],
                     [h.make_tensor_value_info("z", TP.FLOAT, [batch, 2, 6, 6])],
                     [nh.from_array(w, "w")])


@pytest.mark.parametrize("args", [
    ["convert", "-o", "{t}/o.tflite", "--verify", "2"],
    ["fuse", "-o", "{t}/o.onnx", "--verify", "2"],
    ["quantize", "-o", "{t}/o.onnx", "--calibration", "{t}/c8.npy"],
    ["quantize", "-o", "{t}/o.tflite", "--calibration", "{t}/c4.npy"],
    ["export-c", "-o", "{t}/o", "--calibration", "{t}/c8.npy"]])
def test_fixed_batch_above_one_gets_one_consistent_line(tmp_path, args):
    model = _batch_model(tmp_path, 4)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "c8.npy", rng.random((8, 1, 8, 8)).astype(np.float32))
    np.save(tmp_path / "c4.npy", rng.random((4, 1, 8, 8)).astype(np.float32))
    args = [a.format(t=tmp_path) for a in args]
    out = Path(args[2])
    assert_refused(run([args[0], model, *args[1:]]), out, "'x' has a fixed batch of 4",
                   "batch 1 or a dynamic batch")


def test_fixed_batch_model_still_converts_and_batch_one_verifies(tmp_path):
    """Must not: convert without --verify takes the batch-4 model; batch 1 verifies."""
    out = tmp_path / "o.tflite"
    result = run(["convert", _batch_model(tmp_path, 4), "-o", out])
    assert result.exit_code == 0 and out.exists(), result.output
    result = run(["convert", _batch_model(tmp_path, 1), "-o", tmp_path / "one.tflite",
                  "--verify", 2])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", ["convert", "fuse", "export-c-header", "export-c"])
def test_written_paths_reach_the_terminal_escaped(tmp_path, command):
    folder = tmp_path / "a\x1b[2Jb\x07"
    folder.mkdir()
    out = folder / {"convert": "m.tflite", "fuse": "m.tflite", "export-c-header": "m.h",
                    "export-c": "c"}[command]
    result = run([command, AD01, "-o", out])
    assert result.exit_code == 0, result.output
    assert not _has_control(result.stdout) and "a\\x1b[2Jb\\x07" in result.stdout


_NAME_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                   blacklist_categories=("Cs",)), min_size=1, max_size=24)


@SETTINGS
@given(_NAME_TEXT, _NAME_TEXT)
def test_any_layer_name_reaches_the_terminal_escaped(tmp_path_factory, layer, op_input):
    """Generated layer and input names (any code point an ONNX string can hold): `inspect`
    prints no control character, and the layer is still named (escaped)."""
    from qconvert.errors import one_line

    tmp = tmp_path_factory.mktemp("names")
    model = relu_onnx(tmp / "m.onnx", node_name=layer,
                      input_name=op_input if op_input != "y" else "y0")
    result = run(["inspect", model])
    assert result.exit_code == 0, result.output
    assert not _has_control(result.stdout)
    assert one_line(layer)[:32] in result.stdout
