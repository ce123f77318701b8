"""export-c's firmware helpers (issue 27, item 5): NAME_quantize_input /
NAME_dequantize_output and the layout macros in NAME.h, and `--example` (main.c, CMakeLists.txt,
NAME.mk) compiled with host gcc and run. Oracles: the integer executor (bit-exact with TFLite
Micro) on the input quantized by TFLite's QUANTIZE rule written out here in numpy
(round(x / scale) half away from zero, + zero point, saturated)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

import qconvert
from helpers.oracles import SAMPLE_MODELS
from qconvert.cli.app import main

DIGITS = SAMPLE_MODELS / "digits_cnn.onnx"
CALIB = SAMPLE_MODELS / "digits_calib_nchw.npy"
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def tflite_quantize(x: np.ndarray, scale: float, zero_point: int, dtype=np.int8) -> np.ndarray:
    """TFLite's QUANTIZE: float32 division, std::round (half away from zero), saturate."""
    r = x.astype(np.float32) / np.float32(scale)
    rounded = np.where(r >= 0, np.floor(np.abs(r) + 0.5), -np.floor(np.abs(r) + 0.5))
    info = np.iinfo(dtype)
    return np.clip(np.nan_to_num(rounded, nan=0.0) + zero_point, info.min, info.max).astype(dtype)


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "digits_int8.tflite"
    assert _invoke("quantize", DIGITS, "--calibration", CALIB, "-o", path).exit_code == 0
    return path


def _outputs(text: str):
    rows = re.findall(r"output\[(\d+)\] = (-?\d+) \((-?[\d.]+)\)", text)
    return np.array([int(q) for _, q, _ in rows]), np.array([float(v) for _, _, v in rows])


def _check_run(stdout: str, model_path):
    m = qconvert.load(model_path)
    t = m.ir().graph.tensors[m.inputs[0]]
    o = m.ir().graph.tensors[m.outputs[0]]
    n = int(np.prod(t.shape))
    x = (np.arange(n) % 17).astype(np.float32) / np.float32(16)  # main.c's test pattern
    xq = tflite_quantize(x, float(t.quant.scale[0]), int(t.quant.zero_point[0]))
    expected = m.run(xq.reshape(t.shape))[m.outputs[0]].reshape(-1)
    got_q, got_f = _outputs(stdout)
    np.testing.assert_array_equal(got_q, expected)
    s, z = float(o.quant.scale[0]), int(o.quant.zero_point[0])
    np.testing.assert_allclose(got_f, s * (expected.astype(np.float64) - z), atol=2e-6)
    assert f"top class: {int(np.argmax(got_f))}" in stdout


def test_example_built_with_the_makefile_fragment_matches_the_executor(tmp_path, int8_model):
    out = tmp_path / "c"
    result = _invoke("export-c", int8_model, "-o", out, "--name", "digits", "--example")
    assert result.exit_code == 0, result.output
    assert {"main.c", "CMakeLists.txt", "digits.mk"} <= {p.name for p in out.iterdir()}
    (tmp_path / "Makefile").write_text(
        "include c/digits.mk\n"
        f"example: c/main.c $(DIGITS_SRCS)\n\t$(CC) $(DIGITS_CFLAGS) {' '.join(CFLAGS[1:])} "
        "-o $@ $^\n")
    subprocess.run(["make", "-s", "example"], cwd=tmp_path, check=True)
    run = subprocess.run([str(tmp_path / "example")], capture_output=True, text=True, check=True)
    _check_run(run.stdout, int8_model)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_example_built_with_cmake(tmp_path, int8_model):
    out = tmp_path / "c"
    qconvert.export_c(qconvert.load(int8_model), out, name="digits", example=True)
    subprocess.run(["cmake", "-S", str(out), "-B", str(tmp_path / "b"), "-DCMAKE_C_FLAGS="
                    + " ".join(CFLAGS[1:])], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(tmp_path / "b"), "-j2"], check=True,
                   capture_output=True)
    run = subprocess.run([str(tmp_path / "b" / "digits_example")], capture_output=True,
                         text=True, check=True)
    _check_run(run.stdout, int8_model)


def test_quantize_input_helper_is_tflites_quantize_on_edge_values(tmp_path, int8_model):
    """Ties (k + 0.5 steps, both signs), values far outside the range, infinities and NaN."""
    out = tmp_path / "c"
    assert _invoke("export-c", int8_model, "-o", out, "--name", "d").exit_code == 0
    header = (out / "d.h").read_text()
    assert "#define D_INPUT_DIMS {1, 16, 16, 1}" in header and "#define D_INPUT_CHANNELS 1" in \
        header and "void d_quantize_input(const float *values, int8_t *input);" in header
    t = qconvert.load(int8_model).ir().graph.tensors["input"]
    s, z = np.float32(t.quant.scale[0]), int(t.quant.zero_point[0])
    steps = np.array([0.5, -0.5, 1.5, -1.5, 2.5, 100.5, -127.5, 0.49999997, 3.0, -200.0,
                      1e30, -1e30, 0.0, -0.0], np.float32)
    values = np.concatenate([steps * s, np.array([np.inf, -np.inf, np.nan], np.float32),
                             np.random.default_rng(0).normal(0, 0.5, 256 - 17).astype(
                                 np.float32)])
    values.astype("<f4").tofile(tmp_path / "in.bin")
    (tmp_path / "t.c").write_text(
        '#include <stdio.h>\n#include "d.h"\nint main(void) {\n'
        "    static float v[D_INPUT_SIZE]; static int8_t q[D_INPUT_SIZE]; int i;\n"
        '    FILE *f = fopen("in.bin", "rb");\n'
        "    if (f == NULL || fread(v, sizeof v[0], D_INPUT_SIZE, f) != D_INPUT_SIZE) return 1;\n"
        "    fclose(f); d_quantize_input(v, q);\n"
        '    for (i = 0; i < D_INPUT_SIZE; ++i) printf("%d\\n", q[i]);\n    return 0;\n}\n')
    sources = [str(p) for p in out.glob("*.c")] + [str(tmp_path / "t.c")]
    subprocess.run(["gcc", *CFLAGS, "-I", str(out), "-o", str(tmp_path / "t"), *sources],
                   check=True)
    run = subprocess.run([str(tmp_path / "t")], cwd=tmp_path, capture_output=True, text=True,
                         check=True)
    got = np.array(run.stdout.split(), dtype=np.int64)
    np.testing.assert_array_equal(got, tflite_quantize(values, float(s), z))


def test_example_refused_for_a_float_io_model(tmp_path):
    """Must not: --example for a model whose input is float (--io-type float32); nothing
    written."""
    model = tmp_path / "f.tflite"
    assert _invoke("quantize", DIGITS, "--calibration", CALIB, "--io-type", "float32", "-o",
                   model).exit_code == 0
    result = _invoke("export-c", model, "-o", tmp_path / "c", "--example")
    assert result.exit_code == 1
    assert "--example writes a main.c for a model with one input and one output" in \
        result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()
    plain = qconvert.export_c(qconvert.load(model))  # without --example: no helpers, no main.c
    assert "main.c" not in plain.files and b"quantize_input" not in plain.files["f.h"]
    assert b"#define F_INPUT_DIMS {1, 16, 16, 1}" in plain.files["f.h"]
