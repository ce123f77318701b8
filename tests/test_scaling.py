"""Scaling: the graph's use index, and long chains through the commands in linear time.

The chains come from `bench/chain_models.py` (built with onnx.helper and the `tflite` package's
flatbuffer builders, not with qconvert). Oracles: onnxruntime and LiteRT run what qconvert
wrote; the use index is checked against a scan of the node list. Linearity is checked two ways
that machine load cannot fake: operation counts (node visits of the use index) and the CPU time
of n against 4n nodes with a generous bound (quadratic work makes it 16x; linear about 4x), plus
a ceiling. The benchmark with the figures is `bench/bench_scaling.py`.
"""

from __future__ import annotations

import importlib.util
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from qconvert.cli.app import main
from qconvert.ir import Graph, Node, Tensor
from qconvert.ir.graph import GraphError
from qconvert.ir.uses import UseIndex
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext
from qconvert.passes.pipeline import run_pipeline

from helpers.oracles import ROOT, run_litert, run_onnx

_spec = importlib.util.spec_from_file_location("chain_models", ROOT / "bench" / "chain_models.py")
chain_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chain_models)


def _graph(n_relu: int = 3) -> Graph:
    """x -> Relu -> ... -> y, plus a second reader of the first activation."""
    g = Graph()
    names = ["x"] + [f"t{i}" for i in range(1, n_relu)] + ["y"]
    for name in names + ["z"]:
        g.add_tensor(Tensor(name, (1, 4), "float32"))
    g.inputs, g.outputs = ["x"], ["y", "z"]
    g.nodes = [Node("Relu", [names[i]], [names[i + 1]], name=f"r{i}") for i in range(n_relu)]
    g.nodes.append(Node("Relu", [names[1]], ["z"], name="side"))
    return g


def test_use_index_answers_like_a_scan():
    g = _graph()
    r0, r1, r2, side = g.nodes
    assert g.producer("t1") is r0 and g.producer("x") is None
    assert g.readers("t1") == [r1, side] and g.reader_count("t1") == 2
    assert g.sole_reader("t1") is None  # two readers
    assert g.sole_reader("t2") is r2
    assert g.sole_reader("y") is None and g.readers("y") == []  # a graph output
    g.verify()


def test_edits_keep_the_index_current():
    g = _graph()
    r0, r1, r2, side = g.nodes
    g.uses  # built now; every edit below must keep it right
    g.set_inputs(side, ["x"])
    assert g.readers("t1") == [r1] and g.sole_reader("t1") is r1 and g.readers("x") == [r0, side]
    g.replace_uses("t2", "t1")  # r2 reads t1 now; r1 is dead
    assert g.readers("t1") == [r1, r2] and g.readers("t2") == [] and g.producer("t2") is r1
    g.remove_nodes([r1])
    del g.tensors["t2"]
    assert g.producer("t2") is None and g.nodes == [r0, r2, side]
    new = Node("Relu", ["x"], ["z"], name="side2")
    g.remove_nodes([], {id(side): new})
    assert g.producer("z") is new and g.readers("x") == [r0, new]
    g.verify()
    assert g.uses.describes(g.nodes)


def test_verify_catches_an_edit_behind_the_index():
    """Must fire: a node rewired in place while the index is live is reported, not trusted."""
    g = _graph()
    g.uses
    g.nodes[3].inputs = ["x"]  # in place, no invalidate_uses()
    with pytest.raises(GraphError, match="use index is out of date"):
        g.verify()
    g.invalidate_uses()
    g.verify()


def test_assigning_the_node_list_drops_the_index():
    g = _graph()
    first = g.uses
    g.nodes = list(g.nodes)
    assert g.uses is not first and g.uses.describes(g.nodes)


def test_index_counts_subgraph_bodies():
    """A tensor an opaque If body reads by name is never a fusion's sole-reader tensor."""
    from onnx import helper

    body = helper.make_graph([helper.make_node("Relu", ["t1"], ["b"])], "body", [],
                             [helper.make_tensor_value_info("b", 1, None)])
    from qconvert.formats.onnx_reader import opaque_origin

    origin = opaque_origin(helper.make_node("If", ["c"], ["w"], then_branch=body))
    g = _graph()
    g.add_tensor(Tensor("c", (), "bool"))
    g.add_tensor(Tensor("w", None, "float32"))
    g.inputs.append("c")
    g.nodes.append(Node("If", ["c"], ["w"], name="if", opaque=True,
                        origin=origin))
    assert g.read_in_body("t1") and g.reader_count("t1") == 3
    assert g.sole_reader("t2") is g.nodes[2] and g.sole_reader("t1") is None


def _fuse_cpu(model_bytes: bytes, suffix: str, tmp_path, fmt: str) -> float:
    """CPU seconds of read -> fuse pipeline -> write (best of two)."""
    path = tmp_path / f"m{suffix}"
    path.write_bytes(model_bytes)
    best = float("inf")
    for _ in range(2):
        t0 = time.process_time()
        m = load_model(str(path))
        run_pipeline(m, context=PassContext(fmt))
        serialize(m, fmt)
        best = min(best, time.process_time() - t0)
    return best


@pytest.mark.parametrize("kind", ["onnx-identity", "onnx-fusion", "tflite-relu"])
def test_fuse_is_linear_in_time(kind, tmp_path):
    """4x the nodes takes well under 10x the CPU time (the old Identity elimination took 16x),
    and 6,000 nodes stay under a ceiling."""
    suffix = ".tflite" if kind.startswith("tflite") else ".onnx"
    small, big = (_fuse_cpu(chain_models.GENERATORS[kind](n), suffix, tmp_path, suffix[1:])
                  for n in (1500, 6000))
    assert big < 10 * max(small, 0.02), (small, big)
    assert big < 10, big


def test_pipeline_visits_each_node_a_bounded_number_of_times(tmp_path):
    """Operation count: the use index's node visits over the whole fusion pipeline grow with
    the nodes, not with their square (a fixed budget per node)."""
    visits = []
    for n in (1000, 4000):
        path = tmp_path / f"chain{n}.onnx"
        path.write_bytes(chain_models.GENERATORS["onnx-fusion"](n))
        m = load_model(str(path))
        before = UseIndex.visits_total
        run_pipeline(m, context=PassContext("onnx"))
        visits.append(UseIndex.visits_total - before)
    assert visits[1] <= 12 * 4000 and visits[1] <= 4.5 * visits[0], visits


def test_onnx_to_tflite_is_linear(tmp_path):
    """ONNX -> TFLite (the layout pass and both pipelines) on 2,500 and 10,000 Relus; the
    written model runs in LiteRT and computes the chain's Relu."""
    times = []
    for n in (2500, 10000):
        src = tmp_path / f"relu{n}.onnx"
        src.write_bytes(chain_models.onnx_chain("Relu", n))
        t0 = time.process_time()
        result = CliRunner().invoke(main, ["convert", str(src), "-o", str(tmp_path / "o.tflite")])
        times.append(time.process_time() - t0)
        assert result.exit_code == 0, result.output
    assert times[1] < 10 * max(times[0], 0.02), times
    got = run_litert((tmp_path / "o.tflite").read_bytes())[0]  # NHWC [1, 4, 4, 2] in and out
    np.testing.assert_array_equal(got, run_litert(chain_models.tflite_chain("RELU", 1))[0])


def test_fifty_thousand_node_chains_through_the_commands(tmp_path):
    """50,000-node chains through inspect, convert (ONNX and TFLite; ONNX -> TFLite is
    `test_onnx_to_tflite_is_linear`) and fuse, with a recursion
    limit far below the chain's length (no recursion proportional to it anywhere); the written
    models run in onnxruntime / LiteRT and compute what the chain computes."""
    n = 50_000
    onnx_path = tmp_path / "relu.onnx"
    onnx_path.write_bytes(chain_models.onnx_chain("Relu", n))
    ident_path = tmp_path / "ident.onnx"
    ident_path.write_bytes(chain_models.onnx_chain("Identity", n))
    tfl_path = tmp_path / "relu.tflite"
    tfl_path.write_bytes(chain_models.tflite_chain("RELU", n))
    runner = CliRunner()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        def ok(*args):
            result = runner.invoke(main, [str(a) for a in args])
            assert result.exit_code == 0, result.output
            return result.output

        assert f"total: {n} layers" in ok("inspect", onnx_path)
        assert f"total: {n} layers" in ok("inspect", tfl_path)
        ok("convert", onnx_path, "-o", tmp_path / "relu_out.onnx")
        ok("convert", tfl_path, "-o", tmp_path / "relu_out.tflite")
        fused = ok("fuse", ident_path, "-o", tmp_path / "ident_fused.onnx")
        assert f"nodes: {n} -> 1" in fused
        ok("fuse", tfl_path, "-o", tmp_path / "relu_fused.tflite")
    finally:
        sys.setrecursionlimit(limit)
    # the same seeded random input goes into the written model and a one-node reference
    for written in ("relu_out.onnx", "ident_fused.onnx"):
        got = run_onnx((tmp_path / written).read_bytes())[0]
        want = run_onnx(chain_models.onnx_chain("Identity", 1))[0]
        expected = want if written.startswith("ident") else np.maximum(want, 0)
        np.testing.assert_array_equal(got, expected)
    ref = run_litert(chain_models.tflite_chain("RELU", 1))[0]
    for written in ("relu_out.tflite", "relu_fused.tflite"):
        got = run_litert((tmp_path / written).read_bytes())[0]
        np.testing.assert_array_equal(got, ref)
    assert len(load_model(str(tmp_path / "relu_fused.tflite")).graph.nodes) == n
