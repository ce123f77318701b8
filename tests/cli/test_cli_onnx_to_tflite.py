"""`qconvert convert model.onnx -o model.tflite` and `qconvert quantize model.onnx ... -o x.tflite`:
whole PyTorch-style networks (digits_cnn.onnx, narrow ResNet-50 / MobileNetV2-shaped exports)
become TFLite with no TRANSPOSE left whose outputs match onnxruntime in LiteRT within 1e-4;
the int8 digits model runs in TFLite Micro with test-set top-1 within 1 point of float; errors
are one line with nothing written; the same input gives the same bytes."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import ROOT, TEST_MODELS, assert_close, litert_per_sample, ort_per_sample
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model
from qconvert.int8.rounding import round_half_away

DIGITS = TEST_MODELS / "digits_cnn.onnx"
DIGITS_DATA = TEST_MODELS / "digits_data_nchw.npz"


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _ort_outputs(path, x: np.ndarray) -> np.ndarray:
    return ort_per_sample(path, x)


def _litert_outputs(path, x: np.ndarray) -> np.ndarray:
    return litert_per_sample(path.read_bytes(), x)


def _pytorch_like():
    path = ROOT / "bench" / "pytorch_like.py"
    spec = importlib.util.spec_from_file_location("pytorch_like", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_float_conversion(tmp_path, src, x: np.ndarray) -> None:
    out = tmp_path / "model.tflite"
    result = _invoke(["convert", src, "-o", out])
    assert result.exit_code == 0, result.output
    assert "transposes left: 0" in result.output
    graph = load_model(out).graph
    assert "Transpose" not in [n.op for n in graph.nodes]
    assert not {"BatchNorm", "Clip", "Gemm", "Flatten"} & {n.op for n in graph.nodes}
    assert_close([_ort_outputs(src, x)], [_litert_outputs(out, np.transpose(x, (0, 2, 3, 1)))],
                 1e-4)


def test_digits_cnn_float_tflite_matches_onnxruntime(tmp_path):
    x = np.load(DIGITS_DATA)["test"][:32].astype(np.float32)
    _check_float_conversion(tmp_path, DIGITS, x)


@pytest.mark.parametrize("arch,width", [("resnet50", 0.25), ("mobilenet_v2", 0.5)])
def test_pytorch_like_exports_convert_without_transposes(tmp_path, arch, width):
    gen = _pytorch_like()
    src = tmp_path / f"{arch}.onnx"
    gen.save(getattr(gen, arch)(width=width, resolution=64), src)
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    _check_float_conversion(tmp_path, src, x)


def test_int8_digits_runs_in_tflm_within_one_point_of_float(tmp_path):
    from tflite_micro.python.tflite_micro import runtime

    out = tmp_path / "digits_int8.tflite"
    result = _invoke(["quantize", DIGITS, "--per-channel", "--calibration",
                      f"{DIGITS_DATA}:calib", "--eval", f"{DIGITS_DATA}:test", "-o", out])
    assert result.exit_code == 0, result.output
    assert "transposes left: 0" in result.output
    assert "top-1 agreement with float" in result.output  # the NCHW eval data was taken
    data = np.load(DIGITS_DATA)
    x, labels = data["test"].astype(np.float32), data["labels"][-len(data["test"]):]
    float_top1 = np.mean(np.argmax(_ort_outputs(DIGITS, x), axis=1) == labels)
    graph = load_model(out).graph
    q = graph.tensors[graph.inputs[0]].quant
    assert graph.tensors[graph.inputs[0]].shape == (1, 16, 16, 1)
    xq = np.clip(round_half_away(np.transpose(x, (0, 2, 3, 1)) / q.scale[0]) + q.zero_point[0],
                 -128, 127).astype(np.int8)
    it = runtime.Interpreter.from_bytes(out.read_bytes())
    preds = []
    for sample in xq:
        it.set_input(sample[None], 0)
        it.invoke()
        preds.append(int(np.argmax(it.get_output(0))))
    int8_top1 = np.mean(np.array(preds) == labels)
    assert float_top1 > 0.9 and int8_top1 >= float_top1 - 0.01, (float_top1, int8_top1)


def _small_net(path, kind):
    """`max_pool`: Conv -> MaxPool with PyTorch padding on an unbounded input (borders repeated)
    -> FC. `ops`: hardswish as x * HardSigmoid(x), a depthwise conv, HardSigmoid, a per-channel
    Add, Clip(0, 2), Slice, Pad, GlobalMaxPool, ReduceMax, ReduceMean, Concat, FC, Softmax."""
    rng = np.random.default_rng(0)

    def const(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    def node(op, ins, out, **attrs):
        return helper.make_node(op, ins, [out], **attrs)

    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    inits = [const("w", f32(4, 3, 3, 3)), const("b", f32(4))]
    nodes = [node("Conv", ["x", "w", "b"], "c", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    if kind == "max_pool":
        inits.append(const("fw", f32(5, 64)))
        nodes += [node("MaxPool", ["c"], "p", kernel_shape=[3, 3], strides=[2, 2],
                       pads=[1, 1, 1, 1]),
                  node("Flatten", ["p"], "f"), node("Gemm", ["f", "fw"], "y", transB=1)]
    else:
        inits += [const("w2", f32(4, 1, 3, 3)), const("fw", f32(5, 12)), const("k", f32(4, 1, 1)),
                  const("lo", np.float32(0)), const("hi", np.float32(2)),
                  const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
                  const("s_begin", np.array([1], np.int64)), const("s_end", np.array([4], np.int64)),
                  const("s_axes", np.array([2], np.int64))]
        nodes += [node("HardSigmoid", ["c"], "hs", alpha=1 / 6, beta=0.5),
                  node("Mul", ["c", "hs"], "hw"),
                  node("Conv", ["hw", "w2"], "dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                       strides=[2, 2], group=4),
                  node("HardSigmoid", ["dw"], "hs2", alpha=0.3, beta=0.4),
                  node("Add", ["hs2", "k"], "ad"), node("Clip", ["ad", "lo", "hi"], "cl"),
                  node("Slice", ["cl", "s_begin", "s_end", "s_axes"], "sl"),
                  node("Pad", ["sl", "pads"], "pd"), node("GlobalMaxPool", ["pd"], "g1"),
                  node("ReduceMax", ["dw"], "g2", axes=[2, 3], keepdims=1),
                  node("ReduceMean", ["c"], "g3", axes=[2, 3], keepdims=1),
                  node("Concat", ["g1", "g2", "g3"], "cat", axis=1),
                  node("Flatten", ["cat"], "f"), node("Gemm", ["f", "fw"], "gm", transB=1),
                  node("Softmax", ["gm"], "y", axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("arch,layout", [("resnet50", "nhwc"), ("resnet50", "nchw"),
                                         ("mobilenet_v2", "nhwc"), ("max_pool", "nhwc"),
                                         ("ops", "nhwc")])
def test_int8_networks_run_in_tflm(tmp_path, arch, layout):
    """int8 from ONNX runs in TFLite Micro: equal to our integer executor bit for bit, and close
    to onnxruntime's float outputs (calibration and test data from one distribution, given in
    the ONNX layout)."""
    from tflite_micro.python.tflite_micro import runtime

    from qconvert.executor.int_executor import run_int8

    src = tmp_path / f"{arch}.onnx"
    small = arch in ("max_pool", "ops")
    if small:
        _small_net(src, arch)
    else:
        gen = _pytorch_like()
        gen.save(getattr(gen, arch)(width=0.25, resolution=32), src)
    shape = (3, 8, 8) if small else (3, 32, 32)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "calib.npy", rng.standard_normal((16,) + shape).astype(np.float32))
    out = tmp_path / "int8.tflite"
    result = _invoke(["quantize", src, "--calibration", tmp_path / "calib.npy", "-o", out,
                      "--input-layout", layout])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    x_in, y_out = graph.tensors[graph.inputs[0]], graph.tensors[graph.outputs[0]]
    assert x_in.shape == ((1,) + shape if layout == "nchw" else (1,) + shape[1:] + shape[:1])
    x = rng.standard_normal((4,) + shape).astype(np.float32)
    ref = _ort_outputs(src, x)
    it = runtime.Interpreter.from_bytes(out.read_bytes())
    got = []
    for sample in x:
        data = sample[None] if layout == "nchw" else np.transpose(sample[None], (0, 2, 3, 1))
        q = np.clip(round_half_away(data / x_in.quant.scale[0]) + x_in.quant.zero_point[0],
                    -128, 127).astype(np.int8)
        it.set_input(q, 0)
        it.invoke()
        y = np.array(it.get_output(0))
        np.testing.assert_array_equal(y, run_int8(graph, {graph.inputs[0]: q})[graph.outputs[0]])
        got.append((y.astype(np.float64) - y_out.quant.zero_point[0]) * y_out.quant.scale[0])
    got = np.concatenate(got)
    sqnr = 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2))
    assert sqnr > 8, sqnr  # a wrong layout gives about 0 dB; this quantizer ~10-30 dB here


def test_nchw_input_layout_keeps_the_onnx_input(tmp_path):
    gen = _pytorch_like()
    src = tmp_path / "r.onnx"
    gen.save(gen.resnet50(width=0.25, resolution=32), src)
    out = tmp_path / "r.tflite"
    result = _invoke(["convert", src, "-o", out, "--input-layout", "nchw"])
    assert result.exit_code == 0, result.output
    assert "input 'input': NCHW [1, 3, 32, 32]" in result.output
    assert "transposes left: 1 (input_nhwc (after input 'input'))" in result.output
    graph = load_model(out).graph
    assert [n.op for n in graph.nodes].count("Transpose") == 1
    assert graph.nodes[0].op == "Transpose" and graph.nodes[0].inputs[0] == "input"
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    assert_close([_ort_outputs(src, x)], [_litert_outputs(out, x)], 1e-4)


def test_same_input_gives_the_same_bytes(tmp_path):
    a, b = tmp_path / "a.tflite", tmp_path / "b.tflite"
    assert _invoke(["convert", DIGITS, "-o", a]).exit_code == 0
    assert _invoke(["convert", DIGITS, "-o", b]).exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    qa, qb = tmp_path / "qa.tflite", tmp_path / "qb.tflite"
    for q in (qa, qb):
        result = _invoke(["quantize", DIGITS, "--calibration", f"{DIGITS_DATA}:calib", "-o", q])
        assert result.exit_code == 0, result.output
    assert qa.read_bytes() == qb.read_bytes()


def _bad_model(tmp_path):
    """A dynamic H, a conv whose weights are an input, a grouped ConvTranspose (TFLite has
    none) and an unknown op."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, "H", 8])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 4, 1, 1])
    g = numpy_helper.from_array(np.ones((4, 2, 3, 3), np.float32), "g")  # [C_in, C_out / 2]
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], kernel_shape=[1, 1]),
             helper.make_node("ConvTranspose", ["a", "g"], ["b"], kernel_shape=[3, 3],
                              group=2),
             helper.make_node("LRN", ["b"], ["y"], size=3)]
    graph = helper.make_graph(nodes, "g", [x, w],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [g])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("command", ["convert", "quantize"])
def test_unconvertible_model_is_one_error_listing_everything_nothing_written(tmp_path, command):
    src = _bad_model(tmp_path)
    out = tmp_path / "out.tflite"
    args = [command, src, "-o", out]
    if command == "quantize":
        args += ["--calibration-random", 2]
    result = _invoke(args)
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("qconvert: error")]
    assert len(errors) == 1 and "Traceback" not in result.output
    line = errors[0]
    assert line.startswith(f"qconvert: error: {src}: cannot convert ONNX to TFLite")
    for part in ("dynamic shapes", "non-constant weights", "ConvTranspose", "group 2",
                 "ops with no TFLite mapping: LRN"):
        assert part in line, part
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]


def test_quantized_onnx_is_refused(tmp_path):
    qdq = tmp_path / "digits_qdq.onnx"
    assert _invoke(["quantize", DIGITS, "--calibration", f"{DIGITS_DATA}:calib",
                    "-o", qdq]).exit_code == 0
    out = tmp_path / "x.tflite"
    result = _invoke(["convert", qdq, "-o", out])
    assert result.exit_code == 1 and not out.exists()
    assert result.stderr.startswith(f"qconvert: error: {qdq}: the ONNX model is quantized")
    assert "only float models convert" in result.stderr


def test_input_layout_only_for_onnx_to_tflite(tmp_path):
    out = tmp_path / "x.onnx"
    result = _invoke(["convert", DIGITS, "-o", out, "--input-layout", "nchw"])
    assert result.exit_code == 1 and "--input-layout applies to ONNX -> TFLite" in result.stderr
    assert not out.exists()
