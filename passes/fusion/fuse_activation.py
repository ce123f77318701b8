"""`fuse-activation`: a Relu / Relu6 / Clip after a layer or an Add / Sub / Mul becomes its fused
activation.

TFLite output only: TFLite kernels (and CMSIS-NN) clamp in the layer itself, ONNX has no fused
activation, so for an ONNX output the pass changes nothing and the activation stays a node.
Pattern -> TFLite ActivationFunctionType (`ACTIVATIONS`): Relu -> RELU, Relu6 -> RELU6,
Clip(0, 6) -> RELU6, Clip(-1, 1) -> RELU_N1_TO_1, Clip(0, none) -> RELU. Conditions: the layer
is Conv2D, DepthwiseConv2D, FullyConnected or an elementwise ADD / SUB / MUL (their TFLite
options carry a fused activation too: a ResNet's residual Add -> Relu becomes one ADD, one
requantization fewer in int8) with no fused activation yet; its output has one
reader (the activation), is not a graph output; Clip bounds are constants; the two tensors have
the same quantization (none, or equal parameters). Math: `act(W x + b)` is what the fused layer
computes, so outputs are unchanged bit for bit. The activation's output name is kept.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from .. import register_pass

FUSABLE_LAYERS = frozenset({"Conv2D", "DepthwiseConv2D", "FullyConnected", "Add", "Sub", "Mul"})
ACTIVATIONS = {"Relu": "RELU", "Relu6": "RELU6"}
CLIP_ACTIVATIONS = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1", (0.0, None): "RELU"}


def _clip_bounds(graph: Graph, node):
    bounds = []
    for i in (1, 2):
        name = node.inputs[i] if len(node.inputs) > i else None
        if name is None:
            bounds.append(None)
            continue
        value = graph.constant(name)
        if value is None or value.size != 1:
            return False
        bounds.append(float(np.asarray(value).reshape(-1)[0]))
    return tuple(bounds)


def activation_of(graph: Graph, node) -> str | None:
    """The TFLite fused activation equal to `node`, or None."""
    if node.opaque:
        return None
    if node.op in ACTIVATIONS:
        return ACTIVATIONS[node.op]
    if node.op == "Clip":
        bounds = _clip_bounds(graph, node)
        return CLIP_ACTIVATIONS.get(bounds) if bounds else None
    return None


def _same_quant(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (a.axis == b.axis and np.array_equal(a.scale, b.scale)
            and np.array_equal(a.zero_point, b.zero_point))


@register_pass("fuse-activation")
def fuse_activation(graph: Graph, context) -> int:
    """Make Relu / Relu6 / Clip the fused activation of the conv or FC before it (TFLite only)."""
    if context.target_format != "tflite":
        return 0
    removed = []
    for node in graph.nodes:
        act = activation_of(graph, node)
        if act is None:
            continue
        x = node.inputs[0]
        layer = graph.producer(x)
        if (layer is None or layer.opaque or layer.op not in FUSABLE_LAYERS
                or layer.attrs.get("activation", "NONE") != "NONE"
                or graph.sole_reader(x) is not node
                or not _same_quant(graph.tensors[x].quant, graph.tensors[node.outputs[0]].quant)):
            continue
        layer.attrs["activation"] = act
        graph.detach(node)
        graph.set_outputs(layer, [node.outputs[0]] + layer.outputs[1:])
        del graph.tensors[x]
        removed.append(node)
    graph.remove_nodes(removed)
    return len(removed)
