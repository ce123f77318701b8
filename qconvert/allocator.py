"""The C allocator's settings for the `qconvert` program: freed arrays are reused, not faulted in
again (glibc only; elsewhere nothing changes).

A command allocates and frees arrays of one to tens of MB over and over: a batch's activations,
a convolution's output, the plan's work arrays. By default glibc serves a block above its
(adaptive) mmap threshold with a fresh mapping and unmaps it when freed, and gives the top of
its heap back to the kernel past its trim threshold; the next array of that size is then
faulted in and zeroed again, page by page. On a virtual machine whose memory the host backs
lazily such a page costs several microseconds, several times the array's own work: a
1x1 convolution with a fresh 51 MB output ran 5x slower than into memory already touched.

`tune_for_program` keeps what was freed for reuse: blocks up to 32 MB come from the heap
(M_MMAP_THRESHOLD, glibc's largest), the heap is not trimmed at each free (M_TRIM_THRESHOLD
1 GiB) and the worker threads share the main arena (M_ARENA_MAX 1), so an array one thread
frees is reused by another. The release between calibration and planning
(`executor.memory_limit.release_free_memory`) is then skipped too (`keeps_freed_memory`): the
plan reuses calibration's freed pages instead of faulting fresh ones in, for the same peak.
Quantizing the ResNet-50-shaped bench model: CPU time 2.3-2.6 s -> 2.2-2.35 s, wall 2-4 %
less, peak +8 MB (`bench/bench_quantize.py`); without that release, 0.02-0.04 s less again
and the same peak. Only the program sets them (`cli.run`): a process that imports qconvert as
a library keeps its own allocator settings.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

SETTINGS = ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 1 << 30))
_TUNED = {"done": False}


def _mallopt():
    """glibc's `mallopt`, or None (another C library, or none reachable)."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, OSError, ValueError):  # no confstr, or no such name here
        libc = ""
    if not libc.startswith("glibc"):
        return None
    try:
        fn = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def tune_for_program() -> bool:
    """Apply `SETTINGS` to this process's allocator (module docstring); True when every one
    was taken. Never raises: without glibc nothing changes."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    _TUNED["done"] = all([mallopt(param, value) == 1 for param, value in SETTINGS])
    return _TUNED["done"]


def keeps_freed_memory() -> bool:
    """True once `tune_for_program` has applied every setting: this process keeps what it
    frees for reuse, so handing the heap's free pages back between phases only costs faulting
    them in again."""
    return _TUNED["done"]
