"""Fusion passes on ONNX models: every pattern where a pass must fire, and every condition of
design.md where it must not. The oracle is onnxruntime with its own graph optimizations off:
outputs before and after agree within 1e-5 relative, and the node list shows what was folded."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.oracles import TEST_MODELS, OnnxNet, assert_close, run_onnx
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes import PassContext
from qconvert.passes.pipeline import FUSE_PIPELINE, run_pipeline

F = TensorProto.FLOAT
FUSIONS = ["fuse-conv-batchnorm", "fuse-conv-mul", "fuse-conv-add", "fuse-matmul-add"]


Net = OnnxNet


def fuse(tmp_path, data, passes=FUSIONS, rel=1e-5):
    """Run `passes` on the model; check outputs against the original; return (counts, model)."""
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    model = load_model(path)
    counts = run_pipeline(model, passes, PassContext("onnx"))
    out = serialize(model)
    for seed in (0, 1):
        assert_close(run_onnx(data, seed), run_onnx(out, seed), rel)
    return counts, model


def ops(model):
    return [n.op for n in model.graph.nodes]


# -- where the passes fire ----------------------------------------------------------------------

@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("group,cin", [(1, 3), (2, 4), (6, 6)])  # plain, grouped, depthwise
def test_conv_batchnorm(tmp_path, bias, group, cin):
    n = Net()
    x = n.input("x", [2, cin, 7, 7])
    ins = [x, n.rand("w", 6, cin // group, 3, 3)] + ([n.rand("b", 6)] if bias else [])
    c = n.node("Conv", ins, "c", group=group, pads=[1, 1, 1, 1])
    n.bn(c, 6, "y")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert counts["fuse-conv-batchnorm"] == 1 and ops(model) == ["Conv2D"]
    conv = model.graph.nodes[0]
    assert conv.outputs == ["y"] and conv.inputs[2] is not None  # a bias was created if absent


@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose_batchnorm_and_mul(tmp_path, group):
    n = Net()
    x = n.input("x", [1, 4, 5, 5])
    c = n.node("ConvTranspose", [x, n.rand("w", 4, 6 // group, 3, 3)], "c", group=group,
               strides=[2, 2])
    b = n.bn(c, 6, "bn")
    n.node("Mul", [b, n.rand("k", 1, 6, 1, 1)], "y")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == ["ConvTranspose"]
    assert counts["fuse-conv-batchnorm"] == 1 and counts["fuse-conv-mul"] == 1


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("with_c", [True, False])
def test_gemm_batchnorm_mul_add(tmp_path, trans_b, with_c):
    n = Net()
    x = n.input("x", [3, 5])
    w = n.rand("w", *((4, 5) if trans_b else (5, 4)))
    ins = [x, w] + ([n.rand("c", 1, 4)] if with_c else [])
    g = n.node("Gemm", ins, "g", transB=trans_b, alpha=0.5, beta=2.0)
    b = n.bn(g, 4, "bn")
    m = n.node("Mul", [b, n.rand("k", 4)], "m")
    n.node("Sub", [m, n.rand("t", 1)], "y")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == ["Gemm"]
    assert model.graph.nodes[0].attrs["alpha"] == 1.0 and model.graph.nodes[0].attrs["beta"] == 1.0


def test_matmul_mul_then_add_becomes_gemm(tmp_path):
    n = Net()
    x = n.input("x", [3, 5])
    mm = n.node("MatMul", [x, n.rand("w", 5, 4)], "mm")
    m = n.node("Mul", [n.rand("k", 4), mm], "m")
    n.node("Add", [m, n.rand("t", 1, 4)], "y")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == ["Gemm"]
    assert counts["fuse-conv-mul"] == 1 and counts["fuse-matmul-add"] == 1


@pytest.mark.parametrize("shape", [(6, 1, 1), (1, 6, 1, 1), (1,), ()])
@pytest.mark.parametrize("op,first", [("Mul", False), ("Mul", True), ("Div", False),
                                      ("Add", False), ("Add", True), ("Sub", False),
                                      ("Sub", True)])
def test_conv_affine_per_channel_and_scalar(tmp_path, shape, op, first):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.node("Conv", [x, n.rand("w", 6, 3, 3, 3), n.rand("b", 6)], "c")
    k = n.const("k", n.rng.uniform(0.5, 2.0, shape).astype(np.float32))
    n.node(op, [k, c] if first else [c, k], "y")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert ops(model) == ["Conv2D"] and sum(counts.values()) == 1


@pytest.mark.parametrize("order", [("Add", "Mul"), ("Mul", "Add"), ("Sub", "Div", "Add", "Mul")])
def test_chains_collapse_to_fixed_point(tmp_path, order):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    y = n.node("Conv", [x, n.rand("w", 4, 3, 3, 3)], "c")
    y = n.bn(y, 4, "bn")
    for i, op in enumerate(order):
        y = n.node(op, [y, n.const(f"k{i}", n.rng.uniform(0.5, 2, (4, 1, 1)).astype(np.float32))],
                   f"a{i}")
    counts, model = fuse(tmp_path, n.build([y]))
    assert ops(model) == ["Conv2D"] and model.graph.outputs == [y]


def test_shared_weights_are_copied_not_changed(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    w = n.rand("w", 4, 3, 3, 3)
    c1 = n.node("Conv", [x, w], "c1")
    c2 = n.node("Conv", [x, w], "c2")
    n.bn(c1, 4, "y1", prefix="bn1")
    n.node("Relu", [c2], "y2")
    counts, model = fuse(tmp_path, n.build(["y1", "y2"]))
    convs = [nd for nd in model.graph.nodes if nd.op == "Conv2D"]
    assert counts["fuse-conv-batchnorm"] == 1 and convs[0].inputs[1] != convs[1].inputs[1]


def test_batchnorm_to_affine_where_no_layer_absorbs_it(tmp_path):
    n = Net()
    x = n.input("x", [1, 4, 6, 6])
    p = n.node("MaxPool", [x], "p", kernel_shape=[2, 2])
    b1 = n.bn(p, 4, "b1", prefix="bn1")
    n.bn(x, 4, "b0", prefix="bn0")  # BN straight on a graph input
    n.node("Add", [b1, n.node("MaxPool", ["b0"], "p0", kernel_shape=[2, 2])], "y")
    counts, model = fuse(tmp_path, n.build(["y"]), ["batchnorm-to-affine"])
    assert counts["batchnorm-to-affine"] == 2 and "BatchNorm" not in ops(model)


def test_batchnorm_to_affine_leaves_foldable_batchnorm(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    n.bn(n.node("Conv", [x, n.rand("w", 4, 3, 1, 1)], "c"), 4, "y")
    counts, model = fuse(tmp_path, n.build(["y"]), ["batchnorm-to-affine"])
    assert counts["batchnorm-to-affine"] == 0 and "BatchNorm" in ops(model)


def test_batchnorm_1d_after_pool_then_folds_nowhere_but_runs(tmp_path):
    n = Net()
    x = n.input("x", [2, 4])
    n.bn(n.node("Relu", [x], "r"), 4, "y")
    counts, model = fuse(tmp_path, n.build(["y"]), ["batchnorm-to-affine", *FUSIONS])
    assert ops(model) == ["Relu", "Mul", "Add"]


def test_activation_stays_a_node_for_onnx_output(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    n.node("Relu", [n.node("Conv", [x, n.rand("w", 4, 3, 3, 3)], "c")], "y")
    counts, model = fuse(tmp_path, n.build(["y"]), list(FUSE_PIPELINE))
    assert counts["fuse-activation"] == 0 and ops(model) == ["Conv2D", "Relu"]


def test_digits_cnn_keeps_outputs_and_loses_every_batchnorm(tmp_path):
    data = (TEST_MODELS / "digits_cnn.onnx").read_bytes()
    counts, model = fuse(tmp_path, data, list(FUSE_PIPELINE))
    assert "BatchNorm" not in ops(model) and counts["fuse-conv-batchnorm"] == 4


# -- where they must not fire -------------------------------------------------------------------

def _conv_then(n, op, k, extra=None):
    x = n.input("x", [1, 3, 6, 6])
    c = n.node("Conv", [x, n.rand("w", 4, 3, 3, 3)], "c")
    return n.node(op, [c, k], "y") if extra is None else extra(c)


def test_no_fold_when_layer_output_has_two_readers(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.node("Conv", [x, n.rand("w", 4, 3, 3, 3)], "c")
    n.bn(c, 4, "b")
    n.node("Add", ["b", c], "y")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_fold_when_layer_output_is_graph_output(tmp_path):
    n = Net()
    _conv_then(n, "Mul", n.rand("k", 4, 1, 1))
    counts, model = fuse(tmp_path, n.build(["y", "c"]))
    assert sum(counts.values()) == 0


def test_no_fold_of_non_constant_operand(tmp_path):
    n = Net()
    k = n.input("k", [4, 1, 1])
    _conv_then(n, "Mul", k)
    counts, _ = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_fold_of_non_constant_weights(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    w = n.input("w", [4, 3, 3, 3])
    n.bn(n.node("Conv", [x, w], "c"), 4, "y")
    counts, _ = fuse(tmp_path, n.build(["y"]), FUSIONS)
    assert sum(counts.values()) == 0


@pytest.mark.parametrize("shape", [(4,),            # [C] aligns with W in NCHW, not channels
                                   (1, 4, 1, 1, 1),  # would enlarge the output's rank
                                   (4, 6, 1),        # varies along H as well
                                   (1, 1, 6, 4)])    # varies along H and W, not channels
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_no_fold_of_constant_that_is_not_per_channel(tmp_path, shape, op):
    n = Net()
    x = n.input("x", [1, 3, 6, 4])
    c = n.node("Conv", [x, n.rand("w", 4, 3, 1, 1)], "c")
    n.node(op, [c, n.rand("k", *shape)], "y")
    counts, _ = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_fold_when_channel_counts_differ(tmp_path):
    """A [4,1,1] constant on a 1-channel conv broadcasts the output to 4 channels."""
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.node("Conv", [x, n.rand("w", 1, 3, 3, 3)], "c")
    n.node("Mul", [c, n.rand("k", 4, 1, 1)], "y")
    counts, _ = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_fold_of_div_with_a_zero_or_of_k_over_conv(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.node("Conv", [x, n.rand("w", 4, 3, 3, 3)], "c")
    d = n.node("Div", [c, n.const("k", np.array([1, 0, 2, 3], np.float32).reshape(4, 1, 1))], "d")
    c2 = n.node("Conv", [x, n.rand("w2", 4, 3, 3, 3), n.rand("b2", 4)], "c2")
    e = n.node("Div", [n.rand("k2", 4, 1, 1, positive=True), c2], "e")
    n.node("Add", [d, e], "y")
    counts, _ = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_fold_of_conv_times_itself(tmp_path):
    n = Net()
    x = n.input("x", [1, 3, 6, 6])
    c = n.node("Conv", [x, n.rand("w", 4, 3, 3, 3)], "c")
    n.node("Mul", [c, c], "y")
    counts, _ = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_fold_of_gemm_with_full_bias_matrix(tmp_path):
    n = Net()
    x = n.input("x", [3, 5])
    g = n.node("Gemm", [x, n.rand("w", 5, 4), n.rand("c", 3, 4)], "g")
    n.node("Mul", [g, n.rand("k", 4)], "y")
    counts, _ = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_gemm_from_3d_matmul_and_no_bn_on_wrong_axis(tmp_path):
    n = Net()
    x = n.input("x", [2, 3, 5])
    mm = n.node("MatMul", [x, n.rand("w", 5, 4)], "mm")
    a = n.node("Add", [mm, n.rand("t", 4)], "a")
    mm2 = n.node("MatMul", [x, n.rand("w2", 5, 4)], "mm2")
    b = n.bn(mm2, 3, "b")  # channel axis 1 of [2, 3, 4] is not the MatMul's output channels
    n.node("Add", [a, b], "y")
    counts, model = fuse(tmp_path, n.build(["y"]))
    assert sum(counts.values()) == 0


def test_no_fold_of_batchnorm_with_extra_outputs(tmp_path):
    n = Net()
    x = n.input("x", [2, 3, 6, 6])
    c = n.node("Conv", [x, n.rand("w", 4, 3, 3, 3)], "c")
    params = [n.rand(p, 4, positive=p == "v") for p in ("g", "b", "m", "v")]
    n.nodes.append(helper.make_node("BatchNormalization", [c, *params], ["y", "rm", "rv"],
                                    training_mode=1))
    data = n.build(["y"], opset=15)
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    model = load_model(path)
    counts = run_pipeline(model, FUSIONS + ["batchnorm-to-affine"], PassContext("onnx"))
    assert sum(counts.values()) == 0 and serialize(model) == serialize(load_model(path))


def _pytorch_like():
    import importlib.util

    from helpers.oracles import ROOT

    spec = importlib.util.spec_from_file_location("pytorch_like", ROOT / "bench" / "pytorch_like.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arch,clip", [("resnet50", None), ("mobilenet_v2", "constant"),
                                       ("mobilenet_v2", "initializer")])
def test_pytorch_like_exports_lose_every_batchnorm(tmp_path, arch, clip):
    """The benchmark's ResNet-50 / MobileNetV2-shaped exports (narrow, small input): 50+ layers
    fold, so the tolerance is 1e-4."""
    gen = _pytorch_like()
    kwargs = {} if clip is None else {"clip_inputs": clip}
    proto = getattr(gen, arch)(width=0.25, resolution=64, **kwargs)
    before = sum(n.op_type == "BatchNormalization" for n in proto.graph.node)
    counts, model = fuse(tmp_path, proto.SerializeToString(), list(FUSE_PIPELINE), rel=1e-4)
    assert before >= 50 and counts["fuse-conv-batchnorm"] == before
    assert "BatchNorm" not in ops(model)
