"""16x8 quantization (`--activations int16`, `--int16-layers auto|N|NAMES`): every model written
runs in TFLite Micro (the validity oracle), and its output SQNR against the float model
(onnxruntime or LiteRT), measured on TFLite Micro's outputs, beats int8's; qconvert's integer
executor (which makes the report's figures) gives TFLite Micro's outputs bit for bit on them;
the layers chosen are the ones asked for; the reported RAM and flash are the written model's;
refusals are one line with nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.int16_models import assert_same16, feeds_for, op_zoo3
from helpers.oracles import TEST_MODELS, OnnxNet
from qconvert.cli.app import main
from qconvert.formats.model_io import load_model

DIGITS = TEST_MODELS / "digits_cnn.tflite"
DIGITS_CALIB = f"{TEST_MODELS / 'digits_data_nhwc.npz'}:calib"


def _invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _quantize(tmp_path, model, calib, out_name, *extra):
    out = tmp_path / out_name
    report = tmp_path / (out_name + ".json")
    result = _invoke(["quantize", model, "--calibration", calib, "-o", out, "--report", report,
                      *extra])
    assert result.exit_code == 0, result.output
    return out, json.loads(report.read_text()), result.output


def _round_away(x):
    return np.trunc(x + np.copysign(0.5, x))


def _tflm(blob: bytes, xs: np.ndarray) -> np.ndarray:
    """TFLite Micro's first output, dequantized, one sample at a time."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(blob)
    d, od = it.get_input_details(0), it.get_output_details(0)
    outs = []
    for x in xs:
        dt = d["dtype"]
        if np.issubdtype(dt, np.integer):
            q = d["quantization_parameters"]
            info = np.iinfo(dt)
            x = np.clip(_round_away(x / q["scales"][0]) + q["zero_points"][0], info.min,
                        info.max)
        it.set_input(x[None].astype(dt), 0)
        it.invoke()
        y = np.array(it.get_output(0)).astype(np.float64)
        if np.issubdtype(od["dtype"], np.integer):
            q = od["quantization_parameters"]
            y = (y - q["zero_points"][0]) * q["scales"][0]
        outs.append(y[0])
        it.reset()
    return np.array(outs)


def _litert_float(path, xs) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    outs = []
    for x in xs:
        it.set_tensor(i, x[None].astype(np.float32))
        it.invoke()
        outs.append(it.get_tensor(o)[0].copy())
    return np.array(outs)


def _sqnr(ref, got) -> float:
    return 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2))


def _activations(graph):
    return {n: t for n, t in graph.tensors.items() if t.data is None and t.quant is not None}


def _op_zoo(hardswish: bool = False) -> bytes:
    """Every op with a 16x8 kernel that an ONNX model converts to (and, with `hardswish`, one
    without)."""
    n = OnnxNet(3)
    x = n.input("x", [1, 3, 8, 8])
    a = n.node("Relu", [n.conv(x, 3, 8, "c1", pads=[1, 1, 1, 1])], "r1")
    if hardswish:
        a = n.node("HardSwish", [a], "hs")
    p = n.node("Pad", [a, n.const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], "pad")
    m = n.node("MaxPool", [p], "mp", kernel_shape=[2, 2], strides=[2, 2])
    d = n.conv(m, 8, 8, "dw", group=8, pads=[1, 1, 1, 1])
    s = n.node("Sigmoid", [n.conv(d, 8, 8, "c2", k=1)], "sig")
    t = n.node("Tanh", [n.conv(d, 8, 8, "c3", k=1)], "tanh")
    add = n.node("Add", [n.node("Mul", [s, t], "mul"), d], "add")
    sub = n.node("Sub", [add, n.conv(add, 8, 8, "c4", k=1)], "sub")
    leaky = n.node("LeakyRelu", [n.conv(add, 8, 4, "c5", k=1)], "lr", alpha=0.1)
    cat = n.node("Concat", [sub, leaky], "cat", axis=1)
    ap = n.node("AveragePool", [cat], "ap", kernel_shape=[2, 2], strides=[2, 2])
    mean = n.node("ReduceMean", [ap], "mean", axes=[2, 3], keepdims=0)
    g = n.node("Gemm", [mean, n.rand("fc_w", 10, 12), n.rand("fc_b", 10)], "fc", transB=1)
    return n.build([n.node("Softmax", [g], "prob", axis=1)], opset=14 if hardswish else 13)


def _op_zoo2() -> bytes:
    """The other ops with a 16x8 kernel: SPLIT, ADD + RELU6, STRIDED_SLICE, TRANSPOSE_CONV,
    TRANSPOSE, BATCH_MATMUL, RELU (ONNX Split, Clip, Slice, ConvTranspose, MatMul...)."""
    n = OnnxNet(4)
    x = n.input("x", [1, 4, 8, 8])
    n.node("Split", [n.conv(x, 4, 8, "c1", pads=[1, 1, 1, 1]),
                     n.const("sp", np.array([4, 4], np.int64))], "s0", axis=1)
    n.nodes[-1].output[:] = ["s0", "s1"]
    clip = n.node("Clip", [n.node("Add", ["s0", "s1"], "sum"), n.const("z", np.float32(0)),
                           n.const("six", np.float32(6))], "clip")
    sl = n.node("Slice", [clip, n.const("st", np.array([1], np.int64)),
                          n.const("en", np.array([7], np.int64)),
                          n.const("ax", np.array([2], np.int64))], "slice")
    ct = n.node("ConvTranspose", [n.node("Sub", ["s0", "s1"], "diff"), n.rand("ct_w", 4, 4, 2, 2),
                                  n.rand("ct_b", 4)], "ct", kernel_shape=[2, 2], strides=[2, 2])
    ctp = n.node("MaxPool", [ct], "ctp", kernel_shape=[2, 2], strides=[2, 2])
    r = n.node("Reshape", [sl, n.const("shp", np.array([1, 4, 48], np.int64))], "r")
    r2 = n.node("Reshape", [ctp, n.const("shp2", np.array([1, 4, 64], np.int64))], "r2")
    t = n.node("Transpose", [r2], "t", perm=[0, 2, 1])
    ts = n.node("Slice", [t, n.const("st2", np.array([0], np.int64)),
                          n.const("en2", np.array([48], np.int64)),
                          n.const("ax2", np.array([1], np.int64))], "tsl")
    return n.build([n.node("Relu", [n.node("MatMul", [r, ts], "mm")], "y")])


def test_more_16x8_ops_run_in_tflm(tmp_path):
    import onnxruntime as ort

    path = tmp_path / "zoo2.onnx"
    path.write_bytes(_op_zoo2())
    rng = np.random.default_rng(2)
    np.save(tmp_path / "calib.npy", rng.standard_normal((16, 4, 8, 8)).astype(np.float32))
    xs = rng.standard_normal((8, 4, 8, 8)).astype(np.float32)
    sess = ort.InferenceSession(str(path))
    ref = np.concatenate([sess.run(None, {"x": x[None]})[0] for x in xs])
    db = {}
    for key, extra in (("int8", ()), ("int16", ("--activations", "int16"))):
        out, _, _ = _quantize(tmp_path, path, tmp_path / "calib.npy", f"{key}.tflite", *extra)
        got = _tflm(out.read_bytes(), xs.transpose(0, 2, 3, 1))
        db[key] = _sqnr(ref, got.reshape(ref.shape))
    graph = load_model(out).graph
    ops = {n.op for n in graph.nodes}
    assert {"SplitEqual", "StridedSlice", "TransposeConv", "Transpose", "BatchMatMul"} <= ops
    assert all(t.dtype == "int16" for t in _activations(graph).values())
    assert db["int16"] > db["int8"] + 5, db  # measured 52.0 vs 44.2 dB


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """(onnx path, calibration path, held-out NCHW samples, onnxruntime's outputs on them)."""
    import onnxruntime as ort

    root = tmp_path_factory.mktemp("zoo")
    path = root / "zoo.onnx"
    path.write_bytes(_op_zoo())
    rng = np.random.default_rng(0)
    np.save(root / "calib.npy", rng.standard_normal((32, 3, 8, 8)).astype(np.float32))
    xs = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), opts)
    ref = np.concatenate([sess.run(None, {"x": x[None]})[0] for x in xs])
    return path, root / "calib.npy", xs, ref


def test_whole_model_16x8_runs_in_tflm_with_int16_everywhere(tmp_path, zoo):
    path, calib, xs, ref = zoo
    out16, report, text = _quantize(tmp_path, path, calib, "zoo16.tflite", "--activations",
                                    "int16")
    out8, _, _ = _quantize(tmp_path, path, calib, "zoo8.tflite")
    graph = load_model(out16).graph
    acts = _activations(graph)
    assert acts and all(t.dtype == "int16" for t in acts.values())
    assert all(int(np.max(np.abs(t.quant.zero_point))) == 0 for t in acts.values())
    assert not any(n.op == "Quantize" for n in graph.nodes)
    for node in graph.nodes:
        if node.op in ("Conv2D", "DepthwiseConv2D", "FullyConnected"):
            assert graph.tensors[node.inputs[1]].dtype == "int8"
            assert graph.tensors[node.inputs[2]].dtype == "int64"
        if node.op in ("Add", "Sub"):
            assert node.attrs["pot_scale_int16"] is False  # general scales, not powers of two
        if node.op in ("Softmax", "Sigmoid", "Tanh"):
            q = graph.tensors[node.outputs[0]].quant
            assert float(q.scale[0]) == 1 / 32768 and int(q.zero_point[0]) == 0
    xs_nhwc = xs.transpose(0, 2, 3, 1)
    db16 = _sqnr(ref, _tflm(out16.read_bytes(), xs_nhwc))
    db8 = _sqnr(ref, _tflm(out8.read_bytes(), xs_nhwc))
    assert db16 > db8 + 10 and db16 > 45, (db8, db16)
    assert report["int16"]["mode"] == "int16"
    assert all(row["bits"] == 16 for row in report["layers"])
    mem = report["int16"]["memory"]
    assert mem["chosen"]["arena_bytes"] == 2 * mem["int8"]["arena_bytes"]  # no int8 left
    assert "RAM (activation arena)" in text


def test_ops_without_16x8_kernel_stay_int8_between_quantize_ops(tmp_path):
    path = tmp_path / "hs.onnx"
    path.write_bytes(_op_zoo(hardswish=True))
    rng = np.random.default_rng(1)
    np.save(tmp_path / "calib.npy", rng.standard_normal((16, 3, 8, 8)).astype(np.float32))
    out, report, _ = _quantize(tmp_path, path, tmp_path / "calib.npy", "hs16.tflite",
                               "--activations", "int16")
    graph = load_model(out).graph
    hs = next(n for n in graph.nodes if n.op == "HardSwish")
    assert graph.tensors[hs.inputs[0]].dtype == "int8"
    assert graph.tensors[hs.outputs[0]].dtype == "int8"
    borders = [n for n in graph.nodes if n.op == "Quantize"]
    assert len(borders) == 2 == report["int16"]["requantize_ops"]
    assert {graph.tensors[b.inputs[0]].dtype for b in borders} == {"int8", "int16"}
    import onnxruntime as ort

    xs = rng.standard_normal((8, 3, 8, 8)).astype(np.float32)
    sess = ort.InferenceSession(str(path))
    ref = np.concatenate([sess.run(None, {"x": x[None]})[0] for x in xs])
    assert _sqnr(ref, _tflm(out.read_bytes(), xs.transpose(0, 2, 3, 1))) > 40


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """int8, full 16x8 and auto-mixed digits models, their reports, and TFLite Micro's output
    SQNR against the float model (LiteRT) on 200 held-out test samples."""
    root = tmp_path_factory.mktemp("digits")
    xs = np.load(TEST_MODELS / "digits_data_nhwc.npz")["test"][:200]
    ref = _litert_float(DIGITS, xs)
    runs = {}
    for key, extra in (("int8", ()), ("int16", ("--activations", "int16")),
                       ("auto", ("--int16-layers", "auto"))):
        out, report, _ = _quantize(root, DIGITS, DIGITS_CALIB, f"{key}.tflite", *extra)
        runs[key] = (out, report, _sqnr(ref, _tflm(out.read_bytes(), xs)))
    return runs


def test_digits_16x8_beats_int8_in_tflm(digits):
    db8, db16, dbauto = (digits[k][2] for k in ("int8", "int16", "auto"))
    assert db16 > db8 + 5, (db8, db16)
    assert dbauto > db8 + 1, (db8, dbauto)
    mem = digits["int16"][1]["int16"]["memory"]
    assert mem["chosen"]["arena_bytes"] > mem["int8"]["arena_bytes"]
    # int64 instead of int32 biases: 4 more bytes per output channel of each layer
    graph = load_model(digits["int16"][0]).graph
    channels = sum(graph.tensors[n.inputs[2]].shape[0] for n in graph.nodes
                   if n.op in ("Conv2D", "DepthwiseConv2D", "FullyConnected"))
    assert mem["chosen"]["bias_bytes"] - mem["int8"]["bias_bytes"] == 4 * channels


def test_auto_keeps_what_its_rule_says(digits):
    out, report, _ = digits["auto"]
    facts = report["int16"]
    rows = facts["sensitivity"]
    assert rows and facts["layers"] == [r["layer"] for r in rows if r["chosen"]]
    from qconvert.quant.int16_choice import AUTO_DB_PER_KIB, AUTO_MIN_DB

    for r in rows:  # kept exactly when its measured step gain pays for its bytes
        if "step_gain_db" not in r:
            assert not r["chosen"] and r["estimated_gain_db"] <= 0
            continue
        need = max(AUTO_MIN_DB, AUTO_DB_PER_KIB * r["step_extra_bytes"] / 1024)
        assert r["chosen"] == (r["step_gain_db"] >= need), r
    est = facts["estimated_output_sqnr_db"]
    assert est["chosen_db"] > est["int8_db"]
    graph = load_model(out).graph
    wide = {n for n, t in _activations(graph).items() if t.dtype == "int16"}
    assert wide and any(n.op == "Quantize" for n in graph.nodes)
    for name in graph.inputs + graph.outputs:  # a mixed model keeps int8 I/O
        assert graph.tensors[name].dtype == "int8"


def test_int16_layers_names_and_count_pick_what_they_say(tmp_path, digits):
    rows = digits["auto"][1]["int16"]["sensitivity"]
    ranked = sorted(rows, key=lambda r: -r["estimated_gain_db"])
    out, report, _ = _quantize(tmp_path, DIGITS, DIGITS_CALIB, "n2.tflite", "--int16-layers", 2)
    assert set(report["int16"]["layers"]) == {r["layer"] for r in ranked[:2]}
    name = rows[0]["layer"]
    out, report, _ = _quantize(tmp_path, DIGITS, DIGITS_CALIB, "named.tflite",
                               "--int16-layers", name)
    assert report["int16"]["layers"] == [name]
    graph = load_model(out).graph
    writer = next(n for n in graph.nodes if n.name == name)
    assert graph.tensors[writer.outputs[0]].dtype == "int16"
    sixteen = [row["layer"] for row in report["layers"] if row["bits"] == 16]
    assert name in sixteen
    others = [n for n in graph.nodes if n.op == "Conv2D" and n is not writer]
    assert any(graph.tensors[n.outputs[0]].dtype == "int8" for n in others)
    down = [n for n in graph.nodes if n.op == "Quantize"  # the readers' int16 -> int8 border
            and graph.tensors[n.inputs[0]].dtype == "int16"]
    assert down and all(graph.tensors[n.outputs[0]].dtype == "int8" for n in down)
    xs = np.load(TEST_MODELS / "digits_data_nhwc.npz")["test"][:64]
    got = _tflm(out.read_bytes(), xs)
    assert _sqnr(_litert_float(DIGITS, xs), got) > 25


def test_io_type_float32_puts_int16_behind_quantize_and_dequantize(tmp_path):
    out, _, _ = _quantize(tmp_path, DIGITS, DIGITS_CALIB, "f.tflite", "--activations", "int16",
                          "--io-type", "float32")
    graph = load_model(out).graph
    first, last = graph.nodes[0], graph.nodes[-1]
    assert (first.op, last.op) == ("Quantize", "Dequantize")
    assert graph.tensors[first.outputs[0]].dtype == "int16"
    assert graph.tensors[last.inputs[0]].dtype == "int16"
    xs = np.load(TEST_MODELS / "digits_data_nhwc.npz")["test"][:32]
    assert _sqnr(_litert_float(DIGITS, xs), _tflm(out.read_bytes(), xs)) > 35


def test_default_quantize_is_the_int8_model(tmp_path):
    a = _quantize(tmp_path, DIGITS, DIGITS_CALIB, "a.tflite")[0].read_bytes()
    b = _quantize(tmp_path, DIGITS, DIGITS_CALIB, "b.tflite", "--activations", "int8")[0]
    assert a == b.read_bytes()
    graph = load_model(tmp_path / "a.tflite").graph
    assert not any(t.dtype in ("int16", "int64") for t in graph.tensors.values())


@pytest.mark.parametrize("args,message", [
    (["--int16-layers", "no_such_layer"], "no layer named 'no_such_layer'"),
    (["--int16-layers", "0"], "N >= 1"),
    (["--activations", "int16", "--int16-layers", "auto"], "not both"),
])
def test_refusals_are_one_line_and_write_nothing(tmp_path, args, message):
    out = tmp_path / "x.tflite"
    result = _invoke(["quantize", DIGITS, "--calibration", DIGITS_CALIB, "-o", out, *args])
    assert result.exit_code == 1
    assert message in result.output and result.output.count("\n") == 1, result.output
    assert not out.exists()


def test_refuses_a_layer_without_16x8_kernel_qdq_output_and_state(tmp_path):
    path = tmp_path / "hs.onnx"
    path.write_bytes(_op_zoo(hardswish=True))
    np.save(tmp_path / "c.npy", np.zeros((4, 3, 8, 8), np.float32))
    cases = [
        ([path, "-o", tmp_path / "o.tflite", "--int16-layers", "hs"], "no 16x8 kernel"),
        ([path, "-o", tmp_path / "o.onnx", "--activations", "int16"], "TFLite only"),
        ([TEST_MODELS / "streaming_kws_float.tflite", "-o", tmp_path / "s.tflite",
          "--activations", "int16"], "resource variables"),
    ]
    for args, message in cases:
        calib = ["--calibration-random", 4] if "streaming" in str(args[0]) else [
            "--calibration", tmp_path / "c.npy"]
        result = _invoke(["quantize", *args, *calib])
        lines = [line for line in result.output.splitlines() if "warning" not in line]
        assert result.exit_code == 1 and message in result.output, result.output
        assert len(lines) == 1, result.output
        assert not args[2].exists()


def test_html_report_shows_the_16x8_choice(tmp_path):
    import xml.etree.ElementTree as ET

    page = tmp_path / "r.html"
    out, report, _ = _quantize(tmp_path, DIGITS, DIGITS_CALIB, "h.tflite", "--int16-layers",
                               "auto", "--report-html", page)
    root = ET.fromstring(page.read_text())
    svg = "{http://www.w3.org/2000/svg}"
    gains = [e for e in root.iter(f"{svg}rect") if "gain" in e.get("class", "")]
    rows = report["int16"]["sensitivity"]
    assert [g.get("data-layer") for g in gains] == [r["layer"] for r in rows]
    assert [("kept" in g.get("class")) for g in gains] == [r["chosen"] for r in rows]
    mem = [e for e in root.iter(f"{svg}rect") if "mem" in e.get("class", "")]
    assert len(mem) == 4
    text = page.read_text()
    for layer in report["int16"]["layers"]:
        assert layer in text
    assert f"chosen {report['int16']['memory']['chosen']['arena_bytes']} bytes" in text


def test_digits_onnx_to_16x8_tflite_beats_int8_in_tflm(tmp_path):
    import onnxruntime as ort

    src = TEST_MODELS / "digits_cnn.onnx"
    calib = f"{TEST_MODELS / 'digits_data_nchw.npz'}:calib"
    xs = np.load(TEST_MODELS / "digits_data_nchw.npz")["test"][:100].astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(src), opts)
    name = sess.get_inputs()[0].name
    ref = np.concatenate([sess.run(None, {name: x[None]})[0] for x in xs])
    db = {}
    for key, extra in (("int8", ()), ("int16", ("--activations", "int16"))):
        out, _, _ = _quantize(tmp_path, src, calib, f"{key}.tflite", *extra)
        db[key] = _sqnr(ref, _tflm(out.read_bytes(), xs.transpose(0, 2, 3, 1)))
    assert db["int16"] > db["int8"] + 3, db  # measured 39.1 vs 34.5 dB: int8 weights remain


@pytest.mark.parametrize("name", ["keras_mobilenet_v2", "keras_resnet8"])
def test_footprint_arena_is_export_cs_greedy_plan(name):
    """The report's arena estimate equals export-c's planner (an independent implementation of
    the same greedy-by-size placement) when that one is given no in-place kernels."""
    from qconvert.c_export.model.memory_plan import PlanStep, plan_memory
    from qconvert.quant.footprint import arena_bytes, arena_steps

    graph = load_model(TEST_MODELS / "corpus" / f"{name}.tflite").graph
    rng = np.random.default_rng(5)
    sizes = {n: int(rng.integers(1, 4)) * max(1, t.nbytes() // 4)
             for n, t in graph.tensors.items() if t.data is None}
    steps = arena_steps(graph, sizes)
    ours = arena_bytes(sizes, steps, graph.inputs, graph.outputs)
    plan = plan_memory(sizes, [PlanStep(i, o, alias=a) for i, o, a in steps],
                       [i for i in graph.inputs if i in sizes],
                       [o for o in graph.outputs if o in sizes])
    assert ours == plan.arena_size > 0


def test_reported_ram_and_flash_are_those_of_the_written_model(digits):
    """The report prices the plan before writing; the model written has those bytes (arena
    of its tensors' own types, flash = weights + biases + other constants)."""
    from qconvert.quant.footprint import arena_bytes, arena_steps

    for key in ("int16", "auto"):
        out, report, _ = digits[key]
        graph = load_model(out).graph
        sizes = {n: t.nbytes() for n, t in graph.tensors.items() if t.data is None}
        mem = report["int16"]["memory"]["chosen"]
        assert arena_bytes(sizes, arena_steps(graph, sizes), graph.inputs, graph.outputs) \
            == mem["arena_bytes"]
        constants = [t for t in graph.tensors.values() if t.data is not None
                     and t.dtype in ("int8", "int16", "int32", "int64") and t.quant is not None]
        assert sum(int(t.data.nbytes) for t in constants) == mem["flash_bytes"], key


@pytest.mark.parametrize("extra", [("--activations", "int16"), ("--int16-layers", "auto"),
                                   ("--int16-layers", "3"),
                                   ("--activations", "int16", "--io-type", "float32")])
def test_our_integer_executor_matches_tflm_bit_for_bit_on_16x8_models(tmp_path, zoo, extra):
    from tflite_micro.python.tflite_micro import runtime

    from qconvert.executor.int_executor import run_int8
    from qconvert.quant.report import int_executor_runs_int16

    for model, calib in ((DIGITS, DIGITS_CALIB), (zoo[0], zoo[1])):
        out, report, _ = _quantize(tmp_path, model, calib, f"{model.stem}.tflite", *extra)
        graph = load_model(out).graph
        assert int_executor_runs_int16(graph) and "report_run" not in report
        it = runtime.Interpreter.from_bytes(out.read_bytes())
        d = it.get_input_details(0)
        rng = np.random.default_rng(7)
        for _ in range(3):
            if np.issubdtype(d["dtype"], np.integer):
                info = np.iinfo(d["dtype"])
                x = rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"])
            else:
                x = rng.standard_normal(d["shape"]).astype(d["dtype"])
            it.set_input(x, 0)
            it.invoke()
            want = np.array(it.get_output(0))
            got = run_int8(graph, {graph.inputs[0]: x})[graph.outputs[0]]
            np.testing.assert_array_equal(got, want)
            it.reset()


def test_verify_runs_16x8_models_in_the_integer_executor(tmp_path):
    for extra in (("--activations", "int16"), ("--int16-layers", "auto")):
        out = tmp_path / "v.tflite"
        result = _invoke(["quantize", DIGITS, "--calibration", DIGITS_CALIB, "-o", out,
                          "--verify", 4, *extra])
        assert result.exit_code == 0, result.output
        assert "fake-quantized float run (the integer" not in result.output


# the converter's 16x8 models of normalisation ops and their float originals (make_int16_models)
NORM_OPS = {"rsqrt_16x8": "Rsqrt", "abs_16x8": "Abs",
            "squared_difference_16x8": "SquaredDifference", "sum_16x8": "ReduceSum",
            "slice_16x8": "SliceBySize", "pack_16x8": "Pack", "unpack_16x8": "Unpack",
            "reverse_16x8": "Reverse"}


@pytest.mark.parametrize("name", sorted(NORM_OPS))
def test_activations_int16_makes_normalisation_ops_16x8_as_the_converter(tmp_path, name):
    """`quantize --activations int16` of the float model gives the TFLite converter's 16x8
    model's ops and tensor types (the op 16x8, no QUANTIZE around it), which TFLite Micro runs
    as the integer executor does, bit for bit."""
    from qconvert.formats.model_io import serialize
    from qconvert.formats.tflite_reader import read_tflite

    source = TEST_MODELS / "int16" / "float" / f"{name}.tflite"
    shape = load_model(source).graph.tensors[load_model(source).graph.inputs[0]].shape
    np.save(tmp_path / "calib.npy", np.random.default_rng(0).normal(
        0, 1, (16, *shape[1:])).astype(np.float32))
    out, report, _ = _quantize(tmp_path, source, tmp_path / "calib.npy", "q.tflite",
                               "--activations", "int16")

    def signature(graph):
        return [(n.op, [graph.tensors[i].dtype for i in n.inputs if i],
                 [graph.tensors[o].dtype for o in n.outputs]) for n in graph.nodes]

    ours = load_model(out)
    theirs = load_model(TEST_MODELS / "int16" / f"{name}.tflite").graph
    assert signature(ours.graph) == signature(theirs)
    assert NORM_OPS[name] in {n.op for n in ours.graph.nodes}
    # every layer's output against TFLite Micro, moderate and full-range inputs
    ours.graph.outputs = [o for n in ours.graph.nodes for o in n.outputs if o is not None]
    data = serialize(ours)
    g = read_tflite(data).graph
    assert_same16(data, [feeds_for(g, seed) for seed in range(3)])


def _all_16x8(tmp_path, source, calib_shape) -> tuple:
    """`quantize --activations int16` of `source`: (graph, every layer's output checked
    against TFLite Micro bit for bit on moderate and full-range inputs)."""
    from qconvert.formats.model_io import serialize
    from qconvert.formats.tflite_reader import read_tflite

    np.save(tmp_path / "calib.npy", np.random.default_rng(0).normal(
        0, 1, (16, *calib_shape)).astype(np.float32))
    out, _, _ = _quantize(tmp_path, source, tmp_path / "calib.npy", "q16.tflite",
                          "--activations", "int16")
    model = load_model(out)
    graph = model.graph
    model.graph.outputs = [o for n in graph.nodes for o in n.outputs if o is not None]
    data = serialize(model)
    g = read_tflite(data).graph
    assert_same16(data, [feeds_for(g, seed) for seed in range(3)])
    return load_model(out).graph


@pytest.mark.parametrize("source", ["misc_16x8", "zoo3"])
def test_ops_tflite_micro_runs_16x8_are_not_wrapped_in_quantize(tmp_path, source):
    """MAXIMUM, MINIMUM, RESIZE_NEAREST_NEIGHBOR, SPLIT (the converter's misc_16x8 float model),
    PRELU, SPLIT_V, PADV2, SQUEEZE (ONNX): all 16x8 with `--activations int16`, no QUANTIZE
    between int8 and int16, TFLite Micro's bits."""
    if source == "zoo3":
        path = tmp_path / "zoo3.onnx"
        path.write_bytes(op_zoo3())
        graph = _all_16x8(tmp_path, path, (4, 8, 8))
        want = {"PRelu", "SplitSizes", "PadV2", "Maximum", "Minimum", "ResizeNearest",
                "Squeeze"}
    else:
        graph = _all_16x8(tmp_path, TEST_MODELS / "int16" / "float" / "misc_16x8.tflite",
                          (6, 8, 4))
        want = {"Maximum", "Minimum", "ResizeNearest", "SplitEqual", "TransposeConv",
                "BatchMatMul", "LeakyRelu"}
    ops = {n.op for n in graph.nodes}
    assert want <= ops, want - ops
    # no QUANTIZE between int8 and int16; an int16 -> int16 one only where a MINIMUM operand
    # (misc_16x8: `mul`) is not in the output's scale; MAXIMUM of two parts of one SPLIT (one
    # scale already) gets none
    requant = [n for n in graph.nodes if n.op == "Quantize"]
    assert all(graph.tensors[n.inputs[0]].dtype == graph.tensors[n.outputs[0]].dtype == "int16"
               for n in requant)
    assert all(r.op == "Minimum" for n in requant for r in graph.readers(n.outputs[0]))
    assert all(graph.producer(i) is None or graph.producer(i).op != "Quantize"
               for n in graph.nodes if n.op == "Maximum" for i in n.inputs)
    assert all(t.dtype == "int16" for t in _activations(graph).values())
