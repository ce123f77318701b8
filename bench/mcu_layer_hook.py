"""The main.c of bench/profile_layers.py's images and the parser of what they print.

An export built with -DQCONVERT_PROFILE calls the application's `NAME_layer_hook(index, op,
phase)` before (phase 0) and after (phase 1) every layer of `NAME_invoke` (the one way the
export marks its layers, see docs/commands/export-c.md). The main.c here runs `NAME_invoke`
twice on a deterministic input between reads of the board's FPGAIO counter (inline volatile
reads, so only the invoke is counted) and, in the profiled image, defines the hook to record
the counter around each layer; the second invoke is the figure (what every inference of a
firmware costs), the first also runs `NAME_check`. It follows mcu_firmware's protocol
(`bench KEY VALUE` lines, `bench done`) plus one `layer INDEX OP TICKS` line per layer.
"""

from __future__ import annotations

MAX_LAYERS = 4096


def _io_lines(ins: list, outs: list) -> list:
    """C lines: one static array per input, a deterministic ramp (float: -1 to 1, else every
    int8 value in turn), and one per output."""
    lines = []
    for i, (ctype, size) in enumerate(ins):
        if ctype == "float":
            values = ",".join(f"{2 * k / max(size - 1, 1) - 1:.6f}f" for k in range(size))
        else:
            values = ",".join(str((k * 37) % 256 - 128) for k in range(size))
        lines.append(f"static const {ctype} in{i}[{size}] = {{{values}}};")
    lines += [f"static {ctype} out{i}[{size}];" for i, (ctype, size) in enumerate(outs)]
    return lines


def _hook_lines(name: str) -> list:
    """C lines of `name`_layer_hook: the counter at each layer's start, its ticks at its end
    (the last invoke's), and the op's name."""
    return [f"#define MAX_LAYERS {MAX_LAYERS}",
            "static uint32_t start_ticks[MAX_LAYERS], ticks[MAX_LAYERS];",
            "static const char *ops[MAX_LAYERS];",
            "static int seen[MAX_LAYERS];",
            f"void {name}_layer_hook(int index, const char *op, int phase);",
            f"void {name}_layer_hook(int index, const char *op, int phase)",
            "{",
            "    uint32_t now = COUNTER;",
            "    if (index < 0 || index >= MAX_LAYERS) {",
            "        return;",
            "    }",
            "    if (phase == 0) {",
            "        start_ticks[index] = now;",
            "    } else {",
            "        ticks[index] = now - start_ticks[index];",
            "        ops[index] = op;",
            "        seen[index] = 1;",
            "    }",
            "}", ""]


def main_source(name: str, ins: list, outs: list, profile: bool) -> str:
    """main.c for the export `name` with inputs `ins` and outputs `outs` ([(ctype,
    elements)]): two invokes between counter reads; with `profile`, the layer hook and one
    printed line per layer."""
    args = [f"in{i}" for i in range(len(ins))] + [f"out{i}" for i in range(len(outs))]
    lines = ["#include <stdio.h>", "#include <stdint.h>", '#include "bench_rt.h"',
             f'#include "{name}.h"', "",
             "#define COUNTER (*(volatile const uint32_t *)BENCH_COUNTER_ADDR)",
             *_io_lines(ins, outs), ""]
    if profile:
        lines += _hook_lines(name)
    lines += ["int main(void)", "{", "    uint32_t t0, t1, t2;", "    int rc, rc2;",
              "    bench_start();",
              "    t0 = COUNTER;", f"    rc = {name}_invoke({', '.join(args)});",
              "    t1 = COUNTER;", f"    rc2 = {name}_invoke({', '.join(args)});",
              "    t2 = COUNTER;",
              '    bench_print("rc", (uint32_t)(rc | rc2));',
              '    bench_print("invoke_ticks", t2 - t1);',
              '    bench_print("first_ticks", t1 - t0);']
    if profile:
        lines += ["    {", "        int i;", "        for (i = 0; i < MAX_LAYERS; ++i) {",
                  "            if (seen[i]) {",
                  '                printf("layer %d %s %lu\\n", i, ops[i], '
                  "(unsigned long)ticks[i]);",
                  "            }", "        }", "    }"]
    lines += ['    printf("bench done\\n");', "    return 0;", "}", ""]
    return "\n".join(lines)


def layers(text: str, per_tick: int) -> list:
    """[(index, op, instructions)] of the `layer INDEX OP TICKS` lines of a profiled run."""
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "layer":
            found.append((int(parts[1]), parts[2], int(parts[3]) * per_tick))
    return found
