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
  channel whose bias plus worst-case accumulator would leave int32 gets the coarser weight
  scale it needs, computed directly (`bias_safe_scales`), never searched for;
- every scale written is a normal, finite, positive float32, and so is every bias scale.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.rounding import round_half_away

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


INT16_MAX = 32767
ACC48_MAX = 2**47 - 1  # TFLite's int64 requantization (16x8) takes |accumulator| < 2^47


def int16_activation_params(lo: float, hi: float) -> tuple:
    """(float32 scale, 0) of an int16 activation observed in [lo, hi]: symmetric, zero point
    0, `scale = max(|lo|, |hi|) / 32767` (TFLite's 16x8 kernels require zero point 0); an
    empty range gets scale 1."""
    peak = max(abs(float(lo)), abs(float(hi)))
    if not np.isfinite(peak):
        raise ValueError(f"range [{lo}, {hi}] is not finite")
    if peak <= 0:
        return np.float32(1.0), 0
    return np.float32(max(peak / INT16_MAX, float(_TINY))), 0


def int64_bias(b: np.ndarray, s_in, s_w: np.ndarray) -> np.ndarray:
    """The int64 bias of a 16x8 layer: `round_half_away(b / (float32(s_in) * s_w))`."""
    scale = np.broadcast_to(bias_scale(s_in, s_w).astype(np.float64), np.shape(b))
    return round_half_away(np.asarray(b, np.float64) / scale).astype(np.int64)


def weight_scales(w: np.ndarray, axis: int | None) -> np.ndarray:
    """float32 symmetric scales, one per index of `axis` (one in all when `axis` is None).

    An all-zero channel gets scale 0 here; `quantize_layer` replaces it.
    """
    w = np.asarray(w)
    if w.dtype.kind != "f" or w.dtype.itemsize > 4:
        w = w.astype(np.float64)
    if axis is None:
        peak = np.array([np.abs(w).max() if w.size else 0.0], np.float64)
    else:
        peak, _ = channel_magnitudes(w, axis)
    return scales_of_peaks(peak)


def scales_of_peaks(peak: np.ndarray) -> np.ndarray:
    """float32 `max|w| / 127` of each channel's (float64) largest magnitude."""
    return (np.asarray(peak, np.float64) / WEIGHT_MAX).astype(np.float32)


MAGNITUDE_BLOCK = 1 << 18  # weights per block of `channel_magnitudes` (a 1 MB |w| work array)


def channel_magnitudes(w: np.ndarray, axis: int) -> tuple:
    """(max |w|, sum |w| in float64) of each index of `axis`, both float64.

    With the channels on axis 0 (every OIHW / OHWI / FC weight), block by block of channels:
    no |w| copy of the whole layer, and each channel's maximum and sum are those of the whole
    (the same values reduced in the same order). Other axes: over one |w|."""
    w = np.asarray(w)
    axis = axis % w.ndim
    other = tuple(i for i in range(w.ndim) if i != axis)
    if not other:
        magnitude = np.abs(w).astype(np.float64)
        return magnitude, magnitude
    if w.size == 0:
        return np.zeros(w.shape[axis]), np.zeros(w.shape[axis])
    if axis != 0:
        magnitude = np.abs(w)
        return (magnitude.max(axis=other).astype(np.float64),
                magnitude.sum(axis=other, dtype=np.float64))
    peak = np.empty(w.shape[0], np.float64)
    total = np.empty(w.shape[0], np.float64)
    rows = max(1, MAGNITUDE_BLOCK // max(1, w[:1].size))
    for i in range(0, w.shape[0], rows):
        magnitude = np.abs(w[i:i + rows])
        peak[i:i + rows] = magnitude.max(axis=other)
        total[i:i + rows] = magnitude.sum(axis=other, dtype=np.float64)
    return peak, total


def _along(v: np.ndarray, axis: int | None, ndim: int) -> np.ndarray:
    if axis is None:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = -1
    return v.reshape(shape)


QUANTIZE_BLOCK = 1 << 18  # weights per block of `quantize_weights` (float64 work arrays of 2 MB)


def quantize_weights(w: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    """int8 weights `round(w / scale)` clipped to [-127, 127], `w / scale` in float64.

    Computed block by block of rows (axis 0), so the float64 work arrays stay small whatever the
    layer: a 2.4 M-weight layer would otherwise hold three float64 copies (57 MB) at once."""
    w = np.asarray(w)
    s = _along(np.asarray(scales).astype(np.float64), axis, w.ndim)
    if w.ndim == 0:
        q = round_half_away(np.divide(w, s, dtype=np.float64))
        return np.clip(q, -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)
    out = np.empty(w.shape, np.int8)
    rows = max(1, QUANTIZE_BLOCK // max(1, w[:1].size))
    per_row = s.ndim and s.shape[0] > 1  # the scales run along axis 0
    for i in range(0, w.shape[0], rows):
        part = slice(i, i + rows)
        q = round_half_away(np.divide(w[part], s[part] if per_row else s, dtype=np.float64))
        out[part] = np.clip(q, -WEIGHT_MAX, WEIGHT_MAX, out=q)
    return out


def bias_scale(s_in, s_w) -> np.ndarray:
    """The bias scale float32(s_in) * float32(s_w), computed in float32 as TFLite does."""
    return (np.float32(s_in) * np.asarray(s_w, np.float32)).astype(np.float32)


def bias_safe_scales(l1: np.ndarray, k: int, b: np.ndarray | None, s_in,
                     limit: int = INT32_MAX, span: int = 255) -> np.ndarray:
    """Per output channel, the smallest weight scale (float64) that keeps the bias plus the
    worst-case accumulator inside int32, in closed form.

    With `s` the weight scale, `L1 = sum|w|` and `K` the weights of the channel: `|w_q| <=
    |w| / s + 1/2`, so `sum|w_q| <= L1 / s + K / 2`; the int32 bias is at most `|b| / (s_in s)`
    (times 1 + 2^-22 for the float32 product TFLite takes, + 1/2 for rounding). With inputs
    `|x - z_in| <= 255` the channel stays in int32 when
    `(|b| (1 + 2^-22) / s_in + 255 L1) / s <= INT32_MAX - 1 - 255 K / 2`, which gives `s`.
    16x8 layers pass `limit` 2^47 - 1 (TFLite's int64 requantization takes accumulators below
    2^47) and `span` 32768 (|x| of an int16 input).
    """
    room = float(limit) - 1.0 - float(span) * k / 2
    if room <= 0:
        raise ValueError(f"{k} weights per channel can overflow an int32 accumulator")
    bias = 0.0 if b is None else np.abs(b) * (1.0 + 2.0**-22) / float(s_in)
    return (bias + float(span) * l1) / room * (1.0 + 1e-9)


def _float32_at_least(s: np.ndarray) -> np.ndarray:
    """float32 values >= the float64 `s` (rounded up, never down)."""
    f = s.astype(np.float32)
    return np.where(f.astype(np.float64) < s, np.nextafter(f, np.float32(np.inf)), f)


def quantize_layer(w: np.ndarray, b: np.ndarray | None, s_in, channel_axis: int,
                   per_channel: bool = True, bias_bits: int = 32, min_scale: float = 0.0) -> tuple:
    """Quantize a layer's weights and bias; returns (w_q int8, s_w float32, b_q int32 | None,
    widened bool per scale). `bias_bits` 64 (16x8 layers): an int64 bias, and the guard keeps
    bias plus accumulator below 2^47 instead of int32. `min_scale`: a floor for every scale
    (16x8: the one keeping the requantization multiplier above 2^-32, where it would round to
    0).

    `channel_axis` is the output-channel axis of `w`; `per_channel` False gives one weight
    scale for the whole tensor (TFLite's per-tensor FULLY_CONNECTED). Each scale is chosen
    directly, as the largest of:
    - `max|w| / 127`, the scale that uses the full int8 range;
    - for an all-zero channel, one that carries the bias with ~20 bits (`|b| / (s_in 2^20)`;
      1/127 when there is no bias): any scale keeps zero weights 0;
    - `bias_safe_scales`: the smallest scale keeping bias + worst-case accumulator in int32
      (a channel whose weights are ~1e-30 next to a bias of 0.3, as BatchNorm folding leaves
      them, needs it; its weights then quantize to 0, as the TFLite converter's do);
    - the smallest one whose bias scale `float32(s_in) * s_w` is a normal float32.
    `widened` marks the scales made coarser than `max|w| / 127` by the int32 guard or the
    normal-float floor (per tensor: one flag; all-zero channels are not counted). Every scale is a normal, finite, positive float32.
    """
    s_in = np.float32(s_in)
    if not (np.isfinite(s_in) and s_in > 0):
        raise ValueError(f"input scale {s_in} is not a positive finite number")
    axis = channel_axis if per_channel else None
    w = np.asarray(w)
    peak, l1 = channel_magnitudes(w if w.dtype.kind == "f" else w.astype(np.float64),
                                  channel_axis)
    natural = scales_of_peaks(peak if per_channel else peak.max(keepdims=True)
                              ).astype(np.float64)
    b64 = None if b is None else np.broadcast_to(
        np.asarray(b, np.float64).reshape(-1), (w.shape[channel_axis],))
    k = w.size // max(w.shape[channel_axis % w.ndim], 1)
    guard = (bias_safe_scales(l1, k, b64, s_in) if bias_bits == 32
             else bias_safe_scales(l1, k, b64, s_in, ACC48_MAX, 32768))
    bias_need = np.zeros_like(guard) if b64 is None else np.abs(b64)
    if not per_channel:
        guard, bias_need = guard.max(keepdims=True), bias_need.max(keepdims=True)
    zero = natural <= 0
    zero_choice = np.where(bias_need > 0, bias_need / (float(s_in) * ZERO_CHANNEL_BIAS_STEPS),
                           1.0 / WEIGHT_MAX)
    base = np.where(zero, zero_choice, natural)
    normal_floor = float(_TINY) / float(s_in) * (1.0 + 2.0**-20)
    s_w = _float32_at_least(np.maximum.reduce([base, guard, np.full_like(base, normal_floor),
                                               np.full_like(base, max(float(_TINY),
                                                                      float(min_scale)))]))
    if not np.all(np.isfinite(s_w)) or not np.all(np.isfinite(bias_scale(s_in, s_w))):
        raise ValueError("weights too large for int8 at this input scale (scale overflows float32)")
    widened = ~zero & (s_w > natural.astype(np.float32))
    w_q = quantize_weights(w, s_w, axis)
    if b64 is None:
        return w_q, s_w, None, widened
    if bias_bits == 64:
        return w_q, s_w, int64_bias(b64, s_in, s_w), widened
    scale = np.broadcast_to(bias_scale(s_in, s_w).astype(np.float64), b64.shape)
    b_q = round_half_away(b64 / scale)
    other = tuple(i for i in range(w.ndim) if i != channel_axis % w.ndim)
    worst = np.abs(w_q).sum(axis=other, dtype=np.int64) * 255  # |w_q| <= 127: no int8 overflow
    if np.any(np.abs(b_q) + worst > INT32_MAX):  # the closed form above rules this out
        raise AssertionError("bias-safe weight scale left a channel outside int32")
    return w_q, s_w, b_q.astype(np.int32), widened


def quantized_inputs(graph, feeds: dict) -> dict:
    """Float samples quantized for the model's int8 (or int16) inputs, float inputs left as they
    are: what the integer executor is fed when the report or the bias correction runs it."""
    inputs = {}
    for name, array in feeds.items():
        t = graph.tensors[name]
        if t.dtype in ("int8", "int16"):  # int16: a 16x8 model's input
            s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
            info = np.iinfo(t.dtype)
            array = np.clip(round_half_away(array / s) + z, info.min, info.max).astype(t.dtype)
        inputs[name] = array
    return inputs
