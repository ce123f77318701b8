"""int8 models with uint8 inputs and outputs (TFLite's uint8 QUANTIZE at the edges,
EfficientNet-Lite / Model Maker style) through every command: the integer executor runs the
uint8 <-> int8 QUANTIZE as TFLite Micro's Requantize (bit-exact), so `convert --verify` and
`fuse --verify` work (they failed: "Quantize produced int8 ... declared uint8"), and export-c
writes `const uint8_t *input` / `uint8_t *output` with their scale and zero point and is
bit-exact with TFLite Micro on the host (it refused uint8 inputs and outputs)."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import ROOT, tflm_invoke
from helpers.export_c_harness import build_host, harness_source, io_layout, parse
from qconvert.cli import main
from qconvert.executor.int_executor import run_int8
from qconvert.formats.model_io import load_model, serialize
from helpers.uint8_edges import with_uint8_edges

MODELS = ROOT / "tests" / "models"


@pytest.fixture(scope="module")
def u8_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("u8")
    q8 = folder / "digits_int8.tflite"
    result = CliRunner().invoke(main, ["quantize", str(MODELS / "digits_cnn.tflite"),
                                       "--calibration",
                                       str(MODELS / "digits_data_nhwc.npz") + ":calib",
                                       "-o", str(q8)])
    assert result.exit_code == 0, result.output
    path = folder / "digits_uint8_io.tflite"
    path.write_bytes(serialize(with_uint8_edges(load_model(q8))))
    return path


def _feeds(graph, count=4):
    rng = np.random.default_rng(7)
    digits = np.load(MODELS / "digits_data_nhwc.npz")["test"]
    t = graph.tensors[graph.inputs[0]]
    s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
    out = [np.clip(np.round(digits[k] / s) + z, 0, 255).astype(np.uint8).reshape(t.shape)
           for k in range(2)]
    out += [rng.integers(0, 256, t.shape).astype(np.uint8) for _ in range(count - 2)]
    return out


def test_integer_executor_is_bit_exact_with_tflite_micro(u8_model):
    graph = load_model(u8_model).graph
    assert graph.tensors[graph.inputs[0]].dtype == "uint8"
    for x in _feeds(graph):
        want = tflm_invoke(u8_model.read_bytes(), [x], arena_size=1 << 20)[0]
        got = run_int8(graph, {graph.inputs[0]: x})[graph.outputs[0]]
        assert got.dtype == np.uint8 and np.array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("command", ["convert", "fuse"])
def test_convert_and_fuse_verify(u8_model, tmp_path, command):
    out = tmp_path / "o.tflite"
    result = CliRunner().invoke(main, [command, str(u8_model), "-o", str(out), "--verify", "4"])
    assert result.exit_code == 0, result.output
    x = _feeds(load_model(u8_model).graph)[0]
    np.testing.assert_array_equal(tflm_invoke(out.read_bytes(), [x], arena_size=1 << 20)[0],
                                  tflm_invoke(u8_model.read_bytes(), [x], arena_size=1 << 20)[0])


def test_export_c_uint8_io_is_bit_exact_with_tflite_micro(u8_model, tmp_path):
    folder = tmp_path / "c"
    result = CliRunner().invoke(main, ["export-c", str(u8_model), "-o", str(folder),
                                       "--name", "net"])
    assert result.exit_code == 0, result.output
    header = (folder / "net.h").read_text()
    assert "int net_invoke(const uint8_t *input, uint8_t *output);" in header
    graph = load_model(u8_model).graph
    for tag, name in (("INPUT", graph.inputs[0]), ("OUTPUT", graph.outputs[0])):
        q = graph.tensors[name].quant
        assert f"#define NET_{tag}_ZERO_POINT {int(q.zero_point[0])}\n" in header
        scale = re.search(rf"#define NET_{tag}_SCALE (\S+)f\n", header).group(1)
        assert np.float32(scale) == q.scale[0]
    samples = [[x] for x in _feeds(graph)]
    exe = build_host(folder, harness_source("net", io_layout(graph), samples))
    got = parse(subprocess.run([exe], capture_output=True, text=True, check=True).stdout,
                [np.dtype("uint8")], len(samples))
    for (g,), (x,) in zip(got, samples):
        want = tflm_invoke(u8_model.read_bytes(), [x], arena_size=1 << 20)[0].reshape(-1)
        assert np.array_equal(g, want)


def test_export_c_header_of_uint8_io(u8_model, tmp_path):
    out = tmp_path / "w.h"
    result = CliRunner().invoke(main, ["export-c-header", str(u8_model), "-o", str(out)])
    assert result.exit_code == 0, result.output


def test_other_integer_io_still_refused(tmp_path, u8_model):
    """must not: export-c accepts an int16 / int32 model input it cannot feed."""
    from qconvert.c_export.model.render import _check_io
    from qconvert.errors import QConvertError

    graph = load_model(u8_model).graph
    graph.tensors[graph.inputs[0]].dtype = "int32"
    with pytest.raises(QConvertError, match="is int32"):
        _check_io(graph)
