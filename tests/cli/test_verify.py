"""`--verify N` (fuse, convert, quantize): the written model is run against the input in the
reference executors and nothing is written when they diverge. Passes and the quantizer are
broken on purpose (monkeypatched) to show the refusal names the pass or the layer; the test
models pass it (the executors themselves are checked against onnxruntime, LiteRT and TFLite
Micro in their own tests, and the streaming ones against LiteRT frame by frame below)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS, all_model_paths
from qconvert import passes
from qconvert.cli.app import main
from qconvert.executor.streaming import has_state
from qconvert.formats.model_io import load_model
from qconvert.cli.verify import FLOAT_RTOL, MIN_SQNR_DB

DIGITS_ONNX = SAMPLE_MODELS / "digits_cnn.onnx"
RUNNABLE = [p for p in all_model_paths() if not load_model(p).opaque_nodes() or has_state(
    load_model(p))]


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _float_tflite_or_onnx(path) -> bool:
    m = load_model(path)
    return not any(t.quant is not None and t.dtype == "int8" for t in m.graph.tensors.values())


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.name)
@pytest.mark.parametrize("command", ["fuse", "convert"])
def test_every_test_model_passes_verify(tmp_path, path, command):
    out = tmp_path / f"out{path.suffix}"
    r = _invoke(command, path, "-o", out, "--verify", 3)
    assert r.exit_code == 0, r.output
    assert out.exists()


@pytest.mark.parametrize("path", [p for p in RUNNABLE if _float_tflite_or_onnx(p)
                                  and not has_state(load_model(p))], ids=lambda p: p.name)
def test_every_float_test_model_quantizes_with_verify(tmp_path, path):
    out = tmp_path / "int8.tflite"
    r = _invoke("quantize", path, "--calibration-random", 8, "-o", out, "--verify", 8)
    assert r.exit_code == 0, r.output


def test_onnx_to_tflite_convert_and_quantize_verify(tmp_path):
    r = _invoke("convert", DIGITS_ONNX, "-o", tmp_path / "d.tflite", "--verify", 4)
    assert r.exit_code == 0, r.output
    for out in ("q.tflite", "q.onnx"):
        r = _invoke("quantize", DIGITS_ONNX, "--calibration", SAMPLE_MODELS /
                    "digits_calib_nchw.npy", "-o", tmp_path / out, "--verify", 8)
        assert r.exit_code == 0, r.output


def _break_pass(monkeypatch, name):
    """Make registered pass `name`, whenever it rewrites something, also scale the weights of
    the graph's first convolution by 1.5 (a plausible folding bug)."""
    original = passes.get_pass(name)

    def broken(graph, context):
        count = original.run(graph, context)
        conv = next((n for n in graph.nodes if n.op == "Conv2D"), None)
        if count and conv is not None:
            w = graph.tensors[conv.inputs[1]]
            w.data = w.data * np.float32(1.5)
        return count

    monkeypatch.setitem(passes.registry.PASSES, name, passes.Pass(name, broken, original.summary))


def _conv_mul_add_tflite(path) -> None:
    """A float TFLite Conv2D -> Mul (per-channel constant) -> Add: fuse-conv-mul and
    fuse-conv-add fold both into the conv."""
    from qconvert.ir import Graph, Model, Node, Tensor
    from qconvert.formats.model_io import serialize
    from qconvert.padding import valid_pads

    rng = np.random.default_rng(3)
    g = Graph("main")

    def add(name, shape, data=None):
        g.add_tensor(Tensor(name, tuple(shape), "float32", data))
        return name

    g.inputs.append(add("x", (1, 6, 6, 3)))
    w = rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    attrs = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "group": 1,
             "kernel_shape": [3, 3], "pads": valid_pads(2), "activation": "NONE"}
    g.nodes.append(Node("Conv2D", ["x", add("w", w.shape, w), add("b", (4,), np.ones(4, np.float32))],
                        [add("c", (1, 4, 4, 4))], attrs, "c"))
    g.nodes.append(Node("Mul", ["c", add("k", (4,), rng.uniform(0.5, 2, 4).astype(np.float32))],
                        [add("m", (1, 4, 4, 4))], {"activation": "NONE"}, "m"))
    g.nodes.append(Node("Add", ["m", add("a", (4,), rng.normal(0, 1, 4).astype(np.float32))],
                        [add("y", (1, 4, 4, 4))], {"activation": "NONE"}, "y"))
    g.outputs.append("y")
    model = Model("tflite", [g])
    model.verify()
    path.write_bytes(serialize(model))


@pytest.mark.parametrize("fmt", ["onnx", "tflite"])
def test_fuse_verify_names_the_pass_that_breaks_the_model(tmp_path, monkeypatch, fmt):
    if fmt == "onnx":
        src, broken = DIGITS_ONNX, "fuse-conv-batchnorm"
    else:
        src, broken = tmp_path / "conv_mul_add.tflite", "fuse-conv-mul"
        _conv_mul_add_tflite(src)
    _break_pass(monkeypatch, broken)
    out, report = tmp_path / f"out.{fmt}", tmp_path / "fuse.json"
    r = _invoke("fuse", src, "-o", out, "--report", report, "--verify", 2)
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: ")
    assert f"--verify: pass {broken!r} makes the model diverge" in lines[0]
    assert not out.exists() and not report.exists()
    # without --verify the broken pass writes its wrong model and exits 0: the net refuses it
    assert _invoke("fuse", src, "-o", out).exit_code == 0


def test_quantize_verify_names_the_first_diverging_layer(tmp_path, monkeypatch):
    from qconvert.quant import plan

    original = plan.quantize_layer
    calls = []

    def broken(w, b, s_in, axis, per_channel=True):
        w_q, s_w, b_q, widened = original(w, b, s_in, axis, per_channel)
        calls.append(1)
        if len(calls) == 2 and b_q is not None:  # the second layer's bias is off by far
            b_q = (b_q.astype(np.int64) + 40 * np.int64(2**16)).astype(np.int32)
            w_q = -w_q
        return w_q, s_w, b_q, widened

    monkeypatch.setattr(plan, "quantize_layer", broken)
    out = tmp_path / "q.tflite"
    # without bias correction: on random calibration data the outputs are nearly constant, and
    # the empirical correction would re-centre the broken layer's outputs (a mean error is
    # what it removes), leaving nothing for --verify to catch
    r = _invoke("quantize", TEST_MODELS / "pretrainedResnet.tflite", "--calibration-random", 8,
                "-o", out, "--verify", 8, "--no-bias-correction")
    assert r.exit_code == 1, r.output
    line = r.output.strip().splitlines()[-1]
    assert line.startswith("qconvert: error: ") and f"SQNR below {MIN_SQNR_DB:g} dB" in line
    assert "first diverging layer" in line and "Conv2D" in line
    assert not out.exists()


def test_verify_tolerance_is_the_documented_one():
    assert FLOAT_RTOL == 1e-4 and MIN_SQNR_DB == 10.0
    from qconvert.cli.verify import _Check

    ref = [np.array([1.0, -2.0, 0.5])]
    assert _Check("float").fails(ref, [ref[0] + 1.9e-4]) is None
    assert _Check("float").fails(ref, [ref[0] + 2.1e-4]) is not None
    assert _Check("float").fails(ref, [np.array([1.0, -2.0, np.nan])]) is not None
    assert _Check("exact").fails(ref, [ref[0] + 1]) is not None
    assert _Check("sqnr").fails(ref, [ref[0] * 1.05]) is None  # 26 dB
    assert _Check("sqnr").fails(ref, [ref[0] * 1.5]) is not None  # 6 dB


def test_fuse_verify_catches_a_dead_state_update_frame_by_frame(tmp_path, monkeypatch):
    """The issue's failure: `eliminate` removing ASSIGN_VARIABLE as dead code. The outputs of
    the first frame still agree; the state frames after it do not, and --verify says so."""
    import qconvert.passes.cleanup.eliminate as eliminate

    monkeypatch.setattr(eliminate, "is_pure",
                        lambda node: node.op not in ("CALL_ONCE", "VAR_HANDLE"))
    # the pass manager's own guard would name the pass first (see test_streaming); off here
    monkeypatch.setattr(passes.registry, "check_side_effects_kept", lambda graph, before, name: None)
    src = TEST_MODELS / "streaming_kws_float.tflite"
    out = tmp_path / "out.tflite"
    r = _invoke("fuse", src, "-o", out, "--verify", 40)
    assert r.exit_code == 1, r.output
    assert "--verify: pass 'eliminate' makes the model diverge" in r.output
    assert not out.exists()


def test_verify_refuses_a_model_the_executors_cannot_run(tmp_path):
    out = tmp_path / "out.tflite"
    r = _invoke("fuse", SAMPLE_MODELS / "custom_op.tflite", "-o", out, "--verify", 2)
    assert r.exit_code == 1 and not out.exists()
    line = r.output.strip().splitlines()[-1]
    assert "--verify: cannot run the input model" in line and "QcvTestCustom" in line


def test_fuse_verify_names_the_writer_when_every_pass_checks_out(tmp_path, monkeypatch):
    """The written bytes are what is checked: a writer that scales a conv's weights (every pass
    sound in memory) is caught and named."""
    import qconvert.formats.tflite_writer as writer

    original = writer.write_tflite

    def broken(model):
        conv = next(n for n in model.graph.nodes if n.op == "Conv2D")
        w = model.graph.tensors[conv.inputs[1]]
        kept = w.data
        w.data = kept * np.float32(1.5)
        try:
            return original(model)
        finally:
            w.data = kept

    src = tmp_path / "conv_mul_add.tflite"
    _conv_mul_add_tflite(src)
    monkeypatch.setattr(writer, "write_tflite", broken)
    out = tmp_path / "out.tflite"
    r = _invoke("fuse", src, "-o", out, "--verify", 2)
    assert r.exit_code == 1 and not out.exists(), r.output
    assert "every pass checks out in memory: the tflite writer broke it" in r.output
