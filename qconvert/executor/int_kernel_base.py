"""The registry of the integer executor's kernels and what every int8 kernel shares.

`INT_KERNELS[op](node, inputs, params, ctx) -> list of arrays` runs one Eval of IR op `op`:
`inputs` holds one array per input slot (`None` for an omitted optional input), `params` are the
node's `qconvert.int8.prepare.layer_params`, and `ctx` is the run's `IntContext`. The kernel
modules (`int_kernels_*`) register themselves with `@kernel(op, ...)`; `int_kernels` loads them
all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from qconvert.int8.prepare.common import fail

INT_KERNELS: dict[str, Callable] = {}


@dataclass
class IntContext:
    """Per-run settings handed to every kernel: `rounding` is "double" (TFLite Micro) or
    "single" (CMSIS-NN's single-rounding requantization), `batch` the number of samples carried
    on axis 0 (see `int_executor` for the batch rule)."""

    rounding: str = "double"
    batch: int = 1


def kernel(*ops: str):
    """Register the decorated function as the int8 kernel of each IR op in `ops`."""
    def wrap(fn):
        for op in ops:
            INT_KERNELS[op] = fn
        return fn

    return wrap


def batch_guard(node, ctx, ok: bool, what: str):
    """Refuse (naming the node) an op that would mix the samples of a batch of N > 1."""
    if ctx.batch > 1 and not ok:
        fail(node, f"{what}: cannot run a batch of {ctx.batch} samples on axis 0 "
                   "(run the samples one at a time)")

