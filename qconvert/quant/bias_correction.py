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
(one reduction per layer input and batch, and each of the first samples' own means for
`propagated_bias`); `weight_error_bias` contracts the weight error with them for each layer kind
(`tap_sums`, `contract`). The error a layer inherits from the quantized layers before it is the
other part of its mean output error: `propagated_bias` removes it, on the written model. MatMul
has no bias to fold into and is left alone.
"""

from __future__ import annotations

import numpy as np

from .params import _along
from .tensor_stats import tensor_stats


def mean_key(graph, node, fmt: str):
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


def channel_mean_sums(array: np.ndarray, key) -> tuple:
    """(float64 sums per channel or feature, count of values summed) of `array` reduced as
    `key` says (`mean_key`)."""
    kind, value = key
    # float32 sums (numpy's pairwise summation: relative error ~1e-7 here), then accumulated
    # across batches in float64; half the time of float64 sums
    if kind == "axis":
        axes = tuple(i for i in range(array.ndim) if i != value)
        return array.sum(axis=axes).astype(np.float64), array.size // array.shape[value]
    rows = array.reshape(-1, value)
    return rows.sum(axis=0).astype(np.float64), rows.shape[0]


def sample_means(array: np.ndarray, key) -> np.ndarray:
    """(N, channels) float64: each sample's (axis 0) per-channel means of `array`, reduced as
    `key` says (`mean_key`)."""
    kind, value = key
    n = len(array)
    if kind == "axis":
        if value % array.ndim == 0:
            raise ValueError("the channel axis is the sample axis")
        moved = np.moveaxis(array, value, -1).reshape(n, -1, array.shape[value])
    else:
        moved = array.reshape(n, -1, value)
    return moved.sum(axis=1, dtype=np.float32).astype(np.float64) / moved.shape[1]


class ChannelMeans:
    """Per-channel means of the inputs of a graph's weighted layers, gathered batch by batch
    (`observe`, an executor hook); `means()` gives {layer output name: mean array} over every
    sample, `head_means()` each of the first `head` samples' own means ({layer output:
    (head, channels)}: the float side of `propagated_bias`, paired sample for sample with the
    int8 model's run on those samples). The sample axis is axis 0; a tensor without the batch
    there (its axis 0 is not the feeds' sample count) gets no head means."""

    first_input = None  # defaults of an instance without head means
    head = done = batch = 0

    def __init__(self, graph, fmt: str, head: int = 0):
        from qconvert import schemas

        self.wanted: dict = {}   # input tensor -> {key: [layer outputs]}
        for node in graph.nodes:
            if node.opaque or schemas.get(node.op).int8 != "per_channel_weights":
                continue
            key = mean_key(graph, node, fmt)
            if key is not None:
                self.wanted.setdefault(node.inputs[0], {}).setdefault(key, []).append(
                    node.outputs[0])
        self.first_input = graph.inputs[0] if graph.inputs else None
        self.sums: dict = {}
        self.head = head
        self.head_rows: dict = {}  # (input, key) -> [(samples, channels) arrays]
        self.done = 0    # samples of the batches before the current one
        self.batch = 0   # samples in the current batch (its first graph input's axis 0)

    def summed_by_stats(self, name: str, array: np.ndarray) -> bool:
        """True when `observe` can take the channel sums of `array` from `tensor_stats` (an
        NCHW layer input: channels on axis 1, `tensor_stats.planes_summable`)."""
        from .tensor_stats import planes_summable

        return ("axis", 1) in self.wanted.get(name, ()) and planes_summable(array)

    def observe(self, name: str, array: np.ndarray, channel_sums=None) -> None:
        """Add one batch of tensor `name`; `channel_sums`: its sums over every axis but 1,
        when already taken (`tensor_stats`)."""
        if name == self.first_input and array.ndim:  # a new batch: graph inputs come first
            self.done += self.batch
            self.batch = int(array.shape[0])
        keys = self.wanted.get(name)
        if keys is None or array.dtype.kind != "f":
            return
        take = self.head - self.done
        head = (array[:take] if take > 0 and array.ndim > 1 and array.shape[0] == self.batch
                else None)
        for key in keys:
            if key == ("axis", 1) and self.summed_by_stats(name, array):
                if channel_sums is None:
                    channel_sums = tensor_stats(array, False, True).channel_sums
                total = channel_sums.astype(np.float64)
                count = array.size // array.shape[1]
            else:
                total, count = channel_mean_sums(array, key)
            s, n = self.sums.get((name, key), (0.0, 0))
            self.sums[(name, key)] = (s + total, n + count)
            if head is not None and (key[0] == "rows" or key[1] % array.ndim):
                self.head_rows.setdefault((name, key), []).append(sample_means(head, key))

    def means(self) -> dict:
        out = {}
        for (name, key), (total, count) in self.sums.items():
            if count:
                for layer in self.wanted[name][key]:
                    out[layer] = total / count
        return out

    def head_means(self) -> dict:
        """{layer output: (head, channels) per-sample means of its input} for the layers whose
        input carried all of the first `head` samples (none when `head` is 0)."""
        out = {}
        for (name, key), rows in self.head_rows.items():
            rows = np.concatenate(rows)
            if self.head and len(rows) == self.head:
                for layer in self.wanted[name][key]:
                    out[layer] = rows
        return out


def tap_sums(node, fmt: str, w: np.ndarray) -> np.ndarray:
    """A layer's weights summed over their kernel taps, output channel first: (O, I) for a
    convolution (I per group), (C_out,) for a depthwise one, (N, K) for fully connected
    layers. Contracted with the input's channel means (`contract`) this is the layer's mean
    output per channel when every tap sees its channel's mean (padding ignored)."""
    if node.op == "DepthwiseConv2D":  # [1, H, W, C_out], C_out = C_in * multiplier
        return w.sum(axis=(0, 1, 2))
    if node.op == "Conv2D":
        spatial = tuple(range(2, w.ndim)) if fmt == "onnx" else tuple(range(1, w.ndim - 1))
        return w.sum(axis=spatial)  # (O, I), any number of spatial axes
    if node.op == "Gemm" and not node.attrs.get("transB", 0):
        return w.T  # (N, K)
    return w


def contract(node, sums: np.ndarray, mean: np.ndarray) -> np.ndarray | None:
    """sum_k sums[c, k] mean[k] per output channel c for `tap_sums` of `node`'s weights, or
    None when the shapes do not fit the input's means (grouped convolutions: each group reads
    its own slice of the channels; depthwise: channel c reads input c // multiplier). `mean`
    may carry leading axes (one row of means per sample): the result has them too."""
    mean = np.asarray(mean, np.float64)
    lead, size = mean.shape[:-1], mean.shape[-1]
    if node.op == "DepthwiseConv2D":
        if sums.size % size:
            return None
        return sums * mean[..., np.arange(sums.size) // (sums.size // size)]
    if node.op == "Conv2D":
        out_c, in_c = sums.shape
        if size % in_c or out_c % (size // in_c):
            return None
        groups = size // in_c
        per = sums.reshape(groups, out_c // groups, in_c)
        return np.einsum("gpi,...gi->...gp", per,
                         mean.reshape(*lead, groups, in_c)).reshape(*lead, out_c)
    if node.op in ("FullyConnected", "Gemm"):
        return mean @ sums.T if sums.shape[1] == size else None
    return None


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
        # (O, I), any number of spatial axes
        return contract(node, _error_sums(w, w_q, s_w, scale_axis, spatial), mean)
    if node.op not in ("DepthwiseConv2D", "FullyConnected", "Gemm"):
        return None
    # W - Wq * s in float64, with one float64 array (no float64 copies of W and Wq)
    delta = np.multiply(w_q, _along(s_w.astype(np.float64), scale_axis, w.ndim),
                        dtype=np.float64)
    np.subtract(w, delta, out=delta, dtype=np.float64)
    return contract(node, tap_sums(node, fmt, delta), mean)


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
