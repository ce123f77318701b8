"""Build and run `qconvert export-c` output: on the host with gcc, on emulated Cortex-M with
arm-none-eabi-gcc and qemu-system-arm (semihosting), with or without CMSIS-NN.

A harness `main.c` embeds K samples per input, calls `NAME_invoke` on each and prints every
output's bytes in hex, one line per output per sample (`rc` lines give the return codes);
`parse` turns that back into arrays. One binary runs every sample, so each model and kernel set
is compiled once.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# CMSIS-NN for the cmsis-nn kernel set: $QCONVERT_CMSIS_NN, else ../shared/third_party/CMSIS-NN
# beside the repository (a worktree one level deeper looks one more level up); never part of
# the project.
_CANDIDATES = [Path(os.environ["QCONVERT_CMSIS_NN"])] if os.environ.get("QCONVERT_CMSIS_NN") \
    else [ROOT.parent / "shared" / "third_party" / "CMSIS-NN",
          ROOT.parent.parent / "shared" / "third_party" / "CMSIS-NN"]
CMSIS_NN = next((p.resolve() for p in _CANDIDATES if (p / "Include").is_dir()),
                _CANDIDATES[0].resolve())
CTYPE_BYTES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "float": 4}
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
BOARDS = {
    # machine, -mcpu flags, RAM origin and length
    # Cortex-M3 (no DSP extension: the kernels' plain C path): AN385's memory map is AN386's
    # (4 MB ZBT SSRAM1 for code at 0, 4 MB SSRAM2/3 at 0x20000000); an M4 image hangs there on
    # its first DSP instruction (a UsageFault into the startup's fault loop)
    "m3": ("mps2-an385", ["-mcpu=cortex-m3", "-mthumb"], 0x20000000, 0x400000, 0x0, 0x400000),
    "m4": ("mps2-an386", ["-mcpu=cortex-m4", "-mthumb"], 0x20000000, 0x400000, 0x0, 0x400000),
    "m55": ("mps3-an547", ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"],
            0x60000000, 0x1000000, 0x0, 0x80000),
}


def cmsis_nn_available() -> bool:
    """True when ../shared/third_party/CMSIS-NN is beside the repository."""
    return (CMSIS_NN / "Include" / "arm_nnfunctions.h").is_file()


def cross_tools_available() -> bool:
    """True when arm-none-eabi-gcc (with newlib) and qemu-system-arm are installed."""
    return shutil.which("arm-none-eabi-gcc") is not None and shutil.which("qemu-system-arm") \
        is not None


NEEDS_CMSIS = pytest.mark.skipif(not cmsis_nn_available(), reason=(
    "CMSIS-NN is not beside the repository (../shared/third_party/CMSIS-NN or "
    "$QCONVERT_CMSIS_NN): the cmsis-nn kernel set is not built"))
NEEDS_CROSS = pytest.mark.skipif(not cross_tools_available(), reason=(
    "arm-none-eabi-gcc / qemu-system-arm missing (apt-get install gcc-arm-none-eabi "
    "libnewlib-arm-none-eabi qemu-system-arm): Cortex-M builds not run"))


def harness_source(name: str, ios: dict, samples: list, restart=None) -> str:
    """main.c for model `name`: `ios` is {"inputs": [(ctype, size)], "outputs": [...]};
    `samples` is a list of lists of input arrays, invoked in order without a reset between
    (a stateful model sees them as consecutive frames). `restart` (reset functions, R): then
    call those functions (e.g. `NAME_reset_lstm`) and invoke the first R samples again, their
    outputs printed after the others (what a fresh interpreter gives on them)."""
    ins, outs = ios["inputs"], ios["outputs"]
    lines = ["#include <stdio.h>", "#include <stdint.h>", f'#include "{name}.h"', ""]
    lines += _sample_arrays("in", ins, samples)
    for i, (ctype, size) in enumerate(outs):
        lines.append(f"static {ctype} out{i}[{size}];")
    lines += ["", "int main(void)", "{", "    int k;", "    unsigned i;",
              *_invoke_loops(name, "", ins, outs, len(samples), restart), "    return 0;", "}",
              ""]
    return "\n".join(lines)


def _sample_arrays(prefix: str, ins: list, samples: list) -> list:
    """The C arrays `PREFIX0[K][bytes]`, ... of every input's K samples."""
    lines = []
    for i, (ctype, size) in enumerate(ins):
        nbytes = size * CTYPE_BYTES[ctype]
        rows = []
        for sample in samples:
            data = np.ascontiguousarray(sample[i]).view(np.uint8).reshape(-1)
            assert data.size == nbytes
            rows.append("{" + ",".join(map(str, data.tolist())) + "}")
        lines.append(f"static const uint8_t {prefix}{i}[{len(samples)}][{nbytes}] "
                     f"__attribute__((aligned(4))) = {{" + ",\n".join(rows) + "};")
    return lines


def _invoke_loops(name: str, prefix: str, ins: list, outs: list, count: int,
                  restart=None) -> list:
    """main()'s lines: invoke `name` on the `count` samples (arrays `PREFIXin0`, outputs
    `PREFIXout0`, ...) printing the rc and every output's bytes; with `restart` (reset
    functions, R), call them and do the same for the first R samples."""
    args = [f"(const {c} *)(const void *){prefix}in{i}[k]" for i, (c, _) in enumerate(ins)]
    args += [f"{prefix}out{i}" for i in range(len(outs))]

    def loop(n):
        body = [f"    for (k = 0; k < {n}; ++k) {{",
                f"        int rc = {name}_invoke({', '.join(args)});",
                '        printf("rc %d\\n", rc);']
        for i, _ in enumerate(outs):
            body += [f"        for (i = 0; i < sizeof {prefix}out{i}; ++i) {{",
                     f'            printf("%02x", (unsigned)((const uint8_t *){prefix}out{i})[i]);',
                     "        }", '        printf("\\n");']
        return body + ["    }"]

    lines = loop(count)
    if restart:
        resets, replay = restart
        lines += [f"    {fn}();" for fn in resets] + loop(replay)
    return lines


def image_source(models: list) -> str:
    """main.c for one firmware image holding several exported models: `models` is a list of
    (name, ios, samples) or (name, ios, samples, restart) as `harness_source` takes them; each
    model's block of output starts with a line `== name` (`split_image_output` cuts the
    printout back into blocks)."""
    lines = ["#include <stdio.h>", "#include <stdint.h>"]
    lines += [f'#include "{entry[0]}.h"' for entry in models]
    body = []
    for name, ios, samples, *restart in models:
        ins, outs = ios["inputs"], ios["outputs"]
        lines += _sample_arrays(f"{name}_in", ins, samples)
        for i, (ctype, size) in enumerate(outs):
            lines.append(f"static {ctype} {name}_out{i}[{size}];")
        body += [f'    printf("== {name}\\n");',
                 *_invoke_loops(name, f"{name}_", ins, outs, len(samples),
                                restart[0] if restart else None)]
    lines += ["", "int main(void)", "{", "    int k;", "    unsigned i;", *body,
              "    return 0;", "}", ""]
    return "\n".join(lines)


def split_image_output(text: str) -> dict:
    """{name: that model's printout} from an `image_source` firmware's output."""
    blocks: dict = {}
    name = None
    for line in text.splitlines():
        if line.startswith("== "):
            name = line[3:].strip()
            blocks[name] = []
        elif name is not None:
            blocks[name].append(line)
    return {k: "\n".join(v) for k, v in blocks.items()}


def parse(text: str, dtypes: list, count: int) -> list:
    """[[output arrays] per sample] from the harness's printout; asserts every rc is 0."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    results, pos = [], 0
    for _ in range(count):
        assert lines[pos] == "rc 0", lines[pos]
        pos += 1
        outs = []
        for dtype in dtypes:
            outs.append(np.frombuffer(bytes.fromhex(lines[pos]), dtype=dtype).copy())
            pos += 1
        results.append(outs)
    return results


def _run(cmd, cwd=None, timeout=120) -> str:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def cmsis_sources() -> list:
    """CMSIS-NN's int8 and int16 (16x8) sources the export calls, and its support functions."""
    folders = ("ConvolutionFunctions", "FullyConnectedFunctions", "PoolingFunctions",
               "SoftmaxFunctions", "BasicMathFunctions", "NNSupportFunctions",
               "TransposeFunctions")
    def wanted(p):
        if any(k in p.name for k in ("f16", "f32", "lstm", "svdf")):
            return False
        return "s8" in p.name or "s16" in p.name or not any(k in p.name for k in ("s4", "s64"))

    return sorted(p for f in folders for p in (CMSIS_NN / "Source" / f).glob("*.c") if wanted(p))


def build_host(folder: Path, main_c: str, defines=(), cmsis=False, cmsis_extra=()) -> Path:
    """Compile every .c of the export folder plus main.c with gcc (strict C99); the binary.
    `defines` (any flags) apply to CMSIS-NN too, `cmsis_extra` to CMSIS-NN only."""
    (folder / "main.c").write_text(main_c)
    sources = sorted(str(p) for p in folder.glob("*.c"))
    flags = [*STRICT, "-O1", *defines]
    build = folder / "build"
    build.mkdir(exist_ok=True)
    libs = []
    if cmsis:
        libs.append(cmsis_library("gcc", ["-O1", *defines, *cmsis_extra]))
        flags.append(f"-I{CMSIS_NN / 'Include'}")
    exe = build / "model"
    _run(["gcc", *flags, *sources, *libs, "-o", exe])
    return exe


_LIBRARIES: dict = {}


def cmsis_library(cc: str, flags: list) -> Path:
    """CMSIS-NN compiled with `cc` and `flags` as a static library: built once per session and
    kept in the temp folder between sessions, keyed by the compiler, its flags and the sources
    (names, sizes, times), as ccache would."""
    import hashlib
    import tempfile

    key = (cc, tuple(flags))
    if key not in _LIBRARIES:
        sources = cmsis_sources()
        version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
        digest = hashlib.sha256(repr((key, version, [(str(p), p.stat().st_size,
                                                       p.stat().st_mtime_ns) for p in sources]))
                                .encode()).hexdigest()[:16]
        build = Path(tempfile.gettempdir()) / "qconvert-test-cmsis-nn" / digest
        lib = build / "libcmsisnn.a"
        if not lib.is_file():
            build.mkdir(parents=True, exist_ok=True)
            objects = [build / f"cmsis_{i}.o" for i in range(len(sources))]
            _parallel_compile(cc, ["-std=c99", *flags, f"-I{CMSIS_NN / 'Include'}", "-w"],
                              sources, objects)
            ar = "arm-none-eabi-ar" if cc.startswith("arm-") else "ar"
            partial = build / f"lib.{os.getpid()}.a"
            _run([ar, "rcs", partial, *objects])
            os.replace(partial, lib)  # atomic: a concurrent session sees all or nothing
        _LIBRARIES[key] = lib
    return _LIBRARIES[key]


def _parallel_compile(cc, flags, sources, objects) -> None:
    procs = []
    for c, o in zip(sources, objects):
        procs.append(subprocess.Popen([cc, *flags, "-c", str(c), "-o", str(o)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        if len(procs) >= 4:
            _wait(procs.pop(0))
    for p in procs:
        _wait(p)


def _wait(proc) -> None:
    out, err = proc.communicate()
    assert proc.returncode == 0, err.decode()


LINKER_SCRIPT = """\
MEMORY {{ FLASH (rx) : ORIGIN = {flash:#x}, LENGTH = {flash_len:#x}
         RAM (rwx) : ORIGIN = {ram:#x}, LENGTH = {ram_len:#x} }}
ENTRY(reset_handler)
SECTIONS {{
  .text : {{ KEEP(*(.vectors)) *(.text*) *(.rodata*) KEEP(*(.init)) KEEP(*(.fini))
            . = ALIGN(4); }} > FLASH
  .ARM.exidx : {{ *(.ARM.exidx*) }} > FLASH
  .data : {{ . = ALIGN(4); *(.data*) . = ALIGN(4); }} > RAM
  .bss : {{ __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(8); __bss_end__ = .; }} > RAM
  end = .; __end__ = .;
  __stack_top = ORIGIN(RAM) + LENGTH(RAM);
}}
"""

STARTUP = """\
#include <stdint.h>
extern int main(void);
extern void exit(int);
extern void initialise_monitor_handles(void);
extern uint32_t __bss_start__, __bss_end__, __stack_top;
void reset_handler(void);
static void fault_handler(void) { for (;;) { } }
__attribute__((section(".vectors"), used)) static const void *const vectors[16] = {
    &__stack_top, (const void *)reset_handler, (const void *)fault_handler,
    (const void *)fault_handler, (const void *)fault_handler, (const void *)fault_handler,
    (const void *)fault_handler};
void reset_handler(void)
{
    uint32_t *p;
    for (p = &__bss_start__; p < &__bss_end__; ++p) { *p = 0; }
#if defined(__ARM_FEATURE_MVE) || defined(__ARM_FP)
    /* enable the FPU / MVE (CPACR CP10, CP11 full access) */
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);
    __asm volatile("dsb\\n isb");
#endif
    initialise_monitor_handles();
    exit(main());
}
"""


# A Cortex-M0's alignment rule on a larger core: CCR.UNALIGN_TRP (0xE000ED14 bit 3) makes
# every unaligned LDR / LDRH / STR / STRH fault (qemu-system-arm enforces it, as it enforces
# ARMv6-M's), -mno-unaligned-access keeps gcc's own code (memcpy word loads) to aligned or
# byte accesses, and the fault handler says so through semihosting and exits with status 1.
TRAPPING_STARTUP = STARTUP.replace(
    "static void fault_handler(void) { for (;;) { } }", """\
static void semihost(int op, const void *arg)
{
    register int r0 __asm("r0") = op;
    register const void *r1 __asm("r1") = arg;
    __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
}
static void fault_handler(void)
{
    semihost(0x04, "HardFault (unaligned access trapped, or another fault)\\n");
    semihost(0x18, (const void *)0x20023); /* SYS_EXIT, run-time error: status 1 */
    for (;;) { }
}""").replace("    initialise_monitor_handles();",
              "    *(volatile uint32_t *)0xE000ED14u |= 1u << 3; /* CCR.UNALIGN_TRP */\n"
              "    initialise_monitor_handles();")


def build_cortex_m(folder: Path, main_c: str, board: str, defines=(), cmsis=False,
                   trap_unaligned=False, rodata_in_ram=False) -> Path:
    """Cross-compile the export folder plus main.c for `board` ("m3", "m4" or "m55"); the ELF.
    `trap_unaligned`: every unaligned word or halfword access faults, as on a Cortex-M0
    (`TRAPPING_STARTUP`; CMSIS-NN built likewise). `rodata_in_ram`: constants in the RAM
    region (loaded there by QEMU), for images whose weights outgrow the flash region (the
    Cortex-M55 board's is its 512 KB ITCM)."""
    machine, cpu, ram, ram_len, flash, flash_len = BOARDS[board]
    (folder / "main.c").write_text(main_c)
    build = folder / f"build_{board}"
    build.mkdir(exist_ok=True)
    script = LINKER_SCRIPT.format(flash=flash, flash_len=flash_len, ram=ram, ram_len=ram_len)
    if rodata_in_ram:
        script = script.replace(" *(.rodata*)", "").replace(
            "  .data :", "  .rodata : { *(.rodata*) . = ALIGN(8); } > RAM\n  .data :")
    (build / "link.ld").write_text(script)
    (build / "startup.c").write_text(TRAPPING_STARTUP if trap_unaligned else STARTUP)
    cc = "arm-none-eabi-gcc"
    flags = [*cpu, "-O2", "-ffunction-sections", "-fdata-sections", *defines,
             *(["-mno-unaligned-access"] if trap_unaligned else [])]
    libs = []
    if cmsis:
        libs.append(cmsis_library(cc, flags))
        flags.append(f"-I{CMSIS_NN / 'Include'}")
    sources = sorted(str(p) for p in folder.glob("*.c"))
    elf = build / "model.elf"
    _run([cc, *flags, *STRICT, "-c", *sources], cwd=build)
    own = [build / (Path(s).stem + ".o") for s in sources]
    _run([cc, *cpu, "-O2", "-c", build / "startup.c", "-o", build / "startup.o"])
    # trapping: newlib and libgcc of ARMv6-M (Cortex-M0), whose memcpy never reads unaligned
    # words (the v7E-M one does, by design: it would trap before any of the export's code)
    link_cpu = ["-mcpu=cortex-m0", "-mthumb"] if trap_unaligned else cpu
    _run([cc, *link_cpu, "--specs=rdimon.specs", "-nostartfiles", "-Wl,--gc-sections",
          "-T", build / "link.ld", build / "startup.o", *own, *libs, "-o", elf])
    return elf


def run_qemu(elf: Path, board: str, timeout=120) -> str:
    """Run `elf` on the emulated board; its semihosting stdout."""
    machine = BOARDS[board][0]
    return _run(["qemu-system-arm", "-M", machine, "-nographic", "-semihosting",
                 "-monitor", "none", "-serial", "none", "-kernel", elf], timeout=timeout)


@functools.lru_cache(maxsize=None)
def tflm_arena_bytes(model_path: Path) -> int:
    """TFLite Micro's whole arena for the model ('Arena allocation total', head plus tail, as
    its Python interpreter's print_allocations() reports it; printed by C++, so read from a
    child process)."""
    import re
    import sys

    code = ("import sys\nfrom tflite_micro.python.tflite_micro import runtime\n"
            "it = runtime.Interpreter.from_file(sys.argv[1])\nit.print_allocations()\n")
    done = subprocess.run([sys.executable, "-c", code, str(model_path)], capture_output=True,
                          text=True, check=False, timeout=120)
    found = re.search(r"Arena allocation total (\d+) bytes", done.stdout + done.stderr)
    assert found, done.stdout + done.stderr
    return int(found.group(1))


def io_layout(graph) -> dict:
    """{"inputs": [(ctype, elements)], "outputs": [...]} of an int8 TFLite graph."""
    from qconvert.c_export.model.steps import DTYPES, tensor_dims

    return {tag: [(DTYPES[graph.tensors[n].dtype][0],
                   int(np.prod(tensor_dims(graph, n), dtype=np.int64))) for n in names]
            for tag, names in (("inputs", graph.inputs), ("outputs", graph.outputs))}
