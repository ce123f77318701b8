"""Instructions per layer and per inference of `qconvert export-c` output on an emulated Cortex-M.

For each model (default: kws_ref_model, pretrainedResnet_quant and ad01_int8 of tests/models)
and each kernel set of `--kernels`, exports the model (`mcu_export_c.export`: the CLI's
export-c), builds it for the board with arm-none-eabi-gcc -O2 (`mcu_firmware`'s memory map,
startup and flags; CMSIS-NN from --cmsis-nn for the CMSIS-NN sets) and runs it under
`qemu-system-arm -icount shift=0`, where one instruction takes one nanosecond; the board's
FPGAIO counter gives the instructions (Cortex-M4 on mps2-an386: 25 MHz, 40 instructions per
tick; Cortex-M55 on mps3-an547: 20 MHz, 50; measured on a loop of known length at every run,
printed by `--calibrate`). Kernel sets:

- portable: qconvert's C99 kernels;
- cmsis-nn: `--kernels cmsis-nn` (CMSIS-NN, with qconvert's fast kernels where measured faster
  on cores without Helium, and CMSIS-NN called per band of rows where the plan overlaps);
- cmsis-whole: CMSIS-NN alone, called once per layer as TFLite Micro calls it (bench/
  cmsis_whole.py), the reference the kernels are held to.

`--before DIR` adds the same sets exported by another qconvert checkout (e.g. the main
branch), built against that checkout's kernels.

Two images per model and set (`mcu_layer_hook`): the plain export, whose second `NAME_invoke`
is "per inference" (the first, which also runs `NAME_check`, is printed too), and the export
built with -DQCONVERT_PROFILE, whose `NAME_layer_hook` reads the counter around every layer
(40- or 50-instruction resolution; the hook adds a few instructions per layer, in that image's
"with the hook" total only). `--total-only` builds the plain image alone. Also printed: the
image's flash (code + the model's constants, `mcu_size`) and the model's own object (NAME.o,
text + data). The input is a deterministic ramp.

    python bench/profile_layers.py tests/models/kws_ref_model.tflite --kernels cmsis-nn
    python bench/profile_layers.py MODEL.tflite --kernels portable cmsis-nn cmsis-whole
    python bench/profile_layers.py --before /work/main --kernels portable
    python bench/profile_layers.py tests/models/ad01_int8.tflite --total-only
    python bench/profile_layers.py MODEL.tflite --kernels cmsis-nn --board m55
    python bench/profile_layers.py --calibrate [--board m55]

Needs arm-none-eabi-gcc, qemu-system-arm and, for cmsis-nn / cmsis-whole, CMSIS-NN
(../shared/third_party/CMSIS-NN). Prints figures, never asserts them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))  # this checkout's qconvert (cmsis-whole renders in-process)

import cmsis_whole  # noqa: E402
import mcu_export_c as exc  # noqa: E402
import mcu_firmware as fw  # noqa: E402
import mcu_layer_hook as hook  # noqa: E402
import mcu_size as size  # noqa: E402

MODELS = ROOT / "tests" / "models"
DEFAULT_MODELS = ("kws_ref_model", "pretrainedResnet_quant", "ad01_int8")
KERNELS = ("portable", "cmsis-nn", "cmsis-whole")
CORES = {"m4": "Cortex-M4", "m55": "Cortex-M55"}
# a CMSIS-NN library cached between runs (mcu_export_c.cmsis_library rebuilds it when its
# sources change)
LIBRARY_CACHE = Path(tempfile.gettempdir()) / "qconvert-bench-profile-layers"


def object_bytes(obj: Path) -> tuple:
    """(text, data) bytes of an object file (arm-none-eabi-size, Berkeley format)."""
    out = subprocess.run(["arm-none-eabi-size", str(obj)], capture_output=True, text=True,
                         check=True).stdout.splitlines()[1].split()
    return int(out[0]), int(out[1])


def export(model: Path, folder: Path, kernels: str, root: Path) -> Path:
    """The export of `model` with the kernel set `kernels` by the checkout `root`; its source
    folder; `mcu_export_c.Refused` with export-c's reason when it refuses the model."""
    if kernels == "cmsis-whole":
        from qconvert.errors import QConvertError

        try:
            return cmsis_whole.export(model, folder, exc.NAME)
        except QConvertError as e:  # the one line export-c would print
            raise exc.Refused(str(e).replace(f"{model}: ", "")) from None
    return exc.export(model, folder, kernels, root=root)


def measure(model: Path, kernels: str, board: fw.Board, per_tick: int, work: Path,
            cmsis_nn: Path, root: Path = ROOT, total_only: bool = False) -> dict:
    """{"total": instructions of an inference, "first": of the first invoke, "flash": image
    flash bytes, "model_object": (text, data) of NAME.o, "layers": [(index, op,
    instructions)], "profiled_total": the invoke with the hook (absent with `total_only`)}."""
    folder = work / f"{model.stem}_{kernels}_{root.name}_{board.name}"
    src = export(model, folder, kernels, root)
    ins, outs = exc.io_layout((src / f"{exc.NAME}.h").read_text())

    def run(profile: bool) -> tuple:
        build = folder / ("profiled" if profile else "plain")
        elf, mapfile = exc.link(src, build, board, kernels, cmsis_nn,
                                hook.main_source(exc.NAME, ins, outs, profile),
                                defines=["-DQCONVERT_PROFILE"] if profile else [],
                                library_cache=LIBRARY_CACHE)
        text = fw.run_image(elf, board, None)
        values = fw.parse_output(text)["values"]
        if values.get("rc") != 0:
            raise SystemExit(f"{model}: {kernels} image returned {values.get('rc')}")
        return elf, mapfile, text, values

    elf, mapfile, _, values = run(False)
    result = {"total": values["invoke_ticks"] * per_tick,
              "first": values["first_ticks"] * per_tick,
              "flash": size.image_sizes(elf, mapfile, {f"{exc.NAME}.o"})["flash"],
              "model_object": object_bytes(elf.parent / f"{exc.NAME}.o"), "layers": []}
    if not total_only:
        _, _, text, values = run(True)
        result["profiled_total"] = values["invoke_ticks"] * per_tick
        result["layers"] = hook.layers(text, per_tick)
    return result


def print_table(model: Path, board: fw.Board, per_tick: int, runs: dict) -> None:
    """One model: a row per layer (its index in the export), a column per run, then the
    totals, flash and the ratio to cmsis-nn."""
    names = list(runs)
    width = max(12, *(len(n) + 2 for n in names))
    print(f"\n{model.name}: instructions on {CORES[board.name]} ({board.machine}, QEMU -icount "
          f"shift=0, arm-none-eabi-gcc -O2; {per_tick} per counter tick)")

    def row(label: str, op: str, cells) -> None:
        print(f"{label:>5} {op:<26}" + "".join(f"{c:>{width}}" for c in cells))

    row("layer", "op", names)
    ops = {}
    for r in runs.values():
        for index, op, _ in r["layers"]:
            ops.setdefault(index, op)
    for index in sorted(ops):
        cells = []
        for n in names:
            found = [v for i, _, v in runs[n]["layers"] if i == index]
            cells.append(f"{found[0]:,}" if found else "")
        row(str(index), ops[index][:26], cells)
    if ops:
        row("", "sum of layers", [f"{sum(v for *_, v in runs[n]['layers']):,}" for n in names])
        row("", "with the hook", [f"{runs[n].get('profiled_total', 0):,}" for n in names])
    row("", "per inference", [f"{runs[n]['total']:,}" for n in names])
    row("", "first invoke", [f"{runs[n]['first']:,}" for n in names])
    row("", "flash bytes", [f"{runs[n]['flash']:,}" for n in names])
    row("", "NAME.o text+data", [f"{sum(runs[n]['model_object']):,}" for n in names])
    if "cmsis-nn" in runs:
        base = runs["cmsis-nn"]["total"]
        row("", "/ cmsis-nn", [f"{runs[n]['total'] / base:.2f}" for n in names])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", type=Path,
                        help="int8 .tflite models (default: " + ", ".join(DEFAULT_MODELS) + ")")
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=["portable"],
                        help="kernel sets, a column each (default: portable)")
    parser.add_argument("--board", choices=sorted(CORES), default="m4",
                        help="m4: Cortex-M4 on mps2-an386; m55: Cortex-M55 on mps3-an547")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="another qconvert checkout: its exports of the same sets too")
    parser.add_argument("--total-only", action="store_true",
                        help="only the whole-invoke instructions and the flash")
    parser.add_argument("--calibrate", action="store_true",
                        help="print the instructions per counter tick (and exit without MODEL)")
    parser.add_argument("--cmsis-nn", type=Path, default=exc.DEFAULT_CMSIS_NN,
                        help="the CMSIS-NN folder (cmsis-nn and cmsis-whole)")
    args = parser.parse_args()
    board = fw.BOARDS[args.board]
    models = args.models or [MODELS / f"{m}.tflite" for m in DEFAULT_MODELS]
    for model in models:
        if not model.is_file():
            raise SystemExit(f"{model}: no such model file")
    if set(args.kernels) - {"portable"} and not (args.cmsis_nn / "Include").is_dir():
        raise SystemExit(f"{args.cmsis_nn}: no CMSIS-NN there (give --cmsis-nn DIR)")
    if args.before is not None and not (args.before / "qconvert").is_dir():
        raise SystemExit(f"{args.before}: not a qconvert checkout (no qconvert/ folder)")
    runs = [(k, k, ROOT) for k in args.kernels]  # (column, kernel set, checkout)
    if args.before is not None:
        before = [k for k in args.kernels if k != "cmsis-whole"]
        runs += [("before" if len(before) == 1 else f"before {k}", k, args.before.resolve())
                 for k in before]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rate = fw.calibrate(board, work)  # instructions per counter tick, measured
        per_tick = round(rate)
        if args.calibrate:
            print(f"{CORES[board.name]} ({board.machine}): {rate:.3f} "
                  f"instructions per FPGAIO counter tick (a loop of {2 * fw.CALIBRATE_LOOP + 1:,}"
                  " instructions)")
            if not args.models:
                return
        for model in models:
            figures = {}
            for label, kernels, root in runs:
                try:
                    figures[label] = measure(model, kernels, board, per_tick, work,
                                             args.cmsis_nn, root, args.total_only)
                except exc.Refused as e:
                    raise SystemExit(f"{model}: export-c --kernels {kernels} refused: {e}")
            print_table(model, board, per_tick, figures)


if __name__ == "__main__":
    main()
