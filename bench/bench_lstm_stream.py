"""Streaming LSTM: an int8 / 16x8 LSTM fed one (or a few) steps per call, frame after frame in
one TFLite Micro interpreter (hidden and cell state carried in TFLite's variable tensors),
against the float model in one LiteRT interpreter over the same stream.

    python bench/bench_lstm_stream.py [--frames 200]

Models: tests/models/make_lstm_models.py `lstm_tflite(steps=S)` and `denoiser_tflite(steps=S)`,
S = 1 and 2. Calibration: 64 consecutive frames of one stream (normal, seed 1) handed to
`qconvert quantize --calibration`; evaluation: another stream (seed 7). Prints, per model and
activation width, the output SQNR over the whole stream, the cell-state scale `quantize` chose
and the largest |c| of the float stream (the scale that stream would need is the power of two
covering it / 32768).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT))

from make_lstm_models import denoiser_tflite, lstm_tflite  # noqa: E402


def cell_state_name(model_bytes: bytes) -> tuple:
    """The LSTM's cell-state input (its 20th input, a variable tensor) and the graph."""
    from qconvert.formats.model_io import load_model_data

    g = load_model_data(model_bytes, "model.tflite").graph
    node = next(n for n in g.nodes if n.op == "UnidirectionalSequenceLSTM")
    return node.inputs[19], g


def litert_float(model: bytes, frames, cell: str) -> tuple:
    """Outputs of one LiteRT interpreter over `frames` and the largest |c| it held."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    c = next(d["index"] for d in it.get_tensor_details() if d["name"] == cell)
    outs, cmax = [], 0.0
    for f in frames:
        it.set_tensor(i, f)
        it.invoke()
        outs.append(it.get_tensor(o).astype(np.float64))
        cmax = max(cmax, float(np.max(np.abs(it.get_tensor(c)))))
    return outs, cmax


def tflm_dequantized(model: bytes, frames) -> list:
    """Dequantized outputs of the integer `model` over float `frames`, one TFLM interpreter."""
    from tflite_micro.python.tflite_micro import runtime

    from qconvert.formats.model_io import load_model_data
    from qconvert.int8.rounding import round_half_away

    g = load_model_data(model, "model.tflite").graph
    ti, to = g.tensors[g.inputs[0]], g.tensors[g.outputs[0]]
    info = np.iinfo(np.dtype(ti.dtype))
    it = runtime.Interpreter.from_bytes(model)
    outs = []
    for f in frames:
        q = round_half_away(f / float(ti.quant.scale[0])) + int(ti.quant.zero_point[0])
        it.set_input(np.clip(q, info.min, info.max).astype(ti.dtype), 0)
        it.invoke()
        y = np.array(it.get_output(0)).astype(np.float64)
        outs.append((y - float(to.quant.zero_point[0])) * float(to.quant.scale[0]))
    return outs


def sqnr(reference: list, got: list) -> float:
    a = np.concatenate([r.ravel() for r in reference])
    b = np.concatenate([g.ravel() for g in got])
    return float(10 * np.log10(np.sum(a * a) / np.sum((a - b) ** 2)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=200)
    args = ap.parse_args()
    models = {f"lstm_tflite(steps={s})": lstm_tflite(steps=s) for s in (1, 2)}
    models.update({f"denoiser_tflite(steps={s})": denoiser_tflite(steps=s) for s in (1, 2)})
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for label, model in models.items():
            path = tmp / "float.tflite"
            path.write_bytes(model)
            cell, g = cell_state_name(model)
            shape = g.tensors[g.inputs[0]].shape
            calib = np.random.default_rng(1).normal(0, 1, (64, *shape)).astype(np.float32)
            frames = list(np.random.default_rng(7).normal(0, 1, (args.frames, *shape))
                          .astype(np.float32))
            np.save(tmp / "calib.npy", calib)
            reference, cmax = litert_float(model, frames, cell)
            for width in ("int8", "int16"):
                out = tmp / f"q_{width}.tflite"
                subprocess.run([sys.executable, "-m", "qconvert.cli", "quantize", str(path),
                                "--calibration", str(tmp / "calib.npy"), "--activations",
                                width, "-o", str(out)], check=True, capture_output=True)
                q = out.read_bytes()
                _, gq = cell_state_name(q)
                scale = float(gq.tensors[cell].quant.scale[0])
                got = tflm_dequantized(q, frames)
                print(f"{label:24} {width:5}: SQNR {sqnr(reference, got):5.1f} dB over "
                      f"{len(frames)} frames; cell scale 2^{np.log2(scale):.0f} "
                      f"(covers |c| <= {scale * 32768:g}); float stream max |c| {cmax:.3g}")


if __name__ == "__main__":
    main()
