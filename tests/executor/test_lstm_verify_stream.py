"""`--verify` of an LSTM model: the stream the firmware runs when both models keep the state.

A TFLite LSTM keeps its hidden and cell state from call to call; when the source model keeps it
too (a TFLite source quantized), `--verify` runs both models as streams of the samples, each run
from the reset state; against a stateless source (an ONNX LSTM) every sample runs from reset.
Oracles: one LiteRT interpreter (float) and one TFLite Micro interpreter (int8, bit for bit)
invoked on the same frames in a row. Models: tests/models/make_lstm_models.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from helpers.lstm_runs import cli  # noqa: E402
from helpers.oracles import litert_outputs, tflm_stream  # noqa: E402
from make_lstm_models import lstm_int8_tflite, lstm_tflite  # noqa: E402

from qconvert.cli import verify  # noqa: E402
from qconvert.formats.tflite_reader import read_tflite  # noqa: E402


def _frames(n: int, shape, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [(0.6 + 0.5 * rng.standard_normal(shape)).astype(np.float32) for _ in range(n)]


def test_float_stream_run_samples_is_litert_stream():
    data = lstm_tflite(steps=1)
    model = read_tflite(data)
    name, out = model.graph.inputs[0], model.graph.outputs[0]
    frames = _frames(6, model.graph.tensors[name].shape, seed=3)
    want = litert_outputs(data, frames)
    for _ in range(2):  # must-not: a second run starts from the reset state again
        got = verify.run_samples(model, [{name: f} for f in frames], stream=True)
        for k, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_allclose(a[out], b, rtol=1e-5, atol=1e-6, err_msg=f"frame {k}")
    # must-not: without `stream` each sample runs from the reset state (frame 4 differs)
    alone = verify.run_samples(model, [{name: f} for f in frames])
    assert not np.allclose(alone[4][out], want[4], atol=1e-4)
    np.testing.assert_allclose(alone[4][out], litert_outputs(data, [frames[4]])[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("wide", [False, True], ids=["int8", "16x8"])
def test_int8_stream_run_samples_is_tflite_micro_stream(wide):
    data = lstm_int8_tflite(steps=2, wide=wide)
    model = read_tflite(data)
    name, out = model.graph.inputs[0], model.graph.outputs[0]
    t = model.graph.tensors[name]
    rng = np.random.default_rng(7)
    info = np.iinfo(t.dtype)
    frames = [rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype) for _ in range(6)]
    want = tflm_stream(data, frames)
    for _ in range(2):  # a reset between runs
        got = verify.run_samples(model, [{name: f} for f in frames], stream=True)
        for k, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(a[out], b, err_msg=f"frame {k}")


def test_quantize_verify_of_a_tflite_lstm_compares_streams(tmp_path, monkeypatch):
    """A TFLite LSTM source quantized: --verify runs both as streams (and passes); a model
    without state still runs sample by sample."""
    seen = []
    real = verify.run_samples

    def spy(model, samples, keep=(), stream=False):
        seen.append(stream)
        return real(model, samples, keep=keep, stream=stream)

    monkeypatch.setattr(verify, "run_samples", spy)
    src, calib, out = tmp_path / "m.tflite", tmp_path / "c.npy", tmp_path / "q.tflite"
    src.write_bytes(lstm_tflite(steps=1))
    np.save(calib, np.stack(_frames(32, (1, 1, 5), seed=1)))
    result = cli("quantize", src, "--calibration", calib, "-o", out, "--verify", "16")
    assert result.exit_code == 0, result.output
    assert seen and all(seen), seen
    seen.clear()
    from helpers.oracles import TEST_MODELS
    from qconvert.formats.model_io import load_model

    kws = load_model(TEST_MODELS / "kws_ref_model.tflite")
    t = kws.graph.tensors[kws.graph.inputs[0]]
    verify.verify_models(kws, kws, verify.samples_of(
        {kws.graph.inputs[0]: np.zeros((2,) + tuple(t.shape[1:]), t.dtype)}, 2))
    assert seen == [False, False]
