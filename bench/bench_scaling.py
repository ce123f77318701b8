"""Benchmark (not a test): how the commands' time grows with the length of a model.

Long chains (`chain_models.py`: ONNX Identity / Relu chains, a Conv -> Mul -> Add -> BN -> Relu
chain the fusions act on, a TFLite RELU chain) at several lengths go through `inspect`,
`convert` (ONNX -> ONNX, TFLite -> TFLite, ONNX -> TFLite), `fuse` and `quantize
--calibration-random 2`, each in a fresh child process. Printed per command and length: the
child's CPU time (user + system, what the machine's load does not inflate) and wall time, then
the growth of CPU time from the smallest to the largest length against the growth of the length
(1.0x per 1x means linear).

    python bench/bench_scaling.py                       # 25k, 50k, 100k, 200k nodes
    python bench/bench_scaling.py --sizes 10000,40000 --timeout 120 --only fuse

Models are generated once into bench/out/scaling/ (a 200,000-node chain takes a few seconds).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "scaling"
GENERATOR = HERE / "chain_models.py"

# (label, model kind, command line with {src} and {dst}, output suffix)
RUNS = [
    ("inspect onnx (Relu)", "onnx-relu", ["inspect", "{src}"], None),
    ("inspect tflite (RELU)", "tflite-relu", ["inspect", "{src}"], None),
    ("convert onnx->onnx (Identity)", "onnx-identity", ["convert", "{src}", "-o", "{dst}"], ".onnx"),
    ("convert onnx->onnx (Relu)", "onnx-relu", ["convert", "{src}", "-o", "{dst}"], ".onnx"),
    ("convert tflite->tflite", "tflite-relu", ["convert", "{src}", "-o", "{dst}"], ".tflite"),
    ("convert onnx->tflite (Relu)", "onnx-relu", ["convert", "{src}", "-o", "{dst}"], ".tflite"),
    ("fuse onnx (Identity)", "onnx-identity", ["fuse", "{src}", "-o", "{dst}"], ".onnx"),
    ("fuse onnx (Relu)", "onnx-relu", ["fuse", "{src}", "-o", "{dst}"], ".onnx"),
    ("fuse onnx (Conv-Mul-Add-BN-Relu)", "onnx-fusion", ["fuse", "{src}", "-o", "{dst}"], ".onnx"),
    ("fuse tflite (RELU)", "tflite-relu", ["fuse", "{src}", "-o", "{dst}"], ".tflite"),
    ("quantize onnx->onnx (Relu)", "onnx-relu",
     ["quantize", "{src}", "--calibration-random", "2", "-o", "{dst}"], ".onnx"),
    ("quantize tflite->tflite (RELU)", "tflite-relu",
     ["quantize", "{src}", "--calibration-random", "2", "-o", "{dst}"], ".tflite"),
]

_CHILD = "import sys; from qconvert.cli import main; main(sys.argv[1:])"


def model(kind: str, n: int) -> Path:
    """bench/out/scaling/<kind>-<n>.<ext>, generated when missing or older than the generator."""
    ext = "tflite" if kind.startswith("tflite") else "onnx"
    path = OUT / f"{kind}-{n}.{ext}"
    if not path.exists() or path.stat().st_mtime < GENERATOR.stat().st_mtime:
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(GENERATOR), kind, str(n), str(path)], check=True)
    return path


def measure(args: list, timeout: float):
    """(CPU s, wall s) of `qconvert *args` in a child process, or None on failure / timeout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        print(f"    failed: {(run.stderr.strip().splitlines() or ['?'])[-1]}")
        return None
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="25000,50000,100000,200000")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    ap.add_argument("--only", default="", help="run the commands whose label contains this")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = [r for r in RUNS if args.only in r[0]]
    print(f"nodes: {', '.join(map(str, sizes))}; CPU s (wall s) per run, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        for label, kind, cmd, suffix in runs:
            cells, cpus = [], []
            for n in sizes:
                src = model(kind, n)
                dst = Path(tmp) / f"out{suffix or ''}"
                result = measure([c.format(src=src, dst=dst) for c in cmd], args.timeout)
                if result is None:
                    cells.append(f"{'>' + str(int(args.timeout)):>14}")
                    cpus.append(None)
                    continue
                cpu, wall = result
                cells.append(f"{cpu:6.2f} ({wall:5.1f})")
                cpus.append(cpu)
            growth = ""
            if len(sizes) > 1 and cpus[0] and cpus[-1]:
                growth = (f"  x{cpus[-1] / cpus[0]:.1f} for x{sizes[-1] / sizes[0]:.0f} nodes")
            print(f"{label:34} " + " ".join(cells) + growth, flush=True)


if __name__ == "__main__":
    main()
