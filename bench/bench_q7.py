"""Benchmark: accuracy of the CMSIS-NN paper's power-of-two q7 scheme against qconvert's int8
(s8) scheme on the same float models and calibration data.

For each model: the float model (qconvert's float executor), the int8 model of
`qconvert quantize` (qconvert's integer executor, bit-exact with TFLite Micro) and the q7
model `qconvert export-c --scheme q7` exports (qconvert's q7 executor, bit-exact with the
legacy kernels' Cortex-M4 build) run the evaluation data; prints top-1 against the labels
(digits), or, without labels, top-1 agreement with the float model and the output SQNR.
Flash, RAM and instructions on Cortex-M4 are bench_mcu's (`--images ...,q7-legacy,q7-portable`).

    python bench/bench_q7.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
SAMPLES = ROOT / "sample_models"

# name, float model, calibration, evaluation data (npz key of inputs, of labels or None),
# permutation of the evaluation data into the NHWC layout of the converted model
CASES = [
    ("digits_keras_tflite", SAMPLES / "digits_cnn.tflite", SAMPLES / "digits_calib_nhwc.npy",
     (MODELS / "digits_data_nhwc.npz", "test", "labels"), None),
    ("digits_pytorch_onnx", SAMPLES / "digits_cnn.onnx", SAMPLES / "digits_calib_nchw.npy",
     (MODELS / "digits_data_nchw.npz", "test", "labels"), (0, 2, 3, 1)),
    ("vww_mobilenet_v1", MODELS / "corpus" / "vww_mobilenet_v1.tflite",
     MODELS / "corpus" / "vww_mobilenet_v1_calib.npy", None, None),
    ("ad01_autoencoder", MODELS / "ad01_fp32.tflite", MODELS / "corpus" / "mlperf_ad01_calib.npy",
     None, None),
]


def _int8_outputs(model: Path, calib: Path, x_source: np.ndarray, work: Path) -> np.ndarray:
    """`qconvert quantize` to int8 TFLite, run by the integer executor on float `x_source`
    (the source model's layout; the int8 model is NHWC for ONNX: transposed by the caller)."""
    from qconvert.executor.int_executor import run_int8
    from qconvert.int8.rounding import round_half_away
    from qconvert.formats.model_io import load_model

    target = work / f"{model.stem}_int8.tflite"
    subprocess.run([sys.executable, "-m", "qconvert.cli", "quantize", str(model),
                    "--calibration", str(calib), "-o", str(target)], check=True,
                   capture_output=True, cwd=ROOT)
    m = load_model(str(target))
    name = m.graph.inputs[0]
    t = m.graph.tensors[name]
    s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
    xq = np.clip(round_half_away(x_source / s) + z, -128, 127).astype(np.int8)
    out_t = m.graph.tensors[m.graph.outputs[0]]
    out = run_int8(m.graph, {name: xq})[m.graph.outputs[0]].astype(np.float64)
    return (out - int(out_t.quant.zero_point[0])) * float(out_t.quant.scale[0])


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    from qconvert.quant.report import sqnr

    return round(sqnr(ref, got), 2)


def run_case(name, model, calib, data, perm, work: Path) -> dict:
    """One model's figures (module docstring)."""
    from qconvert.c_export.q7_command import plan_q7_for
    from qconvert.executor.float_executor import run_float
    from qconvert.executor.q7_kernels import run_q7
    from qconvert.formats.model_io import load_model
    from qconvert.quant.q7_plan import dequantize, quantize_input

    if data is None:
        x = np.load(calib).astype(np.float32)
        labels = None
    else:
        d = np.load(data[0])
        x, labels = d[data[1]].astype(np.float32), d[data[2]]
    m = load_model(str(model))
    ref = run_float(m, {m.graph.inputs[0]: x})[m.graph.outputs[0]].reshape(len(x), -1)
    x_nhwc = x if perm is None else x.transpose(perm)
    q7, _ = plan_q7_for(model, calib)
    q7_out = dequantize(run_q7(q7.layers, quantize_input(q7, x_nhwc)), q7.output_frac)
    q7_out = q7_out.reshape(len(x), -1)
    s8_out = _int8_outputs(model, calib, x_nhwc, work).reshape(len(x), -1)
    rec = {"model": name, "samples": len(x), "labels": labels is not None}
    truth = labels if labels is not None else ref.argmax(1)
    classifier = not name.startswith("ad01")  # the autoencoder's output is a reconstruction
    for tag, out in (("float", ref), ("s8", s8_out), ("q7", q7_out)):
        rec[f"{tag}_top1"] = (round(float(np.mean(out.argmax(1) == truth)), 4) if classifier
                              else None)
        if tag != "float":
            rec[f"{tag}_sqnr_db"] = _sqnr(ref, out)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    started = time.time()
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            rec = run_case(*case, Path(tmp))
            records.append(rec)
            truth = "labels" if rec["labels"] else "float top-1 as labels"
            top1 = (f"top-1 float {100 * rec['float_top1']:.1f}%  s8 {100 * rec['s8_top1']:.1f}%"
                    f"  q7 {100 * rec['q7_top1']:.1f}%" if rec["q7_top1"] is not None
                    else "top-1 n/a (not a classifier)")
            print(f"{rec['model']:<22} {rec['samples']:>4} samples ({truth}): {top1};  output "
                  f"SQNR s8 {rec['s8_sqnr_db']:.1f} dB  q7 {rec['q7_sqnr_db']:.1f} dB",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"),
                                         "seconds": round(time.time() - started),
                                         "command": " ".join(sys.argv),
                                         "records": records}, indent=1))


if __name__ == "__main__":
    main()
