"""A Pad feeding a convolution becomes the convolution's own padding in `export-c`.

    graph = fold_pads(graph)     # a shallow copy without the foldable Pad nodes

A PAD whose padded values are the zero point of the convolution reading it contributes
(zero point + input offset) * w = 0 for every padded tap, exactly what the kernels do for a tap
outside the image (they skip it). So Pad + Conv2D / DepthwiseConv2D equals the convolution on
the unpadded input with the Pad's top / left / bottom / right added to its own pads: bit-exact,
and the padded copy (the input and a larger output alive together, often the arena's peak, as
before a stride-2 depthwise convolution in MobileNetV2) never exists. Folded only when: int8,
the Pad's output is read by that one convolution alone and is no graph output, only height and
width are padded, by constant non-negative amounts, with the zero point, and the Pad keeps its
input's quantization.

A max pool takes the largest valid tap and skips taps outside the image: a Pad with -128 (the
smallest int8, so never larger than a valid tap) feeding an int8 MaxPool folds the same way,
when every window keeps at least one input value (each side's total padding below the kernel):
shufflenet_v2's 32x32x8 Pad (1 top, 1 left) before its max pool cost 217 K instructions on
Cortex-M55. An average pool is never folded (it counts padded taps).
"""

from __future__ import annotations

import copy

import numpy as np

from qconvert.errors import QConvertError
from qconvert.int8.prepare import is_int16_node, layer_params

_PADS = ("Pad", "PadV2")
_CONVS = ("Conv2D", "DepthwiseConv2D")
_READERS = _CONVS + ("MaxPool",)


def fold_pads(graph):
    """`graph`, or a shallow copy of it with every foldable Pad merged into its convolution."""
    readers = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name:
                readers.setdefault(name, []).append(node)
    folded = {}
    for node in graph.nodes:
        if node.op not in _PADS or len(node.outputs) != 1:
            continue
        users = readers.get(node.outputs[0], [])
        if len(users) != 1 or node.outputs[0] in graph.outputs:
            continue
        conv = users[0]
        amounts = _amounts(graph, node, conv)
        if amounts is not None:
            folded[id(node)] = (conv, amounts)
    if not folded:
        return graph
    by_conv = {id(conv): (pad, amounts) for pad, (conv, amounts) in
               ((n, folded[id(n)]) for n in graph.nodes if id(n) in folded)}
    nodes = []
    for node in graph.nodes:
        if id(node) in folded:
            continue
        if id(node) in by_conv:
            pad, (top, left, bottom, right) = by_conv[id(node)]
            new = copy.copy(node)
            new.inputs = [pad.inputs[0], *node.inputs[1:]]
            new.attrs = dict(node.attrs)
            old = [int(v) for v in node.attrs.get("pads") or [0, 0, 0, 0]]
            new.attrs["pads"] = [old[0] + top, old[1] + left, old[2] + bottom, old[3] + right]
            node = new
        nodes.append(node)
    out = copy.copy(graph)
    out.nodes = nodes
    return out


def _amounts(graph, pad, conv):
    """(top, left, bottom, right) when `pad` folds into `conv`, else None."""
    if conv.op not in _READERS or conv.inputs[0] != pad.outputs[0]:
        return None
    if is_int16_node(graph, pad) or is_int16_node(graph, conv):
        return None
    x, y = graph.tensors[pad.inputs[0]], graph.tensors[pad.outputs[0]]
    if x.dtype != "int8" or y.dtype != "int8" or x.quant is None or y.quant is None:
        return None
    if not (np.array_equal(x.quant.scale, y.quant.scale)
            and np.array_equal(x.quant.zero_point, y.quant.zero_point)):
        return None
    paddings = graph.tensors[pad.inputs[1]].data if len(pad.inputs) > 1 else None
    if paddings is None or np.asarray(paddings).shape != (4, 2):
        return None
    p = np.asarray(paddings, dtype=np.int64)
    if np.any(p < 0) or np.any(p[0] != 0) or np.any(p[3] != 0):
        return None
    try:
        value = layer_params(graph, pad).get("pad_value")
        offset = -128 if conv.op == "MaxPool" else -layer_params(graph, conv)["input_offset"]
    except QConvertError:  # a node the prepare step refuses is never folded
        return None
    if value is None or int(value) != int(offset):
        return None
    amounts = int(p[1, 0]), int(p[2, 0]), int(p[1, 1]), int(p[2, 1])
    if conv.op == "MaxPool":  # every window keeps an input value
        kh, kw = (int(k) for k in conv.attrs["kernel_shape"])
        old = [int(v) for v in conv.attrs.get("pads") or [0, 0, 0, 0]]
        total = [o + a for o, a in zip(old, amounts)]
        if max(total[0], total[2]) >= kh or max(total[1], total[3]) >= kw:
            return None
    return amounts
