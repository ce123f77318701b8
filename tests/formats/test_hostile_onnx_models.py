"""Regressions from the adversarial QA pass over hostile ONNX models.

- A Conv without bias converts to a CONV_2D that carries a zero bias: LiteRT loads it and matches
  onnxruntime, and its int8 form runs in TFLite Micro bit for bit like our integer executor.
- Conv / pool attributes onnxruntime rejects (a group that does not fit the channels, pads,
  dilations or kernels that make an absurd or empty output) are refused in one line naming the
  node, by convert (to TFLite and to ONNX) and fuse; onnxruntime rejecting each is checked too.
- A declared input dimension 0 is called "dynamic or zero-size" in the refusal.
- A BatchNormalization with variance + epsilon not positive is refused with that cause.
- Two nodes with one name (onnxruntime rejects the model) are refused.
Each refusal has its must-not-fire neighbour that converts.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper as NH

from qconvert.cli.app import main
from qconvert.formats.model_io import load_model
from qconvert.int8.rounding import round_half_away


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _save(path, nodes, x_shape, inits, out_shape=None, out="y"):
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [H.make_tensor_value_info(out, T.FLOAT, out_shape)],
                     [NH.from_array(a, n) for n, a in inits.items()])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _ort_rejects(path, x_shape) -> bool:
    try:
        _session(path).run(None, {"x": np.zeros(x_shape, np.float32)})
    except Exception:
        return True
    return False


def _conv_model(path, nd, with_bias=False, group=1, cin=3, cout=4, k=3, **attrs):
    rng = np.random.default_rng(nd)
    x_shape = [1, cin] + [8] * nd
    inits = {"W": rng.standard_normal((cout, cin // group if cin % group == 0 else cin)
                                      + (k,) * nd).astype(np.float32)}
    if with_bias:
        inits["B"] = rng.standard_normal(cout).astype(np.float32)
    conv = H.make_node("Conv", ["x", *inits], ["y"], name="c", group=group, **attrs)
    return _save(path, [conv], x_shape, inits), x_shape


def _refused(tmp_path, src, *needles):
    """convert to .tflite and .onnx and fuse all exit 1 with one line naming `needles`, and
    write nothing."""
    for args in (["convert", src, "-o", tmp_path / "o.tflite"],
                 ["convert", src, "-o", tmp_path / "o.onnx"],
                 ["fuse", src, "-o", tmp_path / "f.onnx"]):
        r = _invoke(args)
        assert r.exit_code == 1, (args, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("qconvert: error: "), r.output
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
    assert not any(p.suffix in (".tflite", ".onnx") and p != src for p in tmp_path.iterdir())


# -- 1. Conv without bias --------------------------------------------------------------------------
@pytest.mark.parametrize("nd", [1, 2])
def test_conv_without_bias_loads_in_litert_and_matches_onnxruntime(tmp_path, nd):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    src, x_shape = _conv_model(tmp_path / "nobias.onnx", nd, pads=[1] * (2 * nd))
    out = tmp_path / "nobias.tflite"
    r = _invoke(["convert", src, "-o", out, "--verify", 2])
    assert r.exit_code == 0, r.output
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    ref = _session(src).run(None, {"x": x})[0]
    it = Interpreter(model_content=out.read_bytes(),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()  # raised "conv.cc has_bias was not true" before the fix
    channels_last = (0, *range(2, nd + 2), 1)
    it.set_tensor(it.get_input_details()[0]["index"], np.transpose(x, channels_last))
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    if got.shape != ref.shape:
        ref = np.transpose(ref, channels_last)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("nd", [1, 2])
def test_conv_without_bias_int8_runs_in_tflm_bit_exact(tmp_path, nd):
    from tflite_micro.python.tflite_micro import runtime

    from qconvert.executor.int_executor import run_int8

    src, x_shape = _conv_model(tmp_path / "nobias.onnx", nd, pads=[1] * (2 * nd))
    rng = np.random.default_rng(2)
    np.save(tmp_path / "cal.npy", rng.standard_normal((16, *x_shape)).astype(np.float32))
    out = tmp_path / "nobias_int8.tflite"
    r = _invoke(["quantize", src, "--calibration", tmp_path / "cal.npy", "-o", out])
    assert r.exit_code == 0, r.output
    graph = load_model(out).graph
    conv = [n for n in graph.nodes if n.op == "Conv2D"]
    assert len(conv) == 1 and len(conv[0].inputs) == 3
    assert graph.tensors[conv[0].inputs[2]].dtype == "int32"
    x_in = graph.tensors[graph.inputs[0]]
    it = runtime.Interpreter.from_bytes(out.read_bytes())
    for _ in range(3):
        data = rng.standard_normal(x_in.shape).astype(np.float32)
        q = np.clip(round_half_away(data / x_in.quant.scale[0]) + x_in.quant.zero_point[0],
                    -128, 127).astype(np.int8)
        it.set_input(q, 0)
        it.invoke()
        np.testing.assert_array_equal(np.array(it.get_output(0)),
                                      run_int8(graph, {graph.inputs[0]: q})[graph.outputs[0]])
    c_dir = tmp_path / "c"
    r = _invoke(["export-c", out, "-o", c_dir])
    assert r.exit_code == 0, r.output


# -- 2. and 3. Conv / pool attributes onnxruntime rejects ------------------------------------------
@pytest.mark.parametrize("kind", ["group_5_of_3", "group_not_dividing_out", "huge_pad",
                                  "huge_dilation"])
def test_invalid_conv_attributes_refused_naming_the_node(tmp_path, kind):
    args = {"group_5_of_3": dict(group=5),
            "group_not_dividing_out": dict(group=2, cin=4, cout=3),
            "huge_pad": dict(pads=[10 ** 9] * 4),
            "huge_dilation": dict(dilations=[10 ** 6] * 2)}[kind]
    src, x_shape = _conv_model(tmp_path / f"{kind}.onnx", 2, with_bias=True, **args)
    assert _ort_rejects(src, x_shape)
    _refused(tmp_path, src, "node 'c'")


def test_maxpool_kernel_larger_than_input_refused(tmp_path):
    pool = H.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[100, 100])
    src = _save(tmp_path / "pool.onnx", [pool], [1, 3, 8, 8], {})
    assert _ort_rejects(src, [1, 3, 8, 8])
    _refused(tmp_path, src, "node 'pool'", "kernel [100, 100]")


@pytest.mark.parametrize("args", [dict(group=2, cin=4, cout=6), dict(group=3, cin=3, cout=3),
                                  dict(k=10, pads=[1, 1, 1, 1]),  # window exactly the padded map
                                  dict(k=3, dilations=[3, 3], pads=[0, 0, 0, 0])])
def test_valid_conv_attributes_still_convert(tmp_path, args):
    src, x_shape = _conv_model(tmp_path / "ok.onnx", 2, with_bias=True, **args)
    assert not _ort_rejects(src, x_shape)
    r = _invoke(["convert", src, "-o", tmp_path / "ok.tflite", "--verify", 2])
    assert r.exit_code == 0, r.output
    r = _invoke(["fuse", src, "-o", tmp_path / "fused.onnx"])
    assert r.exit_code == 0, r.output


# -- 4. zero-size input ----------------------------------------------------------------------------
def test_zero_size_input_dimension_named_as_such(tmp_path):
    relu = H.make_node("Relu", ["x"], ["y"])
    src = _save(tmp_path / "zero.onnx", [relu], [1, 0, 8, 8], {})
    r = _invoke(["convert", src, "-o", tmp_path / "o.tflite"])
    assert r.exit_code == 1 and "dynamic or zero-size" in r.output, r.output
    sym = _save(tmp_path / "sym.onnx", [relu], [1, "C", 8, 8], {})
    r = _invoke(["convert", sym, "-o", tmp_path / "o.tflite"])
    assert r.exit_code == 1 and "1xCx8x8 (dimension 1;" in r.output, r.output


# -- 5. BatchNormalization with variance + epsilon <= 0 --------------------------------------------
@pytest.mark.parametrize("var0,eps,ok", [(0.0, 0.0, False), (-1.0, 0.0, False),
                                         (0.0, 1e-5, True)])
def test_batchnorm_nonpositive_variance_refused_with_cause(tmp_path, var0, eps, ok):
    rng = np.random.default_rng(3)
    var = rng.uniform(0.5, 2, 4).astype(np.float32)
    var[1] = var0
    inits = {"W": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
             "s": np.ones(4, np.float32), "b": np.zeros(4, np.float32),
             "m": np.zeros(4, np.float32), "v": var}
    nodes = [H.make_node("Conv", ["x", "W"], ["t"], name="c", pads=[1] * 4),
             H.make_node("BatchNormalization", ["t", "s", "b", "m", "v"], ["y"], name="bn",
                         epsilon=eps)]
    src = _save(tmp_path / "bn.onnx", nodes, [1, 3, 8, 8], inits)
    r = _invoke(["convert", src, "-o", tmp_path / "o.tflite", "--verify", 2])
    if ok:
        assert r.exit_code == 0, r.output
        return
    assert r.exit_code == 1, r.output
    assert "BatchNormalization 'bn' (variance + epsilon not positive in 1 of 4 channels)" \
        in r.output and "BatchNorm:" not in r.output and len(r.output.splitlines()) == 1
    assert not (tmp_path / "o.tflite").exists()


# -- 6. duplicate node names -----------------------------------------------------------------------
def test_duplicate_node_names_refused(tmp_path):
    nodes = [H.make_node("Relu", ["x"], ["r"], name="dup"),
             H.make_node("Relu", ["r"], ["y"], name="dup")]
    src = _save(tmp_path / "dup.onnx", nodes, [1, 3, 8, 8], {})
    with pytest.raises(Exception, match="same node name"):
        _session(src)
    _refused(tmp_path, src, "'dup'")


def test_duplicate_graph_input_refused_as_an_invalid_graph(tmp_path):
    """Two graph inputs named alike: onnxruntime refuses the file; qconvert says the graph is
    invalid and names the tensor (it said "corrupt ONNX model (GraphError: ...)")."""
    x = H.make_tensor_value_info("x", T.FLOAT, [1, 4])
    graph = H.make_graph([H.make_node("Relu", ["x"], ["y"])], "g", [x, x],
                         [H.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    src = tmp_path / "dup_input.onnx"
    onnx.save(H.make_model(graph, opset_imports=[H.make_opsetid("", 13)]), src)
    with pytest.raises(Exception):
        _session(src)
    _refused(tmp_path, src, "invalid model graph: duplicate tensor name 'x'")


def test_unnamed_nodes_are_not_duplicates(tmp_path):
    nodes = [H.make_node("Relu", ["x"], ["r"]), H.make_node("Relu", ["r"], ["y"])]
    src = _save(tmp_path / "anon.onnx", nodes, [1, 3, 8, 8], {})
    _session(src)
    r = _invoke(["convert", src, "-o", tmp_path / "o.onnx"])
    assert r.exit_code == 0, r.output
