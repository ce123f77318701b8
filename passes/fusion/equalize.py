"""Cross-layer equalization (Nagel et al., "Data-Free Quantization", section 4.1).

Pattern: layer A -> [Relu | MaxPool]* -> layer B, where A is a convolution (plain, grouped or
depthwise, either format) or a TFLite fully connected layer, and B reads A's output channels as
its input channels one to one: a plain convolution, a depthwise convolution with depth
multiplier 1, or a fully connected layer after a fully connected A. ReLU and max pooling commute
with a positive per-channel scale (`relu(x / s) = relu(x) / s`), so dividing A's output channel c
by `s_c` and multiplying B's input channel c by `s_c` leaves the network's function unchanged
(exactly, in real arithmetic). With `r1_c` the largest |weight| of A's output channel c and
`r2_c` that of B's input channel c, `s_c = sqrt(r1_c / r2_c)` makes both `sqrt(r1_c r2_c)`: the
channels' ranges are equalized, so per-tensor activations and B's per-output-channel weight
scales no longer waste int8 steps on channels that are orders of magnitude smaller than others
(MobileNet's depthwise layers). Pairs are equalized round after round (a layer may be B of one
pair and A of the next) until no scale moves by more than 1e-4, at most `MAX_ROUNDS`.

Conditions (else the pair is skipped, never an error): A's fused activation is NONE or RELU
(RELU6 and other clamps do not commute with a scale); every tensor from A to B has exactly one
reader and is not a graph output nor read by a subgraph (`Graph.sole_reader`); weights (and biases) are float constants; the channel counts
match; a channel whose weights are all zero in A or B keeps scale 1. Weights read by other
layers are copied, not changed; arithmetic in float64, cast once.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from ..registry import PassContext, register_pass
from .linear_layer import LinearView, is_float, _rule, fold_affine

MAX_ROUNDS = 50
TOLERANCE = 1e-4
_PASS_THROUGH = frozenset({"Relu", "MaxPool"})
_FIRST = frozenset({"Conv2D", "DepthwiseConv2D", "FullyConnected"})


def _weights(graph: Graph, node):
    w = graph.tensors.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if w is None or w.data is None or not is_float(w) or node.opaque:
        return None
    b = node.inputs[2] if len(node.inputs) > 2 else None
    if b is not None and (graph.tensors[b].data is None or not is_float(graph.tensors[b])):
        return None
    return w.data


def _out_axis(node, fmt_onnx: bool) -> int:
    """The output-channel axis of A's weights."""
    return 3 if node.op == "DepthwiseConv2D" else 0


def _in_axis(node, w, channels: int):
    """The axis of B's weights holding its input channels, or None when B does not read them
    one to one."""
    onnx = node.attrs.get("layout") == "NCHW"
    if node.op == "Conv2D":
        group = int(node.attrs.get("group", 1))
        if group == 1:
            return 1 if onnx else 3
        if onnx and group == channels and w.shape[0] == channels and w.shape[1] == 1:
            return 0  # depthwise, multiplier 1
        return None
    if node.op == "DepthwiseConv2D":
        return 3 if w.shape[3] == channels else None
    if node.op == "FullyConnected":
        return 1
    return None


def _pairs(graph: Graph) -> list:
    """[(A, B, chain tensors)] of the module docstring's pattern."""
    found = []
    for a in graph.nodes:
        if a.op not in _FIRST or a.attrs.get("activation", "NONE") not in ("NONE", "RELU"):
            continue
        wa = _weights(graph, a)
        if wa is None or wa.ndim < 2:
            continue
        channels = wa.shape[_out_axis(a, False)]
        t = a.outputs[0]
        b = None
        while True:
            nxt = graph.sole_reader(t)  # no other reader, not a graph output, not observed
            if nxt is None:
                break
            if nxt.op in _PASS_THROUGH and not nxt.opaque and nxt.inputs[0] == t:
                t = nxt.outputs[0]
                continue
            b = nxt
            break
        if b is None or b.inputs[0] != t or b.inputs[1:2] == [t]:
            continue
        if (a.op == "FullyConnected") != (b.op == "FullyConnected"):
            continue
        wb = _weights(graph, b)
        if wb is None or wb.ndim != wa.ndim:
            continue
        axis = _in_axis(b, wb, channels)
        if axis is None or wb.shape[axis] != channels:
            continue
        found.append((a, b, axis))
    return found


def _peaks(w: np.ndarray, axis: int) -> np.ndarray:
    other = tuple(i for i in range(w.ndim) if i != axis)
    return np.abs(w).max(axis=other).astype(np.float64)


def _equalize_pair(graph: Graph, a, b, axis_b: int) -> float:
    """Rescale one pair; returns the largest |log s_c| applied."""
    wa, wb = graph.tensors[a.inputs[1]].data, graph.tensors[b.inputs[1]].data
    axis_a = _out_axis(a, False)
    r1, r2 = _peaks(wa, axis_a), _peaks(wb, axis_b)
    ok = (r1 > 0) & (r2 > 0)
    s = np.ones_like(r1)
    s[ok] = np.sqrt(r1[ok] / r2[ok])
    if np.all(np.abs(s - 1) <= TOLERANCE):
        return 0.0
    bias = None
    if len(a.inputs) > 2 and a.inputs[2] is not None:
        bias = graph.tensors[a.inputs[2]].data.astype(np.float64).reshape(-1)
    view = LinearView(a, _rule(a), wa, bias, r1.size, None, -1)
    fold_affine(graph, view, 1.0 / s, None)
    shape = [1] * wb.ndim
    shape[axis_b] = -1
    new_b = (wb.astype(np.float64) * s.reshape(shape)).astype(wb.dtype)
    graph.set_inputs(b, [b.inputs[0], graph.set_constant(b.inputs[1], new_b), *b.inputs[2:]])
    return float(np.max(np.abs(np.log(s))))


@register_pass("equalize")
def equalize(graph: Graph, context: PassContext) -> int:
    """Cross-layer equalization of conv -> (ReLU) -> conv and depthwise -> pointwise pairs."""
    pairs = _pairs(graph)
    for _ in range(MAX_ROUNDS):
        moved = 0.0
        for a, b, axis in pairs:
            moved = max(moved, _equalize_pair(graph, a, b, axis))
        if moved <= TOLERANCE:
            break
    return len(pairs)
