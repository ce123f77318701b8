"""The 16x8 LSTM: TFLite Micro's UNIDIRECTIONAL_SEQUENCE_LSTM with int16 activations.

What `quantize --activations int16` / `--int16-layers` writes (int16 input, output and hidden
state, int8 weights, int64 gate biases, the int16 cell state) and what `export-c` makes of it
(`qconvert_lstm_s16`), against TFLite Micro (bit for bit, consecutive invokes carrying the
state; host gcc and the emulated Cortex-M4), LiteRT's float model (accuracy; LiteRT has no
16x8 kernel for this op: checked), and the one-line refusals of what the 16x8 path cannot run.
Models: tests/models/make_lstm_models.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from helpers.lstm_runs import c_outputs, cli, int_feed  # noqa: E402
from helpers.oracles import litert_outputs, tflm_invoke, tflm_stream  # noqa: E402
from make_lstm_models import denoiser_tflite, lstm_int8_tflite, lstm_tflite  # noqa: E402

from qconvert.errors import QConvertError  # noqa: E402
from qconvert.executor.int_executor import run_int8  # noqa: E402
from qconvert.formats.tflite_reader import read_tflite  # noqa: E402
from qconvert.formats.tflite_writer import write_tflite  # noqa: E402
from qconvert.ir import QuantParams  # noqa: E402


def _litert_float(data: bytes, x: np.ndarray) -> np.ndarray:
    return litert_outputs(data, [x])[0]


def _quantized(tmp_path, float_model: bytes, calib_shape, *args, name="q", sigma=1.0) -> bytes:
    src, calib = tmp_path / f"{name}_float.tflite", tmp_path / f"{name}_calib.npy"
    src.write_bytes(float_model)
    np.save(calib, np.random.default_rng(0).normal(0, sigma, calib_shape).astype(np.float32))
    out = tmp_path / f"{name}.tflite"
    result = cli("quantize", src, "--calibration", calib, "-o", out, *args)
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def _lstm(graph):
    return next(n for n in graph.nodes if n.op == "UnidirectionalSequenceLSTM")


def _tflm_float(data: bytes, x: np.ndarray) -> np.ndarray:
    """TFLite Micro's output for float `x`, quantized at the input and dequantized at the
    output; the integer executor must give the same integers."""
    g = read_tflite(data).graph
    tin, tout = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]]
    info = np.iinfo(tin.dtype)
    xq = np.clip(np.round(x / float(tin.quant.scale[0])) + int(tin.quant.zero_point[0]),
                 info.min, info.max).astype(tin.dtype)
    y = tflm_invoke(data, [xq])[0]
    np.testing.assert_array_equal(run_int8(g, {g.inputs[0]: xq})[g.outputs[0]], y)
    return (y.astype(np.float64) - int(tout.quant.zero_point[0])) * float(tout.quant.scale[0])


def _sqnr(ref: list, got: list) -> float:
    ref, got = np.concatenate(ref).astype(np.float64), np.concatenate(got)
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - got) ** 2))


# -- quantize ---------------------------------------------------------------------------------
def test_quantize_int16_writes_tflite_micros_16x8_lstm(tmp_path):
    """The scheme (int16 activations and hidden state, zero point 0, int8 per-tensor weights,
    int64 biases at s_x * s_w, int16 power-of-two cell state), bit-exact with TFLite Micro,
    and closer to the float model than the int8 LSTM on the same inputs (measured: 63.1 vs
    38.0 dB)."""
    denoiser = denoiser_tflite()
    data16 = _quantized(tmp_path, denoiser, (48, 1, 8, 16), "--activations", "int16", name="a16")
    data8 = _quantized(tmp_path, denoiser, (48, 1, 8, 16), name="a8")
    g = read_tflite(data16).graph
    node, t = _lstm(g), g.tensors
    x, h, c, y = (t[node.inputs[0]], t[node.inputs[18]], t[node.inputs[19]], t[node.outputs[0]])
    for a in (x, h, y):
        assert a.dtype == "int16" and a.quant.zero_point[0] == 0
    assert (h.quant.scale[0], h.quant.zero_point[0]) == (y.quant.scale[0], y.quant.zero_point[0])
    assert c.dtype == "int16" and c.quant.zero_point[0] == 0
    assert np.log2(c.quant.scale[0]) == round(np.log2(c.quant.scale[0]))
    for k in range(4):
        w, b = t[node.inputs[1 + k]], t[node.inputs[12 + k]]
        assert w.dtype == "int8" and w.quant.scale.size == 1 and w.quant.zero_point[0] == 0
        assert b.dtype == "int64"
        assert b.quant.scale[0] == np.float32(np.float32(x.quant.scale[0]) * w.quant.scale[0])
    assert not any(n.op == "Quantize" for n in g.nodes)  # no int8 island left around it
    xs = [np.random.default_rng(10 + k).normal(0, 1, (1, 8, 16)).astype(np.float32)
          for k in range(12)]
    ref = [_litert_float(denoiser, v) for v in xs]
    s16 = _sqnr(ref, [_tflm_float(data16, v) for v in xs])
    s8 = _sqnr(ref, [_tflm_float(data8, v) for v in xs])
    assert s16 > 55 and s16 > s8 + 15, (s16, s8)


def test_litert_has_no_16x8_kernel_for_the_lstm(tmp_path):
    """docs/lstm.md says LiteRT refuses the 16x8 LSTM (its integer LSTM reads int8 input
    only): it does, at Prepare, naming the op; the int8 one runs there."""
    from ai_edge_litert.interpreter import Interpreter

    data = lstm_int8_tflite(wide=True)
    it = Interpreter(model_content=data)
    x = int_feed(read_tflite(data).graph.tensors["x"])
    with pytest.raises(RuntimeError, match="UNIDIRECTIONAL_SEQUENCE_LSTM"):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()


def test_int16_layers_naming_the_lstm_makes_it_16x8(tmp_path):
    """--int16-layers lstm_out: the LSTM runs 16x8 between two QUANTIZE borders, the rest
    int8; bit-exact with TFLite Micro."""
    data = _quantized(tmp_path, denoiser_tflite(), (32, 1, 8, 16), "--int16-layers", "lstm_out")
    g = read_tflite(data).graph
    node = _lstm(g)
    assert g.tensors[node.inputs[0]].dtype == "int16"
    assert g.tensors[node.outputs[0]].dtype == "int16"
    assert g.tensors[g.inputs[0]].dtype == "int8" and g.tensors[g.outputs[0]].dtype == "int8"
    assert g.tensors[node.inputs[12]].dtype == "int64"
    assert g.producer(node.inputs[0]).op == "Quantize"
    for seed in (1, 2):
        x = int_feed(g.tensors[g.inputs[0]], seed)
        np.testing.assert_array_equal(run_int8(g, {g.inputs[0]: x})[g.outputs[0]],
                                      tflm_invoke(data, [x])[0])


def test_quantize_int16_with_a_cell_clip(tmp_path):
    """cell_clip 0.5: the clip bounds the cell scale (2**-15 covers it) and clips the int16
    cell in TFLite Micro as in the executor; inputs large enough to reach it; close to
    LiteRT's float model, which clips too."""
    model = lstm_tflite(units=8, cell_clip=0.5)
    data = _quantized(tmp_path, model, (32, 1, 6, 5), "--activations", "int16", sigma=3.0)
    g = read_tflite(data).graph
    node = _lstm(g)
    assert g.tensors[node.inputs[19]].quant.scale[0] == np.float32(2.0 ** -15)
    assert node.attrs["cell_clip"] == pytest.approx(0.5)
    xs = [np.random.default_rng(k).normal(0, 3, (1, 6, 5)).astype(np.float32) for k in range(6)]
    got = [_tflm_float(data, v) for v in xs]
    assert _sqnr([_litert_float(model, v) for v in xs], got) > 38  # measured 44.0 dB
    # the clip is reached: the same model without it gives other outputs in TFLite Micro
    unclipped = read_tflite(data)
    _lstm(unclipped.graph).attrs["cell_clip"] = 0.0
    x = int_feed(g.tensors[g.inputs[0]], 1)
    assert not np.array_equal(tflm_invoke(write_tflite(unclipped), [x])[0],
                              tflm_invoke(data, [x])[0])


def test_quantize_int16_refuses_what_tflite_micro_cannot_run(tmp_path):
    """A peephole LSTM has no integer kernel in TFLite Micro at either width: one line."""
    src, calib = tmp_path / "lstm.tflite", tmp_path / "calib.npy"
    src.write_bytes(lstm_tflite(peephole=True))
    np.save(calib, np.zeros((4, 1, 6, 5), np.float32))
    out = tmp_path / "q.tflite"
    result = cli("quantize", src, "--calibration", calib, "-o", out, "--activations", "int16")
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output
    assert "TFLite Micro's integer LSTM has no peephole" in lines[0] and "lstm.tflite" in lines[0]
    assert not out.exists()


# -- export-c: qconvert_lstm_s16 ----------------------------------------------------------------
def _export(tmp_path, data: bytes, *args, name="m"):
    src = tmp_path / f"{name}.tflite"
    src.write_bytes(data)
    folder = tmp_path / f"{name}_c"
    return cli("export-c", src, "-o", folder, "--name", "net", *args), folder


EXPORTED16 = {
    "16x8": dict(wide=True),
    "time_major_batch2_clip": dict(wide=True, batch=2, time_major=True, cell_clip=0.3),
    "zero_points_cell_2e-14": dict(wide=True, zero_points16=(300, -500), cell_power=-14),
}


@pytest.mark.parametrize("variant", EXPORTED16)
def test_export_c_16x8_lstm_bit_exact_on_host_state_carried(variant, tmp_path):
    data = lstm_int8_tflite(**EXPORTED16[variant])
    result, folder = _export(tmp_path, data)
    assert result.exit_code == 0, result.output
    assert "qconvert_lstm_s16(" in (folder / "net.c").read_text()
    g = read_tflite(data).graph
    frames = [int_feed(g.tensors["x"], seed) for seed in range(5)]
    want = tflm_stream(data, frames)
    for k, (w, c) in enumerate(zip(want, c_outputs(folder, g, frames))):
        np.testing.assert_array_equal(c, w, err_msg=f"frame {k}")
    assert len(np.unique(want[-1])) > 10
    assert not np.array_equal(tflm_invoke(data, [frames[-1]])[0], want[-1])  # state carried


def test_export_c_16x8_reset_puts_the_hidden_state_to_zero(tmp_path):
    """TFLite Micro resets an int16 variable to 0, not to its zero point (only int8 gets
    it): NAME_reset_lstm() between frames gives a fresh interpreter's answer."""
    from helpers.export_c_harness import harness_source, io_layout

    data = lstm_int8_tflite(wide=True, zero_points16=(300, -500))
    result, folder = _export(tmp_path, data)
    assert result.exit_code == 0, result.output
    g = read_tflite(data).graph
    frames = [int_feed(g.tensors["x"], seed) for seed in range(4)]
    main_c = harness_source("net", io_layout(g), [[f] for f in frames]).replace(
        "        int rc = net_invoke(", "        if (k == 2) {\n            net_reset_lstm();\n"
        "        }\n        int rc = net_invoke(")
    assert "net_reset_lstm();" in main_c
    want = tflm_stream(data, frames[:2]) + tflm_stream(data, frames[2:])
    for k, (w, c) in enumerate(zip(want, c_outputs(folder, g, frames, main_c))):
        np.testing.assert_array_equal(c, w, err_msg=f"frame {k}")
    assert not np.array_equal(tflm_stream(data, frames)[2], want[2])  # the reset mattered


@pytest.mark.parametrize("kernels", ["portable", "cmsis-nn"])
def test_export_c_quantized_16x8_denoiser_bit_exact(tmp_path, kernels):
    """The whole denoiser quantized 16x8 (LSTM, FULLY_CONNECTED, LOGISTIC, MUL) in C on the
    host, portable and CMSIS-NN builds (the LSTM is qconvert_lstm_s16 in both)."""
    from helpers.export_c_harness import cmsis_nn_available

    if kernels == "cmsis-nn" and not cmsis_nn_available():
        pytest.skip("CMSIS-NN is not beside the repository: the cmsis-nn build is not checked")
    data = _quantized(tmp_path, denoiser_tflite(), (32, 1, 8, 16), "--activations", "int16")
    result, folder = _export(tmp_path, data, "--kernels", kernels)
    assert result.exit_code == 0, result.output
    assert "qconvert_lstm_s16(" in (folder / "net.c").read_text()
    g = read_tflite(data).graph
    frames = [int_feed(g.tensors[g.inputs[0]], seed) for seed in range(3)]
    got = c_outputs(folder, g, frames, cmsis=kernels == "cmsis-nn")
    for k, (w, c) in enumerate(zip(tflm_stream(data, frames), got)):
        np.testing.assert_array_equal(c, w, err_msg=f"frame {k}")


def test_export_c_16x8_lstm_bit_exact_on_cortex_m4(tmp_path):
    from helpers.export_c_harness import (NEEDS_CROSS, build_cortex_m, harness_source,
                                          io_layout, parse, run_qemu)

    if NEEDS_CROSS.args[0]:
        pytest.skip(NEEDS_CROSS.kwargs["reason"])
    data = lstm_int8_tflite(wide=True, batch=2, cell_clip=0.4, zero_points16=(-77, 91))
    result, folder = _export(tmp_path, data)
    assert result.exit_code == 0, result.output
    g = read_tflite(data).graph
    frames = [int_feed(g.tensors["x"], seed) for seed in range(3)]
    elf = build_cortex_m(folder, harness_source("net", io_layout(g), [[f] for f in frames]),
                         "m4")
    got = parse(run_qemu(elf, "m4"), [np.int16], len(frames))
    for k, (w, (c,)) in enumerate(zip(tflm_stream(data, frames), got)):
        np.testing.assert_array_equal(c.reshape(w.shape), w, err_msg=f"frame {k}")


# -- must not: what the 16x8 path refuses, in one line ------------------------------------------
def _changed(change) -> bytes:
    """The 16x8 builder model with `change(graph, lstm node)` applied."""
    model = read_tflite(lstm_int8_tflite(wide=True))
    change(model.graph, _lstm(model.graph))
    return write_tflite(model)


def _hidden_scale_differs(g, node):
    h = g.tensors[node.inputs[18]]
    h.quant = QuantParams([float(h.quant.scale[0]) * 2], [0])


def _int32_biases(g, node):
    for k in range(4):
        b = g.tensors[node.inputs[12 + k]]
        b.data, b.dtype = b.data.astype(np.int32), "int32"


def _huge_input_scale(g, node):  # s_x * s_w / 2**-12 > 128: shift 8 and more
    x = g.tensors[node.inputs[0]]
    x.quant = QuantParams([float(x.quant.scale[0]) * 2 ** 16], [0])


REFUSED16 = {
    "hidden_scale_differs": (_hidden_scale_differs, "differs from the hidden state's", True),
    "int32_biases": (_int32_biases, "reads int64 biases", True),
    "shift_out_of_range": (_huge_input_scale, "outside TFLite's 64-bit requantization range",
                           False),
}


@pytest.mark.parametrize("case", REFUSED16)
def test_16x8_lstm_refusals_are_one_line(case, tmp_path):
    """export-c refuses in one line naming the layer and writes nothing; the integer executor
    (--verify) refuses the same models where TFLite Micro's Prepare would misread them."""
    change, cause, executor_too = REFUSED16[case]
    data = _changed(change)
    result, folder = _export(tmp_path, data)
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output
    assert cause in lines[0] and "UnidirectionalSequenceLSTM 'y'" in lines[0], lines[0]
    assert not folder.exists() or not any(folder.iterdir())
    g = read_tflite(data).graph
    if executor_too:
        with pytest.raises(QConvertError, match=cause):
            run_int8(g, {"x": int_feed(g.tensors["x"])})


def test_int8_lstm_with_int64_biases_refused_in_one_line(tmp_path):
    """The other width: TFLite Micro's int8 LSTM reads int32 biases."""
    model = read_tflite(lstm_int8_tflite())
    node = _lstm(model.graph)
    for k in range(4):
        b = model.graph.tensors[node.inputs[12 + k]]
        b.data, b.dtype = b.data.astype(np.int64), "int64"
    data = write_tflite(model)
    result, folder = _export(tmp_path, data)
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1 and "reads int32 biases" in lines[0]
    g = read_tflite(data).graph
    with pytest.raises(QConvertError, match="reads int32 biases"):
        run_int8(g, {"x": int_feed(g.tensors["x"])})


def test_export_c_header_keeps_the_16x8_gate_biases_int64(tmp_path):
    """export-c-header of a 16x8 LSTM: the gate biases are int64_t arrays holding the model's
    values, one beyond int32 included (an int32_t array would truncate it); gcc reads them."""
    import subprocess

    def big_bias(g, node):
        b = g.tensors[node.inputs[13]]
        data = b.data.copy()
        data[0] = 5_000_000_000
        b.data = data

    data = _changed(big_bias)
    src, header = tmp_path / "m.tflite", tmp_path / "m.h"
    src.write_bytes(data)
    result = cli("export-c-header", src, "-o", header, "--name", "m")
    assert result.exit_code == 0, result.output
    g = read_tflite(data).graph
    node = _lstm(g)
    prints = "\n".join(f'    for (i = 0; i < 7; ++i) printf("%lld ", (long long)'
                       f'm_y_{gate}_gate_bias[i]);' for gate in ("input", "forget", "cell",
                                                                "output"))
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "m.h"\nint main(void)\n{\n    int i;\n'
        f'{prints}\n    return 0;\n}}\n')
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    "-Wno-unused-const-variable", str(tmp_path / "main.c"), "-o", str(exe)],
                   check=True, cwd=tmp_path)
    got = [int(v) for v in subprocess.run([exe], capture_output=True, text=True,
                                          check=True).stdout.split()]
    want = np.concatenate([g.tensors[node.inputs[12 + k]].data for k in range(4)])
    assert got == want.tolist() and 5_000_000_000 in got
