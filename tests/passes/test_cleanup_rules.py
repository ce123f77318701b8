"""The rule groups declared for the matcher outside passes/fusion: eliminate's pass-through
rules, cancel-transposes' two transpose rules and tflite-legalize's Clip rule. Each condition
has a must-not-fire case (the node stays, and `PassContext.skipped` says why); where a rule
fires, onnxruntime or LiteRT (reference kernels) checks the outputs against the original or an
independent numpy computation. Graphs are built by hand in the IR, so what must match is known
independently of the passes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from helpers.oracles import random_inputs, run_litert, run_onnx
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import serialize
from qconvert.passes import PassContext, run_passes
from qconvert.passes.cleanup.eliminate import PASS_THROUGH
from qconvert.passes.onnx_to_tflite.cancel_transposes import COMPOSE_TRANSPOSES
from qconvert.passes.matcher import apply_fusions

F32 = "float32"


def _graph(tensors: dict, inputs, outputs, nodes) -> Graph:
    g = Graph("g", inputs=list(inputs), outputs=list(outputs))
    for name, shape in tensors.items():
        g.add_tensor(Tensor(name, shape, F32))
    g.nodes = nodes
    return g


def _const(g: Graph, name: str, values, dtype=np.int32) -> str:
    return g.add_constant(name, np.asarray(values, dtype))


def _run(g: Graph, name: str, fmt: str = "onnx") -> tuple:
    """(rewrites, skipped notes) of registered pass `name` on `g`."""
    context = PassContext(fmt)
    count = run_passes(Model(fmt, [g], {}), [name], context)[name]
    return count, context.skipped


def _notes(skipped: dict) -> dict:
    """{node label: reason} over every rule of a group."""
    return {k: v for notes in skipped.values() for k, v in notes.items()}


# -- eliminate: pass-through rules ---------------------------------------------------------------

def test_identity_chain_goes_in_one_sweep_and_keeps_the_output_name(tmp_path):
    """Relu -> Identity -> Identity -> Identity (a graph output): the three go in one sweep of
    the rule group, the Relu writes `y`; onnxruntime agrees with the original."""
    from helpers.oracles import OnnxNet
    from qconvert.formats.model_io import load_model

    net = OnnxNet()
    x = net.input("x", [1, 4])
    a = net.node("Relu", [x], "a")
    b = net.node("Identity", [a], "b")
    c = net.node("Identity", [b], "c")
    net.node("Identity", [c], "y")
    data = net.build(["y"])
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    model = load_model(path)
    assert apply_fusions(model.graph, PASS_THROUGH, PassContext("onnx")) == 3
    model.graph.verify()
    assert [n.op for n in model.graph.nodes] == ["Relu"] and model.graph.nodes[0].outputs == ["y"]
    for seed in (0, 1):
        np.testing.assert_array_equal(run_onnx(data, seed)[0], run_onnx(serialize(model), seed)[0])


def test_identity_read_by_a_subgraph_body_stays():
    """Must not fire (`output_not_observed`): an If body reads the Identity's output by name."""
    from qconvert.formats.onnx_reader import opaque_origin

    body = helper.make_graph([helper.make_node("Relu", ["b"], ["o"])], "body", [],
                             [helper.make_tensor_value_info("o", 1, None)])
    g = _graph({"x": (2,), "b": (2,), "y": (2,), "w": None}, ["x", "c"], ["y", "w"], [])
    g.add_tensor(Tensor("c", (), "bool"))
    g.nodes = [Node("Identity", ["x"], ["b"], {}, "id"), Node("Relu", ["b"], ["y"], {}, "r"),
               Node("If", ["c"], ["w"], name="if", opaque=True,
                    origin=opaque_origin(helper.make_node("If", ["c"], ["w"],
                                                          then_branch=body, else_branch=body)))]
    count, skipped = _run(g, "eliminate")
    assert count == 0 and [n.op for n in g.nodes] == ["Identity", "Relu", "If"]
    assert "subgraph body" in skipped["remove-identity"]["Identity 'id'"]


def test_identity_named_by_a_signature_def_stays():
    """Must not fire (`output_not_observed`): a TFLite signature def names the output."""
    g = _graph({"x": (2,), "b": (2,), "y": (2,)}, ["x"], ["y"],
               [Node("Identity", ["x"], ["b"], {}, "id"), Node("Relu", ["b"], ["y"], {}, "r")])
    g.tensors["b"].extra["signature"] = "serving_default:b"
    count, skipped = _run(g, "eliminate")
    assert count == 0 and "signature def" in skipped["remove-identity"]["Identity 'id'"]
    del g.tensors["b"].extra["signature"]
    assert _run(g, "eliminate")[0] == 1 and [n.op for n in g.nodes] == ["Relu"]


@pytest.mark.parametrize("case, reason", [
    ("graph_input", "passes graph input"),        # input_not_graph_input
    ("constant", "which no node computes"),        # input_computed
    ("other_reader", "is needed beside"),          # sole_reader_of_input
    ("input_is_output", "is needed beside"),
    ("input_read_in_body", "is needed beside"),
])
def test_identity_to_a_graph_output_must_not_fire(case, reason):
    """Must not fire: the Identity writes a graph output and its input cannot take that name."""
    from qconvert.formats.onnx_reader import opaque_origin

    g = _graph({"x": (2,), "a": (2,), "y": (2,), "z": (2,)}, ["x"], ["y"],
               [Node("Relu", ["x"], ["a"], {}, "r")])
    src = "a"
    if case == "graph_input":
        src = "x"
    elif case == "constant":
        src = g.add_constant("k", np.ones(2, np.float32))
    elif case == "other_reader":
        g.nodes.append(Node("Sigmoid", ["a"], ["z"], {}, "s"))
        g.outputs.append("z")
    elif case == "input_is_output":
        g.outputs.append("a")
    else:
        body = helper.make_graph([helper.make_node("Relu", ["a"], ["o"])], "body", [],
                                 [helper.make_tensor_value_info("o", 1, None)])
        g.add_tensor(Tensor("c", (), "bool"))
        g.inputs.append("c")
        g.nodes.append(Node("If", ["c"], ["z"], name="if", opaque=True, origin=opaque_origin(
            helper.make_node("If", ["c"], ["z"], then_branch=body, else_branch=body))))
        g.outputs.append("z")
    g.nodes.insert(1, Node("Identity", [src], ["y"], {}, "id"))
    count, skipped = _run(g, "eliminate")
    assert "Identity" in [n.op for n in g.nodes]
    assert reason in skipped["remove-identity"]["Identity 'id'"]


def test_what_is_not_a_pass_through_is_not_noted():
    """A Reshape that reshapes, a Transpose that moves data and a Dropout whose mask is read are
    not the pattern at all: they stay and no reason is recorded for them."""
    g = _graph({"x": (1, 4, 3), "a": (4, 3), "b": (3, 4), "y": (3, 4)}, ["x"], ["y", "mask"],
               [])
    g.add_tensor(Tensor("mask", (3, 4), "bool"))
    shape = _const(g, "shape", [4, 3], np.int64)
    perm = _const(g, "perm", [1, 0], np.int64)
    g.nodes = [Node("Reshape", ["x", shape], ["a"], {"allowzero": 0}, "rs"),
               Node("Transpose", ["a", perm], ["b"], {}, "tr"),
               Node("Dropout", ["b"], ["y", "mask"], {}, "do")]
    count, skipped = _run(g, "eliminate")
    assert count == 0 and [n.op for n in g.nodes] == ["Reshape", "Transpose", "Dropout"]
    assert _notes(skipped) == {}


# -- cancel-transposes ---------------------------------------------------------------------------

def _transposes(perms: list, shape: tuple, *, readers_of_first=False) -> Graph:
    """x -> Transpose(p0) -> Transpose(p1) -> ... -> y (TFLite graph, static shapes)."""
    g = Graph("g", inputs=["x"], outputs=[])
    g.add_tensor(Tensor("x", shape, F32))
    cur, dims = "x", list(shape)
    for i, perm in enumerate(perms):
        dims = [dims[p] for p in perm]
        out = f"t{i}"
        g.add_tensor(Tensor(out, tuple(dims), F32))
        p = _const(g, f"p{i}", perm)
        g.nodes.append(Node("Transpose", [cur, p], [out], {}, out))
        cur = out
    g.add_tensor(Tensor("y", tuple(dims), F32))
    g.nodes.append(Node("Relu", [cur], ["y"], {}, "y"))
    g.outputs = ["y"]
    if readers_of_first:
        g.add_tensor(Tensor("z", g.tensors["t0"].shape, F32))
        g.nodes.append(Node("Relu", ["t0"], ["z"], {}, "z"))
        g.outputs.append("z")
    return g


def _litert_agrees(before: bytes, model: Model) -> None:
    after = serialize(model)
    for seed in (0, 1):
        for a, b in zip(run_litert(before, seed), run_litert(after, seed)):
            np.testing.assert_array_equal(a, b)


def test_a_transpose_chain_composes_in_one_sweep():
    """T0 -> T1 -> T2: each composes with the one before as it is reached, so the last reads x
    with the permutation of the three, composed by hand below; the first Transpose, read by another node too, stays (the inner transpose may be shared).
    LiteRT gives the same outputs bit for bit."""
    g = _transposes([[0, 2, 3, 1], [0, 2, 1, 3], [0, 2, 3, 1]], (1, 2, 3, 5),
                    readers_of_first=True)
    model = Model("tflite", [g], {"version": 3})
    before = serialize(model)
    counts = run_passes(model, ["cancel-transposes"], PassContext("tflite"))
    assert counts["cancel-transposes"] == 2  # T1 and T2 composed, none moves size-1 axes only
    last = g.nodes[2]
    assert last.inputs[0] == "x"
    composed = [[0, 2, 3, 1][p] for p in [0, 2, 1, 3]]
    composed = [composed[p] for p in [0, 2, 3, 1]]
    np.testing.assert_array_equal(g.constant(last.inputs[1]), composed)
    _litert_agrees(before, model)


def test_composed_identity_and_size1_moves_then_vanish():
    """NCHW -> NHWC -> NCHW composes to the identity, which eliminate removes; LiteRT agrees."""
    g = _transposes([[0, 2, 3, 1], [0, 3, 1, 2]], (1, 4, 5, 6))
    model = Model("tflite", [g], {"version": 3})
    before = serialize(model)
    counts = run_passes(model, ["cancel-transposes", "eliminate"], PassContext("tflite"))
    assert counts["cancel-transposes"] == 1 and [n.op for n in g.nodes] == ["Relu"]
    _litert_agrees(before, model)


def test_a_composed_transpose_becomes_a_reshape_in_the_same_visit():
    """The rule group offers the node `compose-transposes` rewrote to `transpose-as-reshape` at
    once: T0 and T1 each move data, but T1 composed reads x with (1, 0, 2, 3), which moves only
    the size-1 axis of [1, 2, 5, 6], so T1 is a Reshape of x after the one sweep (T0 stays,
    unread, for eliminate). LiteRT agrees."""
    g = _transposes([[0, 2, 3, 1], [3, 0, 1, 2]], (1, 2, 5, 6))
    model = Model("tflite", [g], {"version": 3})
    before = serialize(model)
    count, _ = _run(g, "cancel-transposes", "tflite")
    assert count == 2 and [n.op for n in g.nodes] == ["Transpose", "Reshape", "Relu"]
    assert g.nodes[1].inputs[0] == "x"
    _litert_agrees(before, model)


@pytest.mark.parametrize("case, reason", [
    ("moves_data", "moves data"),                       # order_kept
    ("identity", "identity permutation"),               # moves_axes
    ("dynamic", "not static"),                          # static_shapes
    ("short_perm", "length is not the input's rank"),   # full_rank_perm
])
def test_transpose_as_reshape_must_not_fire(case, reason):
    """Must not fire: the Transpose stays a Transpose, and says why."""
    perm = {"moves_data": [0, 1, 3, 2], "identity": [0, 1, 2, 3], "dynamic": [0, 2, 1, 3],
            "short_perm": [1, 0]}[case]
    g = _transposes([[0, 1, 2, 3]], (1, 1, 5, 6))
    g.nodes[0].inputs[1] = _const(g, "q", perm)
    g.invalidate_uses()
    if case == "dynamic":
        g.tensors["x"].shape = (None, 1, 5, 6)
    count, skipped = _run(g, "cancel-transposes", "tflite")
    assert count == 0 and g.nodes[0].op == "Transpose"
    assert reason in skipped["transpose-as-reshape"]["Transpose 't0'"]


def test_size1_move_becomes_a_reshape():
    """[1, 1, 5, 6] by (0, 2, 1, 3) keeps the element order: a Reshape; LiteRT agrees."""
    g = _transposes([[0, 2, 1, 3]], (1, 1, 5, 6))
    model = Model("tflite", [g], {"version": 3})
    before = serialize(model)
    count, skipped = _run(g, "cancel-transposes", "tflite")
    assert count == 1 and [n.op for n in g.nodes] == ["Reshape", "Relu"]
    np.testing.assert_array_equal(g.constant(g.nodes[0].inputs[1]), [1, 5, 1, 6])
    _litert_agrees(before, model)


def test_compose_must_not_fire_on_a_computed_or_mismatched_permutation():
    """Must not fire: a permutation that is not a constant (the inner one here) is not this
    pattern's, and two permutations of different lengths (`same_rank`) do not compose."""
    g = _transposes([[0, 2, 3, 1], [0, 3, 1, 2]], (1, 4, 5, 6))
    g.add_tensor(Tensor("p_in", (4,), "int32"))
    g.inputs.append("p_in")
    g.nodes[0].inputs[1] = "p_in"
    g.invalidate_uses()
    count, skipped = _run(g, "cancel-transposes", "tflite")
    assert count == 0 and g.nodes[1].inputs[0] == "t0"
    assert "not a constant" in skipped["compose-transposes"]["Transpose 't1'"]
    g = _transposes([[0, 2, 3, 1], [0, 3, 1, 2]], (1, 4, 5, 6))
    g.nodes[0].inputs[1] = _const(g, "p3", [0, 2, 1])  # an inconsistent graph, by hand
    g.invalidate_uses()
    context = PassContext("tflite")
    assert apply_fusions(g, (COMPOSE_TRANSPOSES,), context) == 0
    assert "different lengths" in context.skipped["compose-transposes"]["Transpose 't1'"]


# -- tflite-legalize -----------------------------------------------------------------------------

def _clip_graph(lo, hi, *, computed_lo=False) -> Graph:
    g = _graph({"x": (1, 8), "y": (1, 8)}, ["x"], ["y"], [])
    ins = ["x"]
    if computed_lo:
        g.add_tensor(Tensor("lo", (), F32))
        g.inputs.append("lo")
        ins.append("lo")
    else:
        ins.append(None if lo is None else g.add_constant("lo", np.float32(lo)))
    ins.append(None if hi is None else g.add_constant("hi", np.float32(hi)))
    while ins and ins[-1] is None:
        ins.pop()
    g.nodes = [Node("Clip", ins, ["y"], {}, "clip")]
    return g


@pytest.mark.parametrize("lo, hi, ops", [(0, 6, ["Relu6"]), (0, None, ["Relu"]),
                                         (-1.5, 2.0, ["Maximum", "Minimum"]),
                                         (None, 0.5, ["Minimum"])])
def test_clip_becomes_tflite_ops_litert_equals_numpy(lo, hi, ops):
    """Each Clip becomes the TFLite ops of its bounds; LiteRT's outputs equal numpy's clip."""
    g = _clip_graph(lo, hi)
    count, _ = _run(g, "tflite-legalize", "tflite")
    assert count == 1 and [n.op for n in g.nodes] == ops
    data = serialize(Model("tflite", [g], {"version": 3}))
    for seed in (0, 1):
        x = random_inputs([((1, 8), np.float32)], seed)[0]
        want = np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)
        np.testing.assert_array_equal(run_litert(data, seed)[0], want)


def test_clip_must_not_fire_on_computed_bounds_or_for_onnx():
    """Must not fire: a bound computed at run time (`constant_bounds`); an ONNX target (the
    rule is for TFLite only)."""
    g = _clip_graph(None, 6.0, computed_lo=True)
    count, skipped = _run(g, "tflite-legalize", "tflite")
    assert count == 0 and g.nodes[0].op == "Clip"
    assert "computed at run time" in skipped["legalize-clip"]["Clip 'clip'"]
    g = _clip_graph(0.0, 6.0)
    assert _run(g, "tflite-legalize", "onnx")[0] == 0 and g.nodes[0].op == "Clip"
