"""TFLite hybrid kernels (int8 weights, float activations) of Conv2D and FullyConnected, used
by `float_kernels_conv` when the weights are integers.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.rounding import round_half_away

from .float_kernels_base import _layout
from .float_kernels_window import pad_spatial, window_view


# Dynamic-range quantization leaves float activations and int8 weights; TFLite then quantizes
# each batch entry of the input on the fly and multiplies in integers. Reproduced here exactly
# (LiteRT, reference op resolver), since the result differs from float math by about 1%:
# - symmetric (per-tensor weights): range = max|x_b|, s_b = range / 127,
#   q = clamp(round(x * (127 / range)), -127, 127); out = float(acc) * (s_b * s_w) + bias;
# - asymmetric (per-channel Conv2D weights; FC with asymmetric_quantize_inputs): TFLite's
#   AsymmetricQuantizeFloats (scale and zero point in double, nudged zero point),
#   out = float(acc - zp_b * rowsum(W)) * scale + bias.
def _symmetric_quantize(x2: np.ndarray):
    """Per row of x2 (rows = batch entries): int8 values (as float64) and float32 scales."""
    lo, hi = x2.min(axis=1), x2.max(axis=1)
    rng = np.maximum(np.abs(lo), np.abs(hi)).astype(np.float32)
    zero = rng == 0
    safe = np.where(zero, np.float32(1), rng)
    scale = np.where(zero, np.float32(1), safe / np.float32(127)).astype(np.float32)
    inv = (np.float32(127) / safe).astype(np.float32)
    q = round_half_away((x2 * inv[:, None]).astype(np.float32)).astype(np.float64)
    q = np.clip(q, -127, 127)
    q[zero] = 0
    return q, scale


def _asymmetric_quantize(x2: np.ndarray):
    """Per row: int8 values (float64), float32 scales and int zero points (TFLite's
    AsymmetricQuantizeFloats)."""
    rmin = np.minimum(x2.min(axis=1), 0).astype(np.float64)
    rmax = np.maximum(x2.max(axis=1), 0).astype(np.float64)
    same = rmin == rmax
    scale = np.where(same, 1.0, (rmax - rmin) / 255.0)
    zp_min = -128.0 - rmin / scale
    zp_max = 127.0 - rmax / scale
    err_min = 128.0 + np.abs(rmin / scale)
    err_max = 127.0 + np.abs(rmax / scale)
    zp = np.where(err_min < err_max, zp_min, zp_max)
    zp = np.where(zp <= -128, -128, np.where(zp >= 127, 127, round_half_away(zp)))
    zp = np.where(same, 0, zp).astype(np.int64)
    scale32 = np.where(same, 1.0, scale).astype(np.float32)
    inv = (1.0 / scale32.astype(np.float64)).astype(np.float32)
    v = (zp.astype(np.float32)[:, None] + (x2 * inv[:, None]).astype(np.float32)).astype(np.float32)
    q = np.clip(round_half_away(v).astype(np.float64), -128, 127)
    q[same] = 0
    return q, scale32, zp


def _weight_scales(node, ctx, index: int = 1):
    q = ctx.in_quant(index) if ctx is not None else None
    if q is None or q.scale.size == 0:
        raise NotImplementedError(f"{node.op} with integer weights but no quantization "
                                  "parameters for them")
    if np.any(q.zero_point != 0):
        raise NotImplementedError(f"hybrid {node.op} with non-zero weight zero points")
    return q.scale.astype(np.float32)


def hybrid_conv(node, x, w, b, ctx, kernel, strides, dilations, pads, out, group):
    """TFLite CONV_2D with int8 OHWI weights and a float NHWC input."""
    if _layout(node) != "NHWC" or w.dtype != np.int8 or group != 1:
        raise NotImplementedError("hybrid Conv2D other than TFLite NHWC, int8, group 1")
    if any(d != 1 for d in dilations):
        raise NotImplementedError("hybrid Conv2D with dilation (TFLite ignores it)")
    scales = _weight_scales(node, ctx)
    n, cout = x.shape[0], w.shape[0]
    x2 = x.reshape(n, -1)
    per_channel = scales.size > 1 and np.any(scales != scales[0])
    if per_channel:
        q, s_in, zp = _asymmetric_quantize(x2)
    else:
        q, s_in = _symmetric_quantize(x2)
    qx = q.reshape(x.shape)
    if per_channel:  # TFLite skips padding taps: pad (q - zp) with zeros
        qx = qx - zp.reshape(-1, 1, 1, 1)
    xp = pad_spatial(qx, [1, 2], pads[:2], pads[2:], 0)
    cols = window_view(xp, True, kernel, strides, dilations, out).reshape(-1, w[0].size)
    acc = (cols @ w.reshape(cout, -1).T.astype(np.float64)).reshape(n, -1, cout)
    acc = acc.astype(np.int32).astype(np.float32)
    if per_channel:  # reference: acc * per_channel_scale * input_scale, left to right
        y = (acc * scales) * s_in[:, None, None]
    else:
        y = acc * (s_in * scales[0]).astype(np.float32)[:, None, None]
    y = y.astype(np.float32).reshape(n, *out, cout)
    if b is not None:
        y += b.astype(np.float32).reshape(-1)
    return y


def hybrid_fc(node, x2, w, b, ctx):
    """TFLite FULLY_CONNECTED with int8 weights [out, in] and float input rows x2."""
    if w.dtype != np.int8:
        raise NotImplementedError(f"hybrid FullyConnected with {w.dtype} weights")
    scales = _weight_scales(node, ctx)
    w64 = w.astype(np.float64)
    if node.attrs.get("asymmetric_quantize_inputs"):
        q, s_in, zp = _asymmetric_quantize(x2)
        acc = q @ w64.T - zp[:, None] * w64.sum(axis=1)[None, :]
    else:
        q, s_in = _symmetric_quantize(x2)
        acc = q @ w64.T
    acc = acc.astype(np.int32).astype(np.float32)
    if scales.size > 1:
        y = acc * (s_in[:, None] * scales[None, :]).astype(np.float32)
    else:
        y = acc * (s_in * scales[0]).astype(np.float32)[:, None]
    y = y.astype(np.float32)
    if b is not None:
        y = b.astype(np.float32).reshape(1, -1) + y
    return y
