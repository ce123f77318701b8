"""Integer kernels of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D and
MAX_POOL_2D, bit-exact with TFLite Micro's reference kernels (parameters:
`qconvert.int8.prepare.conv` / `.pooling`).

Accumulators of Conv2D / FullyConnected are computed with float BLAS, which is exact because
every partial sum is an integer the float type holds: float32 when the layer's bound (sum |w|
over a channel times max |x - z_in|, `exact_float`) is below 2**24, as it is for most layers,
else float64 (below 2**53: each term is at most 255 * 255 in magnitude).
Spatial layers read the IR's explicit `pads` [top, left, bottom, right]: taps outside the image
are skipped (conv: the input is padded with x - z_in = 0; pools: excluded from the max and from
the average's count), so pads TFLite cannot express (from ONNX) run as TFLite Micro would after
an explicit PAD.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import requantize_int32
from qconvert.int8.prepare.common import fail

from .int_kernel_base import batch_guard, kernel


FLOAT32_EXACT = 2 ** 24  # every integer of magnitude up to this is a float32


def exact_float(x: np.ndarray, input_offset: int, w: np.ndarray, reduce_axes: tuple):
    """np.float32 when every partial sum of sum_k w[c, k] * (x_k + input_offset), in any order
    (BLAS chooses its own), stays an integer below 2**24 in magnitude, so that float32 BLAS
    computes it exactly (twice the speed and half the memory of float64); else np.float64,
    exact below 2**53 (an int8 layer's sums always are). The bound, per output channel c:
    sum_k |w[c, k]| * max |x + input_offset| (`reduce_axes`: the axes of w summed for one
    channel, the output channels on axis 0)."""
    if x.size == 0 or w.size == 0:
        return np.float64
    x_peak = max(abs(int(x.min()) + int(input_offset)), abs(int(x.max()) + int(input_offset)))
    w_peak = int(np.abs(w).sum(axis=reduce_axes, dtype=np.int64).max())
    return np.float32 if x_peak * w_peak < FLOAT32_EXACT else np.float64


def requantize_acc(acc, p, ctx):
    """acc (exact integers, float64 or int64) -> + bias, requantize, + z_out, clamp, int8."""
    acc = np.asarray(acc)
    if acc.dtype.kind == "f":
        acc = acc.astype(np.int64)
    if p["bias"] is not None:
        acc = acc + p["bias"]
    out = requantize_int32(acc, p["output_multiplier"], p["output_shift"],
                           ctx.rounding) + p["output_offset"]
    return np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)


def _spatial(x, p, kh, kw, value=0):
    """Padded input (with `value`) and output size of a strided, dilated window."""
    _, h, w, _ = x.shape
    (sh, sw), (dh, dw) = p["strides"], p["dilations"]
    pt, pl, pb, pr = p["pads"]
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError("window larger than the padded input")
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=value) \
        if any(p["pads"]) else x
    return xp, oh, ow


def _tap(xp, ky, kx, p, oh, ow):
    """The input values tap (ky, kx) of every output pixel reads (a strided view)."""
    (sh, sw), (dh, dw) = p["strides"], p["dilations"]
    y0, x0 = ky * dh, kx * dw
    return xp[:, y0:y0 + (oh - 1) * sh + 1:sh, x0:x0 + (ow - 1) * sw + 1:sw, :]


@kernel("Conv2D")
def conv2d(node, inputs, p, ctx):
    """reference_integer_ops::ConvPerChannel: acc = sum w * (x - z_in) over the taps inside
    the image (outside taps contribute nothing: the input is padded with x - z_in = 0)."""
    x, w = inputs[0], inputs[1]
    if x.ndim != 4:
        raise ValueError(f"Conv2D input of rank {x.ndim}")
    cout, kh, kw, cin = w.shape
    groups = x.shape[3] // cin if cin else 0
    if groups < 1 or groups * cin != x.shape[3] or cout % groups:
        fail(node, f"{x.shape[3]} input channels for weights {tuple(w.shape)} (grouped "
                    "convolutions need a multiple of the filter's input channels)")
    dtype = exact_float(x, p["input_offset"], w, (1, 2, 3))
    xo = x.astype(dtype) + dtype(p["input_offset"])
    xp, oh, ow = _spatial(xo, p, kh, kw)
    n = x.shape[0]
    wf = w.astype(dtype)
    acc = np.zeros((n * oh * ow, cout), dtype)
    for ky in range(kh):
        for kx in range(kw):
            patch = _tap(xp, ky, kx, p, oh, ow).reshape(-1, x.shape[3])
            if groups == 1:
                acc += patch @ wf[:, ky, kx, :].T
            else:  # output channel o reads input channels of group o // (cout / groups)
                wg = wf[:, ky, kx, :].reshape(groups, cout // groups, cin)
                acc += np.einsum("pgc,goc->pgo", patch.reshape(-1, groups, cin),
                                 wg).reshape(-1, cout)
    return [requantize_acc(acc.reshape(n, oh, ow, cout), p, ctx)]


@kernel("DepthwiseConv2D")
def depthwise_conv2d(node, inputs, p, ctx):
    """reference_integer_ops::DepthwiseConvPerChannel: output channel ic * M + m reads input
    channel ic with weights [0, ky, kx, ic * M + m]."""
    x, w = inputs[0], inputs[1]
    if x.ndim != 4:
        raise ValueError(f"DepthwiseConv2D input of rank {x.ndim}")
    _, kh, kw, cout = w.shape
    cin = x.shape[3]
    if cout % cin:
        fail(node, f"{cout} output channels for {cin} input channels")
    m = cout // cin
    if p["depth_multiplier"] not in (0, m):
        fail(node, f"depth_multiplier {p['depth_multiplier']} but weights give {m}")
    xo = x.astype(np.int64) + p["input_offset"]
    if m > 1:
        xo = np.repeat(xo, m, axis=3)
    xp, oh, ow = _spatial(xo, p, kh, kw)
    w64 = w.astype(np.int64)
    acc = np.zeros((x.shape[0], oh, ow, cout), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += _tap(xp, ky, kx, p, oh, ow) * w64[0, ky, kx, :]
    return [requantize_acc(acc, p, ctx)]


@kernel("FullyConnected")
def fully_connected(node, inputs, p, ctx):
    """reference_integer_ops::FullyConnected(PerChannel): rows of `accum_depth` input values;
    acc = sum (w + weights_offset) * (x + input_offset)."""
    x, w = inputs[0], inputs[1]
    units, depth = w.shape
    if x.size % depth:
        raise ValueError(f"FullyConnected input of {x.size} values, weights of depth {depth}")
    wf = w.astype(np.int64) + p["weights_offset"]
    dtype = exact_float(x, p["input_offset"], wf, (1,))
    xf = x.reshape(-1, depth).astype(dtype) + dtype(p["input_offset"])
    batch_guard(node, ctx, p["keep_num_dims"] or xf.shape[0] == x.shape[0],
                 "FullyConnected folding the batch axis into rows")
    wf = wf.astype(dtype)
    out = requantize_acc(xf @ wf.T, p, ctx)
    if p["keep_num_dims"]:
        if x.shape[-1] != depth:
            raise ValueError("FullyConnected keep_num_dims with a last axis other than depth")
        return [out.reshape(x.shape[:-1] + (units,))]
    return [out]


@kernel("AveragePool")
def average_pool(node, inputs, p, ctx):
    """Sum of the taps inside the image divided by their count, rounded half away from zero
    with C integer division: (acc +- count / 2) / count."""
    x = inputs[0]
    kh, kw = p["kernel_shape"]
    xp, oh, ow = _spatial(x.astype(np.int64), p, kh, kw)
    ones = np.ones((1,) + x.shape[1:3] + (1,), dtype=np.int64)
    op, _, _ = _spatial(ones, p, kh, kw)
    acc = np.zeros((x.shape[0], oh, ow, x.shape[3]), dtype=np.int64)
    count = np.zeros((1, oh, ow, 1), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += _tap(xp, ky, kx, p, oh, ow)
            count += _tap(op, ky, kx, p, oh, ow)
    if np.any(count == 0):
        fail(node, "a pooling window lies entirely in the padding")
    half = count // 2
    out = np.where(acc > 0, (acc + half) // count, -((half - acc) // count))
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


@kernel("MaxPool")
def max_pool(node, inputs, p, ctx):
    """MAX_POOL_2D on int8 values (padding never wins), clamped to the activation range."""
    x = inputs[0]
    kh, kw = p["kernel_shape"]
    # padding never wins: TFLM skips the taps outside the image
    xp, oh, ow = _spatial(x.astype(np.int16), p, kh, kw, value=-129)
    out = np.full((x.shape[0], oh, ow, x.shape[3]), -128, dtype=np.int16)
    for ky in range(kh):
        for kx in range(kw):
            np.maximum(out, _tap(xp, ky, kx, p, oh, ow), out=out)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]
