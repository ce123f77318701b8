"""Streaming keyword spotter: qconvert's int8 model against the TFLite converter's, frame by
frame in TFLite Micro (state in resource variables), both against the float model in LiteRT.

    python bench/bench_streaming.py

Calibration: the 200 frames the converter's representative set used (tests/models/
make_streaming.py, normal, seed 1); evaluation: 300 other frames (seed 7) as one stream.
Prints each int8 model's output SQNR against float and its top-1 agreement with float.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FLOAT = MODELS / "streaming_kws_float.tflite"
CONVERTER = MODELS / "streaming_kws_int8.tflite"


def litert_outputs(model: bytes, frames) -> list:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for f in frames:
        it.set_tensor(i, f)
        it.invoke()
        outs.append(it.get_tensor(o).astype(np.float64))
    return outs


def tflm_outputs(path: Path, frames) -> list:
    """Dequantized outputs of int8 model `path` over the float `frames`, one TFLM stream."""
    from tflite_micro.python.tflite_micro import runtime

    from qconvert.formats.model_io import load_model
    from qconvert.int8.rounding import round_half_away

    g = load_model(path).graph
    qi, qo = g.tensors[g.inputs[0]].quant, g.tensors[g.outputs[0]].quant
    it = runtime.Interpreter.from_bytes(path.read_bytes())
    outs = []
    for f in frames:
        x = np.clip(round_half_away(f / float(qi.scale[0])) + int(qi.zero_point[0]), -128, 127)
        it.set_input(x.astype(np.int8), 0)
        it.invoke()
        y = np.array(it.get_output(0)).astype(np.float64)
        outs.append((y - float(qo.zero_point[0])) * float(qo.scale[0]))
    return outs


def main() -> None:
    calib = np.random.default_rng(1).normal(0, 1, (200, 1, 10)).astype(np.float32)
    frames = list(np.random.default_rng(7).normal(0, 1, (300, 1, 10)).astype(np.float32))
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "calib.npy", calib)
        ours = Path(tmp) / "ours.tflite"
        subprocess.run([sys.executable, "-m", "qconvert.cli", "quantize", str(FLOAT),
                        "--calibration", str(Path(tmp) / "calib.npy"), "-o", str(ours)],
                       check=True, capture_output=True)
        reference = litert_outputs(FLOAT.read_bytes(), frames)
        for label, path in (("qconvert", ours), ("TFLite converter", CONVERTER)):
            got = tflm_outputs(path, frames)
            a = np.concatenate([r.ravel() for r in reference])
            b = np.concatenate([g.ravel() for g in got])
            sqnr = 10 * np.log10(np.sum(a * a) / np.sum((a - b) ** 2))
            top1 = np.mean([np.argmax(r) == np.argmax(g) for r, g in zip(reference, got)])
            print(f"{label:17} output SQNR {sqnr:5.1f} dB, top-1 agreement {100 * top1:5.1f}% "
                  f"over {len(frames)} frames (TFLite Micro, state carried)")


if __name__ == "__main__":
    main()
