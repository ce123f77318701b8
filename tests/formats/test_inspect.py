"""`inspect` counts: MACs and bytes checked against figures derived by hand from each model's
published architecture (not from qconvert's own output)."""

import json

from click.testing import CliRunner

from helpers.oracles import TEST_MODELS
from qconvert.cli.app import main


def _report(path):
    result = CliRunner().invoke(main, ["inspect", str(path), "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    return json.loads(result.output)


def test_kws_dscnn_macs_and_weights():
    r = _report(TEST_MODELS / "kws_ref_model.tflite")
    layers = r["layers"]
    # DS-CNN: conv 10x4, 64 filters, stride 2 over 49x10x1 -> 25x5x64.
    assert layers[0]["op"] == "Conv2D" and layers[0]["macs"] == 25 * 5 * 64 * 10 * 4
    # depthwise 3x3 over 25x5x64; pointwise 64 -> 64.
    assert layers[1]["op"] == "DepthwiseConv2D" and layers[1]["macs"] == 25 * 5 * 64 * 9
    assert layers[2]["macs"] == 25 * 5 * 64 * 64
    # dense 64 -> 12.
    assert layers[11]["op"] == "FullyConnected" and layers[11]["macs"] == 64 * 12
    expected = 25 * 5 * 64 * 40 + 4 * (25 * 5 * 64 * 9 + 25 * 5 * 64 * 64) + 64 * 12
    assert r["totals"]["macs"] == expected
    # int8 weights: 64*10*4 bytes + 64 int32 biases for the first conv.
    assert layers[0]["weight_bytes"] == 64 * 40 + 64 * 4
    assert layers[0]["activation_bytes"] == 25 * 5 * 64
    assert layers[0]["quantization"]["kind"] == "per-channel"
    assert layers[9]["quantization"]["kind"] == "per-tensor"


def test_ad01_fully_connected_macs():
    r = _report(TEST_MODELS / "ad01_fp32.tflite")
    # MLPerf Tiny AD autoencoder: 640-128-128-128-128-8-128-128-128-128-640.
    dims = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640]
    assert [l["macs"] for l in r["layers"]] == [a * b for a, b in zip(dims, dims[1:])]
    assert r["totals"]["weight_bytes"] == 4 * sum(a * b + b for a, b in zip(dims, dims[1:]))
    assert all(l["quantization"]["kind"] == "none" for l in r["layers"])


def test_onnx_digits_macs():
    r = _report(TEST_MODELS / "digits_cnn.onnx")
    convs = [l for l in r["layers"] if l["op"] == "Conv2D"]
    # 1->8 3x3 at 16x16; depthwise 8 3x3 at 16x16; 8->16 1x1 at 16x16; 16->24 3x3 stride 2 to 4x4.
    assert [c["macs"] for c in convs] == [16 * 16 * 8 * 9, 16 * 16 * 8 * 9, 16 * 16 * 16 * 8,
                                         4 * 4 * 24 * 16 * 9]
    gemm = [l for l in r["layers"] if l["op"] == "Gemm"][0]
    assert gemm["macs"] == 24 * 10


def test_table_has_totals_line():
    result = CliRunner().invoke(main, ["inspect", str(TEST_MODELS / "kws_ref_model.tflite")])
    assert "total: 13 layers" in result.output
    assert "Conv2D+RELU" in result.output
