"""Benchmark (not a test): qconvert's default int8 against the TFLite converter, ai-edge-quantizer
and onnxruntime's quantize_static, side by side in one run, on the same float models and the same
calibration samples (bench/side_by_side_data.py says which models and where the samples come
from: real digits; the corpus models' own sample generators; synthetic MLPerf Tiny inputs).

    python bench/bench_side_by_side.py --tf-python /path/to/tfvenv/bin/python [--markdown]
           [--only REGEX]

Peers, each with its recommended full-integer settings:
- qconvert: `qconvert quantize MODEL --calibration CALIB.npy -o X.tflite` with its defaults
  (ONNX models also to QDQ ONNX); ONNX -> TFLite with `--input-layout nchw`, so every TFLite
  of an ONNX model keeps the ONNX input layout;
- TFLite converter 2.20 (TensorFlow in the separate venv given by --tf-python, see
  bench/side_by_side_peers.py): models that have a Keras source (the Keras corpus models are
  rebuilt from make_corpus_keras.py; digits' converter file is bench/data's, made by
  bench/make_converter_int8.py from the same 128 samples); for the MLPerf Tiny models, the int8
  file MLCommons published (calibrated on real data we do not have);
- ai-edge-quantizer (same venv), static int8 (`static_wi8_ai8`), on the float .tflite (for an ONNX
  model, on qconvert's float TFLite conversion of it, which `qconvert convert --verify` checks);
- onnxruntime quantize_static (ONNX models): QDQ, per-channel int8 weights, int8 activations,
  MinMax, after its recommended quant_pre_process.

Every int8 TFLite runs in the TFLite Micro interpreter (reference kernels: what a microcontroller
computes), QDQ models in onnxruntime with graph optimizations off; references are the float
model in LiteRT / onnxruntime (for an ONNX model's TFLite rows: qconvert's float TFLite of it).
Figures on the evaluation samples: SQNR of all outputs vs float (dB), top-1 agreement with float
(classifiers), top-1 vs labels (digits). "+dB" is qconvert's margin over the best peer on the same
runtime. Outputs are kept in bench/out/side_by_side/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_common import sqnr  # noqa: E402
from side_by_side_data import CASES, digits_labels, samples  # noqa: E402

ROOT = HERE.parent
WORK = HERE / "out" / "side_by_side"
DIGITS_TFLC = HERE / "data" / "digits_cnn_converter_int8.tflite"
MLCOMMONS_INT8 = {"mlperf_resnet8": ROOT / "tests/models/pretrainedResnet_quant.tflite",
                  "mlperf_kws": ROOT / "tests/models/kws_ref_model.tflite"}


# ---- runtimes --------------------------------------------------------------------------------

def _quantize_input(x: np.ndarray, detail: dict) -> np.ndarray:
    dtype = np.dtype(detail["dtype"])
    if dtype.kind == "f":
        return x.astype(dtype)
    q = detail["quantization_parameters"]
    scale, zero = float(q["scales"][0]), int(q["zero_points"][0])
    info = np.iinfo(dtype)
    r = x / scale
    return np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5) + zero, info.min, info.max).astype(dtype)


def _dequantize_output(y: np.ndarray, detail: dict) -> np.ndarray:
    if np.dtype(detail["dtype"]).kind == "f":
        return y.astype(np.float64)
    q = detail["quantization_parameters"]
    return (y.astype(np.float64) - int(q["zero_points"][0])) * float(q["scales"][0])


def run_tflm(path: Path, x: np.ndarray) -> list:
    """Every output (dequantized, float64, [n, ...]) of a .tflite in TFLite Micro, sample by
    sample; int8 / int16 / float inputs and outputs."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(path.read_bytes())
    inp = it.get_input_details(0)
    import tflite

    graph = tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0)
    details = [it.get_output_details(k) for k in range(graph.OutputsLength())]
    outs = []
    for sample in x:
        it.set_input(_quantize_input(sample, inp).reshape(inp["shape"]), 0)
        it.invoke()
        outs.append([_dequantize_output(np.array(it.get_output(k)), d).reshape(-1)
                     for k, d in enumerate(details)])
    return [np.stack([r[k] for r in outs]) for k in range(len(outs[0]))]


def run_litert(path: Path, x: np.ndarray) -> list:
    """Every output of a float .tflite in LiteRT (reference kernels), sample by sample."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    inp = it.get_input_details()[0]
    it.resize_tensor_input(inp["index"], [1, *x.shape[1:]])
    it.allocate_tensors()
    outs = it.get_output_details()
    rows = []
    for sample in x:
        it.set_tensor(inp["index"], sample[None].astype(np.float32))
        it.invoke()
        rows.append([it.get_tensor(o["index"]).reshape(-1).astype(np.float64) for o in outs])
    return [np.stack([r[k] for r in rows]) for k in range(len(outs))]


def run_ort(path: Path, x: np.ndarray) -> list:
    """Every output of an ONNX model in onnxruntime, graph optimizations off, sample by sample."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    rows = [[y.reshape(-1).astype(np.float64) for y in sess.run(None, {name: x[i:i + 1]})]
            for i in range(len(x))]
    return [np.stack([r[k] for r in rows]) for k in range(len(rows[0]))]


def figures(y: list, ref: list, case, labels) -> dict:
    """SQNR over all outputs, top-1 agreement with float and vs labels (first output)."""
    got, want = np.concatenate(y, axis=1), np.concatenate(ref, axis=1)
    out = {"sqnr": sqnr(want, got)}
    if case.classifier:
        out["agree"] = float(np.mean(np.argmax(y[0], -1) == np.argmax(ref[0], -1)))
    if labels is not None:
        out["top1"] = float(np.mean(np.argmax(y[0], -1) == labels))
    return out


# ---- quantizers ------------------------------------------------------------------------------

def qconvert(*args: str) -> None:
    """`qconvert ARGS` in a subprocess; a failure raises with its one-line message."""
    p = subprocess.run([sys.executable, "-m", "qconvert.cli", *args], capture_output=True,
                       text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1])


def shape_args(case) -> list:
    return [a for name, shape in case.shapes.items()
            for a in ("--input-shape", f"{name}:{','.join(map(str, shape))}")]


def ort_quantize(src: Path, calib: np.ndarray, dst: Path, preprocess: bool = True) -> Path:
    """onnxruntime: quant_pre_process (its recommendation), then quantize_static QDQ,
    per-channel int8 weights, int8 activations, MinMax."""
    import logging

    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    here = os.getcwd()
    os.chdir(WORK)  # onnxruntime's temporary files land in the working directory
    try:
        pre = dst.with_suffix(".pre.onnx") if preprocess else src
        if preprocess:
            quant_pre_process(str(src), str(pre))
        name = onnx.load(str(pre)).graph.input[0].name

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.i = 0

            def get_next(self):
                if self.i >= len(calib):
                    return None
                self.i += 1
                return {name: calib[self.i - 1:self.i]}

        logging.getLogger().setLevel(logging.ERROR)
        quantize_static(str(pre), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
    finally:
        os.chdir(here)
    return dst


def run_peers(tf_python: str, jobs: list) -> dict:
    """bench/side_by_side_peers.py in the TensorFlow venv: {name: {"tflc": .., "aeq": ..}}."""
    if not jobs:
        return {}
    jobs_file = WORK / "peer_jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    p = subprocess.run([tf_python, str(HERE / "side_by_side_peers.py"), str(jobs_file)],
                       capture_output=True, text=True)
    found = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            found[d["name"]] = d
    if p.returncode != 0 and not found:
        raise SystemExit(f"side_by_side_peers.py failed: {p.stderr.strip()[-500:]}")
    return found


# ---- the benchmark ---------------------------------------------------------------------------

def build(case, tf_found: dict) -> list:
    """[(runtime, quantizer, path or failure text)] for one case; writes its files into WORK."""
    stem = WORK / case.name.replace(".", "_")
    calib = f"{stem}.calib.npy"
    rows = []

    def attempt(runtime, label, make):
        try:
            rows.append((runtime, label, make()))
        except Exception as exc:
            rows.append((runtime, label, f"failed: {str(exc).splitlines()[0][:100]}"))

    onnx_model = case.path.suffix == ".onnx"
    layout = ["--input-layout", "nchw"] if onnx_model else []
    dst = Path(f"{stem}.qc.tflite")
    attempt("TFLM", "qconvert (defaults)",
            lambda: (qconvert("quantize", str(case.path), "--calibration", calib, "-o", str(dst),
                              *layout, *shape_args(case)), dst)[1])
    peers = tf_found.get(case.name, {})
    tflc = DIGITS_TFLC if case.name == "digits_cnn.tflite" else MLCOMMONS_INT8.get(case.name)
    tflc_label = ("TFLite converter (MLCommons' int8 file)" if case.name in MLCOMMONS_INT8
                  else "TFLite converter 2.20")
    if tflc is None:
        tflc = peers.get("tflc")
    if tflc is not None and not onnx_model:
        rows.append(("TFLM", tflc_label, Path(tflc) if Path(str(tflc)).exists() else tflc))
    aeq = peers.get("aeq")
    if aeq is not None:
        rows.append(("TFLM", "ai-edge-quantizer (static_wi8_ai8)",
                     Path(aeq) if Path(str(aeq)).exists() else aeq))
    if onnx_model:
        qdq = Path(f"{stem}.qc.onnx")
        attempt("ORT", "qconvert (defaults), QDQ",
                lambda: (qconvert("quantize", str(case.path), "--calibration", calib, "-o",
                                  str(qdq), *shape_args(case)), qdq)[1])
        attempt("ORT", "ort pre_process + quantize_static",
                lambda: ort_quantize(case.path, np.load(calib), Path(f"{stem}.ort.onnx")))
        if isinstance(rows[-1][2], str):  # its pre-processing failed: without it, as a user would
            attempt("ORT", "ort quantize_static (no pre_process)",
                    lambda: ort_quantize(case.path, np.load(calib), Path(f"{stem}.ort.onnx"),
                                         preprocess=False))
    return rows


def float_tflite(case) -> Path:
    """The float .tflite the TFLite rows compare against (and AEQ quantizes)."""
    if case.path.suffix != ".onnx":
        return case.path
    dst = WORK / f"{case.name}.float.tflite"
    qconvert("convert", str(case.path), "-o", str(dst), "--input-layout", "nchw",
             "--verify", "2", *shape_args(case))
    return dst


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", help="python of a venv with tensorflow and ai-edge-quantizer "
                    "(without it: no TFLite converter / ai-edge-quantizer rows)")
    ap.add_argument("--only", help="regular expression: only these models")
    ap.add_argument("--markdown", action="store_true", help="also print the table of docs/results/accuracy.md")
    a = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    cases = [c for c in CASES if not a.only or re.search(a.only, c.name)]

    floats, jobs = {}, []
    for case in cases:
        stem = WORK / case.name.replace(".", "_")
        np.save(f"{stem}.calib.npy", samples(case, "calib"))
        try:
            floats[case.name] = float_tflite(case)
        except Exception as exc:
            floats[case.name] = f"failed: {exc}"
            continue
        needs_tflc = case.keras is not None
        jobs.append({"name": case.name, "float": str(floats[case.name]),
                     "calib": f"{stem}.calib.npy", "keras": case.keras if needs_tflc else None,
                     "out": str(WORK)})
    tf_found = run_peers(a.tf_python, jobs) if a.tf_python else {}

    results = []
    for case in cases:
        x = samples(case, "eval")
        labels = digits_labels() if case.real else None
        refs = {}
        if isinstance(floats[case.name], Path):
            refs["TFLM"] = run_litert(floats[case.name], x)
        if case.path.suffix == ".onnx":
            refs["ORT"] = run_ort(case.path, x)
        for runtime, label, made in build(case, tf_found):
            if isinstance(made, str) or runtime not in refs:
                results.append((case, runtime, label, made if isinstance(made, str) else "-"))
                continue
            try:
                y = run_tflm(made, x) if runtime == "TFLM" else run_ort(made, x)
                results.append((case, runtime, label, figures(y, refs[runtime], case, labels)))
            except Exception as exc:
                results.append((case, runtime, label, f"failed: {str(exc).splitlines()[0][:90]}"))
        print_case(results, case)
    if a.markdown:
        print_markdown(results)


def _margin(results, case, runtime) -> str:
    mine = [r[3]["sqnr"] for r in results if r[0] is case and r[1] == runtime
            and r[2].startswith("qconvert") and isinstance(r[3], dict)]
    peers = [r[3]["sqnr"] for r in results if r[0] is case and r[1] == runtime
             and not r[2].startswith("qconvert") and isinstance(r[3], dict)]
    return f"{mine[0] - max(peers):+.1f}" if mine and peers else "-"


def print_case(results, case) -> None:
    rows = [r for r in results if r[0] is case]
    data = "real" if case.real else ("synthetic" if case.data.startswith("mlperf") else
                                     "realistic")
    print(f"\n{case.name} ({data} data)")
    for _, runtime, label, fig in rows:
        if isinstance(fig, str):
            print(f"  {runtime:5} {label:42} {fig}")
            continue
        top1 = f"{100 * fig['top1']:5.1f}%" if "top1" in fig else "     -"
        agree = f"{100 * fig['agree']:5.1f}%" if "agree" in fig else "     -"
        print(f"  {runtime:5} {label:42} {fig['sqnr']:7.2f} dB  agree {agree}  top-1 {top1}")
    for runtime in ("TFLM", "ORT"):
        m = _margin(results, case, runtime)
        if m != "-":
            print(f"  {runtime:5} qconvert margin over the best peer: {m} dB")


def print_markdown(results) -> None:
    """One row of docs/results/accuracy.md per (model, runtime): SQNR of each quantizer and qconvert's margin."""
    print("\n| model (data) | runtime | qconvert | TFLite converter | ai-edge-quantizer | "
          "ort quantize_static | margin |")
    print("|---|---|---|---|---|---|---|")
    seen = []
    for case, runtime, _, _ in results:
        if (case, runtime) in seen:
            continue
        seen.append((case, runtime))
        cells = {}
        for c, rt, label, fig in results:
            if c is case and rt == runtime:
                key = ("qc" if label.startswith("qconvert") else "tflc" if "converter" in label
                       else "aeq" if "ai-edge" in label else "ort")
                if key in cells and isinstance(fig, str):
                    continue  # the fallback row already filled it
                cells[key] = (f"{fig['sqnr']:.1f}" if isinstance(fig, dict) else "fails"
                              if fig.startswith("failed") else fig)
        data = "real" if case.real else ("synthetic" if case.data.startswith("mlperf") else
                                         "realistic")
        print(f"| {case.name} ({data}) | {runtime} | {cells.get('qc', '-')} | "
              f"{cells.get('tflc', '-')} | {cells.get('aeq', '-')} | {cells.get('ort', '-')} | "
              f"{_margin(results, case, runtime)} |")


if __name__ == "__main__":
    main()
