"""Elementwise numpy work shared among the CPUs (`on_workers`, `spans`), per-thread work
arrays reused across calls (`scratch`), and one-thread BLAS while the executor's own threads
share independent matrix products (`one_blas_thread`).

BLAS already runs matrix products on every core; the rest of the executor's work (depthwise
tap sums, quantize / dequantize, range and error reductions) is numpy loops on one core. numpy
releases the GIL inside its loops, so a few threads each running `run` on their share of the
items use the other cores. Each item must be independent of the others (its own output slice,
its own result slot), so results never depend on how the items were split or scheduled.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Callable

import numpy as np

SPAN = 1 << 16  # elements per span of a blocked elementwise loop: a few L2-sized arrays
_POOL: list = []  # the thread pool, made on first use
_LOCAL = threading.local()  # per-thread work arrays (`scratch`)


def workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def scratch(key: str, shape, dtype) -> np.ndarray:
    """A work array of `shape` for the calling thread, kept between calls under `key` and grown
    as needed (its contents are whatever the last user left): kernels that need the same large
    temporary for every sample and every call skip allocating, and faulting in, fresh memory.
    Valid until the same thread asks for `key` again."""
    store = _LOCAL.__dict__
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    buf = store.get(key)
    if buf is None or buf.size < size:
        buf = np.empty(max(size, 64), np.uint8)
        store[key] = buf
    return buf[:size].view(dtype).reshape(shape)


def spans(size: int, span: int = SPAN) -> list:
    """[(start, stop)] covering range(size) in pieces of `span` elements."""
    return [(i, min(i + span, size)) for i in range(0, size, span)]


SHARED_ELEMENTWISE = 1 << 18  # elements below which an elementwise op runs on one thread


def elementwise(fn: Callable, out: np.ndarray, *operands: np.ndarray) -> np.ndarray:
    """fn(*operands, out=out) for an elementwise `fn` (a ufunc, or a chain of them reading each
    operand once per element), span by span on every CPU when the arrays are large and all
    C-contiguous of `out`'s shape (`out` may be one of the operands: in place); else in one
    call. The same values either way: each element is computed on its own."""
    if out.size < SHARED_ELEMENTWISE or not out.flags.c_contiguous or any(
            a.shape != out.shape or not a.flags.c_contiguous for a in operands):
        return fn(*operands, out=out)
    flat = [a.reshape(-1) for a in operands]
    dst = out.reshape(-1)

    def run(parts):
        for i, j in parts:
            fn(*(a[i:j] for a in flat), out=dst[i:j])

    on_workers(run, spans(dst.size))
    return out


SHARED_PRODUCT = 1 << 22  # multiply-adds below which a matrix product runs on one thread
PRODUCT_ROW_ALIGN = 16  # a product's rows are split at multiples of this


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for a 2-D `a` and `b`: a large product has the rows of `a` split in two blocks (at
    a multiple of PRODUCT_ROW_ALIGN) multiplied on two CPUs (`on_workers`), BLAS on one thread
    each (`one_blas_thread`); a small one is one BLAS call. The split depends on the shapes
    only, so the result does not depend on the number of CPUs."""
    rows = a.shape[0]
    half = -(-rows // (2 * PRODUCT_ROW_ALIGN)) * PRODUCT_ROW_ALIGN
    if (a.ndim != 2 or b.ndim != 2 or half >= rows
            or rows * a.shape[1] * b.shape[1] < SHARED_PRODUCT):
        with one_blas_thread():
            return a @ b
    out = np.empty((rows, b.shape[1]), np.result_type(a, b))

    def run(blocks):
        for block in blocks:
            np.matmul(a[block], b, out=out[block])

    with one_blas_thread():
        on_workers(run, [slice(0, half), slice(half, rows)])
    return out


def _mark_worker() -> None:
    _LOCAL.worker = True


def on_workers(run: Callable, items) -> None:
    """Call run(shared) in the calling thread and in one worker thread per other CPU, all
    iterating over one shared iterator of `items`: each item is taken by whichever thread is
    free first (a core busy with something else, such as a BLAS thread still spinning after a
    matrix product, simply takes fewer). With one CPU or one item, run(items) here. A worker's
    exception is raised here. The workers run under the caller's `np.errstate`."""
    items = list(items)
    count = min(workers(), len(items))
    if count < 2 or getattr(_LOCAL, "worker", False):  # never wait on the pool from inside it
        run(items)
        return
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(max_workers=workers() - 1,
                                        thread_name_prefix="qconvert",
                                        initializer=_mark_worker))
    shared = iter(items)  # next() on a list iterator is atomic under the GIL
    errors = np.geterr()  # the caller's floating-point error handling, for the workers too

    def work(shared):
        with np.errstate(**errors):
            run(shared)

    futures = [_POOL[0].submit(work, shared) for _ in range(1, count)]
    try:
        run(shared)
    finally:  # never return while a worker still writes into the caller's arrays
        for f in futures:
            f.result()


# -- BLAS threads ---------------------------------------------------------------------------------
_BLAS: list = []  # [(get_num_threads, set_num_threads) or None], looked up on first use
_BLAS_LOCK = threading.Lock()
_BLAS_STATE = {"depth": 0, "saved": 1}


def _openblas():
    """(get, set) of the thread count of the OpenBLAS numpy calls (numpy's wheels bundle one,
    `scipy_openblas`), found among this process's loaded libraries; None for another BLAS."""
    if not _BLAS:
        found = None
        try:
            import ctypes
            import re

            with open("/proc/self/maps") as f:
                paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read())))
            for path in paths:
                lib = ctypes.CDLL(path)
                for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""),
                                       ("openblas", "64_"), ("openblas", "")):
                    get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                    put = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                    if get is not None and put is not None:
                        get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                        found = (get, put)
                        break
                if found:
                    break
        except (OSError, AttributeError, ValueError):
            found = None
        _BLAS.append(found)
    return _BLAS[0]


@contextmanager
def one_blas_thread():
    """Within: BLAS runs every matrix product on the calling thread only (OpenBLAS; a no-op
    with another BLAS), so that `on_workers` threads each running their own products use the
    cores instead of BLAS's threads. Those spin at every product's end, waiting for each other,
    and on a busy machine (more runnable threads than cores) that waiting dominates: a
    ResNet-50 calibration ran 2.7x faster with one BLAS thread at a load of 15 on 2 cores.
    Nested and concurrent uses share one setting; the previous count is restored at the end."""
    blas = _openblas()
    if blas is None:
        yield
        return
    get, put = blas
    with _BLAS_LOCK:
        if _BLAS_STATE["depth"] == 0:
            _BLAS_STATE["saved"] = get()
            put(1)
        _BLAS_STATE["depth"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_STATE["depth"] -= 1
            if _BLAS_STATE["depth"] == 0:
                put(_BLAS_STATE["saved"])
