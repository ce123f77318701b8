"""ONNX exports -> TFLite: grouped convolutions, ConvTranspose, Resize, Split, 1-D convolutions
and pools, channel shuffle, and `--input-shape`.

Oracles: onnxruntime (graph optimizations off) against LiteRT (reference kernels) on the
converted float model, within 1e-4 relative (`convert` of tests/helpers/onnx_layout_checks.py);
for int8, the TFLite Micro interpreter against qconvert's integer executor, bit for bit, on
every output. Every refusal is one line naming what TFLite cannot express, with nothing
returned or written.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

from helpers.oracles import OnnxNet, assert_close, litert_invoke
from helpers.int8_models import tflm
from helpers.float_op_checks import ort_run
from helpers.onnx_layout_checks import conversion_of, convert, ops, refusal

from qconvert.cli.app import main
from qconvert.executor.float_executor import run_float
from qconvert.executor.int_executor import run_int8
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes.onnx_to_tflite.convert import convert_onnx_to_tflite, data_to_tflite_layout
from qconvert.quant.quantize import QuantizeOptions, quantize_model
from qconvert.formats.tflite_reader import read_tflite


def int8_bit_exact(tmp_path, data: bytes, samples: int = 2) -> list:
    """Convert, quantize (calibration in the ONNX layout), and check TFLite Micro against the
    integer executor on every output; returns the int8 model's op list."""
    path = tmp_path / "q.onnx"
    path.write_bytes(data)
    model = load_model(path)
    conversion = convert_onnx_to_tflite(model)
    tfl, perms = conversion.model, conversion.input_perms
    rng = np.random.default_rng(0)
    calib = {n: rng.standard_normal((8,) + tuple(model.graph.tensors[n].shape[1:]))
             .astype(np.float32) for n in model.graph.inputs}
    quantize_model(tfl, data_to_tflite_layout(calib, perms), QuantizeOptions())
    blob = serialize(tfl)
    graph = read_tflite(blob).graph
    for _ in range(samples):
        feeds = {n: rng.integers(-128, 128, graph.tensors[n].shape).astype(np.int8)
                 for n in graph.inputs}
        ref = tflm(blob, [feeds[n] for n in graph.inputs])
        got = run_int8(graph, feeds)
        assert len(ref) == len(graph.outputs)
        for name, r in zip(graph.outputs, ref):
            np.testing.assert_array_equal(got[name], r, err_msg=name)
            assert len(np.unique(r)) > 2, f"{name}: a constant output proves nothing"
    return [n.op for n in graph.nodes]


def _split_node(n, x, outs, axis, sizes=None, opset=13):
    ins = [x]
    attrs = {"axis": axis}
    if sizes is not None and opset >= 13:
        ins.append(n.const(f"{outs[0]}_sizes", np.array(sizes, np.int64)))
    elif sizes is not None:
        attrs["split"] = sizes
    if opset >= 18 and sizes is None:
        attrs["num_outputs"] = len(outs)
    n.nodes.append(helper.make_node("Split", ins, outs, name=f"{outs[0]}_split", **attrs))
    return outs


def _resize(n, x, out, mode, coord, nearest="round_prefer_floor", scales=None, sizes=None,
            **attrs):
    ins = [x, ""]
    if sizes is None:
        ins.append(n.const(f"{out}_scales", np.array(scales, np.float32)))
    else:
        ins += ["", n.const(f"{out}_sizes", np.array(sizes, np.int64))]
    return n.node("Resize", ins, out, mode=mode, coordinate_transformation_mode=coord,
                  nearest_mode=nearest, **attrs)


# -- grouped convolutions --------------------------------------------------------------------
@pytest.mark.parametrize("cin,cout,group,attrs", [
    (4, 6, 2, dict(pads=[1, 1, 1, 1])),
    (8, 8, 4, dict(pads=[1, 1, 1, 1], strides=[2, 2])),   # PyTorch stride 2: explicit PAD
    (6, 12, 3, dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
])
def test_grouped_conv_is_a_native_conv_2d(tmp_path, cin, cout, group, attrs):
    """TFLite Micro and LiteRT run a CONV_2D whose input has `group` times the filter's input
    channels (probed on the installed tflite-micro and ai-edge-litert); it always gets a bias
    (LiteRT's grouped kernel requires one)."""
    n = OnnxNet()
    x = n.input("x", [1, cin, 9, 9])
    n.conv(x, cin, cout, "y", group=group, bias=False, **attrs)
    tfl = convert(tmp_path, n.build(["y"]))
    conv = next(node for node in tfl.graph.nodes if node.op == "Conv2D")
    assert conv.attrs["group"] == group and "Transpose" not in ops(tfl)
    assert tfl.graph.tensors[conv.inputs[1]].shape == (cout, 3, 3, cin // group)
    assert len(conv.inputs) == 3 and conv.inputs[2] is not None


# -- ConvTranspose -> TRANSPOSE_CONV ---------------------------------------------------------
@pytest.mark.parametrize("k,s,p,adj,expect", [
    (2, 2, 0, 0, ["TransposeConv"]),                       # PyTorch upsampling 2x
    (4, 2, 1, 0, ["TransposeConv"]),                       # DCGAN: TFLite SAME
    (3, 1, 1, 0, ["TransposeConv"]),
    (3, 2, 0, 0, ["TransposeConv"]),
    (3, 2, 1, 1, ["TransposeConv", "StridedSlice"]),       # crop TFLite cannot say: a slice
])
def test_conv_transpose(tmp_path, k, s, p, adj, expect):
    n = OnnxNet()
    x = n.input("x", [1, 4, 5, 6])
    n.node("ConvTranspose", [x, n.rand("w", 4, 3, k, k), n.rand("b", 3)], "y",
           kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], output_padding=[adj, adj])
    assert ops(convert(tmp_path, n.build(["y"]))) == expect


@pytest.mark.parametrize("attrs", [dict(auto_pad="SAME_UPPER"), dict(output_shape=[10, 12]),
                                   dict(pads=[1, 0, 0, 1])])
def test_conv_transpose_padding_forms(tmp_path, attrs):
    n = OnnxNet()
    x = n.input("x", [1, 3, 5, 6])
    n.node("ConvTranspose", [x, n.rand("w", 3, 2, 3, 3)], "y", kernel_shape=[3, 3],
           strides=[2, 2], **attrs)
    assert "TransposeConv" in ops(convert(tmp_path, n.build(["y"])))


@pytest.mark.parametrize("k,p,adj,expect", [
    (4, 1, 0, ["TransposeConv"]),                      # SAME
    (3, 1, 1, ["TransposeConv", "StridedSlice"]),      # VALID canvas, then the crop
])
def test_conv_transpose_int8(tmp_path, k, p, adj, expect):
    n = OnnxNet()
    x = n.input("x", [1, 4, 5, 5])
    n.node("ConvTranspose", [x, n.rand("w", 4, 3, k, k), n.rand("b", 3)], "y",
           kernel_shape=[k, k], strides=[2, 2], pads=[p, p, p, p], output_padding=[adj, adj])
    assert int8_bit_exact(tmp_path, n.build(["y"])) == expect


# -- Resize -> RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR / GATHER ----------------------------
@pytest.mark.parametrize("mode,coord,nearest,scales,sizes,expect", [
    ("nearest", "asymmetric", "floor", [1, 1, 2, 2], None, "ResizeNearest"),  # nn.Upsample
    ("nearest", "half_pixel", "round_prefer_floor", [1, 1, 2, 2], None, "ResizeNearest"),
    ("nearest", "align_corners", "round_prefer_ceil", None, [1, 3, 7, 9], "ResizeNearest"),
    ("nearest", "tf_half_pixel_for_nn", "floor", [1, 1, 2, 3], None, "ResizeNearest"),
    ("nearest", "asymmetric", "floor", None, [1, 3, 2, 3], "ResizeNearest"),   # downscale
    ("nearest", "half_pixel", "round_prefer_floor", None, [1, 3, 7, 9], "Gather"),
    ("linear", "half_pixel", None, [1, 1, 2, 2], None, "ResizeBilinear"),
    ("linear", "pytorch_half_pixel", None, None, [1, 3, 7, 9], "ResizeBilinear"),
    ("linear", "align_corners", None, [1, 1, 2, 2], None, "ResizeBilinear"),
    ("linear", "asymmetric", None, [1, 1, 3, 2], None, "ResizeBilinear"),
])
def test_resize(tmp_path, mode, coord, nearest, scales, sizes, expect):
    """Nearest: a TFLite setting when it reads the same pixels as ONNX, else GATHERs (exact
    whatever the mode); linear: RESIZE_BILINEAR with the matching coordinate setting."""
    n = OnnxNet()
    x = n.input("x", [1, 3, 4, 5])
    r = _resize(n, x, "r", mode, coord, nearest or "round_prefer_floor", scales, sizes)
    n.conv(r, 3, 2, "y", k=1)
    got = ops(convert(tmp_path, n.build(["y"])))
    assert expect in got and "Transpose" not in got


@pytest.mark.parametrize("mode,coord,sizes,expect", [
    ("linear", "align_corners", [1, 3, 7, 9], "ResizeBilinear"),
    ("linear", "asymmetric", [1, 3, 8, 15], "ResizeBilinear"),
    ("nearest", "half_pixel", [1, 3, 8, 10], "ResizeNearest"),
    ("nearest", "half_pixel", [1, 3, 7, 9], "Gather"),
])
def test_resize_int8(tmp_path, mode, coord, sizes, expect):
    n = OnnxNet()
    x = n.input("x", [1, 3, 4, 5])
    r = _resize(n, x, "r", mode, coord, sizes=sizes)
    n.conv(r, 3, 2, "y", k=1)
    assert expect in int8_bit_exact(tmp_path, n.build(["y"]))


def test_onnx_resize_float_kernel_matches_onnxruntime(tmp_path):
    """The float executor's ONNX Resize (shape inference and folding use it) against
    onnxruntime, for every mode and coordinate transform it computes."""
    cases = [("nearest", c, m) for c in ("half_pixel", "asymmetric", "align_corners",
                                         "pytorch_half_pixel", "tf_half_pixel_for_nn")
             for m in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")]
    cases += [("linear", c, "floor") for c in ("half_pixel", "asymmetric", "align_corners",
                                               "pytorch_half_pixel")]
    n = OnnxNet()
    x = n.input("x", [2, 3, 5, 4])
    outs = []
    for i, (mode, coord, nearest) in enumerate(cases):
        sizes = [2, 3, 8, 3] if i % 2 else None
        outs.append(_resize(n, x, f"r{i}", mode, coord, nearest, [1, 1, 1.7, 2.5], sizes))
    data = n.build(outs)
    path = tmp_path / "r.onnx"
    path.write_bytes(data)
    feed = np.random.default_rng(0).standard_normal((2, 3, 5, 4)).astype(np.float32)
    ref = ort_run(data, {"x": feed})
    got = run_float(load_model(path), {"x": feed})
    assert_close(ref, [got[o] for o in outs], 1e-5)


# -- Split -> SPLIT / SPLIT_V ----------------------------------------------------------------
@pytest.mark.parametrize("axis,sizes,opset,expect", [
    (1, None, 13, "SplitEqual"), (1, [2, 4], 13, "SplitSizes"), (3, [1, 3], 11, "SplitSizes"),
    (2, None, 18, "SplitEqual"),
])
def test_split(tmp_path, axis, sizes, opset, expect):
    n = OnnxNet()
    x = n.input("x", [1, 6, 4, 4])
    a = n.conv(x, 6, 6, "a", k=1)
    p, q = _split_node(n, a, ["p", "q"], axis, sizes, opset)
    n.node("Relu", [p], "y1")
    n.node("Sigmoid", [q], "y2")
    got = ops(convert(tmp_path, n.build(["y1", "y2"], opset=opset)))
    assert expect in got and "Transpose" not in got


def test_split_int8_parts_share_the_input_quantization(tmp_path):
    n = OnnxNet()
    x = n.input("x", [1, 6, 4, 4])
    a = n.conv(x, 6, 6, "a", k=1)
    _split_node(n, a, ["p", "q", "r"], 1)
    n.node("Concat", ["r", "p"], "y", axis=1)
    n.conv("q", 2, 3, "z", k=1)
    assert "SplitEqual" in int8_bit_exact(tmp_path, n.build(["y", "z"]))


# -- 1-D convolutions and pools --------------------------------------------------------------
def _conv1d(n, x, cin, cout, out, k, group=1, **attrs):
    return n.node("Conv", [x, n.rand(f"{out}_w", cout, cin // group, k),
                           n.rand(f"{out}_b", cout)], out, kernel_shape=[k], group=group,
                  **attrs)


def audio_net() -> bytes:
    """A keyword-spotting-style Conv1d net over 40 mel bins x 64 frames."""
    n = OnnxNet(3)
    x = n.input("x", [1, 40, 64])
    a = _conv1d(n, x, 40, 16, "a", 5, pads=[2, 2], strides=[2])
    a = n.node("Relu", [n.bn(a, 16, "a_bn", "bn1")], "a_relu")
    b = _conv1d(n, a, 16, 16, "b", 3, pads=[2, 2], dilations=[2], group=4)
    b = n.node("Relu", [b], "b_relu")
    m = n.node("MaxPool", [b], "m", kernel_shape=[2], strides=[2])
    c = _conv1d(n, m, 16, 24, "c", 3, pads=[1, 1])
    c = n.node("Clip", [c, n.const("lo", np.float32(0)), n.const("hi", np.float32(6))], "c_r6")
    p = n.node("AveragePool", [c], "p", kernel_shape=[2], strides=[2])
    g = n.node("GlobalAveragePool", [p], "g")
    f = n.node("Flatten", [g], "f")
    return n.build([n.node("Gemm", [f, n.rand("fw", 5, 24), n.rand("fb", 5)], "y", transB=1)])


def test_conv1d_net_runs_as_2d_layers_without_transposes(tmp_path):
    """Conv1d / MaxPool1d / AvgPool1d / GlobalAveragePool as 2-D with H = 1: the input is
    channels last (N, L, C), the layers meet with no TRANSPOSE and no RESHAPE between them,
    Relu / Clip become fused activations."""
    conversion = conversion_of(tmp_path, audio_net())
    tfl = conversion.model
    assert ops(tfl) == ["Reshape", "Pad", "Conv2D", "Conv2D", "MaxPool", "Conv2D",
                        "AveragePool", "AveragePool", "Reshape", "FullyConnected"]
    assert conversion.input_perms["x"] == (0, 2, 1)
    assert [n.attrs["activation"] for n in tfl.graph.nodes if n.op == "Conv2D"] == \
        ["RELU", "RELU", "RELU6"]
    assert "AveragePool" in int8_bit_exact(tmp_path, audio_net())


def test_conv1d_transpose_and_single_layer(tmp_path):
    n = OnnxNet()
    x = n.input("x", [1, 4, 16])
    c = _conv1d(n, x, 4, 6, "c", 3, pads=[1, 1])
    n.node("ConvTranspose", [c, n.rand("tw", 6, 3, 4), n.rand("tb", 3)], "y", kernel_shape=[4],
           strides=[2], pads=[1, 1])
    n.node("MaxPool", [x], "z", kernel_shape=[3], strides=[1], pads=[1, 1])
    tfl = convert(tmp_path, n.build(["y", "z"]))
    assert "TransposeConv" in ops(tfl)
    # 3-D outputs keep the ONNX layout (N, C, L): a TRANSPOSE only right before each output
    assert all(nd.outputs[0] in tfl.graph.outputs for nd in tfl.graph.nodes
               if nd.op == "Transpose")


# -- channel shuffle -------------------------------------------------------------------------
def _channel_shuffle(n, x, c, h, w, groups, out):
    r = n.node("Reshape", [x, n.const(f"{out}_s5", np.array([1, groups, c // groups, h, w],
                                                              np.int64))], f"{out}_5d")
    t = n.node("Transpose", [r], f"{out}_t", perm=[0, 2, 1, 3, 4])
    return n.node("Reshape", [t, n.const(f"{out}_s4", np.array([1, -1, h, w], np.int64))], out)


def test_channel_shuffle_is_one_gather_in_nhwc(tmp_path):
    n = OnnxNet()
    x = n.input("x", [1, 12, 4, 4])
    a = n.conv(x, 12, 12, "a", k=1)
    s = _channel_shuffle(n, a, 12, 4, 4, 3, "s")
    n.conv(s, 12, 4, "y", k=1)
    got = ops(convert(tmp_path, n.build(["y"])))
    assert got == ["Conv2D", "Gather", "Conv2D"]


def test_channel_shuffle_read_twice_is_not_fused(tmp_path):
    """Must not fire: the 5-D tensor is read by another node too (the layout pass then moves
    the data itself; still correct)."""
    n = OnnxNet()
    x = n.input("x", [1, 4, 2, 2])
    r = n.node("Reshape", [x, n.const("s5", np.array([1, 2, 2, 2, 2], np.int64))], "r")
    t = n.node("Transpose", [r], "t", perm=[0, 2, 1, 3, 4])
    n.node("Reshape", [t, n.const("s4", np.array([1, 4, 2, 2], np.int64))], "y")
    n.node("Relu", [r], "z")
    assert "Gather" not in ops(convert(tmp_path, n.build(["y", "z"])))


# -- patterns from real exports --------------------------------------------------------------
def resnext_block() -> bytes:
    """torchvision ResNeXt's bottleneck (groups=4) as PyTorch exports it: conv, BN, ReLU."""
    n = OnnxNet(5)
    x = n.input("x", [1, 16, 8, 8])
    a = n.node("Relu", [n.bn(n.conv(x, 16, 16, "a", k=1, bias=False), 16, "a_bn", "bn_a")], "ar")
    b = n.conv(a, 16, 16, "b", k=3, group=4, bias=False, pads=[1, 1, 1, 1])
    b = n.node("Relu", [n.bn(b, 16, "b_bn", "bn_b")], "br")
    c = n.bn(n.conv(b, 16, 16, "c", k=1, bias=False), 16, "c_bn", "bn_c")
    return n.build([n.node("Relu", [n.node("Add", [c, x], "sum")], "y")])


def shufflenet_unit() -> bytes:
    """torchvision ShuffleNetV2's stride-1 unit: chunk, branch (1x1, depthwise 3x3, 1x1),
    concat, channel_shuffle(2)."""
    n = OnnxNet(6)
    x = n.input("x", [1, 16, 6, 6])
    x1, x2 = _split_node(n, x, ["x1", "x2"], 1)
    a = n.node("Relu", [n.bn(n.conv(x2, 8, 8, "a", k=1, bias=False), 8, "a_bn", "bn_a")], "ar")
    b = n.bn(n.conv(a, 8, 8, "b", k=3, group=8, bias=False, pads=[1, 1, 1, 1]), 8, "b_bn",
             "bn_b")
    c = n.node("Relu", [n.bn(n.conv(b, 8, 8, "c", k=1, bias=False), 8, "c_bn", "bn_c")], "cr")
    cat = n.node("Concat", [x1, c], "cat", axis=1)
    return n.build([_channel_shuffle(n, cat, 16, 6, 6, 2, "y")])


def tiny_unet() -> bytes:
    """Encoder (conv, max pool, conv), decoder with ConvTranspose and bilinear Resize
    (F.interpolate align_corners=False), skip Concat, head conv."""
    n = OnnxNet(7)
    x = n.input("x", [1, 3, 16, 16])
    e1 = n.node("Relu", [n.conv(x, 3, 8, "e1", pads=[1, 1, 1, 1])], "e1r")
    p = n.node("MaxPool", [e1], "p", kernel_shape=[2, 2], strides=[2, 2])
    e2 = n.node("Relu", [n.conv(p, 8, 16, "e2", pads=[1, 1, 1, 1])], "e2r")
    up1 = n.node("ConvTranspose", [e2, n.rand("uw", 16, 8, 2, 2), n.rand("ub", 8)], "up1",
                 kernel_shape=[2, 2], strides=[2, 2])
    up2 = n.conv(_resize(n, e2, "rs", "linear", "pytorch_half_pixel", scales=[1, 1, 2, 2]), 16,
                 4, "up2", k=1)
    cat = n.node("Concat", [e1, up1, up2], "cat", axis=1)
    d = n.node("Relu", [n.conv(cat, 20, 8, "d", pads=[1, 1, 1, 1])], "dr")
    return n.build([n.conv(d, 8, 2, "y", k=1)])


@pytest.mark.parametrize("build,expect", [
    (resnext_block, ["Conv2D", "Conv2D", "Conv2D", "Add"]),
    (shufflenet_unit, ["SplitEqual", "Conv2D", "DepthwiseConv2D", "Conv2D", "Concat", "Gather"]),
    (tiny_unet, ["Conv2D", "MaxPool", "Conv2D", "TransposeConv", "ResizeBilinear", "Conv2D",
                 "Concat", "Conv2D", "Conv2D"]),
], ids=["resnext", "shufflenet", "unet"])
def test_real_export_patterns_float_and_int8(tmp_path, build, expect):
    """No TRANSPOSE anywhere; the int8 model runs in TFLite Micro bit-exact."""
    assert ops(convert(tmp_path, build())) == expect
    int8_ops = int8_bit_exact(tmp_path, build())
    assert "Transpose" not in int8_ops


# -- refusals --------------------------------------------------------------------------------
def _refused(tmp_path, build, *parts):
    n = OnnxNet()
    x = n.input("x", [1, 4, 5, 5])
    out = build(n, x)
    message = refusal(tmp_path, n.build([out], opset=getattr(build, "opset", 13)))
    for part in parts:
        assert part in message, (part, message)


def _ct(**attrs):
    def build(n, x):
        return n.node("ConvTranspose", [x, n.rand("w", 4, 2, 3, 3)], "y", kernel_shape=[3, 3],
                      **attrs)
    return build


def _rs(mode, coord, scales, **attrs):
    def build(n, x):
        return _resize(n, x, "y", mode, coord, scales=scales, **attrs)
    return build


def _opset(build, opset):
    build.opset = opset
    return build


@pytest.mark.parametrize("build,parts", [
    (_ct(group=2), ("cannot be expressed in TFLite", "ConvTranspose 'y_node' (group 2")),
    (_ct(dilations=[2, 2]), ("ConvTranspose 'y_node'", "dilations [2, 2]")),
    (_rs("cubic", "half_pixel", [1, 1, 2, 2]), ("Resize 'y_node' (mode cubic)",)),
    (_rs("linear", "tf_crop_and_resize", [1, 1, 2, 2]), ("tf_crop_and_resize",)),
    (_rs("linear", "half_pixel", [1, 1, 1.5, 1.5]), ("scale 1.5 of 5 pixels is not 7/5",)),
    (_rs("nearest", "asymmetric", [1, 2, 1, 1]), ("resizes [1, 4, 5, 5] to [1, 8, 5, 5]",)),
    (_opset(_rs("linear", "half_pixel", [1, 1, 0.5, 0.5], antialias=1), 18),
     ("antialias when downscaling",)),
    (lambda n, x: n.node("Conv", [n.node("Unsqueeze", [x, n.const("ax", np.array([2]))], "u"),
                                  n.rand("w3", 2, 4, 1, 3, 3)], "y", kernel_shape=[1, 3, 3]),
     ("ops with no TFLite mapping: 3-D Conv",)),
], ids=["convT-group", "convT-dilation", "cubic", "crop", "scale", "channels", "antialias",
        "conv3d"])
def test_what_tflite_cannot_express_is_refused_by_name(tmp_path, build, parts):
    _refused(tmp_path, build, *parts)


def test_cli_refusal_lists_every_problem_and_writes_nothing(tmp_path):
    n = OnnxNet()
    x = n.input("x", [1, 4, 5, 5])
    a = _ct(group=2)(n, x)
    _resize(n, a, "b", "cubic", "half_pixel", scales=[1, 1, 2, 2])
    src = tmp_path / "bad.onnx"
    src.write_bytes(n.build(["b"]))
    for command in (["convert"], ["quantize", "--calibration-random", "2"],
                    ["export-c-header", "--calibration-random", "2"]):
        out = tmp_path / ("out.h" if command[0] == "export-c-header" else "out.tflite")
        result = CliRunner().invoke(main, [command[0], str(src), "-o", str(out), *command[1:]])
        assert result.exit_code == 1, result.output
        assert "ConvTranspose 'y_node' (group 2" in result.stderr
        assert "Resize 'b_node' (mode cubic)" in result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]


# -- --input-shape and dynamic dims ----------------------------------------------------------
def dynamic_model() -> bytes:
    """Batch written as -1 (PaddlePaddle), H and W symbolic; a conv, nearest upsampling by
    scales, and a flatten the exporter computed at run time (Shape -> Gather -> Concat)."""
    n = OnnxNet(9)
    n.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "H", "W"]))
    c = n.node("Relu", [n.conv("x", 3, 4, "c", pads=[1, 1, 1, 1], strides=[2, 2])], "cr")
    r = _resize(n, c, "r", "nearest", "asymmetric", "floor", scales=[1, 1, 2, 2])
    shape = n.node("Shape", [r], "shape")
    batch = n.node("Gather", [shape, n.const("zero", np.array([0], np.int64))], "batch", axis=0)
    target = n.node("Concat", [batch, n.const("minus1", np.array([-1], np.int64))], "target",
                    axis=0)
    return n.build([n.node("Reshape", [r, target], "y")])


def _run_cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_minus_one_and_zero_dims_read_as_dynamic(tmp_path):
    n = OnnxNet()
    n.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3, -1, 8]))
    n.conv("x", 3, 4, "y", pads=[1, 1, 1, 1])
    src = tmp_path / "m.onnx"
    src.write_bytes(n.build(["y"]))
    shape = load_model(src).graph.tensors["x"].shape
    assert not isinstance(shape[0], int) and shape[1] == 3 and not isinstance(shape[2], int)
    result = _run_cli("convert", src, "-o", tmp_path / "m.tflite")
    assert result.exit_code == 1 and "dynamic shapes: input 'x'" in result.stderr
    assert "dimension 2" in result.stderr and not (tmp_path / "m.tflite").exists()


def test_input_shape_fixes_dynamic_h_w_then_converts(tmp_path):
    data = dynamic_model()
    src = tmp_path / "dyn.onnx"
    src.write_bytes(data)
    out = tmp_path / "dyn.tflite"
    result = _run_cli("convert", src, "-o", out, "--input-shape", "x:1,3,12,10")
    assert result.exit_code == 0, result.output
    feed = np.random.default_rng(0).standard_normal((1, 3, 12, 10)).astype(np.float32)
    ref = ort_run(data, {"x": feed})
    got = litert_invoke(out.read_bytes(), [np.transpose(feed, (0, 2, 3, 1))])
    assert ref[0].shape == (1, 4 * 12 * 10)
    assert "Shape" not in ops(load_model(out))  # the run-time shape arithmetic folded
    assert_close(ref, got, 1e-4)


def test_input_shape_on_fuse_quantize_and_export_c_header(tmp_path):
    src = tmp_path / "dyn.onnx"
    src.write_bytes(dynamic_model())
    fused = tmp_path / "fused.onnx"
    assert _run_cli("fuse", src, "-o", fused, "--input-shape", "x:2,3,8,8").exit_code == 0
    assert load_model(fused).graph.tensors["x"].shape == (2, 3, 8, 8)
    feed = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    assert_close(ort_run(src.read_bytes(), {"x": feed}), ort_run(fused.read_bytes(), {"x": feed}))
    q = tmp_path / "q.tflite"
    result = _run_cli("quantize", src, "-o", q, "--calibration-random", "4", "--input-shape",
                      "x:1,3,8,8")
    assert result.exit_code == 0, result.output
    graph = read_tflite(q.read_bytes()).graph
    assert graph.tensors[graph.inputs[0]].shape == (1, 8, 8, 3)
    feeds = {graph.inputs[0]: np.random.default_rng(2).integers(-128, 128, (1, 8, 8, 3))
             .astype(np.int8)}
    np.testing.assert_array_equal(tflm(q.read_bytes(), list(feeds.values()))[0],
                                  run_int8(graph, feeds)[graph.outputs[0]])
    h = tmp_path / "w.h"
    result = _run_cli("export-c-header", src, "-o", h, "--calibration-random", "2",
                      "--input-shape", "x:1,3,8,8")
    assert result.exit_code == 0, result.output
    assert "_INPUT_SHAPE  {1, 8, 8, 3}" in h.read_text()


def test_input_shape_repeatable_for_two_inputs(tmp_path):
    n = OnnxNet()
    a = n.input("a", ["N", 2, "H", "W"])
    b = n.input("b", ["N", 2, "H", "W"])
    n.conv(n.node("Add", [a, b], "s"), 2, 3, "y", pads=[1, 1, 1, 1])
    src = tmp_path / "two.onnx"
    src.write_bytes(n.build(["y"]))
    out = tmp_path / "two.tflite"
    result = _run_cli("convert", src, "-o", out, "--input-shape", "a:1,2,5,6",
                      "--input-shape", "b:1,2,5,6")
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    assert [graph.tensors[i].shape for i in graph.inputs] == [(1, 5, 6, 2)] * 2


@pytest.mark.parametrize("spec,message", [
    ("z:1,3,8,8", "'z' is not an input of the model; its inputs: x:?,3,H,W"),
    ("x:1,3,8", "'x' has rank 4, the shape given has 3 dimensions; the model's inputs: "
                "x:?,3,H,W"),
    ("x:1,3,a,8", "expected NAME:d0,d1,... with positive integers"),
    ("x:1,3,0,8", "expected NAME:d0,d1,... with positive integers"),
    ("1,3,8,8", "expected NAME:d0,d1,..."),
])
def test_bad_input_shape_is_one_line_naming_the_inputs(tmp_path, spec, message):
    src = tmp_path / "dyn.onnx"
    src.write_bytes(dynamic_model())
    out = tmp_path / "o.tflite"
    result = _run_cli("convert", src, "-o", out, "--input-shape", spec)
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: ") and message in lines[0]
    assert not out.exists()


def test_input_shape_given_twice_is_refused(tmp_path):
    src = tmp_path / "dyn.onnx"
    src.write_bytes(dynamic_model())
    result = _run_cli("convert", src, "-o", tmp_path / "o.tflite", "--input-shape",
                      "x:1,3,8,8", "--input-shape", "x:1,3,4,4")
    assert result.exit_code == 1 and "input 'x' given twice" in result.stderr


# -- torchvision's chunk and ONNX QDQ --------------------------------------------------------
def test_chunk_with_ends_computed_from_shape_converts(tmp_path):
    """torchvision ShuffleNetV2's `x.chunk(2, dim=1)` exports Slices whose ends come from
    Shape -> Gather -> Div: not a problem while the batch is dynamic, they fold once static."""
    n = OnnxNet()
    x = n.input("x", ["N", 6, 4, 4])
    shape = n.node("Shape", [x], "shape")
    c = n.node("Gather", [shape, n.const("one", np.array([1], np.int64))], "c", axis=0)
    half = n.node("Div", [c, n.const("two", np.array([2], np.int64))], "half")
    axes = n.const("axes", np.array([1], np.int64))
    a = n.node("Slice", [x, n.const("zero", np.array([0], np.int64)), half, axes], "a")
    b = n.node("Slice", [x, half, n.const("big", np.array([1 << 30], np.int64)), axes], "b")
    n.conv(a, 3, 2, "y", k=1)
    n.node("Relu", [b], "z")
    assert "StridedSlice" in ops(convert(tmp_path, n.build(["y", "z"])))


def test_qdq_onnx_of_conv_transpose_and_resize(tmp_path):
    """ONNX QDQ output: ConvTranspose gets per-channel int8 weights (axis 1), Resize shares its
    input's scale, and Resize's scales stay a float parameter (never quantized)."""
    import onnx

    src = tmp_path / "unet.onnx"
    src.write_bytes(tiny_unet())
    out = tmp_path / "unet_qdq.onnx"
    result = _run_cli("quantize", src, "-o", out, "--calibration-random", "8")
    assert result.exit_code == 0, result.output
    model = onnx.load(str(out))
    producers = {o: nd for nd in model.graph.node for o in nd.output}
    resize = next(nd for nd in model.graph.node if nd.op_type == "Resize")
    assert resize.input[2] not in producers  # the scales initializer itself
    convt = next(nd for nd in model.graph.node if nd.op_type == "ConvTranspose")
    dq = producers[convt.input[1]]
    scales = next(t for t in model.graph.initializer if t.name == dq.input[1])
    assert dq.op_type == "DequantizeLinear" and list(scales.dims) == [8]
    assert next((a.i for a in dq.attribute if a.name == "axis"), 1) == 1  # ONNX default 1
    feed = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ref, got = ort_run(src.read_bytes(), {"x": feed})[0], ort_run(out.read_bytes(), {"x": feed})[0]
    sqnr = 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2))
    assert sqnr > 8, sqnr  # ~12 dB: the skip Concat's shared scale spans the decoder's range;
    # wrong weight axes or a quantized scales input give about 0 dB


def test_grouped_conv_transpose_is_not_quantized_to_qdq(tmp_path):
    n = OnnxNet()
    x = n.input("x", [1, 4, 5, 5])
    n.node("ConvTranspose", [x, n.rand("w", 4, 2, 3, 3)], "y", kernel_shape=[3, 3], group=2)
    src = tmp_path / "g.onnx"
    src.write_bytes(n.build(["y"]))
    out = tmp_path / "g_qdq.onnx"
    result = _run_cli("quantize", src, "-o", out, "--calibration-random", "2")
    assert result.exit_code == 1 and "ConvTranspose 'y_node': group 2" in result.stderr
    assert not out.exists()


def tcn_net() -> bytes:
    """A TC-ResNet-style Conv1d block: conv, relu, conv, residual Add with a 1x1 projection,
    per-channel Mul by a [C, 1] constant, relu; then a head."""
    n = OnnxNet(11)
    x = n.input("x", [1, 8, 32])
    a = n.node("Relu", [_conv1d(n, x, 8, 12, "a", 3, pads=[1, 1])], "ar")
    b = _conv1d(n, a, 12, 12, "b", 3, pads=[1, 1])
    skip = _conv1d(n, x, 8, 12, "skip", 1)
    s = n.node("Add", [b, skip], "sum")
    m = n.node("Mul", [s, n.const("k", np.linspace(0.5, 1.5, 12, dtype=np.float32)
                                  .reshape(12, 1))], "scaled")
    r = n.node("Relu", [m], "r")
    c = _conv1d(n, r, 12, 4, "c", 3, strides=[2])
    return n.build([n.node("Flatten", [n.node("GlobalAveragePool", [c], "g")], "y")])


def test_conv1d_residual_block_stays_2d(tmp_path):
    """The residual Add and the per-channel Mul run on the 2-D tensors too: no RESHAPE between
    the convolutions (the Mul folds into the conv before it)."""
    got = ops(convert(tmp_path, tcn_net()))
    assert got.count("Reshape") == 2 and got[0] == "Reshape" and got[-1] == "Reshape"
    assert "Transpose" not in got
    assert "Add" in int8_bit_exact(tmp_path, tcn_net())
