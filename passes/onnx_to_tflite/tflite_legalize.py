"""`tflite-legalize`: a Clip no layer absorbed becomes TFLite ops (TFLite has no CLIP), after
the layers took what they could as fused activations (`fuse-activation`).

Rule `legalize-clip` (TFLite target only), pattern `Clip(x, lo, hi)`, bounds optional:
Clip(0, 6) -> RELU6, Clip(0, none) -> RELU, any other -> MAXIMUM(x, lo) and / or
MINIMUM(., hi) (the bound as a one-element constant of x's dtype), no bounds at all -> a RESHAPE
to its own shape (`eliminate` removes it).
Condition: the bounds are constants (`constant_bounds`; the conversion refuses computed ones
before it starts, `conversion_problems`).
Math: the same function, element by element.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node, Tensor
from qconvert.schemas.activations import clamp_op_of_range

from ..matcher import Edit, Fusion, Match, Op, register_rules


def _clip_bound(graph, name):
    value = graph.constant(name)
    return None if value is None else float(np.asarray(value).reshape(-1)[0])


def constant_bounds(graph: Graph, m: Match) -> str | None:
    """The Clip's bounds (inputs 1 and 2, each optional) are constants: TFLite's RELU6 / RELU /
    MAXIMUM / MINIMUM take them as such."""
    node = m.anchor
    computed = [name for name in node.inputs[1:3] if name and graph.constant(name) is None]
    if computed:
        return f"Clip bounds {', '.join(map(repr, computed))} are computed at run time"
    return None


def clip_as_tflite_ops(graph: Graph, m: Match, edit: Edit) -> None:
    """Clip(0, 6) -> RELU6, Clip(0, none) -> RELU, other bounds -> MAXIMUM and / or MINIMUM,
    no bounds -> a RESHAPE to its own shape (`eliminate` removes it)."""
    node = m.anchor
    lo_name = node.inputs[1] if len(node.inputs) > 1 else None
    hi_name = node.inputs[2] if len(node.inputs) > 2 else None
    bounds = (_clip_bound(graph, lo_name), _clip_bound(graph, hi_name))
    as_op = clamp_op_of_range(*bounds)  # Clip(0, 6) -> Relu6, Clip(0, none) -> Relu
    if as_op is not None:
        edit.replace(graph, node, Node(as_op, [node.inputs[0]], list(node.outputs), {},
                                       node.name))
        return
    steps = [(op, name) for op, name in (("Maximum", lo_name), ("Minimum", hi_name))
             if name is not None]
    if not steps:  # no bounds: the identity, as a RESHAPE that `eliminate` removes
        dims = [int(d) for d in graph.tensors[node.outputs[0]].shape]
        shape_name = graph.add_constant(f"{node.name}_shape", np.array(dims, np.int32))
        edit.replace(graph, node, Node("Reshape", [node.inputs[0], shape_name],
                                       list(node.outputs), {}, node.name))
        return
    new, cur = [], node.inputs[0]
    for i, (op, name) in enumerate(steps):
        x = graph.tensors[node.inputs[0]]
        out = node.outputs[0] if i == len(steps) - 1 else graph.fresh_name(f"{cur}_max")
        if out not in graph.tensors:
            graph.add_tensor(Tensor(out, x.shape, x.dtype))
        bound = np.array(graph.constant(name).reshape(-1)[:1], dtype=x.dtype)
        k = graph.add_constant(f"{node.name}_{op.lower()}", bound, x.dtype)
        new.append(Node(op, [cur, k], [out], {}, f"{node.name}/{op.lower()}"))
        cur = out
    edit.replace(graph, node, new)


CLIP_AS_TFLITE_OPS = Fusion(
    name="legalize-clip",
    summary="Clip no layer absorbed -> RELU6 / RELU / MAXIMUM + MINIMUM (TFLite has no CLIP).",
    pattern=Op("Clip", "clip"),
    conditions=(constant_bounds,),
    rewrite=clip_as_tflite_ops,
    when=lambda context: context is not None and context.target_format == "tflite",
)
TFLITE_LEGALIZE = register_rules(
    "tflite-legalize",
    "Clip that no layer absorbed -> RELU6 / RELU / MAXIMUM + MINIMUM (TFLite has no CLIP).",
    (CLIP_AS_TFLITE_OPS,))
