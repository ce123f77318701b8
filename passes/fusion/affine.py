"""What the "layer -> per-channel affine op" fusions share (ncnn's fuse_*): the pattern, the
conditions every one of them checks, and the one rewrite.

Pattern: `op(y, k)` where `y` is the output of a linear layer (`linear_layer`: Conv2D, depthwise,
ConvTranspose, FullyConnected, Gemm, MatMul with a constant 2-D weight) and `op` is its sole
reader (`Graph.sole_reader`: no other reader, not a graph output, not read inside a subgraph).

Conditions shared by fuse-conv-batchnorm, fuse-conv-mul and fuse-conv-add (each a reason to skip):
- `layer_absorbs`: the layer's weights (and bias) are float constants, not quantized, of the
  output's dtype, and it carries no fused activation (`linear_view`);
- `keeps_shape`: the op does not broadcast the layer's output to a larger shape.
Each fusion adds its own (the operand is per-channel, BN in inference mode, ...), and leaves
`(scale, shift)` in `match.facts["affine"]`. `absorb` then folds `y' = scale * y + shift` into
the layer (`fold_affine`: float64, cast once; weights read elsewhere are copied), the layer writes
the op's output name (graph output names survive), a fused activation of a TFLite ADD / MUL /
SUB / DIV moves to the layer, and the op's constants go once nothing reads them.
"""

from __future__ import annotations

from qconvert.ir import Graph

from ..matcher import Const, Edit, Match, Op
from .linear_layer import LAYERS, fold_affine, linear_view, same_output_shape

LINEAR_OPS = frozenset(LAYERS) | {"Gemm"}


def layer_then(ops, constant: bool = True) -> Op:
    """The pattern `op(layer output, k)` for `op` in `ops`: with `constant`, a binary op whose
    other operand is a constant `k`, in either order; else an op reading the layer at input 0."""
    layer = Op(LINEAR_OPS, "layer")
    if constant:
        return Op(ops, "op", inputs=(layer, Const("k")), commutative=True)
    return Op(ops, "op", inputs=(layer,))


def layer_absorbs(graph: Graph, m: Match) -> str | None:
    """The layer can absorb an affine map: float constant weights and bias of the output's
    dtype, not quantized, no fused activation (an affine op after a clamp does not commute)."""
    view = linear_view(graph, m["layer"])
    if view is None:
        layer = m["layer"]
        return (f"{layer.op} {layer.name!r} cannot absorb it (weights or bias not float "
                "constants, quantized, or a fused activation)")
    m.facts["view"] = view
    return None


def keeps_shape(graph: Graph, m: Match) -> str | None:
    """The op's output has the layer output's shape (an op that broadcasts to a larger shape
    cannot fold)."""
    if not same_output_shape(graph, m["layer"].outputs[0], m.anchor.outputs[0]):
        return "the op broadcasts the layer's output to a larger shape"
    return None


def data_index(m: Match) -> int:
    """Which input of the op is the layer's output (0 or 1)."""
    return 1 if m.swapped else 0


def absorb(graph: Graph, m: Match, edit: Edit) -> None:
    """Fold `m.facts["affine"]` into the layer; the layer now writes the op's output."""
    scale, shift = m.facts["affine"]
    view = m.facts["view"]
    node = m.anchor
    fold_affine(graph, view, scale, shift)
    layer = view.node
    old = layer.outputs[0]
    edit.remove(graph, node)
    graph.set_outputs(layer, [node.outputs[0]] + layer.outputs[1:])
    act = node.attrs.get("activation", "NONE")
    if act != "NONE":
        layer.attrs["activation"] = act
    del graph.tensors[old]
    edit.drop_if_unread(node.present_inputs())
