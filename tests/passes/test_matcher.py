"""The pattern matcher (`qconvert.passes.matcher`): a declared pattern matches where it must,
never across a value with other readers, never on a non-constant operand, and a fusion that
does not fire says why. Graphs are built by hand in the IR, so what must match is known
independently of the passes; where a fusion rewrites, onnxruntime (graph optimizations off)
checks that the outputs are unchanged."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import numpy as np

from helpers.oracles import OnnxNet, assert_close, run_onnx
from qconvert.ir import Graph, Node, Tensor
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext, get_pass
from qconvert.passes import cleanup as cleanup_package
from qconvert.passes import fusion as fusion_package
from qconvert.passes import onnx_to_tflite as layout_package
from qconvert.passes.fusion.conv_batchnorm import CONV_BATCHNORM
from qconvert.passes.fusion.conv_mul import CONV_MUL
from qconvert.passes.onnx_to_tflite.hard_swish import HARD_SWISH
from qconvert.passes.onnx_to_tflite.rsqrt import DIV_SQRT
from qconvert.passes.matcher import (ANY, Const, Fusion, Op, Value, apply_fusion, bindings,
                                     match)

F32 = "float32"


def _conv_graph(*, after: list, outputs=("y",), weight_constant=True) -> Graph:
    """x -> Conv2D (NCHW, 4 -> 4 channels, 1x1) -> c, then the nodes `after` (reading c)."""
    g = Graph()
    rng = np.random.default_rng(0)
    g.add_tensor(Tensor("x", (1, 4, 3, 3), F32))
    if weight_constant:
        g.add_tensor(Tensor("w", (4, 4, 1, 1), F32, rng.standard_normal((4, 4, 1, 1)).astype(F32)))
    else:
        g.add_tensor(Tensor("w", (4, 4, 1, 1), F32))
    g.add_tensor(Tensor("b", (4,), F32, np.zeros(4, np.float32)))
    g.add_tensor(Tensor("c", (1, 4, 3, 3), F32))
    g.inputs = ["x"] + ([] if weight_constant else ["w"])
    g.nodes = [Node("Conv2D", ["x", "w", "b"], ["c"],
                    {"layout": "NCHW", "kernel_shape": [1, 1], "group": 1}, "conv")]
    for node in after:
        for name in node.outputs:
            if name not in g.tensors:
                g.add_tensor(Tensor(name, (1, 4, 3, 3), F32))
        g.nodes.append(node)
    g.outputs = list(outputs)
    return g


def _const(g: Graph, name: str, value) -> str:
    return g.add_constant(name, np.asarray(value, np.float32))


def _bn(g: Graph, x: str, out: str) -> Node:
    params = [_const(g, f"{out}_{p}", np.full(4, v)) for p, v in
              (("gamma", 2.0), ("beta", 0.5), ("mean", 0.1), ("var", 1.0))]
    return Node("BatchNorm", [x, *params], [out], {"epsilon": 1e-5}, out)


# -- what must match ------------------------------------------------------------------------------

def test_chain_pattern_matches_and_captures():
    g = _conv_graph(after=[])
    bn = _bn(g, "c", "y")
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(bn)
    g.outputs = ["y"]
    g.invalidate_uses()
    m = match(g, CONV_BATCHNORM.pattern, bn)
    assert m is not None and m["layer"] is g.nodes[0] and m.anchor is bn
    assert CONV_BATCHNORM.why_not(g, m) is None
    assert apply_fusion(g, CONV_BATCHNORM) == 1
    assert [n.op for n in g.nodes] == ["Conv2D"] and g.nodes[0].outputs == ["y"]
    g.verify()


def test_commutative_pattern_matches_both_orders():
    g = _conv_graph(after=[])
    k = _const(g, "k", np.full((1, 4, 1, 1), 3.0))
    node = Node("Mul", [k, "c"], ["y"], {}, "mul")  # constant first
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(node)
    g.invalidate_uses()
    m = match(g, CONV_MUL.pattern, node)
    assert m is not None and m.swapped and m["layer"].op == "Conv2D"
    np.testing.assert_array_equal(m["k"], np.full((1, 4, 1, 1), 3.0, np.float32))


def test_value_captured_twice_must_bind_one_tensor():
    """`Mul(x, HardSigmoid(x))` is a DAG: both slots must be the same tensor."""
    g = Graph()
    for name in ("x", "z", "h", "y"):
        g.add_tensor(Tensor(name, (1, 4), F32))
    g.inputs, g.outputs = ["x", "z"], ["y"]
    hs = Node("HardSigmoid", ["x"], ["h"], {"alpha": 1 / 6, "beta": 0.5}, "hs")
    same = Node("Mul", ["h", "x"], ["y"], {}, "mul")
    g.nodes = [hs, same]
    assert match(g, HARD_SWISH.pattern, same) is not None
    other = Node("Mul", ["h", "z"], ["y"], {}, "mul")
    g.nodes = [hs, other]
    assert match(g, HARD_SWISH.pattern, other) is None
    reasons = [r for r in bindings(g, HARD_SWISH.pattern, other) if isinstance(r, str)]
    assert any("again" in r for r in reasons)


# -- what must not match --------------------------------------------------------------------------

def test_no_match_across_a_value_with_other_readers():
    g = _conv_graph(after=[Node("Relu", ["c"], ["r"], {}, "relu")], outputs=("y", "r"))
    bn = _bn(g, "c", "y")
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(bn)
    g.invalidate_uses()
    assert match(g, CONV_BATCHNORM.pattern, bn) is None
    reasons = list(bindings(g, CONV_BATCHNORM.pattern, bn))
    assert len(reasons) == 1 and "read by more than" in reasons[0]
    context = PassContext("onnx")
    assert apply_fusion(g, CONV_BATCHNORM, context) == 0
    assert "read by more than" in context.skipped["fuse-conv-batchnorm"]["BatchNorm 'y'"]


def test_no_match_when_the_value_is_a_graph_output():
    g = _conv_graph(after=[])
    bn = _bn(g, "c", "y")
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(bn)
    g.outputs = ["y", "c"]
    g.invalidate_uses()
    assert match(g, CONV_BATCHNORM.pattern, bn) is None


def test_no_fusion_with_a_non_constant_weight():
    g = _conv_graph(after=[], weight_constant=False)
    k = _const(g, "k", 3.0)
    node = Node("Mul", ["c", k], ["y"], {}, "mul")
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(node)
    g.invalidate_uses()
    m = match(g, CONV_MUL.pattern, node)  # the structure matches ...
    assert m is not None
    assert "cannot absorb" in CONV_MUL.why_not(g, m)  # ... a condition refuses
    context = PassContext("onnx")
    assert apply_fusion(g, CONV_MUL, context) == 0
    assert "cannot absorb" in context.skipped["fuse-conv-mul"]["Mul 'mul'"]
    assert [n.op for n in g.nodes] == ["Conv2D", "Mul"]


def test_const_slot_refuses_a_computed_operand():
    g = _conv_graph(after=[Node("Relu", ["x"], ["r"], {}, "relu")])
    g.tensors["r"].shape = (1, 4, 3, 3)
    node = Node("Mul", ["c", "r"], ["y"], {}, "mul")
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(node)
    g.invalidate_uses()
    found = list(bindings(g, CONV_MUL.pattern, node))
    assert found == ["k 'r' of Mul 'mul' is not a constant"]


def test_condition_reason_for_k_over_y():
    g = _conv_graph(after=[])
    k = _const(g, "k", 3.0)
    node = Node("Div", [k, "c"], ["y"], {}, "div")
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(node)
    g.invalidate_uses()
    m = match(g, CONV_MUL.pattern, node)
    assert m is not None and CONV_MUL.why_not(g, m) == "k / y is not affine in y"


def test_opaque_nodes_never_match():
    g = _conv_graph(after=[])
    node = Node("Mul", ["c", _const(g, "k", 3.0)], ["y"], {}, "mul", opaque=True)
    g.add_tensor(Tensor("y", (1, 4, 3, 3), F32))
    g.nodes.append(node)
    g.invalidate_uses()
    assert match(g, CONV_MUL.pattern, node) is None


def test_rsqrt_does_not_fire_on_sqrt_over_itself(tmp_path):
    """Must not fire: `Sqrt(v) / Sqrt(v)` is 1, not `Rsqrt(v) * Rsqrt(v)`."""
    g = Graph()
    for name in ("v", "s", "y"):
        g.add_tensor(Tensor(name, (1, 4), F32))
    g.inputs, g.outputs = ["v"], ["y"]
    g.nodes = [Node("Sqrt", ["v"], ["s"], {}, "sqrt"), Node("Div", ["s", "s"], ["y"], {}, "div")]
    context = PassContext("onnx")
    assert apply_fusion(g, DIV_SQRT, context) == 0
    assert [n.op for n in g.nodes] == ["Sqrt", "Div"]
    assert "by itself" in context.skipped["fuse-div-sqrt"]["Div 'div'"]


# -- the sweep ------------------------------------------------------------------------------------

def test_a_chain_collapses_in_one_sweep_with_ort(tmp_path):
    """conv -> Mul -> Mul: the layer that absorbed the first Mul writes its output, so the
    second one matches in the same sweep; onnxruntime agrees before and after."""
    net = OnnxNet()
    x = net.input("x", [1, 3, 6, 6])
    c = net.conv(x, 3, 4, "c")
    m1 = net.node("Mul", [c, net.rand("k1", 4, 1, 1)], "m1")
    net.node("Mul", [net.rand("k2", 1), m1], "y")
    data = net.build(["y"])
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    model = load_model(path)
    assert apply_fusion(model.graph, CONV_MUL) == 2
    model.graph.verify()
    assert [n.op for n in model.graph.nodes] == ["Conv2D"]
    out = serialize(model)
    for seed in (0, 1):
        assert_close(run_onnx(data, seed), run_onnx(out, seed), 1e-5)


def test_a_declared_fusion_runs_as_a_pass(tmp_path):
    """A fusion declared in a few lines (Relu(Relu(x)) -> Relu(x), the inner Relu may have other
    readers: `shared`) runs under the matcher; onnxruntime agrees with the original."""
    def bypass(graph, m, edit):
        """Readers of the outer Relu read the inner one."""
        outer, inner = m.anchor, m["inner"]
        graph.replace_uses(outer.outputs[0], inner.outputs[0])
        edit.remove(graph, outer)

    relu_relu = Fusion("test-relu-relu", "Relu(Relu(x)) -> Relu(x).",
                       Op("Relu", "outer", inputs=(Op("Relu", "inner", shared=True),)), (),
                       bypass)
    net = OnnxNet()
    x = net.input("x", [1, 4])
    r1 = net.node("Relu", [x], "r1")
    r2 = net.node("Relu", [r1], "r2")
    net.node("Add", [r2, r1], "y")
    data = net.build(["y"])
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    model = load_model(path)
    assert apply_fusion(model.graph, relu_relu) == 1
    model.graph.verify()
    assert [n.op for n in model.graph.nodes] == ["Relu", "Add"]
    assert model.graph.nodes[1].inputs == ["r1", "r1"]
    for seed in (0, 1):
        assert_close(run_onnx(data, seed), run_onnx(serialize(model), seed), 0)


def test_any_slot_is_not_looked_at():
    g = Graph()
    for name in ("a", "s", "y"):
        g.add_tensor(Tensor(name, (1, 4), F32))
    g.inputs, g.outputs = ["a"], ["y"]
    g.nodes = [Node("Sqrt", ["a"], ["s"], {}, "sqrt"), Node("Div", ["a", "s"], ["y"], {}, "div")]
    pattern = Op("Div", "div", inputs=(ANY, Op("Sqrt", "sqrt")))
    assert match(g, pattern, g.nodes[1])["sqrt"] is g.nodes[0]
    assert match(g, Op("Div", "div", inputs=(Const("k"), ANY)), g.nodes[1]) is None
    assert match(g, Op("Div", "div", inputs=(Value("v"), Value("v"))), g.nodes[1]) is None


# -- declarations ---------------------------------------------------------------------------------

def _declared_fusions() -> list:
    """[(fusion, the module declaring it)] of every fusion of passes/cleanup, passes/fusion and
    passes/onnx_to_tflite."""
    found = []
    for package in (cleanup_package, fusion_package, layout_package):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            source = inspect.getsource(module)
            found += [(v, module) for key, v in vars(module).items() if isinstance(v, Fusion)
                      and re.search(rf"^{key} = (register_fusion\()?Fusion\(", source, re.M)]
    return found


def test_every_fusion_states_its_conditions():
    """Each condition has a docstring (what must hold), each fusion module one that lists its
    pattern and conditions, and a registered fusion's pass summary is its summary."""
    fusions = _declared_fusions()
    assert len({f.name for f, _ in fusions}) == len(fusions)  # each declared once
    assert {f.name for f, _ in fusions} >= {"fuse-conv-batchnorm", "fuse-conv-mul", "fuse-conv-add",
                                         "fuse-matmul-add", "batchnorm-to-affine",
                                         "fuse-activation", "fuse-hard-swish", "fuse-div-sqrt",
                                         "fuse-reciprocal-sqrt", "fuse-channel-shuffle",
                                         "merge-reshapes", "compose-transposes",
                                         "transpose-as-reshape", "legalize-clip",
                                         "remove-identity", "remove-dropout",
                                         "remove-noop-reshape", "remove-identity-transpose"}
    for f, module in fusions:
        for condition in f.conditions:
            assert (condition.__doc__ or "").strip(), (f.name, condition)
        assert f.rewrite.__doc__, f.name
        assert "Condition" in module.__doc__ or "condition" in module.__doc__, module.__name__
        try:
            registered = get_pass(f.name)
        except KeyError:
            continue
        assert registered.summary == f.summary


def test_matmul_add_keeps_an_add_with_a_fused_activation():
    """Must not fire: a Gemm has no fused activation, so an Add carrying one keeps its MatMul."""
    from qconvert.passes.fusion.matmul_add import MATMUL_ADD

    g = Graph()
    g.add_tensor(Tensor("a", (2, 4), F32))
    g.add_tensor(Tensor("w", (4, 3), F32, np.ones((4, 3), np.float32)))
    g.add_tensor(Tensor("m", (2, 3), F32))
    g.add_tensor(Tensor("y", (2, 3), F32))
    k = _const(g, "k", np.ones(3))
    g.inputs, g.outputs = ["a"], ["y"]
    g.nodes = [Node("MatMul", ["a", "w"], ["m"], {}, "mm"),
               Node("Add", ["m", k], ["y"], {"activation": "RELU"}, "add")]
    context = PassContext("tflite")
    assert apply_fusion(g, MATMUL_ADD, context) == 0
    assert context.skipped["fuse-matmul-add"]["Add 'add'"] == "the Add has fused activation RELU"
    g.nodes[1].attrs = {}
    assert apply_fusion(g, MATMUL_ADD, context) == 1
    assert [n.op for n in g.nodes] == ["Gemm"] and "Add 'add'" not in context.skipped[
        "fuse-matmul-add"]
    g.verify()
