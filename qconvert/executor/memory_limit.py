"""The memory limit of reference-executor runs: what a run needs, estimated from shapes before
anything is allocated, refused beyond `--max-memory`.

Calibration and static-batch's shape inference run the float reference executor (calibration
over batches); a layer whose static shapes make a huge tensor (a MatMul whose constant turns a
column into a 13 GiB outer product, an input with a dimension of 2^40) would otherwise be
allocated, swap the machine or crash. `check_plan_memory`
refuses such a plan up front, naming the layer, when the working set of any one layer (its inputs
and outputs, float32, for one batch) exceeds the limit (`--max-memory`, default: half the
physical memory, at most 8 GiB). `check_input_memory` does the same for the calibration
samples themselves.
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..errors import QConvertError

_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """'512M', '4G', '4GiB', '1000000' -> bytes (at most `MAX_SIZE`); QConvertError for
    anything else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise QConvertError(f"--max-memory {text!r} is not a size (e.g. 512M, 4G)")
    from fractions import Fraction

    value = int(Fraction(m.group(1)) * _UNITS[m.group(2).upper()])  # exact, any length
    if value <= 0:
        raise QConvertError(f"--max-memory {text!r} must be positive")
    if value > MAX_SIZE:
        raise QConvertError(f"--max-memory {text!r} is beyond any machine (at most 1024T)")
    return value


MAX_SIZE = 2**50  # 1 PiB: --max-memory above it is a typo, and beyond int64 arithmetic a crash


DEFAULT_CAP = 8 * 2**30


def default_limit() -> int:
    """Half the machine's physical memory, at most 8 GiB (models for microcontrollers need a
    tiny fraction of it; a plan beyond it is almost surely a malformed model)."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 2 * DEFAULT_CAP
    return min(DEFAULT_CAP, physical // 2)


def format_size(n: int) -> str:
    """Bytes as a short human figure: 13.4 GiB, 512 MiB."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _elements(shape, batch: int) -> int | None:
    """Element count of `shape` for `batch` samples (dynamic dims count 1; the batched executor
    stacks samples along the first axis, whether it is dynamic or a fixed batch of 1); None when
    the rank is unknown."""
    if shape is None:
        return None
    n = batch
    for d in shape:
        if isinstance(d, (int, np.integer)):
            n *= max(int(d), 0)
    return n


def tensor_bytes(tensor, batch: int = 1) -> int:
    """Bytes of a tensor's value in the float executor for `batch` samples (float32 or wider
    activations, constants as stored)."""
    if tensor.data is not None:
        return int(tensor.data.nbytes)
    n = _elements(tensor.shape, batch)
    if n is None:
        return 0
    from qconvert.ir.tensor import RAW_DTYPES

    itemsize = np.dtype(tensor.dtype).itemsize if tensor.dtype not in RAW_DTYPES else 8
    return n * max(itemsize, 4)


def check_plan_memory(graph, batch: int, limit: int) -> None:
    """Refuse (naming the layer) a graph one of whose layers needs more than `limit` bytes for a
    batch of `batch` samples: the sum of its non-constant inputs and its outputs."""
    for node in graph.nodes:
        need = 0
        for name in list(node.inputs) + list(node.outputs):
            t = graph.tensors.get(name) if name else None
            if t is not None and t.data is None:
                need += tensor_bytes(t, batch)
        if need > limit:
            label = node.name or node.op
            shape = next((graph.tensors[o].shape for o in node.outputs
                          if o in graph.tensors), None)
            raise QConvertError(
                f"layer {label!r} ({node.op}, output {_shape_text(shape)}) needs about "
                f"{format_size(need)} for a batch of {batch}, more than the memory limit of "
                f"{format_size(limit)} (--max-memory"
                + ("; a smaller --batch-size may help)" if batch > 1 else ")"))


def check_input_memory(specs, samples: int, limit: int) -> None:
    """Refuse calibration input of `samples` samples whose float32 copy would exceed `limit`."""
    total = 0
    for spec in specs:
        n = _elements(spec.sample_shape, samples)
        total += (n or 0) * 4
        if total > limit:
            raise QConvertError(
                f"{samples} samples of input {spec.name!r} {_shape_text(spec.shape)} need "
                f"{format_size(total)}, more than the memory limit of {format_size(limit)} "
                "(--max-memory)")


def _shape_text(shape) -> str:
    if shape is None:
        return "[?]"
    return "[" + ", ".join(str(d) if isinstance(d, (int, np.integer)) else "?" for d in shape) + "]"


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc `malloc_trim`; a no-op elsewhere),
    unless this process keeps freed memory for reuse (the `qconvert` program:
    `allocator.keeps_freed_memory`), where the next phase reuses those pages instead.

    Calibration frees activations of tens of MB in several threads; glibc keeps freed chunks
    below its (self-raising) mmap threshold in its arenas, so without this the process would
    stay at its calibration high-water mark through planning and writing, and the next
    phase's arrays would add to it instead of reusing the pages."""
    from qconvert.allocator import keeps_freed_memory

    if keeps_freed_memory():
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
