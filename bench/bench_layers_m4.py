"""Instructions per layer and per inference of `qconvert export-c` output on emulated Cortex-M4.

    python bench/bench_layers_m4.py MODEL.tflite [--kernels portable|cmsis-nn] [--repeat N]

Exports MODEL, puts a read of the MPS2 FPGAIO 25 MHz counter (0x40028018) before every layer of
NAME_invoke, builds it as tests/export_c_harness.build_cortex_m does (arm-none-eabi-gcc -O2) and
runs it under qemu-system-arm -M mps2-an386 -icount shift=0, where one counter tick is 40
instructions. Prints each layer's instructions and the whole invoke's (the counter reads cost a
few instructions per layer). A figure, never an assertion.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from helpers.export_c_harness import build_cortex_m, io_layout  # noqa: E402

from qconvert.c_export.model.render import ModelOptions, render_model  # noqa: E402
from qconvert.c_export.model.prepare import prepare_model  # noqa: E402
from qconvert.formats.model_io import load_model  # noqa: E402

TICK = 40  # instructions per FPGAIO counter tick under -icount shift=0 (25 MHz at 1 GHz)

LAPS = """\
#include <stdint.h>
#define QC_COUNTER (*(volatile uint32_t *)0x40028018u)
uint32_t qc_lap_ticks[{n}];
static uint32_t qc_last;
static int qc_current = -1;
void qc_lap(int layer)
{{
    const uint32_t now = QC_COUNTER;
    if (qc_current >= 0) {{
        qc_lap_ticks[qc_current] += now - qc_last;
    }}
    qc_current = layer;
    qc_last = QC_COUNTER;
}}
"""


def instrument(source: str) -> tuple:
    """NAME.c with qc_lap(k) before layer k's call and qc_lap(-1) before the output copy."""
    layers = []

    def mark(m):
        if (int(m.group(2)), m.group(3)) not in layers:  # Helium and other builds: both
            layers.append((int(m.group(2)), m.group(3)))
        return f"{m.group(1)}qc_lap({m.group(2)});\n{m.group(0)}"

    head, sep, body = source.partition("_invoke_with_arena(const")
    body = re.sub(r"^( +)/\* layer (\d+): (\w+).*\*/$", mark, body, flags=re.M)
    body = re.sub(r"^( *)(copy_bytes\(output)", r"\1qc_lap(-1);\n\1\2", body, count=1,
                  flags=re.M)
    body = re.sub(r"^( *)(return 0;)", r"\1qc_lap(-1);\n\1\2", body, count=1, flags=re.M)
    out = "void qc_lap(int layer);\n" + head + sep + body
    return out, layers


def main_source(name, ios, n) -> str:
    ins, outs = ios["inputs"], ios["outputs"]
    lines = ["#include <stdio.h>", "#include <stdint.h>", f'#include "{name}.h"',
             f"extern uint32_t qc_lap_ticks[{n}];"]
    for i, (ctype, size) in enumerate(ins):
        lines.append(f"static {ctype} in{i}[{size}];")
    for i, (ctype, size) in enumerate(outs):
        lines.append(f"static {ctype} out{i}[{size}];")
    args = [f"in{i}" for i in range(len(ins))] + [f"out{i}" for i in range(len(outs))]
    lines += ["int main(void)", "{", "    int k;", "    uint32_t t0, t1;"]
    for i, (ctype, size) in enumerate(ins):
        lines.append(f"    for (k = 0; k < {size}; ++k) {{ in{i}[k] = ({ctype})((k * 37) % 200"
                     " - 100); }")
    lines += ["    t0 = *(volatile uint32_t *)0x40028018u;",
              f"    {name}_invoke({', '.join(args)});",
              "    t1 = *(volatile uint32_t *)0x40028018u;",
              '    printf("total %lu\\n", (unsigned long)(t1 - t0));',
              f"    for (k = 0; k < {n}; ++k) {{",
              '        printf("layer %d %lu\\n", k, (unsigned long)qc_lap_ticks[k]);', "    }",
              "    return 0;", "}"]
    return "\n".join(lines) + "\n"


def measure(model: Path, kernels: str, defines=()) -> dict:
    """{"total": instructions, "layers": [(index, op, instructions)]}; kernels "cmsis-whole":
    the cmsis-nn set with every convolution one whole-layer call (no output over its input,
    so no per-row calls: what TFLite Micro calls)."""
    graph = load_model(model).graph
    if kernels == "cmsis-whole":
        from unittest import mock

        from qconvert.c_export.model import cmsis_nn

        with mock.patch.object(cmsis_nn, "row_bands", lambda *a: None):
            return measure(model, "cmsis-nn", defines)
    name = "net"
    files, _ = render_model(prepare_model(load_model(model)), ModelOptions(
        name=name, kernels=kernels, fc_layout="1x4" if kernels == "portable" else "rowmajor"))
    folder = Path(tempfile.mkdtemp(prefix="bench_layers_"))
    for f, data in files.items():
        (folder / f).write_bytes(data)
    source, layers = instrument(files[f"{name}.c"].decode())
    (folder / f"{name}.c").write_text(source)
    n = max(i for i, _ in layers) + 1
    (folder / "laps.c").write_text(LAPS.format(n=n))
    elf = build_cortex_m(folder, main_source(name, io_layout(graph), n), "m4",
                         defines=list(defines), cmsis=kernels == "cmsis-nn")
    out = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-icount", "shift=0",
                          "-nographic", "-semihosting", "-monitor", "none", "-serial", "none",
                          "-kernel", str(elf)], capture_output=True, text=True, timeout=600,
                         check=True).stdout
    total = int(re.search(r"total (\d+)", out).group(1)) * TICK
    ticks = {int(k): int(v) * TICK for k, v in re.findall(r"layer (\d+) (\d+)", out)}
    return {"total": total, "layers": [(i, op, ticks[i]) for i, op in layers]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--kernels", nargs="+", default=["portable", "cmsis-nn"],
                    help="portable, cmsis-nn, cmsis-whole (cmsis-nn without per-row calls)")
    args = ap.parse_args()
    results = {k: measure(args.model, k) for k in args.kernels}
    print(f"{args.model.name}: instructions on Cortex-M4 (QEMU -icount, FPGAIO counter)")
    print(f"{'layer':>5} {'op':<18}" + "".join(f"{k:>14}" for k in args.kernels))
    first = results[args.kernels[0]]["layers"]
    for row, (i, op, _) in enumerate(first):
        print(f"{i:>5} {op:<18}" + "".join(f"{results[k]['layers'][row][2]:>14,}"
                                            for k in args.kernels))
    print(f"{'':>5} {'total':<18}" + "".join(f"{results[k]['total']:>14,}"
                                            for k in args.kernels))


if __name__ == "__main__":
    main()
