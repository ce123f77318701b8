"""The integer semantics of the CMSIS-NN paper's power-of-two q7 scheme (`--scheme q7`).

Every tensor is q7 with a power-of-two scale 2^-frac. A linear layer computes, in 32 bits,
`acc = (bias << bias_shift) + (1 << out_shift >> 1) + sum(w * x)` and writes
`sat8(acc >> out_shift)` (an arithmetic shift: floor), the rounding constant being the legacy
kernels' NN_ROUND. Pools, ReLU and reshape keep the input's format; softmax is the legacy
base-2 approximation (output 2^-7); sigmoid / tanh index a 256-entry q7 table with the input's
top bits. These are the semantics of CMSIS_5's legacy q7 kernels (arm_convolve_HWC_q7_*,
arm_depthwise_separable_conv_HWC_q7, arm_fully_connected_q7_opt, arm_maxpool_q7_HWC,
arm_avepool_q7_HWC, arm_relu_q7, arm_softmax_q7, arm_nn_activations_direct_q7), written from
their description and checked against them by the tests (tests/c_export/test_q7_scheme.py).

The one place the legacy kernels differ between builds is the average pool: with the DSP
extension (Cortex-M4/M7) it averages along x, truncating, then along y, truncating again;
without it (host, Cortex-M0/M3) it truncates once over the whole window. `avgpool` selects
("dsp" or "scalar"); qconvert's portable q7 kernel follows the build as the legacy one does.

`Q7Layer` is one layer of a q7 model (a chain: each layer reads the previous one's output);
`run_q7(layers, x)` runs a batch (N, ...) of q7 inputs through them, vectorised over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

AVGPOOL_PATHS = ("dsp", "scalar")


@dataclass
class Q7Layer:
    """One layer of a q7 model. `kind`: conv, depthwise, fc, maxpool, avgpool, relu, softmax,
    sigmoid, tanh, reshape. Shapes are per sample (H, W, C) or (N,); `weights` int8 (conv OHWI,
    depthwise HWC, fc [out][in]), `bias` int8; `kernel`, `stride`, `pad` are (y, x) with `pad`
    the top / left zero padding (bottom / right padding is what the output size implies);
    `relu` a fused ReLU (arm_relu_q7 after the layer); `in_frac` / `out_frac` the fraction bits
    of the input / output, `w_frac` / `b_frac` those of the weights / bias."""

    kind: str
    name: str
    in_shape: tuple
    out_shape: tuple
    in_frac: int
    out_frac: int
    weights: np.ndarray | None = None
    bias: np.ndarray | None = None
    w_frac: int = 0
    b_frac: int = 0
    kernel: tuple = (1, 1)
    stride: tuple = (1, 1)
    pad: tuple = (0, 0)
    relu: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def bias_shift(self) -> int:
        """Left shift of the bias into the accumulator's format: in + w - bias fraction bits."""
        return self.in_frac + self.w_frac - self.b_frac

    @property
    def out_shift(self) -> int:
        """Right shift of the accumulator into the output's format: in + w - out fraction bits."""
        return self.in_frac + self.w_frac - self.out_frac


def _requantize(acc: np.ndarray, layer: Q7Layer) -> np.ndarray:
    """sat8(((bias << bias_shift) + NN_ROUND + acc) >> out_shift), in 32-bit arithmetic."""
    shift = layer.out_shift
    base = (layer.bias.astype(np.int64) << layer.bias_shift) + ((1 << shift) >> 1)
    total = (acc.astype(np.int64) + base).astype(np.int32).astype(np.int64)  # 32-bit wrap
    out = np.clip(total >> shift, -128, 127).astype(np.int8)
    return np.maximum(out, 0) if layer.relu else out


def _windows(x: np.ndarray, layer: Q7Layer, fill: int = 0) -> np.ndarray:
    """(N, OH, OW, KH, KW, C) windows of the NHWC batch `x`, zero-padded top / left by `pad`
    and bottom / right as far as the output needs."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (ph, pw) = layer.kernel, layer.stride, layer.pad
    oh, ow = layer.out_shape[0], layer.out_shape[1]
    need_h, need_w = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    padded = np.full((n, max(need_h, ph + h), max(need_w, pw + w), c), fill, dtype=x.dtype)
    padded[:, ph:ph + h, pw:pw + w] = x
    v = np.lib.stride_tricks.sliding_window_view(padded[:, :need_h, :need_w], (kh, kw), axis=(1, 2))
    # v: (N, need_h - kh + 1, need_w - kw + 1, C, KH, KW)
    return v[:, ::sh, ::sw][:, :oh, :ow].transpose(0, 1, 2, 4, 5, 3)


def conv(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """arm_convolve_HWC_q7_basic / _fast / _RGB (one result; they differ in speed only)."""
    win = _windows(x.astype(np.int32), layer)
    n, oh, ow = win.shape[:3]
    cols = win.reshape(n * oh * ow, -1)
    acc = cols @ layer.weights.reshape(layer.weights.shape[0], -1).astype(np.int32).T
    return _requantize(acc, layer).reshape(n, oh, ow, -1)


def depthwise(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """arm_depthwise_separable_conv_HWC_q7: per channel, weights [KH][KW][C]."""
    win = _windows(x.astype(np.int32), layer)
    acc = np.einsum("nyxijc,ijc->nyxc", win, layer.weights.astype(np.int32))
    return _requantize(acc, layer)


def fc(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """arm_fully_connected_q7(_opt): weights [out][in] (the _opt kernel reads them 1x4)."""
    acc = x.reshape(x.shape[0], -1).astype(np.int32) @ layer.weights.astype(np.int32).T
    return _requantize(acc, layer)


def maxpool(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """arm_maxpool_q7_HWC over valid (unpadded) windows."""
    return _windows(x, layer, fill=-128).max(axis=(3, 4))


def _trunc_div(total: np.ndarray, count: int) -> np.ndarray:
    """C integer division (toward zero) of an int array by a positive count."""
    q = np.abs(total) // count
    return np.where(total < 0, -q, q)


def avgpool(layer: Q7Layer, x: np.ndarray, path: str = "dsp") -> np.ndarray:
    """arm_avepool_q7_HWC over valid windows: "dsp" averages along x then y, truncating each
    time (the Cortex-M4 build); "scalar" truncates once (the host / Cortex-M0 build)."""
    win = _windows(x.astype(np.int32), layer)
    kh, kw = layer.kernel
    if path == "scalar":
        return _trunc_div(win.sum(axis=(3, 4)), kh * kw).astype(np.int8)
    rows = _trunc_div(win.sum(axis=4), kw)
    return _trunc_div(rows.sum(axis=3), kh).astype(np.int8)


def softmax(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """arm_softmax_q7 over each sample: weights 2^clamp(x - max + 8, 0, 7), output
    (2^20 / their sum) >> clamp(5 + max - x, 0, 31), saturated to q7 (format 2^-7): a base-2
    softmax of the q7 integers, small values dropped."""
    v = x.reshape(x.shape[0], -1).astype(np.int32)
    base = v.max(axis=1, keepdims=True) - 8
    total = (1 << np.clip(v - base, 0, 7)).sum(axis=1, keepdims=True)
    out_base = (1 << 20) // total
    shift = np.clip(13 + base - v, 0, 31)
    return np.clip(out_base >> shift, -128, 127).astype(np.int8).reshape(x.shape)


def _table(kind: str) -> np.ndarray:
    """The 256-entry q7 table of sigmoid / tanh indexed by an unsigned byte read as a signed
    q3.4 value: round(f(v / 16) * 128) saturated to q7."""
    v = np.arange(256).astype(np.uint8).view(np.int8).astype(np.float64) / 16.0
    f = 1.0 / (1.0 + np.exp(-v)) if kind == "sigmoid" else np.tanh(v)
    return np.clip(np.round(f * 128.0), -128, 127).astype(np.int8)


def activation_table(kind: str) -> np.ndarray:
    """The q7 sigmoid or tanh table (see `_table`)."""
    return _table(kind)


def table_activation(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """arm_nn_activations_direct_q7: table[(uint8)(x >> (3 - int_width))] with
    int_width = 7 - in_frac."""
    shift = 3 - (7 - layer.in_frac)
    index = (x.astype(np.int32) >> shift).astype(np.uint8)
    return _table(layer.kind)[index]


def relu(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """arm_relu_q7."""
    return np.maximum(x, 0)


def reshape(layer: Q7Layer, x: np.ndarray) -> np.ndarray:
    """A reshape: the same bytes."""
    return x.reshape((x.shape[0], *layer.out_shape))


KERNELS = {"conv": conv, "depthwise": depthwise, "fc": fc, "maxpool": maxpool,
           "softmax": softmax, "sigmoid": table_activation, "tanh": table_activation,
           "relu": relu, "reshape": reshape}


def run_q7(layers: list, x: np.ndarray, avgpool_path: str = "dsp", observe=None) -> np.ndarray:
    """Run the q7 `layers` over the int8 batch `x` (N, *in_shape); `observe(layer, out)` sees
    each layer's output. Returns the last layer's int8 output."""
    if avgpool_path not in AVGPOOL_PATHS:
        raise ValueError(f"avgpool path {avgpool_path!r}; one of {AVGPOOL_PATHS}")
    out = np.asarray(x, dtype=np.int8)
    for layer in layers:
        if layer.kind == "avgpool":
            out = avgpool(layer, out, avgpool_path)
        else:
            out = KERNELS[layer.kind](layer, out).reshape((out.shape[0], *layer.out_shape))
        if observe is not None:
            observe(layer, out)
    return out
