"""The fast int8 Conv2D and FullyConnected steps of `export-c --kernels portable`.

    weights = conv_weights(w)                  # the order qconvert_conv_fast_s8 reads
    sums = fc_sums(w, bias, input_offset, weights_offset)   # qconvert_fc_fast_s8's start values

`kernels/qconvert_nn_convfc.c` (the CMSIS-NN paper's techniques in C99 with the ACLE intrinsics,
plain C elsewhere) computes two output pixels x two output channels per pass from int16 im2col
columns, and fully connected layers four rows per pass over the 1x4 weight order. What the code
generator does for it, at export time:

- convolution weights: each output channel's OHWI row padded with zeros to a multiple of four
  values, the rows of each pair of channels interleaved by group of four (one pointer, one
  8-byte load per group), the last row of an odd count after them;
- grouped convolutions (not depthwise): each group an ordinary convolution over its slice of
  the input channels, its weights in the order above, group after group; the kernel builds the
  columns of every group for a pair of pixels before it writes any of their outputs, so the
  overlap below holds unchanged;
- scratch of the convolution: the two int16 columns (per group) and their accumulators
  (`QCONVERT_CONV_FAST_SCRATCH`), reserved in the memory plan for the step only;
- fully connected: the input offset folded into the bias (`fc_sums`), so the kernel needs no
  scratch (the input is expanded to int16 inside the loop);
- `small`: whether every accumulator provably stays below 2^30 and no shift is a left shift, so
  the requantization can take its short exact form (`small_accumulators`);
- the overlap the kernel allows: it builds the columns of pixels 2j and 2j + 1 of an image
  before it writes their outputs, pair after pair, in one call (`memory_plan`'s
  ("tiles", 0, ends, reads), see `conv_bands`).

Depthwise convolutions, 16x8 layers and (never seen from TFLite) negative multipliers keep
the generic kernels.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import wrap32

from .index_maps import NEVER, conv_minread

FAST_FILES = frozenset({"qconvert_nn_convfc.c", "qconvert_nn_convfc.h"})


def conv_weights(w: np.ndarray, groups: int = 1) -> np.ndarray:
    """Flat int8 weights in the order qconvert_conv_fast_s8 reads (see the module docstring)
    from OHWI weights `w` of a convolution of `groups` groups: group after group."""
    rows = np.asarray(w, np.int8).reshape(groups, w.shape[0] // groups, -1)
    depth = rows.shape[2]
    padded = np.zeros((groups, rows.shape[1], -(-depth // 4) * 4), np.int8)
    padded[:, :, :depth] = rows
    pairs, quads = padded.shape[1] // 2, padded.shape[2] // 4
    head = padded[:, :2 * pairs].reshape(groups, pairs, 2, quads, 4).transpose(0, 1, 3, 2, 4)
    tail = padded[:, 2 * pairs:]
    flat = np.concatenate([head.reshape(groups, -1), tail.reshape(groups, -1)], axis=1)
    return flat.reshape(-1)


def conv_scratch_bytes(kernel_hw, in_c, out_c, groups: int = 1) -> int:
    """Bytes of each group's two int16 columns and two int32 accumulators per output channel of
    a group (QCONVERT_CONV_FAST_SCRATCH); in_c, out_c: the layer's, all groups."""
    depth = int(kernel_hw[0]) * int(kernel_hw[1]) * (int(in_c) // groups)
    return groups * 4 * (-(-depth // 4) * 4) + 8 * (int(out_c) // groups)


def small_accumulators(weights, bias, input_offset, weights_offset, shifts) -> int:
    """1 when the kernels' short requantization is exact for every input (the `small` argument):
    every shift <= 0 and every accumulator, bias + sum_k (x_k + input_offset) * (w_k +
    weights_offset) over int8 inputs x_k, below 2^30 in magnitude; else 0. `weights`: one row
    per output channel."""
    rows = np.asarray(weights, np.int64).reshape(np.asarray(weights).shape[0], -1)
    x_max = max(abs(-128 + int(input_offset)), abs(127 + int(input_offset)))
    bound = np.abs(rows + int(weights_offset)).sum(axis=1) * x_max
    if bias is not None:
        bound = bound + np.abs(np.asarray(bias, np.int64))
    return int(bool((np.asarray(shifts, np.int64) <= 0).all() and bound.max() < 2**30))


def fc_sums(weights, bias, input_offset, weights_offset):
    """What qconvert_fc_fast_s8 starts each row from: bias[r] + input_offset * sum_k
    (w[r][k] + weights_offset), wrapped to int32 (int64 values), or None when every one is 0.
    Folding the input offset gives the same int32 accumulator mod 2^32, so the same outputs."""
    rows = np.asarray(weights, np.int64).reshape(np.asarray(weights).shape[0], -1)
    total = (rows + int(weights_offset)).sum(axis=1) * int(input_offset)
    if bias is not None:
        total = total + np.asarray(bias, np.int64)
    sums = wrap32(total)
    return None if bias is None and not sums.any() else sums


def conv_bands(in_shape, out_shape, kernel_hw, strides, dilations, pads) -> tuple:
    """(ends, reads) of qconvert_conv_fast_s8 as `memory_plan` bands ("tiles": one call works
    band by band). The kernel handles the
    output pixels in pairs (2j, 2j + 1 of each image): it reads their windows (building the
    columns), then writes their outputs. Band b is "write the outputs of pair b - 1, then read
    the inputs of pair b": it writes the output bytes below ends[b] = the end of pair b - 1 and
    reads input bytes from reads[b] = the lowest byte pair b reads (NEVER: none) on; a last band
    writes the last pair and reads nothing."""
    minread = conv_minread(in_shape, out_shape, kernel_hw, strides, dilations, pads,
                           lambda oc: np.zeros_like(oc))
    n, oh, ow, oc = (int(d) for d in out_shape)
    pixels = oh * ow
    per_pixel = minread.reshape(n, pixels, oc).min(axis=2)
    if pixels % 2:
        per_pixel = np.concatenate([per_pixel, np.full((n, 1), NEVER, np.int64)], axis=1)
    reads = per_pixel.reshape(n, -1, 2).min(axis=2).reshape(-1)
    last = np.minimum(np.arange(2, pixels + 2, 2), pixels)       # pixels done after pair j
    ends = ((np.arange(n)[:, None] * pixels + last[None, :]) * oc).reshape(-1)
    ends = np.concatenate([[0], ends]).astype(np.int64)
    return ends, np.concatenate([reads, [NEVER]]).astype(np.int64)


def nonnegative(multipliers) -> bool:
    """The fast kernels' requantization assumes multipliers >= 0 (TFLite's always are)."""
    return bool((np.asarray(multipliers, np.int64) >= 0).all())
