"""Integer kernels of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D and
MAX_POOL_2D, bit-exact with TFLite Micro's reference kernels (parameters:
`qconvert.int8.prepare.conv` / `.pooling`).

Accumulators of Conv2D / FullyConnected are computed with float BLAS (DepthwiseConv2D's with
float multiply-adds per tap), which is exact because every partial sum is an integer the float
type holds: float32 when the layer's bound (sum |w|
over a channel times max |x - z_in|, `exact_float`) is below 2**24, as it is for most layers,
else float64 (below 2**53: each term is at most 255 * 255 in magnitude, 32768 * 255 for a
16x8 layer). The accumulators, pools and fully connected layer are shared with the 16x8
kernels (`int16_kernels`), which requantize and clamp to their own type; the int8 output stage
(`requantize_channels_last`) runs in cache-sized blocks on every CPU.
Spatial layers read the IR's explicit `pads` [top, left, bottom, right]: taps outside the image
are skipped (conv: the input is padded with x - z_in = 0; pools: excluded from the max and from
the average's count), so pads TFLite cannot express (from ONNX) run as TFLite Micro would after
an explicit PAD.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import INT32_MAX, ROUNDINGS, checked_ints
from qconvert.int8.prepare.common import fail

from .int_kernel_base import batch_guard, kernel
from .parallel import on_workers, scratch, spans


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


REQUANTIZE_ROWS = 1 << 16  # accumulator values per block of `requantize_channels_last`


def requantize_channels_last(acc, bias, multiplier, shift, offset: int, lo: int, hi: int,
                             rounding: str = "double", dtype=np.int8,
                             acc_bound: int | None = None) -> np.ndarray:
    """The output stage of TFLite's conv / depthwise / fully connected kernels on accumulators
    `acc` whose last axis is the output channel (exact integers, float or int): + `bias`,
    wrapped to int32 as C holds it, MultiplyByQuantizedMultiplier(`multiplier`, `shift`: one
    value, or one per channel), + `offset`, clamped to [`lo`, `hi`], as `dtype`. `acc_bound`:
    the largest |acc| can be, when the caller knows it; where it and the bias cannot leave
    int32, the wrap (then the identity) is skipped.

    The same values as `fixed_point.requantize_int32` and those numpy steps one after another
    (whose ~25 passes over int64 arrays as large as the layer's output were most of an integer
    run), in blocks of rows that stay in cache, each in one int64 work array updated in place,
    the blocks shared among the CPUs (`parallel.on_workers`). The multiplier is never
    INT32_MIN, so the one saturating case of `srdhm` cannot occur; RoundingDivideByPOT is
    (v + 2**(e-1) - (v < 0)) >> e, the same rounding (half away from zero) in one shift."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    acc = np.asarray(acc)
    if acc.size == 0:
        return np.empty(acc.shape, dtype)
    channels = acc.shape[-1] if acc.ndim else 1
    multiplier = checked_ints(multiplier, "multiplier", 0, INT32_MAX).reshape(-1)
    shift = checked_ints(shift, "shift", -31, 30).reshape(-1)
    if multiplier.size not in (1, channels) or shift.size not in (1, channels):
        raise ValueError(f"{multiplier.size} multipliers and {shift.size} shifts for "
                         f"{channels} channels")
    rows = acc.reshape(-1, channels)
    bias = None if bias is None else np.asarray(bias, dtype=np.int64).reshape(-1)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    # rdbpot(v, e) = (v + 2**(e-1) - (v < 0)) >> e for e > 0: half away from zero in one shift
    nudge = (np.int64(1) << right) >> 1
    shifted = right > 0
    out = np.empty(rows.shape, dtype)
    step = max(1, REQUANTIZE_ROWS // max(1, channels))
    peak_bias = 0 if bias is None or not bias.size else int(np.abs(bias).max())
    wraps = acc_bound is None or acc_bound + peak_bias > INT32_MAX

    def run(blocks):
        for i, j in blocks:
            v = scratch("requantize", (j - i, channels), np.int64)
            np.copyto(v, rows[i:j], casting="unsafe")  # exact integers
            if bias is not None:
                v += bias
            if wraps:  # wrap32, in place
                v += 2**31
                v &= 0xFFFFFFFF
                v -= 2**31
            if rounding == "single":
                v *= multiplier  # < 2**62 in magnitude
                v >>= 30 - shift
                v += 1
                v >>= 1
                v += 2**31
                v &= 0xFFFFFFFF
                v -= 2**31
            else:
                if left.any():
                    v <<= left
                    v += 2**31
                    v &= 0xFFFFFFFF
                    v -= 2**31
                v *= multiplier  # srdhm: (x * m + 2**30) >> 31
                v += 2**30
                v >>= 31
                if shifted.any():  # rdbpot
                    negative = np.less(v, 0)
                    if not shifted.all():
                        negative &= shifted
                    v += nudge
                    v -= negative
                    v >>= right
            v += offset
            np.clip(v, lo, hi, out=out[i:j], casting="unsafe")

    on_workers(run, spans(len(rows), step))
    return out.reshape(acc.shape)



def requantize_acc(acc, p, ctx):
    """acc (exact integers, float or int64; channels last) -> + bias, requantize, + z_out,
    clamp, int8 (`requantize_channels_last`)."""
    acc = np.asarray(acc)
    # float32 accumulators come from `exact_float`'s layers: every sum below 2**24
    bound = FLOAT32_EXACT if acc.dtype == np.float32 else None
    return requantize_channels_last(acc, p["bias"], p["output_multiplier"], p["output_shift"],
                                    int(p["output_offset"]), int(p["activation_min"]),
                                    int(p["activation_max"]), ctx.rounding, acc_bound=bound)


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


def conv2d_sums(node, x, w, p):
    """ConvPerChannel's exact accumulators [N, OH, OW, Cout] (float): sum w * (x + input_offset)
    over the taps inside the image (outside taps contribute nothing: the input is padded with
    x - z_in = 0), grouped convolutions included. Shared by the int8 and 16x8 kernels (a 16x8
    layer's input_offset is 0)."""
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
    return acc.reshape(n, oh, ow, cout)


@kernel("Conv2D")
def conv2d(node, inputs, p, ctx):
    """reference_integer_ops::ConvPerChannel: `conv2d_sums`, requantized to int8."""
    return [requantize_acc(conv2d_sums(node, inputs[0], inputs[1], p), p, ctx)]


def depthwise_sums(node, x, w, p):
    """DepthwiseConvPerChannel's exact accumulators (float32 where every partial sum is an
    integer below 2**24, `exact_float`, else float64): output channel ic * M + m reads input
    channel ic + input_offset with weights [0, ky, kx, ic * M + m] (int8 and 16x8)."""
    if x.ndim != 4:
        raise ValueError(f"DepthwiseConv2D input of rank {x.ndim}")
    _, kh, kw, cout = w.shape
    cin = x.shape[3]
    if cout % cin:
        fail(node, f"{cout} output channels for {cin} input channels")
    m = cout // cin
    if p["depth_multiplier"] not in (0, m):
        fail(node, f"depth_multiplier {p['depth_multiplier']} but weights give {m}")
    dtype = exact_float(x, p["input_offset"], w, (0, 1, 2))  # every partial sum exact
    xo = x.astype(dtype)
    xo += dtype(p["input_offset"])
    if m > 1:
        xo = np.repeat(xo, m, axis=3)
    xp, oh, ow = _spatial(xo, p, kh, kw)
    wf = w.astype(dtype)
    acc = np.empty((x.shape[0], oh, ow, cout), dtype=dtype)
    tmp = np.empty_like(acc)
    for ky in range(kh):
        for kx in range(kw):
            if ky == kx == 0:
                np.multiply(_tap(xp, ky, kx, p, oh, ow), wf[0, ky, kx, :], out=acc)
            else:
                np.multiply(_tap(xp, ky, kx, p, oh, ow), wf[0, ky, kx, :], out=tmp)
                acc += tmp
    return acc


@kernel("DepthwiseConv2D")
def depthwise_conv2d(node, inputs, p, ctx):
    """reference_integer_ops::DepthwiseConvPerChannel: `depthwise_sums`, requantized to int8."""
    return [requantize_acc(depthwise_sums(node, inputs[0], inputs[1], p), p, ctx)]


def fully_connected_with(node, inputs, p, ctx, requantize):
    """reference_integer_ops::FullyConnected(PerChannel): rows of `accum_depth` input values;
    acc = sum (w + weights_offset) * (x + input_offset), then `requantize(acc, p, ctx)` (the
    int8 or the 16x8 one); keep_num_dims restores the input's leading axes."""
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
    out = requantize(xf @ wf.T, p, ctx)
    if p["keep_num_dims"]:
        if x.shape[-1] != depth:
            raise ValueError("FullyConnected keep_num_dims with a last axis other than depth")
        return [out.reshape(x.shape[:-1] + (units,))]
    return [out]


@kernel("FullyConnected")
def fully_connected(node, inputs, p, ctx):
    """reference_integer_ops::FullyConnected(PerChannel), int8 (`fully_connected_with`)."""
    return fully_connected_with(node, inputs, p, ctx, requantize_acc)


def average_pool_as(node, x, p, dtype):
    """Sum of the taps inside the image divided by their count, rounded half away from zero
    with C integer division: (acc +- count / 2) / count, clamped, as `dtype` (int8 or int16)."""
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
    return np.clip(out, p["activation_min"], p["activation_max"]).astype(dtype)


@kernel("AveragePool")
def average_pool(node, inputs, p, ctx):
    """AVERAGE_POOL_2D on int8 values (`average_pool_as`)."""
    return [average_pool_as(node, inputs[0], p, np.int8)]


def max_pool_as(x, p, dtype):
    """MAX_POOL_2D of `dtype` values (int8 or int16): padding never wins (TFLM skips the taps
    outside the image; here they hold the type's minimum - 1), clamped to the activation
    range."""
    lowest = int(np.iinfo(dtype).min)
    kh, kw = p["kernel_shape"]
    xp, oh, ow = _spatial(x.astype(np.int32), p, kh, kw, value=lowest - 1)
    out = np.full((x.shape[0], oh, ow, x.shape[3]), lowest, dtype=np.int32)
    for ky in range(kh):
        for kx in range(kw):
            np.maximum(out, _tap(xp, ky, kx, p, oh, ow), out=out)
    return np.clip(out, p["activation_min"], p["activation_max"]).astype(dtype)


@kernel("MaxPool")
def max_pool(node, inputs, p, ctx):
    """MAX_POOL_2D on int8 values (`max_pool_as`)."""
    return [max_pool_as(inputs[0], p, np.int8)]
