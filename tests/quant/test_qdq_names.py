"""Node and value names in the ONNX `quantize` (QDQ) and `fuse` write are unique.

A float constant read by several ops gets one DequantizeLinear per reader (each layer its own
int8 copy: per-channel for a layer's weights, per-tensor for an Add / Mul operand), and those
must not share a node name: onnxruntime refuses such a model outright ("two nodes with same node
name"), even with its graph optimizations off, and so does qconvert's own ONNX reader. Names the
source model gave its nodes are kept, even when they look like the ones qconvert makes up
(`w_DequantizeLinear`, `bn/mul`); the made-up node takes a suffix instead. The same input
writes byte-identical files. Oracles: onnxruntime (graph optimizations off) loads and runs the
output and gives the float model's outputs within a quantization-noise floor (SQNR), and
`onnx.checker` with full_check (`helpers.written_names`).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from helpers.written_names import onnx_name_problems
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model

RNG_SEED = 7


def _model(nodes, consts: dict, x_shape, path, out_shapes=None):
    """Save an opset-13 model reading input "x" (float32 `x_shape`) and writing "y"."""
    rng = np.random.default_rng(RNG_SEED)
    inits = [numpy_helper.from_array(
        (np.abs(rng.standard_normal(shape)) + 0.5 if name.endswith("var")
         else rng.standard_normal(shape)).astype(np.float32), name)
        for name, shape in consts.items()]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
               for name, shape in (out_shapes or {"y": None}).items()]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x_shape))], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    calib = path.with_suffix(".npy")
    np.save(calib, rng.standard_normal((8, *x_shape[1:])).astype(np.float32))
    return path, calib


def _quantize(src, calib, out, *extra):
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration", str(calib),
                                       "--batch-size", "1", "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def _ort(model_bytes, x):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(["y"], {"x": x[i:i + 1]})[0] for i in range(len(x))])


def _sqnr(ref, got):
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30))


def _check(src, calib, written, floor_db=20.0):
    """The written QDQ model is well formed, runs and stays near the float model."""
    assert onnx_name_problems(written) == []
    load_model_bytes(written)  # qconvert's own reader takes it back
    x = np.load(calib)
    want, got = _ort(src.read_bytes(), x), _ort(written, x)
    assert _sqnr(want, got) > floor_db


def load_model_bytes(data: bytes):
    """qconvert's ONNX reader on `data` (it refuses two nodes with one name)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.onnx"
        p.write_bytes(data)
        return load_model(p)


def _node_names(model_bytes, op=None) -> list:
    g = onnx.load_from_string(model_bytes).graph
    return [n.name for n in g.node if op is None or n.op_type == op]


def _shared_conv(tmp_path):
    """x -> Conv(w, b) -> Relu -> Conv(the same w, b) -> y (the last session's note)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c1"], name="c1"),
             helper.make_node("Relu", ["c1"], ["r"], name="r"),
             helper.make_node("Conv", ["r", "w", "b"], ["y"], name="c2")]
    return _model(nodes, {"w": (4, 4, 1, 1), "b": (4,)}, (1, 4, 6, 6), tmp_path / "conv.onnx")


def test_a_weight_and_bias_shared_by_two_convs(tmp_path):
    src, calib = _shared_conv(tmp_path)
    written = _quantize(src, calib, tmp_path / "q.onnx")
    _check(src, calib, written)
    dq = [n for n in onnx.load_from_string(written).graph.node if n.op_type == "DequantizeLinear"
          and n.input[0].startswith(("w_", "b_"))]
    assert len(dq) == 4  # each conv reads its own int8 weight and int32 bias


def test_a_constant_read_by_add_mul_and_concat(tmp_path):
    nodes = [helper.make_node("Add", ["x", "k"], ["a"], name="add"),
             helper.make_node("Mul", ["a", "k"], ["m"], name="mul"),
             helper.make_node("Concat", ["m", "k"], ["y"], axis=1, name="cat")]
    src, calib = _model(nodes, {"k": (1, 4, 6, 6)}, (1, 4, 6, 6), tmp_path / "k.onnx")
    written = _quantize(src, calib, tmp_path / "q.onnx")
    _check(src, calib, written)
    # Add and Mul read k at the one scale the plan gave it: one int8 copy, one DequantizeLinear
    # (the Concat reads a copy at its output's scale, as TFLite's CONCATENATION needs)
    g = onnx.load_from_string(written).graph
    readers = {n.op_type: n.input for n in g.node if n.op_type in ("Add", "Mul", "Concat")}
    assert readers["Add"][1] == readers["Mul"][1] != readers["Concat"][1]
    copies = [t for t in g.initializer if t.dims == [1, 4, 6, 6]]
    assert len(copies) == 2 and all(t.data_type == TensorProto.INT8 for t in copies)


@pytest.mark.parametrize("fc", ["--fc-per-channel", "--per-tensor"])
def test_a_weight_read_per_channel_by_a_matmul_and_per_tensor_by_an_add(tmp_path, fc):
    """W is a MatMul's weight (per channel on axis 1 with --fc-per-channel) and an Add's
    operand (per tensor): two different DequantizeLinear pairs, two names."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "W"], ["a"], name="add"),
             helper.make_node("MatMul", ["a", "W"], ["y"], name="mm2")]
    src, calib = _model(nodes, {"W": (4, 4)}, (1, 4, 4), tmp_path / "mm.onnx")
    written = _quantize(src, calib, tmp_path / "q.onnx", fc)
    _check(src, calib, written)
    g = onnx.load_from_string(written).graph
    init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    scales = [init[n.input[1]].shape for n in g.node
              if n.op_type == "DequantizeLinear" and n.input[0].startswith("W_")]
    assert len(scales) == 3
    assert scales[1] == ()  # the Add's operand: one scale
    assert scales[0] == scales[2] == ((4,) if fc == "--fc-per-channel" else ())


def _hostile(tmp_path):
    """Source node names equal to the ones the QDQ writer derives from tensor names."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="w_DequantizeLinear"),
             helper.make_node("Relu", ["c"], ["r"], name="x_QuantizeLinear"),
             helper.make_node("Conv", ["r", "w", "b"], ["c2"], name="c_DequantizeLinear"),
             helper.make_node("Add", ["c2", "r"], ["y"], name="y_QuantizeLinear")]
    return _model(nodes, {"w": (4, 4, 1, 1), "b": (4,)}, (1, 4, 6, 6),
                  tmp_path / "hostile.onnx")


def test_source_node_names_that_look_like_qdq_names_are_kept(tmp_path):
    src, calib = _hostile(tmp_path)
    written = _quantize(src, calib, tmp_path / "q.onnx")
    _check(src, calib, written)
    assert _node_names(written, "Conv") == ["w_DequantizeLinear", "c_DequantizeLinear"]
    assert _node_names(written, "Relu") == ["x_QuantizeLinear"]
    assert _node_names(written, "Add") == ["y_QuantizeLinear"]


def test_source_tensor_names_that_look_like_qdq_names(tmp_path):
    """Tensors named like the writer's suffixes (`w_quantized`, `x_quantized`, `c_scale`)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["x_quantized"], name="c"),
             helper.make_node("Add", ["x_quantized", "w_quantized"], ["c_scale"], name="add"),
             helper.make_node("Mul", ["c_scale", "w_quantized"], ["y"], name="mul")]
    src, calib = _model(nodes, {"w": (4, 4, 1, 1), "b": (4,), "w_quantized": (1, 4, 1, 1)},
                        (1, 4, 6, 6), tmp_path / "names.onnx")
    _check(src, calib, _quantize(src, calib, tmp_path / "q.onnx"))


def _bn_hostile(tmp_path):
    """A BatchNormalization "bn" that no conv precedes (fuse writes it as Mul "bn/mul" and Add
    "bn/add") and a Relu the source named "bn/mul"."""
    nodes = [helper.make_node("BatchNormalization", ["x", "g", "be", "mean", "var"], ["t"],
                              name="bn"),
             helper.make_node("Relu", ["t"], ["y"], name="bn/mul")]
    return _model(nodes, {"g": (4,), "be": (4,), "mean": (4,), "var": (4,)}, (1, 4, 6, 6),
                  tmp_path / "bn.onnx")


def test_fuse_keeps_a_source_name_its_batchnorm_rewrite_would_take(tmp_path):
    src, calib = _bn_hostile(tmp_path)
    out = tmp_path / "fused.onnx"
    result = CliRunner().invoke(main, ["fuse", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = out.read_bytes()
    assert onnx_name_problems(written) == []
    assert _node_names(written, "Relu") == ["bn/mul"]
    assert len(_node_names(written, "Mul")) == 1 and _node_names(written, "Mul") != ["bn/mul"]
    x = np.load(calib)
    np.testing.assert_allclose(_ort(written, x), _ort(src.read_bytes(), x), rtol=1e-5, atol=1e-5)
    _check(src, calib, _quantize(src, calib, tmp_path / "q.onnx"))


def test_the_same_input_writes_byte_identical_qdq(tmp_path):
    src, calib = _hostile(tmp_path)
    first = _quantize(src, calib, tmp_path / "q1.onnx")
    assert _quantize(src, calib, tmp_path / "q2.onnx") == first
