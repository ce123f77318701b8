"""export-c firmware images for bench_mcu: run `qconvert export-c` on the int8 model, write a
main.c that follows mcu_firmware's protocol around NAME_invoke, and link it (with CMSIS-NN for
`--kernels cmsis-nn`).

The export is compiled with the same flags as every image (-O2, -ffunction-sections
-fdata-sections, --gc-sections). The main.c copies the loader's input bytes into its own static
input buffers (what an application holds besides the model's arena), then paints the stack,
reads the counter, calls NAME_invoke, reads the counter, scans the stack.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import mcu_firmware as fw

ROOT = Path(__file__).resolve().parent.parent
NAME = "m"


class Refused(Exception):
    """export-c refused the model (its one-line message is the reason)."""


# CMSIS-NN beside the repository (a worktree one level deeper looks one more level up)
DEFAULT_CMSIS_NN = next((p for p in (ROOT.parent / "shared" / "third_party" / "CMSIS-NN",
                                     ROOT.parent.parent / "shared" / "third_party" / "CMSIS-NN")
                         if (p / "Include").is_dir()),
                        ROOT.parent / "shared" / "third_party" / "CMSIS-NN")
# q7 images (`--scheme q7`, from the float model and its calibration): image kind -> --kernels
Q7_KERNELS = {"q7-legacy": "cmsis-nn-legacy", "q7-portable": "portable"}
DEFAULT_LEGACY = next((p for p in (ROOT.parent / "shared" / "third_party" / "CMSIS_5-NN-legacy",
                                   ROOT.parent.parent / "shared" / "third_party" /
                                   "CMSIS_5-NN-legacy") if (p / "CMSIS").is_dir()),
                      ROOT.parent / "shared" / "third_party" / "CMSIS_5-NN-legacy")


def export(model: Path, folder: Path, kernels: str, extra=(), root: Path = ROOT) -> Path:
    """`qconvert export-c MODEL -o folder/src --name m --kernels K [extra]`, run with the
    qconvert package of the checkout `root` (this one by default, another one to compare
    with); the source folder."""
    src = folder / "src"
    folder.mkdir(parents=True, exist_ok=True)
    for old in src.glob("*") if src.is_dir() else ():
        old.unlink()
    done = subprocess.run([sys.executable, "-m", "qconvert.cli", "export-c", str(model), "-o",
                           str(src), "--name", NAME, "--kernels", kernels, *extra],
                          capture_output=True, text=True, cwd=root, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no message"]
        raise Refused(lines[-1].replace(f"qconvert: error: {model}: ", ""))
    return src


def io_layout(header: str) -> tuple:
    """([(ctype, elements)] inputs, [...] outputs) read from NAME.h's macros and comments."""
    count = {k: int(re.search(rf"#define M_NUM_{k}S (\d+)", header).group(1))
             for k in ("INPUT", "OUTPUT")}
    dtypes = {(t, int(i)): d for t, i, d in re.findall(
        r"/\* (input|output) (\d+): .*\] (\w+) \*/", header)}
    ctype = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "float": "float",
             "float32": "float"}
    out = []
    for kind in ("INPUT", "OUTPUT"):
        rows = []
        for i in range(count[kind]):
            size = int(re.search(rf"#define M_{kind}{i}_SIZE (\d+)", header).group(1))
            rows.append((ctype[dtypes.get((kind.lower(), i), "int8")], size))
        out.append(rows)
    return out[0], out[1]


_BYTES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "float": 4}


def main_source(header: str) -> str:
    """main.c for the export whose NAME.h is `header`."""
    ins, outs = io_layout(header)
    lines = ["#include <stdio.h>", "#include <string.h>", '#include "bench_rt.h"',
             f'#include "{NAME}.h"', ""]
    for i, (c, n) in enumerate(ins):
        lines.append(f"static {c} in{i}[{n}] __attribute__((aligned(4)));")
    for i, (c, n) in enumerate(outs):
        lines.append(f"static {c} out{i}[{n}] __attribute__((aligned(4)));")
    args = [f"in{i}" for i in range(len(ins))] + [f"out{i}" for i in range(len(outs))]
    lines += ["", "int main(void)", "{", "    uint32_t t0, t1, offset = 0;", "    int rc;",
              "    bench_start();"]
    for i, (c, n) in enumerate(ins):
        lines += [f"    memcpy(in{i}, bench_input() + offset, sizeof in{i});",
                  f"    offset += sizeof in{i};"]
    if re.search(rf"\b{NAME}_init\s*\(\s*void\s*\)", header):
        lines += [f"    bench_paint();", "    t0 = bench_counter();", f"    {NAME}_init();",
                  "    t1 = bench_counter();", '    bench_print("setup_ticks", t1 - t0);',
                  '    bench_print("setup_stack", bench_stack_used());']
    lines += ["    (void)offset;", "    bench_paint();", "    t0 = bench_counter();",
              f"    rc = {NAME}_invoke({', '.join(args)});", "    t1 = bench_counter();",
              '    bench_print("invoke_ticks", t1 - t0);',
              '    bench_print("invoke_stack", bench_stack_used());',
              '    bench_print("rc", (uint32_t)rc);']
    lines += [f"    bench_print_hex({i}, out{i}, sizeof out{i});" for i in range(len(outs))]
    lines += ['    printf("bench done\\n");', "    return 0;", "}", ""]
    return "\n".join(lines)


def build(model: Path, folder: Path, board: fw.Board, kernels: str, cmsis_nn: Path,
          calibration: Path | None = None, legacy: Path = DEFAULT_LEGACY) -> dict:
    """Export and link one image; {"elf", "map", "weights_objects", "arena", "io_bytes"}.
    A q7 kind (`Q7_KERNELS`) exports the float `model` with `calibration` (legacy kernels
    from `legacy`)."""
    if kernels in Q7_KERNELS:
        if calibration is None:
            raise Refused("the q7 scheme quantizes a float model: this one is int8")
        src = export(model, folder, Q7_KERNELS[kernels],
                     ("--scheme", "q7", "--calibration", str(calibration)))
    else:
        src = export(model, folder, kernels)
    header = (src / f"{NAME}.h").read_text()
    elf, mapfile = link(src, folder / f"build_{board.name}", board, kernels, cmsis_nn,
                        main_source(header), legacy=legacy)
    ins, outs = io_layout(header)
    arena = int(re.search(rf"#define {NAME.upper()}_ARENA_SIZE (\d+)", header).group(1))
    return {"elf": elf, "map": mapfile, "weights_objects": {f"{NAME}.o"}, "arena": arena,
            "io_bytes": sum(_BYTES[c] * n for c, n in ins + outs)}


def link(src: Path, build_dir: Path, board: fw.Board, kernels: str, cmsis_nn: Path,
         main_c: str, defines=(), legacy: Path = DEFAULT_LEGACY,
         library_cache: Path | None = None) -> tuple:
    """Compile the export in `src` with `main_c` and the runtime into `build_dir` (emptied
    first) and link it, with CMSIS-NN for the cmsis-nn kinds and the legacy q7 kernels for
    q7-legacy (libraries cached in `library_cache`, by default beside the work folder);
    (elf, map)."""
    if build_dir.is_dir():
        for old in build_dir.glob("*"):
            old.unlink()
    support = fw.write_support(build_dir, board)
    (build_dir / "main.c").write_text(main_c)
    cache = library_cache or build_dir.parent.parent.parent
    flags = [f"-I{src}", *defines]
    libs = []
    if kernels in ("cmsis-nn", "cmsis-whole"):
        flags.append(f"-I{cmsis_nn / 'Include'}")
        libs.append(cmsis_library(board, cmsis_nn, cache / "cmsis-nn-lib"))
    if kernels == "q7-legacy":
        nn = legacy / "CMSIS" / "NN"
        flags += [f"-I{nn / 'Include'}", f"-I{legacy / 'CMSIS' / 'Core' / 'Include'}"]
        libs.append(cmsis_library(board, legacy, cache / "legacy-lib", legacy_sources(legacy)))
    sources = [*support, build_dir / "main.c", *sorted(src.glob("*.c"))]
    return fw.compile_and_link(build_dir, board, sources, flags, libs)


def cmsis_sources(cmsis_nn: Path) -> list:
    """CMSIS-NN's sources but its float, LSTM and SVDF ones (--gc-sections keeps what is
    called)."""
    skip = ("f16", "f32", "lstm", "svdf")
    return sorted(p for p in (cmsis_nn / "Source").glob("*/*.c")
                  if not any(k in p.name for k in skip))


def legacy_sources(legacy: Path) -> list:
    """The legacy CMSIS_5 q7 sources export-c --scheme q7 calls."""
    from qconvert.c_export.model.q7_source import LEGACY_FILES

    return [legacy / "CMSIS" / "NN" / "Source" / f for f in LEGACY_FILES]


def cmsis_library(board: fw.Board, cmsis_nn: Path, cache: Path, sources=None) -> Path:
    """CMSIS-NN (or the legacy q7 `sources` of the CMSIS_5 copy `cmsis_nn`) compiled for
    `board` with the images' flags, as a static library cached in `cache` (rebuilt when its
    sources change)."""
    import hashlib

    includes = [f"-I{cmsis_nn / 'Include'}"]
    if sources is None:
        sources = cmsis_sources(cmsis_nn)
    else:
        includes = [f"-I{cmsis_nn / 'CMSIS' / 'NN' / 'Include'}",
                    f"-I{cmsis_nn / 'CMSIS' / 'Core' / 'Include'}"]
    key = hashlib.sha256(repr((board, fw.COMMON_FLAGS, [(str(p), p.stat().st_size,
                                                         p.stat().st_mtime_ns)
                                                        for p in sources])).encode()).hexdigest()
    folder = cache / f"{board.name}_{key[:12]}"
    lib = folder / "libcmsisnn.a"
    if lib.is_file():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    objects = []
    procs = []
    for i, src in enumerate(sources):
        obj = folder / f"{i:03d}_{src.stem}.o"
        objects.append(obj)
        procs.append(subprocess.Popen(["arm-none-eabi-gcc", *board.cpu_flags, *fw.COMMON_FLAGS,
                                       "-std=c99", "-w", *includes, "-c",
                                       str(src), "-o", str(obj)]))
        if len(procs) >= 2:  # at most two compilers at once
            if procs.pop(0).wait() != 0:
                raise RuntimeError(f"CMSIS-NN compile failed: {src}")
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("CMSIS-NN compile failed")
    fw.run(["arm-none-eabi-ar", "rcs", lib, *objects])
    return lib
