"""Per-branch quantization of a detector head's concat: SQNR per output branch, before and after.

`tests/models/corpus/yolo_head.onnx` concatenates box coordinates in pixels (0..96) with
objectness and class scores (0..1). `qconvert quantize` (its calibration file) writes int8 TFLite
and QDQ ONNX twice: as it does now (the concat per branch: int16 in TFLite, float in QDQ,
`qconvert/quant/concat_branches.py`) and with that step switched off (one int8 scale for the
concat, what qconvert wrote before). Each result runs on 4 smooth random images (seed 0): TFLite in
LiteRT (its int16 / int8 output dequantized), QDQ in onnxruntime (optimizations off); the SQNR of
each branch is taken against onnxruntime on the float model.

    python bench/bench_concat_branches.py
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "models" / "corpus" / "yolo_head.onnx"
CALIB = ROOT / "tests" / "models" / "corpus" / "yolo_head_calib.npy"
BRANCHES = (("boxes", slice(0, 4)), ("objectness", slice(4, 5)), ("classes", slice(5, 8)))


def _images(n=4):
    rng = np.random.default_rng(0)
    return [np.clip(np.kron(rng.uniform(0, 1, (1, 3, 8, 8)), np.ones((1, 1, 8, 8)))
                    + rng.normal(0, 0.05, (1, 3, 64, 64)), 0, 1).astype(np.float32)
            for _ in range(n)]


def _ort(path, xs):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])
    return np.concatenate([s.run(None, {"images": x})[0] for x in xs]).astype(np.float64)


def _litert(path, xs):
    from ai_edge_litert.interpreter import Interpreter

    out = []
    for x in xs:
        it = Interpreter(model_content=Path(path).read_bytes())
        it.allocate_tensors()
        d = it.get_input_details()[0]
        s, z = d["quantization"]
        q = np.clip(np.round(x.transpose(0, 2, 3, 1) / s) + z, -128, 127).astype(d["dtype"])
        it.set_tensor(d["index"], q)
        it.invoke()
        od = it.get_output_details()[0]
        s2, z2 = od["quantization"]
        out.append((it.get_tensor(od["index"]).astype(np.float64) - z2) * s2)
    return np.concatenate(out)


def _sqnr(want, got):
    return 10 * np.log10(np.sum(want ** 2) / np.sum((want - got) ** 2))


def main() -> None:
    from click.testing import CliRunner

    import qconvert.quant.concat_branches as cb
    from qconvert.cli import main as cli

    xs = _images()
    want = _ort(MODEL, xs)
    found = cb.swamped_concats
    print(f"{'':8} {'format':7} " + " ".join(f"{n:>11}" for n, _ in BRANCHES) + "   bytes")
    with tempfile.TemporaryDirectory() as tmp:
        for tag in ("before", "after"):
            cb.swamped_concats = (lambda g, r: []) if tag == "before" else found
            for ext, run in (("tflite", _litert), ("onnx", _ort)):
                out = Path(tmp) / f"{tag}.{ext}"
                result = CliRunner().invoke(cli, ["quantize", str(MODEL), "--calibration",
                                                  str(CALIB), "-o", str(out)])
                assert result.exit_code == 0, result.output
                got = run(out, xs)
                row = " ".join(f"{_sqnr(want[:, s], got[:, s]):8.1f} dB" for _, s in BRANCHES)
                print(f"{tag:8} {ext:7} {row}   {os.path.getsize(out)}")
    cb.swamped_concats = found


if __name__ == "__main__":
    main()
