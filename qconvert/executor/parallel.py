"""Elementwise numpy work shared among the CPUs: `on_workers(run, items)` and `spans(size)`.

BLAS already runs matrix products on every core; the rest of the executor's work (depthwise
tap sums, quantize / dequantize, range and error reductions) is numpy loops on one core. numpy
releases the GIL inside its loops, so a few threads each running `run` on their share of the
items use the other cores. Each item must be independent of the others (its own output slice,
its own result slot), so results never depend on how the items were split or scheduled.
"""

from __future__ import annotations

import os
from typing import Callable

SPAN = 1 << 16  # elements per span of a blocked elementwise loop: a few L2-sized arrays
_POOL: list = []  # the thread pool, made on first use


def workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def spans(size: int, span: int = SPAN) -> list:
    """[(start, stop)] covering range(size) in pieces of `span` elements."""
    return [(i, min(i + span, size)) for i in range(0, size, span)]


def on_workers(run: Callable, items) -> None:
    """Call run(part) on interleaved parts of `items`, one part per CPU (the calling thread
    takes the first). With one CPU or one item, run(items) here. A worker's exception is
    raised here."""
    items = list(items)
    count = min(workers(), len(items))
    if count < 2:
        run(items)
        return
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(max_workers=workers() - 1,
                                        thread_name_prefix="qconvert"))
    futures = [_POOL[0].submit(run, items[i::count]) for i in range(1, count)]
    try:
        run(items[0::count])
    finally:  # never return while a worker still writes into the caller's arrays
        for f in futures:
            f.result()
