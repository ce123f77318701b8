"""Quantization parameters: activation (scale, zero point), int8 weights, int32 biases.

The rules of design.md ("Quantization numerics"):
- activations: asymmetric int8 per tensor, the range widened to include 0, as the TFLite
  converter computes it: `scale = (max - min) / 255`, `zero_point = round(-128 - min / scale)`
  clamped to [-128, 127]; an empty range (all zeros) gets scale 1, never 0;
- weights: symmetric int8 in [-127, 127], zero point 0, one scale per output channel (or one per
  tensor): `scale = max|w| / 127`;
- bias: int32 at scale `float32(s_in) * float32(s_w[c])`, zero point 0, rounded half away from
  zero. Two guards keep it representable: a channel whose weights are all zero but whose bias is
  not gets a weight scale chosen for the bias (the weights stay 0 whatever the scale), and a
  channel whose bias plus worst-case accumulator would leave int32 gets a coarser weight scale;
- every scale written is finite and positive.
"""

from __future__ import annotations

import numpy as np

from .numerics import round_half_away

QMIN, QMAX = -128, 127
WEIGHT_MAX = 127
INT32_MAX = 2**31 - 1
ZERO_CHANNEL_BIAS_STEPS = 2**20  # an all-zero channel's bias is represented with ~20 bits
_TINY = np.finfo(np.float32).tiny


def activation_params(lo: float, hi: float) -> tuple:
    """(float32 scale, int zero point) of an int8 activation observed in [lo, hi]."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"range [{lo}, {hi}] is not finite")
    if hi - lo <= 0:
        return np.float32(1.0), 0
    scale = np.float32((hi - lo) / (QMAX - QMIN))
    if scale < _TINY:  # a subnormal scale would lose the range; the smallest normal covers it
        scale = np.float32(_TINY)
    zero_point = int(np.clip(round_half_away(QMIN - lo / float(scale)), QMIN, QMAX))
    return scale, zero_point


def weight_scales(w: np.ndarray, axis: int | None) -> np.ndarray:
    """float32 symmetric scales, one per index of `axis` (one in all when `axis` is None).

    An all-zero channel gets scale 0 here; `quantize_layer` replaces it.
    """
    w = np.asarray(w)
    if w.dtype.kind != "f" or w.dtype.itemsize > 4:
        w = w.astype(np.float64)
    w = np.abs(w)  # max |w| is exact in the weights' own float type: no float64 copy needed
    if axis is None:
        peak = np.array([w.max() if w.size else 0.0], np.float64)
    else:
        other = tuple(i for i in range(w.ndim) if i != axis % w.ndim)
        peak = (w.max(axis=other) if w.size else np.zeros(w.shape[axis])).astype(np.float64)
    return (peak / WEIGHT_MAX).astype(np.float32)


def _along(v: np.ndarray, axis: int | None, ndim: int) -> np.ndarray:
    if axis is None:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = -1
    return v.reshape(shape)


def quantize_weights(w: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    """int8 weights `round(w / scale)` clipped to [-127, 127]."""
    q = round_half_away(np.asarray(w, np.float64) / _along(scales.astype(np.float64), axis, w.ndim))
    return np.clip(q, -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)


def bias_scale(s_in, s_w) -> np.ndarray:
    """The bias scale float32(s_in) * float32(s_w), computed in float32 as TFLite does."""
    return (np.float32(s_in) * np.asarray(s_w, np.float32)).astype(np.float32)


def quantize_layer(w: np.ndarray, b: np.ndarray | None, s_in, channel_axis: int,
                   per_channel: bool = True) -> tuple:
    """Quantize a layer's weights and bias; returns (w_q int8, s_w float32, b_q int32 | None).

    `channel_axis` is the output-channel axis of `w`; `per_channel` False gives one weight
    scale for the whole tensor (TFLite's per-tensor FULLY_CONNECTED). Applies the two guards of
    the module docstring; a channel's worst case is `sum|w_q| * 255` (|x - z_in| <= 255).
    """
    s_in = np.float32(s_in)
    axis = channel_axis if per_channel else None
    s_w = weight_scales(w, axis)
    b64 = None if b is None else np.asarray(b, np.float64).reshape(-1)
    need = np.zeros(s_w.size) if b64 is None else (np.abs(b64) if per_channel
                                                    else np.abs(b64).max(initial=0.0))
    zero = s_w <= 0
    if np.any(zero):
        # All-zero weights: any scale keeps them 0; pick one that carries the bias exactly.
        from_bias = np.asarray(need / (float(s_in) * ZERO_CHANNEL_BIAS_STEPS), np.float64)
        fallback = np.where(from_bias > 0, from_bias, 1.0 / WEIGHT_MAX)
        s_w = np.where(zero, np.broadcast_to(fallback, s_w.shape), s_w).astype(np.float32)
    s_w = np.maximum(s_w, np.float32(_TINY))
    w_q = quantize_weights(w, s_w, axis)
    if b64 is None:
        return w_q, s_w, None
    other = tuple(i for i in range(w.ndim) if i != channel_axis % w.ndim)
    for _ in range(16):  # coarser weight scales until bias + worst-case accumulator fit
        scale = np.broadcast_to(bias_scale(s_in, s_w).astype(np.float64), b64.shape)
        b_q = round_half_away(b64 / scale)
        worst = np.abs(w_q).sum(axis=other, dtype=np.int64) * 255  # |w_q| <= 127: no wrap
        over = np.abs(b_q) + worst > INT32_MAX
        if not np.any(over):
            return w_q, s_w, b_q.astype(np.int32)
        grow = np.where(over, 2.0, 1.0) if per_channel else 2.0
        s_w = (s_w * grow).astype(np.float32)
        w_q = quantize_weights(w, s_w, axis)
    raise ValueError("bias cannot be represented in int32 for any weight scale")
