"""`--per-tensor` (issue 27, item 4: `--per-channel` did nothing): every layer's weights with one
scale, bit-exact with TFLite Micro in the integer executor and in export-c's C; `--per-channel`
stays the default. Oracles: TFLite Micro's interpreter, the written files' own scales."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import SAMPLE_MODELS, tflm_invoke
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model
from helpers.int8_models import assert_same

DIGITS = SAMPLE_MODELS / "digits_cnn.onnx"
CALIB = SAMPLE_MODELS / "digits_calib_nchw.npy"
LAYERS = ("Conv2D", "DepthwiseConv2D", "FullyConnected")


def _quantize(tmp_path, *flags, out="q.tflite"):
    path = tmp_path / out
    result = CliRunner().invoke(main, ["quantize", str(DIGITS), "--calibration", str(CALIB),
                                       "-o", str(path), *flags], catch_exceptions=False)
    return result, path


def _weight_scales(path) -> dict:
    g = load_model(path).graph
    return {n.name: g.tensors[n.inputs[1]].quant.scale.size for n in g.nodes if n.op in LAYERS}


def test_per_tensor_weights_bit_exact_with_tflite_micro(tmp_path):
    result, path = _quantize(tmp_path, "--per-tensor")
    assert result.exit_code == 0, result.output
    scales = _weight_scales(path)
    assert len(scales) >= 4 and set(scales.values()) == {1}
    blob = path.read_bytes()
    rng = np.random.default_rng(1)
    g = load_model(path).graph
    shape = g.tensors[g.inputs[0]].shape
    feeds = [{g.inputs[0]: rng.integers(-128, 128, shape).astype(np.int8)} for _ in range(4)]
    assert_same(blob, feeds)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_per_tensor_export_c_bit_exact_with_tflite_micro(tmp_path):
    _, path = _quantize(tmp_path, "--per-tensor")
    out = tmp_path / "c"
    assert CliRunner().invoke(main, ["export-c", str(path), "-o", str(out), "--name", "d",
                                     "--example"]).exit_code == 0
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-o",
                    str(tmp_path / "ex"), *map(str, out.glob("*.c"))], check=True)
    printed = subprocess.run([str(tmp_path / "ex")], capture_output=True, text=True,
                             check=True).stdout
    got = [int(line.split(" = ")[1].split()[0]) for line in printed.splitlines()
           if line.startswith("output[")]
    g = load_model(path).graph
    t = g.tensors[g.inputs[0]]
    x = (np.arange(int(np.prod(t.shape))) % 17).astype(np.float32) / np.float32(16)
    r = x / np.float32(t.quant.scale[0])
    xq = np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5) + int(t.quant.zero_point[0]), -128,
                 127).astype(np.int8).reshape(t.shape)
    np.testing.assert_array_equal(got, tflm_invoke(path.read_bytes(), [xq])[0].reshape(-1))


def test_per_channel_stays_the_default(tmp_path):
    """Must not: the default (and --per-channel) change conv weights to one scale."""
    _, default = _quantize(tmp_path, out="a.tflite")
    _, explicit = _quantize(tmp_path, "--per-channel", out="b.tflite")
    assert default.read_bytes() == explicit.read_bytes()
    scales = _weight_scales(default)
    assert any(n > 1 for n in scales.values())


def test_per_tensor_qdq_onnx_has_scalar_weight_scales(tmp_path):
    import onnx
    from onnx import numpy_helper

    result, path = _quantize(tmp_path, "--per-tensor", out="q.onnx")
    assert result.exit_code == 0, result.output
    m = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    weight_dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear"
                 and n.input[0] in inits and inits[n.input[0]].ndim >= 2]
    assert weight_dq and all(inits[n.input[1]].size == 1 for n in weight_dq)


def test_per_tensor_with_fc_per_channel_is_refused(tmp_path):
    result, path = _quantize(tmp_path, "--per-tensor", "--fc-per-channel")
    assert result.exit_code == 1 and "--per-tensor takes every layer's weights per tensor" \
        in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not path.exists()
