"""The portable C kernels qconvert ships beside the header (`export-c-header --with-kernels`).

The sources live in `qconvert/c_export/kernels/` and are installed as package data; this reads
them through importlib.resources, so a regular (non-editable) install works the same.
"""

from __future__ import annotations

from importlib import resources

KERNEL_FILES = ("qconvert_fc_1x4.h", "qconvert_fc_1x4.c")


def kernel_sources() -> dict:
    """{file name: bytes} of every shipped kernel source, in `KERNEL_FILES` order."""
    folder = resources.files("qconvert.c_export").joinpath("kernels")
    return {name: folder.joinpath(name).read_bytes() for name in KERNEL_FILES}
