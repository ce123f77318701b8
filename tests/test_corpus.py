"""The real-model corpus: every model x every command works under an independent oracle, or
refuses in one line naming what of the model it cannot handle.

Models: `tests/corpus/manifest.py` (torchvision / Keras architectures with random weights and
randomised BatchNorm, made once by the generators in tests/corpus; the MLPerf Tiny and digits
models). Oracles (`tests/corpus/oracles.py`): onnxruntime with graph optimizations off and LiteRT
with the reference kernels for float outputs (within `TOLERANCE`, stateful models frame by
frame), TFLite Micro bit for bit against qconvert's integer executor plus the output SQNR
against the float model for int8 outputs, gcc -Wall -Wextra -Werror for C headers, the `onnx` /
`tflite` packages for the model's own ops and names; the export-c models in one Cortex-M4 firmware
image per kernel set under qemu-system-arm against TFLite Micro. Every cell runs once per session.
"""

from __future__ import annotations

import re
import shutil
import struct

import numpy as np
import pytest
from helpers.oracles import ROOT
from helpers.export_c_harness import (build_cortex_m, cmsis_nn_available, cross_tools_available,
                                      image_source, io_layout, parse, run_qemu, split_image_output)

from corpus import harness
from corpus.harness import CorpusRunner, parse_coverage_markdown, summarize_refusal
from corpus.manifest import (BY_NAME, COMMANDS, CORPUS, MODELS_TABLE, README_MODELS,
                             REAL_MODELS, cells)

# Cells that fail today, each with the reason; strict, so a fix turns them into a test failure
# until the entry is removed. Keep empty unless a fix is under way elsewhere.
KNOWN_FAILURES: dict = {}


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return CorpusRunner(tmp_path_factory.mktemp("corpus"))


def _params():
    out = []
    for model, command in cells():
        marks = []
        if (model, command) in KNOWN_FAILURES:
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[(model, command)])]
        out.append(pytest.param(model, command, marks=marks, id=f"{model}-{command}"))
    return out


@pytest.mark.parametrize("model,command", _params())
def test_command_works_or_refuses(corpus, model, command):
    cell = corpus.cell(model, command)
    assert cell.status in ("ok", "refused"), f"{model} {command}: {cell.detail}"


def test_known_failures_are_cells():
    assert set(KNOWN_FAILURES) <= set(cells())


# -- export-c's arena against TFLite Micro's -------------------------------------------------------
# Models whose export-c arena is above 0.7x TFLite Micro's today, each with the reason; the test
# fails when the set changes (a model crossing either way), so a fix removes its entry.
ARENA_ABOVE_0_7: dict = {}  # unet_small met it once its Concat parts sat inside its output


@pytest.mark.parametrize("kernels", ("portable", "cmsis-nn"))
def test_export_c_arena_is_at_most_0_7_of_tflite_micros(corpus, kernels):
    """Every corpus model export-c accepts (the int8 model of its export-c cell, made once per
    session): export-c's static arena is at most 0.7x TensorFlow Lite Micro's whole arena,
    except the models of ARENA_ABOVE_0_7."""
    from helpers.export_c_harness import tflm_arena_bytes

    from qconvert.c_export.model.render import ModelOptions, render_model
    from qconvert.c_export.model.prepare import prepare_model
    from qconvert.formats.model_io import load_model

    exportable = [m for m, c in cells() if c == "export-c" and corpus.cell(m, c).status == "ok"]
    assert exportable
    above = {}
    for model in exportable:
        path = corpus.export_c_models[model][0]
        _, summary = render_model(prepare_model(load_model(path)), ModelOptions(
            "net", kernels, "1x4" if kernels == "portable" else "rowmajor"))
        tflm = _TFLM_ARENA.get(path) or _TFLM_ARENA.setdefault(path, tflm_arena_bytes(path))
        if summary.arena_size > 0.7 * tflm:
            above[model] = (summary.arena_size, tflm)
    assert set(above) == set(ARENA_ABOVE_0_7), above


_TFLM_ARENA: dict = {}


# -- export-c on Cortex-M4 and Cortex-M55 ---------------------------------------------------------
@pytest.mark.parametrize("kernels", ("portable", "cmsis-nn"))
def test_export_c_cortex_m4_firmware_is_bit_exact_with_tflite_micro(corpus, tmp_path, kernels):
    """Every corpus model export-c accepts, exported with a distinct `--name` into ONE firmware
    image per kernel set, cross-compiled for Cortex-M4 and run once in qemu-system-arm
    (mps2-an386, semihosting): each model's outputs on the export-c cell's feeds equal TFLite
    Micro's bit for bit."""
    _firmware_bit_exact(corpus, tmp_path, kernels, "m4")


@pytest.mark.parametrize("kernels", ("portable", "cmsis-nn"))
def test_export_c_cortex_m55_firmware_is_bit_exact_with_tflite_micro(corpus, tmp_path, kernels):
    """The same image for Cortex-M55 (mps3-an547; CMSIS-NN's Helium (MVE) kernels with
    cmsis-nn): kws_conv1d's first convolution (1x5, stride 2, padding 2 on 49 columns) is where
    arm_convolve_1_x_n_s8's MVE path reads past the row (see qconvert/c_export/model/cmsis_1xn.py)."""
    _firmware_bit_exact(corpus, tmp_path, kernels, "m55")


def _firmware_bit_exact(corpus, tmp_path, kernels, board):
    """Build the one image of every exportable corpus model for `board` and compare each
    model's outputs with TFLite Micro's."""
    if not cross_tools_available():
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm missing (apt-get install "
                    "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm): Cortex-M "
                    "corpus image not built")
    if kernels == "cmsis-nn" and not cmsis_nn_available():
        pytest.skip("CMSIS-NN is not beside the repository (../shared/third_party/CMSIS-NN or "
                    "$QCONVERT_CMSIS_NN): the cmsis-nn corpus image is not built")
    exportable = [m for m, c in cells() if c == "export-c" and corpus.cell(m, c).status == "ok"]
    assert exportable
    assert "kws_conv1d" in exportable and "lstm_denoiser" in exportable
    folder = tmp_path / "image"
    folder.mkdir()
    entries, expected = [], {}
    for model in exportable:
        path, graph, samples, want, (resets, replay) = corpus.export_c_models[model]
        name = "corpus_" + re.sub(r"\W", "_", model)
        out = tmp_path / name
        code, _, err, crash = harness.run_cli(["export-c", path, "-o", out, "--name", name,
                                               "--kernels", kernels])
        assert code == 0 and crash is None, f"{model}: {crash or err}"
        for f in out.iterdir():  # the kernels' files are the same for every model
            if (folder / f.name).exists():
                assert (folder / f.name).read_bytes() == f.read_bytes(), f.name
            else:
                shutil.copyfile(f, folder / f.name)
        # a stateful model: its calls in a row, then its reset and the first calls again
        entries.append((name, io_layout(graph), samples,
                        ([f"{name}_{r}" for r in resets], replay) if replay else None))
        expected[name] = (model, [np.dtype(graph.tensors[n].dtype) for n in graph.outputs],
                          want)
    elf = build_cortex_m(folder, image_source(entries), board, cmsis=kernels == "cmsis-nn",
                         rodata_in_ram=board == "m55")  # about 3 MB of weights: not in ITCM
    blocks = split_image_output(run_qemu(elf, board, timeout=300))
    assert sorted(blocks) == sorted(expected)
    label = {"m4": "Cortex-M4", "m55": "Cortex-M55"}[board]
    for name, (model, dtypes, want) in expected.items():
        got = parse(blocks[name], dtypes, len(want))
        for k, (g, w) in enumerate(zip(got, want)):
            for j, (a, b) in enumerate(zip(g, w)):
                b = np.asarray(b).reshape(-1)
                assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), (
                    f"{model} ({kernels}, {label}): feed {k} output {j}: "
                    f"{np.count_nonzero(a != b)} of {b.size} differ from TFLite Micro")


def test_models_and_calibration_exist_and_are_small():
    total = 0
    for m in MODELS_TABLE:
        assert m.path.exists(), m.path
        spec = m.calibration
        if ":" in spec.rsplit("/", 1)[-1]:  # file.npz:key
            spec = spec.rsplit(":", 1)[0]
        assert (ROOT / spec).exists(), spec
        if m.path.parent == CORPUS:
            assert m.path.stat().st_size < 1_000_000, m.path
            total += m.path.stat().st_size
    assert total < 6_000_000


def test_corpus_covers_the_architectures_the_issue_names():
    """Groups, hard-swish, ConvTranspose and Resize, 1-D conv, attention, streaming, a -1 dim."""
    ops = {name: harness.model_ops(m)[0] for name, m in BY_NAME.items()}
    assert any(m.format == "onnx" for m in MODELS_TABLE)
    assert "HardSwish" in ops["mobilenet_v3_small"] and "HARD_SWISH" in ops[
        "keras_mobilenet_v3_small"]
    assert {"ConvTranspose", "Resize"} <= ops["unet_small"]
    assert {"Softmax", "MatMul", "LayerNormalization"} <= ops["tiny_transformer"]
    assert {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"} <= ops[
        "streaming_kws_tflite"]
    assert "BatchNormalization" in ops["resnext_small"]  # BN kept, so folding is exercised
    import onnx

    groups = [a.i for n in onnx.load(str(BY_NAME["resnext_small"].path)).graph.node
              for a in n.attribute if n.op_type == "Conv" and a.name == "group"]
    assert max(groups) == 4
    x = onnx.load(str(BY_NAME["mobilenet_v2_paddle"].path)).graph.input[0]
    assert x.type.tensor_type.shape.dim[0].dim_value == -1
    conv1d = [n for n in onnx.load(str(BY_NAME["kws_conv1d"].path)).graph.node
              if n.op_type == "Conv"]
    assert all(len(a.ints) == 1 for n in conv1d for a in n.attribute if a.name == "kernel_shape")


def test_batchnorm_statistics_are_randomised_with_dead_channels():
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(BY_NAME["resnext_small"].path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    bns = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    gamma, beta, mean, var = (inits[bns[0].input[i]] for i in (1, 2, 3, 4))
    assert np.sum(np.abs(gamma) < 1e-6) == 3  # dead channels
    assert np.ptp(mean) > 0.1 and np.ptp(var) > 0.1 and np.ptp(beta) > 0.1


# -- the harness fails when it must ---------------------------------------------------------------
def test_float_comparison_fails_past_tolerance():
    want = [[np.array([1.0, -2.0, 4.0], np.float32)]]
    harness._compare_float(want, [[want[0][0] + 1e-6]], "same")
    with pytest.raises(harness._Fail, match="differ"):
        harness._compare_float(want, [[want[0][0] + 0.01]], "off")
    with pytest.raises(harness._Fail, match="non-finite"):
        harness._compare_float(want, [[np.array([1.0, np.nan, 4.0], np.float32)]], "nan")


def test_name_check_fires_on_a_planted_duplicate(tmp_path):
    import onnx

    model = onnx.load(str(BY_NAME["digits_cnn_onnx"].path))
    good = tmp_path / "good.onnx"
    good.write_bytes(model.SerializeToString())
    harness._check_names([good])
    model.graph.node[1].name = model.graph.node[0].name = "same"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(model.SerializeToString())
    with pytest.raises(harness._Fail, match="node names used twice"):
        harness._check_names([bad])
    tfl = BY_NAME["digits_cnn_tflite"].path.read_bytes()
    harness._check_names([tmp_path / "x.h"])  # not a model: left alone
    from tflite.Model import Model

    sub = Model.GetRootAsModel(tfl, 0).Subgraphs(0)
    names = sorted({sub.Tensors(i).Name() for i in range(sub.TensorsLength())})
    first, second = next((a, b) for a in names for b in names if a < b and len(a) == len(b))

    def spelled(name):  # a flatbuffers string: little-endian length, bytes, NUL
        return struct.pack("<I", len(name)) + name + b"\x00"

    assert tfl.count(spelled(second)) == 1
    planted = tmp_path / "bad.tflite"
    planted.write_bytes(tfl.replace(spelled(second), spelled(first)))
    with pytest.raises(harness._Fail, match="tensor names used twice"):
        harness._check_names([planted])


def test_sqnr_floor_fires(corpus):
    want = [[np.ones(8)], [np.ones(8)]]  # the last feed (random) is left out
    with pytest.raises(harness._Fail, match="below the floor"):
        corpus._sqnr(want, [[np.zeros(8)], [np.ones(8)]], "q")
    assert corpus._sqnr(want, [[np.ones(8) * 1.001], [np.zeros(8)]], "q") > 50


def test_refusal_checks_fire():
    m = BY_NAME["unet_small"]
    harness.check_refusal_names(m, "ops with no TFLite mapping: ConvTranspose, Resize (x2)")
    with pytest.raises(harness._Fail, match="does not have"):
        harness.check_refusal_names(m, "ops with no TFLite mapping: LSTM")
    with pytest.raises(harness._Fail, match="not in the model"):
        harness.check_refusal_names(m, "Conv 'no_such_node' is not supported")
    with pytest.raises(harness._Fail, match="names no op"):
        harness.check_refusal_names(m, "something is not supported")
    t = BY_NAME["mlperf_kws_int8"]
    harness.check_refusal_names(t, "cannot: DepthwiseConv2D, FULLY_CONNECTED")
    with pytest.raises(harness._Fail, match="does not have"):
        harness.check_refusal_names(t, "cannot: HardSwish")


def test_refusal_must_be_one_line_and_write_nothing(corpus, tmp_path):
    m = BY_NAME["unet_small"]
    line = f"qconvert: error: {m.path}: ops with no TFLite mapping: Resize"
    assert corpus._refusal(m, 1, line + "\n", [tmp_path / "x"]) == (
        "refused", "ops with no TFLite mapping: Resize")
    with pytest.raises(harness._Fail, match="one line"):
        corpus._refusal(m, 1, line + "\nTraceback (most recent call last):\n", [])
    with pytest.raises(harness._Fail, match="exit status 2"):
        corpus._refusal(m, 2, line, [])
    (tmp_path / "x").write_bytes(b"partial")
    with pytest.raises(harness._Fail, match="wrote x"):
        corpus._refusal(m, 1, line, [tmp_path / "x"])


def test_a_refusal_must_name_what_the_conversion_it_runs_refuses(corpus):
    m = BY_NAME["unet_small"]
    saved = corpus._cells.get((m.name, "to-tflite"))
    corpus._cells[(m.name, "to-tflite")] = harness.Cell(
        m.name, "to-tflite", "refused", "ops with no TFLite mapping: ConvTranspose, Resize (x2)")
    try:
        status, _ = corpus._names_what_conversion_refuses(m, "export-c-header",
                                                          "ops unknown to qconvert: Resize (x2)")
        assert status == "FAIL"
        assert corpus._names_what_conversion_refuses(
            m, "quantize", "cannot: Resize (x2), ConvTranspose")[0] == "refused"
    finally:
        del corpus._cells[(m.name, "to-tflite")]
        if saved is not None:
            corpus._cells[(m.name, "to-tflite")] = saved


def test_summary_counts_ops():
    cause = ("cannot convert ONNX to TFLite: grouped convolutions (TFLite Micro has no grouped "
             "CONV_2D): Conv 'a' (group 4, 16 -> 16 channels), Conv 'b' (group 2, 8 -> 8 "
             "channels); ops with no TFLite mapping: Resize (x2), LRN")
    assert summarize_refusal(cause) == ("cannot convert ONNX to TFLite: grouped convolutions: "
                                        "Conv x2; ops with no TFLite mapping: Resize x2, LRN")


# -- docs/results/coverage.md and docs/real-models.md show the tables -----------------------------
def test_coverage_page_table_matches_the_corpus(corpus):
    """Statuses and refusal causes in docs/results/coverage.md equal this run's (figures are
    not compared: they may differ in the last digits between machines). Regenerate with
    `python bench/model_coverage.py --update-docs`."""
    _table_matches(corpus, ROOT / "docs" / "results" / "coverage.md", README_MODELS,
                   "--update-docs")


def test_docs_real_models_table_matches_the_corpus(corpus):
    """The same for docs/real-models.md and the issue-28 models (`REAL_MODELS`); regenerate
    with `python bench/model_coverage.py --update-docs`."""
    _table_matches(corpus, ROOT / "docs" / "real-models.md", REAL_MODELS, "--update-docs")


def _table_matches(corpus, page, models, option):
    text = page.read_text()
    parts = text.split("<!-- coverage-table -->")
    assert len(parts) == 3, f"{page.name} has no <!-- coverage-table --> section"
    rows = parse_coverage_markdown(parts[1], COMMANDS)
    assert sorted(rows) == sorted(m.name for m in models)
    hint = f"regenerate with python bench/model_coverage.py {option}"
    for m in models:
        for c in COMMANDS:
            status, cause = rows[m.name][c]
            if c not in m.commands:
                assert status == "-", (m.name, c)
                continue
            cell = corpus.cell(m.name, c)
            assert status == cell.status, (
                f"{page.name}: {m.name} {c} is {status}, now {cell.status}; {hint}")
            if cell.status == "refused":
                assert cause == summarize_refusal(cell.detail), f"{m.name} {c}: {hint}"


def test_coverage_table_round_trips():
    from corpus.harness import Cell, coverage_markdown

    models = MODELS_TABLE[:2]
    cells = {(models[0].name, "inspect"): Cell(models[0].name, "inspect", "ok", "3 layers"),
             (models[0].name, "quantize"): Cell(models[0].name, "quantize", "ok", "SQNR 30.1 dB"),
             (models[1].name, "convert"): Cell(models[1].name, "convert", "refused",
                                               "ops: Resize (x2)"),
             (models[1].name, "fuse"): Cell(models[1].name, "fuse", "refused",
                                            "ops: Resize (x2)")}
    rows = parse_coverage_markdown(coverage_markdown(cells, models, COMMANDS), COMMANDS)
    assert rows[models[0].name]["quantize"] == ("ok", None)
    assert rows[models[1].name]["fuse"] == ("refused", "ops: Resize x2")
    assert rows[models[1].name]["to-tflite"] == ("-", None)


def test_state_comparison_fires_on_a_changed_weight(corpus, tmp_path):
    """A streaming model whose weights moved a little: compared tensor by tensor, frame by
    frame, in LiteRT, it must fail (its outputs alone could hide it)."""
    from qconvert.formats.model_io import load_model, serialize

    m = BY_NAME["streaming_kws_float"]
    model = load_model(m.path)
    weights = max((t for t in model.graph.tensors.values()
                   if t.data is not None and t.data.dtype == np.float32 and t.data.size > 8),
                  key=lambda t: t.data.size)
    weights.data = weights.data * np.float32(1.01)
    changed = tmp_path / "changed.tflite"
    changed.write_bytes(serialize(model))
    feeds = harness.oracle_feeds(m)
    assert corpus._compare_state(m, m.path, feeds, "same") > 5
    with pytest.raises(harness._Fail, match="differ"):
        corpus._compare_state(m, changed, feeds, "changed")


def test_export_c_stream_comparison_fails_when_the_lstm_state_is_broken(corpus):
    """The LSTM denoiser's export-c C is judged over a stream (its calls in a row, then
    NAME_reset_lstm() and the first calls again, against TFLite Micro): the same C run with
    its state broken must fail that comparison: no reset before the replayed calls (they
    continue the old sequence), or a reset before every call (no state carried)."""
    from corpus.export_c_cell import check_build
    from helpers.export_c_harness import harness_source

    m = BY_NAME["lstm_denoiser"]
    assert corpus.cell(m.name, "export-c").status == "ok"
    _, graph, samples, want, (resets, replay) = corpus.export_c_models[m.name]
    assert resets == ("reset_lstm",) and replay == m.frames >= 4
    assert len(want) == len(samples) + replay
    folder = corpus._out(m, "export-c", "d")
    dtypes = [np.dtype(graph.tensors[n].dtype) for n in graph.outputs]

    def fail(message):
        raise harness._Fail(message)

    right = harness_source("corpus", io_layout(graph), samples, (["corpus_reset_lstm"], replay))
    check_build(folder, right, dtypes, want, "portable", fail)
    no_reset = harness_source("corpus", io_layout(graph), samples, ([], replay))
    with pytest.raises(harness._Fail, match=f"on feed {len(samples)}$"):
        check_build(folder, no_reset, dtypes, want, "portable", fail)
    every_call = right.replace("        int rc = corpus_invoke(",
                               "        corpus_reset_lstm();\n        int rc = corpus_invoke(")
    assert every_call.count("corpus_reset_lstm();") == 3
    with pytest.raises(harness._Fail, match="on feed 1$"):
        check_build(folder, every_call, dtypes, want, "portable", fail)


def test_real_models_have_what_they_stand_for():
    """Read with the `tflite` / `onnx` packages, independently of qconvert: float16 weights
    behind DEQUANTIZE, int8 weight-only storage behind DEQUANTIZE, sparse tensors behind
    DENSIFY, uint8 input and output, a concat of box pixels with 0..1 scores, and an LSTM
    whose two state tensors are variables (kept across calls: run as a stream of frames)."""
    import onnx
    import tflite

    def tensors(name):
        sg = tflite.Model.GetRootAs(BY_NAME[name].path.read_bytes(), 0).Subgraphs(0)
        return sg, [sg.Tensors(i) for i in range(sg.TensorsLength())]

    _, ts = tensors("blazeface_fp16")
    assert sum(t.Type() == tflite.TensorType.FLOAT16 for t in ts) >= 10
    assert "DEQUANTIZE" in harness.model_ops(BY_NAME["blazeface_fp16"])[0]
    _, ts = tensors("landmarks_hybrid")
    assert sum(t.Type() == tflite.TensorType.INT8 for t in ts) >= 5
    assert not any(t.Type() == tflite.TensorType.INT8 and t.Quantization() is not None
                   and t.Buffer() == 0 for t in ts)  # int8 only in constants: a float model
    _, ts = tensors("sparse_cnn")
    assert sum(t.Sparsity() is not None for t in ts) == 3
    assert "DENSIFY" in harness.model_ops(BY_NAME["sparse_cnn"])[0]
    sg, ts = tensors("uint8_classifier")
    assert ts[sg.Inputs(0)].Type() == ts[sg.Outputs(0)].Type() == tflite.TensorType.UINT8
    g = onnx.load(str(BY_NAME["yolo_head"].path)).graph
    assert [n.op_type for n in g.node][-1] == "Concat" and g.output[0].name == "detections"
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in harness.model_ops(BY_NAME["lstm_denoiser"])[0]
    _, ts = tensors("lstm_denoiser")
    assert sum(t.IsVariable() for t in ts) == 2 and BY_NAME["lstm_denoiser"].frames >= 4
