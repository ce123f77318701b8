"""Bias correction: fold the expected output error that weight rounding causes into the bias.

A layer computes `y_c = sum_k W[c, k] x_k + b_c`; int8 computes it with the rounded weights
`Wq = s_w * round(W / s_w)`. Over the data the expected difference per output channel is
`E[y_c - yq_c] = sum_k (W - Wq)[c, k] E[x_k]`: a constant per channel, nonzero whenever the
rounding errors of a channel do not cancel against its inputs' means (small depthwise kernels,
inputs that are never negative after a ReLU). Adding it to the bias before the bias is quantized
removes it, at no cost at run time (Nagel et al., "Data-Free Quantization", empirical variant:
E[x] measured on the calibration data).

`E[x_k]` is per input channel for convolutions (the mean over batch and positions; the kernel's
taps all see the same channel mean, which ignores the zero padding at the borders) and per
input feature for fully connected layers. `ChannelMeans` gathers these means during calibration
(one reduction per layer input and batch); `weight_error_bias` contracts the weight error with
them for each layer kind. MatMul has no bias to fold into and is left alone.
"""

from __future__ import annotations

import numpy as np

from .params import _along
from .tensor_stats import tensor_stats


def _mean_key(graph, node, fmt: str):
    """How a layer's input is reduced to its means: ("axis", channel axis) for convolutions,
    ("rows", K) for fully connected layers (the input flattened to rows of K features);
    None for layers not corrected."""
    w = graph.constant(node.inputs[1]) if len(node.inputs) > 1 else None
    if w is None:
        return None
    if node.op in ("Conv2D", "DepthwiseConv2D"):
        return ("axis", 1 if fmt == "onnx" else 3)
    if node.op == "FullyConnected":
        return ("rows", int(w.shape[1]))
    if node.op == "Gemm" and not node.attrs.get("transA", 0):
        return ("rows", int(w.shape[1] if node.attrs.get("transB", 0) else w.shape[0]))
    return None


class ChannelMeans:
    """Per-channel means of the inputs of a graph's weighted layers, gathered batch by batch
    (`observe`, an executor hook); `means()` gives {layer output name: mean array}."""

    def __init__(self, graph, fmt: str):
        from qconvert import schemas

        self.wanted: dict = {}   # input tensor -> {key: [layer outputs]}
        for node in graph.nodes:
            if node.opaque or schemas.get(node.op).int8 != "per_channel_weights":
                continue
            key = _mean_key(graph, node, fmt)
            if key is not None:
                self.wanted.setdefault(node.inputs[0], {}).setdefault(key, []).append(
                    node.outputs[0])
        self.sums: dict = {}

    def summed_by_stats(self, name: str, array: np.ndarray) -> bool:
        """True when `observe` can take the channel sums of `array` from `tensor_stats` (an
        NCHW layer input: channels on axis 1, `tensor_stats.planes_summable`)."""
        from .tensor_stats import planes_summable

        return ("axis", 1) in self.wanted.get(name, ()) and planes_summable(array)

    def observe(self, name: str, array: np.ndarray, channel_sums=None) -> None:
        """Add one batch of tensor `name`; `channel_sums`: its sums over every axis but 1,
        when already taken (`tensor_stats`)."""
        keys = self.wanted.get(name)
        if keys is None or array.dtype.kind != "f":
            return
        for key in keys:
            kind, value = key
            # float32 sums (numpy's pairwise summation: relative error ~1e-7 here), then
            # accumulated across batches in float64; half the time of float64 sums
            if key == ("axis", 1) and self.summed_by_stats(name, array):
                if channel_sums is None:
                    channel_sums = tensor_stats(array, False, True).channel_sums
                total = channel_sums.astype(np.float64)
                count = array.size // array.shape[value]
            elif kind == "axis":
                axes = tuple(i for i in range(array.ndim) if i != value)
                total = array.sum(axis=axes).astype(np.float64)
                count = array.size // array.shape[value]
            else:
                rows = array.reshape(-1, value)
                total = rows.sum(axis=0).astype(np.float64)
                count = rows.shape[0]
            s, n = self.sums.get((name, key), (0.0, 0))
            self.sums[(name, key)] = (s + total, n + count)

    def means(self) -> dict:
        out = {}
        for (name, key), (total, count) in self.sums.items():
            if count:
                for layer in self.wanted[name][key]:
                    out[layer] = total / count
        return out


ERROR_BLOCK = 1 << 16  # weights per block of `_error_sums` (float64 work arrays of 512 KB)


def _error_sums(w: np.ndarray, w_q: np.ndarray, s_w: np.ndarray, scale_axis, axes) -> np.ndarray:
    """(W - Wq * s) in float64 summed over `axes` (not axis 0), block by block of rows (axis
    0): the float64 work array stays in cache instead of a float64 copy of the whole layer
    (19 MB for a 512 x 512 x 3 x 3 conv); each row's values and sums are those of the whole."""
    s = _along(s_w.astype(np.float64), scale_axis, w.ndim)
    per_row = s.ndim and s.shape[0] > 1  # the scales run along axis 0
    rows = max(1, ERROR_BLOCK // max(1, w[:1].size))
    out = np.empty((w.shape[0],) + tuple(n for i, n in enumerate(w.shape) if i and i not in axes))
    for i in range(0, w.shape[0], rows):
        part = slice(i, i + rows)
        delta = np.multiply(w_q[part], s[part] if per_row else s, dtype=np.float64)
        np.subtract(w[part], delta, out=delta, dtype=np.float64)
        out[part] = delta.sum(axis=axes)
    return out


def weight_error_bias(node, fmt: str, w: np.ndarray, w_q: np.ndarray, s_w: np.ndarray,
                      scale_axis, mean: np.ndarray) -> np.ndarray | None:
    """The per-output-channel `sum_k (W - Wq)[c, k] E[x_k]` of the module docstring (float64),
    or None when the layer's shapes do not fit its input's means. `scale_axis` is the axis the
    weight scales run along (None: one scale)."""
    w = np.asarray(w)
    if w.dtype.kind != "f":
        w = w.astype(np.float64)
    mean = np.asarray(mean, np.float64)
    if node.op == "Conv2D":
        spatial = tuple(range(2, w.ndim)) if fmt == "onnx" else tuple(range(1, w.ndim - 1))
        d = _error_sums(w, w_q, s_w, scale_axis, spatial)  # (O, I), any number of spatial axes
        out_c, in_c = d.shape
        if mean.size % in_c or out_c % (mean.size // in_c):
            return None
        groups = mean.size // in_c
        per = d.reshape(groups, out_c // groups, in_c)
        return np.einsum("gpi,gi->gp", per, mean.reshape(groups, in_c)).reshape(out_c)
    # W - Wq * s in float64, with one float64 array (no float64 copies of W and Wq)
    delta = np.multiply(w_q, _along(s_w.astype(np.float64), scale_axis, w.ndim),
                        dtype=np.float64)
    np.subtract(w, delta, out=delta, dtype=np.float64)
    if node.op == "DepthwiseConv2D":  # [1, H, W, C_out], C_out = C_in * multiplier
        d = delta.sum(axis=(0, 1, 2))
        if d.size % mean.size:
            return None
        return d * mean[np.arange(d.size) // (d.size // mean.size)]
    if node.op == "FullyConnected":
        return delta @ mean if delta.shape[1] == mean.size else None
    if node.op == "Gemm":
        d = delta if node.attrs.get("transB", 0) else delta.T  # (N, K)
        return d @ mean if d.shape[1] == mean.size else None
    return None


def corrected_layer(w: np.ndarray, bias: np.ndarray, w_q: np.ndarray, s_w: np.ndarray, widened,
                    s_in, channel_axis: int, per_channel: bool) -> tuple:
    """(w_q, s_w, b_q, widened) with the corrected float `bias` quantized against the weights
    already quantized; when that bias would not fit int32 beside the worst-case accumulator,
    `quantize_layer` chooses the weight scales again for it, as it always does."""
    from qconvert.int8.rounding import round_half_away
    from .params import INT32_MAX, bias_scale, quantize_layer

    scale = np.broadcast_to(bias_scale(s_in, s_w).astype(np.float64), bias.shape)
    b_q = round_half_away(bias / scale)
    other = tuple(i for i in range(w_q.ndim) if i != channel_axis % w_q.ndim)
    worst = np.abs(w_q).sum(axis=other, dtype=np.int64) * 255
    if np.all(np.abs(b_q) + worst <= INT32_MAX):
        return w_q, s_w, b_q.astype(np.int32), widened
    return quantize_layer(w, bias, s_in, channel_axis, per_channel)
