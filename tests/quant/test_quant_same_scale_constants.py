"""A float constant read by several ops whose int8 operands must share their output's scale
(MAXIMUM, MINIMUM: TFLite compares the raw int8 values) gets one requantized copy per distinct
scale (`plan.split_shared_constants`); readers needing one scale keep one copy. Oracles: LiteRT
runs the float model (SQNR of every output), TFLite Micro runs the int8 model bit for bit like
our integer executor."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import random_inputs, run_litert, run_tflm
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize

SHAPE = (1, 4, 4, 8)


def _model(op: str, gain: float) -> bytes:
    """x -> op(x, c) "y1"; x * gain -> op(., c) "y2": one constant c, two readers whose other
    operands' ranges differ by `gain`."""
    g = Graph("main", inputs=["x"], outputs=["y1", "y2"])
    for name in ("x", "m", "y1", "y2"):
        g.add_tensor(Tensor(name, SHAPE, "float32"))
    g.add_tensor(Tensor("c", (8,), "float32",
                        np.linspace(-0.9, 0.9, 8).astype(np.float32)))
    g.add_tensor(Tensor("k", (), "float32", np.array(gain, np.float32)))
    g.nodes = [Node(op, ["x", "c"], ["y1"], {}, "y1"),
               Node("Mul", ["x", "k"], ["m"], {"activation": "NONE"}, "m"),
               Node(op, ["m", "c"], ["y2"], {}, "y2")]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


def _quantize(tmp_path, src_bytes, io_type):
    src, out = tmp_path / "m.tflite", tmp_path / f"m_{io_type}.tflite"
    src.write_bytes(src_bytes)
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(6).standard_normal((32,) + SHAPE[1:]).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--no-fuse",
                                       "--io-type", io_type, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return src, out


def _sqnr(got, want) -> float:
    return 10 * np.log10(np.sum(want.astype(np.float64) ** 2)
                         / np.sum((got.astype(np.float64) - want) ** 2))


@pytest.mark.parametrize("op", ["Maximum", "Minimum"])
def test_constant_shared_by_readers_of_different_scales_gets_a_copy_each(tmp_path, op):
    src, out = _quantize(tmp_path, _model(op, 40.0), "float32")
    graph = load_model(out).graph
    readers = [n for n in graph.nodes if n.op == op]
    consts = [n.inputs[1] for n in readers]
    assert len(set(consts)) == 2  # one copy per scale
    for n, c in zip(readers, consts):  # each copy in its reader's output scale
        assert graph.tensors[c].quant.scale[0] == graph.tensors[n.outputs[0]].quant.scale[0] \
            or n.outputs[0] in graph.outputs  # float edge: the int8 name is the reader's
    for seed in (0, 1):
        want = run_litert(src.read_bytes(), seed)
        got = run_tflm(out.read_bytes(), seed)
        for g, w in zip(got, want):
            assert _sqnr(g, w) > 30, [_sqnr(a, b) for a, b in zip(got, want)]


@pytest.mark.parametrize("op", ["Maximum", "Minimum"])
def test_int8_model_with_copies_is_bit_exact_with_tflm(tmp_path, op):
    _src, out = _quantize(tmp_path, _model(op, 40.0), "int8")
    graph = load_model(out).graph
    for seed in (0, 1):
        xq = random_inputs([(SHAPE, np.int8)], seed)[0]  # what run_tflm feeds
        ours = run_int8(graph, {"x": xq})
        tflm = run_tflm(out.read_bytes(), seed)
        np.testing.assert_array_equal(tflm[0], ours["y1"])
        np.testing.assert_array_equal(tflm[1], ours["y2"])


def test_constant_shared_by_readers_of_one_scale_keeps_one_copy(tmp_path):
    """must not: gain 1, both readers' outputs calibrate to one range: one int8 constant."""
    g = Graph("main", inputs=["x"], outputs=["y1", "y2"])
    for name in ("x", "y1", "y2"):
        g.add_tensor(Tensor(name, SHAPE, "float32"))
    g.add_tensor(Tensor("c", (8,), "float32", np.linspace(-0.9, 0.9, 8).astype(np.float32)))
    g.nodes = [Node("Maximum", ["x", "c"], ["y1"], {}, "y1"),
               Node("Maximum", ["x", "c"], ["y2"], {}, "y2")]
    model = Model("tflite", [g])
    model.verify()
    src, out = _quantize(tmp_path, serialize(model), "int8")
    graph = load_model(out).graph
    consts = {n.inputs[1] for n in graph.nodes if n.op == "Maximum"}
    assert len(consts) == 1
    assert not any(t.data is not None and t.dtype.startswith("float")
                   for t in graph.tensors.values())


def _two_activations(op: str) -> bytes:
    """x -> op(x, x * 40) "y": both operands are activations, of very different ranges."""
    g = Graph("main", inputs=["x"], outputs=["y"])
    for name in ("x", "m", "y"):
        g.add_tensor(Tensor(name, SHAPE, "float32"))
    g.add_tensor(Tensor("k", (), "float32", np.array(40.0, np.float32)))
    g.nodes = [Node("Mul", ["x", "k"], ["m"], {"activation": "NONE"}, "m"),
               Node(op, ["x", "m"], ["y"], {}, "y")]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


@pytest.mark.parametrize("op", ["Maximum", "Minimum"])
def test_both_activation_operands_share_the_output_scale(tmp_path, op):
    """TFLite compares MAXIMUM / MINIMUM operands as raw int8: the output takes its own range
    and both operands reach it in its scale (a QUANTIZE int8 -> int8 where theirs differs)."""
    src, out = _quantize(tmp_path, _two_activations(op), "int8")
    graph = load_model(out).graph
    node = next(n for n in graph.nodes if n.op == op)
    params = {(float(graph.tensors[t].quant.scale[0]), int(graph.tensors[t].quant.zero_point[0]))
              for t in node.inputs + node.outputs}
    assert len(params) == 1
    _src, out_f = _quantize(tmp_path, _two_activations(op), "float32")
    for seed in (0, 1):
        want = run_litert(src.read_bytes(), seed)[0]
        got = run_tflm(out_f.read_bytes(), seed)[0]
        assert _sqnr(got, want) > 30, _sqnr(got, want)
        xq = random_inputs([(SHAPE, np.int8)], seed)[0]
        np.testing.assert_array_equal(run_tflm(out.read_bytes(), seed)[0],
                                      run_int8(graph, {"x": xq})["y"])


def test_pack_of_two_ranges_requantizes_into_one_scale(tmp_path):
    """TFLite's int8 PACK copies bytes, like CONCATENATION: the output covers both inputs."""
    g = Graph("main", inputs=["x"], outputs=["y"])
    for name in ("x", "a", "m"):
        g.add_tensor(Tensor(name, SHAPE, "float32"))
    g.add_tensor(Tensor("y", SHAPE[:3] + (2, 8), "float32"))
    g.add_tensor(Tensor("k", (), "float32", np.array(40.0, np.float32)))
    g.add_tensor(Tensor("h", (), "float32", np.array(0.5, np.float32)))
    g.nodes = [Node("Mul", ["x", "h"], ["a"], {"activation": "NONE"}, "a"),
               Node("Mul", ["x", "k"], ["m"], {"activation": "NONE"}, "m"),
               Node("Pack", ["a", "m"], ["y"], {"axis": 3, "values_count": 2}, "y")]
    model = Model("tflite", [g])
    model.verify()
    src, out = _quantize(tmp_path, serialize(model), "float32")
    _src, out8 = _quantize(tmp_path, serialize(model), "int8")
    graph = load_model(out8).graph
    for seed in (0, 1):
        want = run_litert(src.read_bytes(), seed)[0]
        got = run_tflm(out.read_bytes(), seed)[0]
        assert _sqnr(got, want) > 30, _sqnr(got, want)
        xq = random_inputs([(SHAPE, np.int8)], seed)[0]
        np.testing.assert_array_equal(run_tflm(out8.read_bytes(), seed)[0],
                                      run_int8(graph, {"x": xq})["y"])
