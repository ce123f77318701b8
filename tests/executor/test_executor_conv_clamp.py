"""The float executor's "clamps in the producer" (qconvert/executor/float_executor.py): a
Conv2D, Add, Sub or Mul whose output only a Relu / Relu6 reads, and which the caller lists as
`unobserved`, runs the clamp itself. Bit for bit the two nodes' result on every convolution path
(im2col, Winograd, grouped, depthwise) and elementwise path (in place or not); every condition
that must keep the two nodes apart has a case, for both kinds of producer."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from qconvert.executor.float_executor import run_float
from qconvert.formats.onnx_reader import read_onnx_proto


def _with_clamp(name, nodes, inits, inputs, shape, clamp, extra_reader, out_is_output):
    """The model of `nodes` (which make "c") followed by `clamp` ("c" -> "y"); optionally a
    second reader of "c" or "c" as a graph output."""
    if clamp == "Clip":
        inits = inits + [numpy_helper.from_array(np.float32(0), "lo"),
                         numpy_helper.from_array(np.float32(1), "hi")]
        nodes = nodes + [helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    else:  # Relu6 is an IR op (TFLite's, or an ONNX Clip(0, 6) after fusion): renamed below
        nodes = nodes + [helper.make_node("Relu" if clamp == "Relu6" else clamp, ["c"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    if extra_reader:
        nodes.append(helper.make_node("Sigmoid", ["c"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, shape))
    if out_is_output:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    model = read_onnx_proto(proto, f"{name}.onnx")
    if clamp == "Relu6":
        next(n for n in model.graph.nodes if n.op == "Relu").op = "Relu6"
    return model


def _model(channels=8, group=1, kernel=3, clamp="Relu", extra_reader=False, out_is_output=False,
           size=9, cin=None):
    """x -> Conv (-> "c") -> clamp (-> "y") (`_with_clamp`)."""
    rng = np.random.default_rng(channels + group + kernel)
    cin = cin or channels
    w = (rng.standard_normal((channels, cin // group, kernel, kernel)) * 0.3).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    pad = kernel // 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[pad] * 4, group=group)]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, cin, size, size])]
    return _with_clamp("conv_clamp", nodes, inits, inputs, [None, channels, size, size], clamp,
                       extra_reader, out_is_output)


def _run(model, x, unobserved, keep=()):
    return _run_feeds(model, {"x": x}, unobserved, keep)


def _x(n, cin, size, seed=0):
    return np.random.default_rng(seed).standard_normal((n, cin, size, size)).astype(np.float32)


@pytest.mark.parametrize("clamp", ["Relu", "Relu6"])
@pytest.mark.parametrize("channels,group,kernel,n,size", [
    (8, 1, 3, 3, 9),      # im2col, one sample per group or several
    (64, 1, 3, 16, 14),   # Winograd
    (8, 1, 1, 2, 9),      # pointwise, no im2col copy
    (8, 2, 3, 2, 9),      # grouped (the clamp after the product)
    (8, 8, 3, 2, 9),      # depthwise
])
def test_conv_runs_its_clamp_bit_for_bit(clamp, channels, group, kernel, n, size):
    """Fused: the same bits as the two nodes, the convolution's own output never observed."""
    model = _model(channels, group, kernel, clamp, size=size)
    x = _x(n, channels, size)
    plain, seen_plain = _run(model, x, ())
    fused, seen_fused = _run(model, x, {"c"})
    np.testing.assert_array_equal(plain["y"], fused["y"])
    assert "c" in seen_plain and "c" not in seen_fused and "y" in seen_fused


# -- elementwise producers (Add, Sub, Mul) ---------------------------------------------------

def _elementwise_model(op="Add", clamp="Relu", produced=True, extra_reader=False,
                       out_is_output=False, broadcast=False):
    """x -> Sigmoid (-> "n", an array of the executor's own when `produced`) -> op with "x2" or
    a constant [C, 1, 1] (-> "c") -> clamp (-> "y") (`_with_clamp`)."""
    first = "n" if produced else "x"
    nodes = [helper.make_node("Sigmoid", ["x"], ["n"])] if produced else []
    inits = []
    second = "x2"
    if broadcast:
        second = "k"
        inits.append(numpy_helper.from_array(
            np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1, 1), "k"))
    nodes.append(helper.make_node(op, [first, second], ["c"]))
    shape = [None, 8, 9, 9]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    if not broadcast:
        inputs.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, shape))
    return _with_clamp("elementwise_clamp", nodes, inits, inputs, shape, clamp, extra_reader,
                       out_is_output)


def _feeds(model, n=2):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, 8, 9, 9)).astype(np.float32) * 4
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    feeds = {"x": x}
    if "x2" in model.graph.inputs:
        feeds["x2"] = rng.standard_normal((n, 8, 9, 9)).astype(np.float32) * 4
    return feeds


def _run_feeds(model, feeds, unobserved, keep=()):
    seen = []
    out = run_float(model, feeds, observe=lambda name, a: seen.append(name), keep=keep,
                    unobserved=frozenset(unobserved))
    return out, seen


def _bits(a):
    return a.view(np.uint32)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("clamp", ["Relu", "Relu6"])
@pytest.mark.parametrize("produced,broadcast", [(True, False), (True, True), (False, False)])
def test_elementwise_op_runs_its_clamp_bit_for_bit(monkeypatch, op, clamp, produced, broadcast):
    """Add / Sub / Mul then Relu / Relu6: the clamp runs in the op's pass (in place into its
    dead input), or on its new array when it cannot run in place (both inputs feeds); the
    clamp node itself never runs; the same bits as the two nodes, NaN and signed zeros
    included."""
    from qconvert.executor import float_executor

    model = _elementwise_model(op, clamp, produced=produced, broadcast=broadcast)
    feeds = _feeds(model)
    plain, seen_plain = _run_feeds(model, feeds, ())
    node = next(n for n in model.graph.nodes if n.op == ("Relu6" if clamp == "Relu6" else "Relu"))

    def must_not_run(*args, **kwargs):
        raise AssertionError("the clamp node ran")

    monkeypatch.setitem(float_executor.KERNELS, node.op, must_not_run)
    monkeypatch.setitem(float_executor.IN_PLACE, node.op, must_not_run)
    fused, seen_fused = _run_feeds(model, feeds, {"c"})
    assert np.array_equal(_bits(plain["y"]), _bits(fused["y"]))
    assert "c" in seen_plain and "c" not in seen_fused and "y" in seen_fused


# -- every producer ---------------------------------------------------------------------------

def _producer_case(producer, **kwargs):
    """(model, feeds) of a convolution or an Add producing "c", read by a clamp "y"."""
    if producer == "conv":
        return _model(**kwargs), {"x": _x(2, 8, 9)}
    model = _elementwise_model(**kwargs)
    return model, _feeds(model)


@pytest.mark.parametrize("producer", ["conv", "elementwise"])
@pytest.mark.parametrize("why,kwargs,unobserved,keep", [
    ("not unobserved", {}, (), ()),
    ("a second reader", {"extra_reader": True}, {"c"}, ()),
    ("a graph output", {"out_is_output": True}, {"c"}, ()),
    ("kept", {}, {"c"}, ("c",)),
    ("a Clip (bounds are inputs)", {"clamp": "Clip"}, {"c"}, ()),
    ("not a clamp", {"clamp": "Sigmoid"}, {"c"}, ()),
])
def test_producer_and_clamp_stay_apart(producer, why, kwargs, unobserved, keep):
    """Each must-not case: the producer's output is still made and observed, and the result
    is the two nodes', bit for bit."""
    model, feeds = _producer_case(producer, **kwargs)
    plain, _ = _run_feeds(model, feeds, (), keep)
    out, seen = _run_feeds(model, feeds, unobserved, keep)
    assert "c" in seen, why
    for name in plain:
        assert np.array_equal(_bits(plain[name]), _bits(out[name])), why


@pytest.mark.parametrize("producer,op", [("conv", "Conv2D"), ("elementwise", "Add")])
def test_producer_with_its_own_fused_activation_stays_apart(producer, op):
    """A TFLite-style fused activation on the producer: the reader's clamp is not folded into
    it (two clamps need not commute), and the reader's Relu runs too."""
    model, feeds = _producer_case(producer)
    next(n for n in model.graph.nodes if n.op == op).attrs["activation"] = "RELU_N1_TO_1"
    plain, _ = _run_feeds(model, feeds, ())
    out, seen = _run_feeds(model, feeds, {"c"})
    assert "c" in seen
    assert np.array_equal(_bits(plain["y"]), _bits(out["y"]))
