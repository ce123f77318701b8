"""The firmware side of bench_mcu: boards, memory map, startup, the measuring runtime, and
running an image under QEMU.

Every image bench_mcu runs (export-c or any other engine) follows one protocol, so one parser
reads them all:
- the inputs are not compiled in: QEMU's generic loader writes their bytes (all inputs
  concatenated, in model order) at the board's INPUT address before reset, so an image built
  once runs any input file;
- the image reads the board's FPGAIO free-running counter around the measured call
  (`-icount shift=0`: one instruction = 1 ns of virtual time; the rate in instructions per tick
  is measured per board by `calibrate`), paints the free stack with a pattern before the call and
  scans it after (high-water mark);
- it prints lines `bench KEY VALUE` (setup_ticks, setup_stack, invoke_ticks, invoke_stack,
  arena_used, rc) and one `out<i> HEX` line per output, then `bench done`.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Board:
    """One emulated board: QEMU machine, compiler flags and the memory map the images use."""
    name: str
    machine: str
    cpu_flags: tuple
    vectors: int          # where the vector table must sit (the core's reset VTOR)
    flash: int            # code, constants and .data's initial values
    flash_len: int
    ram: int              # .data, .bss, heap and stack
    ram_len: int
    input_addr: int       # the loader writes the input bytes here (outside flash and RAM)
    counter: int          # FPGAIO COUNTER register


# 4 MB flash and 4 MB RAM on both boards: the limit of the model set.
BOARDS = {
    # MPS2 AN386: SSRAM1 (4 MB at 0) as flash, SSRAM2/3 (4 MB at 0x20000000) as RAM,
    # PSRAM (16 MB at 0x21000000) for the input; FPGAIO at 0x40028000 (COUNTER +0x18).
    "m4": Board("m4", "mps2-an386", ("-mcpu=cortex-m4", "-mthumb"), 0x0, 0x0, 0x400000,
                0x20000000, 0x400000, 0x21000000, 0x40028018),
    # MPS3 AN547 (SSE-300): the vector table in ITCM at 0, everything else in DDR (16 MB at
    # 0x60000000): 4 MB flash, 4 MB RAM, then the input; FPGAIO at 0x49302000.
    "m55": Board("m55", "mps3-an547", ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"),
                 0x0, 0x60000000, 0x400000, 0x60400000, 0x400000, 0x60C00000, 0x49302018),
}

COMMON_FLAGS = ("-O2", "-ffunction-sections", "-fdata-sections")
LINK_FLAGS = ("--specs=rdimon.specs", "-nostartfiles", "-Wl,--gc-sections")

LINKER_SCRIPT = """\
MEMORY {{ VECTORS (rx) : ORIGIN = {vectors:#x}, LENGTH = 0x400
         FLASH (rx) : ORIGIN = {flash_org:#x}, LENGTH = {flash_len:#x}
         RAM (rwx) : ORIGIN = {ram:#x}, LENGTH = {ram_len:#x} }}
ENTRY(reset_handler)
SECTIONS {{
  .vectors : {{ KEEP(*(.vectors)) }} > VECTORS
  .text : {{ *(.text*) KEEP(*(.init)) KEEP(*(.fini)) . = ALIGN(4); }} > FLASH
  .rodata : {{ *(.rodata*) . = ALIGN(4); }} > FLASH
  .ARM.extab : {{ *(.ARM.extab* .gnu.linkonce.armextab.*) }} > FLASH
  .ARM.exidx : {{ *(.ARM.exidx*) }} > FLASH
  .init_array : {{ . = ALIGN(4); __init_array_start = .; KEEP(*(SORT(.init_array.*)))
                  KEEP(*(.init_array)) __init_array_end = .; }} > FLASH
  .data : {{ . = ALIGN(4); *(.data*) . = ALIGN(4); }} > RAM
  .bss : {{ __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(8); __bss_end__ = .; }} > RAM
  end = .; __end__ = .;
  __stack_top = ORIGIN(RAM) + LENGTH(RAM);
}}
"""

# Reset: zero .bss, enable the FPU/MVE where there is one, run C++ constructors, main.
STARTUP_C = """\
#include <stdint.h>
extern int main(void);
extern void exit(int);
extern void initialise_monitor_handles(void);
extern uint32_t __bss_start__, __bss_end__, __stack_top;
typedef void (*bench_ctor)(void);
extern bench_ctor __init_array_start[], __init_array_end[];
void reset_handler(void);
static void fault_handler(void) { for (;;) { } }
void _init(void);
void _fini(void);
void _init(void) { }
void _fini(void) { }
__attribute__((section(".vectors"), used)) static const void *const vectors[16] = {
    &__stack_top, (const void *)reset_handler, (const void *)fault_handler,
    (const void *)fault_handler, (const void *)fault_handler, (const void *)fault_handler,
    (const void *)fault_handler};
void reset_handler(void)
{
    uint32_t *p;
    bench_ctor *c;
    for (p = &__bss_start__; p < &__bss_end__; ++p) { *p = 0; }
#if defined(__ARM_FEATURE_MVE) || defined(__ARM_FP)
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20);  /* CPACR: CP10, CP11 full access */
    __asm volatile("dsb\\n isb");
#endif
    initialise_monitor_handles();
    for (c = __init_array_start; c < __init_array_end; ++c) { (*c)(); }
    exit(main());
}
"""

# The measuring runtime every image links (C, callable from C++).
RUNTIME_H = """\
#ifndef BENCH_RT_H
#define BENCH_RT_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
void bench_start(void);                 /* prints once (stdio buffers), sets the paint limit */
uint32_t bench_counter(void);           /* FPGAIO free-running counter */
void bench_paint(void);                 /* fill the free stack below the caller with a pattern */
uint32_t bench_stack_used(void);        /* bytes from the stack top to the lowest touched word */
const uint8_t *bench_input(void);       /* the bytes the loader placed at the INPUT address */
void bench_print(const char *key, uint32_t value);
void bench_print_hex(int index, const void *data, uint32_t bytes);
#ifdef __cplusplus
}
#endif
#endif
"""

RUNTIME_C = """\
#include <stdio.h>
#include "bench_rt.h"
#define BENCH_PAINT 0xC5A3C5A3u
#define BENCH_HEAP_RESERVE 0x8000u
extern uint32_t __stack_top;
extern char end;
static uint32_t *bench_low;

void bench_start(void)
{
    printf("bench start\\n");
    bench_low = (uint32_t *)(((uintptr_t)&end + BENCH_HEAP_RESERVE) & ~(uintptr_t)3);
}

uint32_t bench_counter(void) { return *(volatile const uint32_t *)BENCH_COUNTER_ADDR; }

__attribute__((noinline)) void bench_paint(void)
{
    uint32_t *sp;
    uint32_t *p;
    __asm volatile("mov %0, sp" : "=r"(sp));
    for (p = sp - 16; p > bench_low;) { *--p = BENCH_PAINT; }
}

uint32_t bench_stack_used(void)
{
    const uint32_t *p = bench_low;
    while (p < &__stack_top && *p == BENCH_PAINT) { ++p; }
    return (uint32_t)((uintptr_t)&__stack_top - (uintptr_t)p);
}

const uint8_t *bench_input(void) { return (const uint8_t *)BENCH_INPUT_ADDR; }

void bench_print(const char *key, uint32_t value)
{
    printf("bench %s %lu\\n", key, (unsigned long)value);
}

void bench_print_hex(int index, const void *data, uint32_t bytes)
{
    const uint8_t *b = (const uint8_t *)data;
    uint32_t i;
    printf("out%d ", index);
    for (i = 0; i < bytes; ++i) { printf("%02x", (unsigned)b[i]); }
    printf("\\n");
}
"""

# A loop of known length: 2 * N + 1 instructions between the two counter reads (mov, then
# subs + bne per iteration; a taken branch is one instruction under -icount).
CALIBRATE_C = """\
#include <stdio.h>
#include "bench_rt.h"
int main(void)
{
    uint32_t t0, t1;
    bench_start();
    t0 = bench_counter();
    __asm volatile("mov r0, %0\\n1: subs r0, r0, #1\\n bne 1b" : : "r"(BENCH_LOOP) : "r0", "cc");
    t1 = bench_counter();
    bench_print("invoke_ticks", t1 - t0);
    bench_print("rc", 0);
    printf("bench done\\n");
    return 0;
}
"""
CALIBRATE_LOOP = 4_000_000


def write_support(folder: Path, board: Board) -> list:
    """Write link.ld, startup.c, bench_rt.h/.c for `board` into `folder`; the C sources."""
    folder.mkdir(parents=True, exist_ok=True)
    shared = 0x400 if board.vectors == board.flash else 0  # vectors at the start of flash
    (folder / "link.ld").write_text(LINKER_SCRIPT.format(
        vectors=board.vectors, flash_org=board.flash + shared, flash_len=board.flash_len - shared,
        ram=board.ram, ram_len=board.ram_len))
    (folder / "startup.c").write_text(STARTUP_C)
    (folder / "bench_rt.h").write_text(RUNTIME_H)
    (folder / "bench_rt.c").write_text(RUNTIME_C)
    return [folder / "startup.c", folder / "bench_rt.c"]


def runtime_defines(board: Board) -> list:
    """-D flags the runtime needs for `board`."""
    return [f"-DBENCH_COUNTER_ADDR={board.counter:#x}u",
            f"-DBENCH_INPUT_ADDR={board.input_addr:#x}u"]


def run(cmd, cwd=None, timeout=600) -> str:
    """Run a command; its stdout, or RuntimeError with its output."""
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-3000:]}")
    return done.stdout


def run_image(elf: Path, board: Board, input_file: Path | None, timeout=1800) -> str:
    """Run `elf` on QEMU with -icount shift=0, the input bytes loaded at the INPUT address; its
    semihosting output."""
    cmd = ["qemu-system-arm", "-M", board.machine, "-icount", "shift=0", "-nographic",
           "-semihosting", "-monitor", "none", "-serial", "none", "-kernel", elf]
    if input_file is not None:
        cmd += ["-device", f"loader,file={input_file},addr={board.input_addr:#x},force-raw=on"]
    return run(cmd, timeout=timeout)


def parse_output(text: str) -> dict:
    """{"values": {key: int}, "outputs": [bytes]} from an image's printout; ValueError when the
    run did not reach `bench done`."""
    values, outs = {}, {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "bench":
            values[parts[1]] = int(parts[2])
        elif len(parts) == 2 and re.fullmatch(r"out\d+", parts[0]):
            outs[int(parts[0][3:])] = bytes.fromhex(parts[1])
    if "bench done" not in text:
        raise ValueError(f"the image did not finish: {text[-500:]}")
    return {"values": values, "outputs": [outs[i] for i in sorted(outs)]}


def compile_and_link(folder: Path, board: Board, sources: list, extra_flags=(), libs=(),
                     cxx=False, name="image") -> tuple:
    """Compile `sources` (plus the support files already in `folder`) and link with a map file;
    (elf, map)."""
    cc = "arm-none-eabi-g++" if cxx else "arm-none-eabi-gcc"
    flags = [*board.cpu_flags, *COMMON_FLAGS, f"-I{folder}", *runtime_defines(board),
             *extra_flags]
    objects = []
    for src in sources:
        src = Path(src)
        obj = folder / (src.stem + ".o")
        tool = "arm-none-eabi-g++" if src.suffix in (".cc", ".cpp") else "arm-none-eabi-gcc"
        std = ["-std=gnu++17", "-fno-rtti", "-fno-exceptions"] if src.suffix in (".cc", ".cpp") \
            else ["-std=gnu99"]
        run([tool, *flags, *std, "-c", src, "-o", obj], cwd=folder)
        objects.append(obj)
    elf, mapfile = folder / f"{name}.elf", folder / f"{name}.map"
    run([cc, *board.cpu_flags, *LINK_FLAGS, "-T", folder / "link.ld",
         f"-Wl,-Map={mapfile}", *objects, *libs, "-o", elf], cwd=folder)
    return elf, mapfile


def calibrate(board: Board, work: Path) -> float:
    """Instructions per FPGAIO counter tick on `board`, measured on a loop of known length."""
    folder = work / f"calibrate_{board.name}"
    support = write_support(folder, board)
    (folder / "main.c").write_text(CALIBRATE_C)
    elf, _ = compile_and_link(folder, board, [*support, folder / "main.c"],
                              extra_flags=[f"-DBENCH_LOOP={CALIBRATE_LOOP}"])
    ticks = parse_output(run_image(elf, board, None))["values"]["invoke_ticks"]
    return (2 * CALIBRATE_LOOP + 1) / ticks
