"""A data movement's gather table as runs of consecutive input: `qconvert_gather_runs`.

`index_maps.boxes_of` gives a movement that is no set of strided box copies (a Gather of whole
rows in any order, a repeated row) as one input index per output element: 4 bytes of flash per
element. Where consecutive output elements copy consecutive input elements the table is cut
into runs, each kept as (input byte offset, byte count): 8 bytes per run. The runs are used
only when they take less flash than the per-element table (at least two elements per run on
average); otherwise the element gather (`qconvert_gather_s8` / `_s16`) stays. Both write the
output in memory order, each element after reading its input, so the step offers the memory
plan the same overlap (`movement_overlap`).
"""

from __future__ import annotations

import numpy as np

RUNS_FILES = frozenset({"qconvert_nn_runs.h", "qconvert_nn_runs.c"})


def table_runs(table: np.ndarray, size: int) -> np.ndarray:
    """[[input byte offset, byte count], ...] of the flat input indices `table` (elements of
    `size` bytes): each maximal stretch of consecutive indices is one run."""
    idx = np.asarray(table, dtype=np.int64).reshape(-1)
    breaks = np.nonzero(np.diff(idx) != 1)[0] + 1
    starts = np.concatenate([[0], breaks])
    lengths = np.diff(np.concatenate([starts, [idx.size]]))
    return np.stack([idx[starts] * size, lengths * size], axis=1)


def gather_call(k: int, table, act, src: str, arrays: list) -> tuple:
    """(C call, kernel files) of output `k`'s gather from `src` through `table`: runs when
    they are the smaller, else the element gather; appends the step's const array."""
    runs = table_runs(table, act.bits // 8)
    if 2 * len(runs) < len(table):
        arrays.append((f"runs{k}", "int32_t", runs.reshape(-1)))
        return f"qconvert_gather_runs({src}, $out{k}, {len(runs)}, @L_runs{k});", RUNS_FILES
    arrays.append((f"index{k}", "int32_t", table))
    return (f"qconvert_gather_{act.suffix}({src}, $out{k}, {len(table)}, @L_index{k});",
            frozenset())
