"""`fuse-conv-batchnorm`: an inference BatchNormalization folds into the linear layer before it.

Pattern: `BatchNorm(layer(x))`, the BN the sole reader of the layer's output (`affine`).
Math: `s = gamma / sqrt(var + eps)`, `W' = W * s` along the output channels,
`b' = (b - mean) * s + beta` (a missing bias is 0); float64, cast once.
Conditions (else the BN stays; `batchnorm-to-affine` may then make it Mul + Add):
- the shared ones of `affine` (the layer absorbs an affine map; no broadcast);
- inference mode: training_mode 0 and one output;
- BN's channel axis (1) is the layer's output channel axis (the output has rank >= 2);
- gamma, beta, mean, var are float constant [C] vectors, C the layer's output channels;
- var + eps > 0 in every channel.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node

from ..matcher import Fusion, Match, register_fusion
from .affine import absorb, keeps_shape, layer_absorbs, layer_then
from .linear_layer import LinearView


def bn_affine(graph: Graph, node: Node, view: LinearView):
    """`(scale, shift)` equal to BatchNorm `node` on the output of `view`'s layer, or the
    reason (a string) it is not one."""
    if node.attrs.get("training_mode", 0):
        return "BatchNormalization in training mode"
    if any(o is not None for o in node.outputs[1:]):
        return "BatchNormalization with running-statistics outputs"
    rank = view.out_rank
    if rank is None or rank < 2 or view.out_axis % rank != 1:
        return "the layer's output channels are not BatchNormalization's axis 1"
    params = [graph.constant(n) for n in node.inputs[1:5]]
    if any(p is None or p.shape != (view.channels,) or p.dtype.kind != "f" for p in params):
        return f"the parameters are not float constant [{view.channels}] vectors"
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    denom = var + float(node.attrs.get("epsilon", 1e-5))
    if np.any(denom <= 0):
        return "var + epsilon is not positive in every channel"
    s = gamma / np.sqrt(denom)
    return s, beta - mean * s


def batchnorm_folds(graph: Graph, m: Match) -> str | None:
    """Inference BN with float constant [C] parameters along the layer's channel axis, and
    var + eps > 0."""
    found = bn_affine(graph, m.anchor, m.facts["view"])
    if isinstance(found, str):
        return found
    m.facts["affine"] = found
    return None


CONV_BATCHNORM = register_fusion(Fusion(
    name="fuse-conv-batchnorm",
    summary="Fold inference BatchNormalization into the conv / FC layer before it.",
    pattern=layer_then("BatchNorm", constant=False),
    conditions=(layer_absorbs, keeps_shape, batchnorm_folds),
    rewrite=absorb,
))
