"""Fold per-channel affine ops into the linear layer before them (ncnn's fuse_*).

Passes, each matching `layer -> op` where `layer` is a linear layer (see `linear_layer`):

- `fuse-conv-batchnorm`: inference BatchNormalization. `s = gamma / sqrt(var + eps)`,
  `W' = W * s` along output channels, `b' = (b - mean) * s + beta` (a missing bias is 0).
- `fuse-conv-mul`: `y * k`, `k * y` -> scale k; `y / k` -> scale 1 / k, only if no element of
  k is 0. `k / y` never folds.
- `fuse-conv-add`: `y + k`, `k + y` -> shift k; `y - k` -> shift -k; `k - y` -> scale -1,
  shift k (negated weights). Creates the bias when the layer has none (MatMul has no bias slot:
  see `fuse-matmul-add`).

Conditions (design.md), each a reason to skip, never to fail:
- the layer's output has exactly one reader (the op), is not a graph output and is not read
  inside a control-flow body;
- the layer's weights (and bias) are float constants, not quantized, and the layer carries no
  fused activation; the op's other operand is a float constant of the same dtype;
- the constant is per-channel for the layer (`channel_vector`): it broadcasts along the output's
  channel axis only, or is a scalar; a constant that would enlarge the output never folds; BN
  parameters are [C] vectors and BN's channel axis (1) must be the layer's output channel axis;
- BN in inference mode only (training_mode 0, one output).
The op's output name survives (the layer now writes it), so graph output names are kept. A fused
activation on a TFLite ADD / MUL / SUB / DIV moves to the layer. Math in float64, cast once.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node

from .. import register_pass
from .linear_layer import LinearView, channel_vector, fold_affine, linear_view, same_output_shape


def _affine_operand(graph: Graph, node: Node, data_index: int):
    """The constant operand of a binary op whose input `data_index` is the layer output."""
    other = node.inputs[1 - data_index]
    return graph.constant(other)


def _same_dtype(graph: Graph, node: Node, k: np.ndarray) -> bool:
    return k is not None and k.dtype == np.dtype(graph.tensors[node.outputs[0]].dtype)


def _mul(graph, node, data_index, view):
    k = _affine_operand(graph, node, data_index)
    if not _same_dtype(graph, node, k):
        return None
    s = channel_vector(k, view)
    return None if s is None else (s, None)


def _div(graph, node, data_index, view):
    if data_index != 0:  # k / y is not affine in y
        return None
    k = _affine_operand(graph, node, data_index)
    if not _same_dtype(graph, node, k) or not np.all(k != 0):
        return None
    s = channel_vector(k, view)
    return None if s is None else (1.0 / s, None)


def _add(graph, node, data_index, view):
    if not view.rule.has_bias:
        return None
    k = _affine_operand(graph, node, data_index)
    if not _same_dtype(graph, node, k):
        return None
    t = channel_vector(k, view)
    return None if t is None else (None, t)


def _sub(graph, node, data_index, view):
    found = _add(graph, node, data_index, view)
    if found is None:
        return None
    t = found[1]
    if data_index == 0:  # y - k
        return None, -t
    return np.full(view.channels, -1.0), t  # k - y


def _batchnorm(graph, node, data_index, view):
    if data_index != 0 or node.attrs.get("training_mode", 0):
        return None
    if any(o is not None for o in node.outputs[1:]):
        return None
    rank = view.out_rank
    if rank is None or rank < 2 or view.out_axis % rank != 1:
        return None
    params = [graph.constant(n) for n in node.inputs[1:5]]
    if any(p is None or p.shape != (view.channels,) or p.dtype.kind != "f" for p in params):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    denom = var + float(node.attrs.get("epsilon", 1e-5))
    if np.any(denom <= 0):
        return None
    s = gamma / np.sqrt(denom)
    return s, beta - mean * s


# pass name -> {op: rule(graph, node, data_index, view) -> (scale, shift) | None}
AFFINE_RULES = {
    "fuse-conv-batchnorm": {"BatchNorm": _batchnorm},
    "fuse-conv-mul": {"Mul": _mul, "Div": _div},
    "fuse-conv-add": {"Add": _add, "Sub": _sub},
}


def fuse_into_layers(graph: Graph, rules: dict) -> int:
    """One sweep in topological order folding every op matched by `rules` into its layer.

    A layer that absorbed an op now writes that op's output, so a chain (conv -> mul -> add)
    collapses within one sweep. Producers and readers come from the graph's use index.
    """
    removed = []
    count = 0
    for node in graph.nodes:
        rule = rules.get(node.op)
        if rule is None or node.opaque or len(node.outputs) < 1:
            continue
        for data_index, name in enumerate(node.inputs[:2]):
            layer = graph.producer(name)
            if layer is None or graph.sole_reader(name) is not node:
                continue
            view = linear_view(graph, layer)
            if view is None or not same_output_shape(graph, name, node.outputs[0]):
                continue
            if node.op != "BatchNorm" and node.inputs[0] == node.inputs[1]:
                continue
            found = rule(graph, node, data_index, view)
            if found is None:
                continue
            _absorb(graph, view, node, found)
            removed.append(node)
            count += 1
            break
    if removed:
        graph.remove_nodes(removed)
        _drop_unread(graph, [name for n in removed for name in n.present_inputs()])
    return count


def _absorb(graph: Graph, view: LinearView, node: Node, found) -> None:
    scale, shift = found
    fold_affine(graph, view, scale, shift)
    layer = view.node
    old = layer.outputs[0]
    graph.detach(node)
    graph.set_outputs(layer, [node.outputs[0]] + layer.outputs[1:])
    act = node.attrs.get("activation", "NONE")
    if act != "NONE":
        layer.attrs["activation"] = act
    del graph.tensors[old]


def _drop_unread(graph: Graph, names: list) -> None:
    """Delete constants among `names` (the folded operands) that nothing reads any more."""
    for name in dict.fromkeys(names):
        t = graph.tensors.get(name)
        if (t is not None and t.data is not None and graph.reader_count(name) == 0
                and name not in graph.outputs):
            del graph.tensors[name]


def _make_pass(name: str):
    rules = AFFINE_RULES[name]

    def run(graph: Graph, context) -> int:
        return fuse_into_layers(graph, rules)

    run.__doc__ = {
        "fuse-conv-batchnorm": "Fold inference BatchNormalization into the conv / FC layer before it.",
        "fuse-conv-mul": "Fold Mul / Div by a per-channel or scalar constant into the layer before it.",
        "fuse-conv-add": "Fold Add / Sub of a per-channel or scalar constant into the layer's bias.",
    }[name]
    register_pass(name)(run)


for _name in AFFINE_RULES:
    _make_pass(_name)
