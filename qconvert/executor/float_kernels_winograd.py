"""Winograd F(2x2, 3x3): the float 3x3 convolutions (stride 1, no dilation, NCHW, one group)
with 16 multiplies per 2x2 output tile instead of 36 (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks", CVPR 2016). `float_kernels_conv.conv2d` uses it where it
measures faster than its im2col product (`python bench/bench_winograd.py`): wide layers (both
channel counts at least MIN_CHANNELS) over enough output tiles (MIN_TILES; the filters'
transform is paid once per call), 0.65-0.87x of the im2col time on ResNet-50's stride-1 3x3
layers at a batch of 16.

Every 4x4 input tile d (tiles overlap by 2) becomes V = B^T d B, every 3x3 filter g becomes
U = G g G^T, the input channels are summed by 16 matrix products M[k] = U[k] @ V[k] (one per
element k of the 4x4 transformed tile, BLAS), and every 2x2 output tile is A^T M A. The three
transforms are matrix products too, with the Kronecker products of the small matrices
(`_INPUT` [16, 16] on all the tiles at once, `_FILTER` [16, 9], `_OUTPUT` [4, 16]).

Exact in real arithmetic; in float32 the result differs from the direct sum by rounding of the
same size (the transforms' coefficients are 0, +-1 and +-1/2): about 1e-6 of the output's
magnitude, as the im2col product's own differs from onnxruntime's. The split among the CPUs
depends on the shapes only (`float_kernels_conv._sample_groups` / `_row_blocks`), so the
result does not depend on the number of CPUs.
"""

from __future__ import annotations

import numpy as np

from .float_kernels_base import clamp
from .parallel import on_workers, one_blas_thread, scratch

_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)
_INPUT = np.kron(_BT, _BT)    # [16, 16]: tile element (i, j) -> transformed element (a, b)
_FILTER = np.kron(_G, _G)     # [16, 9]: filter tap (i, j) -> transformed element (a, b)
_OUTPUT = np.kron(_AT, _AT)   # [4, 16]: transformed element -> output (r, c) of the tile

MIN_CHANNELS = 64  # narrower layers: the transforms cost more than the multiplies they save
MIN_TILES = 96  # output tiles of the batch below which transforming the filters costs more


def winograd_applies(x: np.ndarray, w: np.ndarray, kernel, strides, dilations, out) -> bool:
    """True for a float32 2-D 3x3 convolution, stride 1, no dilation, whose input and output
    both have at least MIN_CHANNELS channels and whose batch makes at least MIN_TILES 2x2
    output tiles (`out`: the output size; the caller checks NCHW and one group)."""
    return (x.ndim == 4 and x.dtype == np.float32 and w.dtype == np.float32
            and list(kernel) == [3, 3] and list(strides) == [1, 1]
            and list(dilations) == [1, 1] and min(x.shape[1], w.shape[0]) >= MIN_CHANNELS
            and x.shape[0] * -(-out[0] // 2) * -(-out[1] // 2) >= MIN_TILES)


def winograd_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, pads, out,
                  groups: list, blocks: list, bounds: tuple | None = None) -> np.ndarray:
    """The convolution of NCHW `x` with OIHW 3x3 weights `w` (`winograd_applies`), explicit
    `pads` [top, left, bottom, right], output size `out` (ho, wo), `bias` [O, 1, 1] or None:
    [N, O, ho, wo] float32. `groups`: the (start, stop) groups of samples transformed and
    multiplied together, shared among the CPUs (one group of several samples is halved); a
    single sample has its products split by the output-channel `blocks` instead. `bounds`:
    (lower, upper) of a clamp applied to each piece of the output while it is in cache."""
    n, channels, height, width = x.shape
    cout = w.shape[0]
    ho, wo = out
    th, tw = -(-ho // 2), -(-wo // 2)  # tiles per column and per row
    tiles = th * tw
    top, left = pads[0], pads[1]
    size = (2 * th + 2, 2 * tw + 2)  # the padded input every tile reads (zeros past it)
    y = np.empty((n, cout, ho, wo), np.float32)

    def transformed_input(start: int, stop: int) -> np.ndarray:
        """V [16, C, m * tiles] of samples start..stop (a work array of this thread)."""
        m = stop - start
        padded = scratch("winograd padded", (m, channels, *size), np.float32)
        padded[:, :, :top] = 0
        padded[:, :, top + height:] = 0
        padded[:, :, :, :left] = 0
        padded[:, :, :, left + width:] = 0
        padded[:, :, top:top + height, left:left + width] = x[start:stop]
        pieces = scratch("winograd tiles", (16, channels, m, th, tw), np.float32)
        for i in range(4):
            for j in range(4):
                np.copyto(pieces[4 * i + j],
                          padded[:, :, i:i + 2 * th:2, j:j + 2 * tw:2].transpose(1, 0, 2, 3))
        v = scratch("winograd input", (16, channels * m * tiles), np.float32)
        np.matmul(_INPUT, pieces.reshape(16, -1), out=v)
        return v.reshape(16, channels, m * tiles)

    def finish(start: int, stop: int, v: np.ndarray, rows: slice, own: bool = True) -> None:
        """y[start:stop, rows] from the transformed input `v` of those samples. `own`: `v` is
        this thread's (`transformed_input`), so its work arrays take the products and the
        output transform (the tiles are dead, and `v` once multiplied): two work arrays per
        thread, not four; a `v` other threads read keeps its own."""
        m = stop - start
        count = len(range(cout)[rows])
        products = scratch("winograd tiles" if own else "winograd products",
                           (16, count, m * tiles), np.float32)
        np.matmul(filters[:, rows], v, out=products)
        back = scratch("winograd input" if own else "winograd output",
                       (4, count * m * tiles), np.float32)
        np.matmul(_OUTPUT, products.reshape(16, -1), out=back)
        back = back.reshape(2, 2, count, m, th, tw)
        dst = y[start:stop, rows]
        for r in range(2):
            for c in range(2):
                dst[:, :, r::2, c::2] = back[r, c, :, :, :(ho - r + 1) // 2,
                                             :(wo - c + 1) // 2].transpose(1, 0, 2, 3)
        if bias is not None:
            dst += bias[rows]
        if bounds is not None:
            clamp(dst, *bounds, out=dst)

    if len(groups) == 1 and n > 1:  # two groups, one per CPU: the transforms are shared too
        groups = [(0, n // 2), (n // 2, n)]
    with one_blas_thread():  # every product here on one BLAS thread (`one_blas_thread`)
        filters = (_FILTER @ w.reshape(cout * channels, 9).T).reshape(16, cout, channels)
        if len(groups) > 1:
            on_workers(lambda items: [finish(a, b, transformed_input(a, b), slice(None))
                                      for a, b in items], groups)
        elif len(blocks) == 1:
            finish(0, n, transformed_input(0, n), slice(None))
        else:  # one group: transformed once here, its products split by output channels
            v = transformed_input(0, n)
            on_workers(lambda items: [finish(0, n, v, rows, own=False) for rows in items],
                       blocks)
    return y
