"""What the benchmarks share: the child-process measurement, the generated models, and the
onnxruntime / SQNR helpers used to compare outputs.

A tool runs in a fresh `python -c` child whose script ends with `CHILD_FOOTER`: it prints
`BENCH <seconds> <import seconds> <peak MB>` where the peak is the child's own VmHWM
(`ru_maxrss` would also count the parent's RSS at fork time). `measure_child` runs such a child
`repeats` times and keeps the best time and the largest peak; children may write bytecode
caches, as an installed package has them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
GENERATOR = HERE / "pytorch_like.py"

CHILD_FOOTER = r"""
t = time.perf_counter() - t0
# VmHWM is this process's own peak: ru_maxrss also counts the parent's RSS at fork time
try:
    with open("/proc/self/status") as f:
        peak = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
sys.stdout.flush()
print("BENCH", t, t1 - t0, peak)
"""


# Children may cache bytecode (an installed package has its .pyc files; with
# PYTHONDONTWRITEBYTECODE set, an editable checkout would be recompiled on every run, ~0.1 s).
_CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


class ToolFailed(Exception):
    """A measured tool exited with an error or wrote nothing; the message is its last line."""


def ensure_model(arch: str) -> Path:
    """bench/out/<arch>.onnx, (re)generated in a subprocess if missing or older than the
    generator."""
    path = OUT / f"{arch}.onnx"
    if not path.exists() or path.stat().st_mtime < GENERATOR.stat().st_mtime:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(GENERATOR), arch, str(path)], check=True)
        print(f"  (generated in {time.perf_counter() - t0:.1f} s)")
    return path


def measure_child(script: str, args: list, dst: Path, repeats: int):
    """Run `python -c script *args` `repeats` times (the script ends with CHILD_FOOTER and
    writes `dst`): (best time s, import time s of that run, peak RSS MB, the tool's own stdout
    of the first run). Raises ToolFailed."""
    best, peak, log = None, 0.0, None
    for _ in range(repeats):
        dst.unlink(missing_ok=True)
        p = subprocess.run([sys.executable, "-c", script, *map(str, args)],
                           capture_output=True, text=True, cwd=ROOT, env=_CHILD_ENV)
        lines = p.stdout.splitlines()
        bench = [ln for ln in lines if ln.startswith("BENCH ")]
        if p.returncode != 0 or not bench or not dst.exists():
            err = [ln for ln in (p.stderr + "\n" + p.stdout).splitlines() if ln.strip()]
            why = err[-1].strip() if err else f"exit status {p.returncode}"
            if p.returncode == 0 and not dst.exists():
                why = f"no output written ({why})"
            raise ToolFailed(why)
        t, t_imp, mem = map(float, bench[-1].split()[1:])
        if log is None:
            log = [ln for ln in lines if not ln.startswith("BENCH ")]
        if best is None or t < best[0]:
            best = (t, t_imp)
        peak = max(peak, mem)
    return best[0], best[1], peak, log


def run_ort(path: Path, x, optimized: bool = False):
    """The model's first output on each sample of `x` (batch 1 each) in onnxruntime (CPU), all
    graph optimizations off or all on; stacked, float64."""
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3  # no warnings about unused initializers
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))]
                          ).astype(np.float64)


def sqnr(ref, got) -> float:
    """10 log10(sum ref^2 / sum (ref - got)^2), in dB (inf when equal)."""
    import numpy as np

    ref = np.asarray(ref, np.float64)
    noise = float(np.sum((ref - got) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref ** 2)) / noise)
