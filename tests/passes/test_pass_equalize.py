"""Cross-layer equalization: the float function is unchanged (onnxruntime with graph
optimizations off on the ONNX model, LiteRT on the TFLite one, before vs after, within 1e-5
relative), the per-channel ranges of each pair end up equal, and the pass does not fire where
scaling would change the function (ReLU6 / Clip between the layers, a second reader, a graph
output in between)."""

from __future__ import annotations

import numpy as np

from helpers.oracles import TEST_MODELS, OnnxNet, assert_close, run_litert, run_onnx
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext, run_passes
from qconvert.passes.fusion.equalize import _peaks


def _model(tmp_path, blob, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(blob)
    return load_model(path)


def _wide_net():
    """conv -> relu -> conv, conv -> maxpool -> depthwise -> conv, channel ranges 1e-3..1e2."""
    net = OnnxNet(3)
    x = net.input("x", [1, 4, 8, 8])
    spread = np.logspace(-3, 2, 8).astype(np.float32)
    w1 = net.rng.standard_normal((8, 4, 3, 3)).astype(np.float32) * spread[:, None, None, None]
    net.node("Conv", [x, net.const("w1", w1), net.const("b1", spread * 0.1)], "c1",
             kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    net.node("Relu", ["c1"], "r1")
    c2 = net.conv("r1", 8, 8, "c2", pads=[1, 1, 1, 1])
    net.node("MaxPool", [c2], "p2", kernel_shape=[2, 2], strides=[2, 2])
    net.conv("p2", 8, 8, "dw", group=8, pads=[1, 1, 1, 1])
    net.conv("dw", 8, 5, "pw", k=1)
    return net.build(["pw"])


def test_equalize_keeps_onnx_function_and_equalizes_ranges(tmp_path):
    blob = _wide_net()
    m = _model(tmp_path, blob)
    count = run_passes(m, ["equalize"], PassContext("onnx"))["equalize"]
    assert count == 3
    after = serialize(m, "onnx")
    for seed in (0, 1):
        assert_close(run_onnx(blob, seed), run_onnx(after, seed), 1e-5)
    g = m.graph
    by_out = {n.outputs[0]: n for n in g.nodes}
    for a, b, axis in (("c1", "c2", 1), ("c2", "dw", 0), ("dw", "pw", 1)):
        r1 = _peaks(g.tensors[by_out[a].inputs[1]].data, 0)
        r2 = _peaks(g.tensors[by_out[b].inputs[1]].data, axis)
        np.testing.assert_allclose(r1, r2, rtol=2e-3)
    before = load_model(tmp_path / "m.onnx").graph
    w_before = before.tensors["w1"].data
    spread_before = _peaks(w_before, 0).max() / _peaks(w_before, 0).min()
    w_after = g.tensors[by_out["c1"].inputs[1]].data
    assert _peaks(w_after, 0).max() / _peaks(w_after, 0).min() < spread_before / 100


def test_equalize_does_not_fire_through_clamps_second_readers_or_outputs(tmp_path):
    net = OnnxNet(4)
    x = net.input("x", [1, 3, 6, 6])
    net.conv(x, 3, 4, "a1", pads=[1, 1, 1, 1])
    net.node("Clip", ["a1", net.const("lo", np.float32(0)), net.const("hi", np.float32(6))],
             "clip")
    net.conv("clip", 4, 4, "b1", pads=[1, 1, 1, 1])        # through ReLU6: no
    net.conv("b1", 4, 4, "b2", pads=[1, 1, 1, 1])          # b1 also a graph output: no
    net.conv("b2", 4, 4, "c1", k=1)                        # b2 read twice: no
    net.conv("b2", 4, 4, "c2", k=1)
    net.node("Add", ["c1", "c2"], "y")
    blob = net.build(["y", "b1"])
    m = _model(tmp_path, blob)
    weights = {n: t.data.copy() for n, t in m.graph.tensors.items() if t.data is not None}
    assert run_passes(m, ["equalize"], PassContext("onnx"))["equalize"] == 0
    for n, w in weights.items():
        np.testing.assert_array_equal(m.graph.tensors[n].data, w)


def test_equalize_keeps_tflite_function(tmp_path):
    """On the float digits model (conv+RELU -> depthwise), the MLPerf ResNet-8 and the ad01
    fully connected autoencoder: pairs found, and LiteRT before and after agree within 1e-5."""
    for name in ("digits_cnn.tflite", "pretrainedResnet.tflite", "ad01_fp32.tflite"):
        src = TEST_MODELS / name
        m = load_model(src)
        assert run_passes(m, ["equalize"], PassContext("tflite"))["equalize"] > 0
        after = serialize(m, "tflite")
        for seed in (0, 1):
            assert_close(run_litert(src.read_bytes(), seed), run_litert(after, seed), 1e-5)


def test_equalize_does_not_fire_when_a_subgraph_reads_between_the_layers(tmp_path):
    """Must not fire: an If body reads the ReLU output between the two convs, so rescaling the
    first conv's channels would change what the body sees (onnxruntime: outputs unchanged)."""
    from onnx import TensorProto, helper, numpy_helper

    net = OnnxNet(5)
    x = net.input("x", [1, 3, 6, 6])
    spread = np.logspace(-2, 2, 4).astype(np.float32)
    w1 = net.rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * spread[:, None, None, None]
    net.node("Conv", [x, net.const("w1", w1)], "a", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    net.node("Relu", ["a"], "r")
    net.conv("r", 4, 4, "b", k=1)
    body_out = helper.make_tensor_value_info("t", TensorProto.FLOAT, None)
    then_graph = helper.make_graph([helper.make_node("Identity", ["r"], ["t"])], "then", [],
                                   [body_out])
    else_graph = helper.make_graph([helper.make_node("Identity", ["r"], ["t"])], "else", [],
                                   [body_out])
    net.inits.append(numpy_helper.from_array(np.array(True), "cond"))
    net.nodes.append(helper.make_node("If", ["cond"], ["seen"], then_branch=then_graph,
                                      else_branch=else_graph))
    blob = net.build(["b", "seen"])
    m = _model(tmp_path, blob)
    assert m.graph.read_in_body("r")
    assert run_passes(m, ["equalize"], PassContext("onnx"))["equalize"] == 0
    after = serialize(m, "onnx")
    for seed in (0, 1):
        assert_close(run_onnx(blob, seed), run_onnx(after, seed), 0)
    # without the If, the same pair is equalized: the subgraph read is what stops it
    net.nodes.pop()
    plain = _model(tmp_path, net.build(["b"]), "plain.onnx")
    assert run_passes(plain, ["equalize"], PassContext("onnx"))["equalize"] == 1
