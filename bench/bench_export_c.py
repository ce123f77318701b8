"""Benchmark: RAM and flash of `qconvert export-c` against TFLite Micro's arena.

For every model of tests/models (copies of ../shared/models; the float-only digits models are
quantized first by `qconvert quantize` with the bundled calibration data) and both kernel sets,
prints: our arena (RAM; for CMSIS-NN also the Helium build's, which reserves the MVE kernels'
larger scratch), TFLite Micro's whole arena for the same int8 model ('Arena allocation total'
of the tflite_micro Python interpreter's print_allocations(): tensors, scratch and its
persistent structures), their ratio, the constant data qconvert emits, and, when
arm-none-eabi-gcc is installed, the flash of the generated C for a Cortex-M4 (-Os, text + data
of NAME.c and the shipped kernels it needs; CMSIS-NN's own code is not counted).

    python bench/bench_export_c.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.export_c_harness import tflm_arena_bytes  # noqa: E402

from qconvert.c_export.model.render import ModelOptions, render_model  # noqa: E402
from qconvert.c_export.model.prepare import prepare_model  # noqa: E402
from qconvert.formats.model_io import load_model  # noqa: E402

MODELS = ROOT / "tests" / "models"
SAMPLES = ROOT / "sample_models"


def _models(folder: Path) -> dict:
    out = {m: MODELS / f"{m}.tflite" for m in ("kws_ref_model", "ad01_int8",
                                                "pretrainedResnet_quant")}
    for name, src, calib in (("digits_cnn.tflite", "digits_cnn.tflite", "digits_calib_nhwc.npy"),
                             ("digits_cnn.onnx", "digits_cnn.onnx", "digits_calib_nchw.npy")):
        target = folder / f"{name.replace('.', '_')}_int8.tflite"
        subprocess.run([sys.executable, "-m", "qconvert.cli", "quantize", str(MODELS / src),
                        "--calibration", str(SAMPLES / calib), "-o", str(target)],
                       check=True, capture_output=True)
        out[name + " (int8)"] = target
    return out


def _flash(files: dict, folder: Path, kernels: str) -> int | None:
    """text + data bytes of the generated C compiled for a Cortex-M4 with -Os."""
    if shutil.which("arm-none-eabi-gcc") is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    flags = ["-mcpu=cortex-m4", "-mthumb", "-Os", "-std=c99", "-c"]
    if kernels == "cmsis-nn":
        cmsis = ROOT.parent / "shared" / "third_party" / "CMSIS-NN" / "Include"
        if not cmsis.is_dir():
            cmsis = ROOT.parent.parent / "shared" / "third_party" / "CMSIS-NN" / "Include"
        if not cmsis.is_dir():
            return None
        flags.append(f"-I{cmsis}")
    sources = sorted(str(p) for p in folder.glob("*.c"))
    subprocess.run(["arm-none-eabi-gcc", *flags, *sources], cwd=folder, check=True)
    objects = sorted(str(p) for p in folder.glob("*.o"))
    out = subprocess.run(["arm-none-eabi-size", "-t", *objects], capture_output=True, text=True,
                         check=True).stdout.splitlines()[-1].split()
    return int(out[0]) + int(out[1])  # text (code and const data) + initialized data


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for label, path in _models(tmp).items():
            tflm = tflm_arena_bytes(path)
            for kernels in ("portable", "cmsis-nn"):
                layout = "1x4" if kernels == "portable" else "rowmajor"
                files, s = render_model(prepare_model(load_model(path)),
                                        ModelOptions("net", kernels, layout))
                flash = _flash(files, tmp / f"{path.stem}_{kernels}", kernels)
                rows.append((label, kernels, s.arena_size, s.arena_helium, tflm,
                             s.constant_bytes, flash))
    print("| model | kernels | arena (bytes) | TFLite Micro arena | ratio | constant data | "
          "flash, Cortex-M4 -Os |")
    print("|---|---|---|---|---|---|---|")
    for label, kernels, arena, helium, tflm, const, flash in rows:
        ours = f"{arena}" + (f" (Helium: {helium})" if helium is not None else "")
        ratio = f"{arena / tflm:.2f}" + (f" ({helium / tflm:.2f})" if helium is not None else "")
        print(f"| {label} | {kernels} | {ours} | {tflm} | {ratio} | {const} | "
              f"{flash if flash is not None else '-'} |")


if __name__ == "__main__":
    main()
