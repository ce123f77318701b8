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


LSTM_CASES = {
    # denoiser: 8 steps of 16 bins, 12 units: 4 gates x 12 x (16 inputs + 12 recurrent) per step
    "denoiser": (lambda m: m.denoiser_tflite(), 8 * 4 * 12 * (16 + 12)),
    # time-major [T=6, B=2, I=5], 7 units: batch x steps of the 8 gate matrices
    "time_major_batch2": (lambda m: m.lstm_tflite(batch=2, time_major=True),
                          12 * 4 * 7 * (5 + 7)),
    # CIFG (no input gate: 3 gates), peepholes on forget / output (7 each)
    "cifg_peephole": (lambda m: m.lstm_tflite(cifg=True, peephole=True),
                      6 * (3 * 7 * (5 + 7) + 2 * 7)),
    # projection to 3: recurrent matrices [7, 3], projection [3, 7]
    "projection": (lambda m: m.lstm_tflite(projection=3), 6 * (4 * 7 * (5 + 3) + 3 * 7)),
}


def _lstm_models():
    import sys

    sys.path.insert(0, str(TEST_MODELS))
    import make_lstm_models

    return make_lstm_models


def test_lstm_macs_count_every_gate_matrix_per_step(tmp_path):
    """An LSTM's MACs (0 before: no rule) from its architecture: per step and sequence, the
    input-to-gate and recurrent matrices, peepholes and projection."""
    models = _lstm_models()
    for name, (make, want) in LSTM_CASES.items():
        path = tmp_path / f"{name}.tflite"
        path.write_bytes(make(models))
        lstm = [l for l in _report(path)["layers"] if l["op"].startswith("Unidirectional")]
        assert [l["macs"] for l in lstm] == [want], name


def test_onnx_lstm_macs(tmp_path):
    """ONNX LSTM [T=6, B=1, I=5], hidden 7: W [1, 28, 5] and R [1, 28, 7] once per step."""
    path = tmp_path / "lstm.onnx"
    path.write_bytes(_lstm_models().lstm_onnx())
    lstm = [l for l in _report(path)["layers"] if l["op"] == "LSTM"]
    assert [l["macs"] for l in lstm] == [6 * 4 * 7 * (5 + 7)]
