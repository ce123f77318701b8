"""Benchmark (not a test): accuracy of qconvert's int8 models against the TFLite converter's and
onnxruntime's quantizer on the same float model and the same calibration data.

    python bench/bench_accuracy.py [--mlperf-samples 200] [--no-mlperf]

Needs only the test extras (onnxruntime, ai-edge-litert, tflite-micro); never TensorFlow. The
TFLite converter's int8 model of digits_cnn is generated once, in a separate TensorFlow venv, by
bench/make_converter_int8.py and kept as bench/data/digits_cnn_converter_int8.tflite.

Data: tests/models/digits_data_{nhwc,nchw}.npz: 128 `calib` samples (the calibration set of
every quantizer below) and 497 `test` samples, labelled by the last 497 `labels`.

digits_cnn.tflite (Keras-trained, float TFLite): int8 models run in the TFLite Micro interpreter
(reference kernels, what a microcontroller computes), the float one in LiteRT; inputs quantized
with each model's own input (scale, zero point), outputs dequantized with its output ones.
- qconvert:  `qconvert quantize digits_cnn.tflite --calibration digits_data_nhwc.npz:calib`
             with its defaults, then with each setting of `VARIANTS` (every range method,
             bias correction off, cross-layer equalization on) and `--fc-per-channel` (the
             converter of TF 2.20 quantizes fully connected weights per channel too);
- converter: TF 2.20 `TFLiteConverter` with `Optimize.DEFAULT`, the same 128 samples as
             representative dataset, int8 input and output (bench/make_converter_int8.py).

digits_cnn.onnx (PyTorch export, BatchNormalization unfused): every model runs in onnxruntime with
the same session options, graph optimizations off ("ORT", the QDQ graph as written) and all on
("ORT opt", onnxruntime fuses QDQ groups into its int8 kernels: what a deployment computes).
- qconvert:  `qconvert quantize digits_cnn.onnx --calibration digits_data_nchw.npz:calib`
             (QDQ) with its defaults and each setting of `VARIANTS`;
- ort:       `quantize_static` on the float model as given, the 128 samples fed one at a time:
             QDQ, per_channel=True, QInt8 activations and weights, MinMax; its default settings
             (per-tensor weights); and per-channel after its recommended `quant_pre_process`
             (which folds BatchNormalization into Conv, as qconvert's fusion does).

Figures, on the 497 test samples: top-1 accuracy against the labels, SQNR of the output
(10 log10(sum y^2 / sum (y - y_q)^2), y the float model's output) and top-1 agreement with float;
"float" counts the layers of the output that still compute in float: weighted layers (conv,
depthwise, fully connected, Gemm, MatMul) whose weights are float constants, and BatchNorms.

Secondary evidence (MLPerf Tiny pairs, trained models, the converter's int8 made by MLCommons
with calibration data we do not have): qconvert calibrates on synthetic inputs shaped like the
training data (`realistic_inputs`: images, log-mel frames, MFCC-like features, within the input
range the converter's int8 input declares), and every int8 model is compared with float on other
samples of the same distribution. See the printed caveat.

Outputs are kept in bench/out/accuracy/ for inspection.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from bench_common import run_ort, sqnr

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODELS = ROOT / "tests" / "models"
CONVERTER_INT8 = HERE / "data" / "digits_cnn_converter_int8.tflite"
WORK = HERE / "out" / "accuracy"
MLPERF = (("resnet", "pretrainedResnet.tflite", "pretrainedResnet_quant.tflite", True),
          ("kws", "kws_ref_model_float32.tflite", "kws_ref_model.tflite", True),
          ("ad01", "ad01_fp32.tflite", "ad01_int8.tflite", False))  # ad01: an autoencoder
MLPERF_CALIB = 128
CALIB_SEED, EVAL_SEED = 1234, 5678


# ---- figures ---------------------------------------------------------------------------------

WEIGHTED = frozenset({"Conv2D", "DepthwiseConv2D", "FullyConnected", "Gemm", "MatMul"})


def float_layers(path: Path) -> int:
    """Layers of a quantized model still computed in float (see the module docstring)."""
    from qconvert.formats.model_io import load_model

    graph = load_model(str(path)).graph
    count = 0
    for node in graph.nodes:
        w = graph.constant(node.inputs[1]) if node.op in WEIGHTED else None
        count += node.op == "BatchNorm" or (w is not None and w.dtype.kind == "f")
    return count


def figures(y: np.ndarray, y_float: np.ndarray, labels: np.ndarray | None,
            classifier: bool = True) -> dict:
    """top-1 vs labels, SQNR vs float, top-1 agreement with float (classifiers only)."""
    top = np.argmax(y, axis=-1)
    out = {"sqnr": sqnr(y_float, y)}
    if classifier:
        out["agree"] = float(np.mean(top == np.argmax(y_float, axis=-1)))
    if labels is not None:
        out["top1"] = float(np.mean(top == labels))
    return out


# ---- runtimes --------------------------------------------------------------------------------

def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def run_tflm(path: Path, x: np.ndarray) -> np.ndarray:
    """Dequantized first output of an int8 .tflite in TFLite Micro, one sample at a time."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(path.read_bytes())
    inp, out = it.get_input_details(0), it.get_output_details(0)
    (s_in,), (z_in,) = (inp["quantization_parameters"][k] for k in ("scales", "zero_points"))
    (s_out,), (z_out,) = (out["quantization_parameters"][k] for k in ("scales", "zero_points"))
    q = np.clip(_round_half_away(x / s_in) + z_in, -128, 127).astype(np.int8)
    rows = []
    for sample in q:
        it.set_input(sample.reshape(inp["shape"]), 0)
        it.invoke()
        rows.append(np.array(it.get_output(0)).reshape(-1))
    return (np.stack(rows).astype(np.float64) - z_out) * s_out


def run_litert(path: Path, x: np.ndarray) -> np.ndarray:
    """First output of a float .tflite in LiteRT (reference kernels), one sample at a time."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    inp = it.get_input_details()[0]
    it.resize_tensor_input(inp["index"], [1, *x.shape[1:]])
    it.allocate_tensors()
    out = it.get_output_details()[0]
    rows = []
    for sample in x:
        it.set_tensor(inp["index"], sample[None].astype(np.float32))
        it.invoke()
        rows.append(it.get_tensor(out["index"]).reshape(-1).copy())
    return np.stack(rows).astype(np.float64)


# ---- quantizers ------------------------------------------------------------------------------

def qconvert_quantize(src: Path, calibration: str, dst: Path, *extra: str) -> Path:
    """`qconvert quantize SRC --calibration DATA -o DST [extra]` in a subprocess."""
    cmd = [sys.executable, "-m", "qconvert.cli", "quantize", str(src), "--calibration",
           calibration, "-o", str(dst), *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1])
    return dst


def ort_quantize(src: Path, calib: np.ndarray, dst: Path, preprocess: bool = False,
                 **settings) -> Path:
    """onnxruntime's quantize_static (`settings` override its defaults), samples one at a time."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self, name):
            self.name, self.i = name, 0

        def get_next(self):
            if self.i >= len(calib):
                return None
            self.i += 1
            return {self.name: calib[self.i - 1:self.i]}

    model = src
    if preprocess:
        model = dst.with_suffix(".pre.onnx")
        quant_pre_process(str(src), str(model))
    name = onnx.load(str(model)).graph.input[0].name
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process: the third row does
    try:
        quantize_static(str(model), str(dst), Reader(name), **settings)
    finally:
        root.setLevel(level)
    return dst


# ---- the benchmark ---------------------------------------------------------------------------

def load_digits(layout: str) -> tuple:
    """(calib, test, test labels) of digits_data_<layout>.npz; labels are the last len(test)."""
    data = np.load(MODELS / f"digits_data_{layout}.npz")
    calib, test, labels = data["calib"], data["test"], data["labels"]
    if len(labels) < len(test):
        raise SystemExit(f"digits_data_{layout}.npz: {len(labels)} labels for {len(test)} tests")
    return calib.astype(np.float32), test.astype(np.float32), labels[-len(test):]


def row(table: list, model: str, quantizer: str, runtime: str, fig: dict | str) -> None:
    table.append((model, quantizer, runtime, fig))


def print_table(table: list, title: str) -> None:
    print("\n" + textwrap.fill(title, 100))
    print(f"{'model':18} {'quantizer':44} {'runtime':8} {'top-1':>6} {'SQNR dB':>8} "
          f"{'agree':>6} {'float':>5}")
    for model, quantizer, runtime, fig in table:
        head = f"{model:18} {quantizer:44} {runtime:8}"
        if isinstance(fig, str):
            print(f"{head} {fig}")
            continue
        top1 = f"{100 * fig['top1']:5.1f}%" if "top1" in fig else "     -"
        db = "float" if fig["sqnr"] == float("inf") else f"{fig['sqnr']:.2f}"
        agree = f"{100 * fig['agree']:5.1f}%" if "agree" in fig else "     -"
        print(f"{head} {top1:>6} {db:>8} {agree:>6} {fig.get('float', '-'):>5}")


def attempt(table, model, quantizer, runtime, make, run, y_float, labels, classifier=True):
    """One row: build with `make()`, run with `run(path)`; a failure is a row, not a crash."""
    try:
        path = make()
        fig = figures(run(path), y_float, labels, classifier)
        fig["float"] = float_layers(path)
        row(table, model, quantizer, runtime, fig)
    except Exception as exc:  # the other rows still run
        row(table, model, quantizer, runtime, f"FAILED: {str(exc).splitlines()[0][:90]}")


# qconvert's settings compared: (label, file stem, extra CLI arguments)
VARIANTS = (("qconvert (defaults)", "qc_default", ()),
            ("qconvert --method minmax", "qc_minmax", ("--method", "minmax")),
            ("qconvert --method percentile", "qc_percentile", ("--method", "percentile")),
            ("qconvert --method mse", "qc_mse", ("--method", "mse")),
            ("qconvert --method entropy", "qc_entropy", ("--method", "entropy")),
            ("qconvert minmax --no-bias-correction", "qc_minmax_nobc",
             ("--method", "minmax", "--no-bias-correction")),
            ("qconvert --no-bias-correction", "qc_nobc", ("--no-bias-correction",)),
            ("qconvert --equalize", "qc_eq", ("--equalize",)))


def bench_digits_tflite(table: list) -> None:
    src = MODELS / "digits_cnn.tflite"
    calib, test, labels = load_digits("nhwc")
    data = f"{MODELS / 'digits_data_nhwc.npz'}:calib"
    y_float = run_litert(src, test)
    row(table, "digits_cnn.tflite", "float", "LiteRT", figures(y_float, y_float, labels))
    variants = VARIANTS + (("qconvert --fc-per-channel", "qc_fcpc", ("--fc-per-channel",)),)
    for label, stem, extra in variants:
        dst = WORK / f"digits_tflite.{stem}.tflite"
        attempt(table, "digits_cnn.tflite", label, "TFLM",
                lambda dst=dst, extra=extra: qconvert_quantize(src, data, dst, *extra),
                lambda p: run_tflm(p, test), y_float, labels)
    attempt(table, "digits_cnn.tflite", "TFLite converter 2.20 (Optimize.DEFAULT)", "TFLM",
            lambda: CONVERTER_INT8, lambda p: run_tflm(p, test), y_float, labels)


def bench_digits_onnx(table: list) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType

    src = MODELS / "digits_cnn.onnx"
    calib, test, labels = load_digits("nchw")
    data = f"{MODELS / 'digits_data_nchw.npz'}:calib"
    per_channel = dict(quant_format=QuantFormat.QDQ, per_channel=True,
                       activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                       calibrate_method=CalibrationMethod.MinMax)
    makers = tuple((label, lambda d, extra=extra: qconvert_quantize(src, data, d, *extra))
                   for label, _stem, extra in VARIANTS) + (
        ("ort quantize_static per-channel MinMax", lambda d: ort_quantize(src, calib, d,
                                                                          **per_channel)),
        ("ort quantize_static defaults (per-tensor)", lambda d: ort_quantize(src, calib, d)),
        ("ort pre_process + per-channel MinMax",
         lambda d: ort_quantize(src, calib, d, preprocess=True, **per_channel)),
    )
    built = {}
    for i, (label, make) in enumerate(makers):
        dst = WORK / f"digits_onnx.{i}.onnx"
        try:
            built[label] = make(dst)
        except Exception as exc:
            built[label] = exc
    for optimized, runtime in ((False, "ORT"), (True, "ORT opt")):
        y_float = run_ort(src, test, optimized)
        row(table, "digits_cnn.onnx", "float", runtime, figures(y_float, y_float, labels))
        for label, _ in makers:
            def make(label=label):
                if isinstance(built[label], Exception):
                    raise built[label]
                return built[label]
            attempt(table, "digits_cnn.onnx", label, runtime, make,
                    lambda p, o=optimized: run_ort(p, test, o), y_float, labels)


def realistic_inputs(name: str, int8_model: Path, n: int, seed: int) -> np.ndarray:
    """n float samples shaped like the data the MLPerf Tiny model was trained on, inside the
    input range its int8 version declares: ResNet-8 smooth blocky 32x32 RGB images of 0..255
    pixels; the anomaly detector 5 frames of 128 log-mel energies (a per-band level falling from
    -20 to -60 dB, a per-frame level and per-band noise); KWS 49x10 MFCC-like features (a large
    first coefficient, smaller higher ones, a per-utterance offset plus per-frame noise)."""
    from tflite_micro.python.tflite_micro import runtime

    d = runtime.Interpreter.from_bytes(int8_model.read_bytes()).get_input_details(0)
    (s,), (z,) = (d["quantization_parameters"][k] for k in ("scales", "zero_points"))
    lo, hi = (-128 - int(z)) * float(s), (127 - int(z)) * float(s)
    rng = np.random.default_rng(seed)
    shape = (n, *d["shape"][1:])
    if name == "resnet":
        low = rng.uniform(0, 255, (n, 4, 4, 3))
        x = np.repeat(np.repeat(low, 8, axis=1), 8, axis=2) + rng.normal(0, 12, (n, 32, 32, 3))
        x = np.round(np.clip(x, 0, 255))
    elif name == "ad01":
        band = np.linspace(-20, -60, 128)
        x = band[None, None, :] + rng.normal(0, 8, (n, 5, 1)) + rng.normal(0, 4, (n, 5, 128))
    else:
        scale = np.linspace(1.0, 0.15, shape[2])
        base = rng.standard_normal((n, 1, shape[2]))
        x = (base + 0.5 * rng.standard_normal((n, shape[1], shape[2]))) * scale
        x = x * (0.35 * (hi - lo) / 3) + (lo + hi) / 2
    return np.clip(x, lo, hi).reshape(shape).astype(np.float32)


def bench_mlperf(table: list, samples: int) -> None:
    for name, float_file, int8_file, classifier in MLPERF:
        src, peer = MODELS / float_file, MODELS / int8_file
        calib = realistic_inputs(name, peer, MLPERF_CALIB, CALIB_SEED)
        test = realistic_inputs(name, peer, samples, EVAL_SEED)
        calib_path = WORK / f"{name}_realistic_calib.npy"
        np.save(calib_path, calib)
        y_float = run_litert(src, test)
        for label, stem, extra in VARIANTS:
            dst = WORK / f"{name}.{stem}.tflite"
            attempt(table, f"{name} (MLPerf)", label, "TFLM",
                    lambda src=src, dst=dst, c=calib_path, e=extra:
                    qconvert_quantize(src, str(c), dst, *e),
                    lambda p, t=test: run_tflm(p, t), y_float, None, classifier)
        attempt(table, f"{name} (MLPerf)", "TFLite converter (MLCommons' int8 file)", "TFLM",
                lambda peer=peer: peer, lambda p, t=test: run_tflm(p, t), y_float, None,
                classifier)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlperf-samples", type=int, default=200,
                    help="random evaluation samples per MLPerf Tiny model")
    ap.add_argument("--no-mlperf", action="store_true", help="skip the MLPerf Tiny part")
    a = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)

    table: list = []
    bench_digits_tflite(table)
    bench_digits_onnx(table)
    print_table(table, "Same float model, same 128 calibration samples; figures on the 497 test "
                "samples (top-1 vs labels, SQNR and top-1 agreement vs the float model)")
    if not a.no_mlperf:
        table = []
        bench_mlperf(table, a.mlperf_samples)
        print_table(table, f"SECONDARY - MLPerf Tiny pairs (trained models): {a.mlperf_samples} "
                    "synthetic inputs shaped like the training data (realistic_inputs); qconvert "
                    f"calibrated on {MLPERF_CALIB} other samples of that distribution, the "
                    "converter on MLCommons' real data (unknown to us); SQNR / agreement vs float")
        print(textwrap.fill(
            "Caveat: synthetic inputs are not the data these models were trained on; the "
            "activation ranges they produce differ from those of real data, qconvert is "
            "calibrated on the very distribution it is scored on and the converter is not. "
            "The figures say how faithfully each int8 model tracks float on this input "
            "distribution, not how accurate it is in use.", 100))


if __name__ == "__main__":
    main()
