"""The 1x4 interleaved fully-connected weight order (design.md; CMSIS-NN paper, Fig. 6).

A kernel that computes four outputs per pass (CMSIS-NN's legacy `arm_fully_connected_q7_opt`,
qconvert's own `qconvert_fc_1x4_s8`) reads the row-major `[R][C]` weight matrix through one
pointer walking this order. With `R4 = R - R % 4` and `C4 = C - C % 4`, for each block of four
rows `rb < R4`:

- for each block of four columns `cb < C4`, 16 values: for the column pairs (cb, cb+2) then
  (cb+1, cb+3), for the row pairs (rb, rb+1) then (rb+2, rb+3):
  `W[ra][ca], W[rb2][ca], W[ra][cb2], W[rb2][cb2]`;
- then each leftover column `c >= C4`: `W[rb][c], W[rb+1][c], W[rb+2][c], W[rb+3][c]`;

and finally the leftover rows `R4..R-1` unchanged, row-major. The order is a permutation of the
matrix, the identity when R < 4 or C == 1. `arm_fully_connected_s8` reads plain row-major
weights: never give it this order.

Everything is index arithmetic on numpy arrays: `permutation_1x4(R, C)` is the flat source
index of every emitted value, so `W.reshape(-1)[perm]` is the packed matrix.
"""

from __future__ import annotations

import numpy as np

FC_LAYOUTS = ("1x4", "rowmajor")

# Within one 4x4 block, the k-th emitted value comes from row rb + _DR[k], column cb + _DC[k]:
# k = 8 * p + 4 * q + j with column pair p, row pair q, j over (ra, ca) (rb2, ca) (ra, cb2)
# (rb2, cb2).
_K = np.arange(16)
_DR = 2 * ((_K // 4) % 2) + (_K % 2)
_DC = _K // 8 + 2 * ((_K % 4) // 2)


def permutation_1x4(rows: int, cols: int) -> np.ndarray:
    """Flat row-major source index (int64) of each value of the 1x4 order of a [rows][cols]
    matrix: `packed = weights.reshape(-1)[permutation_1x4(rows, cols)]`."""
    rows, cols = int(rows), int(cols)
    if rows < 0 or cols < 0:
        raise ValueError(f"matrix shape ({rows}, {cols})")
    r4, c4 = rows - rows % 4, cols - cols % 4
    rb = np.arange(0, r4, 4, dtype=np.int64)
    cb = np.arange(0, c4, 4, dtype=np.int64)
    # (row block, column block, k): 16 values per 4x4 block
    blocks = ((rb[:, None, None] + _DR) * cols + cb[None, :, None] + _DC).reshape(len(rb), 16 * len(cb))
    # (row block, leftover column, row within the block)
    left_cols = ((rb[:, None, None] + np.arange(4)) * cols
                 + np.arange(c4, cols)[None, :, None]).reshape(len(rb), 4 * (cols - c4))
    head = np.concatenate([blocks, left_cols], axis=1).reshape(-1)
    return np.concatenate([head, np.arange(r4 * cols, rows * cols, dtype=np.int64)])


def to_1x4(weights: np.ndarray) -> np.ndarray:
    """The [R][C] matrix `weights` in the 1x4 order (a flat array of its R * C values)."""
    weights = np.asarray(weights)
    if weights.ndim != 2:
        raise ValueError(f"fully connected weights must be 2-D, got shape {weights.shape}")
    return weights.reshape(-1)[permutation_1x4(*weights.shape)]


def from_1x4(packed: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Inverse of `to_1x4`: the [rows][cols] row-major matrix of a packed array."""
    packed = np.asarray(packed).reshape(-1)
    if packed.size != rows * cols:
        raise ValueError(f"{packed.size} values for a ({rows}, {cols}) matrix")
    out = np.empty_like(packed)
    out[permutation_1x4(rows, cols)] = packed
    return out.reshape(rows, cols)


def fc_weights_in_layout(weights: np.ndarray, layout: str) -> np.ndarray:
    """Flat weights of a fully connected layer in `layout` ("1x4" or "rowmajor")."""
    if layout not in FC_LAYOUTS:
        raise ValueError(f"unknown fully connected layout {layout!r}; one of {FC_LAYOUTS}")
    weights = np.asarray(weights)
    return to_1x4(weights) if layout == "1x4" else weights.reshape(-1)
