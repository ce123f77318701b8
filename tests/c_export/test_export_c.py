"""`qconvert export-c`: the whole int8 model as C, checked against TFLite Micro.

Oracles: the TFLite Micro interpreter (tflite-micro, reference kernels) for every output, on
several inputs per model, from binaries built by gcc on the host (both kernel sets: qconvert's
portable kernels, and CMSIS-NN from ../shared/third_party/CMSIS-NN when it is there) and by
arm-none-eabi-gcc for emulated Cortex-M4 (mps2-an386) and Cortex-M55 with Helium
(mps3-an547) under qemu-system-arm; qconvert's integer executor with single rounding for the
-DQCONVERT_SINGLE_ROUNDING build; TFLite Micro's own arena for the memory plan. Each model and
kernel set is compiled once and its binary runs every sample.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.export_c_harness import (NEEDS_CMSIS, NEEDS_CROSS, STRICT, build_host, harness_source,
                                      io_layout, parse, tflm_arena_bytes)
from helpers.export_c_checks import (assert_bit_exact, check_board, check_host, expected, export,
                                     int8_samples, invoke)

from qconvert.c_export.model.memory_plan import PlanStep, plan_memory
from qconvert.c_export.model.render import ModelOptions, render_model
from qconvert.c_export.model.prepare import prepare_model
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.formats.model_io import load_model

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "models"
SAMPLES = ROOT / "sample_models"

# -- the models: the `models` fixture of tests/c_export/conftest.py ----------------------------
HOST_MODELS = ("kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "digits_tflite",
               "digits_onnx", "every_op")


@pytest.mark.parametrize("name", HOST_MODELS)
def test_host_portable_bit_exact_with_tflite_micro(models, tmp_path, name):
    check_host(models[name], tmp_path / "c", "portable", name)


@NEEDS_CMSIS
@pytest.mark.parametrize("name", HOST_MODELS)
def test_host_cmsis_nn_bit_exact_with_tflite_micro(models, tmp_path, name):
    check_host(models[name], tmp_path / "c", "cmsis-nn", name)


@pytest.mark.parametrize("name", ("kws_ref_model", "every_op"))
def test_single_rounding_build_matches_the_executor(models, tmp_path, name):
    """-DQCONVERT_SINGLE_ROUNDING gives CMSIS-NN's single rounding, as the integer executor
    computes it (the LUT ops carry both tables)."""
    path = models[name]
    graph = load_model(path).graph
    samples = int8_samples(graph, name)
    export(path, tmp_path / "c")
    exe = build_host(tmp_path / "c", harness_source("net", io_layout(graph), samples),
                     defines=["-DQCONVERT_SINGLE_ROUNDING"])
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    got = parse(out, [np.dtype(graph.tensors[n].dtype) for n in graph.outputs], len(samples))
    expected = [list(run_int8(graph, dict(zip(graph.inputs, s)), rounding="single").values())
                for s in samples]
    assert_bit_exact(got, expected, f"{name} single rounding")


# -- emulated Cortex-M ------------------------------------------------------------------------
@NEEDS_CROSS
@pytest.mark.parametrize("name", ("kws_ref_model", "every_op"))
def test_cortex_m4_portable_bit_exact(models, tmp_path, name):
    check_board(models[name], tmp_path / "c", "portable", "m4", name)


@NEEDS_CROSS
@NEEDS_CMSIS
@pytest.mark.parametrize("name", ("kws_ref_model", "pretrainedResnet_quant"))
def test_cortex_m4_cmsis_nn_dsp_bit_exact(models, tmp_path, name):
    check_board(models[name], tmp_path / "c", "cmsis-nn", "m4", name)


@NEEDS_CROSS
@NEEDS_CMSIS
@pytest.mark.parametrize("name", ("kws_ref_model", "pretrainedResnet_quant"))
def test_cortex_m55_cmsis_nn_helium_bit_exact(models, tmp_path, name):
    """The Helium (MVE) build: its fully connected kernel starts from the kernel sums."""
    check_board(models[name], tmp_path / "c", "cmsis-nn", "m55", name)


# -- the memory plan --------------------------------------------------------------------------
@pytest.mark.parametrize("kernels", ("portable", "cmsis-nn"))
def test_arena_is_at_most_0_7_of_tflite_micros(models, kernels):
    for name in ("kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "digits_tflite",
                 "digits_onnx"):
        _, summary = render_model(prepare_model(load_model(models[name])), ModelOptions(
            "net", kernels, "1x4" if kernels == "portable" else "rowmajor"))
        tflm_arena = tflm_arena_bytes(models[name])
        assert summary.arena_size <= 0.7 * tflm_arena, (name, summary.arena_size, tflm_arena)


def _plan(sizes, steps, inputs=("x",), outputs=("y",)):
    return plan_memory(sizes, steps, list(inputs), list(outputs))


def test_plan_overlaps_element_wise_output_only_when_the_input_dies():
    sizes = {"x": 100, "a": 100, "b": 100, "y": 100}
    # a = f(x); b = relu(a) in place; y = a + b: `a` is read later, so b must not overwrite it
    steps = [PlanStep(["x"], ["a"]), PlanStep(["a"], ["b"], overlap=[("same", 0)]),
             PlanStep(["a", "b"], ["y"], overlap=[("same", 0), ("same", 1)])]
    plan = _plan(sizes, steps)
    done = {(s, i, o) for s, i, o, _ in plan.overlapped}
    assert done and done <= {(2, "a", "y"), (2, "b", "y")}
    assert abs(plan.offset["b"] - plan.offset["a"]) >= 100
    assert plan.arena_size == 200  # a and b alive at step 1; y over a dying input


def test_plan_never_overlaps_graph_outputs_or_a_buffer_read_twice():
    sizes = {"x": 64, "a": 64, "y": 64}
    steps = [PlanStep(["x"], ["a"], overlap=[("same", 0)]),
             PlanStep(["a", "a"], ["y"], overlap=[("same", 0)])]  # a + a
    plan = _plan(sizes, steps, outputs=("y", "x"))  # x is also a graph output
    assert plan.overlapped == []
    assert plan.arena_size == 3 * 64


def test_plan_refuses_a_larger_output_in_place_and_aliases_share_bytes():
    sizes = {"x": 32, "big": 64, "r": 64, "y": 64}
    steps = [PlanStep(["x"], ["big"], overlap=[("same", 0)]),
             PlanStep(["big"], ["r"], alias=True),
             PlanStep(["r"], ["y"], overlap=[("same", 0)])]
    plan = _plan(sizes, steps)
    assert plan.offset["r"] == plan.offset["big"] == plan.offset["y"]
    assert [o[:3] for o in plan.overlapped] == [(2, "r", "y")]
    assert plan.arena_size == 32 + 64


def test_in_place_depthwise_output_starts_about_one_row_before_its_input():
    """A 3x3 stride-1 depthwise output of H x W x C may start (W + 1) x C bytes before its
    input: the rows above are no longer read when they are overwritten."""
    from qconvert.c_export.model.index_maps import conv_minread

    h, w, c = 6, 5, 8
    minread = conv_minread((1, h, w, c), (1, h, w, c), (3, 3), (1, 1), (1, 1), [1, 1, 1, 1],
                           lambda oc: oc)
    size = h * w * c
    plan = _plan({"x": size, "y": size}, [PlanStep(["x"], ["y"],
                                                   overlap=[("reads", 0, minread)])])
    (_, _, _, d), = plan.overlapped
    assert -(w + 1) * c - 1 <= d <= -(w - 1) * c and plan.arena_size < 2 * size
    # every output element is written after the last read of the input byte it replaces
    for i in range(size):
        later = minread[i + 1:]
        assert not later.size or d + i < later.min()


def test_plan_check_catches_overlapping_live_tensors(monkeypatch):
    import qconvert.c_export.model.memory_plan as mp

    sizes = {"x": 16, "a": 16, "y": 16}
    steps = [PlanStep(["x"], ["a"]), PlanStep(["x", "a"], ["y"])]
    monkeypatch.setattr(mp, "_lowest_free", lambda *args: 0)
    with pytest.raises(RuntimeError, match="overlaps"):
        _plan(sizes, steps)


def test_plan_order_finishes_one_branch_before_the_other():
    """Two branches x -> a1 (100) -> a2 (10) and x -> b1 (100) -> b2 (10) joined by y: the
    graph's interleaved order keeps a1 and b1 alive together (x + a1 + b1 = 212 bytes); the
    chosen order runs one branch first, peak x + a1 + a2 = a2 + b1 + b2 = 124 bytes."""
    from qconvert.c_export.model.op_order import plan_in_best_order

    sizes = {"x": 12, "a1": 100, "b1": 100, "a2": 12, "b2": 12, "y": 12}
    steps = [PlanStep(["x"], ["a1"]), PlanStep(["x"], ["b1"]), PlanStep(["a1"], ["a2"]),
             PlanStep(["b1"], ["b2"]), PlanStep(["a2", "b2"], ["y"])]
    assert _plan(sizes, steps).arena_size == 212  # the graph's order
    order, plan = plan_in_best_order(sizes, steps, ["x"], ["y"])
    assert plan.arena_size == 124
    position = {step: k for k, step in enumerate(order)}
    for k, step in enumerate(steps):  # every step after the producers of what it reads
        producers = [j for j, s in enumerate(steps) if set(s.outputs) & set(step.inputs)]
        assert all(position[j] < position[k] for j in producers)


def test_plan_order_keeps_the_graphs_order_where_steps_have_effects():
    from qconvert.c_export.model.op_order import plan_in_best_order

    sizes = {"x": 12, "a1": 100, "b1": 100, "a2": 12, "b2": 12, "y": 12}
    steps = [PlanStep(["x"], ["a1"]), PlanStep(["x"], ["b1"], pinned=True),
             PlanStep(["a1"], ["a2"]), PlanStep(["b1"], ["b2"]), PlanStep(["a2", "b2"], ["y"])]
    order, plan = plan_in_best_order(sizes, steps, ["x"], ["y"])
    assert order == [0, 1, 2, 3, 4] and plan.arena_size == 212
    # a tensor written twice (a state buffer updated in place) pins the order too
    steps[1] = PlanStep(["x"], ["b1"])
    steps.append(PlanStep(["y"], ["a1"]))
    order, _ = plan_in_best_order(sizes, steps, ["x"], ["y"])
    assert order == [0, 1, 2, 3, 4, 5]


def _bands_step(inp, out, rows, row_bytes, heights=(1,)):
    """A 1x1 convolution called band by band (bands of k rows for k in `heights`): a band
    writes its output rows and reads its input rows on."""
    overlap = []
    for k in heights:
        top = np.arange(0, rows, k)
        ends = np.minimum(top + k, rows) * row_bytes
        overlap.append(("bands", 0, ends, top * row_bytes, k))
    return PlanStep([inp], [out], overlap=overlap)


def test_plan_bands_a_layer_only_where_it_lowers_the_arena():
    # the banded layer holds the peak (a and y, 100 bytes each): overlapping saves 100 bytes
    sizes = {"x": 40, "a": 100, "y": 100}
    steps = [PlanStep(["x"], ["a"]), _bands_step("a", "y", 10, 10)]
    plan = _plan(sizes, steps)
    assert plan.banded == {1: 1} and plan.arena_size == 140
    # must not: the peak is elsewhere (x 300 + a 100 at step 0), so the whole-layer call
    sizes = {"x": 300, "a": 100, "y": 100}
    plan = _plan(sizes, steps)
    assert plan.banded == {} and plan.arena_size == 400
    assert not (plan.offset["a"] < plan.offset["y"] + 100
                and plan.offset["y"] < plan.offset["a"] + 100)


def test_plan_bands_only_the_layers_the_peak_needs():
    """Two banded candidates; only the first sits on the peak (p + a + b = 260 bytes at step 2,
    b + p + c = 200 at step 3, c + y = 80 at step 4), so only that one is banded."""
    sizes = {"x": 12, "p": 60, "a": 100, "b": 100, "c": 40, "y": 40}
    steps = [PlanStep(["x"], ["p"]), PlanStep(["x"], ["a"]), _bands_step("a", "b", 10, 10),
             PlanStep(["b", "p"], ["c"]), _bands_step("c", "y", 4, 10)]
    plan = _plan(sizes, steps)
    assert plan.banded == {2: 1}
    assert plan.arena_size == 200


def test_plan_keeps_the_tallest_bands_that_keep_the_arena():
    """Bands of 1, 5 or 8 rows of 10 bytes: the output over its input needs 110, 150 or 180
    bytes; the peak is x + a = 160 at step 0, so 5-row bands (fewer calls) cost nothing and
    8-row ones would grow the arena: the plan takes 5 (must not: 1, 8 or whole layer)."""
    sizes = {"x": 60, "a": 100, "y": 100}
    steps = [PlanStep(["x"], ["a"]), _bands_step("a", "y", 10, 10, heights=(1, 5, 8))]
    plan = _plan(sizes, steps)
    assert plan.banded == {1: 5} and plan.arena_size == 160
    (_, _, _, d), = plan.overlapped
    assert -60 <= d <= -50  # within the 160 bytes, below what 5-row bands still read


def _greedy_by_size(sizes, steps, inputs, outputs) -> int:
    """TFLite Micro's GreedyMemoryPlanner over the graph's order, no overlaps (the oracle)."""
    root = {n: n for n in sizes}
    for s in steps:
        if s.alias:
            root[s.outputs[0]] = root[s.inputs[0]]
    life = {}
    for k, s in enumerate(steps):
        for n in s.outputs + s.inputs:
            lo, hi = life.get(root[n], (k, k))
            life[root[n]] = (min(lo, k), max(hi, k))
    for n in inputs:
        life[root[n]] = (-1, life.get(root[n], (-1, -1))[1])
    for n in outputs:
        life[root[n]] = (life.get(root[n], (len(steps), 0))[0], len(steps))
    buffers = {}
    for n, r in root.items():
        buffers[r] = max(buffers.get(r, 0), sizes[n])
    items = sorted(((sz, *life[r]) for r, sz in buffers.items() if sz), key=lambda t: -t[0])
    items += [(s.scratch, k, k) for k, s in enumerate(steps) if s.scratch]
    items.sort(key=lambda t: -t[0])
    placed, top = [], 0
    for size, s, e in items:
        at = 0
        for lo, hi in sorted((o, o + z) for o, z, ps, pe in placed if ps <= e and s <= pe):
            if at + size <= lo:
                break
            at = max(at, (hi + 3) // 4 * 4)
        placed.append((at, size, s, e))
        top = max(top, at + size)
    return (top + 3) // 4 * 4


def _rule_allows(candidate, d, in_size):
    """Whether the kernel's overlap rule allows the output `d` bytes from its input (recomputed
    here from the candidate: every write lands below every later read)."""
    kind = candidate[0]
    if kind == "same":
        return d <= 0
    if kind == "bands":
        ends, reads = np.asarray(candidate[2]), np.asarray(candidate[3])
        return all(d + ends[b] <= reads[b:].min() for b in range(len(ends)))
    minread = np.asarray(candidate[2], dtype=np.int64)
    later = np.append(np.minimum.accumulate(minread[::-1])[::-1][1:], np.iinfo(np.int64).max)
    return bool(np.all(d + np.arange(minread.size) < later))


@pytest.mark.parametrize("kernels", ("portable", "cmsis-nn"))
def test_best_fit_plan_beats_greedy_and_overlaps_only_what_kernels_allow(models, kernels):
    """On the models: the chosen order's plan is never larger than TFLite Micro's greedy plan
    over the graph's order, and two tensors alive at the same step share bytes only as an output
    over the input its kernel reads, at a displacement the kernel's read order allows."""
    from qconvert.c_export.model.cmsis_lowering import lower_cmsis
    from qconvert.c_export.model.lowering import lower_graph
    from qconvert.c_export.model.steps import KernelOptions, tensor_bytes
    from qconvert.c_export.model.op_order import plan_in_best_order

    for name in ("kws_ref_model", "pretrainedResnet_quant", "digits_onnx", "every_op"):
        graph = load_model(models[name]).graph
        options = KernelOptions(kernels, "1x4" if kernels == "portable" else "rowmajor")
        steps = lower_graph(graph, options)
        if kernels == "cmsis-nn":
            steps = [lower_cmsis(graph, s, options) for s in steps]
        for s in steps:
            if s.scratch_builds:
                s.plan.scratch = int(s.scratch_builds["other"])
        plans = [s.plan for s in steps]
        sizes = {n: tensor_bytes(graph, n) for s in plans for n in s.inputs + s.outputs}
        sizes.update({n: tensor_bytes(graph, n) for n in graph.inputs + graph.outputs})
        order, plan = plan_in_best_order(sizes, plans, graph.inputs, graph.outputs)
        assert plan.arena_size <= _greedy_by_size(sizes, plans, graph.inputs, graph.outputs)
        ordered = [plans[k] for k in order]
        live = {}  # name -> (first step, last step) in the chosen order, aliases as one buffer
        for k, s in enumerate(ordered):
            for n in s.inputs + s.outputs:
                lo, hi = live.get(n, (k, k))
                live[n] = (min(lo, k), max(hi, k))
        for n in graph.inputs:
            live[n] = (-1, live[n][1])
        for n in graph.outputs:
            live[n] = (live[n][0], len(ordered))
        aliased = {frozenset((s.inputs[0], s.outputs[0])) for s in ordered if s.alias}
        spans = [(n, plan.offset[n], plan.offset[n] + sizes[n], *live[n]) for n in live
                 if sizes[n]]
        spans += [(("scratch", k), o, o + ordered[k].scratch, k, k)
                  for k, o in plan.scratch.items()]
        for i, (a, a0, a1, as_, ae) in enumerate(spans):
            for b, b0, b1, bs, be in spans[i + 1:]:
                if not (as_ <= be and bs <= ae and a0 < b1 and b0 < a1):
                    continue
                if frozenset((a, b)) in aliased:
                    continue
                k = max(as_, bs)  # the step writing the later-born one, over the dying one
                s = ordered[k] if k >= 0 else None
                x, y = (a, b) if bs > as_ else (b, a)
                assert s is not None and x in s.inputs and s.outputs[0] == y and \
                    min(ae, be) == k, (name, a, b)
                cands = [c for c in s.overlap or [] if s.inputs[c[1]] == x]
                d = plan.offset[y] - plan.offset[x]
                assert any(_rule_allows(c, d, sizes[x]) for c in cands), (name, x, y, d)
                if kernels == "cmsis-nn" and all(c[0] == "bands" for c in cands):
                    assert k in plan.banded


# -- Pad folded into the convolution reading it ------------------------------------------------
@pytest.fixture(scope="module")
def padded_mobilenet(tmp_path_factory) -> Path:
    """The corpus's Paddle-style MobileNetV2 (explicit Pad before each stride-2 depthwise conv
    and before the first conv) quantized by qconvert."""
    corpus = MODELS / "corpus"
    target = tmp_path_factory.mktemp("pads") / "mobilenet_v2_paddle.tflite"
    result = invoke(["quantize", corpus / "mobilenet_v2_paddle.onnx", "--calibration",
                      corpus / "mobilenet_v2_paddle_calib.npy", "-o", target])
    assert result.exit_code == 0, result.output
    return target


@pytest.mark.parametrize("kernels", ("portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)))
def test_pads_folded_into_convolutions_bit_exact(padded_mobilenet, tmp_path, kernels):
    """Every Pad of the model pads with its convolution's zero point: folded (no Pad left, the
    padded copies gone from the arena), and the outputs are TFLite Micro's bit for bit."""
    from qconvert.c_export.model.pad_fold import fold_pads

    graph = load_model(padded_mobilenet).graph
    pads = [n for n in graph.nodes if n.op in ("Pad", "PadV2")]
    assert len(pads) >= 2
    folded = fold_pads(graph)
    assert not [n for n in folded.nodes if n.op in ("Pad", "PadV2")]
    assert len(folded.nodes) == len(graph.nodes) - len(pads)
    check_host(padded_mobilenet, tmp_path / "c", kernels, "mobilenet_v2_paddle")


@NEEDS_CROSS
def test_pads_folded_cortex_m4_bit_exact(padded_mobilenet, tmp_path):
    check_board(padded_mobilenet, tmp_path / "c", "portable", "m4", "mobilenet_v2_paddle")


def test_pads_are_not_folded_where_the_result_would_differ(padded_mobilenet):
    """Must not fold: a PadV2 whose constant is not the convolution's zero point (its padded
    taps are not zero), a Pad feeding a pool (an average pool counts padded taps), a Pad read
    by two layers (the other one needs the padded copy)."""
    from qconvert.c_export.model.pad_fold import fold_pads
    from qconvert.ir.tensor import Tensor

    graph = load_model(padded_mobilenet).graph
    index = next(k for k, n in enumerate(graph.nodes) if n.op == "Pad" and
                 graph.tensors[n.inputs[0]].quant.zero_point[0] != 0)
    pad = graph.nodes[index]
    zero_point = int(graph.tensors[pad.outputs[0]].quant.zero_point[0])

    def variant(edit):
        g = load_model(padded_mobilenet).graph
        edit(g, g.nodes[index])
        return g

    def pad_v2(g, node):
        g.tensors["pad_value"] = Tensor("pad_value", (), "int8",
                                        np.array(zero_point + 5, dtype=np.int8))
        node.op = "PadV2"
        node.inputs = [*node.inputs[:2], "pad_value"]

    def two_readers(g, node):
        reader = next(n for n in g.nodes if node.outputs[0] in n.inputs)
        twin = reader.copy()
        twin.outputs = [o + "_twin" for o in reader.outputs]
        for o, t in zip(reader.outputs, twin.outputs):
            g.tensors[t] = g.tensors[o].copy()
            g.tensors[t].name = t
        g.nodes.insert(g.nodes.index(reader) + 1, twin)

    def into_pool(g, node):
        reader = next(n for n in g.nodes if node.outputs[0] in n.inputs)
        reader.op = "AveragePool"

    for edit in (pad_v2, two_readers, into_pool):
        g = variant(edit)
        kept = [n for n in fold_pads(g).nodes if n.outputs == pad.outputs]
        assert len(kept) == 1 and kept[0].op in ("Pad", "PadV2"), edit.__name__
    # and the unedited Pad is folded (the variants differ from it only by the edit)
    assert not [n for n in fold_pads(graph).nodes if n.outputs == pad.outputs]


# -- patch-based execution (--patches) ------------------------------------------------------
VWW = MODELS / "corpus" / "vww_mobilenet_v1_int8_tflc.tflite"


def _patched(path, kernels="portable", n=4):
    return render_model(prepare_model(load_model(path)), ModelOptions(
        "net", kernels, "1x4" if kernels == "portable" else "rowmajor", patches=n))


@pytest.mark.parametrize("kernels", ("portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)))
@pytest.mark.parametrize("n", (3, 4))
def test_patches_host_bit_exact_with_tflite_micro(tmp_path, kernels, n):
    """VWW's first four layers (96x96 input, 48x48 maps) in n x n tiles: a smaller arena, the
    same bits as TFLite Micro (3 x 3 tiles of 24x24 split unevenly: 8 rows each, halos
    crossing tile borders; 4 x 4: 6 rows)."""
    _, plain = render_model(prepare_model(load_model(VWW)), ModelOptions(
        "net", kernels, "1x4" if kernels == "portable" else "rowmajor"))
    _, summary = _patched(VWW, kernels, n)
    assert summary.patches.startswith("patches: layers") and \
        summary.arena_size < plain.arena_size, summary.patches
    check_host(VWW, tmp_path / "c", kernels, "vww", patches=n)


@NEEDS_CROSS
def test_patches_cortex_m4_bit_exact(tmp_path):
    check_board(VWW, tmp_path / "c", "portable", "m4", "vww", patches=4)


@NEEDS_CROSS
@NEEDS_CMSIS
def test_patches_cortex_m55_cmsis_nn_helium_bit_exact(tmp_path):
    """The patched stage (portable kernels) beside CMSIS-NN's Helium kernels and their bands."""
    check_board(VWW, tmp_path / "c", "cmsis-nn", "m55", "vww", patches=3)


def test_patches_are_not_used_where_they_cannot_cover_the_stage(models):
    """Must not: a model whose first layers mix every pixel (ad01: fully connected), or whose
    first convolution's output feeds a residual branch (ResNet-8: read by two layers), is
    exported exactly as without --patches, with a note saying why."""
    for name, why in (("ad01_int8", "no convolution or pool"),
                      ("pretrainedResnet_quant", "is read by 2 layers")):
        files, summary = _patched(models[name])
        plain, _ = render_model(prepare_model(load_model(models[name])), ModelOptions("net"))
        assert summary.patches.startswith("patches: not used") and why in summary.patches
        assert files == plain


def test_patches_option_on_the_command_line(tmp_path):
    out = tmp_path / "c"
    result = invoke(["export-c", VWW, "-o", out, "--patches", "4"])
    assert result.exit_code == 0 and "run in 4 x 4 tiles" in result.output, result.output
    bad = invoke(["export-c", VWW, "-o", tmp_path / "bad", "--patches", "1"])
    assert bad.exit_code != 0 and "--patches 1" in bad.output
    assert len(bad.output.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


# -- command line, files, refusals ------------------------------------------------------------
def test_cli_writes_a_folder_that_compiles_strictly_and_is_deterministic(tmp_path):
    model = MODELS / "kws_ref_model.tflite"
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        result = invoke(["export-c", model, "-o", folder])
        assert result.exit_code == 0, result.output
    assert "arena" in result.output and "constant data" in result.output
    names = sorted(p.name for p in first.iterdir())
    assert "kws_ref_model.h" in names and "kws_ref_model.c" in names
    for n in names:
        assert (first / n).read_bytes() == (second / n).read_bytes(), n
    header = (first / "kws_ref_model.h").read_text()
    for macro in ("KWS_REF_MODEL_ARENA_SIZE", "KWS_REF_MODEL_INPUT_SIZE 490",
                  "KWS_REF_MODEL_OUTPUT_SIZE 12", "KWS_REF_MODEL_INPUT_SCALE",
                  "KWS_REF_MODEL_INPUT_ZERO_POINT", "KWS_REF_MODEL_OUTPUT_SCALE",
                  "int kws_ref_model_invoke(const int8_t *input, int8_t *output);",
                  "int kws_ref_model_invoke_with_arena(const int8_t *input, int8_t *output, "
                  "void *arena);", "int kws_ref_model_check(void);",
                  "void kws_ref_model_layer_hook(int index, const char *op, int phase);",
                  "#define KWS_REF_MODEL_NUM_LAYERS 13"):
        assert macro in header, macro
    source = (first / "kws_ref_model.c").read_text()
    assert "static const int8_t l0_weights" in source
    subprocess.run(["gcc", *STRICT, "-c", *sorted(str(p) for p in first.glob("*.c"))],
                   cwd=tmp_path, check=True)
    if shutil.which("arm-none-eabi-gcc"):
        subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", *STRICT, "-c",
                        *sorted(str(p) for p in first.glob("*.c"))], cwd=tmp_path, check=True)


def test_caller_arena_variant_and_bad_arena(tmp_path, models):
    path = models["ad01_int8"]
    graph = load_model(path).graph
    export(path, tmp_path / "c")
    sample = int8_samples(graph, "ad01")[0][0]
    main_c = "\n".join([
        "#include <stdio.h>", '#include "net.h"',
        "static int32_t arena[(NET_ARENA_SIZE + 3) / 4 + 1];",
        f"static const int8_t x[NET_INPUT_SIZE] = {{{','.join(map(str, sample.reshape(-1)))}}};",
        "static int8_t y[NET_OUTPUT_SIZE], z[NET_OUTPUT_SIZE];",
        "int main(void) { int i, same = 1;",
        "  if (net_invoke_with_arena(x, y, NULL) != -1) return 3;",
        "  if (net_invoke_with_arena(x, y, (int8_t *)arena + 1) != -1) return 4;",
        "  if (net_invoke_with_arena(x, y, arena) != 0 || net_invoke(x, z) != 0) return 5;",
        "  for (i = 0; i < NET_OUTPUT_SIZE; ++i) same &= y[i] == z[i];",
        "  printf(\"rc 0\\n\");",
        "  for (i = 0; i < NET_OUTPUT_SIZE; ++i) printf(\"%02x\", (unsigned)(uint8_t)y[i]);",
        "  printf(\"\\n\"); return same ? 0 : 6; }", ""])
    exe = build_host(tmp_path / "c", main_c)
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert_bit_exact(parse(out, [np.dtype(np.int8)], 1), expected(path, [[sample]]),
                      "caller arena")


def test_multi_input_multi_output_signature(models, tmp_path):
    files, _ = export(models["every_op"], tmp_path / "c", name="every")
    header = files["every.h"].decode()
    outputs = len(load_model(models["every_op"]).graph.outputs)
    assert outputs > 2
    assert "#define EVERY_NUM_INPUTS 2" in header
    assert f"#define EVERY_NUM_OUTPUTS {outputs}" in header
    assert ("int every_invoke(const int8_t *input0, const float *input1, int8_t *output0, "
            in header)
    assert "#define EVERY_INPUT0_SIZE 144" in header and "#define EVERY_INPUT_SIZE" not in header


def test_unsupported_ops_are_refused_in_one_line_naming_every_op(tmp_path):
    out = tmp_path / "out"
    for model, ops in ((SAMPLES / "unknown_builtin.tflite", ("COS", "FLOOR")),
                       (SAMPLES / "custom_op.tflite", ("QcvTestCustom",))):
        result = CliRunner().invoke(main, ["export-c", str(model), "-o", str(out)])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1, result.output
        assert lines[0].startswith(f"qconvert: error: {model}") and all(o in lines[0]
                                                                         for o in ops), lines
        assert not out.exists()


def test_bad_options_are_refused_and_nothing_is_written(tmp_path):
    model = MODELS / "kws_ref_model.tflite"
    cases = [(["--kernels", "cmsis-nn", "--fc-layout", "1x4"], "rowmajor"),
             (["--name", "9lives"], "not a C identifier"),
             (["--name", "qconvert_nn"], "kernel file")]
    for args, message in cases:
        result = CliRunner().invoke(main, ["export-c", str(model), "-o", str(tmp_path / "o"),
                                           *args])
        assert result.exit_code == 1 and message in result.output, result.output
    afile = tmp_path / "file"
    afile.write_text("x")
    result = CliRunner().invoke(main, ["export-c", str(model), "-o", str(afile)])
    assert result.exit_code == 1 and "not a directory" in result.output
    result = CliRunner().invoke(main, ["export-c", str(MODELS / "ad01_fp32.tflite"), "-o",
                                       str(tmp_path / "o")])
    assert result.exit_code == 1 and "--calibration" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_float_model_with_calibration_equals_quantize_then_export(models, tmp_path):
    """export-c of the float digits model with --calibration writes the same C as export-c of
    `qconvert quantize`'s int8 model (same options), except the provenance lines."""
    direct = tmp_path / "direct"
    result = invoke(["export-c", MODELS / "digits_cnn.tflite", "--calibration",
                      SAMPLES / "digits_calib_nhwc.npy", "-o", direct, "--name", "net"])
    assert result.exit_code == 0, result.output
    via, _ = export(models["digits_tflite"], tmp_path / "via")

    def body(text):
        return [ln for ln in text.splitlines() if "SHA-256" not in ln and "Quantization:" not in ln
                and "as C, generated" not in ln]

    assert body((direct / "net.c").read_text()) == body(via["net.c"].decode())


def test_single_rounding_requantize_keeps_64_bits(tmp_path):
    """acc 2^22, multiplier 2^30, shift 9: CMSIS-NN's single rounding gives +2^30 (the 32-bit
    truncation the kernel used to do gave -2^30)."""
    kernels = ROOT / "qconvert" / "c_export" / "kernels"
    (tmp_path / "t.c").write_text(
        '#include <stdio.h>\n#include "qconvert_fc_1x4.h"\nint main(void) {\n'
        '    printf("%ld %ld\\n", (long)qconvert_requantize(1 << 22, 1 << 30, 9),\n'
        '           (long)qconvert_requantize(-(1 << 22), 1 << 30, 9));\n    return 0;\n}\n')
    subprocess.run(["gcc", *STRICT, "-DQCONVERT_SINGLE_ROUNDING", f"-I{kernels}",
                    str(tmp_path / "t.c"), str(kernels / "qconvert_fc_1x4.c"), "-o",
                    str(tmp_path / "t")], check=True)
    out = subprocess.run([tmp_path / "t"], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(2**30), str(-(2**30))]


def test_help_says_which_kernels_read_the_1x4_order():
    for command in ("export-c", "export-c-header"):
        text = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "arm_fully_connected_q7_opt" in text and "arm_fully_connected_s8 needs" in text


def test_renderer_runs_no_pass_and_refuses_an_unprepared_model(monkeypatch):
    """The renderer renders: shape preparation (the dynamic batch fixed to 1, the shape
    arithmetic folded by fold-constants and eliminate) is `prepare_model`'s, before it. With
    every pass disabled, rendering a prepared model still writes the same files; preparing
    ad01 (a dynamic batch) does run the passes; `render_model` given the Model refuses."""
    from qconvert.passes import pipeline, registry

    ran = []
    real = registry.run_passes

    def counting(model, names, *args, **kwargs):
        ran.extend(names)
        return real(model, names, *args, **kwargs)

    monkeypatch.setattr(pipeline, "run_passes", counting)
    prepared = prepare_model(load_model(MODELS / "ad01_int8.tflite"))
    assert "fold-constants" in ran  # the preparation: passes, before rendering
    expected, _ = render_model(prepare_model(load_model(MODELS / "ad01_int8.tflite")),
                               ModelOptions("net"))

    def no_pass(*args, **kwargs):
        raise AssertionError("a pass ran while rendering")

    for module in (pipeline, registry):
        monkeypatch.setattr(module, "run_passes", no_pass)
    files, _ = render_model(prepared, ModelOptions("net"))
    assert files == expected and b"net_invoke" in files["net.h"]
    with pytest.raises(TypeError, match="prepare_model"):
        render_model(load_model(MODELS / "ad01_int8.tflite"), ModelOptions("net"))
