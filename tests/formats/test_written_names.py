"""Every model a command writes has unique names (`helpers.written_names`): random small ONNX
graphs with shared constants and hostile names (names equal to the ones qconvert derives:
`w_quantized`, `w_DequantizeLinear`, `bn/mul`, `x_int8`...) go through fuse, convert (ONNX and
TFLite) and quantize (QDQ ONNX and int8 TFLite); each written ONNX model has unique node names,
each value defined once, passes `onnx.checker` (full_check) and runs in onnxruntime with its
optimizations off (fuse and convert give the source's outputs there); each TFLite model has
unique tensor names and loads in LiteRT. The checks themselves fail on a planted duplicate, and
`written_node_names` keeps source names, suffixes made-up ones and is deterministic.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

from helpers.written_names import onnx_name_problems, tflite_name_problems
from qconvert.cli.app import main
from qconvert.formats.node_names import written_node_names
from qconvert.ir import Node

EXAMPLES = int(os.environ.get("QCONVERT_SWEEP_EXAMPLES", "25"))  # ~0.15 s each
C = 4  # channels of every activation

# names qconvert derives from a tensor or node name (QDQ writer, fusion, int8 edges, pads)
SUFFIXES = ("", "_quantized", "_dequantized", "_scale", "_zero_point", "_float", "_bias",
            "_DequantizeLinear", "_QuantizeLinear", "/mul", "/add", "_1", "_int8", "_fused",
            "/quantize", "/dequantize", "_shape", "_raw")
BASES = ("x", "w", "b", "k", "y", "t", "bn")
NAMES = st.sampled_from([b + s for b in BASES for s in SUFFIXES])

# op kind -> constants it reads (shape of each)
OPS = {
    "conv": {"w": (C, C, 1, 1), "b": (C,)},
    "conv_nobias": {"w": (C, C, 1, 1)},
    "add": {"k": (1, C, 1, 1)},
    "mul": {"k": (1, C, 1, 1)},
    "relu": {},
    "bn": {"g": (C,), "be": (C,), "mean": (C,), "var": (C,)},
    "add_prev": {},
    "concat_conv": {"w8": (C, 2 * C, 1, 1)},
}


@st.composite
def graphs(draw):
    """(ONNX model bytes, calibration array): a chain of 2..6 ops over input "x"
    (1, C, 4, 4) whose constants come from one pool (so readers share them), every tensor
    and node named from `NAMES` (nodes may be unnamed), the last value and up to two inner ones
    graph outputs."""
    kinds = draw(st.lists(st.sampled_from(sorted(OPS)), min_size=2, max_size=6))
    pool_keys = sorted({k for kind in kinds for k in OPS[kind]})
    n_values = len(kinds) + (sum(kind == "concat_conv" for kind in kinds))
    names = draw(st.lists(NAMES.filter(lambda n: n != "x"), min_size=len(pool_keys) + n_values,
                          max_size=len(pool_keys) + n_values, unique=True))
    const = dict(zip(pool_keys, names[:len(pool_keys)]))
    values = iter(names[len(pool_keys):])
    node_names = draw(st.lists(NAMES | st.just(""), min_size=2 * len(kinds),
                               max_size=2 * len(kinds)))
    taken = set()
    node_names = [n if n and n not in taken and not taken.add(n) else "" for n in node_names]
    node_names = iter(node_names)
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    inits = []
    for key in pool_keys:
        shape = dict(kv for kind in kinds for kv in OPS[kind].items())[key]
        data = rng.standard_normal(shape).astype(np.float32)
        if key == "var":
            data = np.abs(data) + 0.5
        inits.append(numpy_helper.from_array(data, const[key]))
    nodes, cur, seen = [], "x", ["x"]

    def node(op, inputs, **attrs):
        out = next(values)
        nodes.append(helper.make_node(op, inputs, [out], name=next(node_names), **attrs))
        return out

    for kind in kinds:
        if kind in ("conv", "conv_nobias"):
            cur = node("Conv", [cur, const["w"]] + ([const["b"]] if kind == "conv" else []))
        elif kind in ("add", "mul"):
            cur = node(kind.capitalize(), [cur, const["k"]])
        elif kind == "relu":
            cur = node("Relu", [cur])
        elif kind == "bn":
            cur = node("BatchNormalization", [cur] + [const[k] for k in ("g", "be", "mean", "var")])
        elif kind == "add_prev":
            cur = node("Add", [cur, draw(st.sampled_from(seen))])
        else:
            cat = node("Concat", [cur, draw(st.sampled_from(seen))], axis=1)
            cur = node("Conv", [cat, const["w8"]])
        seen.append(cur)
    # inner activations that are graph outputs too (the QDQ writer renames their producers')
    outs = [cur] + draw(st.lists(st.sampled_from(seen[1:-1]), max_size=2, unique=True)
                        if len(seen) > 2 else st.just([]))
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 4, 4])
    y_infos = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, C, 4, 4]) for o in outs]
    model = helper.make_model(helper.make_graph(nodes, "g", [x_info], y_infos, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    calib = rng.standard_normal((4, C, 4, 4)).astype(np.float32)
    return model.SerializeToString(), calib


def _ort(model_bytes: bytes, x: np.ndarray) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})


COMMANDS = [  # (command, output extension, extra arguments)
    ("fuse", "onnx", []), ("convert", "onnx", []), ("convert", "tflite", []),
    ("quantize", "onnx", ["calib"]), ("quantize", "tflite", ["calib"]),
]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=graphs())
def test_every_written_model_has_unique_names(case):
    model_bytes, calib = case
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = d / "m.onnx"
        src.write_bytes(model_bytes)
        np.save(d / "calib.npy", calib)
        for command, ext, extra in COMMANDS:
            out = d / f"{command}.{ext}"
            args = [command, str(src), "-o", str(out)]
            if extra:
                args += ["--calibration", str(d / "calib.npy")]
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 0, (command, ext, result.output)
            written = out.read_bytes()
            if ext == "onnx":
                assert onnx_name_problems(written) == [], (command, ext)
                if command != "quantize":  # float rewrites: the source's outputs
                    for want, got in zip(_ort(model_bytes, calib[:1]), _ort(written, calib[:1])):
                        np.testing.assert_allclose(got, want, rtol=1e-4,
                                                   atol=1e-4 * np.abs(want).max())
            else:
                assert tflite_name_problems(written) == [], (command, ext)


# -- the checks fail when they should -------------------------------------------------------
def _qdq_bytes(tmp_path) -> bytes:
    """A small QDQ model qconvert wrote (conv with shared weights)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 4, 4])
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((C, C, 1, 1))
                                .astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="c"),
             helper.make_node("Conv", ["c", "w"], ["y"], name="c2")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 13)])
    src, out = tmp_path / "m.onnx", tmp_path / "q.onnx"
    src.write_bytes(model.SerializeToString())
    np.save(tmp_path / "c.npy", np.random.default_rng(2).standard_normal((4, C, 4, 4))
            .astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "c.npy"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def test_the_onnx_check_finds_a_planted_duplicate_node_name(tmp_path):
    written = _qdq_bytes(tmp_path)
    assert onnx_name_problems(written) == []
    model = onnx.load_from_string(written)
    dq = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
    dq[1].name = dq[0].name
    problems = onnx_name_problems(model.SerializeToString())
    assert any(p.startswith("node names used twice") for p in problems), problems
    assert any(p.startswith("onnxruntime") for p in problems), problems  # the runtime refuses


def test_the_onnx_check_finds_a_value_defined_twice(tmp_path):
    model = onnx.load_from_string(_qdq_bytes(tmp_path))
    quantize = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    quantize[1].output[0] = quantize[0].output[0]
    problems = onnx_name_problems(model.SerializeToString(), run=False)
    assert any(p.startswith("values defined twice") for p in problems), problems
    init = model.graph.initializer[0].name  # an initializer a node also writes
    quantize[1].output[0] = init
    problems = onnx_name_problems(model.SerializeToString(), run=False)
    assert any(p.startswith("values defined twice") and init in p for p in problems), problems


def test_the_tflite_check_finds_a_planted_duplicate_tensor_name(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    nodes = [helper.make_node("Relu", ["x"], ["aa"], name="r1"),
             helper.make_node("Relu", ["aa"], ["bb"], name="r2")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C])],
        [helper.make_tensor_value_info("bb", TensorProto.FLOAT, [1, C])])
    src.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                    .SerializeToString())
    assert CliRunner().invoke(main, ["convert", str(src), "-o", str(out)]).exit_code == 0
    written = out.read_bytes()
    assert tflite_name_problems(written) == []
    # flatbuffers strings: little-endian length, bytes, NUL; "bb" -> "aa" in place
    planted = written.replace(b"\x02\x00\x00\x00bb\x00", b"\x02\x00\x00\x00aa\x00")
    assert planted != written
    problems = tflite_name_problems(planted, load=False)
    assert problems and "'aa'" in problems[0], problems


# -- the naming rule -----------------------------------------------------------------------
def _n(name, source=None):
    return Node("Relu", ["a"], ["b"], {}, name, origin={} if source is None else {"name": source})


def test_written_names_keep_the_source_and_suffix_made_up_names():
    nodes = [_n("w_DequantizeLinear"), _n("IR", "w_DequantizeLinear"), _n("w_DequantizeLinear"),
             _n("w_DequantizeLinear_1", "w_DequantizeLinear_1"), _n("Relu_4", ""), _n(""),
             _n("copy", "w_DequantizeLinear")]
    names = written_node_names(nodes)
    assert names[4] == names[5] == ""  # unnamed stays unnamed
    named = [n for n in names if n]
    assert len(named) == len(set(named)) == 5
    assert names == ["w_DequantizeLinear_2", "w_DequantizeLinear", "w_DequantizeLinear_3",
                     "w_DequantizeLinear_1", "", "", "w_DequantizeLinear_4"]
    assert written_node_names(nodes) == names  # deterministic


@pytest.mark.parametrize("count", [2, 50])
def test_many_readers_of_one_constant_get_distinct_names(count):
    names = written_node_names([_n("k_DequantizeLinear") for _ in range(count)])
    assert len(set(names)) == count and names[0] == "k_DequantizeLinear"


# -- TFLite: a source that repeats a tensor name ---------------------------------------------
def _repeating_tflite(path) -> None:
    """FULLY_CONNECTED whose input and output are both named "in" in the file (TFLite allows
    it; the reader keeps the spelling in `extra["tflite_name"]` to write it back)."""
    from qconvert.formats.model_io import serialize
    from qconvert.ir import Graph, Model, Tensor

    rng = np.random.default_rng(3)
    g = Graph("main", inputs=["in_1"], outputs=["in"])
    g.add_tensor(Tensor("in", (1, 8), "float32"))
    g.add_tensor(Tensor("in_1", (1, 8), "float32", extra={"tflite_name": "in"}))
    g.add_tensor(Tensor("w", (8, 8), "float32", rng.standard_normal((8, 8)).astype(np.float32)))
    g.add_tensor(Tensor("b", (8,), "float32", rng.standard_normal(8).astype(np.float32)))
    g.nodes = [Node("FullyConnected", ["in_1", "w", "b"], ["in"],
                    {"activation": "NONE", "keep_num_dims": False}, "fc")]
    path.write_bytes(serialize(Model("tflite", [g])))


def _tensor_names(data: bytes) -> list:
    from tflite.Model import Model

    sub = Model.GetRootAsModel(data, 0).Subgraphs(0)
    return [sub.Tensors(i).Name().decode() for i in range(sub.TensorsLength())]


@pytest.mark.parametrize("io_type", ["int8", "float32"])
def test_quantize_adds_no_repeat_of_a_repeated_source_name(tmp_path, io_type):
    src, out = tmp_path / "m.tflite", tmp_path / "q.tflite"
    _repeating_tflite(src)
    assert _tensor_names(src.read_bytes()).count("in") == 2
    np.save(tmp_path / "c.npy", np.random.default_rng(4).standard_normal((8, 1, 8))
            .astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "c.npy"), "--io-type", io_type,
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    names = _tensor_names(out.read_bytes())
    assert names.count("in") <= 2, names  # the source's two, no new tensor spelled like them
    assert len(names) - len(set(names)) <= 1, names
    problems = tflite_name_problems(out.read_bytes())
    assert all("LiteRT" not in p for p in problems), problems
