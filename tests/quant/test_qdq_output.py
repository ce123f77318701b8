"""ONNX QDQ output of `qconvert quantize` and its report, against onnxruntime as the oracle:
activation scales and zero points are scalars (onnxruntime's int8 kernels refuse anything else,
so the model must load with every graph optimization on); every layer's weights are int8,
including a layer that makes a graph output; a tensor read only by a Relu / Clip with the same
parameters gets no QuantizeLinear / DequantizeLinear pair of its own, and one with another reader
keeps it; the report's output SQNR is the one onnxruntime measures between the float and the
QDQ model; each layer's SQNR is the one onnxruntime measures between the float model's tensor
and the QDQ model's dequantized one, and its added SQNR that of its own QuantizeLinear ->
DequantizeLinear pair in onnxruntime's run."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import TEST_MODELS
from qconvert.cli.app import main

DIGITS = TEST_MODELS / "digits_cnn.onnx"
CALIB = f"{TEST_MODELS / 'digits_data_nchw.npz'}:calib"


def _quantize(tmp_path, src, calib=CALIB):
    out, report = tmp_path / "int8.onnx", tmp_path / "q.json"
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration", str(calib), "-o",
                                       str(out), "--report", str(report)])
    assert result.exit_code == 0, result.output
    return out, json.loads(report.read_text())


def _session(model, optimized=False, outputs=()):
    import onnxruntime as ort

    model = onnx.load(str(model)) if not isinstance(model, onnx.ModelProto) else model
    model.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                              for n in outputs)
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


def _run(sess, x, names=None):
    """Each requested output over the samples of x, one sample at a time, stacked."""
    name = sess.get_inputs()[0].name
    runs = [sess.run(names, {name: x[i:i + 1]}) for i in range(len(x))]
    return [np.concatenate([r[k] for r in runs]).astype(np.float64) for k in range(len(runs[0]))]


def _sqnr(ref, got):
    with np.errstate(divide="ignore"):
        return 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - got) ** 2))


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("digits")
    out, report = _quantize(tmp, DIGITS)
    return out, report, np.load(TEST_MODELS / "digits_data_nchw.npz")["calib"][:64]


def test_activation_parameters_are_scalars_and_the_model_runs_optimized(digits):
    out, _, x = digits
    g = onnx.load(str(out)).graph
    init = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    quantize = [n for n in g.node if n.op_type == "QuantizeLinear"]
    assert quantize
    for n in quantize:
        assert init[n.input[1]].shape == () and init[n.input[2]].shape == (), n.name
    plain, fused = _run(_session(out), x[:8])[0], _run(_session(out, optimized=True), x[:8])[0]
    assert _sqnr(plain, fused) > 25  # onnxruntime's int8 kernels compute the same model


def test_every_layer_reads_int8_weights_including_the_output_layer(digits):
    out, _, _ = digits
    g = onnx.load(str(out)).graph
    init = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    layers = [n for n in g.node if n.op_type in ("Conv", "Gemm", "MatMul")]
    for n in layers:
        w = producer.get(n.input[1])
        assert w is not None and w.op_type == "DequantizeLinear", n.name
        assert init[w.input[0]].data_type == TensorProto.INT8, n.name
    # the last layer makes the graph output (through its QuantizeLinear / DequantizeLinear)
    last = producer[producer[producer[g.output[0].name].input[0]].input[0]]
    assert last.op_type in ("Gemm", "MatMul") and last in layers
    floats = [i.name for i in g.initializer if i.data_type == TensorProto.FLOAT and i.dims
              and int(np.prod(i.dims)) > 64]
    assert floats == [n for n in floats if n.endswith("_scale")]


def test_report_output_sqnr_is_onnxruntimes(digits):
    out, report, x = digits
    ref = _run(_session(DIGITS), x)[0]
    got = _run(_session(out), x)[0]
    (db,) = report["output_sqnr_db"].values()
    assert report["samples"] == len(x)
    assert db == pytest.approx(_sqnr(ref, got), abs=0.05)
    agree = np.mean(np.argmax(ref, axis=1) == np.argmax(got, axis=1))
    assert report["top1_agreement"] == pytest.approx(agree, abs=1.5 / len(x))


def _dequantized_values(path) -> dict:
    """{float tensor: the DequantizeLinear output carrying its int8 value} of a QDQ model (the
    tensor quantized by a QuantizeLinear whose output a DequantizeLinear reads)."""
    g = onnx.load(str(path)).graph
    dequantized = {n.input[0]: n.output[0] for n in g.node if n.op_type == "DequantizeLinear"}
    quantized = {n.output[0]: n.input[0] for n in g.node if n.op_type == "QuantizeLinear"}
    return {quantized[q]: d for q, d in dequantized.items() if q in quantized}


def test_report_layer_sqnr_is_end_to_end_against_the_float_model(digits):
    """Each layer's "sqnr_db": its dequantized int8 value in the QDQ model against the same
    tensor of the float model, both run by onnxruntime, on the first "layer_samples" samples."""
    out, report, x = digits
    k = report["layer_samples"]
    assert 1 <= k <= report["samples"]
    dq_of = _dequantized_values(out)
    float_names = {o for n in onnx.load(str(DIGITS)).graph.node for o in n.output}
    checked = 0
    for row in report["layers"]:
        name = row["output"]["tensor"]
        source = name if name in dq_of else f"{name}_float"  # a graph output's float value
        if row["sqnr_db"] is None or source not in dq_of or name not in float_names:
            continue
        ref = _run(_session(DIGITS, outputs=[name]), x[:k], [name])[0]
        got = _run(_session(out, outputs=[dq_of[source]]), x[:k], [dq_of[source]])[0]
        assert row["sqnr_db"] == pytest.approx(_sqnr(ref, got), abs=0.05), name
        checked += 1
    assert checked >= 5
    last = report["layers"][-1]  # the output layer: end to end is the output SQNR
    (db,) = report["output_sqnr_db"].values()
    assert k < report["samples"] or last["sqnr_db"] == pytest.approx(db, abs=0.01)


def test_report_added_sqnr_is_that_of_its_own_quantize_dequantize_pair(digits):
    out, report, x = digits
    model = onnx.load(str(out))
    g = model.graph
    quantized = {n.output[0]: n.input[0] for n in g.node if n.op_type == "QuantizeLinear"}
    pairs = {}
    for n in g.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in quantized:
            pairs[quantized[n.input[0]]] = n.output[0]
    rows = [r for r in report["layers"] if r["added_sqnr_db"] is not None]
    checked = 0
    for row in rows:
        name = row["output"]["tensor"]
        source = name if name in pairs else f"{name}_float"  # a graph output's float value
        if source not in pairs:
            continue
        ref, got = _run(_session(out, outputs=[source, pairs[source]]), x,
                        [source, pairs[source]])
        assert row["added_sqnr_db"] == pytest.approx(_sqnr(ref, got), abs=0.05), name
        checked += 1
    assert checked >= 5


def _conv_relu_model(two_readers: bool) -> bytes:
    """x -> Conv c -> Relu r (-> Add(c, r)) -> Conv y."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (4, 3, 3, 3)), ("b1", (4,)), ("w2", (2, 4, 1, 1)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"])]
    last = "r"
    if two_readers:
        nodes.append(helper.make_node("Add", ["c", "r"], ["a"]))
        last = "a"
    nodes.append(helper.make_node("Conv", [last, "w2"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("two_readers", [False, True])
def test_a_tensor_read_only_by_its_relu_has_no_pair_of_its_own(tmp_path, two_readers):
    src = tmp_path / "m.onnx"
    src.write_bytes(_conv_relu_model(two_readers))
    x = np.random.default_rng(1).standard_normal((16, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "calib.npy", x)
    out, _ = _quantize(tmp_path, src, tmp_path / "calib.npy")
    g = onnx.load(str(out)).graph
    relu = next(n for n in g.node if n.op_type == "Relu")
    q_of_c = [n for n in g.node if n.op_type == "QuantizeLinear" and n.input[0] == "c"]
    if two_readers:  # c keeps its own pair, the Relu reads the dequantized c
        assert len(q_of_c) == 1 and relu.input[0] != "c"
    else:
        assert not q_of_c and relu.input[0] == "c"
    # either way onnxruntime computes the model we simulate: the float model within int8 noise
    ref = _run(_session(src), x)[0]
    assert _sqnr(ref, _run(_session(out), x)[0]) > 20


def test_layer_reference_beyond_its_budget_is_a_prefix_of_the_first_sample(tmp_path, monkeypatch):
    """When one sample's activations exceed LAYER_REFERENCE_BYTES (a ResNet-50 at 224 x 224),
    calibration keeps only the leading share of each tensor's values of the first sample
    (`layer_sample_fraction`): each layer's SQNR is then onnxruntime's over that prefix."""
    import qconvert.quant.calibrate as calibrate

    monkeypatch.setattr(calibrate, "LAYER_REFERENCE_BYTES", 20000)
    out, report = _quantize(tmp_path, DIGITS)
    fraction = report["layer_sample_fraction"]
    assert 0 < fraction < 1 and report["layer_samples"] == 1
    x = np.load(TEST_MODELS / "digits_data_nchw.npz")["calib"][:1]
    dq_of = _dequantized_values(out)
    float_names = {o for n in onnx.load(str(DIGITS)).graph.node for o in n.output}
    checked = 0
    for row in report["layers"]:
        name = row["output"]["tensor"]
        if row["sqnr_db"] is None or name not in dq_of or name not in float_names:
            continue
        ref = _run(_session(DIGITS, outputs=[name]), x, [name])[0].reshape(-1)
        if ref.size < 1000:  # the rounded fraction would move the prefix of a small tensor
            continue
        got = _run(_session(out, outputs=[dq_of[name]]), x, [dq_of[name]])[0].reshape(-1)
        m = int(ref.size * fraction)
        assert row["sqnr_db"] == pytest.approx(_sqnr(ref[:m], got[:m]), abs=0.1), name
        assert abs(row["sqnr_db"] - _sqnr(ref, got)) > 0.001 or fraction > 0.99
        checked += 1
    assert checked >= 3
