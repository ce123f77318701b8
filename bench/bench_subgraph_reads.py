"""Use-index builds on a model whose Loop body is large: what passes pay per index.

The ONNX reader lists the outer-scope names a subgraph body reads once (`origin["body_reads"]`),
so building a graph's use index (every pass builds one or more) costs the same with or without
bodies. Before, the index parsed each opaque node's attribute protobuf on every build. This
prints both: the reader-listed way, and a re-parse per build (the former code, kept here only
as the baseline).

    python bench/bench_subgraph_reads.py [body nodes, default 20000]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import qconvert.ir.uses as uses
from qconvert.ir.uses import UseIndex
from qconvert.formats.model_io import load_model


def _model(body_nodes: int, top_nodes: int = 300) -> bytes:
    f32, vi = TensorProto.FLOAT, helper.make_tensor_value_info
    nodes, prev = [helper.make_node("Identity", ["cond_in"], ["cond_out"])], "x"
    for i in range(body_nodes):
        nodes.append(helper.make_node("Relu", [prev], [f"b{i}"]))
        prev = f"b{i}"
    body = helper.make_graph(nodes, "body", [vi("i", TensorProto.INT64, []),
                                             vi("cond_in", TensorProto.BOOL, [])],
                             [vi("cond_out", TensorProto.BOOL, []), vi(prev, f32, [4])])
    top, p = [], "x"
    for i in range(top_nodes):
        top.append(helper.make_node("Relu", [p], [f"t{i}"]))
        p = f"t{i}"
    top.append(helper.make_node("Loop", ["trips", "cond"], ["y"], body=body))
    g = helper.make_graph(top, "g", [vi("x", f32, [4])], [vi(p, f32, [4]), vi("y", f32, None)],
                          [numpy_helper.from_array(np.array(2, np.int64), "trips"),
                           numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _reparsed(node) -> frozenset:
    """The baseline: parse the body protobuf of `node` again and walk it."""
    names: set = set()
    for raw in node.origin.get("attributes", ()) if node.opaque else ():
        a = AttributeProto()
        a.ParseFromString(raw)
        stack = [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs)
        while stack:
            g = stack.pop()
            for n in g.node:
                names.update(i for i in n.input if i)
                for b in n.attribute:
                    stack += [b.g] if b.type == AttributeProto.GRAPH else list(b.graphs)
    return frozenset(names)


def main() -> None:
    body = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "loop.onnx"
        path.write_bytes(_model(body))
        graph = load_model(path).graph
    listed = uses._names_read_in_bodies
    for label, fn in (("reader-listed body reads", listed), ("body re-parsed per build", _reparsed)):
        uses._names_read_in_bodies = fn
        start = time.perf_counter()
        for _ in range(10):
            UseIndex(graph.nodes)
        print(f"{label}: {(time.perf_counter() - start) * 100:.1f} ms per use-index build "
              f"({body} body nodes, {len(graph.nodes)} top-level nodes)")
    uses._names_read_in_bodies = listed


if __name__ == "__main__":
    main()
