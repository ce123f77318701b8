"""Instructions per layer of a `qconvert export-c` model on an emulated Cortex-M4 or M55 (QEMU).

Exports MODEL with the chosen kernel set, builds it for the MPS2 AN386 board (Cortex-M4,
arm-none-eabi-gcc -O2 as tests/helpers/export_c_harness.py builds it, CMSIS-NN from
../shared/third_party/CMSIS-NN for `--kernels cmsis-nn`) and runs it under
`qemu-system-arm -icount shift=0`, where one instruction takes one nanosecond. The board's
FPGAIO COUNTER (0x40028018) runs at 25 MHz: one tick = 40 instructions (checked by `--calibrate`
on a loop of known length). Two images are built:

- the plain export: instructions of one whole `NAME_invoke`, the second one (what every
  inference of the firmware costs), and of the first (which also runs `NAME_check`);
- the export with `-DQCONVERT_PROFILE` and a `NAME_layer_hook` that reads the counter before and
  after every layer: instructions per layer (40-instruction resolution; the hook itself adds a
  few instructions per layer, counted in the whole-invoke figure of this image only).

`--board m55`: the same on the MPS3 AN547 board (Cortex-M55 with Helium, as
tests/export_c_harness.py builds it), whose FPGAIO COUNTER (0x49302018) runs at 20 MHz: one
tick = 50 instructions (`--calibrate --board m55`).

It also prints the flash of the plain image (arm-none-eabi-size: text + data) and the bytes of
the model's own object (NAME.o). The input is deterministic (a ramp of int8 values).

    python bench/profile_layers.py tests/models/kws_ref_model.tflite --kernels cmsis-nn
    python bench/profile_layers.py tests/models/ad01_int8.tflite --total-only
    python bench/profile_layers.py --calibrate
    python bench/profile_layers.py MODEL.tflite --kernels cmsis-nn --board m55
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from helpers.export_c_harness import build_cortex_m, cmsis_nn_available, io_layout  # noqa: E402

# board: (QEMU machine, FPGAIO COUNTER address, instructions per tick under -icount shift=0)
BOARDS = {"m4": ("mps2-an386", "0x40028018u", 40),     # MPS2: 25 MHz
          "m55": ("mps3-an547", "0x49302018u", 50)}    # MPS3: 20 MHz
COUNTER, PER_TICK = BOARDS["m4"][1:]


def _use_board(board: str) -> None:
    """Point COUNTER / PER_TICK / QEMU at `board`'s."""
    global COUNTER, PER_TICK, QEMU
    machine, COUNTER, PER_TICK = BOARDS[board]
    QEMU = ["qemu-system-arm", "-M", machine, "-icount", "shift=0", "-nographic",
            "-semihosting", "-monitor", "none", "-serial", "none", "-kernel"]


_use_board("m4")


def _inputs(ios: dict) -> list:
    """C lines: one static array per input, a deterministic ramp (int8: every value; float:
    -1 to 1)."""
    lines = []
    for i, (ctype, size) in enumerate(ios["inputs"]):
        if ctype == "float":
            values = ",".join(f"{2 * k / max(size - 1, 1) - 1:.6f}f" for k in range(size))
        else:
            values = ",".join(str((k * 37) % 256 - 128) for k in range(size))
        lines.append(f"static const {ctype} in{i}[{size}] = {{{values}}};")
    for i, (ctype, size) in enumerate(ios["outputs"]):
        lines.append(f"static {ctype} out{i}[{size}];")
    return lines


def main_source(name: str, ios: dict, profile: bool) -> str:
    """main.c: one invoke between two counter reads; with `profile`, a layer hook that records
    the counter at each layer's start and end and prints one line per layer."""
    args = [f"in{i}" for i in range(len(ios["inputs"]))]
    args += [f"out{i}" for i in range(len(ios["outputs"]))]
    lines = ["#include <stdio.h>", "#include <stdint.h>", f'#include "{name}.h"', "",
             f"#define COUNTER (*(volatile uint32_t *){COUNTER})", *_inputs(ios), ""]
    if profile:
        lines += ["#define MAX_LAYERS 4096",
                  "static uint32_t start_ticks[MAX_LAYERS], ticks[MAX_LAYERS];",
                  "static const char *ops[MAX_LAYERS];",
                  "static int seen[MAX_LAYERS];",
                  f"void {name}_layer_hook(int index, const char *op, int phase)",
                  "{",
                  "    uint32_t now = COUNTER;",
                  "    if (index < 0 || index >= MAX_LAYERS) {",
                  "        return;",
                  "    }",
                  "    if (phase == 0) {",
                  "        start_ticks[index] = now;",
                  "    } else {",
                  "        ticks[index] = now - start_ticks[index]; /* the last invoke's */",
                  "        ops[index] = op;",
                  "        seen[index] = 1;",
                  "    }",
                  "}", ""]
    lines += ["int main(void)", "{", "    uint32_t t0, t1, t2;", "    int rc, rc2;",
              "    t0 = COUNTER;", f"    rc = {name}_invoke({', '.join(args)});",
              "    t1 = COUNTER;", f"    rc2 = {name}_invoke({', '.join(args)});",
              "    t2 = COUNTER;",
              '    printf("rc %d\\n", rc | rc2);',
              '    printf("total %lu\\n", (unsigned long)(t2 - t1));',
              '    printf("first %lu\\n", (unsigned long)(t1 - t0));']
    if profile:
        lines += ["    {", "        int i;", "        for (i = 0; i < MAX_LAYERS; ++i) {",
                  "            if (seen[i]) {",
                  '                printf("layer %d %s %lu\\n", i, ops[i], '
                  "(unsigned long)ticks[i]);",
                  "            }", "        }", "    }"]
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def _run(elf: Path) -> str:
    done = subprocess.run(QEMU + [str(elf)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"qemu failed: {done.stderr.strip()}")
    return done.stdout


def _size(*paths) -> list:
    out = subprocess.run(["arm-none-eabi-size", *map(str, paths)], capture_output=True,
                         text=True, check=True).stdout.splitlines()[1:]
    return [(int(r.split()[0]), int(r.split()[1]), int(r.split()[2])) for r in out]


def export(model: Path, folder: Path, kernels: str, name: str):
    """Write the export of `model` into `folder`; (graph, ExportSummary)."""
    from qconvert.c_export.model.render import ModelOptions, render_model
    from qconvert.c_export.model.prepare import prepare_model
    from qconvert.formats.model_io import load_model

    m = load_model(model)
    files, summary = render_model(prepare_model(m), ModelOptions(
        name=name, kernels=kernels, fc_layout="1x4" if kernels == "portable" else "rowmajor"))
    folder.mkdir(parents=True, exist_ok=True)
    for f, data in files.items():
        (folder / f).write_bytes(data)
    return m.graph, summary


def profile(model: Path, kernels: str, total_only: bool, name: str = "net",
            board: str = "m4") -> dict:
    """{"total": instructions of an inference, "first": of the first, "flash": (text, data),
    "model_object": (text, data), "layers": [(index, op, instructions)]} of `model` on
    `board` ("m4" or "m55")."""
    _use_board(board)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "c"
        graph, _ = export(model, folder, kernels, name)
        ios = io_layout(graph)
        cmsis = kernels == "cmsis-nn"
        elf = build_cortex_m(folder, main_source(name, ios, False), board, cmsis=cmsis)
        out = _run(elf).split()
        assert out[:2] == ["rc", "0"], out[:4]
        result = {"total": int(out[3]) * PER_TICK, "first": int(out[5]) * PER_TICK}
        (text, data, _), = _size(elf)
        result["flash"] = (text, data)
        obj = elf.parent / f"{name}.o"
        (otext, odata, _), = _size(obj)
        result["model_object"] = (otext, odata)
        result["layers"] = []
        if not total_only:
            (folder / f"build_{board}").rename(folder / "build_plain")
            elf = build_cortex_m(folder, main_source(name, ios, True), board,
                                 defines=["-DQCONVERT_PROFILE"], cmsis=cmsis)
            lines = _run(elf).splitlines()
            result["profiled_total"] = int(lines[1].split()[1]) * PER_TICK
            for line in lines[3:]:
                _, index, op, ticks = line.split()
                result["layers"].append((int(index), op, int(ticks) * PER_TICK))
    return result


def calibrate(board: str = "m4") -> None:
    """Instructions per counter tick on a loop of known length (3 instructions per turn:
    subs, nop, bne; checked with objdump by the reader)."""
    _use_board(board)
    src = "\n".join([
        "#include <stdio.h>", "#include <stdint.h>",
        f"#define COUNTER (*(volatile uint32_t *){COUNTER})",
        "int main(void)", "{", "    uint32_t t0, t1, n = 1000000u;", "    t0 = COUNTER;",
        '    __asm volatile("1: subs %0, %0, #1\\n nop\\n bne 1b" : "+r"(n));',
        "    t1 = COUNTER;", '    printf("ticks %lu\\n", (unsigned long)(t1 - t0));',
        "    return 0;", "}", ""])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        elf = build_cortex_m(folder, src, board)
        ticks = int(_run(elf).split()[1])
    print(f"3,000,000 instructions: {ticks} ticks = {3_000_000 / ticks:.2f} instructions/tick")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path)
    parser.add_argument("--kernels", choices=("portable", "cmsis-nn"), default="portable")
    parser.add_argument("--total-only", action="store_true",
                        help="only the whole-invoke instructions and the flash")
    parser.add_argument("--calibrate", action="store_true",
                        help="check the instructions per counter tick and exit")
    parser.add_argument("--board", choices=sorted(BOARDS), default="m4")
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args.board)
        return
    if args.model is None:
        parser.error("give a MODEL (or --calibrate)")
    if args.kernels == "cmsis-nn" and not cmsis_nn_available():
        raise SystemExit("CMSIS-NN is not at ../shared/third_party/CMSIS-NN ($QCONVERT_CMSIS_NN)")
    r = profile(args.model, args.kernels, args.total_only, board=args.board)
    core = {"m4": "Cortex-M4", "m55": "Cortex-M55"}[args.board]
    print(f"{args.model.name} --kernels {args.kernels}, {core} ({BOARDS[args.board][0]}, -O2)")
    print(f"instructions per inference: {r['total']:,} (the first invoke: {r['first']:,})")
    print(f"image flash: text {r['flash'][0]:,} + data {r['flash'][1]:,} bytes; "
          f"the model's object: text {r['model_object'][0]:,} + data "
          f"{r['model_object'][1]:,} bytes")
    if r["layers"]:
        total = sum(n for _, _, n in r["layers"])
        print(f"{'#':>4}  {'op':24} {'instructions':>13} {'share':>6}")
        for index, op, n in r["layers"]:
            print(f"{index:4d}  {op[:24]:24} {n:13,d} {100 * n / max(total, 1):5.1f}%")
        print(f"layers: {total:,} instructions; whole invoke with the hook: "
              f"{r['profiled_total']:,} (without: {r['total']:,})")


if __name__ == "__main__":
    main()
