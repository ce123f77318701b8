"""A Concat fed by a Sigmoid (fixed int8 output range [0, 1)) and a wider branch: the concat's
output covers every input and the Sigmoid branch is requantized into its scale
(`plan.concat_inputs_apart`; TFLite: a QUANTIZE int8 -> int8 before the concat, ONNX QDQ: the
Sigmoid keeps its own pair). A DBNet-like head (probabilities and a -1..2.4 box regression).
Oracles: LiteRT / onnxruntime on the float model (SQNR), TFLite Micro bit for bit against our
integer executor, and `--verify`."""

from __future__ import annotations

import numpy as np
import onnx
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import random_inputs, run_litert, run_onnx, run_tflm
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize

HW, C = 6, 4
CONV = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0],
        "activation": "NONE", "group": 1, "kernel_shape": [1, 1]}


def _weights():
    rng = np.random.default_rng(3)
    w_prob = rng.standard_normal((2, C)).astype(np.float32)
    w_reg = (0.5 * np.eye(2, C)).astype(np.float32)  # reg = 0.5 x + 0.7: about -1..2.4
    return w_prob, np.zeros(2, np.float32), w_reg, np.full(2, 0.7, np.float32)


def _tflite(second: str) -> bytes:
    """x -> conv -> Sigmoid "prob"; x -> conv "reg" (`second` "wide") or prob * 0.5 ("narrow");
    Concat on channels -> "y"."""
    w_prob, b_prob, w_reg, b_reg = _weights()
    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, HW, HW, C), "float32"))
    for name in ("logit", "prob", "reg"):
        g.add_tensor(Tensor(name, (1, HW, HW, 2), "float32"))
    g.add_tensor(Tensor("y", (1, HW, HW, 4), "float32"))
    for name, data in (("wp", w_prob.reshape(2, 1, 1, C)), ("bp", b_prob),
                       ("wr", w_reg.reshape(2, 1, 1, C)), ("br", b_reg),
                       ("half", np.array(0.5, np.float32))):
        g.add_tensor(Tensor(name, data.shape, "float32", data))
    g.nodes = [Node("Conv2D", ["x", "wp", "bp"], ["logit"], dict(CONV), "logit"),
               Node("Sigmoid", ["logit"], ["prob"], {}, "prob"),
               (Node("Conv2D", ["x", "wr", "br"], ["reg"], dict(CONV), "reg") if second == "wide"
                else Node("Mul", ["prob", "half"], ["reg"], {"activation": "NONE"}, "reg")),
               Node("Concat", ["prob", "reg"], ["y"], {"axis": 3, "activation": "NONE"}, "y")]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


def _onnx() -> bytes:
    w_prob, b_prob, w_reg, b_reg = _weights()
    inits = [numpy_helper.from_array(w_prob.reshape(2, C, 1, 1), "wp"),
             numpy_helper.from_array(b_prob, "bp"),
             numpy_helper.from_array(w_reg.reshape(2, C, 1, 1), "wr"),
             numpy_helper.from_array(b_reg, "br")]
    nodes = [helper.make_node("Conv", ["x", "wp", "bp"], ["logit"], name="logit"),
             helper.make_node("Sigmoid", ["logit"], ["prob"], name="prob"),
             helper.make_node("Conv", ["x", "wr", "br"], ["reg"], name="reg"),
             helper.make_node("Concat", ["prob", "reg"], ["y"], axis=1, name="y")]
    graph = helper.make_graph(nodes, "dbnet_head",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, C, HW, HW])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             [1, 4, HW, HW])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _quantize(tmp_path, data: bytes, suffix: str, shape, io_type=None, verify=True):
    src, out = tmp_path / f"m{suffix}", tmp_path / f"m_int8{suffix}"
    src.write_bytes(data)
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(6).standard_normal((32,) + shape[1:]).astype(np.float32))
    args = ["quantize", str(src), "--calibration", str(tmp_path / "calib.npy"), "-o", str(out)]
    args += ["--io-type", io_type] if io_type else []
    args += ["--verify", "4"] if verify else []
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return src, out


def _sqnr(got, want) -> float:
    return 10 * np.log10(np.sum(want.astype(np.float64) ** 2)
                         / np.sum((got.astype(np.float64) - want) ** 2))


def test_tflite_concat_of_sigmoid_and_wide_branch_covers_both(tmp_path):
    src, out = _quantize(tmp_path, _tflite("wide"), ".tflite", (1, HW, HW, C), "float32")
    graph = load_model(out).graph
    concat = next(n for n in graph.nodes if n.op == "Concat")
    requant = graph.producer(concat.inputs[0])
    assert requant.op == "Quantize" and graph.tensors[requant.inputs[0]].dtype == "int8"
    y_int8 = concat.outputs[0]
    assert graph.tensors[y_int8].quant.scale[0] > 3.0 / 255  # covers -1..2.4, not [0, 1)
    for seed in (0, 1):
        want = run_litert(src.read_bytes(), seed)[0]
        got = run_tflm(out.read_bytes(), seed)[0]
        assert _sqnr(got, want) > 25, _sqnr(got, want)


def test_tflite_concat_requantize_is_bit_exact_with_tflm(tmp_path):
    _src, out = _quantize(tmp_path, _tflite("wide"), ".tflite", (1, HW, HW, C), "int8")
    graph = load_model(out).graph
    assert any(n.op == "Quantize" for n in graph.nodes)
    for seed in (0, 1):
        xq = random_inputs([((1, HW, HW, C), np.int8)], seed)[0]
        np.testing.assert_array_equal(run_tflm(out.read_bytes(), seed)[0],
                                      run_int8(graph, {"x": xq})["y"])


def test_tflite_concat_of_similar_ranges_keeps_one_scale(tmp_path):
    """must not: prob and prob * 0.5 both fit [0, 1): no requantization, one scale."""
    _src, out = _quantize(tmp_path, _tflite("narrow"), ".tflite", (1, HW, HW, C), "int8")
    graph = load_model(out).graph
    assert not any(n.op == "Quantize" for n in graph.nodes)
    concat = next(n for n in graph.nodes if n.op == "Concat")
    scales = {float(graph.tensors[t].quant.scale[0]) for t in concat.inputs + concat.outputs}
    assert scales == {1.0 / 256}


def test_qdq_concat_of_sigmoid_and_wide_branch_covers_both(tmp_path):
    src, out = _quantize(tmp_path, _onnx(), ".onnx", (1, C, HW, HW))
    model = onnx.load(str(out))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    scales = {n.input[0]: float(inits[n.input[1]]) for n in model.graph.node
              if n.op_type == "QuantizeLinear" and n.input[1] in inits
              and inits[n.input[1]].ndim == 0}
    y_scale = next(v for k, v in scales.items() if k.startswith("y"))
    assert y_scale > 3.0 / 255
    for seed in (0, 1):
        want = run_onnx(src.read_bytes(), seed)[0]
        got = run_onnx(out.read_bytes(), seed)[0]
        assert _sqnr(got, want) > 25, _sqnr(got, want)


def test_export_c_of_requantized_concat_is_bit_exact_with_tflm(tmp_path):
    """export-c of the int8 head (QUANTIZE int8 -> int8 before the concat), built with gcc on
    the host: TFLite Micro's bytes."""
    from helpers.export_c_checks import check_host

    _src, out = _quantize(tmp_path, _tflite("wide"), ".tflite", (1, HW, HW, C), "int8")
    assert any(n.op == "Quantize" for n in load_model(out).graph.nodes)
    check_host(out, tmp_path / "c", "portable", "dbnet_head")
