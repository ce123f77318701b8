"""Benchmark (not a test): read -> IR -> write of a ~100 MB ResNet-50-shaped ONNX model with
qconvert (`convert`, and `fuse` through the command line), against a plain `onnx.load` +
`onnx.save` of the same file and, when it is installed, onnxslim; then the shared TFLite models.
Each run is a fresh subprocess, so its peak RSS is its own; the time is the best of `--repeats`
runs (it excludes the interpreter's start, includes imports).

    python bench/bench_convert.py [--repeats N]

Targets: `qconvert fuse` within 1.3x the time of onnx load+save, peak memory at most onnxslim's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent / "tests" / "models"

_CHILD = r"""
import resource, sys, time
src, dst, tool = sys.argv[1:4]
t0 = time.perf_counter()
if tool == "onnx":
    import onnx
    onnx.save(onnx.load(src), dst)
elif tool == "onnxslim":
    import onnxslim
    onnxslim.slim(src, dst)
elif tool == "fuse":
    from qconvert.cli import main
    main(["fuse", src, "-o", dst], standalone_mode=False)
else:
    from qconvert.formats.model_io import load_model, serialize, write_atomic
    write_atomic(dst, serialize(load_model(src)))
t = time.perf_counter() - t0
print("\nBENCH", t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

LABELS = {"qconvert": "qconvert convert", "fuse": "qconvert fuse", "onnx": "onnx.load + onnx.save",
          "onnxslim": "onnxslim"}


def measure(tool: str, src: Path, repeats: int = 3):
    """(best time s, peak RSS MB) of `tool` on `src`, or None when the tool fails to run."""
    best_t, peak = float("inf"), 0.0
    with tempfile.TemporaryDirectory() as d:
        for _ in range(repeats):
            run = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(Path(d) / src.name),
                                  tool], capture_output=True, text=True)
            lines = [ln for ln in run.stdout.splitlines() if ln.startswith("BENCH ")]
            if run.returncode != 0 or not lines:
                err = (run.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"  ({LABELS[tool]} failed: {err})")
                return None
            t, mem = map(float, lines[-1].split()[1:])
            best_t, peak = min(best_t, t), max(peak, mem)
    return best_t, peak


def _installed(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats

    resnet = HERE / "out" / "resnet50.onnx"
    if not resnet.exists():
        subprocess.run([sys.executable, str(HERE / "resnet50_onnx.py"), str(resnet)], check=True)
    tools = ["qconvert", "fuse", "onnx"] + (["onnxslim"] if _installed("onnxslim") else [])
    print(f"{'model':30} {'tool':24} {'time s':>8} {'peak MB':>9}")
    results = {}
    for tool in tools:
        results[tool] = measure(tool, resnet, repeats)
        if results[tool] is not None:
            t, m = results[tool]
            print(f"{resnet.name:30} {LABELS[tool]:24} {t:8.2f} {m:9.0f}")
    onnx_ref, slim = results.get("onnx"), results.get("onnxslim")
    for tool in ("qconvert", "fuse"):
        if results.get(tool) is None:
            continue
        t, m = results[tool]
        for ref, name in ((onnx_ref, "onnx"), (slim, "onnxslim")):
            if ref is not None:
                label = f"ratio {tool.replace('qconvert', 'convert')}/{name}"
                print(f"{'':30} {label:24} {t / ref[0]:8.2f} {m / ref[1]:9.2f}")
    for path in sorted(SHARED.glob("*.tflite")):
        r = measure("qconvert", path, repeats)
        if r is not None:
            print(f"{path.name:30} {'qconvert convert':24} {r[0]:8.2f} {r[1]:9.0f}")


if __name__ == "__main__":
    main()
