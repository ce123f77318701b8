"""Every ONNX op of the schema table, at opsets 11, 13, 17 and 21, survives read -> IR -> write
with identical outputs in onnxruntime, and is recognized (not opaque). Also: external data is read
only from inside the model's directory, and NaN weights are refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import run_onnx
from qconvert.errors import QConvertError
from qconvert.formats.model_io import load_model, serialize

IR_VERSION = {11: 6, 13: 7, 17: 8, 21: 10}


def _all_ops_model(opset: int) -> onnx.ModelProto:
    rng = np.random.default_rng(opset)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    c = node("Conv", ["x", const("w", f32(4, 2, 3, 3)), const("b", f32(4))], "c", group=2,
             auto_pad="SAME_UPPER")
    bn = node("BatchNormalization", [c, const("g", f32(4)), const("be", f32(4)),
                                     const("mu", f32(4)), const("var", np.abs(f32(4)) + 0.5)],
              "bn", epsilon=1e-3)
    r = node("Relu", [bn], "r")
    nodes.append(helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(
        np.array(0.1, np.float32))))
    if opset >= 12:  # value_float exists from Constant-12 on
        nodes.append(helper.make_node("Constant", [], ["hi"], value_float=2.5))
    else:
        nodes.append(helper.make_node("Constant", [], ["hi"], value=numpy_helper.from_array(
            np.array(2.5, np.float32))))
    cl = node("Clip", [r, "lo", "hi"], "cl")
    sg = node("Sigmoid", [cl], "sg")
    hs = node("HardSigmoid", [cl], "hs", alpha=0.3)
    if opset >= 14:
        hs = node("HardSwish", [hs], "hw")
    a = node("Add", [sg, hs], "a")
    s = node("Sub", [a, const("k", f32(4, 1, 1))], "s")
    m = node("Mul", [s, "k"], "m")
    d = node("Div", [m, const("k2", np.full((1,), 2.0, np.float32))], "d")
    mp = node("MaxPool", [d], "mp", kernel_shape=[2, 2], strides=[2, 2])
    ap = node("AveragePool", [d], "ap", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
              count_include_pad=1)
    ct = node("ConvTranspose", [mp, const("wt", f32(4, 2, 2, 2))], "ct", strides=[2, 2])
    cc = node("Concat", [ap, ct], "cc", axis=1)
    pd = node("Pad", [cc, const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], "pd")
    tp = node("Transpose", [pd], "tp", perm=[0, 1, 3, 2])
    gap = node("GlobalAveragePool", [tp], "gap")
    if opset >= 13:
        sq = node("Squeeze", [gap, const("sq_axes", np.array([2, 3], np.int64))], "sq")
        us = node("Unsqueeze", [sq, const("us_axes", np.array([2], np.int64))], "us")
    else:
        sq = node("Squeeze", [gap], "sq", axes=[2, 3])
        us = node("Unsqueeze", [sq], "us", axes=[2])
    fl = node("Flatten", [us], "fl")
    rs = node("Reshape", [fl, const("shape", np.array([1, 6], np.int64))], "rs")
    idn = node("Identity", [rs], "idn")
    dr = node("Dropout", [idn], "dr")
    gm = node("Gemm", [dr, const("gw", f32(6, 5)), const("gb", f32(5))], "gm", alpha=0.5)
    mm = node("MatMul", [gm, const("mw", f32(5, 3))], "mm")
    sm = node("Softmax", [mm], "sm")
    q = node("QuantizeLinear", [sm, const("qs", np.array(0.01, np.float32)),
                                const("qz", np.array(-5, np.int8))], "q")
    node("DequantizeLinear", [q, "qs", "qz"], "y")
    node("ConstantOfShape", [const("cs_shape", np.array([2, 3], np.int64))], "z",
         value=numpy_helper.from_array(np.array([1.5], np.float32)))
    # Shape arithmetic: Shape (start/end from opset 15), Gather, Cast (saturate from 19), Range,
    # Expand, Slice (negative step, clamped end).
    if opset >= 15:
        sh = node("Shape", ["x"], "sh", start=1, end=-1)  # [4, 6]
    else:
        sh = node("Shape", ["x"], "sh")  # [1, 4, 6, 6]
    gi = node("Gather", [sh, const("g_idx", np.array([-1, 0], np.int64))], "gi")
    lim = node("Gather", [sh, const("g_scalar", np.array(-1, np.int64))], "lim", axis=0)
    cast_attrs = {"saturate": 1} if opset >= 19 else {}
    cf = node("Cast", [gi], "cf", to=TensorProto.FLOAT, **cast_attrs)
    node("Expand", [cf, const("ex_shape", np.array([3, 1], np.int64))], "v")
    node("Range", [const("r_start", np.array(1, np.int64)), lim,
                   const("r_delta", np.array(2, np.int64))], "rg")
    node("Slice", [d, const("sl_starts", np.array([0, 5], np.int64)),
                   const("sl_ends", np.array([2**62, -7], np.int64)),
                   const("sl_axes", np.array([1, -1], np.int64)),
                   const("sl_steps", np.array([2, -2], np.int64))], "sl")
    graph = helper.make_graph(
        nodes, "all_ops", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("rg", TensorProto.INT64, [3]),
         helper.make_tensor_value_info("sl", TensorProto.FLOAT, [1, 2, 6, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION[opset]
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("opset", sorted(IR_VERSION))
def test_every_onnx_op_round_trips(tmp_path, opset):
    path = tmp_path / "all_ops.onnx"
    original = _all_ops_model(opset).SerializeToString()
    path.write_bytes(original)
    model = load_model(path)
    assert model.opaque_nodes() == []
    assert {"Cast", "Shape", "Gather", "Slice", "Range", "Expand"} <= \
        {n.op for n in model.graph.nodes}
    assert all(not n.op.startswith("Constant") or n.op == "ConstantOfShape"
               for n in model.graph.nodes), "Constant nodes become IR constants"
    conv = model.graph.nodes[0]
    assert conv.attrs["pads"] == [1, 1, 1, 1] and conv.attrs["group"] == 2
    written = serialize(model)
    onnx.checker.check_model(onnx.load_from_string(written), full_check=True)
    for seed in range(3):
        before, after = run_onnx(original, seed), run_onnx(written, seed)
        for a, b in zip(before, after):
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=0)
    path.write_bytes(written)
    assert serialize(load_model(path)) == written


def _external_model(tmp_path, location: str):
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    t = model.graph.initializer[0]
    t.data_location = TensorProto.EXTERNAL
    raw = t.raw_data
    t.ClearField("raw_data")
    t.external_data.add(key="location", value=location)
    target = (tmp_path / "models" / location)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(raw)
    path = tmp_path / "models" / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_inside_model_directory_is_read(tmp_path):
    model = load_model(_external_model(tmp_path, "weights/w.bin"))
    np.testing.assert_array_equal(model.graph.tensors["w"].data,
                                  np.arange(6, dtype=np.float32).reshape(2, 3))


def test_external_data_outside_model_directory_is_refused(tmp_path):
    path = _external_model(tmp_path, "../outside.bin")
    with pytest.raises(QConvertError, match="outside the model's directory"):
        load_model(path)


def test_nan_weights_are_refused(tmp_path):
    model = _all_ops_model(13)
    w = numpy_helper.to_array(model.graph.initializer[0]).copy()
    w[0, 0, 0, 0] = np.nan
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "w"))
    path = tmp_path / "nan.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(QConvertError, match="NaN"):
        load_model(path)


def test_unsupported_opset_is_refused(tmp_path):
    model = _all_ops_model(13)
    model.opset_import[0].version = 9
    path = tmp_path / "old.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(QConvertError, match="opset 9 is not supported"):
        load_model(path)
