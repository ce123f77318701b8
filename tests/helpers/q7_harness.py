"""Build `qconvert export-c --scheme q7` output against CMSIS_5's legacy q7 kernels (the oracle)
or with qconvert's portable q7 kernels, on the host (gcc: the legacy kernels' scalar path) and
on Cortex-M4 under QEMU (mps2-an386: their DSP path), and read the outputs back.

The legacy copy is ../shared/third_party/CMSIS_5-NN-legacy beside the repository (or
$QCONVERT_CMSIS5_LEGACY); never part of the project: `NEEDS_LEGACY` skips with a message when
it is absent. Its sources compile without warnings checked (they are not ours); the export's
own files compile strict C99 with -Werror.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from .export_c_harness import (BOARDS, LINKER_SCRIPT, ROOT, STARTUP, STRICT, _run,
                              harness_source, parse)

_CANDIDATES = [Path(os.environ["QCONVERT_CMSIS5_LEGACY"])] if os.environ.get(
    "QCONVERT_CMSIS5_LEGACY") else [ROOT.parent / "shared" / "third_party" / "CMSIS_5-NN-legacy",
                                    ROOT.parent.parent / "shared" / "third_party" /
                                    "CMSIS_5-NN-legacy"]
LEGACY = next((p.resolve() for p in _CANDIDATES if (p / "CMSIS" / "NN").is_dir()),
              _CANDIDATES[0].resolve())


def legacy_available() -> bool:
    """True when the legacy CMSIS_5 NN copy is beside the repository."""
    return (LEGACY / "CMSIS" / "NN" / "Include" / "arm_nnfunctions.h").is_file()


NEEDS_LEGACY = pytest.mark.skipif(not legacy_available(), reason=(
    "CMSIS_5's legacy q7 kernels are not beside the repository "
    "(../shared/third_party/CMSIS_5-NN-legacy or $QCONVERT_CMSIS5_LEGACY): the q7 oracle "
    "builds are not run"))


def legacy_includes() -> list:
    """-isystem flags of the legacy headers (their own warnings are not ours)."""
    return ["-isystem", str(LEGACY / "CMSIS" / "NN" / "Include"),
            "-isystem", str(LEGACY / "CMSIS" / "Core" / "Include")]


@functools.lru_cache(maxsize=None)
def legacy_objects(board: str) -> tuple:
    """The legacy q7 sources export-c calls, compiled once per session for `board` ("host",
    or a key of export_c_harness.BOARDS); their object files."""
    from qconvert.c_export.model.q7_source import LEGACY_FILES

    build = Path(tempfile.mkdtemp(prefix=f"q7-legacy-{board}-"))
    cc, flags = ("gcc", ["-O1"]) if board == "host" else (
        "arm-none-eabi-gcc", [*BOARDS[board][1], "-O2", "-ffunction-sections",
                              "-fdata-sections"])
    objects = []
    for i, rel in enumerate(LEGACY_FILES):
        obj = build / f"legacy_{i}.o"
        _run([cc, "-std=c99", *flags, *legacy_includes(), "-w", "-c",
              str(LEGACY / "CMSIS" / "NN" / "Source" / rel), "-o", str(obj)])
        objects.append(str(obj))
    return tuple(objects)


def write_export(folder: Path, files: dict, name: str, samples: np.ndarray,
                 out_size: int) -> str:
    """Write the export's `files` and a main.c running `samples` (int8, one per row)."""
    folder.mkdir(parents=True, exist_ok=True)
    for f, data in files.items():
        (folder / Path(f).name).write_bytes(data)
    ios = {"inputs": [("int8_t", int(samples[0].size))], "outputs": [("int8_t", out_size)]}
    return harness_source(name, ios, [[s] for s in samples])


def run_host(folder: Path, files: dict, name: str, samples: np.ndarray, out_size: int,
             legacy: bool) -> np.ndarray:
    """Compile (host gcc) and run; the outputs (N, out_size) int8."""
    main_c = write_export(folder, files, name, samples, out_size)
    (folder / "main.c").write_text(main_c)
    sources = sorted(str(p) for p in folder.glob("*.c"))
    extra = [*legacy_includes(), *legacy_objects("host")] if legacy else []
    exe = folder / "model"
    _run(["gcc", *STRICT, "-O1", *sources, *extra, "-o", str(exe)])
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return np.array([o[0] for o in parse(out, [np.int8], len(samples))]).reshape(len(samples), -1)


def build_m4(folder: Path, files: dict, name: str, samples: np.ndarray, out_size: int,
             legacy: bool, board: str = "m4") -> Path:
    """Cross-compile for `board` (the legacy kernels' DSP path on Cortex-M4); the ELF."""
    main_c = write_export(folder, files, name, samples, out_size)
    machine, cpu, ram, ram_len, flash, flash_len = BOARDS[board]
    build = folder / f"build_{board}"
    build.mkdir(exist_ok=True)
    (folder / "main.c").write_text(main_c)
    (build / "link.ld").write_text(LINKER_SCRIPT.format(flash=flash, flash_len=flash_len,
                                                        ram=ram, ram_len=ram_len))
    (build / "startup.c").write_text(STARTUP)
    cc = "arm-none-eabi-gcc"
    flags = [*cpu, "-O2", "-ffunction-sections", "-fdata-sections"]
    sources = sorted(str(p) for p in folder.glob("*.c"))
    _run([cc, *flags, *STRICT, *(legacy_includes() if legacy else []), "-c", *sources],
         cwd=build)
    own = [str(build / (Path(s).stem + ".o")) for s in sources]
    _run([cc, *cpu, "-O2", "-c", str(build / "startup.c"), "-o", str(build / "startup.o")])
    elf = build / "model.elf"
    _run([cc, *cpu, "--specs=rdimon.specs", "-nostartfiles", "-Wl,--gc-sections", "-T",
          str(build / "link.ld"), str(build / "startup.o"), *own,
          *(legacy_objects(board) if legacy else ()), "-o", str(elf)])
    return elf


def run_m4(folder: Path, files: dict, name: str, samples: np.ndarray, out_size: int,
           legacy: bool, board: str = "m4") -> np.ndarray:
    """Build for Cortex-M4 (or `board`: "m3", no DSP extension) and run under QEMU; the outputs
    (N, out_size)."""
    from .export_c_harness import run_qemu

    elf = build_m4(folder, files, name, samples, out_size, legacy, board)
    out = run_qemu(elf, board)
    return np.array([o[0] for o in parse(out, [np.int8], len(samples))]).reshape(len(samples), -1)
