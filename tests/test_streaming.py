"""Streaming models keep their state in resource variables (VAR_HANDLE / READ_VARIABLE /
ASSIGN_VARIABLE, a CALL_ONCE init subgraph; made by `tests/models/make_streaming.py`). Every
command must keep that state alive: checked frame by frame over 48 frames in LiteRT (reference
kernels) on every tensor the input and the written model share, since the detector's output
alone hides a broken state."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from conftest import TEST_MODELS, assert_streams_agree, litert_stream, stream_frames
from qconvert.cli import main
from qconvert.model_io import load_model

FRAMES = 48
MODELS = {"float": TEST_MODELS / "streaming_kws_float.tflite",
          "int8": TEST_MODELS / "streaming_kws_int8.tflite"}
STATE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"}


def _frames(kind):
    import numpy as np
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
