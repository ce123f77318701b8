"""ShuffleNet's channel shuffle becomes one Gather of the channels (on the static ONNX graph,
before the layout pass, which keeps the Gather in NHWC: no 5-D TRANSPOSE, int8 in TFLite Micro).

Pattern: `Reshape(Transpose(Reshape(x)))`, each the sole reader of the one before (no other
reader, not a graph output, not read by a subgraph).
Conditions: x is 4-D [N, C, H, W] and the result has x's shape; the first Reshape makes
[N, g, C / g, H, W] (g divides C); the Transpose's perm (a constant input) is (0, 2, 1, 3, 4).
Math: output channel `i * g + j` is input channel `j * (C / g) + i`, so the three ops are
`Gather(x, index, axis=1)` with `index = arange(C).reshape(g, C / g).T.reshape(-1)`.
Rewrite: the last Reshape becomes that Gather; the other two and their outputs go.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph

from ..matcher import Edit, Fusion, Match, Op, run_fusion


def _ints(a) -> list:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def interleaves_groups(graph: Graph, m: Match) -> str | None:
    """4-D x of the result's shape, split as [N, g, C / g, H, W], transposed (0, 2, 1, 3, 4)."""
    first, tr, last = m["first"], m["transpose"], m.anchor
    xs = graph.tensors[first.inputs[0]].shape
    ys = graph.tensors[last.outputs[0]].shape
    m5 = graph.tensors[first.outputs[0]].shape
    if not (xs and ys and m5) or len(xs) != 4 or tuple(xs) != tuple(ys) or len(m5) != 5:
        return "not a 4-D -> 5-D -> 4-D reshape of one shape"
    n, c, h, w = xs
    g = m5[1]
    perm = _ints(graph.constant(tr.inputs[1]) if len(tr.inputs) > 1 and tr.inputs[1] else [])
    if tuple(m5) != (n, g, c // g, h, w) or g * (c // g) != c or perm != [0, 2, 1, 3, 4]:
        return "the reshapes and the transpose do not interleave channel groups"
    m.facts["groups"] = (c, g)
    return None


def to_gather(graph: Graph, m: Match, edit: Edit) -> None:
    """The last Reshape becomes a Gather of the channels of x."""
    first, tr, last = m["first"], m["transpose"], m.anchor
    c, g = m.facts["groups"]
    x, mid5, mid5t = first.inputs[0], first.outputs[0], tr.outputs[0]
    index = graph.add_constant(f"{last.name}_channels",
                               np.arange(c, dtype=np.int64).reshape(g, c // g).T.reshape(-1))
    last.op, last.attrs = "Gather", {"axis": 1}
    graph.set_inputs(last, [x, index])
    edit.remove(graph, first)
    edit.remove(graph, tr)
    del graph.tensors[mid5], graph.tensors[mid5t]


CHANNEL_SHUFFLE = Fusion(
    name="fuse-channel-shuffle",
    summary="Reshape -> Transpose (0, 2, 1, 3, 4) -> Reshape shuffling channels -> Gather.",
    pattern=Op("Reshape", "last", inputs=(
        Op("Transpose", "transpose", inputs=(Op("Reshape", "first"),)),)),
    conditions=(interleaves_groups,),
    rewrite=to_gather,
)


def fuse_channel_shuffle(graph: Graph) -> int:
    """Rewrite every channel shuffle of the module docstring; returns how many."""
    return run_fusion(graph, CHANNEL_SHUFFLE)
