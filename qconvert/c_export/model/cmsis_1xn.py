"""Whether CMSIS-NN's Helium (MVE) 1 x N convolution (arm_convolve_1_x_n_s8) computes a layer
exactly, so `export-c --kernels cmsis-nn` knows when it must not let the wrapper take it.

arm_convolve_wrapper_s8 sends a convolution whose input is one row high, with a 1-row kernel,
no horizontal dilation and stride_w * channels a multiple of 4, to arm_convolve_1_x_n_s8. Its
MVE code (CMSIS-NN 7, also the one TensorFlow Lite Micro pins) splits the output row in three:
the left-padded outputs, read from a scratch row of `pad_w` padding values then kernel_w
input columns; the unpadded ones, read from the input; the right-padded ones, read from a
scratch row of kernel_w - 1 input columns then the padding. That last row is right only when
exactly kernel_w - 1 input columns are left from the first right-padded window's start: with a
wider padding (e.g. kernel 5, stride 2, padding 2 on 49 columns: 3 columns left) it reads input
columns past the row's end, whatever the memory holds there, instead of the zero point; with
VALID padding and a column left over it pads where that column is; and it returns
ARM_CMSIS_NN_FAILURE when the padding it infers from the output width,
(out - 1) * stride + kernel - width, is not 2 * pad_w (+ 1) (e.g. a PAD of 1 and 1 folded
into a stride-2 convolution on 10 columns). TFLite Micro calls the same wrapper with the same
dims, so its CMSIS-NN build on Cortex-M55 is off there too (by other garbage).

`one_by_n_exact` replays the kernel's index arithmetic for one output row (C's truncating
division and remainder) and compares every tap it reads with the window TFLite's reference
kernel reads; the scalar and DSP builds run arm_convolve_s8 for the same call, always exact.
"""

from __future__ import annotations

import numpy as np


def _cdiv(a: int, b: int) -> int:
    """C's truncating integer division."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def takes_one_by_n(in_h, kh, kw, stride_w, dilations, channels, pads) -> bool:
    """True when arm_convolve_wrapper_s8 calls arm_convolve_1_x_n_s8 for a convolution of this
    geometry (`dilations` (h, w), `pads` (top, left)); its 1x1 test comes first."""
    one_by_one = kh == 1 and kw == 1 and tuple(pads) == (0, 0) and tuple(dilations) == (1, 1)
    return (not one_by_one and in_h == 1 and kh == 1 and dilations[1] == 1
            and (stride_w * channels) % 4 == 0)


def _section_ok(rows, base, stride, kernel, width, pad_from, pad_to, length) -> bool:
    """Every tap of `rows` (row q reads buffer[q * stride + j], j < kernel) is what the
    reference reads: buffer element i stands for input column base + i below `pad_from`, the
    padding value from `pad_from` to `pad_to`, nothing defined from `length` on."""
    if rows <= 0:
        return True
    idx = (np.arange(rows)[:, None] * stride + np.arange(kernel)[None, :])
    column = base + idx
    outside = (column < 0) | (column >= width)
    padding = (idx >= pad_from) & (idx < pad_to)
    return bool(np.all((idx < length) & np.where(padding, outside, ~outside)))


def one_by_n_exact(width, kernel, out_width, pad, stride) -> bool:
    """True when arm_convolve_1_x_n_s8's MVE code gives TFLite's result on a row of `width`
    columns, `kernel` taps, `out_width` outputs, left padding `pad`, `stride`."""
    total = (out_width - 1) * stride + kernel - width
    asym = int(np.fmod(total, 2))
    if pad * 2 + asym != total:
        return False  # the kernel returns ARM_CMSIS_NN_FAILURE
    right = max(1, _cdiv(pad + asym + stride - 1, stride)) if pad + asym != 0 else 0
    left = max(1, _cdiv(pad + stride - 1, stride)) if pad != 0 else 0
    middle = max(out_width - right - left, 0)
    if right + middle + left != out_width:
        return True  # the kernel calls arm_convolve_s8 itself
    right_pad = right if asym else pad
    start = stride * (left + middle) - pad
    big = 1 << 30
    return (_section_ok(left, -pad, stride, kernel, width, 0, pad, pad + kernel)
            and _section_ok(middle, stride * left - pad, stride, kernel, width, big, big, big)
            and _section_ok(right, start, stride, kernel, width, kernel - 1,
                            kernel - 1 + right_pad, kernel - 1 + right_pad))
