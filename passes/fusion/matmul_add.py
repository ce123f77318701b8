"""`fuse-matmul-add`: `MatMul(A, B) + k` becomes one fully connected layer, `Gemm(A, B, k)`.

PyTorch exports `nn.Linear` on 2-D input as Gemm, but other exporters (and Linear after a
reshape) leave MatMul followed by Add.
Pattern: `Add(MatMul(A, B), k)` or `Add(k, MatMul(A, B))`, the Add the sole reader of the
MatMul's output (not a graph output, not read by a subgraph).
Conditions (else both stay):
- the Add reads two different values and carries no fused activation;
- B is a constant float 2-D [K, N] weight (`linear_view`);
- A has a known rank of 2 (Gemm takes 2-D A only; a 3-D MatMul keeps its Add);
- k is a float constant of the output's dtype, per-channel for the output: shape (), (1,),
  (N,) or (1, N) (`channel_vector`), and the Add does not broadcast to a larger shape.
Math: `Gemm(A, B, C) = A B + C` with alpha = beta = 1, so outputs are unchanged bit for bit
apart from summation order. The Gemm takes the MatMul's place and name and writes the Add's
output.
"""

from __future__ import annotations

from qconvert.ir import Graph, Node

from ..matcher import (Const, Edit, Fusion, Match, Op, distinct_operands, register_fusion,
                       same_dtype_constant)
from .linear_layer import channel_vector, linear_view, same_output_shape


def no_activation(graph: Graph, m: Match) -> str | None:
    """The Add carries no fused activation (a Gemm has none)."""
    act = m.anchor.attrs.get("activation", "NONE")
    return None if act == "NONE" else f"the Add has fused activation {act}"


def constant_weight(graph: Graph, m: Match) -> str | None:
    """B is a float constant 2-D weight and A is 2-D."""
    mm = m["mm"]
    view = linear_view(graph, mm)
    if view is None:
        return f"MatMul {mm.name!r} has no float constant 2-D weight"
    a = graph.tensors[mm.inputs[0]]
    if a.shape is None or len(a.shape) != 2:
        return f"MatMul {mm.name!r} input A is not 2-D (Gemm takes 2-D A only)"
    m.facts["view"] = view
    return None


def per_channel_bias(graph: Graph, m: Match) -> str | None:
    """k is per-channel for the output and the Add does not broadcast."""
    t = channel_vector(m.consts["k"], m.facts["view"])
    if t is None:
        return f"k {m.values['k']!r} is not per-channel for the output"
    if not same_output_shape(graph, m["mm"].outputs[0], m.anchor.outputs[0]):
        return "the Add broadcasts the MatMul's output to a larger shape"
    m.facts["bias"] = t
    return None


def to_gemm(graph: Graph, m: Match, edit: Edit) -> None:
    """Put `Gemm(A, B, k)` in the MatMul's place; the Add goes."""
    node, mm = m.anchor, m["mm"]
    name = mm.outputs[0]
    out_dtype = graph.tensors[node.outputs[0]].dtype
    bias = graph.add_constant(f"{mm.name or name}_bias", m.facts["bias"].astype(out_dtype))
    gemm = Node("Gemm", [mm.inputs[0], mm.inputs[1], bias], [node.outputs[0]],
                {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}, mm.name)
    edit.remove(graph, node)
    edit.replace(graph, mm, gemm)
    del graph.tensors[name]


MATMUL_ADD = register_fusion(Fusion(
    name="fuse-matmul-add",
    summary="Turn MatMul (constant 2-D weight, 2-D input) + Add of a per-channel constant "
            "into Gemm.",
    pattern=Op("Add", "add", inputs=(Op("MatMul", "mm"), Const("k")), commutative=True),
    conditions=(distinct_operands, no_activation, constant_weight, same_dtype_constant("k"),
                per_channel_bias),
    rewrite=to_gemm,
))
