"""Benchmark (not a test): instructions per frame of a streaming model exported by
`qconvert export-c`, on Cortex-M4 (QEMU mps2-an386), both kernel sets.

    python bench/bench_streaming_c.py [MODEL.tflite ...] [--frames 60]

Default model: tests/models/streaming_kws_int8.tflite (a ring buffer of 8 frames in a resource
variable, conv, two fully connected layers, softmax). Each model is exported with
`--kernels portable` and `--kernels cmsis-nn` (CMSIS-NN from ../shared/third_party/CMSIS-NN, as
the tests find it), built like tests/helpers/export_c_harness.py builds Cortex-M4 firmware
(arm-none-eabi-gcc -O2, -mcpu=cortex-m4 -mthumb) and run in qemu-system-arm with
`-icount shift=0` (one instruction per ns). The firmware reads the MPS2 FPGAIO 25 MHz counter
(0x40028018) around every NAME_invoke: one tick = 40 instructions (checked on a loop of known
length). The first frame also runs NAME_init (the state's initial values), so it is reported
apart; "per frame" is over the frames after it. The outputs are checked against the TFLite
Micro interpreter frame by frame before any figure is printed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.oracles import stream_frames  # noqa: E402
from helpers.export_c_harness import (build_cortex_m, cmsis_nn_available, io_layout,  # noqa: E402
                                      tflm_arena_bytes)

COUNTER = "0x40028018u"
INSTRUCTIONS_PER_TICK = 40


def main_source(name: str, ios: dict, frames: list) -> str:
    (ctype, size), = ios["inputs"]
    rows = ",\n".join("{" + ",".join(map(str, np.asarray(f).view(np.uint8).reshape(-1))) + "}"
                      for f in frames)
    outs = [f"out{i}" for i in range(len(ios["outputs"]))]
    lines = ["#include <stdio.h>", "#include <stdint.h>", f'#include "{name}.h"',
             f"static const uint8_t in[{len(frames)}][{size}] = {{{rows}}};"]
    lines += [f"static {c} out{i}[{n}];" for i, (c, n) in enumerate(ios["outputs"])]
    lines += ["int main(void)", "{", "    int k;", "    unsigned i;",
              f"    volatile const uint32_t *const counter = (volatile const uint32_t *){COUNTER};",
              f"    for (k = 0; k < {len(frames)}; ++k) {{",
              "        uint32_t t0 = *counter;",
              f"        int rc = {name}_invoke((const {ctype} *)(const void *)in[k], "
              f"{', '.join(outs)});",
              "        uint32_t t1 = *counter;",
              '        printf("rc %d ticks %lu\\n", rc, (unsigned long)(t1 - t0));']
    for o in outs:
        lines += [f"        for (i = 0; i < sizeof {o}; ++i) {{",
                  f'            printf("%02x", (unsigned)((const uint8_t *){o})[i]);',
                  "        }", '        printf("\\n");']
    lines += ["    }", "    return 0;", "}", ""]
    return "\n".join(lines)


def tflm_outputs(path: Path, frames: list, count: int) -> list:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_file(str(path))
    out = []
    for f in frames:
        it.set_input(f, 0)
        it.invoke()
        out.append([np.array(it.get_output(k)).reshape(-1).view(np.uint8).tobytes().hex()
                    for k in range(count)])
    return out


def measure(path: Path, kernels: str, frames: list, work: Path) -> dict:
    from qconvert.formats.model_io import load_model

    folder = work / f"{path.stem}_{kernels}"
    cmd = [sys.executable, "-m", "qconvert.cli", "export-c", str(path), "-o", str(folder),
           "--name", "net", "--kernels", kernels]
    printed = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    graph = load_model(path).graph
    ios = io_layout(graph)
    elf = build_cortex_m(folder, main_source("net", ios, frames), "m4",
                         cmsis=kernels == "cmsis-nn")
    text = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-icount", "shift=0",
                           "-nographic", "-semihosting", "-monitor", "none", "-serial", "none",
                           "-kernel", str(elf)], capture_output=True, text=True, check=True,
                          timeout=600).stdout
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    per = 1 + len(ios["outputs"])
    ticks, outputs = [], []
    for k in range(0, len(lines), per):
        rc, _, value = lines[k].partition(" ticks ")
        assert rc == "rc 0", lines[k]
        ticks.append(int(value))
        outputs.append(lines[k + 1:k + per])
    want = tflm_outputs(path, frames, len(ios["outputs"]))
    assert outputs == want, f"{path.name} ({kernels}): outputs differ from TFLite Micro"
    size = subprocess.run(["arm-none-eabi-size", str(elf)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[1].split()
    instr = np.asarray(ticks, np.int64) * INSTRUCTIONS_PER_TICK
    return {"first": int(instr[0]), "mean": float(instr[1:].mean()), "min": int(instr[1:].min()),
            "max": int(instr[1:].max()), "text": int(size[0]), "summary": printed.strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", type=Path,
                        default=[ROOT / "tests" / "models" / "streaming_kws_int8.tflite"])
    parser.add_argument("--frames", type=int, default=60)
    args = parser.parse_args()
    kernel_sets = ["portable"] + (["cmsis-nn"] if cmsis_nn_available() else [])
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.models:
            from qconvert.c_export.model.steps import tensor_dims
            from qconvert.formats.model_io import load_model

            graph = load_model(path).graph
            frames = stream_frames(list(tensor_dims(graph, graph.inputs[0])), np.int8,
                                   args.frames)
            print(f"{path.name}: {args.frames} frames, Cortex-M4 (mps2-an386, -icount shift=0), "
                  f"TFLite Micro arena {tflm_arena_bytes(path)} bytes")
            for kernels in kernel_sets:
                r = measure(path, kernels, frames, Path(tmp))
                print(f"  {kernels:9s} {r['mean']:10.0f} instructions per frame "
                      f"(min {r['min']}, max {r['max']}; first frame with NAME_init "
                      f"{r['first']}), firmware .text {r['text']} bytes; bit-exact with TFLite "
                      f"Micro on every frame")
                for line in r["summary"].splitlines():  # the summary, not the table
                    if line.startswith("net: "):
                        print(f"            {line}")


if __name__ == "__main__":
    main()
