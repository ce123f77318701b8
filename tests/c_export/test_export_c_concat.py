"""`export-c`'s Concat (kernels/qconvert_nn_concat.c) and overlapping data movement: the parts
and the upsampled maps that die at a step sit inside its output, bit-exact with TFLite Micro.

Oracles: the TFLite Micro interpreter on the host binary (gcc) and on Cortex-M4 (qemu
mps2-an386) for small ONNX models quantized by qconvert and for the corpus U-Net; the memory
plan's own record of which input its output overlaps (`MemoryPlan.overlapped`) for the cases
where an overlap must and must not happen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers.export_c_harness import NEEDS_CMSIS, NEEDS_CROSS, tflm_arena_bytes
from onnx import TensorProto, helper, numpy_helper
from helpers.every_op_model import every_op_model
from helpers.export_c_checks import check_board, check_host, invoke

from qconvert.c_export.model.render import _planned
from qconvert.c_export.model.lowering import lower_graph
from qconvert.c_export.model.steps import KernelOptions
from qconvert.formats.model_io import load_model

CORPUS = Path(__file__).resolve().parents[1] / "models" / "corpus"


def _onnx_model(path: Path, spec: dict) -> None:
    """A float ONNX model: `x` (1, 4, 8, 8) -> 3x3 Relu convs named in spec["convs"]
    (name: (input, out channels)), Concats spec["concats"] (name: (inputs, axis)), Adds
    spec["adds"], graph outputs spec["outputs"]."""
    rng = np.random.default_rng(7)
    nodes, inits, channels = [], [], {"x": 4}
    for name, (src, oc) in spec["convs"].items():
        ic = channels[src]
        w = rng.normal(0, 0.3, (oc, ic, 3, 3)).astype(np.float32)
        b = rng.normal(0, 0.1, (oc,)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]
        nodes += [helper.make_node("Conv", [src, f"{name}_w", f"{name}_b"], [f"{name}_c"],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"{name}_c"], [name])]
        channels[name] = oc
        for cname, (parts, axis) in spec["concats"].items():
            if cname not in channels and all(p in channels for p in parts):
                nodes.append(helper.make_node("Concat", list(parts), [cname], axis=axis))
                channels[cname] = sum(channels[p] for p in parts) if axis == 1 else \
                    channels[parts[0]]
        for aname, (a, b2) in spec.get("adds", {}).items():
            if aname not in channels and a in channels and b2 in channels:
                nodes.append(helper.make_node("Add", [a, b2], [aname]))
                channels[aname] = channels[a]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in spec["outputs"]]
    graph = helper.make_graph(nodes, "concat_test", [x], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.output[:]
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(bare).graph.value_info}
    for out in model.graph.output:
        out.type.CopyFrom(inferred[out.name].type)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


SPECS = {
    # a channel concat of two parts both dying there, feeding a conv
    "two_parts": {"convs": {"a": ("x", 8), "b": ("x", 8), "y": ("cat", 4)},
                  "concats": {"cat": (("a", "b"), 1)}, "outputs": ["y"]},
    # three parts
    "three_parts": {"convs": {"a": ("x", 4), "b": ("x", 8), "c": ("a", 4), "y": ("cat", 4)},
                    "concats": {"cat": (("a", "b", "c"), 1)}, "outputs": ["y"]},
    # another axis (H in NCHW)
    "height_axis": {"convs": {"a": ("x", 8), "b": ("x", 8), "y": ("cat", 4)},
                    "concats": {"cat": (("a", "b"), 2)}, "outputs": ["y"]},
    # the last part is read again after the concat: it must not be overwritten
    "part_lives_on": {"convs": {"a": ("x", 8), "b": ("x", 8), "y": ("cat", 8), "z": ("s", 8)},
                      "concats": {"cat": (("a", "b"), 1)}, "adds": {"s": ("y", "b")},
                      "outputs": ["z"]},
    # the last part is a graph output too
    "part_is_output": {"convs": {"a": ("x", 8), "b": ("x", 8), "y": ("cat", 4)},
                       "concats": {"cat": (("a", "b"), 1)}, "outputs": ["y", "b"]},
}


@pytest.fixture(scope="module")
def concat_models(tmp_path_factory) -> dict:
    """{name: int8 TFLite path}: SPECS quantized by qconvert, and the corpus U-Net."""
    folder = tmp_path_factory.mktemp("concat")
    calib = folder / "calib.npy"
    np.save(calib, np.random.default_rng(3).normal(0, 1, (8, 4, 8, 8)).astype(np.float32))
    out = {}
    for name, spec in SPECS.items():
        src = folder / f"{name}.onnx"
        _onnx_model(src, spec)
        out[name] = _quantize(src, calib, folder / f"{name}.tflite")
    out["unet_small"] = _quantize(CORPUS / "unet_small.onnx", CORPUS / "unet_small_calib.npy",
                                  folder / "unet_small.tflite")
    return out


def _quantize(src, calib, target) -> Path:
    result = invoke(["quantize", src, "--calibration", calib, "-o", target])
    assert result.exit_code == 0, result.output
    return target


def _concat_overlaps(path, kernels) -> tuple:
    """([the Concat steps' inputs], {(concat input, output)} the plan overlaps) on one build."""
    graph = load_model(path).graph
    steps, plans = _planned(graph, lower_graph(graph, KernelOptions(kernels)),
                            KernelOptions(kernels))
    concats = {s.index: s for s in steps if s.node.op == "Concat"}
    assert concats, "no Concat step"
    inputs = [n for s in concats.values() for n in s.node.inputs]
    plan = plans[-1]
    pairs = {(x, y) for step, x, y, _ in plan.overlapped if step in
             {k for k, s in enumerate(steps) if s.node.op == "Concat"}}
    return inputs, pairs


NAMES = tuple(SPECS) + ("unet_small",)
KERNELS = ("portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS))


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("name", NAMES)
def test_concat_host_bit_exact_with_tflite_micro(concat_models, tmp_path, name, kernels):
    """Every model, both kernel sets, on the host: TFLite Micro's outputs bit for bit."""
    check_host(concat_models[name], tmp_path / "c", kernels, name)


@NEEDS_CROSS
@pytest.mark.parametrize("name", NAMES)
def test_concat_cortex_m4_bit_exact(concat_models, tmp_path, name):
    """The same on Cortex-M4 (qemu mps2-an386), portable kernels."""
    check_board(concat_models[name], tmp_path / "m4", "portable", "m4", name)


@NEEDS_CROSS
@NEEDS_CMSIS
def test_concat_cortex_m4_cmsis_nn_bit_exact(concat_models, tmp_path):
    """The U-Net with --kernels cmsis-nn on Cortex-M4 (the Concat keeps qconvert's kernel)."""
    check_board(concat_models["unet_small"], tmp_path / "m4", "cmsis-nn", "m4", "unet_small")


@pytest.mark.parametrize("name", ("two_parts", "three_parts", "height_axis"))
def test_concat_parts_that_die_there_sit_inside_its_output(concat_models, name):
    """The plan puts at least one part inside the concat's output (else the three tensors
    would be alive at once)."""
    _, pairs = _concat_overlaps(concat_models[name], "portable")
    assert pairs, name


@pytest.mark.parametrize("name", ("part_lives_on", "part_is_output"))
def test_concat_part_read_later_is_never_overlapped(concat_models, name):
    """A part read after the concat (by a later layer, or a graph output) never shares bytes
    with the concat's output."""
    graph = load_model(concat_models[name]).graph
    concat = next(n for n in graph.nodes if n.op == "Concat")
    later = {n for node in graph.nodes[graph.nodes.index(concat) + 1:] for n in node.inputs} | \
        set(graph.outputs)
    kept = [p for p in concat.inputs if p in later]
    assert kept, name
    for kernels in ("portable", "cmsis-nn"):
        _, pairs = _concat_overlaps(concat_models[name], kernels)
        assert not [p for p, _ in pairs if p in kept], (name, kernels, pairs)


@pytest.mark.parametrize("kernels", ("portable", "cmsis-nn"))
def test_unet_arena_is_at_most_0_7_of_tflite_micros(concat_models, kernels):
    """The U-Net whose channel Concat was the peak: now within issue 24's 0.7x of TFLite
    Micro's arena, the ResizeNearest before its head writing over its input too."""
    from qconvert.c_export.model.render import ModelOptions, render_model
    from qconvert.c_export.model.prepare import prepare_model

    path = concat_models["unet_small"]
    _, summary = render_model(prepare_model(load_model(path)), ModelOptions(
        "net", kernels, "1x4" if kernels == "portable" else "rowmajor"))
    assert summary.arena_size <= 0.7 * tflm_arena_bytes(path)


def test_movement_overlaps_only_one_call_walking_its_output_in_order():
    """Data movement offers the plan an overlap only for one gather or one box copy walking the
    output in memory order: never with a padding fill (Pad, PadV2: written before the copies)
    or several box copies (Pack, Unpack, Split)."""
    graph = every_op_model().graph
    kinds = {}
    for step in lower_graph(graph, KernelOptions()):
        kinds.setdefault(step.node.op, {c[0] for c in step.plan.overlap or []})
    for op in ("Pad", "PadV2", "Pack", "Unpack", "SplitEqual", "SplitSizes"):
        assert kinds[op] == set(), op
    for op in ("ResizeNearest", "Gather", "Transpose", "StridedSlice"):
        assert kinds[op] == {"reads"}, op


@pytest.mark.parametrize("kernels", ("portable", "cmsis-nn"))
def test_unet_upsampling_writes_over_its_input(concat_models, kernels):
    """The U-Net's last ResizeNearest (x2, four times its input's bytes) writes over its input
    (the plan overlaps them), and the larger Concat (the old peak) holds a part inside its
    output."""
    path = concat_models["unet_small"]
    graph = load_model(path).graph
    steps, plans = _planned(graph, lower_graph(graph, KernelOptions(kernels)),
                            KernelOptions(kernels))
    overlapped = {(steps[k].node.op, x) for k, x, _, _ in plans[-1].overlapped}
    resize = next(n for n in graph.nodes if n.op == "ResizeNearest")
    assert ("ResizeNearest", resize.inputs[0]) in overlapped
    _, pairs = _concat_overlaps(path, kernels)
    sizes = {n.outputs[0]: int(np.prod(graph.tensors[n.outputs[0]].shape))
             for n in graph.nodes if n.op == "Concat"}
    assert max(sizes, key=sizes.get) in {y for _, y in pairs}  # the old peak
