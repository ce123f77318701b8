"""The batch axis of fixed-batch models during calibration (`qconvert.executor.batch_axis`).

A model exported with a fixed batch of 1 whose ops treat axis 0 as data (a Squeeze of the batch
axis, a time-major RESHAPE, a reduction over axis 0) is run one sample at a time by
`run_float_batched` whatever the batch size; any other model keeps running batched. Oracle for
the quantized model: onnxruntime on the float model (graph optimizations off).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from qconvert.cli import main
from qconvert.executor import float_executor
from qconvert.executor.batch_axis import sample_mixing_node
from qconvert.formats.onnx_reader import read_onnx


def _model(nodes, inits, x_shape, y_shape, batch="fixed") -> bytes:
    if batch == "dynamic":
        x_shape = ["N"] + list(x_shape[1:])
        y_shape = ["N"] + list(y_shape[1:])
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def _const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(values, dtype), name)


def squeezed_matmul(batch="fixed") -> bytes:
    """x [1, 6, 5] -> Squeeze(0) -> MatMul W [5, 4] -> Relu -> Unsqueeze(0) -> y [1, 6, 4]."""
    w = np.random.default_rng(0).normal(0, 0.5, (5, 4)).astype(np.float32)
    nodes = [helper.make_node("Squeeze", ["x", "a0"], ["s"]),
             helper.make_node("MatMul", ["s", "W"], ["m"]),
             helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "a0"], ["y"])]
    return _model(nodes, [_const("a0", [0]), numpy_helper.from_array(w, "W")], [1, 6, 5],
                  [1, 6, 4], batch)


def concat_constant(batch="fixed") -> bytes:
    """x [1, 4] -> Concat(x, C [1, 2], axis=1) -> MatMul W [6, 3] -> y [1, 3]: the constant has
    the model's batch of 1, so N samples cannot be concatenated with it."""
    rng = np.random.default_rng(2)
    c = rng.normal(0, 1, (1, 2)).astype(np.float32)
    w = rng.normal(0, 0.5, (6, 3)).astype(np.float32)
    nodes = [helper.make_node("Concat", ["x", "C"], ["cat"], axis=1),
             helper.make_node("MatMul", ["cat", "W"], ["y"])]
    return _model(nodes, [numpy_helper.from_array(c, "C"), numpy_helper.from_array(w, "W")],
                  [1, 4], [1, 3], batch)


def _graph(data, tmp_path):
    return read_onnx(data, tmp_path / "m.onnx").graph


def _single(op, inputs, attrs, inits, x_shape, y_shape):
    return _model([helper.make_node(op, ["x"] + inputs, ["y"], **attrs)], inits, x_shape,
                  y_shape)


MIXING = {
    "squeeze_axis0": (squeezed_matmul(), True),
    "squeeze_axis0_dynamic_batch": (squeezed_matmul("dynamic"), False),
    "squeeze_axis2": (_single("Squeeze", ["a"], {}, [_const("a", [2])], [1, 6, 1], [1, 6]),
                      False),
    "reshape_time_major": (_single("Reshape", ["s"], {}, [_const("s", [6, 1, 5])], [1, 6, 5],
                                   [6, 1, 5]), True),
    "reshape_leading_1": (_single("Reshape", ["s"], {}, [_const("s", [1, -1])], [1, 6, 5],
                                  [1, 30]), False),
    "transpose_moves_axis0": (_single("Transpose", [], {"perm": [1, 0, 2]}, [], [1, 6, 5],
                                      [6, 1, 5]), True),
    "transpose_keeps_axis0": (_single("Transpose", [], {"perm": [0, 2, 1]}, [], [1, 6, 5],
                                      [1, 5, 6]), False),
    "reduce_axis0": (_single("ReduceMean", [], {"axes": [0], "keepdims": 1}, [], [1, 6, 5],
                             [1, 6, 5]), True),
    "reduce_axis2": (_single("ReduceMean", [], {"axes": [2], "keepdims": 1}, [], [1, 6, 5],
                             [1, 6, 1]), False),
    "softmax_axis0": (_single("Softmax", [], {"axis": 0}, [], [1, 6], [1, 6]), True),
    "softmax_last": (_single("Softmax", [], {"axis": -1}, [], [1, 6], [1, 6]), False),
    "concat_axis0": (_model([helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], [],
                            [1, 6], [2, 6]), True),
    "concat_axis1": (_model([helper.make_node("Concat", ["x", "x"], ["y"], axis=1)], [],
                            [1, 6], [1, 12]), False),
    "concat_constant_axis1": (concat_constant(), True),
    "concat_constant_axis1_dynamic_batch": (concat_constant("dynamic"), False),
}


@pytest.mark.parametrize("case", MIXING)
def test_sample_mixing_rules(case, tmp_path):
    data, mixes = MIXING[case]
    node = sample_mixing_node(_graph(data, tmp_path))
    assert (node is not None) == mixes


def _chunk_sizes(monkeypatch, data, tmp_path, n=10, batch_size=4) -> list:
    seen = []
    real = float_executor.run_float

    def spy(graph, feeds, *args, **kwargs):
        seen.append(len(next(iter(feeds.values()))))
        return real(graph, feeds, *args, **kwargs)

    monkeypatch.setattr(float_executor, "run_float", spy)
    g = _graph(data, tmp_path)
    shape = [n] + [int(d) for d in g.tensors["x"].shape[1:]]
    x = np.random.default_rng(0).normal(0, 1, shape).astype(np.float32)
    out = float_executor.run_float_batched(g, {"x": x}, batch_size)
    for k in range(n):  # every sample's own result, whatever the chunks
        np.testing.assert_allclose(out["y"][k:k + 1], real(g, {"x": x[k:k + 1]})["y"],
                                   rtol=1e-6, atol=1e-6)
    return seen


def test_fixed_batch_squeeze_of_the_batch_axis_runs_one_sample_at_a_time(monkeypatch,
                                                                         tmp_path):
    assert _chunk_sizes(monkeypatch, squeezed_matmul(), tmp_path) == [1] * 10


def test_batch_agnostic_fixed_batch_model_still_runs_batched(monkeypatch, tmp_path):
    data = MIXING["transpose_keeps_axis0"][0]
    assert _chunk_sizes(monkeypatch, data, tmp_path) == [4, 4, 2]


def test_fixed_batch_concat_with_a_constant_runs_one_sample_at_a_time(monkeypatch, tmp_path):
    assert _chunk_sizes(monkeypatch, concat_constant(), tmp_path) == [1] * 10


# the case ('Squeeze of an axis whose size is not 1' under --batch-size 16), and a
# Concat with a constant ("along dimension 0 ... size 16 ... size 1")
QUANTIZE_CASES = {"squeeze": (squeezed_matmul, (1, 6, 5)), "concat": (concat_constant, (1, 4))}


@pytest.mark.parametrize("case", QUANTIZE_CASES)
@pytest.mark.parametrize("ext", ["onnx", "tflite"])
def test_quantize_fixed_batch_model_with_the_default_batch_size(tmp_path, ext, case):
    make, shape = QUANTIZE_CASES[case]
    data = make()
    src = tmp_path / "m.onnx"
    src.write_bytes(data)
    calib = np.random.default_rng(0).normal(0, 1, (40, *shape)).astype(np.float32)
    np.save(tmp_path / "calib.npy", calib)
    out = tmp_path / f"q.{ext}"
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    x = np.random.default_rng(1).normal(0, 1, shape).astype(np.float32)
    import onnxruntime as rt

    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = rt.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    if ext == "onnx":
        got = rt.InferenceSession(out.read_bytes(), so, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
    else:
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(model_content=out.read_bytes())
        it.allocate_tensors()
        d_in, d_out = it.get_input_details()[0], it.get_output_details()[0]
        s, z = d_in["quantization"]
        it.set_tensor(d_in["index"], np.clip(np.round(x / s) + z, -128, 127).astype(np.int8))
        it.invoke()
        so_, zo = d_out["quantization"]
        got = (it.get_tensor(d_out["index"]).astype(np.float64) - zo) * so_
    err = np.sum((want - got) ** 2) / np.sum(want ** 2)
    assert 10 * np.log10(1 / err) > 30


def test_run_float_given_n_samples_runs_them_one_at_a_time_and_observes_each_tensor_once(
        tmp_path):
    """Callers that hand `run_float` N samples at once (the report, bias correction) get every
    sample's own result and one observation per tensor holding all N, as a batched run."""
    from qconvert.executor.float_executor import run_float

    g = _graph(concat_constant(), tmp_path)
    x = np.random.default_rng(3).normal(0, 1, (5, 4)).astype(np.float32)
    seen = []
    out = run_float(g, {"x": x}, observe=lambda name, a: seen.append((name, a.shape)))
    for k in range(5):
        np.testing.assert_array_equal(out["y"][k:k + 1], run_float(g, {"x": x[k:k + 1]})["y"])
    names = [name for name, _ in seen]
    assert len(names) == len(set(names)) and {"x", "cat", "y"} <= set(names)
    assert all(shape[0] == 5 for name, shape in seen if name in ("x", "cat", "y"))


def test_run_int8_given_n_samples_matches_tflite_micro_sample_by_sample(tmp_path):
    """The int8 model of the Concat-with-constant model, run by the integer executor on 6
    samples at once, equals TFLite Micro invoked on each sample."""
    from helpers.int8_models import tflm

    from qconvert.executor.int_executor import run_int8
    from qconvert.formats.model_io import load_model

    src = tmp_path / "m.onnx"
    src.write_bytes(concat_constant())
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(0).normal(0, 1, (20, 1, 4)).astype(np.float32))
    out = tmp_path / "q.tflite"
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    model = load_model(out)
    x = np.random.default_rng(4).integers(-128, 128, (6, 4)).astype(np.int8)
    got = run_int8(model, {model.graph.inputs[0]: x})[model.graph.outputs[0]]
    want = np.concatenate([tflm(out.read_bytes(), [x[k:k + 1]])[0] for k in range(6)])
    np.testing.assert_array_equal(got, want)
