"""ONNX -> TFLite for the activation, normalization and attention ops of exported models
(passes/onnx_to_tflite/ops_math.py; int8 kernels in qconvert/executor/int_kernels_math.py).

For each small graph: the converted float TFLite model in LiteRT (reference kernels) equals
onnxruntime (graph optimizations off) within 1e-4 of each output's largest magnitude; the int8
model `qconvert quantize` writes runs in TFLite Micro and gives the same bits as qconvert's
integer executor; what cannot be done is refused in one line naming the op, nothing written."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import OnnxNet, assert_close, random_inputs, run_litert, run_tflm
from qconvert.cli.app import main
from qconvert.executor.float_executor import run_float
from qconvert.executor.int_executor import run_int8
from qconvert.formats.layer_table import layer_macs
from qconvert.formats.model_io import load_model


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _ort(path, xs: list) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})


def _litert(path, xs: list) -> list:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=path.read_bytes(),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], np.transpose(x, (0, 2, 3, 1)).copy() if x.ndim == 4 else x)
    it.invoke()
    outs = [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    return outs


def _to_onnx_layout(outs: list, nhwc: list) -> list:
    """Outputs computed NHWC stay NHWC (the CLI says which): back to NCHW to compare."""
    return [np.transpose(o, (0, 3, 1, 2)) if flag else o for o, flag in zip(outs, nhwc)]


def _samples(shapes, n, seed=0, positive=False) -> list:
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((n,) + tuple(s[1:])).astype(np.float32) for s in shapes]
    return [np.abs(a) + 0.1 if positive else a for a in arrays]


def _check(tmp_path, onnx_bytes: bytes, shapes: list, *, int8=True, rel=1e-4, positive=False,
           name="m", litert_int8=True) -> tuple:
    """Convert (float equivalence), then quantize (TFLite Micro bit-exactness); returns the
    float and int8 TFLite graphs."""
    src = tmp_path / f"{name}.onnx"
    src.write_bytes(onnx_bytes)
    out = tmp_path / f"{name}.tflite"
    result = _invoke(["convert", src, "-o", out])
    assert result.exit_code == 0, result.output
    nhwc = [f"output {o!r}: NHWC" in result.output for o in load_model(src).graph.outputs]
    for seed in (0, 1):
        xs = [x[:1] for x in _samples(shapes, 1, seed, positive)]
        refs = _ort(src, xs)
        assert_close(refs, _to_onnx_layout(_litert(out, xs), nhwc), rel)
        model = load_model(src)  # the float executor calibration runs on
        ours = run_float(model, dict(zip(model.graph.inputs, xs)))
        assert_close(refs, [ours[n] for n in model.graph.outputs], rel)
    float_graph = load_model(out).graph
    if not int8:
        return float_graph, None
    names = load_model(src).graph.inputs
    data = tmp_path / "calib.npz"
    np.savez(data, **dict(zip(names, _samples(shapes, 24, 7, positive))))
    q = tmp_path / f"{name}_int8.tflite"
    result = _invoke(["quantize", src, "--calibration", data, "-o", q])
    assert result.exit_code == 0, result.output
    graph = load_model(q).graph
    for seed in (0, 1, 2):
        tflm = run_tflm(q.read_bytes(), seed)
        feeds = random_inputs([(graph.tensors[n].shape, np.int8) for n in graph.inputs], seed)
        ours = run_int8(graph, dict(zip(graph.inputs, feeds)))
        for a, name_out in zip(tflm, graph.outputs):
            np.testing.assert_array_equal(a, ours[name_out])
    if litert_int8:  # the op versions are ones LiteRT accepts
        assert len(run_litert(q.read_bytes())) == len(graph.outputs)
    return float_graph, graph


def _ops(graph) -> list:
    return [n.op for n in graph.nodes]


# -- activations -----------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.1, -0.3, 1.7])
def test_leaky_relu_is_leaky_relu(tmp_path, alpha):
    net = OnnxNet(1)
    x = net.input("x", [1, 3, 6, 6])
    c = net.conv(x, 3, 5, "c", pads=[1, 1, 1, 1])
    net.node("LeakyRelu", [c], "y", alpha=alpha)
    f, q = _check(tmp_path, net.build(["y"]), [(1, 3, 6, 6)])
    assert _ops(f) == ["Conv2D", "LeakyRelu"] and _ops(q) == ["Conv2D", "LeakyRelu"]
    assert f.nodes[1].attrs["alpha"] == pytest.approx(alpha)


def test_prelu_slope_follows_the_layout(tmp_path):
    """PyTorch's per-channel slope [C, 1, 1] (mixed signs) on NCHW becomes [C] on NHWC; a
    scalar slope on a 2-D tensor stays a scalar."""
    net = OnnxNet(2)
    x = net.input("x", [1, 4, 5, 5])
    c = net.conv(x, 4, 6, "c", pads=[1, 1, 1, 1])
    slope = np.array([0.25, -0.5, 0.1, 0.0, 1.5, 0.02], np.float32).reshape(6, 1, 1)
    p = net.node("PRelu", [c, net.const("slope", slope)], "p")
    g = net.node("GlobalAveragePool", [p], "gap")
    flat = net.node("Flatten", [g], "flat")
    fc = net.node("Gemm", [flat, net.rand("w", 3, 6), net.rand("b", 3)], "fc", transB=1)
    net.node("PRelu", [fc, net.const("s2", np.array([0.3], np.float32))], "y")
    f, q = _check(tmp_path, net.build(["p", "y"]), [(1, 4, 5, 5)])
    prelus = [n for n in f.nodes if n.op == "PRelu"]
    assert len(prelus) == 2 and "Transpose" not in _ops(f)
    np.testing.assert_array_equal(f.tensors[prelus[0].inputs[1]].data, slope.reshape(6))
    assert [n.op for n in q.nodes].count("PRelu") == 2


def test_prelu_with_a_computed_slope(tmp_path):
    """A slope that is an activation (a graph input, [1, C, 1, 1]) is brought to the layout."""
    net = OnnxNet(22)
    x = net.input("x", [1, 3, 4, 5])
    s = net.input("s", [1, 3, 1, 1])
    c = net.conv(x, 3, 3, "c", k=1)
    net.node("PRelu", [c, s], "y")
    f, q = _check(tmp_path, net.build(["y"]), [(1, 3, 4, 5), (1, 3, 1, 1)])
    assert "PRelu" in _ops(f) and "Transpose" not in _ops(f) and "PRelu" in _ops(q)


@pytest.mark.parametrize("op,attrs", [("Sigmoid", {}), ("Tanh", {}), ("Abs", {}),
                                      ("HardSigmoid", {"alpha": 0.25, "beta": 0.4})])
def test_standalone_activations_run_int8(tmp_path, op, attrs):
    net = OnnxNet(3)
    x = net.input("x", [1, 2, 4, 4])
    c = net.conv(x, 2, 4, "c", k=1)
    net.node(op, [c], "y", **attrs)
    _check(tmp_path, net.build(["y"]), [(1, 2, 4, 4)])


def test_x_times_hard_sigmoid_is_hard_swish_in_int8(tmp_path):
    net = OnnxNet(4)
    x = net.input("x", [1, 3, 4, 4])
    c = net.conv(x, 3, 4, "c", k=1)
    h = net.node("HardSigmoid", [c], "h", alpha=1.0 / 6.0, beta=0.5)
    net.node("Mul", [c, h], "y")
    f, q = _check(tmp_path, net.build(["y"], opset=13), [(1, 3, 4, 4)])
    assert _ops(f) == ["Conv2D", "HardSwish"] and _ops(q) == ["Conv2D", "HardSwish"]


# -- Pow, Sqrt, Reciprocal, ReduceMean, Softmax ----------------------------------------------------
def test_pow_two_is_mul_of_x_by_itself(tmp_path):
    net = OnnxNet(5)
    x = net.input("x", [1, 6, 8])
    net.node("Pow", [x, net.const("two", np.array(2.0, np.float32))], "y")
    f, _ = _check(tmp_path, net.build(["y"]), [(1, 6, 8)])
    assert _ops(f) == ["Mul"] and f.nodes[0].inputs[0] == f.nodes[0].inputs[1]


def test_sqrt_converts_float_and_is_refused_for_int8(tmp_path):
    """TFLite Micro's SQRT is float only: `quantize` names it, exit 1, nothing written."""
    net = OnnxNet(6)
    x = net.input("x", [1, 5])
    s = net.node("Sqrt", [x], "s")
    net.node("Pow", [s, net.const("half", np.array([0.5], np.float32))], "y")
    f, _ = _check(tmp_path, net.build(["y"]), [(1, 5)], int8=False, positive=True)
    assert _ops(f) == ["Sqrt", "Sqrt"]
    np.save(tmp_path / "c.npy", np.abs(np.random.default_rng(0).standard_normal((4, 5)))
            .astype(np.float32))
    before = sorted(os.listdir(tmp_path))
    result = _invoke(["quantize", tmp_path / "m.onnx", "--calibration", tmp_path / "c.npy", "-o",
                      tmp_path / "q.tflite"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no int8 rule" in lines[0] and "Sqrt" in lines[0], result.output
    assert sorted(os.listdir(tmp_path)) == before


def test_reciprocal_is_div_in_float_and_int8(tmp_path):
    net = OnnxNet(7)
    x = net.input("x", [1, 2, 3, 4])
    net.node("Reciprocal", [x], "y")
    # LiteRT stops at a divisor equal to its zero point, which random int8 inputs reach
    f, q = _check(tmp_path, net.build(["y"]), [(1, 2, 3, 4)], positive=True, litert_int8=False)
    assert _ops(f) == ["Div"] and _ops(q) == ["Div"]
    header = tmp_path / "div.h"  # the C header has DIV's TFLite Micro parameters
    assert _invoke(["export-c-header", tmp_path / "m_int8.tflite", "-o", header]).exit_code == 0
    assert "_OUTPUT_MULTIPLIER" in header.read_text() and "_INPUT2_OFFSET" in header.read_text()


def test_div_of_two_activations_runs_int8(tmp_path):
    net = OnnxNet(8)
    a = net.input("a", [1, 6])
    b = net.input("b", [1, 6])
    net.node("Div", [a, b], "y")
    f, q = _check(tmp_path, net.build(["y"]), [(1, 6), (1, 6)], positive=True)
    assert _ops(q) == ["Div"]


@pytest.mark.parametrize("axes,keep", [([1], 1), ([2, 3], 0), ([1, 2, 3], 1), ([-1], 0)])
def test_reduce_mean_over_any_axes_is_mean(tmp_path, axes, keep):
    net = OnnxNet(9)
    x = net.input("x", [1, 3, 4, 5])
    c = net.conv(x, 3, 4, "c", k=1)
    net.node("ReduceMean", [c], "y", axes=axes, keepdims=keep)
    f, q = _check(tmp_path, net.build(["y"]), [(1, 3, 4, 5)])
    assert "Mean" in _ops(q)


@pytest.mark.parametrize("axes,keep", [([1], 1), ([2, 3], 0)])
def test_reduce_sum_is_sum_in_int8(tmp_path, axes, keep):
    net = OnnxNet(9)
    x = net.input("x", [1, 3, 4, 5])
    c = net.conv(x, 3, 4, "c", k=1)
    net.node("ReduceSum", [c, net.const("axes", np.asarray(axes, np.int64))], "y", keepdims=keep)
    f, q = _check(tmp_path, net.build(["y"]), [(1, 3, 4, 5)])
    assert "ReduceSum" in _ops(q)


@pytest.mark.parametrize("shape,axis", [((1, 4, 3, 5), 1), ((1, 6, 7), -2), ((1, 6, 7), 2)])
def test_softmax_on_any_axis(tmp_path, shape, axis):
    net = OnnxNet(10)
    x = net.input("x", list(shape))
    net.node("Softmax", [x], "y", axis=axis)
    f, q = _check(tmp_path, net.build(["y"]), [shape])
    assert "Softmax" in _ops(q)


# -- LayerNorm ---------------------------------------------------------------------------------
def _decomposed_layer_norm(net, x, d, p, pow_exp=2.0):
    m = net.node("ReduceMean", [x], p + "_m", axes=[-1])
    c = net.node("Sub", [x, m], p + "_c")
    sq = net.node("Pow", [c, net.const(p + "_two", np.array(pow_exp, np.float32))], p + "_sq")
    v = net.node("ReduceMean", [sq], p + "_v", axes=[-1])
    ve = net.node("Add", [v, net.const(p + "_eps", np.array(1e-5, np.float32))], p + "_ve")
    s = net.node("Sqrt", [ve], p + "_s")
    n = net.node("Div", [c, s], p + "_n")
    g = net.node("Mul", [n, net.rand(p + "_g", d)], p + "_gm")
    return net.node("Add", [g, net.rand(p + "_b", d)], p + "_out")


def test_layer_normalization_op(tmp_path):
    """LayerNormalization (opset 17) over the last axis of a 3-D tensor and over C, H, W of a
    feature map (axis 1: the mapped axes of NHWC data)."""
    net = OnnxNet(11)
    x = net.input("x", [1, 6, 16])
    net.node("LayerNormalization", [x, net.rand("g", 16), net.rand("b", 16)], "y", axis=-1,
             epsilon=1e-5)
    f, q = _check(tmp_path, net.build(["y"], opset=17), [(1, 6, 16)])
    assert _ops(f) == ["Mean", "Sub", "Mul", "Mean", "Add", "Rsqrt", "Mul", "Mul", "Add"]
    assert _ops(q) == _ops(f)
    net = OnnxNet(12)
    x = net.input("x", [1, 3, 4, 4])
    c = net.conv(x, 3, 4, "c", k=1)
    net.node("LayerNormalization", [c, net.rand("g", 4, 4, 4), net.rand("b", 4, 4, 4)], "y",
             axis=1, epsilon=1e-3)
    f, _ = _check(tmp_path, net.build(["y"], opset=17), [(1, 3, 4, 4)], name="ln4")
    assert "Transpose" not in _ops(f)


def test_decomposed_layer_norm_uses_rsqrt(tmp_path):
    """ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul, Add: the Div by the Sqrt
    becomes a Mul by RSQRT, so every op has an int8 TFLite Micro kernel."""
    net = OnnxNet(13)
    x = net.input("x", [1, 5, 12])
    _decomposed_layer_norm(net, x, 12, "ln")
    f, q = _check(tmp_path, net.build(["ln_out"]), [(1, 5, 12)])
    assert "Rsqrt" in _ops(f) and not {"Sqrt", "Div"} & set(_ops(f))


def test_sqrt_read_twice_is_not_rewritten(tmp_path):
    """Must not fire: the Sqrt also feeds a graph output, so the Div stays a DIV by SQRT."""
    net = OnnxNet(14)
    x = net.input("x", [1, 4])
    s = net.node("Sqrt", [x], "s")
    net.node("Div", [x, s], "y")
    f, _ = _check(tmp_path, net.build(["y", "s"]), [(1, 4)], int8=False, positive=True)
    assert _ops(f) == ["Sqrt", "Div"]


# -- attention ---------------------------------------------------------------------------------
def _weights(net, name, n_in, n_out):
    w = net.rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)
    return net.const(name, w.astype(np.float32))


def test_matmul_of_activations_reads_a_transposed_key_with_adj_y(tmp_path):
    """Single-head attention: q @ Transpose(k) is BATCH_MATMUL(q, k, adj_y) with no TRANSPOSE;
    softmax over the last axis; @ v."""
    net = OnnxNet(15)
    x = net.input("x", [1, 6, 8])
    q = net.node("MatMul", [x, _weights(net, "wq", 8, 8)], "q")
    k = net.node("MatMul", [x, _weights(net, "wk", 8, 8)], "k")
    v = net.node("MatMul", [x, _weights(net, "wv", 8, 8)], "v")
    kt = net.node("Transpose", [k], "kt", perm=[0, 2, 1])
    s = net.node("MatMul", [q, kt], "s")
    a = net.node("Softmax", [s], "a", axis=-1)
    net.node("MatMul", [a, v], "y")
    f, q8 = _check(tmp_path, net.build(["y"]), [(1, 6, 8)])
    bmm = [n for n in f.nodes if n.op == "BatchMatMul"]
    assert len(bmm) == 2 and bmm[0].attrs["adj_y"] and not bmm[0].attrs["adj_x"]
    assert not bmm[1].attrs["adj_y"] and "Transpose" not in _ops(f)
    assert [n.op for n in q8.nodes].count("BatchMatMul") == 2


def test_batched_matmul_4d_with_broadcast(tmp_path):
    """4-D operands, a transposed left operand (adj_x) and a broadcast batch axis."""
    net = OnnxNet(16)
    a = net.input("a", [1, 10, 3])
    b = net.input("b", [1, 5, 4])
    a4 = net.node("Reshape", [a, net.const("sa", np.array([1, 2, 5, 3], np.int64))], "a4")
    b4 = net.node("Reshape", [b, net.const("sb", np.array([1, 1, 5, 4], np.int64))], "b4")
    at = net.node("Transpose", [a4], "at", perm=[0, 1, 3, 2])
    net.node("MatMul", [at, b4], "y")
    f, q = _check(tmp_path, net.build(["y"]), [(1, 10, 3), (1, 5, 4)])
    assert _ops(f) == ["Reshape", "Reshape", "BatchMatMul"]
    assert f.nodes[2].attrs["adj_x"] and not f.nodes[2].attrs["adj_y"]


def _tiny_transformer(seed=17, t=8, d=16, heads=2) -> bytes:
    """LayerNormalization, 2-head attention (BATCH_MATMUL, softmax), residual, decomposed
    LayerNorm, MLP with residual."""
    net = OnnxNet(seed)
    x = net.input("x", [1, t, d])
    ln1 = net.node("LayerNormalization", [x, net.rand("ln1_g", d), net.rand("ln1_b", d)],
                   "ln1", axis=-1, epsilon=1e-5)
    split = net.const("split_shape", np.array([1, t, heads, d // heads], np.int64))

    def head(name, perm):
        p = net.node("MatMul", [ln1, _weights(net, f"w{name}", d, d)], name)
        return net.node("Transpose", [net.node("Reshape", [p, split], f"{name}4")],
                        f"{name}h", perm=perm)

    q, k, v = head("q", [0, 2, 1, 3]), head("k", [0, 2, 3, 1]), head("v", [0, 2, 1, 3])
    s = net.node("MatMul", [q, k], "scores")
    s = net.node("Mul", [s, net.const("inv_sqrt_dk", np.array(1 / np.sqrt(d // heads),
                                                              np.float32))], "scaled")
    a = net.node("Softmax", [s], "att", axis=-1)
    ctx = net.node("Transpose", [net.node("MatMul", [a, v], "ctx")], "ctx_t", perm=[0, 2, 1, 3])
    ctx = net.node("Reshape", [ctx, net.const("merge_shape", np.array([1, t, d], np.int64))],
                   "ctx3")
    r1 = net.node("Add", [x, net.node("MatMul", [ctx, _weights(net, "wo", d, d)], "o")], "res1")
    ln2 = _decomposed_layer_norm(net, r1, d, "ln2")
    h = net.node("Add", [net.node("MatMul", [ln2, _weights(net, "w1", d, 2 * d)], "fc1"),
                         net.rand("b1", 2 * d)], "fc1b")
    h = net.node("Relu", [h], "h")
    m = net.node("Add", [net.node("MatMul", [h, _weights(net, "w2", 2 * d, d)], "fc2"),
                         net.rand("b2", d)], "fc2b")
    net.node("Add", [r1, m], "y")
    return net.build(["y"], opset=17)


def test_tiny_transformer_block_end_to_end(tmp_path):
    f, q = _check(tmp_path, _tiny_transformer(), [(1, 8, 16)], name="block")
    ops = _ops(q)
    assert ops.count("BatchMatMul") == 2 and ops.count("Rsqrt") == 2 and "Softmax" in ops
    assert not {"Sqrt", "Div", "Pow"} & set(ops)
    # the only data moves: the attention's head split (q, k, v) and merge
    assert _ops(f).count("Transpose") == 4
    scores = next(n for n in q.nodes if n.op == "BatchMatMul")
    assert layer_macs(scores, q) == 2 * 8 * 8 * 8  # heads x T x T x d_head
    header = tmp_path / "block.h"
    result = _invoke(["export-c-header", tmp_path / "block_int8.tflite", "-o", header])
    assert result.exit_code == 0, result.output
    text = header.read_text()
    assert "_ADJ_Y" in text and "Rsqrt" in text


# -- refusals ----------------------------------------------------------------------------------
@pytest.mark.parametrize("build,words", [
    (lambda n, x: n.node("Pow", [x, n.const("e", np.array(3.0, np.float32))], "y"),
     "ops with no TFLite mapping: Pow (exponent 3)"),
    (lambda n, x: n.node("Erf", [x], "y"), "ops with no TFLite mapping: Erf"),
    (lambda n, x: n.node("PRelu", [n.node("Reshape", [x, n.const("s5", np.array(
        [1, 2, 2, 1, 6], np.int64))], "x5"), n.const("k", np.full(6, 0.2, np.float32))], "y"),
     "PRelu 'y_node' of a 5-D tensor"),
    (lambda n, x: n.nodes.append(__import__("onnx").helper.make_node(
        "LayerNormalization", [x, n.rand("g", 6)], ["y", "mu"], name="ln", axis=-1)) or "y",
     "LayerNormalization 'ln' (Mean / InvStdDev outputs are read)"),
])
def test_unmappable_forms_are_refused_in_one_line(tmp_path, build, words):
    net = OnnxNet(18)
    x = net.input("x", [1, 4, 6])
    build(net, x)
    outs = ["y", "mu"] if "LayerNormalization" in words else ["y"]
    src = tmp_path / "bad.onnx"
    src.write_bytes(net.build(outs, opset=17))
    before = sorted(os.listdir(tmp_path))
    result = _invoke(["convert", src, "-o", tmp_path / "bad.tflite"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.output
    assert sorted(os.listdir(tmp_path)) == before


def _tflm_run(model_bytes: bytes, feeds: list) -> list:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model_bytes)
    for i, a in enumerate(feeds):
        it.set_input(a, i)
    it.invoke()
    return [np.array(it.get_output(0))]


def test_int8_div_and_rsqrt_at_the_zero_point_match_tflite_micro(tmp_path):
    """Every int8 dividend against every divisor, the divisor's zero point (a division by
    zero) included; RSQRT of every value from its zero point up (0 gives 127)."""
    net = OnnxNet(19)
    a = net.input("a", [1, 256])
    b = net.input("b", [1, 256])
    net.node("Div", [a, b], "y")
    src = tmp_path / "div.onnx"
    src.write_bytes(net.build(["y"]))
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "c.npz", a=rng.standard_normal((8, 1, 256)).astype(np.float32),
             b=(np.abs(rng.standard_normal((8, 1, 256))) + 0.2).astype(np.float32))
    q = tmp_path / "div_int8.tflite"
    assert _invoke(["quantize", src, "--calibration", tmp_path / "c.npz", "-o", q]).exit_code == 0
    graph = load_model(q).graph
    every = np.arange(-128, 128, dtype=np.int8)[None]
    for shift in (0, 1, 77):
        feeds = [np.roll(every, shift, axis=1), every]
        np.testing.assert_array_equal(_tflm_run(q.read_bytes(), feeds)[0],
                                      run_int8(graph, dict(zip(graph.inputs, feeds)))["y"])
    net = OnnxNet(20)
    x = net.input("x", [1, 256])
    r = net.node("Relu", [x], "r")
    s = net.node("Sqrt", [r], "s")
    net.node("Reciprocal", [s], "y")
    src = tmp_path / "rsqrt.onnx"
    src.write_bytes(net.build(["y"]))
    np.save(tmp_path / "c.npy", rng.uniform(0.05, 4, (8, 1, 256)).astype(np.float32))
    q = tmp_path / "rsqrt_int8.tflite"
    assert _invoke(["quantize", src, "--calibration", tmp_path / "c.npy", "-o", q]).exit_code == 0
    graph = load_model(q).graph
    assert _ops(graph) == ["Relu", "Rsqrt"]
    np.testing.assert_array_equal(_tflm_run(q.read_bytes(), [every])[0],
                                  run_int8(graph, {graph.inputs[0]: every})["y"])


def test_div_by_a_constant_with_a_zero_is_refused_for_int8(tmp_path):
    """Must not quantize: a DIV by a constant stays a DIV only when the constant holds a 0 (else
    it is a MUL by its reciprocal); an int8 divisor would round small values to 0."""
    net = OnnxNet(21)
    x = net.input("x", [1, 4])
    net.node("Div", [x, net.const("k", np.array([2.0, 0.0, 0.01, 5.0], np.float32))], "y")
    src = tmp_path / "divk.onnx"
    src.write_bytes(net.build(["y"]))
    np.save(tmp_path / "c.npy", np.ones((4, 1, 4), np.float32))
    before = sorted(os.listdir(tmp_path))
    for out in ("q.tflite", "q.onnx"):
        result = _invoke(["quantize", src, "--calibration", tmp_path / "c.npy", "-o",
                          tmp_path / out])
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert "Div by a constant" in result.output and len(result.output.splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == before


def test_layer_normalization_quantizes_to_onnx_qdq(tmp_path):
    """ONNX QDQ output: LayerNormalization runs in onnxruntime between DequantizeLinear and
    QuantizeLinear, its scale and bias int8 per tensor; the output stays within int8 noise of
    the float model."""
    net = OnnxNet(23)
    x = net.input("x", [1, 6, 16])
    ln = net.node("LayerNormalization", [x, net.rand("g", 16), net.rand("b", 16)], "ln",
                  axis=-1, epsilon=1e-5)
    net.node("MatMul", [ln, _weights(net, "w", 16, 8)], "y")
    src = tmp_path / "ln.onnx"
    src.write_bytes(net.build(["y"], opset=17))
    calib = _samples([(1, 6, 16)], 32, 3)[0]
    np.save(tmp_path / "c.npy", calib)
    out = tmp_path / "ln_qdq.onnx"
    result = _invoke(["quantize", src, "--calibration", tmp_path / "c.npy", "-o", out])
    assert result.exit_code == 0, result.output
    ref = np.concatenate([_ort(src, [c[None]])[0] for c in calib[:8]])
    got = np.concatenate([_ort(out, [c[None]])[0] for c in calib[:8]])
    sqnr = 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2))
    assert sqnr > 25, sqnr
    import onnx

    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert "LayerNormalization" in ops and "QuantizeLinear" in ops


def test_tanh_gelu_is_its_formula_and_exact_gelu_is_refused(tmp_path):
    """ONNX Gelu (opset 20): approximate tanh -> MUL / ADD / TANH (int8 too); the erf form is
    refused in one line naming Gelu."""
    net = OnnxNet(24)
    x = net.input("x", [1, 6, 16])
    net.node("Gelu", [net.node("MatMul", [x, _weights(net, "w", 16, 16)], "h")], "y",
             approximate="tanh")
    f, q = _check(tmp_path, net.build(["y"], opset=20), [(1, 6, 16)])
    assert "Tanh" in _ops(q) and "Gelu" not in _ops(f)
    net = OnnxNet(25)
    x = net.input("x", [1, 6, 16])
    net.node("Gelu", [x], "y")
    src = tmp_path / "gelu.onnx"
    src.write_bytes(net.build(["y"], opset=20))
    model = load_model(src)  # the float executor computes the erf form (calibration needs it)
    xs = _samples([(1, 6, 16)], 1, 2)
    assert_close(_ort(src, xs), [run_float(model, {"x": xs[0]})["y"]], 1e-5)
    result = _invoke(["convert", src, "-o", tmp_path / "gelu.tflite"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "ops with no TFLite mapping: Gelu (approximate none" in result.output
    assert not (tmp_path / "gelu.tflite").exists()
