"""The TFLite Micro ops added by issue 28 (item 4), each through every layer against an
independent oracle:

- float: the model read by qconvert and run by the float executor equals LiteRT (reference
  kernels) and, where the op has an ONNX spelling, onnxruntime;
- int8 (and 16x8 where TFLite Micro has int16 kernels): the model `qconvert quantize` writes
  runs in TFLite Micro's interpreter, and the integer executor equals it bit for bit; small
  int8 models built directly pin the kernels' edge cases (zero points, scales);
- export-c: the portable C of the quantized model, built with gcc on the host, equals TFLite
  Micro bit for bit.

Ops TFLite Micro has no int8 kernel for stay float (no int8 rule): `quantize` refuses them in
one line naming the op, which a test checks too.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.export_c_harness import build_host, harness_source, io_layout, parse
from helpers.float_op_checks import TfGraph, check_tflite, litert_run
from helpers.int8_models import Q8, assert_same, int8_feeds, tflm

from qconvert.c_export.model.render import ModelOptions, render_model
from qconvert.c_export.model.prepare import prepare_model
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model
from qconvert.formats.tflite_reader import read_tflite


# -- helpers ------------------------------------------------------------------------------------
def quantize(tmp_path, float_bytes: bytes, *extra) -> bytes:
    """`qconvert quantize` of a float TFLite model (random calibration, minmax ranges): the
    int8 (or, with `--activations int16`, 16x8) TFLite bytes."""
    src, out = tmp_path / "float.tflite", tmp_path / "quant.tflite"
    src.write_bytes(float_bytes)
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration-random", "16",
                                       "--method", "minmax", "-o", str(out), *extra],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def integer_feeds(data: bytes, count=3, seed=0) -> list:
    """Full-range random feeds of the model's integer (int8 / int16) inputs."""
    g = read_tflite(data).graph
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(count):
        f = {}
        for n in g.inputs:
            info = np.iinfo(np.dtype(g.tensors[n].dtype))
            f[n] = rng.integers(info.min, info.max + 1, g.tensors[n].shape).astype(info.dtype)
        feeds.append(f)
    return feeds


def c_host_equals_tflm(tmp_path, data: bytes, feeds: list) -> None:
    """The portable C that export-c writes for `data`, built with gcc on the host, gives
    TFLite Micro's outputs bit for bit on `feeds`."""
    path = tmp_path / "model.tflite"
    path.write_bytes(data)
    graph = load_model(path).graph
    folder = tmp_path / "c"
    folder.mkdir(exist_ok=True)
    files, _ = render_model(prepare_model(load_model(path)),
                            ModelOptions(name="net", kernels="portable",
                                         fc_layout="1x4", patches=0))
    for name, content in files.items():
        (folder / name).write_bytes(content)
    samples = [[f[n] for n in graph.inputs] for f in feeds]
    exe = build_host(folder, harness_source("net", io_layout(graph), samples))
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    got = parse(out, [np.dtype(graph.tensors[n].dtype) for n in graph.outputs], len(samples))
    for k, (outs, sample) in enumerate(zip(got, samples)):
        for j, (o, r) in enumerate(zip(outs, tflm(data, sample))):
            r = np.asarray(r).reshape(-1)
            assert o.dtype == r.dtype and np.array_equal(o, r), \
                f"sample {k} output {j}: {np.count_nonzero(o != r)} of {r.size} differ"


def fused_keeps_litert_outputs(tmp_path, float_bytes: bytes) -> None:
    """`qconvert fuse` of a float TFLite model writes one LiteRT runs with the same outputs."""
    from helpers.float_op_checks import compare

    src, out = tmp_path / "tofuse.tflite", tmp_path / "fused.tflite"
    src.write_bytes(float_bytes)
    result = CliRunner().invoke(main, ["fuse", str(src), "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    g = read_tflite(float_bytes).graph
    arrays = [np.random.default_rng(3).standard_normal(g.tensors[n].shape).astype(np.float32)
              for n in g.inputs]
    compare(litert_run(float_bytes, arrays), litert_run(out.read_bytes(), arrays))


def full_stack(tmp_path, float_bytes: bytes, int16=False) -> bytes:
    """Float vs LiteRT, `fuse` round trip, then quantize; the integer executor and export-c vs
    TFLite Micro. Returns the quantized model."""
    check_tflite(tmp_path, float_bytes, seeds=(0, 1))
    fused_keeps_litert_outputs(tmp_path, float_bytes)
    q8 = quantize(tmp_path, float_bytes)
    feeds = integer_feeds(q8)
    assert_same(q8, feeds)
    c_host_equals_tflm(tmp_path, q8, feeds)
    if int16:
        q16 = quantize(tmp_path, float_bytes, "--activations", "int16")
        g = read_tflite(q16).graph
        assert any(t.dtype == "int16" for t in g.tensors.values())
        feeds = integer_feeds(q16)
        assert_same(q16, feeds)
        c_host_equals_tflm(tmp_path, q16, feeds)
    return q8


def assert_one_scale(data: bytes, op: str) -> None:
    """Every `op` node of the int8 model reads and writes one (scale, zero point): TFLite Micro
    copies its raw values, so another output scale would change their meaning."""
    g = read_tflite(data).graph
    nodes = [node for node in g.nodes if node.op == op]
    assert nodes, op
    for node in nodes:
        q = g.tensors[node.inputs[0]].quant, g.tensors[node.outputs[0]].quant
        assert (q[0].scale[0], q[0].zero_point[0]) == (q[1].scale[0], q[1].zero_point[0]), op


def ops_of(data: bytes) -> set:
    return {n.op for n in read_tflite(data).graph.nodes}


# -- EXPAND_DIMS ----------------------------------------------------------------------------------
def expand_dims_float(axis: int) -> bytes:
    """x [1, 6, 4] -> EXPAND_DIMS(axis) -> RELU (a layer with its own range after it)."""
    n = TfGraph(1)
    x = n.input("x", (1, 6, 4))
    shape = list((1, 6, 4))
    shape.insert(axis % 4, 1)
    e = n.node("ExpandDims", [x, n.const("axis", np.asarray([axis], np.int32))], "e", shape)
    n.node("Relu", [e], "y", shape)
    return n.build(["e", "y"])


@pytest.mark.parametrize("axis", [0, 2, -1, -4])
def test_expand_dims_float_int8_16x8_and_c(tmp_path, axis):
    q8 = full_stack(tmp_path, expand_dims_float(axis), int16=True)
    assert_one_scale(q8, "ExpandDims")


def test_expand_dims_of_an_axis_beyond_the_rank_is_refused_in_one_line(tmp_path):
    n = TfGraph(1)
    x = n.input("x", (1, 6, 4))
    n.node("ExpandDims", [x, n.const("axis", np.asarray([5], np.int32))], "e", (1, 6, 4, 1))
    src = tmp_path / "bad.tflite"
    src.write_bytes(n.build(["e"]))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration-random", "2",
                                       "-o", str(tmp_path / "q.tflite")])
    assert result.exit_code != 0
    assert "ExpandDims" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "q.tflite").exists()


# -- ONNX round trip helpers ---------------------------------------------------------------------
def onnx_to_tflite(tmp_path, onnx_data: bytes, *extra) -> bytes:
    """`qconvert convert` of an ONNX model to TFLite: the TFLite bytes."""
    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    src.write_bytes(onnx_data)
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), *extra],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def onnx_round_trip(tmp_path, onnx_data: bytes, feeds: dict, rel=1e-5) -> bytes:
    """The ONNX model in the float executor equals onnxruntime; converted to TFLite it runs in
    LiteRT with onnxruntime's outputs (inputs transposed to NHWC where 4-D); `fuse` of the
    ONNX model keeps onnxruntime's outputs. Returns the TFLite bytes."""
    from helpers.float_op_checks import check_onnx, compare, ort_run

    check_onnx(tmp_path, onnx_data, feeds=feeds, rel=rel)
    ref = ort_run(onnx_data, feeds)
    tfl = onnx_to_tflite(tmp_path, onnx_data)
    g = read_tflite(tfl).graph
    arrays = [feeds[n] if feeds[n].ndim != 4 else np.ascontiguousarray(
        feeds[n].transpose(0, 2, 3, 1)) for n in g.inputs]
    got = litert_run(tfl, arrays)
    got = [o if o.ndim != 4 or o.shape == r.shape else o.transpose(0, 3, 1, 2)
           for o, r in zip(got, ref)]
    compare(ref, got, rel)
    src, fused = tmp_path / "f.onnx", tmp_path / "fused.onnx"
    src.write_bytes(onnx_data)
    result = CliRunner().invoke(main, ["fuse", str(src), "-o", str(fused)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    compare(ref, ort_run(fused.read_bytes(), feeds), rel)
    return tfl


def quantize_refusal(tmp_path, float_bytes: bytes, suffix=".tflite") -> str:
    """`quantize`'s one-line refusal of a model (asserted: non-zero exit, no traceback,
    nothing written)."""
    src, out = tmp_path / f"refused{suffix}", tmp_path / "refused_int8.tflite"
    src.write_bytes(float_bytes)
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration-random", "2",
                                       "-o", str(out)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert not out.exists()
    return result.output


# -- NEG, LOG, SIN, FLOOR_DIV: float only in TFLite Micro -----------------------------------------
@pytest.mark.parametrize("op", ["Neg", "Log", "Sin"])
def test_float_unary_ops_against_litert_and_onnxruntime(tmp_path, op):
    from helpers.float_op_checks import onnx_bytes, vi

    n = TfGraph(2)
    x = n.input("x", (1, 5, 7, 3))
    a = n.node("Abs", [x], "a", (1, 5, 7, 3))  # Log of positive values (and 0 -> -inf)
    y = n.node(op, [a if op == "Log" else x], "y", (1, 5, 7, 3))
    check_tflite(tmp_path, n.build([y]), seeds=(0, 1, 2))
    fused_keeps_litert_outputs(tmp_path, n.build([y]))
    assert op in ops_of(n.build([y]))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32) * 4
    x[0, 0, 0, :3] = [0.0, -0.0, 1e-30]
    from onnx import helper
    nodes = [helper.make_node("Abs", ["x"], ["a"]),
             helper.make_node(op, ["a" if op == "Log" else "x"], ["y"])]
    data = onnx_bytes(nodes, [vi("x", [2, 3, 5, 7])], [vi("y", [2, 3, 5, 7])])
    tfl = onnx_round_trip(tmp_path, data, {"x": x})
    assert op in ops_of(tfl)


def test_floor_div_float_with_broadcast_and_negative_quotients(tmp_path):
    n = TfGraph(4)
    a = n.input("a", (1, 4, 6))
    b = n.const("b", np.asarray([0.7, -1.3, 2.0, -0.25, 3.0, 0.5], np.float32))
    n.node("FloorDiv", [a, b], "y", (1, 4, 6))
    check_tflite(tmp_path, n.build(["y"]), seeds=(0, 1, 2))
    fused_keeps_litert_outputs(tmp_path, n.build(["y"]))


@pytest.mark.parametrize("op", ["Neg", "Log", "Sin", "FloorDiv"])
def test_quantize_refuses_the_float_only_ops_naming_them(tmp_path, op):
    """TFLite Micro has no int8 NEG, LOG, SIN or FLOOR_DIV: `quantize` must not write a model
    it cannot run."""
    n = TfGraph(2)
    x = n.input("x", (1, 4, 6))
    ins = [x, n.const("b", np.full((6,), 2.0, np.float32))] if op == "FloorDiv" else [x]
    n.node(op, ins, "y", (1, 4, 6))
    out = quantize_refusal(tmp_path, n.build(["y"]))
    assert "no int8 rule" in out and op in out


# -- comparisons and SELECT_V2 --------------------------------------------------------------------
COMPARISONS = ["Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual"]


def logic_float() -> bytes:
    """x [1, 6, 8, 4]; m = x * 0.2; every comparison of x with m (two activations of different
    scales) and of x with a broadcast constant; y = SELECT_V2(x > c, x, m), a leaky ReLU."""
    from qconvert.ir import Node, Tensor

    n = TfGraph(5)
    shape = (1, 6, 8, 4)
    x = n.input("x", shape)
    m = n.node("Mul", [x, n.const("k", np.asarray([0.2], np.float32))], "m", shape,
               activation="NONE")
    c = n.const("c", np.asarray([0.3, -0.5, 0.0, 1.0], np.float32))
    outs = []
    for op in COMPARISONS:
        for other, tag in ((m, "m"), (c, "c")):
            name = f"{op.lower()}_{tag}"
            n.g.add_tensor(Tensor(name, shape, "bool"))
            n.g.nodes.append(Node(op, [x, other], [name], {}, name))
            outs.append(name)
    y = n.node("SelectV2", ["greater_c", x, m], "y", shape)
    return n.build(outs + [y])


def test_comparisons_and_select_float_int8_16x8_and_c(tmp_path):
    q8 = full_stack(tmp_path, logic_float(), int16=True)
    g = read_tflite(q8).graph
    assert {*COMPARISONS, "SelectV2"} <= ops_of(q8)
    select = next(node for node in g.nodes if node.op == "SelectV2")
    quants = {(float(g.tensors[t].quant.scale[0]), int(g.tensors[t].quant.zero_point[0]))
              for t in (*select.inputs[1:], select.outputs[0])}
    assert len(quants) == 1  # x, y and the output share one scale: TFLite copies raw values
    assert all(g.tensors[node.outputs[0]].dtype == "bool" for node in g.nodes
               if node.op in COMPARISONS)


def _comparison_model(op, qa, qb, b_const=False) -> bytes:
    from qconvert.ir import Node, Tensor

    n = Q8(7)
    a = n.input("a", (1, 16, 16), *qa)
    if b_const:
        b = n.const("b", n.rng.integers(-128, 128, (16,)).astype(np.int8), *qb)
    else:
        b = n.input("b", (1, 16, 16), *qb)
    n.g.add_tensor(Tensor("y", (1, 16, 16), "bool"))
    n.g.nodes.append(Node(op, [a, b], ["y"], {}, "y"))
    return n.build(["y"])


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("qa,qb", [((0.02, -3), (0.04, 10)), ((0.05, 0), (0.05, 0)),
                                   ((0.013, 127), (0.31, -128)), ((0.5, -20), (0.0625, 7))])
def test_comparison_int8_every_value_against_tflite_micro(tmp_path, op, qa, qb):
    """Every int8 value of a against values of b whose real values coincide with a's (ties
    decided by the rescaling: TFLite Micro's ComparisonWithScaling), and a broadcast constant;
    the integer executor and the host C equal TFLite Micro."""
    from helpers.int8_models import all_int8_values

    data = _comparison_model(op, qa, qb)
    a = all_int8_values()
    ratio = qa[0] / qb[0]
    b = np.clip(np.round((a.astype(np.float64) - qa[1]) * ratio) + qb[1], -128, 127)
    b = b.astype(np.int8)
    feeds = [{"a": a, "b": b}, {"a": a, "b": np.roll(b, 1)},
             {"a": a, "b": np.random.default_rng(1).integers(-128, 128, a.shape).astype(np.int8)}]
    assert_same(data, feeds, batch=False)
    c_host_equals_tflm(tmp_path, data, feeds)
    const = _comparison_model(op, qa, qb, b_const=True)
    assert_same(const, [{"a": a}], batch=False)


def test_comparison_of_an_input_scale_of_1_or_more_is_refused_as_tflite_micro_refuses_it():
    from qconvert.errors import QConvertError
    from qconvert.executor.int_executor import run_int8

    data = _comparison_model("Greater", (1.5, 0), (0.02, 0))
    with pytest.raises(QConvertError, match="scale 1.5.*below 1"):
        run_int8(read_tflite(data).graph, {"a": np.zeros((1, 16, 16), np.int8),
                                            "b": np.zeros((1, 16, 16), np.int8)})


def test_select_int8_and_int16_with_broadcast_copy_raw_values(tmp_path):
    from qconvert.ir import Node, Tensor

    for dtype, q in (("int8", (0.05, -3)), ("int16", (3e-4, 0))):
        n = Q8(8)
        x = n.input("x", (1, 4, 5, 3), *q, dtype=dtype)
        y = n.input("y", (1, 1, 5, 1), *q, dtype=dtype)
        n.g.add_tensor(Tensor("cond", (1, 4, 1, 3), "bool"))
        n.g.inputs.append("cond")
        n.node("SelectV2", ["cond", x, y], "s", (1, 4, 5, 3), *q, dtype=dtype)
        data = n.build(["s"])
        feeds = []
        rng = np.random.default_rng(2)
        info = np.iinfo(np.dtype(dtype))
        for _ in range(3):
            feeds.append({"x": rng.integers(info.min, info.max + 1, (1, 4, 5, 3)).astype(dtype),
                          "y": rng.integers(info.min, info.max + 1, (1, 1, 5, 1)).astype(dtype),
                          "cond": rng.integers(0, 2, (1, 4, 1, 3)).astype(bool)})
        assert_same(data, feeds, batch=False)
        c_host_equals_tflm(tmp_path, data, feeds)


@pytest.mark.parametrize("op", ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"])
def test_onnx_comparisons_and_where_convert_and_fuse(tmp_path, op):
    """ONNX comparison + Where (a clamp written as Where(x > c, c, x), NCHW with a per-channel
    constant) against onnxruntime, converted to TFLite (NHWC) against it in LiteRT."""
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import TensorProto, helper

    c = np.asarray([0.5, -0.2, 1.0], np.float32).reshape(3, 1, 1)
    nodes = [helper.make_node(op, ["x", "c"], ["cond"]),
             helper.make_node("Where", ["cond", "c3", "x"], ["y"])]
    data = onnx_bytes(nodes, [vi("x", [1, 3, 5, 7])],
                      [vi("cond", [1, 3, 5, 7], TensorProto.BOOL), vi("y", [1, 3, 5, 7])],
                      inits=[("c", c), ("c3", np.broadcast_to(c, (3, 5, 7)).copy())])
    x = np.random.default_rng(4).standard_normal((1, 3, 5, 7)).astype(np.float32)
    x[0, 0, 0, :3] = [0.5, -0.2, 1.0]  # equal to the constant: the ties
    tfl = onnx_round_trip(tmp_path, data, {"x": x})
    assert "SelectV2" in ops_of(tfl) and "Transpose" not in ops_of(tfl)


# -- REDUCE_MAX / REDUCE_MIN ----------------------------------------------------------------------
def reduce_float(op, axes, keep) -> bytes:
    """x [1, 6, 8, 4] -> CONV-free: ADD (a layer with its own range) -> REDUCE_MAX / MIN."""
    n = TfGraph(6)
    x = n.input("x", (1, 6, 8, 4))
    a = n.node("Add", [x, n.const("k", np.asarray([0.5, -1.0, 0.0, 2.0], np.float32))], "a",
               (1, 6, 8, 4), activation="NONE")
    shape = [1 if i in [v % 4 for v in axes] else d for i, d in enumerate((1, 6, 8, 4))]
    if not keep:
        shape = [d for i, d in enumerate((1, 6, 8, 4)) if i not in [v % 4 for v in axes]]
    n.node(op, [a, n.const("axes", np.asarray(axes, np.int32))], "y", shape, keepdims=int(keep))
    return n.build(["y"])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes,keep", [([1, 2], True), ([-1], False), ([2], True),
                                       ([3, 1], False)])
def test_reduce_max_min_float_int8_16x8_and_c(tmp_path, op, axes, keep):
    q8 = full_stack(tmp_path, reduce_float(op, axes, keep), int16=True)
    g = read_tflite(q8).graph
    node = next(nd for nd in g.nodes if nd.op == op)
    qin, qout = g.tensors[node.inputs[0]].quant, g.tensors[node.outputs[0]].quant
    assert (qin.scale[0], qin.zero_point[0]) == (qout.scale[0], qout.zero_point[0])


def test_reduce_max_with_another_output_scale_is_refused_as_tflite_micro_refuses_it():
    from qconvert.errors import QConvertError
    from qconvert.executor.int_executor import run_int8

    n = Q8(9)
    x = n.input("x", (1, 4, 6), 0.05, 3)
    n.node("ReduceMax", [x, n.const("axes", np.asarray([2], np.int32))], "y", (1, 4), 0.06, 3,
           keepdims=0)
    with pytest.raises(QConvertError, match="requires them equal"):
        run_int8(read_tflite(n.build(["y"])).graph, {"x": np.zeros((1, 4, 6), np.int8)})


@pytest.mark.parametrize("op,axes,keep", [("ReduceMax", [2, 3], 1), ("ReduceMax", [2, 3], 0),
                                          ("ReduceMin", [1], 1), ("ReduceMin", [-1, 2], 0),
                                          ("ReduceMax", [1], 0)])
def test_onnx_reduce_max_min_convert_fuse_and_quantize(tmp_path, op, axes, keep):
    """ONNX ReduceMax / ReduceMin (keras2onnx's global max pool: ReduceMax over H and W) against
    onnxruntime, converted to TFLite against it in LiteRT, then quantized: the int8 model runs
    in TFLite Micro, equal to the integer executor."""
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import helper

    shape = [1, 3, 5, 7]
    out = [1 if i in [a % 4 for a in axes] else d for i, d in enumerate(shape)]
    if not keep:
        out = [d for i, d in enumerate(shape) if i not in [a % 4 for a in axes]]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node(op, ["r", "axes"], ["y"], keepdims=keep)]
    data = onnx_bytes(nodes, [vi("x", shape)], [vi("y", out)],
                      inits=[("axes", np.asarray(axes, np.int64))], opset=18)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    tfl = onnx_round_trip(tmp_path, data, {"x": x})
    q8 = quantize(tmp_path, tfl)
    assert_same(q8, integer_feeds(q8))


# -- MIRROR_PAD -----------------------------------------------------------------------------------
def mirror_pad_float(mode, pads) -> bytes:
    n = TfGraph(7)
    x = n.input("x", (1, 5, 6, 3))
    a = n.node("Relu", [x], "a", (1, 5, 6, 3))
    pads = np.asarray(pads, np.int32)
    shape = tuple(int(d + b + e) for d, (b, e) in zip((1, 5, 6, 3), pads.tolist()))
    n.node("MirrorPad", [a, n.const("pads", pads)], "y", shape, mode=mode)
    return n.build(["y"])


@pytest.mark.parametrize("mode,pads", [(0, [[0, 0], [1, 2], [3, 0], [0, 0]]),
                                       (1, [[0, 0], [2, 1], [0, 6], [1, 1]]),
                                       (0, [[0, 0], [4, 4], [5, 5], [2, 2]])])
def test_mirror_pad_float_int8_and_c(tmp_path, mode, pads):
    q8 = full_stack(tmp_path, mirror_pad_float(mode, pads))
    assert_one_scale(q8, "MirrorPad")


@pytest.mark.parametrize("mode,pads", [("reflect", [0, 0, 1, 2, 0, 0, 2, 1]),
                                       ("edge", [0, 0, 1, 0, 0, 0, 1, 1])])
def test_onnx_reflect_and_edge_pad_convert_fuse_and_quantize(tmp_path, mode, pads):
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Pad", ["r", "pads"], ["y"], mode=mode)]
    shape = [1, 3, 5, 6]
    out = [d + pads[i] + pads[i + 4] for i, d in enumerate(shape)]
    data = onnx_bytes(nodes, [vi("x", shape)], [vi("y", out)],
                      inits=[("pads", np.asarray(pads, np.int64))])
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    tfl = onnx_round_trip(tmp_path, data, {"x": x})
    assert "MirrorPad" in ops_of(tfl)
    q8 = quantize(tmp_path, tfl)
    feeds = integer_feeds(q8)
    assert_same(q8, feeds)
    c_host_equals_tflm(tmp_path, q8, feeds)


def test_onnx_edge_pad_wider_than_1_is_refused_in_one_line(tmp_path):
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import helper

    data = onnx_bytes([helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge")],
                      [vi("x", [1, 3, 5, 6])], [vi("y", [1, 3, 9, 6])],
                      inits=[("pads", np.asarray([0, 0, 2, 0, 0, 0, 2, 0], np.int64))])
    src, out = tmp_path / "edge.onnx", tmp_path / "edge.tflite"
    src.write_bytes(data)
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "edge" in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


# -- DEPTH_TO_SPACE -------------------------------------------------------------------------------
@pytest.mark.parametrize("block", [2, 3])
def test_depth_to_space_float_int8_and_c(tmp_path, block):
    n = TfGraph(8)
    c = 2 * block * block
    x = n.input("x", (1, 4, 5, c))
    a = n.node("Relu", [x], "a", (1, 4, 5, c))
    n.node("DepthToSpaceNHWC", [a], "y", (1, 4 * block, 5 * block, 2), block_size=block)
    q8 = full_stack(tmp_path, n.build(["y"]))
    assert_one_scale(q8, "DepthToSpaceNHWC")


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_onnx_depth_to_space_convert_fuse_quantize_and_c(tmp_path, mode):
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("DepthToSpace", ["r"], ["y"], blocksize=2, mode=mode)]
    data = onnx_bytes(nodes, [vi("x", [1, 12, 3, 5])], [vi("y", [1, 3, 6, 10])])
    x = np.random.default_rng(7).standard_normal((1, 12, 3, 5)).astype(np.float32)
    tfl = onnx_round_trip(tmp_path, data, {"x": x})
    assert "DepthToSpaceNHWC" in ops_of(tfl) and "Transpose" not in ops_of(tfl)
    assert ("Gather" in ops_of(tfl)) == (mode == "CRD")
    q8 = quantize(tmp_path, tfl)
    feeds = integer_feeds(q8)
    assert_same(q8, feeds)
    c_host_equals_tflm(tmp_path, q8, feeds)


# -- L2_NORMALIZATION -----------------------------------------------------------------------------
def test_l2_normalization_float_int8_and_c(tmp_path):
    n = TfGraph(9)
    x = n.input("x", (1, 5, 6, 8))
    a = n.node("Add", [x, n.const("k", np.linspace(-1, 1, 8).astype(np.float32))], "a",
               (1, 5, 6, 8), activation="NONE")
    n.node("L2Normalization", [a], "y", (1, 5, 6, 8), activation="NONE")
    q8 = full_stack(tmp_path, n.build(["y"]))
    g = read_tflite(q8).graph
    y = g.tensors[g.outputs[0]]
    assert (float(y.quant.scale[0]), int(y.quant.zero_point[0])) == (1.0 / 128, 0)


@pytest.mark.parametrize("z_in", [-128, -3, 0, 90, 127])
def test_l2_normalization_int8_rows_against_tflite_micro(tmp_path, z_in):
    """Rows of every int8 value, a row all at the zero point (sum 0: the kernel's largest
    multiplier), rows with one element away from it, long rows (large sums)."""
    from helpers.int8_models import all_int8_values

    for depth in (16, 256):
        n = Q8(10)
        x = n.input("x", (1, 256 // depth, depth), 0.05, z_in)
        n.node("L2Normalization", [x], "y", (1, 256 // depth, depth), 1.0 / 128, 0,
               activation="NONE")
        data = n.build(["y"])
        rows = all_int8_values().reshape(1, 256 // depth, depth)
        flat = np.full((1, 256 // depth, depth), z_in, np.int8)
        flat[0, 1:, 0] = np.clip(z_in + np.arange(1, 256 // depth), -128, 127)
        feeds = [{"x": rows}, {"x": flat}, {"x": np.random.default_rng(z_in + 200).integers(
            -128, 128, (1, 256 // depth, depth)).astype(np.int8)}]
        assert_same(data, feeds, batch=False)
        c_host_equals_tflm(tmp_path, data, feeds)


# -- n-ary Max / Min ------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_onnx_nary_max_min_convert_fuse_quantize_and_c(tmp_path, op, count):
    """ONNX Max / Min of 1, 2 and 4 operands (two activations of different scales, ReLU and
    TANH, a per-channel and a scalar constant, broadcast) against onnxruntime; as TFLite a
    chain of MAXIMUM / MINIMUM in LiteRT; quantized, every operand of each step in its output's
    scale, the int8 model equals TFLite Micro in the integer executor and in C."""
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import helper

    names = ["r", "s", "c", "k"][:count]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Tanh", ["x"], ["s"]),
             helper.make_node(op, names, ["y"])]
    data = onnx_bytes(nodes, [vi("x", [1, 3, 5, 7])], [vi("y", [1, 3, 5, 7])],
                      inits=[("c", np.asarray([0.5, -0.2, 1.0], np.float32).reshape(3, 1, 1)),
                             ("k", np.asarray(0.3, np.float32))])
    x = np.random.default_rng(8).standard_normal((1, 3, 5, 7)).astype(np.float32)
    tfl = onnx_round_trip(tmp_path, data, {"x": x})
    expect = {"Max": "Maximum", "Min": "Minimum"}[op]
    assert sum(n.op == expect for n in read_tflite(tfl).graph.nodes) == count - 1
    q8 = quantize(tmp_path, tfl)
    g = read_tflite(q8).graph
    for node in g.nodes:  # TFLite compares raw int8 values: operands in the output's scale
        if node.op == expect:
            q = {(float(g.tensors[t].quant.scale[0]), int(g.tensors[t].quant.zero_point[0]))
                 for t in (*node.inputs, node.outputs[0])}
            assert len(q) == 1, node.name
    feeds = integer_feeds(q8)
    assert_same(q8, feeds)
    c_host_equals_tflm(tmp_path, q8, feeds)


# -- REDUCE_PROD: no TFLite Micro kernel, float only ----------------------------------------------
def test_reduce_prod_float_tflite_onnx_and_quantize_refusal(tmp_path):
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import helper

    n = TfGraph(11)
    x = n.input("x", (1, 4, 5, 3))
    n.node("ReduceProd", [x, n.const("axes", np.asarray([1, -1], np.int32))], "y", (1, 5),
           keepdims=0)
    data = n.build(["y"])
    check_tflite(tmp_path, data, seeds=(0, 1))
    out = quantize_refusal(tmp_path, data)
    assert "no int8 rule" in out and "ReduceProd" in out
    nodes = [helper.make_node("ReduceProd", ["x", "axes"], ["y"], keepdims=1)]
    onnx_data = onnx_bytes(nodes, [vi("x", [1, 3, 5, 7])], [vi("y", [1, 3, 1, 1])],
                           inits=[("axes", np.asarray([2, 3], np.int64))], opset=18)
    x = np.random.default_rng(9).uniform(0.8, 1.2, (1, 3, 5, 7)).astype(np.float32)
    assert "ReduceProd" in ops_of(onnx_round_trip(tmp_path, onnx_data, {"x": x}))


# -- FILL -----------------------------------------------------------------------------------------
def _fill_graph(n, x, dtype_kw) -> str:
    """value = REDUCE_MAX of every element of x (a scalar), FILL([1, 3, 5], value)."""
    v = n.node("ReduceMax", [x, n.const("axes", np.asarray([0, 1, 2], np.int32))], "v", (),
               **dtype_kw, keepdims=0)
    return n.node("Fill", [n.const("dims", np.asarray([1, 3, 5], np.int32)), v], "y",
                  (1, 3, 5), **dtype_kw)


def test_fill_float_int8_and_c(tmp_path):
    """FILL with a computed value (LiteRT for float); int8 (value and output one scale, as
    TFLite Micro copies the raw value) against TFLite Micro in the executor and in C; a
    constant FILL folds away in `quantize`."""
    n = TfGraph(12)
    x = n.input("x", (1, 4, 6))
    check_tflite(tmp_path, n.build([_fill_graph(n, x, {})]), seeds=(0, 1))
    n = Q8(12)
    x = n.input("x", (1, 4, 6), 0.05, -3)
    data = n.build([_fill_graph(n, x, {"scale": 0.05, "zp": -3})])
    assert "Fill" in ops_of(data)
    feeds = int8_feeds(data, 3)
    assert_same(data, feeds, batch=False)
    c_host_equals_tflm(tmp_path, data, feeds)
    n = TfGraph(13)
    x = n.input("x", (1, 3, 5))
    f = n.node("Fill", [n.const("dims", np.asarray([1, 3, 5], np.int32)),
                        n.const("value", np.asarray(0.7, np.float32))], "f", (1, 3, 5))
    q8 = quantize(tmp_path, n.build([n.node("Add", [x, f], "y", (1, 3, 5), activation="NONE")]))
    assert "Fill" not in ops_of(q8)
    assert_same(q8, integer_feeds(q8))


# -- ONNX QDQ output ------------------------------------------------------------------------------
def test_onnx_qdq_quantize_of_the_added_ops_verifies(tmp_path):
    """`quantize` to ONNX QDQ of Greater, Where, Max (3 operands), ReduceMax, ReduceMin, reflect
    Pad and DepthToSpace: `--verify` runs the written model in onnxruntime against the float
    one and accepts it (exit 0, file written)."""
    from helpers.float_op_checks import onnx_bytes, vi
    from onnx import TensorProto, helper, numpy_helper  # noqa: F401

    w = np.random.default_rng(10).standard_normal((4, 3, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["cv"]),
             helper.make_node("Greater", ["cv", "c"], ["cond"]),
             helper.make_node("Mul", ["cv", "k"], ["m"]),
             helper.make_node("Where", ["cond", "cv", "m"], ["y"]),
             helper.make_node("Max", ["y", "m", "cv"], ["u"]),
             helper.make_node("ReduceMax", ["u", "axes"], ["z"], keepdims=1),
             helper.make_node("ReduceMin", ["u", "axes2"], ["z2"], keepdims=0),
             helper.make_node("Pad", ["u", "pads"], ["p"], mode="reflect"),
             helper.make_node("DepthToSpace", ["p"], ["d"], blocksize=2, mode="CRD")]
    data = onnx_bytes(nodes, [vi("x", [1, 3, 6, 6])],
                      [vi("z", [1, 4, 1, 1]), vi("z2", [1, 6, 6]), vi("d", [1, 1, 12, 16])],
                      inits=[("w", w), ("c", np.asarray([0.5, -0.2, 1.0, 0.0],
                                                        np.float32).reshape(4, 1, 1)),
                             ("k", np.asarray([0.2], np.float32)),
                             ("axes", np.asarray([2, 3], np.int64)),
                             ("axes2", np.asarray([1], np.int64)),
                             ("pads", np.asarray([0, 0, 0, 1, 0, 0, 0, 1], np.int64))], opset=18)
    src, out = tmp_path / "m.onnx", tmp_path / "q.onnx"
    src.write_bytes(data)
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration-random", "16",
                                       "-o", str(out), "--verify", "4"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert out.exists()


def test_quantize_verify_judges_bool_outputs_by_their_flips(tmp_path):
    """`--verify` of comparison outputs: a threshold against a constant and Equal of two float
    activations (true only where they coincide) pass, the few values within an int8 step of
    the threshold being allowed to flip; the criterion itself refuses more than 1 % flips and
    names them (an SQNR of 0 / 1 values, -inf for an all-False output with one flip, would
    refuse every such model)."""
    from qconvert.cli.verify import _Check
    from qconvert.ir import Node, Tensor

    def model(op, other):
        n = TfGraph(14)
        x = n.input("x", (1, 6, 8, 4))
        m = n.node("Mul", [x, n.const("k", np.asarray([0.2], np.float32))], "m", (1, 6, 8, 4),
                   activation="NONE")
        b = m if other == "m" else n.const("c", np.asarray([0.3, -0.5, 0.0, 1.0], np.float32))
        n.g.add_tensor(Tensor("y", (1, 6, 8, 4), "bool"))
        n.g.nodes.append(Node(op, [x, b], ["y"], {}, "y"))
        return n.build(["y", m])

    for op, other in (("Greater", "c"), ("Equal", "m")):
        src, out = tmp_path / f"{op}.tflite", tmp_path / f"{op}_q.tflite"
        src.write_bytes(model(op, other))
        result = CliRunner().invoke(main, ["quantize", str(src), "--calibration-random", "32",
                                           "-o", str(out), "--verify", "8"])
        assert result.exit_code == 0 and out.exists(), result.output
    ref = np.zeros(1000, bool)
    check = _Check("sqnr")
    assert check.fails([ref], [ref]) is None
    few, many = ref.copy(), ref.copy()
    few[:10], many[:11] = True, True
    assert check.fails([ref], [few]) is None
    assert "11 of 1000 bool values flip" in check.fails([ref], [many])


def test_plan_gives_fill_select_and_copying_ops_one_scale_group():
    """The quantization plan joins what TFLite Micro copies raw: SELECT_V2's x, y and output
    (its bool condition, a comparison's output, is no activation), REDUCE_MAX's input and
    output, FILL's value and output."""
    from qconvert.formats.tflite_reader import read_tflite as read
    from qconvert.ir import Node, Tensor
    from qconvert.quant.plan import activation_groups

    n = TfGraph(15)
    x = n.input("x", (1, 4, 6))
    m = n.node("Mul", [x, n.const("k", np.asarray([0.2], np.float32))], "m", (1, 4, 6),
               activation="NONE")
    n.g.add_tensor(Tensor("cond", (1, 4, 6), "bool"))
    n.g.nodes.append(Node("Greater", [x, m], ["cond"], {}, "cond"))
    s = n.node("SelectV2", ["cond", x, m], "s", (1, 4, 6))
    y = _fill_graph(n, s, {})
    members, _, _ = activation_groups(read(n.build([y])).graph)
    group = {name: root for root, names in members.items() for name in names}
    assert group["x"] == group["m"] == group["s"] == group["v"] == group["y"]
    assert "cond" not in group


def test_complex_abs_without_a_tflite_micro_kernel_is_refused_in_one_line(tmp_path):
    """COMPLEX_ABS (no TFLite Micro kernel, complex64 input): `inspect` lists it as unknown,
    `quantize` and `export-c` refuse the model in one line, writing nothing."""
    import tflite as tfl

    from qconvert.ir import Node, Tensor

    n = TfGraph(16)
    n.g.add_tensor(Tensor("x", (1, 8), "complex64"))
    n.g.inputs.append("x")
    n.g.add_tensor(Tensor("y", (1, 8), "float32"))
    node = Node("COMPLEX_ABS", ["x"], ["y"], {}, "y")
    node.opaque = True
    node.origin = {"version": 1, "code": tfl.BuiltinOperator.COMPLEX_ABS, "custom_code": None,
                   "options_type": "NONE", "options": {}, "custom_options": None,
                   "custom_options_format": 0}
    n.g.nodes.append(node)
    src = tmp_path / "cabs.tflite"
    src.write_bytes(n.build(["y"]))
    result = CliRunner().invoke(main, ["inspect", str(src)])
    assert result.exit_code == 0 and "COMPLEX_ABS" in result.output
    for args, out in ((["quantize", "--calibration-random", "2", "-o"], tmp_path / "q.tflite"),
                      (["export-c", "-o"], tmp_path / "c")):
        result = CliRunner().invoke(main, [args[0], str(src), *args[1:], str(out)])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 1 and lines[-1].startswith("qconvert: error:"), result.output
        assert "Traceback" not in result.output and not out.exists()
    assert "COMPLEX_ABS" in lines[-1]  # export-c names the op
