"""`fuse-matmul-add`: `MatMul(A, B) + k` becomes one fully connected layer, `Gemm(A, B, k)`.

PyTorch exports `nn.Linear` on 2-D input as Gemm, but other exporters (and Linear after a
reshape) leave MatMul followed by Add. Conditions: B is a constant float 2-D [K, N] weight; A has
a known rank of 2 (Gemm takes 2-D A only; a 3-D MatMul keeps its Add); the MatMul output has one
reader, the Add, and is not a graph output; k is a float constant that is per-channel for the
output (shape (), (1,), (N,) or (1, N)). Math: `Gemm(A, B, C) = A B + C` with alpha = beta = 1,
so outputs are unchanged bit for bit apart from summation order.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node

from .. import register_pass
from .linear_layer import channel_vector, linear_view, new_constant, same_output_shape


@register_pass("fuse-matmul-add")
def fuse_matmul_add(graph: Graph, context) -> int:
    """Turn MatMul (constant 2-D weight, 2-D input) + Add of a per-channel constant into Gemm."""
    removed = []
    replaced = {}
    count = 0
    for node in graph.nodes:
        if node.op != "Add" or node.opaque or node.inputs[0] == node.inputs[1]:
            continue
        for data_index, name in enumerate(node.inputs[:2]):
            mm = graph.producer(name)
            if mm is None or mm.op != "MatMul" or graph.sole_reader(name) is not node:
                continue
            a = graph.tensors[mm.inputs[0]]
            view = linear_view(graph, mm)
            if view is None or a.shape is None or len(a.shape) != 2:
                continue
            k = graph.constant(node.inputs[1 - data_index])
            out_dtype = graph.tensors[node.outputs[0]].dtype
            if k is None or k.dtype != np.dtype(out_dtype):
                continue
            t = channel_vector(k, view)
            if t is None or not same_output_shape(graph, name, node.outputs[0]):
                continue
            bias = new_constant(graph, f"{mm.name or name}_bias", t.astype(out_dtype))
            gemm = Node("Gemm", [mm.inputs[0], mm.inputs[1], bias], [node.outputs[0]],
                        {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}, mm.name)
            graph.detach(node)
            graph.detach(mm)
            graph.uses.add(gemm)
            replaced[id(mm)] = gemm
            del graph.tensors[name]
            removed.append(node)
            count += 1
            break
    if removed:
        graph.remove_nodes(removed, replaced)
    return count
