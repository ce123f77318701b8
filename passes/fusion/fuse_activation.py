"""`fuse-activation`: a Relu / Relu6 / Clip after a layer or an Add / Sub / Mul becomes its fused
activation.

TFLite output only: TFLite kernels (and CMSIS-NN) clamp in the layer itself, ONNX has no fused
activation, so for an ONNX output the pass changes nothing and the activation stays a node.
Pattern -> TFLite ActivationFunctionType (the clamp ops and ranges of `schemas.activations`):
Relu -> RELU, Relu6 -> RELU6, Clip(0, 6) -> RELU6, Clip(-1, 1) -> RELU_N1_TO_1, Clip(0, none) ->
RELU. Conditions: the layer is an op whose schema says `fuses_activation` (Conv2D,
DepthwiseConv2D, FullyConnected and the elementwise ADD / SUB / MUL: their TFLite options carry
a fused activation too, so a ResNet's residual Add -> Relu becomes one ADD, one requantization
fewer in int8) with no fused activation yet; its output has one
reader (the activation), is not a graph output; Clip bounds are constants; the two tensors have
the same quantization (none, or equal parameters); the target format is TFLite. Math:
`act(W x + b)` is what the fused layer computes, so outputs are unchanged bit for bit. The
activation's output name is kept.
"""

from __future__ import annotations

import numpy as np

from qconvert import schemas
from qconvert.ir import Graph
from qconvert.schemas.activations import activation_of_op, activation_of_range, clamp_ops

from ..matcher import Edit, Fusion, Match, Op, register_fusion

FUSABLE_LAYERS = frozenset(s.name for s in schemas.all_schemas() if s.fuses_activation)


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
    schema = schemas.get(node.op)
    if schema is None or schema.clamp is None:
        return None
    if schema.clamp != "inputs":
        return activation_of_op(node.op)
    bounds = _clip_bounds(graph, node)
    return activation_of_range(*bounds) if bounds else None


def _same_quant(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return (a.axis == b.axis and np.array_equal(a.scale, b.scale)
            and np.array_equal(a.zero_point, b.zero_point))


def known_activation(graph: Graph, m: Match) -> str | None:
    """The op is a TFLite fused activation: Relu, Relu6, or Clip with constant bounds (0, 6),
    (-1, 1) or (0, none)."""
    act = activation_of(graph, m.anchor)
    if act is None:
        return "Clip bounds that are not constants (0, 6), (-1, 1) or (0, none)"
    m.facts["activation"] = act
    return None


def no_activation_yet(graph: Graph, m: Match) -> str | None:
    """The layer carries no fused activation yet."""
    act = m["layer"].attrs.get("activation", "NONE")
    return None if act == "NONE" else f"the layer already has fused activation {act}"


def same_quantization(graph: Graph, m: Match) -> str | None:
    """The layer's output and the activation's output have the same quantization (none, or
    equal parameters)."""
    x, y = m.anchor.inputs[0], m.anchor.outputs[0]
    if not _same_quant(graph.tensors[x].quant, graph.tensors[y].quant):
        return "the activation requantizes"
    return None


def fuse(graph: Graph, m: Match, edit: Edit) -> None:
    """The layer takes the activation and writes its output."""
    node, layer = m.anchor, m["layer"]
    x = node.inputs[0]
    layer.attrs["activation"] = m.facts["activation"]
    edit.remove(graph, node)
    graph.set_outputs(layer, [node.outputs[0]] + layer.outputs[1:])
    del graph.tensors[x]


FUSE_ACTIVATION = register_fusion(Fusion(
    name="fuse-activation",
    summary="Make Relu / Relu6 / Clip the fused activation of the conv or FC before it "
            "(TFLite only).",
    pattern=Op(clamp_ops(), "act", inputs=(Op(FUSABLE_LAYERS, "layer"),)),
    conditions=(known_activation, no_activation_yet, same_quantization),
    rewrite=fuse,
    when=lambda context: context is not None and context.target_format == "tflite",
))
