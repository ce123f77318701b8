"""Streaming models keep their state in resource variables (VAR_HANDLE / READ_VARIABLE /
ASSIGN_VARIABLE, a CALL_ONCE init subgraph; made by `tests/models/make_streaming.py`). Every
command must keep that state alive: checked frame by frame over 48 frames in LiteRT (reference
kernels) on every tensor the input and the written model share, since the detector's output
alone hides a broken state."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import (TEST_MODELS, assert_streams_agree, litert_stream, stream_frames,
                             tflm_stream)
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model

FRAMES = 48
MODELS = {"float": TEST_MODELS / "streaming_kws_float.tflite",
          "int8": TEST_MODELS / "streaming_kws_int8.tflite"}
STATE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"}


def _frames(kind):
    return stream_frames([1, 10], np.float32 if kind == "float" else np.int8, FRAMES)


def _ops(path):
    m = load_model(path)
    return [[n.op for n in g.nodes] for g in m.graphs]


def test_generated_models_hold_the_state_ops():
    for path in MODELS.values():
        graphs = _ops(path)
        assert len(graphs) == 2 and STATE_OPS <= set(graphs[0]) | set(graphs[1])
        assert "ASSIGN_VARIABLE" in graphs[1], "the init subgraph assigns the initial state"


@pytest.mark.parametrize("kind", ["float", "int8"])
@pytest.mark.parametrize("command", ["fuse", "convert"])
def test_state_survives_frame_by_frame(tmp_path, kind, command):
    src = MODELS[kind]
    out = tmp_path / f"out_{kind}.tflite"
    r = CliRunner().invoke(main, [command, str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert _ops(out) == _ops(src), "every node of every subgraph kept (side effects are live)"
    frames = _frames(kind)
    ref = litert_stream(src.read_bytes(), frames)
    got = litert_stream(out.read_bytes(), frames)
    # the state really moves: the variable read differs between frames
    assert (ref[5]["ReadVariableOp"] != ref[6]["ReadVariableOp"]).any()
    shared = assert_streams_agree(ref, got, rel=1e-5 if kind == "float" else 0.0, min_shared=8)
    assert shared >= 8
    if kind == "int8":  # and TFLite Micro, with its own resource variables, frame by frame
        for a, b in zip(tflm_stream(src.read_bytes(), frames), tflm_stream(out.read_bytes(),
                                                                           frames)):
            np.testing.assert_array_equal(a, b)


def _int8_stream_of_ours(path, frames):
    from qconvert.executor.int_executor import run_int8
    from qconvert.executor.streaming import run_frames
    from qconvert.ir import Graph

    model = load_model(path)

    def runner(g, feeds, observe, keep, carry):
        outs = list(g.outputs) + [k for k in keep if k not in g.outputs]
        return run_int8(Graph(g.name, g.tensors, g.nodes, g.inputs, outs), feeds, observe=observe,
                        carry=carry)

    names = [n for n in model.graph.tensors if model.graph.tensors[n].dtype == "int8"
             and model.graph.tensors[n].data is None and n not in model.graph.inputs]
    name = model.graph.inputs[0]
    return run_frames(model, [{name: f} for f in frames], runner, keep=names)


@pytest.mark.parametrize("io_type", ["int8", "float32"])
def test_quantized_streaming_model_keeps_int8_state_in_tflm(tmp_path, io_type):
    """`quantize` of the float streaming model: an int8 model with int8 state (the variable
    takes the read and assigned values' common scale; the init subgraph's constant is quantized
    with it) that TFLite Micro runs frame by frame bit for bit like our integer executor, and
    LiteRT's reference kernels agree with ours on every tensor of every frame."""
    import numpy as np

    out = tmp_path / "int8.tflite"
    r = CliRunner().invoke(main, ["quantize", str(MODELS["float"]), "--calibration-random", "64",
                                  "-o", str(out), "--io-type", io_type, "--verify", "48"])
    assert r.exit_code == 0, r.output
    model = load_model(out)
    assert [[n.op for n in g.nodes if n.op in STATE_OPS] for g in model.graphs] == [
        ["CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"],
        ["VAR_HANDLE", "ASSIGN_VARIABLE"]]
    read = next(n for n in model.graph.nodes if n.op == "READ_VARIABLE")
    assign = next(n for n in model.graph.nodes if n.op == "ASSIGN_VARIABLE")
    init = next(n for n in model.graphs[1].nodes if n.op == "ASSIGN_VARIABLE")
    q_read = model.graph.tensors[read.outputs[0]].quant
    for t in (model.graph.tensors[assign.inputs[1]], model.graphs[1].tensors[init.inputs[1]]):
        assert t.dtype == "int8" and t.quant.scale[0] == q_read.scale[0]
        assert t.quant.zero_point[0] == q_read.zero_point[0]
    frames = stream_frames([1, 10], np.float32 if io_type == "float32" else np.int8, FRAMES)
    tflm = tflm_stream(out.read_bytes(), frames)
    ours = _int8_stream_of_ours(out, frames)
    output = model.graph.outputs[0]
    for i, (a, b) in enumerate(zip(tflm, ours)):
        np.testing.assert_array_equal(a, b[output], err_msg=f"frame {i}")
    assert len({a.tobytes() for a in tflm}) > 10, "the output moves from frame to frame"
    # LiteRT agrees on the state path exactly, every frame (its reference FULLY_CONNECTED takes
    # the per-tensor multiplier from a float32 product of the scales where TFLite Micro takes a
    # double one, so past the first FC it may differ by a step: TFLite Micro is the oracle there)
    ref = litert_stream(out.read_bytes(), frames)
    state_path = ["Reshape", "ReadVariableOp", "strided_slice", "concat", "Relu;add;Conv2D"]
    assert_streams_agree([{k: r[k] for k in state_path} for r in ref], ours, min_shared=5)


@pytest.mark.parametrize("kind", ["float", "int8"])
def test_export_c_header_refuses_a_stateful_model_in_one_line(tmp_path, kind):
    out = tmp_path / "w.h"
    args = ["export-c-header", str(MODELS[kind]), "-o", str(out)]
    r = CliRunner().invoke(main, args + (["--calibration-random", "4"] if kind == "float" else []))
    assert r.exit_code == 1 and not out.exists()
    line = r.output.strip().splitlines()[-1]
    assert line.startswith("qconvert: error: ") and "a model with 2 subgraphs" in line
    assert "ASSIGN_VARIABLE" in line and "CALL_ONCE" in line


def test_pass_manager_refuses_a_pass_that_drops_a_side_effect(tmp_path, monkeypatch):
    """Every pass is held to it, not only `eliminate`: a pass that drops ASSIGN_VARIABLE is
    named, and nothing is written."""
    import qconvert.passes.cleanup.eliminate as eliminate

    monkeypatch.setattr(eliminate, "is_pure", lambda node: True)
    out = tmp_path / "out.tflite"
    r = CliRunner().invoke(main, ["fuse", str(MODELS["int8"]), "-o", str(out)])
    assert r.exit_code == 1 and not out.exists()
    line = r.output.strip().splitlines()[-1]
    assert "pass 'eliminate' removed node(s) with side effects" in line
    assert "ASSIGN_VARIABLE" in line and "CALL_ONCE" in line
