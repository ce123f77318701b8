"""16x8 quantization: int16 activations with int8 weights, for the whole model or some layers.

TFLite Micro runs CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, MUL, the pools, SOFTMAX,
LOGISTIC, TANH, MEAN, SUM, PAD, CONCATENATION, RESHAPE, MAXIMUM, PRELU, SQUARED_DIFFERENCE, ABS,
RSQRT... with int16 activations (symmetric, zero point 0), int8 per-channel weights and int64
biases (`INT16_KERNELS`, each run by its interpreter in tests/quant/test_int16.py; Relu6 standalone
by the integer executor's tests). A PRELU's alpha stays int8 (`plan.INT8_CONSTANTS_16X8`).

The unit of choice is a *scale group*: the activations that share one (scale, zero point)
because pass-through ops (reshape, pools, concat, pad...) join them (`plan.activation_groups`).
A group is named by the layer that writes it (the first node with its own output range). A
group is int16 or int8 as a whole. Which ops then run 16x8:
- a node with a 16x8 kernel runs 16x8 when one of its activation inputs or outputs is in an
  int16 group; every other node runs int8 (a group written by a node without a 16x8 kernel is
  never int16);
- where a node reads an activation of the other width, a QUANTIZE (int8 <-> int16 requantize,
  as TFLite Micro runs it) makes a copy of that width just before it (one copy per tensor and
  width);
- a node that runs 16x8 only because it reads int16 writes an int16 value that a QUANTIZE
  right after it requantizes into its int8 group: so the int16 group's precision reaches the
  int8 layer's output rounding, which is what making one group int16 is for.
Graph inputs and outputs keep int8 in a mixed model (`--int16-layers`) when the model's I/O is
integer (`--io-type int8`); with `--activations int16` every group that can be int16 is, I/O
included (the model then reads and writes int16, as the TFLite converter's 16x8 mode does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qconvert import schemas
from qconvert.errors import QConvertError
from qconvert.ir import Graph, Node, Tensor
from qconvert.schemas.ops import HALF_AWAY

from .plan import BORDER, is_activation, activation_groups

# IR ops TFLite Micro runs with int16 activations and int8 weights (16x8); checked op by op
# against its interpreter (tests/quant/test_int16.py).
INT16_KERNELS = frozenset({
    "Conv2D", "DepthwiseConv2D", "FullyConnected", "TransposeConv", "BatchMatMul", "Add", "Sub",
    "Mul", "AveragePool", "MaxPool", "Softmax", "Sigmoid", "Tanh", "Mean", "Relu", "Relu6",
    "LeakyRelu", "Reshape", "Concat", "Pad", "Transpose", "StridedSlice", "SplitEqual",
    "Rsqrt", "Abs", "SquaredDifference", "ReduceSum", "Maximum", "Minimum", "PRelu",
    "ResizeNearest", "SplitSizes", "Squeeze", "ExpandDims", "PadV2", "SliceBySize", "Pack",
    "Unpack", "Reverse", "SelectV2", "UnidirectionalSequenceLSTM",
})


@dataclass
class Group:
    """A scale group as the 16x8 choice sees it."""

    root: str
    members: list                  # its activation names
    layer: str                     # the name of the layer that writes it (its label)
    op: str                        # that layer's op
    writers: list = field(default_factory=list)   # nodes writing a member
    blocker: str | None = None     # why it cannot be int16 (an op without a 16x8 kernel)
    edge: bool = False             # holds a graph input or output


def scale_groups(graph: Graph) -> list:
    """The scale groups of a float graph, in the order their first member appears."""
    members, _fixed, _clamped = activation_groups(graph)
    edges = set(graph.inputs) | set(graph.outputs)
    found = []
    for root, names in members.items():
        writers = []
        for name in names:
            node = graph.producer(name)
            if node is not None and all(node is not w for w in writers):
                writers.append(node)
        own = [w for w in writers if w.opaque or schemas.get(w.op).int8 != "same_scale"]
        label_node = (own or writers or [None])[0]
        blocker = next((w.label for w in writers
                        if w.opaque or w.op not in INT16_KERNELS
                        or w.origin.get(BORDER)), None)
        if any(n.startswith("\0") for n in names):
            blocker = blocker or "resource variable"
        found.append(Group(root, [n for n in names if not n.startswith("\0")],
                           (label_node.name or label_node.outputs[0]) if label_node else names[0],
                           label_node.op if label_node else "input", writers, blocker,
                           any(n in edges for n in names)))
    return found


def candidates(groups: list, io_edges_fixed: bool) -> list:
    """Groups that may become int16: written by 16x8 kernels only, and (`io_edges_fixed`) not
    holding a graph input or output."""
    return [g for g in groups if g.blocker is None and not (io_edges_fixed and g.edge)]


def groups_by_layer(groups: list, names: list, io_edges_fixed: bool) -> list:
    """The groups of the layers named (node names, or output tensor names); refuses, in one
    line, names that are no layer, layers without a 16x8 kernel, and (`io_edges_fixed`) layers
    writing a graph input or output."""
    by_name: dict = {}
    for g in groups:
        for w in g.writers:
            for key in (w.name, *w.outputs):
                if key:
                    by_name.setdefault(key, g)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise QConvertError(f"--int16-layers: no layer named {', '.join(map(repr, unknown))}")
    chosen = [by_name[n] for n in names]
    blocked = [f"{n!r} ({g.blocker})" for n, g in zip(names, chosen) if g.blocker is not None]
    if blocked:
        raise QConvertError("--int16-layers: no 16x8 kernel in TFLite Micro for "
                            + ", ".join(blocked))
    edge = [repr(n) for n, g in zip(names, chosen) if io_edges_fixed and g.edge]
    if edge:
        raise QConvertError(f"--int16-layers: {', '.join(edge)} writes a graph input or output, "
                            "which stays int8 with --io-type int8 (use --io-type float32 or "
                            "--activations int16)")
    return list({g.root: g for g in chosen}.values())


@dataclass
class Widths:
    """The result of `apply_widths`: what the planner and the writers need."""

    int16: set                     # activation names planned int16 (copies included)
    sources: dict                  # border output -> the activation it copies (ranges)
    borders: int = 0               # QUANTIZE ops inserted
    nodes16: list = field(default_factory=list)   # names of the nodes that run 16x8


def node_runs_16x8(node, int16: set, graph: Graph) -> bool:
    """True when `node` (with a 16x8 kernel) touches an int16 activation."""
    if node.opaque or node.op not in INT16_KERNELS or node.origin.get(BORDER):
        return False
    touched = [n for n in list(node.present_inputs()) + [o for o in node.outputs if o]
               if is_activation(graph, n)]
    return any(n in int16 for n in touched)


def apply_widths(graph: Graph, int16_groups: list) -> Widths:
    """Insert the QUANTIZE ops between int8 and int16 activations into the float `graph` (in
    place; module docstring) for the groups `int16_groups`; return the int16 activation names
    and each border tensor's source."""
    int16 = {n for g in int16_groups for n in g.members}
    sources: dict = {}
    copies: dict = {}   # (tensor, wide) -> copy name
    new_nodes: list = []
    nodes16 = []
    count = 0
    for node in graph.nodes:
        wide = node_runs_16x8(node, int16, graph)
        if wide:
            nodes16.append(node.name or node.outputs[0])
        for slot, name in enumerate(node.inputs):
            if name is None or not is_activation(graph, name) or (name in int16) == wide:
                continue
            key = (name, wide)
            if key not in copies:
                copy = graph.fresh_name(f"{name}_{'int16' if wide else 'int8'}")
                t = graph.tensors[name]
                graph.add_tensor(Tensor(copy, t.shape, t.dtype))
                new_nodes.append(_border(name, copy))
                copies[key] = copy
                sources[copy] = name
                if wide:
                    int16.add(copy)
                count += 1
            node.inputs[slot] = copies[key]
        new_nodes.append(node)
        if not wide:
            continue
        for slot, out in enumerate(node.outputs):
            if out is None or not is_activation(graph, out) or out in int16:
                continue
            temp = graph.fresh_name(f"{out}_int16")
            t = graph.tensors[out]
            graph.add_tensor(Tensor(temp, t.shape, t.dtype))
            node.outputs[slot] = temp
            new_nodes.append(_border(temp, out))
            sources[temp] = out
            int16.add(temp)
            count += 1
    graph.nodes = new_nodes
    return Widths(int16, sources, count, nodes16)


def _border(source: str, target: str) -> Node:
    return Node("Quantize", [source], [target], {"rounding": HALF_AWAY},
                f"{target}/requantize",
                origin={BORDER: True})
