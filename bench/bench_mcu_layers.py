"""Benchmark: instructions per layer and per inference of `export-c` on an emulated Cortex-M4.

For each model (default: kws_ref_model, pretrainedResnet_quant, ad01_int8 of tests/models) and
each kernel set (qconvert's portable kernels, CMSIS-NN's; and, with --before DIR, the portable
kernels of another qconvert checkout, e.g. the main branch), exports the model, marks the
generated `invoke` between layers, builds it with arm-none-eabi-gcc -O2 for Cortex-M4 as
tests/helpers/export_c_harness.py does, and runs it under `qemu-system-arm -M mps2-an386 -icount
shift=0`: time advances one ns per instruction and the MPS2 FPGAIO counter (0x40028018) ticks
at 25 MHz, so one tick is 40 instructions (checked by `--calibrate` on a loop of known length).
Prints, per layer, the instructions of each kernel set, and the totals; "cmsis-nn" is the
export's CMSIS-NN set (qconvert's fast conv / fully connected kernels on builds without
Helium, `cmsis_fast`), "cmsis-whole" CMSIS-NN alone called once per layer as TFLite Micro calls
it (no per-row convolution bands), the reference the kernels are held to.

    python bench/bench_mcu_layers.py [--before /work/main] [--calibrate] [MODEL.tflite ...]

Needs arm-none-eabi-gcc, qemu-system-arm and CMSIS-NN (../shared/third_party/CMSIS-NN).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))  # this checkout's qconvert, not an installed one

from helpers.export_c_harness import build_cortex_m  # noqa: E402

MODELS = ROOT / "tests" / "models"
DEFAULT = ("kws_ref_model", "pretrainedResnet_quant", "ad01_int8")
COUNTER = "0x40028018u"
PER_TICK = 40


def export(model: Path, folder: Path, kernels: str, root: Path) -> None:
    """`qconvert export-c` run from `root` (its qconvert package). kernels "cmsis-whole":
    CMSIS-NN alone (no fast qconvert kernels on non-Helium builds) with one call per layer, as
    TFLite Micro makes them (no per-row bands: the plan never overlaps a convolution's output
    with its input)."""
    folder.mkdir(parents=True, exist_ok=True)
    if kernels == "cmsis-whole":
        from qconvert.c_export.model import cmsis_nn
        from qconvert.c_export.model.render import ModelOptions, render_model
        from qconvert.c_export.model.prepare import prepare_model
        from qconvert.formats.model_io import load_model

        from qconvert.c_export.model import fast_steps

        saved = (cmsis_nn.row_bands, cmsis_nn.fast_conv_step, cmsis_nn.fast_fc_step,
                 fast_steps.keep_on_dsp)
        cmsis_nn.row_bands = cmsis_nn.fast_conv_step = cmsis_nn.fast_fc_step = \
            lambda *args: None
        fast_steps.keep_on_dsp = lambda fast, cmsis: cmsis
        try:
            files, _ = render_model(prepare_model(load_model(model)), ModelOptions(
                name="net", kernels="cmsis-nn", fc_layout="rowmajor"))
        finally:
            (cmsis_nn.row_bands, cmsis_nn.fast_conv_step, cmsis_nn.fast_fc_step,
             fast_steps.keep_on_dsp) = saved
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return
    done = subprocess.run([sys.executable, "-m", "qconvert.cli", "export-c", str(model), "-o",
                           str(folder), "--name", "net", "--kernels", kernels],
                          cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)


def instrument(folder: Path) -> int:
    """Put a counter mark before each layer of net.c's invoke and before its output copy; the
    number of marks."""
    path = folder / "net.c"
    lines = path.read_text().split("\n")
    out, marks, seen_body, most = [], 0, False, 0
    for line in lines:
        found = re.match(r"    /\* layer (\d+): ", line)
        if line.startswith("#else"):  # the other build's body: the same marks again
            marks = 0
        if found:
            out.append(f"    qc_bench_mark({marks});")
            marks += 1
            seen_body = True
        elif seen_body and line.startswith(("    copy_bytes(output", "    memcpy(output")):
            out.append(f"    qc_bench_mark({marks});")
            marks += 1
            seen_body = False
        out.append(line)
        most = max(most, marks)
    text = "\n".join(out).replace('#include "net.h"', '#include "net.h"\n'
                                  "extern void qc_bench_mark(int i);", 1)
    path.write_text(text)
    return most


def main_source(marks: int, layers: list) -> str:
    return "\n".join([
        "#include <stdio.h>", "#include <stdint.h>", '#include "net.h"',
        f"static volatile uint32_t *const counter = (volatile uint32_t *){COUNTER};",
        f"static uint32_t marks[{marks + 1}];",
        "void qc_bench_mark(int i) { marks[i] = *counter; }",
        "static int8_t input[NET_INPUT_SIZE];", "static int8_t output[NET_OUTPUT_SIZE];",
        "int main(void)", "{", "    uint32_t t0, t1;", "    int i;",
        "    for (i = 0; i < (int)sizeof input; ++i) { input[i] = (int8_t)(i * 7 - 50); }",
        "    t0 = *counter;", "    net_invoke(input, output);", "    t1 = *counter;",
        '    printf("total %lu\\n", (unsigned long)(t1 - t0));',
        f"    for (i = 0; i + 1 < {marks}; ++i) {{",
        '        printf("layer %d %lu\\n", i, (unsigned long)(marks[i + 1] - marks[i]));',
        "    }", "    return 0;", "}", ""])


def run_icount(elf: Path) -> str:
    done = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-icount", "shift=0",
                           "-nographic", "-semihosting", "-monitor", "none", "-serial", "none",
                           "-kernel", str(elf)], capture_output=True, text=True, timeout=600,
                          check=True)
    return done.stdout


def measure(model: Path, kernels: str, root: Path, work: Path) -> tuple:
    """(total instructions, [instructions per layer], [op per layer], .text bytes)."""
    folder = work / f"{model.stem}_{kernels}_{root.name}"
    export(model, folder, kernels, root)
    ops = re.findall(r"    /\* layer \d+: (\w+) \*/", (folder / "net.c").read_text())
    marks = instrument(folder)
    header = (folder / "net.h").read_text()
    sizes = {k: v for k, v in re.findall(r"#define NET_(INPUT|OUTPUT)_SIZE (\d+)", header)}
    if len(sizes) < 2:
        raise SystemExit("net.h: no NET_INPUT_SIZE / NET_OUTPUT_SIZE (one int8 input, output)")
    elf = build_cortex_m(folder, main_source(marks, ops), "m4", cmsis=kernels != "portable")
    text = run_icount(elf)
    total = int(re.search(r"total (\d+)", text).group(1)) * PER_TICK
    layers = [int(v) * PER_TICK for v in re.findall(r"layer \d+ (\d+)", text)]
    return total, layers, ops, text_bytes(elf)


def text_bytes(elf: Path) -> int:
    """.text of the image (code, constants and weights; the harness and newlib included)."""
    done = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True,
                          text=True, check=True)
    return int(re.search(r"^\.text\s+(\d+)", done.stdout, re.MULTILINE).group(1))


def calibrate(work: Path) -> None:
    """Ticks of a loop of 3,000,000 instructions (the objdump of the loop is printed)."""
    folder = work / "calibrate"
    folder.mkdir(parents=True, exist_ok=True)
    src = "\n".join([
        "#include <stdio.h>", "#include <stdint.h>",
        f"static volatile uint32_t *const counter = (volatile uint32_t *){COUNTER};",
        "int main(void)", "{", "    uint32_t t0, t1, n = 1000000u;", "    t0 = *counter;",
        '    __asm volatile("1: subs %0, %0, #1\\n nop\\n bne 1b" : "+r"(n));',
        "    t1 = *counter;", '    printf("ticks %lu\\n", (unsigned long)(t1 - t0));',
        "    return 0;", "}", ""])
    elf = build_cortex_m(folder, src, "m4")
    print(run_icount(elf).strip(), "for 3,000,000 instructions (subs, nop, bne) x 1e6")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--before", type=Path, help="another qconvert checkout (portable)")
    parser.add_argument("--calibrate", action="store_true")
    args = parser.parse_args()
    models = args.models or [MODELS / f"{m}.tflite" for m in DEFAULT]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.calibrate:
            calibrate(work)
        for model in models:
            runs = {}
            if args.before:
                runs["before"] = measure(model, "portable", args.before.resolve(), work)
            runs["portable"] = measure(model, "portable", ROOT, work)
            runs["cmsis-nn"] = measure(model, "cmsis-nn", ROOT, work)
            runs["cmsis-whole"] = measure(model, "cmsis-whole", ROOT, work)
            names = list(runs)
            print(f"\n{model.stem}: instructions per inference (Cortex-M4, QEMU -icount)")
            print(f"{'layer':>5} {'op':<16}" + "".join(f"{n:>12}" for n in names))
            ops = runs["portable"][2]
            for i, op in enumerate(ops):
                row = "".join(f"{runs[n][1][i]:>12,}" if i < len(runs[n][1]) else f"{'':>12}"
                              for n in names)
                print(f"{i:>5} {op:<16}{row}")
            print(f"{'total':>5} {'':<16}" + "".join(f"{runs[n][0]:>12,}" for n in names))
            print(f"{'.text':>5} {'(image)':<16}" + "".join(f"{runs[n][3]:>12,}" for n in names))
            base = runs["cmsis-nn"][0]
            print(f"{'':>5} {'/ cmsis-nn':<16}" + "".join(f"{runs[n][0] / base:>12.2f}"
                                                          for n in names))


if __name__ == "__main__":
    main()
