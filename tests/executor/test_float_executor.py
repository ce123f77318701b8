"""The float reference executor (`qconvert.executor.float_executor`) and its kernels, against
independent runtimes only: onnxruntime with its graph optimizations disabled for ONNX, LiteRT
with the reference op resolver for TFLite (the per-op checks are in `test_float_kernels`, the
shared oracles and builders in `float_op_checks`): every shared float model on random inputs (1e-5
relative), batching (a batch of N equals N single runs, including reshapes that hard-code the
batch 1), the `observe` hook, early freeing, `run_float_batched` and the errors."""

from __future__ import annotations

import gc
import importlib.util
import weakref

import numpy as np
import pytest
from onnx import helper

from helpers.oracles import ROOT, SAMPLE_MODELS, TEST_MODELS, random_inputs
from helpers.float_op_checks import (I8, U8, TfGraph, check_onnx, compare, litert_run, load, randn,
                                     onnx_bytes, ort_run, random_feeds, spatial, vi)
from qconvert.errors import QConvertError
from qconvert.executor.float_executor import (ExecutionError, UnsupportedOpsError, run_float,
                                              run_float_batched)
from qconvert.executor.float_kernels import KERNELS
from qconvert.ir import Graph, Node, Tensor
from qconvert.formats.model_io import load_model

FLOAT_MODELS = ["digits_cnn.onnx", "digits_cnn.tflite", "kws_ref_model_float32.tflite",
                "pretrainedResnet.tflite", "ad01_fp32.tflite"]


# -- whole models ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_shared_float_models(name):
    path = TEST_MODELS / name
    data = path.read_bytes()
    model = load_model(path)
    g = model.graph
    for seed in (0, 1):
        feeds = random_feeds(g, seed)
        got = run_float(model, feeds)
        ref = (ort_run(data, feeds) if name.endswith(".onnx")
               else litert_run(data, [feeds[n] for n in g.inputs]))
        compare(ref, [got[o] for o in g.outputs])


def _pytorch_like():
    spec = importlib.util.spec_from_file_location("pytorch_like",
                                                  ROOT / "bench" / "pytorch_like.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arch,width,resolution", [("resnet50", 0.25, 64),
                                                   ("mobilenet_v2", 0.5, 64)])
def test_pytorch_like_models_with_a_batch(tmp_path, arch, width, resolution):
    module = _pytorch_like()
    proto = getattr(module, arch)(width=width, resolution=resolution)
    data = proto.SerializeToString()
    model = load(tmp_path, data, ".onnx")
    g = model.graph
    feeds = random_feeds(g, 0, batch=4)
    got = run_float(model, feeds)[g.outputs[0]]
    ref = np.concatenate([ort_run(data, {g.inputs[0]: feeds[g.inputs[0]][i:i + 1]})[0]
                          for i in range(4)])
    compare([ref], [got])


# -- batching ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_batch_equals_single_runs(name):
    model = load_model(TEST_MODELS / name)
    g = model.graph
    feeds = random_feeds(g, 3, batch=8)
    batched = run_float(model, feeds)
    for i in range(8):
        single = run_float(model, {k: v[i:i + 1] for k, v in feeds.items()})
        for o in g.outputs:
            assert batched[o].shape[0] == 8
            compare([single[o]], [batched[o][i:i + 1]])  # BLAS blocking differs: rounding


@pytest.mark.parametrize("form", ["new_shape", "shape_input", "minus_one"])
def test_tflite_reshape_with_hard_coded_batch_one(tmp_path, form):
    """Reshape [1, 48] (option or constant) and [1, -1] follow the batch N of the feeds; each
    sample's result equals LiteRT's batch-1 run."""
    n = TfGraph()
    x = n.input("x", (1, 4, 4, 3))
    c = n.node("Conv2D", [x, n.weights("w", (3, 3, 3, 3)), n.weights("b", (3,))], "c",
               (1, 4, 4, 3), **dict(spatial((3, 3), in_hw=(4, 4), padding="SAME", group=1)))
    target = [1, -1] if form == "minus_one" else [1, 48]
    shape = n.const("shape", np.array(target, np.int32))
    if form == "new_shape":  # the IR's spelling of an option-only shape: written as `new_shape`
        n.g.tensors[shape].extra["from_attribute"] = True
    r = n.node("Reshape", [c, shape], "r", (1, 48))
    n.node("FullyConnected", [r, n.weights("fw", (5, 48)), n.weights("fb", (5,))], "y", (1, 5),
           activation="NONE", keep_num_dims=False)
    data = n.build(["y"])
    model = load(tmp_path, data, ".tflite")
    xs = random_inputs([((6, 4, 4, 3), "float32")], 0)[0]
    got = run_float(model, {"x": xs})["y"]
    assert got.shape == (6, 5)
    ref = np.concatenate([litert_run(data, [xs[i:i + 1]])[0] for i in range(6)])
    compare([ref], [got])


def test_onnx_reshape_constant_one_minus_one_follows_the_batch(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("Gemm", ["r", "G"], ["y"], transB=1),
             helper.make_node("Reshape", ["c", "shape2"], ["r2"])]
    data = onnx_bytes(nodes, [vi("x", (1, 2, 3, 3))], [vi("y", None), vi("r2", None)],
                      [("W", randn(4, 2, 3, 3)), ("shape", np.array([1, -1], np.int64)),
                       ("G", randn(5, 36)), ("shape2", np.array([1, 4, 9], np.int64))])
    model = load(tmp_path, data, ".onnx")
    xs = random_inputs([((5, 2, 3, 3), "float32")], 0)[0]
    got = run_float(model, {"x": xs})
    assert got["y"].shape == (5, 5) and got["r2"].shape == (5, 4, 9)
    ref = [np.concatenate(parts) for parts in zip(*[ort_run(data, {"x": xs[i:i + 1]})
                                                    for i in range(5)])]
    compare(ref, [got["y"], got["r2"]])


def test_fixed_batch_above_one_must_be_fed_exactly(tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"])
    model = load(tmp_path, onnx_bytes([node], [vi("x", (2, 3))], [vi("y", None)]), ".onnx")
    run_float(model, {"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(ExecutionError, match="fixed batch of 2"):
        run_float(model, {"x": np.zeros((4, 3), np.float32)})
    with pytest.raises(ExecutionError, match="no feed"):
        run_float(model, {})
    with pytest.raises(ExecutionError, match=r"\[2, 3\]"):
        run_float(model, {"x": np.zeros((2, 4), np.float32)})


def test_run_float_batched_splits_and_concatenates():
    model = load_model(TEST_MODELS / "kws_ref_model_float32.tflite")
    g = model.graph
    feeds = random_feeds(g, 5, batch=10)
    whole = run_float(model, feeds)
    calls = []
    seen = {}
    parts = run_float_batched(model, feeds, 4, observe=lambda n, a: seen.setdefault(n, 0),
                              progress=lambda done, total: calls.append((done, total)))
    assert calls == [(4, 10), (8, 10), (10, 10)]
    for o in g.outputs:
        np.testing.assert_allclose(parts[o], whole[o], rtol=1e-5, atol=1e-7)
    assert set(seen) >= set(g.outputs)


# -- observe, keep, freeing -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["digits_cnn.onnx", "digits_cnn.tflite"])
def test_observe_sees_every_tensor_once(name):
    model = load_model(TEST_MODELS / name)
    g = model.graph
    seen = []
    feeds = random_feeds(g, 0)
    out = run_float(model, feeds, observe=lambda n, a: seen.append((n, a.shape)))
    produced = [o for node in g.nodes for o in node.outputs if o is not None]
    assert [n for n, _ in seen] == list(g.inputs) + produced
    for n, shape in seen:
        declared = g.tensors[n].shape
        assert len(shape) == len(declared)
    kept = run_float(model, feeds, keep=[produced[3], produced[0]])
    assert set(kept) == set(g.outputs) | {produced[3], produced[0]}
    np.testing.assert_array_equal(kept[g.outputs[0]], out[g.outputs[0]])


def test_intermediates_are_freed_after_their_last_reader():
    """When a node's output is observed, every tensor whose last reader ran before is gone
    (unless that reader wrote into it in place: the array lives on as the reader's output)."""
    from qconvert.executor.float_executor import IN_PLACE

    model = load_model(TEST_MODELS / "pretrainedResnet.tflite")
    g = model.graph
    last = {}
    for i, node in enumerate(g.nodes):
        for name in node.present_inputs():
            last[name] = i
    producer = {o: i for i, node in enumerate(g.nodes) for o in node.outputs}
    viewing = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Dropout",
               *IN_PLACE}
    refs = {}
    alive_late = []

    def observe(name, array):
        i = producer.get(name, -1)
        gc.collect()
        for other, ref in refs.items():
            if last.get(other, len(g.nodes)) < i and ref() is not None:
                alive_late.append(other)
        readers = [n.op for n in g.nodes if name in n.present_inputs()]
        if name not in g.outputs and name not in g.inputs and not viewing.intersection(readers):
            refs[name] = weakref.ref(array)

    run_float(model, random_feeds(g, 0, batch=2), observe=observe)
    assert len(refs) > 5 and alive_late == []


# -- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,ops", [
    (SAMPLE_MODELS / "opaque_ops.onnx", ["LRN", "Size"]),
    (SAMPLE_MODELS / "unknown_builtin.tflite", ["COS", "FLOOR"]),
    (SAMPLE_MODELS / "custom_op.tflite", ["QcvTestCustom"]),
])
def test_unknown_ops_are_all_named(path, ops):
    model = load_model(path)
    with pytest.raises(UnsupportedOpsError) as info:
        run_float(model, random_feeds(model.graph))
    assert isinstance(info.value, QConvertError)
    for op in ops:
        assert op in str(info.value)
    assert sorted(o.split(" ")[0] for o in info.value.ops) == sorted(ops)


def test_a_failing_node_is_named(tmp_path):
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="the_reshape")
    data = onnx_bytes([node], [vi("x", ("N", 6))], [vi("y", None)],
                      [("shape", np.array([4, -1], np.int64))])
    model = load(tmp_path, data, ".onnx")
    with pytest.raises(ExecutionError, match="the_reshape"):
        run_float(model, {"x": np.zeros((3, 6), np.float32)})


# -- details --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,attrs", [
    ("Conv", dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ("Conv", dict(auto_pad="SAME_LOWER", strides=[1, 2])),
    ("MaxPool", dict(auto_pad="SAME_UPPER", kernel_shape=[3, 2], strides=[2, 2])),
    ("AveragePool", dict(auto_pad="SAME_LOWER", kernel_shape=[3, 3], strides=[2, 1])),
])
def test_onnx_same_padding_on_dynamic_sizes_resolved_at_run_time(tmp_path, op, attrs):
    ins, inits = ["x"], []
    if op == "Conv":
        ins.append("W")
        inits.append(("W", randn(4, 3, 3, 3)))
    node = helper.make_node(op, ins, ["y"], **attrs)
    data = onnx_bytes([node], [vi("x", ("N", 3, "H", "W"))], [vi("y", None)], inits)
    model = load(tmp_path, data, ".onnx")
    assert model.graph.nodes[0].attrs["auto_pad"] == attrs["auto_pad"]  # left to the executor
    xs = random_inputs([((2, 3, 9, 8), "float32")], 0)[0]
    got = run_float(model, {"x": xs})
    compare(ort_run(data, {"x": xs}), [got["y"]])


@pytest.mark.parametrize("opset", [11, 13])
def test_onnx_softmax_meaning_of_its_opset_is_in_the_ir(tmp_path, opset):
    """Before opset 13 Softmax flattens from `axis`; the reader spells that in the node
    (`coerce_2d`), so the graph alone (no opset) computes what onnxruntime does."""
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    data = onnx_bytes([node], [vi("x", (2, 3, 4))], [vi("y", None)], opset=opset)
    model = load(tmp_path, data, ".onnx")
    assert bool(model.graph.nodes[0].attrs.get("coerce_2d")) == (opset < 13)
    feeds = random_feeds(model.graph)
    ref = ort_run(data, feeds)
    compare(ref, [run_float(model.graph, feeds)["y"]])
    compare(ref, [run_float(model, feeds)["y"]])


@pytest.mark.parametrize("op,attrs", [
    ("BatchNorm", dict(epsilon=1e-3)),
    ("GlobalAveragePool", {}),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1,
                         count_include_pad=1)),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1)),
    ("Conv2D", dict(kernel_shape=[3, 3], strides=[1, 2], pads=[1, 1, 0, 2], group=2)),
])
def test_nhwc_layout_equals_transposed_nchw(op, attrs):
    """After the layout pass ONNX ops run in NHWC (weights OHWI): the NCHW kernels checked
    against onnxruntime above, transposed."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 8)).astype(np.float32)
    extra = []
    if op == "BatchNorm":
        extra = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
        extra.append(rng.uniform(0.5, 2, 4).astype(np.float32))
    if op == "Conv2D":
        extra = [rng.standard_normal((6, 2, 3, 3)).astype(np.float32),
                 rng.standard_normal(6).astype(np.float32)]
    names = [f"i{i}" for i in range(1 + len(extra))]
    nchw = KERNELS[op](Node(op, names, ["y"], dict(attrs, layout="NCHW")), [x] + extra,
                       ["float32"])[0]
    if op == "Conv2D":
        extra[0] = extra[0].transpose(0, 2, 3, 1)
    nhwc = KERNELS[op](Node(op, names, ["y"], dict(attrs, layout="NHWC")),
                       [x.transpose(0, 2, 3, 1)] + extra, ["float32"])[0]
    compare([nchw.transpose(0, 2, 3, 1)], [nhwc])


def test_kernels_do_not_write_into_their_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    for arr in (x, w):
        arr.flags.writeable = False
    node = Node("Conv2D", ["x", "w"], ["y"], dict(layout="NCHW", group=3, pads=[1, 1, 1, 1]))
    KERNELS["Conv2D"](node, [x, w], ["float32"])
    node = Node("AveragePool", ["x"], ["y"], dict(layout="NCHW", kernel_shape=[2, 2]))
    KERNELS["AveragePool"](node, [x], ["float32"])


# -- fast paths: batched NCHW convolution, depthwise, pools, (de)quantize, in place ----------------
# Sizes chosen to cross the kernels' internal splits: samples multiplied together when the output
# has few positions (fewer than `_GEMM_COLUMNS`), one matmul per sample otherwise; depthwise
# samples shared among worker threads; pools in chunks of samples; (de)quantize in spans of
# `parallel.SPAN` elements.
FAST_CONV_CASES = {
    "pointwise_per_sample": ((3, 16, 40, 40), (24, 16, 1, 1), {}, True),
    "pointwise_grouped_samples": ((5, 16, 12, 12), (24, 16, 1, 1), {}, False),
    "3x3_padded_per_sample": ((3, 8, 33, 35), (12, 8, 3, 3), dict(pads=[1, 2, 0, 1]), True),
    "3x3_padded_grouped_last_alone": ((5, 8, 16, 16), (12, 8, 3, 3), dict(pads=[1, 1, 1, 1]),
                                      True),
    "7x7_stride2_dilated": ((2, 3, 50, 46), (8, 3, 7, 7),
                            dict(strides=[2, 2], dilations=[1, 2], pads=[3, 3, 3, 3]), True),
    "conv1d_batched": ((4, 5, 300), (6, 5, 3), dict(pads=[1, 1], strides=[1]), True),
    "conv3d_batched": ((3, 2, 6, 12, 12), (4, 2, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1]), True),
    "groups_of_unequal_size": ((7, 8, 20, 20), (12, 8, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    "one_group_rows_split_padded": ((5, 16, 12, 12), (40, 16, 3, 3), dict(pads=[1, 1, 1, 1]),
                                    True),
    "one_group_rows_split_copied_in_pieces": ((3, 200, 10, 10), (40, 200, 3, 3),
                                              dict(pads=[1, 0, 1, 2]), True),
    "one_sample_pointwise_rows_split": ((1, 16, 40, 40), (48, 16, 1, 1), {}, True),
    "one_sample_strided_rows_split": ((1, 8, 33, 35), (36, 8, 3, 3),
                                      dict(strides=[2, 2], pads=[1, 2, 0, 1]), False),
    "depthwise_stride1": ((3, 6, 20, 22), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1]), True),
    "depthwise_stride2_odd": ((3, 4, 21, 19), (4, 1, 3, 3),
                              dict(group=4, strides=[2, 2], pads=[1, 0, 1, 1]), True),
    "depthwise_stride3_dilated_multiplier": ((2, 3, 23, 25), (6, 1, 3, 2),
                                             dict(group=3, strides=[3, 2], dilations=[2, 3],
                                                  pads=[2, 1, 0, 2]), False),
    "depthwise_5x5_no_pad": ((5, 8, 14, 14), (8, 1, 5, 5), dict(group=8), True),
}


@pytest.mark.parametrize("case", sorted(FAST_CONV_CASES))
def test_onnx_conv_batched_fast_paths(tmp_path, case):
    x, w, attrs, bias = FAST_CONV_CASES[case]
    inits = [("W", randn(*w))] + ([("B", randn(w[0], seed=2))] if bias else [])
    node = helper.make_node("Conv", ["x", "W"] + (["B"] if bias else []), ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", x)], [vi("y", None)], inits), seeds=(0,))


def test_conv_sample_groups_and_row_blocks():
    """The batched conv's split: groups cover the batch in order, sizes differ by at most one,
    one sample each when a sample has _GEMM_COLUMNS positions, an even count when several;
    a product split by rows has two blocks at a multiple of _ROW_ALIGN (one for few rows)."""
    from qconvert.executor.float_kernels_conv import (_GEMM_COLUMNS, _ROW_ALIGN, _row_blocks,
                                                      _sample_groups)

    for n, positions in [(14, 3136), (14, 784), (14, 196), (14, 49), (2, 784), (2, 196),
                         (16, 784), (1, 50176), (7, 400), (3, 1)]:
        groups = _sample_groups(n, positions)
        assert [a for a, _ in groups] == [0] + [b for _, b in groups[:-1]]
        assert groups[-1][1] == n
        sizes = [b - a for a, b in groups]
        assert max(sizes) - min(sizes) <= 1
        assert len(groups) == 1 or len(groups) % 2 == 0 or len(groups) == n
        if positions >= _GEMM_COLUMNS:
            assert sizes == [1] * n
    assert _sample_groups(14, 196) == [(0, 4), (4, 8), (8, 11), (11, 14)]
    assert _sample_groups(14, 49) == [(0, 14)]
    assert _row_blocks(2048) == [slice(0, 1024), slice(1024, 2048)]
    assert _row_blocks(40) == [slice(0, 32), slice(32, 40)]
    assert _row_blocks(2 * _ROW_ALIGN - 1) == [slice(0, 2 * _ROW_ALIGN - 1)]


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1)),
])
def test_onnx_pools_over_several_chunks_of_samples(tmp_path, op, attrs):
    """Batches whose output exceeds one chunk (2**19 elements) are pooled chunk by chunk."""
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    check_onnx(tmp_path, onnx_bytes([node], [vi("x", (5, 40, 70, 66))], [vi("y", None)]))


@pytest.mark.parametrize("qtype", [I8, U8])
def test_onnx_quantize_dequantize_over_many_spans(tmp_path, qtype):
    """Per-tensor QuantizeLinear / DequantizeLinear of a tensor of several spans, with ties,
    saturation at both ends and infinities, equal to onnxruntime."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 70001)) * 4).astype(np.float32)
    x[0, :8] = np.array([0.25, 0.75, -0.25, 1e30, -1e30, np.inf, -np.inf, 100], np.float32)
    x[2, -3:] = np.array([0.125, -0.125, 0.375], np.float32)
    zero = np.array(-7 if qtype == I8 else 131, np.int8 if qtype == I8 else np.uint8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    data = onnx_bytes(nodes, [vi("x", x.shape)], [vi("q", None, qtype), vi("y", None)],
                      [("s", np.array(0.25, np.float32)), ("z", zero)])
    check_onnx(tmp_path, data, feeds={"x": x})


def _graph(nodes, inputs, outputs, tensors) -> Graph:
    g = Graph()
    for name, shape in tensors.items():
        g.add_tensor(Tensor(name, shape, "float32"))
    g.nodes = nodes
    g.inputs, g.outputs = inputs, outputs
    return g


def test_in_place_ops_write_into_dead_intermediates_only():
    """Relu / Add reuse an input array only when nothing else can see it: a feed, a graph
    output, a tensor with a live view (Reshape) or one an observer holds keep their values."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    shape4 = (2, 3, 4, 4)
    g = _graph([
        Node("Relu", ["x"], ["a"]),                 # reads a feed: never in place
        Node("Mul", ["x", "x"], ["m"]),
        Node("Reshape", ["m", "shape"], ["r"]),     # r is a view of m, alive after the Relu
        Node("Relu", ["m"], ["b"]),                 # m's last reader, but viewed by r
        Node("Add", ["b", "a"], ["c"]),             # b and a dead: in place
        Node("Relu", ["c"], ["out1"]),              # c is also a graph output
    ], ["x"], ["c", "out1", "r"],
        {"x": shape4, "a": shape4, "m": shape4, "r": (2, 3, 16), "b": shape4, "c": shape4,
         "out1": shape4})
    g.add_tensor(Tensor("shape", (3,), "int64", np.array([2, 3, 16], np.int64)))
    x0 = x.copy()
    held = {}
    got = run_float(g, {"x": x}, observe=lambda n, a: held.__setitem__(n, a) if n == "a" else None,
                    check_shapes=False)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(held["a"], np.maximum(x0, 0))
    m = x0 * x0
    c = np.maximum(m, 0) + np.maximum(x0, 0)
    np.testing.assert_array_equal(got["c"], c)
    np.testing.assert_array_equal(got["out1"], np.maximum(c, 0))
    np.testing.assert_array_equal(got["r"], m.reshape(2, 3, 16))


def test_in_place_ops_happen():
    """The must-not test above could pass with no in-place op at all: count the ones done."""
    import qconvert.executor.float_executor as fe

    done = []
    original = dict(fe.IN_PLACE)
    try:
        for op, fn in original.items():
            fe.IN_PLACE[op] = lambda node, x, inputs, fn=fn: done.append(node.op) or fn(node, x,
                                                                                      inputs)
        shape4 = (2, 3, 4, 4)
        g = _graph([Node("Mul", ["x", "x"], ["m"]), Node("Relu", ["m"], ["a"]),
                    Node("Clip", ["a", "", "hi"], ["b"]), Node("Add", ["x", "b"], ["y"])],
                   ["x"], ["y"], {"x": shape4, "m": shape4, "a": shape4, "b": shape4, "y": shape4})
        g.nodes[2].inputs[1] = None
        g.add_tensor(Tensor("hi", (), "float32", np.array(0.5, np.float32)))
        x = np.random.default_rng(1).standard_normal(shape4).astype(np.float32)
        y = run_float(g, {"x": x})["y"]
    finally:
        fe.IN_PLACE.clear()
        fe.IN_PLACE.update(original)
    np.testing.assert_array_equal(y, x + np.minimum(np.maximum(x * x, 0), 0.5))
    assert done == ["Relu", "Clip", "Add"]


@pytest.mark.parametrize("qtype", [I8, U8])
def test_onnx_quantize_dequantize_pair_computed_at_once_is_bit_exact(tmp_path, qtype):
    """x -> QuantizeLinear -> DequantizeLinear -> y with the int8 tensor read by nothing else
    runs as one fused step: bit for bit onnxruntime's result, and the int8 tensor is not made
    (not observed). With the int8 tensor also an output, both kernels run."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 170, 201)) * 6).astype(np.float32)
    flat = x.reshape(-1)
    flat[:9] = np.array([0.05, 0.15, -0.05, -0.15, 0.25, 1e30, -1e30, np.inf, -np.inf],
                        np.float32)
    zero = np.array(5 if qtype == I8 else 120, np.int8 if qtype == I8 else np.uint8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
             helper.make_node("Relu", ["y"], ["r"])]
    inits = [("s", np.array(0.1, np.float32)), ("z", zero)]
    fused = onnx_bytes(nodes, [vi("x", x.shape)], [vi("r", None)], inits)
    both = onnx_bytes(nodes, [vi("x", x.shape)], [vi("r", None), vi("q", None, qtype)], inits)
    seen = []
    got = run_float(load(tmp_path, fused, ".onnx"), {"x": x}, observe=lambda n, a: seen.append(n))
    assert "q" not in seen and "y" in seen
    np.testing.assert_array_equal(got["r"], ort_run(fused, {"x": x})[0])
    unfused = run_float(load(tmp_path, both, ".onnx"), {"x": x})
    np.testing.assert_array_equal(got["r"], unfused["r"])
    np.testing.assert_array_equal(unfused["q"], ort_run(both, {"x": x})[1])


def test_work_shared_among_threads_covers_every_item_once_and_raises_errors():
    """`parallel.on_workers`: each item exactly once whatever thread takes it, a nested call
    from inside a worker completes (no waiting on the pool from the pool), errors reach the
    caller."""
    from qconvert.executor.parallel import on_workers

    seen = np.zeros(1000, np.int64)

    def run(items):
        for i in items:
            seen[i] += 1
            if i % 100 == 0:
                on_workers(lambda inner: [None for _ in inner], range(3))

    on_workers(run, range(1000))
    np.testing.assert_array_equal(seen, np.ones(1000, np.int64))

    def fail(items):
        for i in items:
            if i == 7:
                raise ValueError("item 7")

    with pytest.raises(ValueError, match="item 7"):
        on_workers(fail, range(20))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1", "TANH", "NONE"])
def test_in_place_binary_ops_apply_their_fused_activation(op, act):
    """A TFLite ADD / SUB / MUL with a fused clamp writes into its dead input and clamps in the
    same pass (spans on every CPU for a large tensor): bit for bit the kernel's new array then
    its clamp. TANH is left to the kernel."""
    import qconvert.executor.float_executor as fe

    shape4 = (4, 40, 40, 64)  # several spans
    g = _graph([Node("Mul", ["x", "x"], ["m"]), Node(op, ["m", "x"], ["y"], {"activation": act})],
               ["x"], ["y"], {"x": shape4, "m": shape4, "y": shape4})
    x = (np.random.default_rng(2).standard_normal(shape4) * 3).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    done = []
    original = dict(fe.IN_PLACE)

    def counted(node, donated, inputs):
        result = original[op](node, donated, inputs)
        done.append(result is donated)
        return result

    try:
        fe.IN_PLACE[op] = counted
        fused = run_float(g, {"x": x})["y"]
        fe.IN_PLACE.pop(op)
        apart = run_float(g, {"x": x})["y"]
    finally:
        fe.IN_PLACE.clear()
        fe.IN_PLACE.update(original)
    np.testing.assert_array_equal(fused, apart)
    assert done == [act != "TANH"]
