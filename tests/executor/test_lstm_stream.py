"""An LSTM's state carried from call to call: the executors, calibration and the report.

TFLite keeps UNIDIRECTIONAL_SEQUENCE_LSTM's hidden and cell state in variable tensors that each
invoke leaves for the next (LiteRT, TFLite Micro, export-c's NAME_invoke). The executors do the
same when given a `carry` dict (`streaming.STATE_SLOTS`), `run_frames` keeps one for a stream,
and `quantize` calibrates and reports an LSTM model as one stream of its samples. Oracles: one
TFLite Micro interpreter invoked frame after frame (integer, bit for bit, int8 and 16x8), one
LiteRT interpreter the same way (float). Models: tests/models/make_lstm_models.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from helpers.lstm_runs import cli  # noqa: E402
from helpers.oracles import litert_outputs, tflm_stream  # noqa: E402
from make_lstm_models import denoiser_tflite, lstm_int8_tflite, lstm_tflite  # noqa: E402

from qconvert.executor.float_executor import run_float  # noqa: E402
from qconvert.executor.int_executor import run_int8  # noqa: E402
from qconvert.executor.streaming import carries_state, has_variable_state, run_frames  # noqa
from qconvert.formats.tflite_reader import read_tflite  # noqa: E402


def _drifting_stream(n: int, shape, seed: int) -> np.ndarray:
    """n frames of a slow sine plus noise: a cell state that integrates over many calls."""
    t = np.arange(n).reshape((n,) + (1,) * len(shape))
    base = 0.8 * np.sin(2 * np.pi * t / 50.0) + 0.6
    noise = 0.3 * np.random.default_rng(seed).standard_normal((n, *shape))
    return (base + noise).astype(np.float32)


INT_MODELS = {
    "int8": dict(),
    "int8_time_major_batch2": dict(batch=2, time_major=True),
    "16x8": dict(wide=True),
}


@pytest.mark.parametrize("variant", INT_MODELS)
def test_integer_stream_carries_the_state_as_tflite_micro(variant):
    data = lstm_int8_tflite(steps=3, **INT_MODELS[variant])
    g = read_tflite(data).graph
    t = g.tensors[g.inputs[0]]
    info = np.iinfo(t.dtype)
    rng = np.random.default_rng(5)
    frames = [rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype) for _ in range(6)]
    want = tflm_stream(data, frames)
    carry: dict = {}
    got = [run_int8(g, {g.inputs[0]: f}, carry=carry)[g.outputs[0]] for f in frames]
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"frame {k}")
    # must-not: without a carry every call starts from the reset state, which the stream
    # leaves after the first call
    fresh = run_int8(g, {g.inputs[0]: frames[3]})[g.outputs[0]]
    assert not np.array_equal(fresh, want[3])
    assert np.array_equal(fresh, tflm_stream(data, [frames[3]])[0])


@pytest.mark.parametrize("variant", ["plain", "projection", "peephole_cifg"])
def test_float_stream_carries_the_state_as_litert(variant):
    kwargs = {"plain": {}, "projection": dict(projection=3),
              "peephole_cifg": dict(peephole=True, cifg=True)}[variant]
    data = lstm_tflite(steps=2, **kwargs)
    g = read_tflite(data).graph
    frames = list(_drifting_stream(8, g.tensors[g.inputs[0]].shape, seed=1))
    want = litert_outputs(data, frames)
    carry: dict = {}
    got = [run_float(g, {g.inputs[0]: f}, carry=carry)[g.outputs[0]] for f in frames]
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"frame {k}")
    assert not np.allclose(run_float(g, {g.inputs[0]: frames[5]})[g.outputs[0]], want[5],
                           atol=1e-4)  # must-not: from the reset state it differs


def test_run_frames_keeps_one_carry_for_the_stream():
    data = lstm_tflite(steps=1)
    model = read_tflite(data)
    assert has_variable_state(model) and carries_state(model)
    frames = list(_drifting_stream(5, model.graph.tensors["x"].shape, seed=2))
    outs = run_frames(model, [{"x": f} for f in frames],
                      lambda g, f, o, k, c: run_float(g, f, o, k, carry=c))
    for a, b in zip(outs, litert_outputs(data, frames)):
        np.testing.assert_allclose(a[model.graph.outputs[0]], b, rtol=1e-5, atol=1e-6)


def test_a_model_without_state_is_no_stream():
    from qconvert.formats.model_io import load_model
    from helpers.oracles import TEST_MODELS

    assert not carries_state(load_model(TEST_MODELS / "kws_ref_model.tflite"))


def _stream_sqnr(tmp_path, float_data: bytes, shape, name: str) -> tuple:
    """quantize on a drifting stream (128 consecutive frames), then TFLite Micro on 200 other
    frames in a row against LiteRT's float stream: (SQNR dB, the cell state's scale)."""
    src, calib, out = (tmp_path / f"{name}.tflite", tmp_path / f"{name}.npy",
                       tmp_path / f"{name}_int8.tflite")
    src.write_bytes(float_data)
    np.save(calib, _drifting_stream(128, shape, seed=1))
    result = cli("quantize", src, "--calibration", calib, "-o", out)
    assert result.exit_code == 0, result.output
    assert "one stream" in result.output  # says how it ran the samples
    test = list(_drifting_stream(200, shape, seed=2))
    want = np.array(litert_outputs(float_data, test))
    data = out.read_bytes()
    g = read_tflite(data).graph
    qi, qo = g.tensors[g.inputs[0]].quant, g.tensors[g.outputs[0]].quant
    s, z = float(qi.scale[0]), int(qi.zero_point[0])
    frames = [np.clip(np.round(f / s) + z, -128, 127).astype(np.int8) for f in test]
    got = (np.array(tflm_stream(data, frames)).astype(np.float64) - int(qo.zero_point[0])) \
        * float(qo.scale[0])
    lstm = next(n for n in g.nodes if n.op == "UnidirectionalSequenceLSTM")
    sqnr = 10 * np.log10(np.sum(want ** 2) / np.sum((want - got) ** 2))
    return sqnr, float(g.tensors[lstm.inputs[19]].quant.scale[0])


def test_streaming_lstm_calibrated_on_its_stream(tmp_path):
    """One step per call: calibrated from the reset state each call (before), the cell scale
    was 2^-15 and the int8 stream in TFLite Micro 6.7 dB from LiteRT's float stream; calibrated
    as a stream, the cell scale covers what the stream integrates."""
    sqnr, cell_scale = _stream_sqnr(tmp_path, lstm_tflite(steps=1), (1, 1, 5), "one_step")
    assert cell_scale >= 2.0 ** -13 and sqnr > 25, (sqnr, cell_scale)


def test_denoiser_stream_stays_accurate(tmp_path):
    sqnr, _ = _stream_sqnr(tmp_path, denoiser_tflite(), (1, 8, 16), "denoiser")
    assert sqnr > 35, sqnr
