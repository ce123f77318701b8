"""Benchmark (not a test): `qconvert quantize` (its defaults) against onnxruntime's
`quantize_static` (MinMax), both writing per-channel int8 QDQ ONNX calibrated on the same 16
samples, on a ~100 MB
ResNet-50 and a ~14 MB MobileNetV2 shaped like PyTorch exports (bench/pytorch_like.py).

    python bench/bench_quantize.py [--models resnet50 mobilenet_v2] [--tools ...] [--repeats 3]

The peer is bench-only, not a project dependency: `pip install onnxruntime`. A tool that is not
installed or fails gets a "missing" / "FAILED" row and the others still run.

Data: 16 calibration samples and 16 *other* evaluation samples, N(0, 1) of the input shape
(seeded), written once to bench/out/quant/ as .npy; both tools calibrate on the same file.

Each tool runs in a fresh subprocess, --repeats times, the tools interleaved (round r runs
every tool once, in order, before round r + 1), so a change in the machine's load hits all of
them alike: the best wall time is reported, and as peak RSS the largest of the runs' own
high-water marks (VmHWM from /proc/self/status); the load average is printed before and after
each model. The time
covers everything the child does: importing the tool, reading, calibrating, quantizing, writing
("import" is the part spent importing the tool's entry module):

- qconvert:       `qconvert.cli.main(["quantize", src, "--calibration", calib.npy, "-o", dst])`
                  in process, made the program first (`cli.as_program`, as the `qconvert`
                  command is: its allocator settings), its defaults: fusion, calibration with its float reference
                  executor, per-channel weights, MSE activation ranges (streamed histograms),
                  bias correction, QDQ output, and its per-layer SQNR report (on a bounded
                  number of samples: `report.report_samples`);
- qconvert+ort:   the same with `--engine onnxruntime` (calibration and the report's QDQ run on
                  onnxruntime);
- ort:            `quantize_static(src, dst, reader, quant_format=QDQ, per_channel=True,
                  activation_type=QInt8, weight_type=QInt8, calibrate_method=MinMax)`, the reader
                  feeding the 16 samples one at a time (the models' batch is fixed at 1), on the
                  model as it is (BatchNormalization unfused: ORT leaves BN float between QDQ);
- ort+preprocess: the same after onnxruntime's recommended `quant_pre_process` (symbolic shape
                  inference, graph optimization which folds BN into Conv, shape inference), the
                  preprocessing included in the time.

Output quality: the float model and every quantized output run in onnxruntime on the 16
evaluation samples; "SQNR" is 10 log10(sum y^2 / sum (y - y_q)^2) of the logits against the
float model's, with graph optimizations disabled for both (QuantizeLinear / DequantizeLinear run
as written, i.e. the simulated int8 model), and "SQNR int8" with ORT_ENABLE_ALL (onnxruntime
fuses the QDQ groups into its int8 kernels: what a deployment would compute). Also: nodes of
the output (QuantizeLinear + DequantizeLinear among them) and its size. Outputs stay in
bench/out/quant/ for inspection.

Ratios: qconvert's best time and largest peak over the peer's ("ratio" rows), and, since the
tools of one round ran back to back under about the same load, the median and range of the
round-by-round time ratios. Wall times on a shared machine move by 10 % or more from one run
to the next (BLAS threads are sensitive to other load): compare ratios from one invocation,
and raise --repeats when the machine is busy.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

from bench_common import (CHILD_FOOTER, OUT, ROOT, ToolFailed, ensure_model,
                          measure_child, run_ort, sqnr)

WORK = OUT / "quant"

MODELS = ("resnet50", "mobilenet_v2")
TOOLS = ("qconvert", "qconvert+ort", "ort", "ort+preprocess")
LABELS = {"qconvert": "qconvert quantize", "qconvert+ort": "qconvert --engine onnxruntime",
          "ort": "ort quantize_static", "ort+preprocess": "ort pre_process+q_static"}
REQUIRES = {"qconvert": "qconvert", "qconvert+ort": "onnxruntime", "ort": "onnxruntime",
            "ort+preprocess": "onnxruntime"}
SAMPLES = 16
CALIB_SEED, EVAL_SEED = 2024, 4048

_CHILD = r"""
import resource, sys, time
src, dst, tool, calib = sys.argv[1:5]
t0 = time.perf_counter()
if tool.startswith("qconvert"):
    from qconvert.cli import as_program, main
    as_program()  # the process is the program, as `qconvert quantize` is (not a library user)
    t1 = time.perf_counter()
    extra = ["--engine", "onnxruntime"] if tool == "qconvert+ort" else []
    rc = main(["quantize", src, "--calibration", calib, "-o", dst, *extra], standalone_mode=False)
    if rc:
        sys.exit(rc)
else:
    import numpy as np
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    t1 = time.perf_counter()

    class Reader(CalibrationDataReader):
        def __init__(self, path, name):
            self.x = np.load(path)
            self.name = name
            self.i = 0

        def get_next(self):
            if self.i >= len(self.x):
                return None
            self.i += 1
            return {self.name: self.x[self.i - 1:self.i]}

    model = src
    if tool == "ort+preprocess":
        model = dst + ".pre.onnx"
        quant_pre_process(src, model)
    name = onnx.load(model, load_external_data=False).graph.input[0].name
    quantize_static(model, dst, Reader(calib, name), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
"""  + CHILD_FOOTER


def ensure_data(arch: str, src: Path):
    """(calibration .npy path, evaluation array): SAMPLES N(0, 1) samples each, seeded."""
    import numpy as np
    import onnx

    dims = onnx.load(str(src), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    shape = (SAMPLES, *[d.dim_value for d in dims[1:]])
    WORK.mkdir(parents=True, exist_ok=True)
    calib = WORK / f"{arch}_calib.npy"
    x = np.random.default_rng(CALIB_SEED).standard_normal(shape).astype(np.float32)
    if not calib.exists() or not np.array_equal(np.load(calib), x):
        np.save(calib, x)
    return calib, np.random.default_rng(EVAL_SEED).standard_normal(shape).astype(np.float32)


def measure(tool: str, src: Path, dst: Path, calib: Path, repeats: int):
    """(best time s, import time s of that run, peak RSS MB, tool's own stdout of the first run)."""
    return measure_child(_CHILD, [src, dst, tool, calib], dst, repeats)

def _load() -> str:
    """The 1, 5 and 15 minute load averages (the machine may be shared)."""
    try:
        return " / ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def _interleaved(tools, arch: str, src: Path, calib: Path, repeats: int):
    """Run every tool once per round, `repeats` rounds: ({tool: (best time s, import s of that
    run, largest peak MB, the first run's stdout)}, {tool: why it has no row}, {tool: [time of
    each round]})."""
    best: dict = {}
    failed: dict = {}
    times: dict = {}  # tool -> wall time of each round
    for tool in tools:
        if importlib.util.find_spec(REQUIRES[tool]) is None:
            failed[tool] = f"missing: pip install {REQUIRES[tool]}"
    for _ in range(repeats):
        for tool in tools:
            if tool in failed:
                continue
            dst = WORK / f"{arch}.{tool.replace('+', '_')}.onnx"
            try:
                t, t_imp, mem, log = measure(tool, src, dst, calib, 1)
            except ToolFailed as e:
                failed[tool] = f"FAILED: {e}"
                continue
            times.setdefault(tool, []).append(t)
            old = best.get(tool)
            if old is None:
                best[tool] = (t, t_imp, mem, log)
            else:
                keep = (t, t_imp) if t < old[0] else old[:2]
                best[tool] = (*keep, max(mem, old[2]), old[3])
    return best, failed, times


def describe(path: Path, x, y0):
    """(nodes, Q + DQ nodes, MB, SQNR optimizations off, SQNR optimizations on) of one output."""
    import onnx

    nodes = onnx.load(str(path), load_external_data=False).graph.node
    qdq = sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in nodes)
    return (len(nodes), qdq, path.stat().st_size / 1e6,
            sqnr(y0, run_ort(path, x, False)), sqnr(y0, run_ort(path, x, True)))


def main(argv=None):
    ap = argparse.ArgumentParser(description="qconvert quantize vs onnxruntime quantize_static")
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)

    have_ort = importlib.util.find_spec("onnxruntime") is not None
    if not have_ort:
        print("onnxruntime missing (pip install onnxruntime): no peer, no SQNR")
    head = (f"{'model':13} {'tool':26} {'time s':>7} {'import':>6} {'peak MB':>8} {'SQNR':>6} "
            f"{'SQNR int8':>9} {'nodes':>6} {'Q+DQ':>5} {'MB':>6}")
    logs = {}
    for arch in a.models:
        src = ensure_model(arch)
        calib, x = ensure_data(arch, src)
        print(f"\n{src.relative_to(ROOT)} ({src.stat().st_size / 1e6:.1f} MB), {SAMPLES} "
              f"calibration samples; SQNR of the logits vs float over {SAMPLES} other samples")
        print(head)
        y0 = run_ort(src, x, False) if have_ort else None
        print(f"{'':13} (load average {_load()} before)")
        runs, failed, times = _interleaved(a.tools, arch, src, calib, a.repeats)
        results = {}
        for tool in a.tools:
            label = LABELS[tool]
            if tool in failed:
                print(f"{arch:13} {label:26} {failed[tool]}")
                continue
            dst = WORK / f"{arch}.{tool.replace('+', '_')}.onnx"
            t, t_imp, mem, log = runs[tool]
            results[tool] = (t, mem)
            if tool == "qconvert" and log:
                logs[arch] = log
            row = f"{arch:13} {label:26} {t:7.2f} {t_imp:6.2f} {mem:8.0f}"
            if have_ort:
                try:
                    nodes, qdq, mb, db, db8 = describe(dst, x, y0)
                    row += f" {db:6.1f} {db8:9.1f} {nodes:6d} {qdq:5d} {mb:6.1f}"
                except Exception as e:  # a broken output is a result, not a crash
                    row += f"  output does not run: {str(e).splitlines()[0][:80]}"
            print(row)
        print(f"{'':13} (load average {_load()} after; {a.repeats} interleaved rounds)")
        for ours in ("qconvert", "qconvert+ort"):
            if ours not in results:
                continue
            tq, mq = results[ours]
            for peer in ("ort", "ort+preprocess"):
                if peer in results:
                    tp, mp = results[peer]
                    paired = sorted(x / y for x, y in zip(times[ours], times[peer]))
                    median = paired[len(paired) // 2] if len(paired) % 2 else \
                        (paired[len(paired) // 2 - 1] + paired[len(paired) // 2]) / 2
                    print(f"{'  ratio':13} {ours + ' / ' + peer:26} {tq / tp:7.2f} {'':6} "
                          f"{mq / mp:8.2f}   (time ratio round by round: median "
                          f"{median:.2f}, range {paired[0]:.2f}-{paired[-1]:.2f})")
    for arch, log in logs.items():
        tail = [ln for ln in log if ln.startswith(("output ", "top-1"))]
        print(f"\nqconvert's own report on {arch} (over the calibration samples): "
              + "; ".join(tail))


if __name__ == "__main__":
    main()
