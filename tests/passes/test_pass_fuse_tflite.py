"""Fusion passes on TFLite models (NHWC, [C] constants, fused activations), with LiteRT's
reference kernels as the oracle: outputs before and after agree within 1e-5 relative; and the
shared TFLite models survive the whole pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.float_tflite_nets import SPATIAL, TfNet
from helpers.oracles import TEST_MODELS, assert_close, run_litert
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext
from qconvert.passes.pipeline import FUSE_PIPELINE, run_pipeline

FUSIONS = ["fuse-conv-batchnorm", "fuse-conv-mul", "fuse-conv-add"]


def fuse(tmp_path, data, passes=FUSIONS + ["fuse-activation"]):
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    model = load_model(path)
    counts = run_pipeline(model, passes, PassContext("tflite"))
    out = serialize(model)
    for seed in (0, 1):
        assert_close(run_litert(data, seed), run_litert(out, seed))
    return counts, model


def ops(model):
    return [n.op for n in model.graph.nodes]


def test_conv_mul_add_with_activation_moves_it_to_conv(tmp_path):
    n = TfNet()
    c = n.conv(n.input("x", (1, 8, 8, 3)), 4, "c")
    m = n.node("Mul", [c, n.const("k", (4,), 0.5)], "m", (1, 6, 6, 4), activation="NONE")
    n.node("Add", [m, n.const("t", (1, 1, 1, 4))], "y", (1, 6, 6, 4), activation="RELU")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == ["Conv2D"] and model.graph.nodes[0].attrs["activation"] == "RELU"
    assert model.graph.nodes[0].inputs[2] is not None


def test_depthwise_with_multiplier_sub_and_mul(tmp_path):
    n = TfNet()
    x = n.input("x", (1, 8, 8, 3))
    w = n.const("w", (1, 3, 3, 6))
    d = n.node("DepthwiseConv2D", [x, w, n.const("b", (6,))], "d", (1, 6, 6, 6),
               **dict(SPATIAL, kernel_shape=[3, 3], depth_multiplier=2))
    s = n.node("Sub", [n.const("k", (6,)), d], "s", (1, 6, 6, 6), activation="NONE")
    n.node("Mul", [s, n.const("m", (1, 1, 1, 6), 0.5)], "y", (1, 6, 6, 6), activation="NONE")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == ["DepthwiseConv2D"]


def test_fully_connected_gets_a_bias_and_a_scale(tmp_path):
    n = TfNet()
    x = n.input("x", (2, 5))
    f = n.node("FullyConnected", [x, n.const("w", (4, 5)), None], "f", (2, 4),
               activation="NONE", keep_num_dims=False)
    a = n.node("Add", [f, n.const("t", (4,))], "a", (2, 4), activation="NONE")
    n.node("Div", [a, n.const("k", (1,), 0.5)], "y", (2, 4), activation="NONE")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == ["FullyConnected"] and counts["fuse-conv-add"] == 1


@pytest.mark.parametrize("act,attr", [("Relu", "RELU"), ("Relu6", "RELU6")])
@pytest.mark.parametrize("layer", ["Conv2D", "FullyConnected"])
def test_activation_fuses_for_tflite_output(tmp_path, act, attr, layer):
    n = TfNet()
    if layer == "Conv2D":
        y = n.conv(n.input("x", (1, 8, 8, 3)), 4, "c")
        shape = (1, 6, 6, 4)
    else:
        y = n.node("FullyConnected", [n.input("x", (2, 5)), n.const("w", (4, 5)), None], "c",
                   (2, 4), activation="NONE", keep_num_dims=False)
        shape = (2, 4)
    n.node(act, [y], "y", shape)
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == [layer] and model.graph.nodes[0].attrs["activation"] == attr
    assert model.graph.outputs == ["y"]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("act,attr", [("Relu", "RELU"), ("Relu6", "RELU6")])
def test_activation_fuses_into_residual_add_sub_mul(tmp_path, op, act, attr):
    n = TfNet()
    x = n.input("x", (1, 8, 8, 3))
    a, b = n.conv(x, 4, "c1"), n.conv(x, 4, "c2")
    s = n.node(op, [a, b], "sum", (1, 6, 6, 4), activation="NONE")
    n.node(act, [s], "y", (1, 6, 6, 4))
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert counts["fuse-activation"] == 1 and ops(model) == ["Conv2D", "Conv2D", op]
    assert model.graph.nodes[2].attrs["activation"] == attr and model.graph.outputs == ["y"]


def test_no_activation_fusion_into_an_add_with_two_readers_or_a_graph_output(tmp_path):
    n = TfNet()
    x = n.input("x", (1, 8, 8, 3))
    a, b = n.conv(x, 4, "c1", activation="RELU"), n.conv(x, 4, "c2", activation="RELU")
    s = n.node("Add", [a, b], "sum", (1, 6, 6, 4), activation="NONE")
    r = n.node("Relu", [s], "r", (1, 6, 6, 4))
    n.node("Add", [r, s], "y", (1, 6, 6, 4), activation="NONE")  # sum read twice
    s2 = n.node("Add", [a, b], "sum2", (1, 6, 6, 4), activation="NONE")
    n.node("Relu", [s2], "r2", (1, 6, 6, 4))  # sum2 is a graph output
    counts, model = fuse(tmp_path, n.build(["y", "sum2", "r2"]))
    assert counts["fuse-activation"] == 0 and ops(model).count("Relu") == 2


def test_no_affine_fold_after_a_fused_activation(tmp_path):
    n = TfNet()
    c = n.conv(n.input("x", (1, 8, 8, 3)), 4, "c", activation="RELU")
    n.node("Mul", [c, n.const("k", (4,), 0.5)], "y", (1, 6, 6, 4), activation="NONE")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0 and ops(model) == ["Conv2D", "Mul"]


@pytest.mark.parametrize("shape", [(6, 4), (6, 6, 4), (1, 1, 1, 1, 4)])
def test_no_fold_of_constant_varying_off_the_channel_axis(tmp_path, shape):
    n = TfNet()
    c = n.conv(n.input("x", (1, 8, 8, 3)), 4, "c")
    out = (1,) * (len(shape) - 4) + (1, 6, 6, 4)
    n.node("Add", [c, n.const("k", shape)], "y", out, activation="NONE")
    counts, _ = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_activation_fusion_when_two_readers_or_already_fused(tmp_path):
    n = TfNet()
    x = n.input("x", (1, 8, 8, 3))
    c = n.conv(x, 4, "c")
    r = n.node("Relu", [c], "r", (1, 6, 6, 4))
    c2 = n.conv(x, 4, "c2", activation="RELU")
    r2 = n.node("Relu6", [c2], "r2", (1, 6, 6, 4))
    a = n.node("Add", [r, c], "a", (1, 6, 6, 4), activation="NONE")
    n.node("Add", [a, r2], "y", (1, 6, 6, 4), activation="NONE")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert counts["fuse-activation"] == 0


@pytest.mark.parametrize("path", sorted(TEST_MODELS.glob("*.tflite")), ids=lambda p: p.name)
def test_shared_tflite_models_through_the_whole_pipeline(tmp_path, path):
    model = load_model(path)
    counts = run_pipeline(model, list(FUSE_PIPELINE), PassContext("tflite"))
    out = serialize(model)
    before, after = run_litert(path.read_bytes()), run_litert(out)
    if "int8" in path.name or "quant" in path.name or path.name == "kws_ref_model.tflite":
        assert sum(counts.values()) == 0  # nothing to fold in a quantized model
        for a, b in zip(before, after):
            np.testing.assert_array_equal(a, b)
    else:
        assert_close(before, after)
