"""The layers fusion passes fold into, and the one rewrite they all share.

A *linear layer* computes `y = W (*) x + b` with one weight slice and one bias per output channel:
Conv2D (plain, grouped, depthwise as group == channels), TFLite DepthwiseConv2D, ConvTranspose,
TFLite FullyConnected, ONNX Gemm, and ONNX MatMul with a constant 2-D weight (no bias slot).
`LAYERS` is the table of how each op keeps its output channels: where they lie in the weight array
(`scale_weights`) and on which axis of the output (`out_axis`: 1 for NCHW, -1 for the last).

`linear_view(graph, node)` describes a node that can absorb a following per-channel affine map
`y' = scale * y + shift`, or returns None when it cannot (weights or bias not constant, not
float, quantized, or a fused activation already applied: an affine op after a clamp does not
commute with it). `channel_vector` decides whether a constant is per-channel for the layer
(design.md: it broadcasts along the channel axis and nowhere else, never enlarges the output;
scalars fold everywhere). `fold_affine` computes `W' = W * scale` along the output channels and
`b' = b * scale + shift` in float64 and casts once; constants read elsewhere are copied, not
changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from qconvert.ir import Graph, Node, Tensor


def _times(w: np.ndarray, s: np.ndarray, dtype) -> np.ndarray:
    """w * s computed in float64 and, with `dtype`, rounded once into a new array of that type:
    the same values as `(w.astype(float64) * s).astype(dtype)` without the float64 copies;
    large weights in pieces of rows (axis 0) shared among the CPUs (`executor.parallel`)."""
    from qconvert.executor.parallel import SPAN, on_workers, spans

    if dtype is None:
        return w.astype(np.float64) * s
    out = np.empty(np.broadcast_shapes(w.shape, s.shape), dtype)
    if out.ndim == 0 or out.size < 4 * SPAN:
        return np.multiply(w, s, out=out, dtype=np.float64, casting="unsafe")

    def rows(a, i, j):  # the operand's part for output rows i:j (all of it when broadcast)
        return a[i:j] if a.ndim == out.ndim and a.shape[0] == out.shape[0] else a

    def run(parts):
        for i, j in parts:
            np.multiply(rows(w, i, j), rows(s, i, j), out=out[i:j], dtype=np.float64,
                        casting="unsafe")

    on_workers(run, spans(out.shape[0], max(1, SPAN // max(1, out[0].size))))
    return out


def _scale_axis0(w: np.ndarray, s: np.ndarray, node: Node, dtype=None) -> np.ndarray:
    return _times(w, s.reshape((-1,) + (1,) * (w.ndim - 1)), dtype)


def _scale_last(w: np.ndarray, s: np.ndarray, node: Node, dtype=None) -> np.ndarray:
    return _times(w, s, dtype)


def _scale_axis1(w: np.ndarray, s: np.ndarray, node: Node, dtype=None) -> np.ndarray:
    return _times(w, s.reshape((1, -1) + (1,) * (w.ndim - 2)), dtype)


def _scale_conv_transpose(w: np.ndarray, s: np.ndarray, node: Node, dtype=None) -> np.ndarray:
    # ONNX ConvTranspose weights are [C_in, C_out / group, k...]; output channel
    # g * (C_out / group) + j lives at column j of the rows of group g.
    group = int(node.attrs.get("group", 1))
    cin, cout_g = w.shape[0], w.shape[1]
    grouped = w.reshape((group, cin // group, cout_g) + w.shape[2:])
    s = s.reshape((group, 1, cout_g) + (1,) * (w.ndim - 2))
    return _times(grouped, s, dtype).reshape(w.shape)


def _channels_axis0(w, node):
    return w.shape[0]


def _channels_last(w, node):
    return w.shape[-1]


def _channels_axis1(w, node):
    return w.shape[1]


def _channels_conv_transpose(w, node):
    return w.shape[1] * int(node.attrs.get("group", 1))


def _gemm_trans_b(node) -> bool:
    return bool(node.attrs.get("transB", 0))


@dataclass(frozen=True)
class LayerRule:
    """How one op keeps its output channels (see module docstring)."""

    channels: Callable          # (weights, node) -> number of output channels
    scale_weights: Callable     # (weights, per-channel scale, node, dtype) -> new weights:
                                # products in float64, cast to dtype (None: float64)
    has_bias: bool = True
    min_weight_rank: int = 2


_CONV = LayerRule(_channels_axis0, _scale_axis0, min_weight_rank=3)
LAYERS = {
    "Conv2D": _CONV,
    "DepthwiseConv2D": LayerRule(_channels_last, _scale_last, min_weight_rank=3),
    "ConvTranspose": LayerRule(_channels_conv_transpose, _scale_conv_transpose, min_weight_rank=3),
    "FullyConnected": LayerRule(_channels_axis0, _scale_axis0),
    "MatMul": LayerRule(_channels_axis1, _scale_axis1, has_bias=False),
}
# Gemm's weight orientation depends on transB: B is [K, N] (channels on axis 1) or [N, K].
_GEMM = {False: LayerRule(_channels_axis1, _scale_axis1), True: LayerRule(_channels_axis0, _scale_axis0)}


@dataclass
class LinearView:
    """A linear layer that may absorb an affine map; `bias` is float64 [C] (zeros if absent)."""

    node: Node
    rule: LayerRule
    weights: np.ndarray
    bias: np.ndarray | None
    channels: int
    out_rank: int | None
    out_axis: int  # 1 (NCHW) or -1 (last axis)

    @property
    def output(self) -> str:
        return self.node.outputs[0]


def _rule(node: Node) -> LayerRule | None:
    if node.op == "Gemm":
        return _GEMM[_gemm_trans_b(node)]
    return LAYERS.get(node.op)


def is_float(t: Tensor) -> bool:
    return t.dtype in ("float16", "float32", "float64") and t.quant is None


def linear_view(graph: Graph, node: Node) -> LinearView | None:
    """The LinearView of `node`, or None when it cannot absorb an affine op (module docstring)."""
    rule = _rule(node)
    if rule is None or node.opaque or node.attrs.get("activation", "NONE") != "NONE":
        return None
    if len(node.outputs) != 1 or len(node.inputs) < 2:
        return None
    w_t = graph.tensors.get(node.inputs[1])
    out_t = graph.tensors[node.outputs[0]]
    if w_t is None or w_t.data is None or not is_float(w_t) or not is_float(out_t):
        return None
    if w_t.dtype != out_t.dtype or w_t.data.ndim < rule.min_weight_rank:
        return None
    if node.op == "MatMul" and w_t.data.ndim != 2:
        return None
    channels = int(rule.channels(w_t.data, node))
    if channels == 0:
        return None
    bias = None
    b_name = node.inputs[2] if len(node.inputs) > 2 else None
    if b_name is not None:
        b_t = graph.tensors[b_name]
        if b_t.data is None or not is_float(b_t):
            return None
        b = b_t.data
        if node.op == "Gemm":  # C must act as a per-channel bias: (), (1,), (N,) or (1, N)
            if b.ndim > 2 or (b.ndim == 2 and b.shape[0] != 1) or b.size not in (1, channels):
                return None
            b = b.astype(np.float64).reshape(-1) * float(node.attrs.get("beta", 1.0))
        elif b.shape != (channels,):
            return None
        bias = np.broadcast_to(b.astype(np.float64).reshape(-1), (channels,))
    rank = len(out_t.shape) if out_t.shape is not None else None
    out_axis = -1
    if node.attrs.get("layout", "NHWC") == "NCHW":
        out_axis = 1
        if rank is None and node.attrs.get("kernel_shape") is not None:
            rank = 2 + len(node.attrs["kernel_shape"])
        if rank is None:
            return None
    return LinearView(node, rule, w_t.data, bias, channels, rank, out_axis)


def channel_vector(k: np.ndarray, view: LinearView) -> np.ndarray | None:
    """`k` as a float64 vector of the layer's channels, or None if it is not per-channel for it.

    Per channel means: after numpy's right-aligned broadcasting against the layer's output, `k`
    varies along the output-channel axis only, with size 1 or C there, and has no more axes than
    the output (more would enlarge the output). For NCHW that is [C,1,1] or [1,C,1,1], never [C].
    """
    c = view.channels
    rank = view.out_rank
    if rank is None:  # channels last, rank unknown: only a scalar or a [C] vector is safe
        if k.ndim > 1 or k.size not in (1, c):
            return None
        return np.broadcast_to(k.astype(np.float64).reshape(-1), (c,))
    if k.ndim > rank:
        return None
    shape = (1,) * (rank - k.ndim) + tuple(k.shape)
    axis = view.out_axis % rank
    if any(d != 1 for i, d in enumerate(shape) if i != axis) or shape[axis] not in (1, c):
        return None
    return np.broadcast_to(k.astype(np.float64).reshape(-1), (c,))


def same_output_shape(graph: Graph, a: str, b: str) -> bool:
    """False when both tensors have static shapes and they differ (an op that broadcasts)."""
    ta, tb = graph.tensors[a], graph.tensors[b]
    if ta.static_shape and tb.static_shape:
        return tuple(ta.shape) == tuple(tb.shape)
    return ta.shape is None or tb.shape is None or len(ta.shape) == len(tb.shape)


def fold_affine(graph: Graph, view: LinearView, scale, shift) -> None:
    """Rewrite the layer so it computes `scale * y + shift` (per-channel float64 vectors or None).

    A weight or bias read by another node too is copied, not changed (the use index counts the
    readers).
    """
    node, dtype = view.node, view.weights.dtype
    inputs = list(node.inputs)
    if scale is not None:
        w = view.weights
        if node.op == "Gemm" and float(node.attrs.get("alpha", 1.0)) != 1.0:
            w = w.astype(np.float64) * float(node.attrs["alpha"])
        if node.op == "Gemm":
            node.attrs["alpha"] = 1.0
        new_w = view.rule.scale_weights(w, np.asarray(scale, np.float64), node, dtype)
        inputs[1] = graph.set_constant(inputs[1], new_w)
    bias = view.bias if view.bias is not None else np.zeros(view.channels)
    if scale is not None:
        bias = bias * scale
    if shift is not None:
        bias = bias + shift
    if view.bias is None and shift is None and scale is not None:
        graph.set_inputs(node, inputs)
        return  # no bias before, none needed after
    new_b = bias.astype(dtype)
    if node.op == "Gemm":
        node.attrs["beta"] = 1.0
    while len(inputs) < 3:
        inputs.append(None)
    if inputs[2] is None:
        inputs[2] = graph.add_constant(f"{node.name or node.outputs[0]}_bias", new_b)
    else:
        inputs[2] = graph.set_constant(inputs[2], new_b)
    graph.set_inputs(node, inputs)
    view.bias = bias
