"""LSTM end to end: TFLite UNIDIRECTIONAL_SEQUENCE_LSTM and ONNX LSTM (schemas/lstm.py).

Oracles: LiteRT for the float TFLite op (every variant the float kernel runs: time-major,
CIFG, peephole, projection with its clip, layer norm, cell clip, batches), onnxruntime (graph
optimizations off) for ONNX LSTM (forward, reverse, bidirectional, initial states, peepholes),
a read -> write -> read round trip for the 24 inputs, the options and the variable state
tensors. The models are built by tests/models/make_lstm_models.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from helpers.oracles import litert_outputs, tflm_invoke, tflm_stream  # noqa: E402
from make_lstm_models import (denoiser_tflite, lstm_int8_tflite, lstm_onnx,  # noqa: E402
                              lstm_tflite)

from qconvert.errors import QConvertError  # noqa: E402
from qconvert.executor.float_executor import ExecutionError, run_float  # noqa: E402
from qconvert.executor.int_executor import run_int8  # noqa: E402
from qconvert.formats.onnx_reader import read_onnx  # noqa: E402
from qconvert.formats.tflite_reader import read_tflite  # noqa: E402
from qconvert.formats.tflite_writer import write_tflite  # noqa: E402


def litert(data: bytes, x: np.ndarray) -> np.ndarray:
    """LiteRT's output of a one-input, one-output model."""
    return litert_outputs(data, [x])[0]


def ort(data: bytes, x: np.ndarray) -> dict:
    """onnxruntime's outputs (graph optimizations off) by name."""
    import onnxruntime as rt

    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = rt.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": x})))


def _feed(shape, seed=5) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, shape).astype(np.float32)


TFLITE_VARIANTS = {
    "plain": {},
    "time_major_batch2": dict(time_major=True, batch=2),
    "batch3": dict(batch=3),
    "cifg": dict(cifg=True),
    "peephole": dict(peephole=True),
    "projection_clip": dict(projection=4, proj_clip=0.7),
    "layer_norm": dict(layer_norm=True),
    "cell_clip": dict(cell_clip=0.5),
}


# -- float TFLite: LiteRT ---------------------------------------------------------------------
@pytest.mark.parametrize("variant", TFLITE_VARIANTS)
def test_float_tflite_lstm_equals_litert(variant):
    data = lstm_tflite(**TFLITE_VARIANTS[variant])
    model = read_tflite(data)
    model.verify()
    x = _feed(model.graph.tensors["x"].shape)
    want = litert(data, x)
    got = run_float(model, {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
    assert np.ptp(want) > 0.1  # not a near-constant output


def test_float_denoiser_equals_litert():
    data = denoiser_tflite()
    x = _feed((1, 8, 16))
    got = run_float(read_tflite(data), {"features": x})["denoised"]
    np.testing.assert_allclose(got, litert(data, x), rtol=0, atol=2e-6)


def test_float_lstm_batch_mode_equals_one_sample_runs():
    """A batch of N fed to the batch-1 model (batch mode): the state of batch 1 serves every
    sample, each sample's result is its own run's."""
    data = lstm_tflite()
    model = read_tflite(data)
    xs = _feed((3, 6, 5), seed=9)
    got = run_float(model, {"x": xs})["y"]
    for k in range(3):
        np.testing.assert_allclose(got[k:k + 1], litert(data, xs[k:k + 1]), rtol=0, atol=2e-6)


def test_tflite_round_trip_keeps_inputs_options_and_state():
    data = lstm_tflite(peephole=True, projection=4, proj_clip=0.7, cell_clip=0.5,
                       time_major=True, batch=2)
    first = read_tflite(data)
    node = first.graph.nodes[0]
    assert node.op == "UnidirectionalSequenceLSTM" and len(node.inputs) == 24
    assert node.attrs["time_major"] is True
    assert node.attrs["cell_clip"] == pytest.approx(0.5)
    assert node.attrs["proj_clip"] == pytest.approx(0.7)
    assert node.attrs["activation"] == "TANH"
    present = [i for i, n in enumerate(node.inputs) if n is not None]
    assert present == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    states = [first.graph.tensors[node.inputs[i]] for i in (18, 19)]
    assert all(t.extra.get("is_variable") and t.data is None for t in states)
    again = read_tflite(write_tflite(first))
    node2 = again.graph.nodes[0]
    assert node2.attrs == node.attrs and node2.inputs == node.inputs
    for name in node.inputs[1:18]:
        if name is not None:
            np.testing.assert_array_equal(again.graph.tensors[name].data,
                                          first.graph.tensors[name].data)
    x = _feed((6, 2, 5))
    np.testing.assert_array_equal(litert(write_tflite(again), x), litert(data, x))


# -- float ONNX: onnxruntime --------------------------------------------------------------------
ONNX_VARIANTS = {
    "forward": {},
    "all_outputs_batch2": dict(batch=2, outputs=("Y", "Y_h", "Y_c")),
    "reverse": dict(direction="reverse", outputs=("Y", "Y_h")),
    "bidirectional": dict(direction="bidirectional", batch=2, outputs=("Y", "Y_h", "Y_c")),
    "initial_state_peephole": dict(initial=True, peephole=True, outputs=("Y", "Y_c")),
    "no_bias": dict(bias=False),
}


@pytest.mark.parametrize("variant", ONNX_VARIANTS)
def test_float_onnx_lstm_equals_onnxruntime(variant, tmp_path):
    data = lstm_onnx(**ONNX_VARIANTS[variant])
    model = read_onnx(data, tmp_path / "m.onnx")
    x = _feed(model.graph.tensors["x"].shape)
    want = ort(data, x)
    got = run_float(model, {"x": x})
    assert set(got) == set(want)
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, rtol=0, atol=2e-6, err_msg=name)


def test_onnx_lstm_layout_1_refused_by_name(tmp_path):
    """onnxruntime has no kernel for layout=1 either: the executor refuses it, naming it."""
    model = read_onnx(lstm_onnx(layout=1, batch=2), tmp_path / "m.onnx")
    with pytest.raises(ExecutionError, match="layout=1"):
        run_float(model, {"x": _feed((2, 6, 5))})


# -- ONNX -> TFLite: the converted model in LiteRT against the ONNX model in onnxruntime ------
def _convert(tmp_path, data: bytes, *args) -> tuple:
    from click.testing import CliRunner

    from qconvert.cli import main

    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    src.write_bytes(data)
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), *args])
    return result, out


CONVERTED = {
    "pytorch_batch_first": dict(wrap="transpose"),
    "unstack_squeeze": dict(wrap="squeeze"),
    "peephole": dict(wrap="transpose", peephole=True),
    "no_bias": dict(wrap="transpose", bias=False),
}


@pytest.mark.parametrize("variant", CONVERTED)
def test_onnx_lstm_converts_to_one_sequence_lstm(variant, tmp_path):
    data = lstm_onnx(**CONVERTED[variant])
    result, out = _convert(tmp_path, data, "--verify", "3")
    assert result.exit_code == 0, result.output
    model = read_tflite(out.read_bytes())
    ops = [n.op for n in model.graph.nodes]
    assert ops.count("UnidirectionalSequenceLSTM") == 1 and "Transpose" not in ops, ops
    x = _feed((1, 6, 5), seed=11)
    import onnxruntime as rt

    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = rt.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(
        None, {"x_bf": x})[0]
    np.testing.assert_allclose(litert(out.read_bytes(), x), want, rtol=0, atol=2e-6)


def test_onnx_lstm_y_h_is_the_last_step(tmp_path):
    """Y and Y_h both read: Y_h is a SLICE of the sequence's last step."""
    data = lstm_onnx(batch=1, outputs=("Y", "Y_h"))
    model = read_onnx(data, tmp_path / "m.onnx")
    from qconvert.passes.onnx_to_tflite.convert import convert_onnx_to_tflite

    converted = convert_onnx_to_tflite(model).model
    x = _feed((6, 1, 5))
    want = ort(data, x)
    got = run_float(converted, {"x": x})
    np.testing.assert_allclose(got["Y_h"], want["Y_h"], rtol=0, atol=2e-6)
    np.testing.assert_allclose(got["Y"], want["Y"], rtol=0, atol=2e-6)


REFUSED = {
    "bidirectional": (dict(direction="bidirectional"), "direction bidirectional; only forward"),
    "reverse": (dict(direction="reverse"), "direction reverse; only forward"),
    "y_c": (dict(outputs=("Y", "Y_c")), "its cell state output Y_c is read"),
    "initial_state": (dict(initial=True), "non-zero initial_h: TFLite's state starts at zero"),
}


@pytest.mark.parametrize("variant", REFUSED)
def test_onnx_lstm_refusals_are_one_line_and_write_nothing(variant, tmp_path):
    kwargs, cause = REFUSED[variant]
    result, out = _convert(tmp_path, lstm_onnx(**kwargs))
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"LSTM 'LSTM_0' ({cause})" in lines[0] and "m.onnx" in lines[0], lines[0]
    assert not out.exists()


# -- integer: TFLite Micro, bit for bit ---------------------------------------------------------
INT_VARIANTS = {
    "int8": {},
    "time_major_batch2": dict(batch=2, time_major=True),
    "batch3": dict(batch=3),
    "cell_clip": dict(cell_clip=0.3),
    "cell_scale_2e-12": dict(cell_power=-12),
    "cell_scale_2e-9": dict(cell_power=-9),
    "zero_point_edge": dict(x_q=(0.02, -128), h_q=(1 / 64, 127)),
    "16x8": dict(wide=True),
    "16x8_zero_points_clip_time_major": dict(wide=True, zero_points16=(300, -500), cell_clip=0.3,
                                             time_major=True, batch=2),
}


def _int_feed(tensor, seed=3):
    info = np.iinfo(tensor.dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, tensor.shape).astype(
        tensor.dtype)


@pytest.mark.parametrize("variant", INT_VARIANTS)
def test_integer_lstm_bit_exact_with_tflite_micro(variant):
    data = lstm_int8_tflite(**INT_VARIANTS[variant])
    g = read_tflite(data).graph
    for seed in (3, 4):
        x = _int_feed(g.tensors["x"], seed)
        want = tflm_invoke(data, [x])[0]
        got = run_int8(g, {"x": x})["y"]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert len(np.unique(want)) > 10  # not a saturated or constant output


def test_integer_lstm_batch_mode_equals_one_sample_runs():
    data = lstm_int8_tflite()
    g = read_tflite(data).graph
    xs = np.concatenate([_int_feed(g.tensors["x"], s) for s in (5, 6, 7)])
    got = run_int8(g, {"x": xs})["y"]
    for k in range(3):
        np.testing.assert_array_equal(got[k:k + 1], tflm_invoke(data, [xs[k:k + 1]])[0])


def test_integer_lstm_refuses_what_tflite_micro_refuses():
    """No peephole / projection / layer norm, per-tensor weights, a power-of-two cell scale."""
    g = read_tflite(lstm_int8_tflite()).graph
    node = g.nodes[0]
    cell = g.tensors[node.inputs[19]]
    cell.quant.scale[:] = 0.0003
    with pytest.raises(QConvertError, match="cell state scale .* is not a power of two"):
        run_int8(g, {"x": _int_feed(g.tensors["x"])})
    g = read_tflite(lstm_int8_tflite()).graph
    node = g.nodes[0]
    node.inputs[9] = node.inputs[13]  # a "peephole" vector
    with pytest.raises(QConvertError, match=r"no CIFG, peephole, projection or layer norm "
                                            r"inputs \(input slots \[9\]"):
        run_int8(g, {"x": _int_feed(g.tensors["x"])})


# -- quantize: the plan's scheme, the result bit-exact with TFLite Micro, close to float ----------
def _quantize(tmp_path, src: Path, calib: np.ndarray, *args) -> tuple:
    from click.testing import CliRunner

    from qconvert.cli import main

    np.save(tmp_path / "calib.npy", calib)
    out = tmp_path / "q.tflite"
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "-o", str(out), *args])
    return result, out


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30))


def _dequantized_tflm(data: bytes, x: np.ndarray) -> np.ndarray:
    """TFLite Micro's output of the int8 model for float `x`, dequantized."""
    g = read_tflite(data).graph
    tin, tout = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]]
    s, z = float(tin.quant.scale[0]), int(tin.quant.zero_point[0])
    xq = np.clip(np.round(x / s) + z, -128, 127).astype(np.int8)
    y = tflm_invoke(data, [xq])[0]
    assert np.array_equal(y, run_int8(g, {g.inputs[0]: xq})[g.outputs[0]])  # bit-exact
    return (y.astype(np.float64) - int(tout.quant.zero_point[0])) * float(tout.quant.scale[0])


def test_quantized_denoiser_scheme_and_accuracy(tmp_path):
    src = tmp_path / "denoiser.tflite"
    src.write_bytes(denoiser_tflite())
    calib = np.random.default_rng(0).normal(0, 1, (48, 1, 8, 16)).astype(np.float32)
    result, out = _quantize(tmp_path, src, calib)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    g = read_tflite(data).graph
    node = next(n for n in g.nodes if n.op == "UnidirectionalSequenceLSTM")
    t = g.tensors
    for slot in range(1, 9):  # int8 gate matrices, one symmetric scale each
        w = t[node.inputs[slot]]
        assert w.dtype == "int8" and w.quant.scale.size == 1 and w.quant.zero_point[0] == 0
        assert np.abs(w.data).max() == 127
    for k in range(4):  # int32 biases at s_x * s_w of the gate's input matrix
        b, w = t[node.inputs[12 + k]], t[node.inputs[1 + k]]
        assert b.dtype == "int32"
        assert b.quant.scale[0] == np.float32(t[node.inputs[0]].quant.scale[0] *
                                              w.quant.scale[0])
    h, c, y = t[node.inputs[18]], t[node.inputs[19]], t[node.outputs[0]]
    assert h.extra.get("is_variable") and c.extra.get("is_variable")
    assert (h.dtype, h.quant.scale[0], h.quant.zero_point[0]) == (
        y.dtype, y.quant.scale[0], y.quant.zero_point[0])
    assert c.dtype == "int16" and c.quant.zero_point[0] == 0
    assert np.log2(c.quant.scale[0]) == round(np.log2(c.quant.scale[0]))  # a power of two
    assert len(node.origin["intermediates"]) == 5  # LiteRT's integer kernel reads them
    x = np.random.default_rng(1).normal(0, 1, (1, 8, 16)).astype(np.float32)
    want = litert(src.read_bytes(), x)
    assert _sqnr(want, _dequantized_tflm(data, x)) > 30


def test_quantized_model_runs_in_litert_close_to_tflite_micro(tmp_path):
    """LiteRT's integer LSTM (another kernel) runs the written model, within a few steps."""
    src = tmp_path / "lstm.tflite"
    src.write_bytes(lstm_tflite(units=8))
    calib = np.random.default_rng(0).normal(0, 1, (32, 1, 6, 5)).astype(np.float32)
    result, out = _quantize(tmp_path, src, calib)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    g = read_tflite(data).graph
    xq = _int_feed(g.tensors[g.inputs[0]], 8)
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], xq)
    it.invoke()
    lite = it.get_tensor(it.get_output_details()[0]["index"]).astype(int)
    micro = tflm_invoke(data, [xq])[0].astype(int)
    assert np.abs(lite - micro).max() <= 2, np.abs(lite - micro).max()


@pytest.mark.parametrize("wrap", ["transpose", "squeeze"])
def test_quantize_onnx_lstm_with_the_default_batch_size(tmp_path, wrap):
    """The fixed-batch ONNX LSTMs (time-major RESHAPE, the batch axis squeezed) calibrate with
    the default --batch-size 16; the int8 model is close to onnxruntime's float output."""
    data = lstm_onnx(wrap=wrap)
    src = tmp_path / "m.onnx"
    src.write_bytes(data)
    calib = np.random.default_rng(0).normal(0, 1, (40, 1, 6, 5)).astype(np.float32)
    result, out = _quantize(tmp_path, src, calib)
    assert result.exit_code == 0, result.output
    x = np.random.default_rng(2).normal(0, 1, (1, 6, 5)).astype(np.float32)
    import onnxruntime as rt

    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = rt.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(
        None, {"x_bf": x})[0]
    assert _sqnr(want, _dequantized_tflm(out.read_bytes(), x)) > 30


def test_quantize_refuses_an_lstm_tflite_micro_cannot_run_in_integers(tmp_path):
    src = tmp_path / "lstm.tflite"
    src.write_bytes(lstm_tflite(peephole=True))
    calib = np.random.default_rng(0).normal(0, 1, (8, 1, 6, 5)).astype(np.float32)
    result, out = _quantize(tmp_path, src, calib)
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "TFLite Micro's integer LSTM has no peephole" in lines[0] and "lstm.tflite" in lines[0]
    assert not out.exists()


# -- export-c: the portable C kernel, bit-exact with TFLite Micro, the state carried -----------
def _export(tmp_path, data: bytes, *args):
    from click.testing import CliRunner

    from qconvert.cli import main

    src = tmp_path / "lstm_int8.tflite"
    src.write_bytes(data)
    folder = tmp_path / "c"
    result = CliRunner().invoke(main, ["export-c", str(src), "-o", str(folder), "--name", "net",
                                       *args])
    return result, folder


EXPORTED = {
    "int8": dict(),
    "time_major_batch2_clip": dict(batch=2, time_major=True, cell_clip=0.3),
    "zero_point_edge_cell_2e-14": dict(x_q=(0.02, -128), h_q=(1 / 64, 127), cell_power=-14),
}


@pytest.mark.parametrize("variant", EXPORTED)
def test_export_c_lstm_bit_exact_on_host_state_carried(variant, tmp_path):
    from helpers.export_c_harness import build_host, harness_source, io_layout, parse

    data = lstm_int8_tflite(**EXPORTED[variant])
    result, folder = _export(tmp_path, data)
    assert result.exit_code == 0, result.output
    g = read_tflite(data).graph
    frames = [_int_feed(g.tensors["x"], seed) for seed in range(5)]
    want = tflm_stream(data, frames)
    ios = io_layout(g)
    text = __import__("subprocess").run(
        [build_host(folder, harness_source("net", ios, [[f] for f in frames]))],
        capture_output=True, text=True, check=True).stdout
    got = parse(text, [np.int8], len(frames))
    for k, (w, (c_out,)) in enumerate(zip(want, got)):
        np.testing.assert_array_equal(c_out.reshape(w.shape), w, err_msg=f"frame {k}")
    # the state is carried: a fresh interpreter's answer for the last frame differs
    assert not np.array_equal(tflm_invoke(data, [frames[-1]])[0], want[-1])


def test_export_c_lstm_bit_exact_on_cortex_m4(tmp_path):
    from helpers.export_c_harness import (NEEDS_CROSS, build_cortex_m, harness_source, io_layout,
                                  parse, run_qemu)

    if NEEDS_CROSS.args[0]:
        pytest.skip(NEEDS_CROSS.kwargs["reason"])
    data = lstm_int8_tflite(batch=2, cell_clip=0.4)
    result, folder = _export(tmp_path, data)
    assert result.exit_code == 0, result.output
    g = read_tflite(data).graph
    frames = [_int_feed(g.tensors["x"], seed) for seed in range(3)]
    want = tflm_stream(data, frames)
    elf = build_cortex_m(folder, harness_source("net", io_layout(g), [[f] for f in frames]),
                         "m4")
    got = parse(run_qemu(elf, "m4"), [np.int8], len(frames))
    for k, (w, (c_out,)) in enumerate(zip(want, got)):
        np.testing.assert_array_equal(c_out.reshape(w.shape), w, err_msg=f"frame {k}")


def test_export_c_quantized_denoiser_bit_exact(tmp_path):
    """The whole quantized denoiser (LSTM, FULLY_CONNECTED, LOGISTIC, MUL) in C on the host."""
    from helpers.export_c_harness import build_host, harness_source, io_layout, parse

    src = tmp_path / "denoiser.tflite"
    src.write_bytes(denoiser_tflite())
    calib = np.random.default_rng(0).normal(0, 1, (32, 1, 8, 16)).astype(np.float32)
    result, out = _quantize(tmp_path, src, calib)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    result, folder = _export(tmp_path, data)
    assert result.exit_code == 0, result.output
    g = read_tflite(data).graph
    frames = [_int_feed(g.tensors[g.inputs[0]], seed) for seed in range(3)]
    want = tflm_stream(data, frames)
    text = __import__("subprocess").run(
        [build_host(folder, harness_source("net", io_layout(g), [[f] for f in frames]))],
        capture_output=True, text=True, check=True).stdout
    for k, (w, (c_out,)) in enumerate(zip(want, parse(text, [np.int8], len(frames)))):
        np.testing.assert_array_equal(c_out.reshape(w.shape), w, err_msg=f"frame {k}")


def test_convert_verify_runs_float_and_int8_lstm_models(tmp_path):
    """--verify runs the LSTM in both executors and compares every layer both models compute
    (the state and intermediate tensors, which no node computes, are not compared)."""
    from click.testing import CliRunner

    from qconvert.cli import main

    for k, data in enumerate((denoiser_tflite(), lstm_int8_tflite(cell_clip=0.3))):
        src, out = tmp_path / f"m{k}.tflite", tmp_path / f"o{k}.tflite"
        src.write_bytes(data)
        result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--verify", "3"])
        assert result.exit_code == 0, result.output
        assert read_tflite(out.read_bytes()).graph.nodes[0].op == "UnidirectionalSequenceLSTM"


def test_quantize_onnx_lstm_to_qdq_refused_by_name(tmp_path):
    """QDQ ONNX has no integer LSTM TFLite Micro runs: one line naming the op, nothing written
    (the .tflite output lowers it first and quantizes it: above)."""
    src = tmp_path / "m.onnx"
    src.write_bytes(lstm_onnx(wrap="transpose"))
    np.save(tmp_path / "calib.npy", np.zeros((4, 1, 6, 5), np.float32))
    from click.testing import CliRunner

    from qconvert.cli import main

    out = tmp_path / "q.onnx"
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "-o", str(out)])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("cannot quantize: ops with no int8 rule: LSTM")
    assert not out.exists()


def test_export_c_reset_lstm_starts_a_new_sequence(tmp_path):
    """NAME_reset_lstm() between frames: the next frame is a fresh interpreter's answer, the
    frames before it carry the state (TFLite Micro's consecutive invokes)."""
    import subprocess

    from helpers.export_c_harness import build_host, harness_source, io_layout, parse

    data = lstm_int8_tflite(x_q=(0.02, 5), h_q=(1 / 100, -7))  # hidden reset to -7, not 0
    result, folder = _export(tmp_path, data)
    assert result.exit_code == 0, result.output
    assert "void net_reset_lstm(void);" in (folder / "net.h").read_text()
    g = read_tflite(data).graph
    frames = [_int_feed(g.tensors["x"], seed) for seed in range(4)]
    main_c = harness_source("net", io_layout(g), [[f] for f in frames]).replace(
        "        int rc = net_invoke(", "        if (k == 2) {\n            net_reset_lstm();\n"
        "        }\n        int rc = net_invoke(")
    assert "net_reset_lstm();" in main_c
    text = subprocess.run([build_host(folder, main_c)], capture_output=True, text=True,
                          check=True).stdout
    got = [c.reshape(g.tensors["y"].shape) for (c,) in parse(text, [np.int8], 4)]
    want = tflm_stream(data, frames[:2]) + tflm_stream(data, frames[2:])
    for k, (w, c) in enumerate(zip(want, got)):
        np.testing.assert_array_equal(c, w, err_msg=f"frame {k}")
    assert not np.array_equal(tflm_stream(data, frames)[2], want[2])  # the reset mattered
