"""The overlap CMSIS-NN's Helium (MVE) 1x1 and depthwise kernels allow in one whole-layer call,
so `--kernels cmsis-nn` needs no per-row bands on Cortex-M55 where these kernels run.

    candidate = helium_tiles(x, y, kernel_hw, params, depthwise, kernel_channels)  # or None

On Helium builds (CMSIS-NN 7, also TensorFlow Lite Micro's pin):

- a 1x1 convolution, stride 1, no padding, no groups goes to arm_convolve_1x1_s8_fast, one
  arm_nn_mat_mult_nt_t_s8 over all n * h * w pixels: four pixels at a time, each output channel
  of the four written right after it is summed (reading the four pixels again for the next
  channel), then the last n * h * w % 4 pixels one at a time in the same way;
- a depthwise convolution with depth multiplier 1, batch 1, no dilation, at most 124 channels
  (CH_IN_BLOCK_MVE: one block of channels) and not one input channel into many (which goes to
  arm_depthwise_conv_to_conv_s8) goes to arm_depthwise_conv_s8_opt: the windows of four output
  pixels copied into its scratch, then their outputs written; the last pixels (fewer than four)
  are copied during the walk and written at its end.

Either way block b of output pixels reads its input pixels and writes its outputs (in any
order within the block) before block b + 1 reads anything: `memory_plan`'s ("tiles", slot,
ends, reads) with one band per block, ends[b] = the end of block b's outputs and reads[b] =
the lowest input byte block b reads; the depthwise kernel reads all of a block before it writes
any of it, so its band b is "write block b - 1, read block b" (as `steps_fast.conv_bands`). The candidate holds for the Helium build only: the
callers (`cmsis_fast.on_dsp_builds`, `fast_steps.keep_on_dsp`) merge it with the qconvert
kernel the other builds call, never with CMSIS-NN's DSP or scalar code (whose orders differ).
"""

from __future__ import annotations

import numpy as np

from .index_maps import NEVER, conv_minread

_CH_IN_BLOCK_MVE = 124
_DW_TO_CONV_ABOVE = 8  # CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD


def _blocks(per_pixel_reads, channels_out: int, size: int):
    """("tiles", 0, ends, reads) of blocks of `size` pixels in memory order."""
    reads = np.asarray(per_pixel_reads, np.int64)
    pixels = reads.size
    count = -(-pixels // size)
    padded = np.full(count * size, NEVER, np.int64)
    padded[:pixels] = reads
    ends = np.minimum(np.arange(1, count + 1) * size, pixels) * channels_out
    return ("tiles", 0, ends.astype(np.int64), padded.reshape(count, size).min(axis=1))


def helium_tiles(x, y, kernel_hw, p, depthwise: bool, kernel_channels: int):
    """The whole-layer overlap candidate of CMSIS-NN's Helium call for this layer (see the
    module docstring), or None when the wrapper would take another path."""
    n, h, w, c = (int(d) for d in x)
    _, oh, ow, oc = (int(d) for d in y)
    kh, kw = (int(k) for k in kernel_hw)
    unit = tuple(p["strides"]) == (1, 1) and tuple(p.get("dilations", (1, 1))) == (1, 1)
    if not depthwise:
        if (kh, kw) != (1, 1) or not unit or any(p["pads"]) or kernel_channels != c:
            return None
        pixels = n * h * w
        full = pixels // 4 * 4
        head = _blocks(np.arange(full, dtype=np.int64) * c, oc, 4)
        tail = _blocks(np.arange(full, pixels, dtype=np.int64) * c, oc, 1)
        return ("tiles", 0, np.concatenate([head[2], tail[2] + full * oc]),
                np.concatenate([head[3], tail[3]]))
    one_to_many = c == 1 and oc > _DW_TO_CONV_ABOVE
    if (oc != c or n != 1 or tuple(p.get("dilations", (1, 1))) != (1, 1)
            or c > _CH_IN_BLOCK_MVE or one_to_many):
        return None
    minread = conv_minread(x, y, kernel_hw, p["strides"], (1, 1), p["pads"],
                           lambda ch: np.zeros_like(ch))
    _, _, ends, reads = _blocks(minread.reshape(oh * ow, oc).min(axis=1), oc, 4)
    # every read of a block comes before its writes: band b = write block b - 1, read block b
    return ("tiles", 0, np.concatenate([[0], ends]).astype(np.int64),
            np.concatenate([reads, [NEVER]]).astype(np.int64))


def merged(helium, other):
    """One ("tiles", ...) candidate safe for both `helium` (a candidate of this module) and
    `other` (the other builds' kernel: "tiles", or "reads" converted to one band per output
    element), or None: both band lists in order of their ends (each band keeps its own
    constraint and gains only later bands' reads, as `cmsis_fast.merged_bands`)."""
    if helium is None or other is None:
        return None
    if other[0] == "reads":
        minread = np.asarray(other[2], np.int64)
        ends_o = np.arange(1, minread.size + 1, dtype=np.int64)
        reads_o = np.append(minread[1:], NEVER)   # element i written, then i + 1 read
    elif other[0] == "tiles" and other[1] == helium[1]:
        ends_o, reads_o = np.asarray(other[2], np.int64), np.asarray(other[3], np.int64)
    else:
        return None
    ends = np.concatenate([np.asarray(helium[2], np.int64), ends_o])
    reads = np.concatenate([np.asarray(helium[3], np.int64), reads_o])
    order = np.argsort(ends, kind="stable")
    return ("tiles", helium[1], ends[order], reads[order])
