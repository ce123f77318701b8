"""Ops outside the schema table are carried through opaquely: `convert` writes them back
unchanged, `inspect` flags them unknown, and commands that need their meaning refuse, naming
every one at once."""

from __future__ import annotations

import json

import onnx
from click.testing import CliRunner

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model


def _run(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_onnx_opaque_nodes_written_back_unchanged(tmp_copy):
    src = tmp_copy(SAMPLE_MODELS / "opaque_ops.onnx")
    out = src.with_name("out.onnx")
    assert _run(["convert", src, "-o", out]).exit_code == 0
    before = {n.output[0]: n for n in onnx.load(str(src)).graph.node}
    after = {n.output[0]: n for n in onnx.load(str(out)).graph.node}
    for key in ("up", "y", "s"):  # Resize, Slice, Shape
        a, b = before[key], after[key]
        assert (a.op_type, a.domain, list(a.input), list(a.output)) == \
               (b.op_type, b.domain, list(b.input), list(b.output))
        assert [x.SerializeToString() for x in a.attribute] == \
               [x.SerializeToString() for x in b.attribute]
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)


def test_inspect_shows_unknown_ops(tmp_copy):
    src = tmp_copy(SAMPLE_MODELS / "opaque_ops.onnx")
    result = _run(["inspect", src])
    assert result.exit_code == 0
    assert "LRN (unknown)" in result.output
    assert "unknown ops (carried through unchanged): LRN, Size" in result.output
    report = json.loads(_run(["inspect", src, "--json"]).output)
    assert report["unknown_ops"] == ["LRN", "Size"]
    assert {r["op"]: r["known"] for r in report["layers"]}["Conv2D"] is True


def test_tflite_unknown_builtins_and_custom_ops_listed(tmp_copy):
    for name, unknown in (("unknown_builtin.tflite", ["COS", "FLOOR"]),
                          ("custom_op.tflite", ["QcvTestCustom"])):
        report = json.loads(_run(["inspect", tmp_copy(SAMPLE_MODELS / name), "--json"]).output)
        assert report["unknown_ops"] == unknown


def test_cross_format_convert_names_every_unknown_op(tmp_copy):
    src = tmp_copy(SAMPLE_MODELS / "opaque_ops.onnx")
    out = src.with_name("out.tflite")
    result = _run(["convert", src, "-o", out])
    assert result.exit_code == 1
    assert "LRN, Size" in result.stderr
    assert not out.exists()
    src = tmp_copy(SAMPLE_MODELS / "unknown_builtin.tflite")
    result = _run(["convert", src, "-o", src.with_name("x.onnx")])
    assert "COS, FLOOR" in result.stderr


def test_known_ops_get_normalized_attributes():
    model = load_model(TEST_MODELS / "digits_cnn.tflite")
    conv = next(n for n in model.graph.nodes if n.op == "Conv2D")
    assert conv.attrs["layout"] == "NHWC" and conv.attrs["pads"] == [1, 1, 1, 1]
    assert conv.attrs["activation"] == "RELU" and conv.attrs["group"] == 1
    dw = next(n for n in model.graph.nodes if n.op == "DepthwiseConv2D")
    assert dw.attrs["activation"] == "RELU6"
    model = load_model(TEST_MODELS / "digits_cnn.onnx")
    convs = [n for n in model.graph.nodes if n.op == "Conv2D"]
    assert [c.attrs["group"] for c in convs] == [1, 8, 1, 1]
    assert all(c.attrs["layout"] == "NCHW" for c in convs)
