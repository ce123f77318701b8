"""A clamping activation (Relu, Clip, Relu6) gives its range to the layer output it alone reads:
the conv output of Conv -> Relu is quantized with the ReLU's [0, max] range, not with the conv's
own range that includes the negative values the ReLU zeroes. The oracles: onnxruntime (graph
optimizations off) and LiteRT compute the float ranges the parameters must come from, and TFLite
Micro runs the int8 model bit for bit like our integer executor. The rule must not fire when the
conv output has another reader, is a graph output, or is shared with a pass-through op."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import random_inputs, run_tflm
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize

F = TensorProto.FLOAT
SAMPLES = 32


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _expected(lo: float, hi: float) -> tuple:
    """(scale, zero point) of design.md for a range: widened to 0, (hi - lo) / 255, zero point
    round_half_away(-128 - lo / scale)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0)
    z = -128.0 - lo / float(scale)
    return float(scale), int(np.clip(np.sign(z) * np.floor(abs(z) + 0.5), -128, 127))


# ---- ONNX ------------------------------------------------------------------------------------

def _onnx_model(kind: str) -> tuple:
    """(model bytes, graph outputs): x -> Conv "c" -> <kind> -> 1x1 Conv "y"."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out + "_node", **attrs))
        return out

    node("Conv", ["x", const("w1", rng.standard_normal((4, 3, 3, 3))),
                  const("b1", rng.standard_normal(4))], "c", pads=[1, 1, 1, 1])
    outputs = ["y"]
    if kind == "relu":
        last = node("Relu", ["c"], "r")
    elif kind == "clip":
        last = node("Clip", ["c", const("lo", 0.0), const("hi", 6.0)], "r")
    elif kind == "also_output":
        last = node("Relu", ["c"], "r")
        outputs.append("c")
    elif kind == "two_readers":
        node("Relu", ["c"], "r")
        last = node("Add", ["c", "r"], "a")
    elif kind == "after_pool":
        node("MaxPool", ["c"], "m", kernel_shape=[2, 2], strides=[2, 2])
        last = node("Relu", ["m"], "r")
    node("Conv", [last, const("w2", rng.standard_normal((2, 4, 1, 1))),
                  const("b2", rng.standard_normal(2))], "y")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info(o, F, None) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString(), outputs


def _ort_ranges(model_bytes: bytes, names: list, x: np.ndarray) -> dict:
    """{tensor: (min, max)} over the samples of `x`, from onnxruntime's float run."""
    import onnxruntime as ort

    model = onnx.load_from_string(model_bytes)
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(helper.make_tensor_value_info(n, F, None) for n in names
                              if n not in have)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    runs = [sess.run(names, {"x": x[i:i + 1]}) for i in range(len(x))]
    return {n: (min(float(r[k].min()) for r in runs), max(float(r[k].max()) for r in runs))
            for k, n in enumerate(names)}


def _plan(tmp_path, kind) -> tuple:
    """(plan of every activation from onnxruntime's float ranges, those ranges)."""
    from qconvert.quant.plan import plan_activations

    data, outputs = _onnx_model(kind)
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    graph = load_model(path).graph
    names = [n for n, t in graph.tensors.items() if t.data is None and n != "x"]
    x = np.random.default_rng(1).standard_normal((SAMPLES, 3, 8, 8)).astype(np.float32)
    ranges = _ort_ranges(data, names, x)
    ranges["x"] = (float(x.min()), float(x.max()))
    return plan_activations(graph, ranges), ranges


def _check(params, name, lo_hi):
    scale, zp = params[name]
    want_scale, want_zp = _expected(*lo_hi)
    assert float(scale) == pytest.approx(want_scale, rel=1e-6), name
    assert zp == want_zp, name


@pytest.mark.parametrize("kind", ["relu", "clip"])
def test_onnx_conv_output_takes_the_range_of_its_clamping_activation(tmp_path, kind):
    params, ranges = _plan(tmp_path, kind)
    assert ranges["c"][0] < 0  # the conv's own range would have a zero point above -128
    for name in ("c", "r"):
        _check(params, name, ranges["r"])
    assert params["c"][1] == -128


@pytest.mark.parametrize("kind", ["also_output", "two_readers"])
def test_onnx_conv_output_keeps_its_own_range_when_something_else_reads_it(tmp_path, kind):
    params, ranges = _plan(tmp_path, kind)
    assert ranges["c"][0] < 0
    _check(params, "c", ranges["c"])
    _check(params, "r", ranges["r"])


def test_onnx_relu_after_a_pass_through_op_leaves_the_shared_range_alone(tmp_path):
    """MaxPool shares its input's parameters: its output keeps the conv's (and the pool's)
    range, and the ReLU output keeps its own [0, max]."""
    params, ranges = _plan(tmp_path, "after_pool")
    shared = (min(ranges["c"][0], ranges["m"][0]), max(ranges["c"][1], ranges["m"][1]))
    assert shared[0] < 0
    for name in ("c", "m"):
        _check(params, name, shared)
    _check(params, "r", ranges["r"])


def test_onnx_qdq_output_quantizes_the_conv_output_on_the_relu_grid(tmp_path):
    """End to end: in the QDQ model every QuantizeLinear of the conv output or of the ReLU
    output uses the ReLU's range (the conv output may also have none: Conv -> Relu -> Q)."""
    data, _ = _onnx_model("relu")
    src, out = tmp_path / "m.onnx", tmp_path / "m_int8.onnx"
    src.write_bytes(data)
    x = np.random.default_rng(1).standard_normal((SAMPLES, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "calib.npy", x)
    result = _invoke(["quantize", src, "--calibration", tmp_path / "calib.npy", "-o", out])
    assert result.exit_code == 0, result.output
    want_scale, want_zp = _expected(*_ort_ranges(data, ["r"], x)["r"])
    g = onnx.load(str(out)).graph
    init = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    quantized = [(float(init[n.input[1]]), int(init[n.input[2]])) for n in g.node
                 if n.op_type == "QuantizeLinear" and n.input[0] in ("c", "r")]
    assert quantized
    for scale, zp in quantized:
        assert scale == pytest.approx(want_scale, rel=1e-5) and zp == want_zp == -128


# ---- TFLite: a standalone RELU (--no-fuse), bit-exact in TFLite Micro ------------------------

def _tflite_conv_relu() -> bytes:
    """x -> CONV_2D "c" -> RELU "r" -> CONV_2D "y" (outputs y and r), NHWC."""
    rng = np.random.default_rng(2)
    g = Graph("main")
    spatial = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0],
               "activation": "NONE", "group": 1}

    def tensor(name, shape, data=None):
        g.add_tensor(Tensor(name, tuple(shape), "float32", data))
        return name

    def const(name, shape):
        return tensor(name, shape, rng.standard_normal(shape).astype(np.float32))

    tensor("x", (1, 8, 8, 3))
    g.inputs.append("x")
    tensor("c", (1, 6, 6, 4))
    g.nodes.append(Node("Conv2D", ["x", const("w1", (4, 3, 3, 3)), const("b1", (4,))], ["c"],
                        dict(spatial, kernel_shape=[3, 3]), "c"))
    tensor("r", (1, 6, 6, 4))
    g.nodes.append(Node("Relu", ["c"], ["r"], {}, "r"))
    tensor("y", (1, 6, 6, 2))
    g.nodes.append(Node("Conv2D", ["r", const("w2", (2, 1, 1, 4)), const("b2", (2,))], ["y"],
                        dict(spatial, kernel_shape=[1, 1]), "y"))
    g.outputs = ["y", "r"]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


def test_tflite_standalone_relu_shares_its_range_and_runs_bit_exact_in_tflm(tmp_path):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    src, out = tmp_path / "m.tflite", tmp_path / "m_int8.tflite"
    src.write_bytes(_tflite_conv_relu())
    x = np.random.default_rng(3).standard_normal((SAMPLES, 8, 8, 3)).astype(np.float32)
    np.save(tmp_path / "calib.npy", x)
    result = _invoke(["quantize", src, "--calibration", tmp_path / "calib.npy", "--no-fuse",
                      "-o", out])
    assert result.exit_code == 0, result.output

    it = Interpreter(model_path=str(src), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    r_index = next(d["index"] for d in it.get_output_details() if d["name"] == "r")
    hi = 0.0
    for sample in x:
        it.set_tensor(it.get_input_details()[0]["index"], sample[None])
        it.invoke()
        hi = max(hi, float(it.get_tensor(r_index).max()))

    graph = load_model(out).graph
    assert [n.op for n in graph.nodes] == ["Conv2D", "Relu", "Conv2D"]
    want_scale, want_zp = _expected(0.0, hi)
    for name in ("c", "r"):
        q = graph.tensors[name].quant
        assert float(q.scale[0]) == pytest.approx(want_scale, rel=1e-5), name
        assert int(q.zero_point[0]) == want_zp == -128, name
    for seed in (0, 1, 2):
        tflm = run_tflm(out.read_bytes(), seed)
        xq = random_inputs([((1, 8, 8, 3), np.int8)], seed)[0]  # what run_tflm feeds
        ours = run_int8(graph, {graph.inputs[0]: xq})
        for got, name in zip(tflm, graph.outputs):
            np.testing.assert_array_equal(got, ours[name])
