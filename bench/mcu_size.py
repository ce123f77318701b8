"""Flash and RAM of a linked image, from the ELF's section sizes and the linker map file.

Flash = every section loaded outside RAM (vectors, code, constants, exception tables, C++
constructor table) plus .data's initial values; weights = the constant input sections of the
objects that hold the model (the flatbuffer's object for an interpreter, NAME.o for export-c);
code = flash - weights. RAM = .data + .bss + the measured stack high-water mark.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

FLASH_SECTIONS = (".vectors", ".text", ".rodata", ".ARM.extab", ".ARM.exidx", ".init_array",
                  ".data")
# ` .rodata.name  0xADDR  0xSIZE  file` (the name may stand alone on the line before)
_INPUT = re.compile(r"^ (\.\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", re.M)


def section_sizes(elf: Path) -> dict:
    """{output section: bytes} of `elf` (arm-none-eabi-size -A)."""
    out = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith(".") and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def input_sections(map_text: str) -> list:
    """[(input section, size, file)] of the sections kept in the link (after the map's
    'Linker script and memory map' line; wrapped long names are joined back)."""
    body = map_text.split("Linker script and memory map", 1)[-1]
    body = re.sub(r"^ (\.\S+)\n\s+0x", r" \1 0x", body, flags=re.M)
    return [(m.group(1), int(m.group(3), 16), m.group(4).strip())
            for m in _INPUT.finditer(body) if int(m.group(3), 16)]


def _object_name(path: str) -> str:
    """`libx.a(conv.o)` -> conv.o; `/a/b/model.o` -> model.o."""
    inner = re.search(r"\(([^()]+)\)$", path)
    return inner.group(1) if inner else Path(path).name


def bytes_of(map_text: str, objects: set, prefix: str) -> int:
    """Bytes of the kept input sections named `prefix`* of the objects named in `objects`."""
    return sum(size for name, size, path in input_sections(map_text)
               if name.startswith(prefix) and _object_name(path) in objects)


def image_sizes(elf: Path, map_file: Path, weights_objects: set) -> dict:
    """{"flash", "code", "weights", "data", "bss"} in bytes for a linked image."""
    sizes = section_sizes(elf)
    text = map_file.read_text(errors="replace")
    flash = sum(sizes.get(s, 0) for s in FLASH_SECTIONS)
    weights = bytes_of(text, weights_objects, ".rodata")
    return {"flash": flash, "code": flash - weights, "weights": weights,
            "data": sizes.get(".data", 0), "bss": sizes.get(".bss", 0)}
