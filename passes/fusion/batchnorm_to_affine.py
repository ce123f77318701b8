"""`batchnorm-to-affine`: a BatchNormalization no layer can absorb becomes Mul + Add.

Pattern: `BatchNorm(x)` whose producer is not a linear layer that `fuse-conv-batchnorm` could
fold it into (a BN after a pool, an input, a concat, or after a conv whose output has other
readers). Math: `s = gamma / sqrt(var + eps)`, `t = beta - mean * s`, then `y = x * s + t` with
s and t shaped [C, 1, ...] so they broadcast along axis 1 (NCHW) of x. Conditions: inference
mode only (training_mode 0, one output); x has a known rank >= 2; the parameters are float
constant [C] vectors; var + eps > 0. The Add writes the BN's output name. Mul and Add are then
free to fold into a neighbour (`fuse-conv-mul` / `fuse-conv-add`) or be quantized as MUL / ADD.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node, Tensor

from .. import register_pass
from .fuse_linear import AFFINE_RULES
from .linear_layer import linear_view, new_constant

_BN_RULE = AFFINE_RULES["fuse-conv-batchnorm"]["BatchNorm"]


def _absorbable(graph: Graph, node: Node) -> bool:
    """True when fuse-conv-batchnorm would fold `node` into its producer."""
    x = node.inputs[0]
    layer = graph.producer(x)
    if layer is None or graph.sole_reader(x) is not node:
        return False
    view = linear_view(graph, layer)
    return view is not None and _BN_RULE(graph, node, 0, view) is not None


@register_pass("batchnorm-to-affine")
def batchnorm_to_affine(graph: Graph, context) -> int:
    """Rewrite a BatchNormalization that follows no foldable layer as Mul + Add."""
    count = 0
    new_nodes = []
    for node in graph.nodes:
        if (node.op != "BatchNorm" or node.opaque or node.attrs.get("training_mode", 0)
                or any(o is not None for o in node.outputs[1:])
                or _absorbable(graph, node)):
            new_nodes.append(node)
            continue
        x = graph.tensors[node.inputs[0]]
        params = [graph.constant(n) for n in node.inputs[1:5]]
        if x.shape is None or len(x.shape) < 2 or any(
                p is None or p.ndim != 1 or p.dtype.kind != "f" for p in params):
            new_nodes.append(node)
            continue
        c = params[0].shape[0]
        channels = x.shape[1]
        if any(p.shape != (c,) for p in params) or (isinstance(channels, int) and channels != c):
            new_nodes.append(node)
            continue
        gamma, beta, mean, var = (p.astype(np.float64) for p in params)
        denom = var + float(node.attrs.get("epsilon", 1e-5))
        if np.any(denom <= 0):
            new_nodes.append(node)
            continue
        s = gamma / np.sqrt(denom)
        t = beta - mean * s
        shape = (c,) + (1,) * (len(x.shape) - 2)
        base = node.name or node.outputs[0]
        s_name = new_constant(graph, f"{base}_scale", s.reshape(shape).astype(x.dtype))
        t_name = new_constant(graph, f"{base}_shift", t.reshape(shape).astype(x.dtype))
        mid = graph.fresh_name(f"{base}_scaled")
        graph.add_tensor(Tensor(mid, x.shape, x.dtype))
        new_nodes.append(Node("Mul", [node.inputs[0], s_name], [mid], {}, f"{base}/mul"))
        new_nodes.append(Node("Add", [mid, t_name], [node.outputs[0]], {}, f"{base}/add"))
        count += 1
    if count:
        graph.nodes = new_nodes  # a new node list: the use index is rebuilt when next asked
    return count
