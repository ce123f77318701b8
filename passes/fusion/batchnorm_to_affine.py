"""`batchnorm-to-affine`: a BatchNormalization no layer can absorb becomes Mul + Add.

Pattern: `BatchNorm(x)` that `fuse-conv-batchnorm` would not fold into its producer (a BN after
a pool, an input, a concat, or after a conv whose output has other readers).
Math: `s = gamma / sqrt(var + eps)`, `t = beta - mean * s`, then `y = x * s + t` with s and t
shaped [C, 1, ...] so they broadcast along axis 1 (NCHW) of x.
Conditions (else the BN stays):
- inference mode only (training_mode 0, one output);
- `fuse-conv-batchnorm` would not fold it (that keeps one layer fewer);
- x has a known rank >= 2 whose axis 1, when static, is C;
- the parameters are float constant [C] vectors and var + eps > 0.
The Mul and Add take the BN's place; the Add writes the BN's output name. They are then free to
fold into a neighbour (`fuse-conv-mul` / `fuse-conv-add`) or be quantized as MUL / ADD.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node

from ..matcher import Edit, Fusion, Match, Op, fires, register_fusion
from .conv_batchnorm import CONV_BATCHNORM


def inference_mode(graph: Graph, m: Match) -> str | None:
    """training_mode 0 and one output."""
    node = m.anchor
    if node.attrs.get("training_mode", 0) or any(o is not None for o in node.outputs[1:]):
        return "BatchNormalization in training mode"
    return None


def not_absorbed(graph: Graph, m: Match) -> str | None:
    """`fuse-conv-batchnorm` would not fold it into the layer before it."""
    if fires(graph, CONV_BATCHNORM, m.anchor):
        return "fuse-conv-batchnorm folds it into the layer before it"
    return None


def per_channel_params(graph: Graph, m: Match) -> str | None:
    """x has rank >= 2 with C channels on axis 1; float constant [C] parameters; var + eps > 0."""
    node = m.anchor
    x = graph.tensors[node.inputs[0]]
    params = [graph.constant(n) for n in node.inputs[1:5]]
    if x.shape is None or len(x.shape) < 2:
        return "the input has no known rank >= 2"
    if any(p is None or p.ndim != 1 or p.dtype.kind != "f" for p in params):
        return "the parameters are not float constant vectors"
    c = params[0].shape[0]
    channels = x.shape[1]
    if any(p.shape != (c,) for p in params) or (isinstance(channels, int) and channels != c):
        return f"the parameters are not [{channels}] vectors"
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    denom = var + float(node.attrs.get("epsilon", 1e-5))
    if np.any(denom <= 0):
        return "var + epsilon is not positive in every channel"
    s = gamma / np.sqrt(denom)
    m.facts["affine"] = (s, beta - mean * s)
    return None


def to_mul_add(graph: Graph, m: Match, edit: Edit) -> None:
    """Put `Mul(x, s)` and `Add(_, t)` in the BN's place."""
    node = m.anchor
    x = graph.tensors[node.inputs[0]]
    s, t = m.facts["affine"]
    shape = (s.shape[0],) + (1,) * (len(x.shape) - 2)
    base = node.name or node.outputs[0]
    s_name = graph.add_constant(f"{base}_scale", s.reshape(shape).astype(x.dtype))
    t_name = graph.add_constant(f"{base}_shift", t.reshape(shape).astype(x.dtype))
    mid = graph.add_value(f"{base}_scaled", x.shape, x.dtype)
    edit.replace(graph, node, [Node("Mul", [node.inputs[0], s_name], [mid], {}, f"{base}/mul"),
                               Node("Add", [mid, t_name], [node.outputs[0]], {}, f"{base}/add")])


BATCHNORM_TO_AFFINE = register_fusion(Fusion(
    name="batchnorm-to-affine",
    summary="Rewrite a BatchNormalization that follows no foldable layer as Mul + Add.",
    pattern=Op("BatchNorm", "bn"),
    conditions=(inference_mode, not_absorbed, per_channel_params),
    rewrite=to_mul_add,
))
