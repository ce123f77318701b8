"""16x8 against int8: output SQNR in TFLite Micro, RAM and flash, per model.

For the digits CNN (calibrated on its 128 `calib` samples, measured on 200 held-out `test`
samples) and TFLite corpus models (calibrated and measured on their `*_calib.npy` samples, the
only data they come with), `qconvert quantize` writes three models: int8 (the default),
`--int16-layers auto` and `--activations int16`. Each runs in TFLite Micro; its dequantized
output is compared with the float model in LiteRT (reference kernels): SQNR in dB and top-1
agreement. RAM is the activation arena and flash the weights + biases + constants, both as the
report estimates them (`qconvert.quant.footprint`). On digits the TFLite converter's int8 and
16x8 models (`bench/make_converter_int8.py`, `bench/make_converter_16x8.py`, TensorFlow 2.20,
same calibration samples) are measured the same way, their RAM and flash planned from their
tensors' types.

    python bench/bench_int16.py                 # prints the table
    python bench/bench_int16.py digits_cnn      # only the models named
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_accuracy import ROOT, qconvert_quantize, run_litert  # noqa: E402

MODELS = ROOT / "tests" / "models"
CORPUS = MODELS / "corpus"
CHOICES = (("int8", ()), ("auto", ("--int16-layers", "auto")),
           ("int16", ("--activations", "int16")))


def run_tflm(path: Path, x: np.ndarray) -> np.ndarray:
    """Dequantized first output of an int8 / int16 .tflite in TFLite Micro, sample by sample."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(path.read_bytes())
    inp, out = it.get_input_details(0), it.get_output_details(0)
    (s_in,), (z_in,) = (inp["quantization_parameters"][k] for k in ("scales", "zero_points"))
    (s_out,), (z_out,) = (out["quantization_parameters"][k] for k in ("scales", "zero_points"))
    info = np.iinfo(inp["dtype"])
    q = np.clip(np.sign(x / s_in) * np.floor(np.abs(x / s_in) + 0.5) + z_in, info.min, info.max)
    rows = []
    for sample in q.astype(inp["dtype"]):
        it.set_input(sample.reshape(inp["shape"]), 0)
        it.invoke()
        rows.append(np.array(it.get_output(0)).reshape(-1))
        it.reset()
    return (np.stack(rows).astype(np.float64) - z_out) * s_out


PEERS = {"digits_cnn": (("tflc int8", HERE / "data" / "digits_cnn_converter_int8.tflite"),
                        ("tflc 16x8", HERE / "data" / "digits_cnn_converter_16x8.tflite"))}


def written_footprint(path: Path) -> dict:
    """RAM (greedy arena over the activations' own types) and flash (constant bytes) of a
    quantized .tflite."""
    from qconvert.formats.model_io import load_model
    from qconvert.quant.footprint import arena_bytes, arena_steps

    graph = load_model(path).graph
    sizes = {n: t.nbytes() for n, t in graph.tensors.items() if t.data is None}
    steps = arena_steps(graph, sizes)
    flash = sum(int(t.data.nbytes) for t in graph.tensors.values() if t.data is not None)
    return {"arena_bytes": arena_bytes(sizes, steps, graph.inputs, graph.outputs),
            "flash_bytes": flash}


def cases() -> list:
    """(name, float model, calibration argument, evaluation samples)."""
    digits = MODELS / "digits_data_nhwc.npz"
    found = [("digits_cnn", MODELS / "digits_cnn.tflite", f"{digits}:calib",
              np.load(digits)["test"][:200].astype(np.float32))]
    for name in ("keras_ds_cnn", "keras_resnet8", "keras_mobilenet_v2", "vww_mobilenet_v1"):
        calib = CORPUS / f"{name}_calib.npy"
        found.append((name, CORPUS / f"{name}.tflite", str(calib),
                      np.load(calib).astype(np.float32)))
    return found


def measure(name, model, calibration, xs, work: Path) -> list:
    reference = run_litert(model, xs)
    rows = []
    for choice, extra in CHOICES:
        dst = work / f"{name}_{choice}.tflite"
        report = work / f"{name}_{choice}.json"
        qconvert_quantize(model, calibration, dst, "--report", str(report), *extra)
        got = run_tflm(dst, xs)
        db = 10 * np.log10(np.sum(reference ** 2) / np.sum((reference - got) ** 2))
        top1 = float(np.mean(reference.argmax(-1) == got.argmax(-1))) * 100
        facts = json.loads(report.read_text()).get("int16")
        if facts is None:  # the int8 run: price it as the 16x8 runs price their int8 baseline
            mem = None
            layers = "-"
        else:
            mem = facts["memory"]["chosen"]
            layers = str(len(facts["layers"])) if facts["mode"] != "int16" else "all"
            rows_int8 = facts["memory"]["int8"]
            for r in rows:
                if r["memory"] is None:
                    r["memory"] = rows_int8
        rows.append({"model": name, "choice": choice, "sqnr": db, "top1": top1,
                     "layers": layers, "memory": mem, "samples": len(xs)})
    for label, path in PEERS.get(name, ()):
        if not path.exists():
            continue
        got = run_tflm(path, xs)
        rows.append({"model": name, "choice": label,
                     "sqnr": 10 * np.log10(np.sum(reference ** 2) / np.sum((reference - got) ** 2)),
                     "top1": float(np.mean(reference.argmax(-1) == got.argmax(-1))) * 100,
                     "layers": "-", "memory": written_footprint(path), "samples": len(xs)})
    return rows


def main(argv=None) -> None:
    only = set(sys.argv[1:] if argv is None else argv)
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, calibration, xs in cases():
            if not only or name in only:
                table += measure(name, model, calibration, xs, Path(tmp))
    print(f"{'model':20} {'choice':9} {'int16 layers':>12} {'SQNR dB':>8} {'top-1 %':>8} "
          f"{'RAM B':>8} {'flash B':>8} {'samples':>7}")
    for r in table:
        m = r["memory"]
        print(f"{r['model']:20} {r['choice']:9} {r['layers']:>12} {r['sqnr']:8.2f} "
              f"{r['top1']:8.1f} {m['arena_bytes']:8d} {m['flash_bytes']:8d} {r['samples']:7d}")


if __name__ == "__main__":
    main()
