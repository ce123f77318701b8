"""Benchmark (not a test): read -> IR -> write of a ~100 MB ResNet-50-shaped ONNX model with
qconvert, against a plain `onnx.load` + `onnx.save` of the same file, and of the shared TFLite
models. Each tool runs in a fresh subprocess so its peak RSS is its own.

    python bench/bench_convert.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "models"

_CHILD = r"""
import resource, sys, time
src, dst, tool = sys.argv[1:4]
t0 = time.perf_counter()
if tool == "onnx":
    import onnx
    onnx.save(onnx.load(src), dst)
else:
    from qconvert.model_io import load_model, serialize, write_atomic
    write_atomic(dst, serialize(load_model(src)))
t = time.perf_counter() - t0
print(t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def measure(tool: str, src: Path, repeats: int = 3) -> tuple:
    best_t, peak = float("inf"), 0.0
    with tempfile.TemporaryDirectory() as d:
        for _ in range(repeats):
            out = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(Path(d) / src.name),
                                  tool], check=True, capture_output=True, text=True).stdout
            t, mem = map(float, out.split())
            best_t, peak = min(best_t, t), max(peak, mem)
    return best_t, peak


def main():
    resnet = HERE / "out" / "resnet50.onnx"
    if not resnet.exists():
        subprocess.run([sys.executable, str(HERE / "resnet50_onnx.py"), str(resnet)], check=True)
    print(f"{'model':34} {'tool':22} {'time s':>8} {'peak MB':>9}")
    t_q, m_q = measure("qconvert", resnet)
    t_o, m_o = measure("onnx", resnet)
    print(f"{resnet.name:34} {'qconvert convert':22} {t_q:8.2f} {m_q:9.0f}")
    print(f"{resnet.name:34} {'onnx.load + onnx.save':22} {t_o:8.2f} {m_o:9.0f}")
    print(f"{'':34} {'ratio qconvert/onnx':22} {t_q / t_o:8.2f} {m_q / m_o:9.2f}")
    for path in sorted(SHARED.glob("*.tflite")):
        t, m = measure("qconvert", path)
        print(f"{path.name:34} {'qconvert convert':22} {t:8.2f} {m:9.0f}")


if __name__ == "__main__":
    main()
