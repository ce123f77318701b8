"""`qconvert fuse`: what it prints, the JSON report, --passes, --list-passes, default output
name, determinism, and clean failures (one line, nothing written)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from helpers.oracles import TEST_MODELS, assert_close, run_litert, run_onnx
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model
from qconvert.passes.pipeline import FUSE_PIPELINE

ONNX = TEST_MODELS / "digits_cnn.onnx"
TFLITE = TEST_MODELS / "kws_ref_model_float32.tflite"


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_fuse_prints_counts_nodes_and_output_and_writes_report(tmp_copy, tmp_path):
    model = tmp_copy(ONNX)
    report = tmp_path / "fuse.json"
    result = _invoke(["fuse", model, "--report", report])
    assert result.exit_code == 0, result.output
    out = tmp_path / "digits_cnn_fused.onnx"
    assert out.exists()
    lines = result.output.splitlines()
    data = json.loads(report.read_text())
    assert list(data["passes"]) == list(dict.fromkeys(FUSE_PIPELINE))
    for name, count in data["passes"].items():
        assert any(line.split() == [name, str(count)] for line in lines)
    assert data["passes"]["fuse-conv-batchnorm"] == 4
    assert data["nodes_before"] == len(load_model(model).graph.nodes)
    assert data["nodes_after"] == len(load_model(out).graph.nodes)
    assert f"nodes: {data['nodes_before']} -> {data['nodes_after']}" in result.output
    assert str(out) in lines[-1]
    assert_close(run_onnx(model.read_bytes()), run_onnx(out.read_bytes()))


def test_fuse_is_deterministic_and_leaves_input_alone(tmp_copy, tmp_path):
    model = tmp_copy(TFLITE)
    original = model.read_bytes()
    outs = []
    for name in ("a.tflite", "b.tflite"):
        result = _invoke(["fuse", model, "-o", tmp_path / name])
        assert result.exit_code == 0, result.output
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1] and model.read_bytes() == original
    assert_close(run_litert(original), run_litert(outs[0]))


def test_passes_subset_runs_only_those(tmp_copy, tmp_path):
    model = tmp_copy(ONNX)
    report = tmp_path / "r.json"
    result = _invoke(["fuse", model, "-o", tmp_path / "o.onnx", "--passes",
                      "fuse-conv-batchnorm,eliminate", "--report", report])
    assert result.exit_code == 0, result.output
    assert list(json.loads(report.read_text())["passes"]) == ["fuse-conv-batchnorm", "eliminate"]


def test_list_passes_names_every_pass_with_a_line():
    result = _invoke(["fuse", "--list-passes"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == list(dict.fromkeys(FUSE_PIPELINE))
    assert all(len(line.split()) > 3 for line in lines)


@pytest.mark.parametrize("passes", ["fuse-everything", "", "eliminate,nope"])
def test_unknown_pass_fails_cleanly(tmp_copy, tmp_path, passes):
    model = tmp_copy(ONNX)
    before = sorted(os.listdir(tmp_path))
    result = _invoke(["fuse", model, "--passes", passes, "--report", tmp_path / "r.json"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "qconvert: error:" in result.output
    assert "--list-passes" in result.output and "Traceback" not in result.output
    assert sorted(os.listdir(tmp_path)) == before


def test_report_in_missing_directory_fails_before_work(tmp_copy, tmp_path):
    model = tmp_copy(ONNX)
    result = _invoke(["fuse", model, "--report", tmp_path / "no" / "r.json"])
    assert result.exit_code == 1 and "output directory does not exist" in result.output
    assert not (tmp_path / "digits_cnn_fused.onnx").exists()
