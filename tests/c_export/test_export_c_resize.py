"""`export-c`'s ResizeNearest (kernels/qconvert_nn_resize.c, c_export/model/resize_steps.py): a
source row per output row and a source column per output column instead of a gather index per
output element, bit-exact with TFLite Micro.

Oracles: the TFLite Micro interpreter (`tflite_micro`) on the host binary (gcc) and on
Cortex-M4 (qemu mps2-an386) for RESIZE_NEAREST_NEIGHBOR models built here (int8 and int16,
scale 2 and non-integer scales, align_corners / half_pixel_centers both ways, batch 2,
downscaling) and the corpus U-Net; the memory plan's record of overlaps; the U-Net's
flatbuffer size for its flash.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.export_c_harness import (NEEDS_CMSIS, NEEDS_CROSS, build_cortex_m, image_source,
                                      io_layout, parse, run_qemu, split_image_output)
from helpers.export_c_checks import (assert_bit_exact, check_host16, expected16, export, invoke,
                                     s16_samples)

from qconvert.c_export.model.render import ModelOptions, _planned, render_model
from qconvert.c_export.model.prepare import prepare_model
from qconvert.c_export.model.lowering import lower_graph
from qconvert.c_export.model.steps import KernelOptions
from qconvert.c_export.model.resize_steps import separable_pick
from qconvert.formats.model_io import load_model

CORPUS = Path(__file__).resolve().parents[1] / "models" / "corpus"

# name: (input NHWC shape, output (h, w), align_corners, half_pixel_centers, dtype)
CASES = {
    "x2": ((1, 4, 5, 3), (8, 10), False, False, "int8"),
    "x2_hpc": ((1, 4, 5, 3), (8, 10), False, True, "int8"),
    "frac": ((1, 4, 5, 3), (7, 9), False, False, "int8"),
    "frac_align": ((1, 4, 5, 3), (7, 9), True, False, "int8"),
    "frac_hpc": ((1, 4, 5, 3), (7, 9), False, True, "int8"),
    "down_align": ((1, 9, 7, 2), (4, 3), True, False, "int8"),
    "down_hpc": ((1, 9, 7, 2), (4, 3), False, True, "int8"),
    "batch2": ((2, 3, 4, 5), (6, 7), False, True, "int8"),
    "s16_x2": ((1, 4, 5, 3), (8, 10), False, False, "int16"),
    "s16_frac_align": ((2, 4, 5, 3), (7, 9), True, False, "int16"),
    "s16_frac_hpc": ((1, 5, 4, 3), (7, 9), False, True, "int16"),
}


def _resize_model(shape, size, align, hpc, dtype) -> bytes:
    """x -> Relu -> RESIZE_NEAREST_NEIGHBOR -> Relu: the resize reads and writes arena
    tensors (its input dies there, so the plan may put it inside the output)."""
    from helpers.int8_models import Q8

    n = Q8()
    out_shape = (shape[0], *size, shape[3])
    x = n.input("x", shape, 0.05, 0, dtype=dtype)
    r = n.node("Relu", [x], "r", shape, 0.05, 0, dtype=dtype)
    y = n.node("ResizeNearest", [r, n.const("size", np.asarray(size, np.int32))], "y",
               out_shape, 0.05, 0, dtype=dtype, align_corners=align, half_pixel_centers=hpc)
    n.node("Relu", [y], "z", out_shape, 0.05, 0, dtype=dtype)
    return n.build(["z"])


@pytest.fixture(scope="module")
def resize_models(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("resize")
    out = {}
    for name, case in CASES.items():
        out[name] = folder / f"{name}.tflite"
        out[name].write_bytes(_resize_model(*case))
    return out


def _resize_step(path):
    graph = load_model(path).graph
    return next(s for s in lower_graph(graph, KernelOptions()) if s.node.op == "ResizeNearest")


@pytest.mark.parametrize("kernels", ("portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)))
@pytest.mark.parametrize("name", CASES)
def test_resize_nearest_host_bit_exact_with_tflite_micro(resize_models, tmp_path, name,
                                                          kernels):
    """Every case, both kernel sets, through qconvert_resize_nearest: TFLite Micro's bytes."""
    step = _resize_step(resize_models[name])
    assert "qconvert_resize_nearest(" in step.call.template
    assert "gather" not in step.call.template
    check_host16(resize_models[name], tmp_path / "c", kernels)


@NEEDS_CROSS
def test_resize_nearest_cortex_m4_bit_exact(resize_models, tmp_path):
    """Every case and a gather of whole rows (runs) in one Cortex-M4 firmware image (qemu
    mps2-an386), portable kernels."""
    folder = tmp_path / "image"
    folder.mkdir()
    entries, expected = [], {}
    rows = _gather_model(tmp_path / "rows.tflite", (1, 6, 8, 4), [5, 0, 3, 3], 1, (1, 4, 8, 4))
    for case, path in [*resize_models.items(), ("gather_rows", rows)]:
        name = f"m_{case}"
        files, _ = export(path, tmp_path / name, "portable", name=name)
        for f, data in files.items():
            (folder / f).write_bytes(data)
        graph = load_model(path).graph
        samples = s16_samples(graph, 2)
        entries.append((name, io_layout(graph), samples))
        expected[name] = (path, graph, samples)
    blocks = split_image_output(run_qemu(build_cortex_m(folder, image_source(entries), "m4"),
                                         "m4", timeout=300))
    assert sorted(blocks) == sorted(expected)
    for name, (path, graph, samples) in expected.items():
        got = parse(blocks[name], [np.dtype(graph.tensors[n].dtype) for n in graph.outputs],
                    len(samples))
        assert_bit_exact(got, expected16(path, samples), f"{name} (m4)")


@pytest.mark.parametrize("name", ("x2", "s16_x2", "batch2"))
def test_resize_nearest_writes_over_its_dying_input(resize_models, name):
    """The kernel walks its output in memory order: the plan puts its input inside it (the
    host tests above run those overlapped builds)."""
    path = resize_models[name]
    graph = load_model(path).graph
    steps, plans = _planned(graph, lower_graph(graph, KernelOptions()), KernelOptions())
    resize = next(k for k, s in enumerate(steps) if s.node.op == "ResizeNearest")
    assert any(k == resize for k, _, _, _ in plans[-1].overlapped)
    assert [kind for kind, *_ in steps[resize].plan.overlap] == ["reads"]


@pytest.mark.parametrize("name", CASES)
def test_resize_nearest_flash_is_a_row_and_a_column_table(resize_models, name):
    """Its constants are out_h + out_w int32 source indices, not one per output element."""
    shape, (oh, ow), *_ = CASES[name]
    step = _resize_step(resize_models[name])
    assert sum(np.asarray(v).size * 4 for _, ctype, v in step.arrays) == 4 * (oh + ow)


def test_a_gather_that_no_row_column_pick_expresses_keeps_the_gather(tmp_path):
    """Must not: a GATHER of channels (2, 0, 1, 0) is no box copy and no resize; it stays a
    qconvert_gather with its index table, bit-exact."""
    from helpers.int8_models import Q8

    n = Q8()
    x = n.input("x", (1, 3, 4, 3), 0.05, 0)
    n.node("Gather", [x, n.const("idx", np.asarray([2, 0, 1, 0], np.int32))], "y",
           (1, 3, 4, 4), 0.05, 0, axis=3, batch_dims=0)
    path = tmp_path / "gather.tflite"
    path.write_bytes(n.build(["y"]))
    graph = load_model(path).graph
    step = lower_graph(graph, KernelOptions())[0]
    assert "qconvert_gather_s8(" in step.call.template
    assert "resize" not in step.call.template
    check_host16(path, tmp_path / "c", "portable")


def test_separable_pick_refuses_maps_that_are_not_a_row_column_pick():
    """Must not: a map whose pixels are not (b, rows[y], cols[x]) with every channel in order
    (transposed image, reversed channels, a second source) gets no row / column tables."""
    from qconvert.c_export.model.index_maps import SOURCE_BITS

    dims = (1, 3, 4, 2)
    flat = np.arange(24, dtype=np.int64).reshape(dims)
    assert separable_pick(flat, dims) is not None
    assert separable_pick(flat.reshape(1, 4, 3, 2), dims) is None          # pixels reordered
    assert separable_pick(flat[..., ::-1], dims) is None                   # channels reversed
    assert separable_pick(flat + (1 << SOURCE_BITS), dims) is None         # another input
    swapped = flat.reshape(1, 12, 2)[:, [1, 0] + list(range(2, 12))].reshape(dims)
    assert separable_pick(swapped, dims) is None                           # two pixels swapped


def test_unet_flash_below_its_flatbuffer(tmp_path):
    """The corpus U-Net: its export's constants are no more than its .tflite file's bytes (the
    file holds every weight, int32 bias and per-channel scale and zero point the export turns
    into int32 multipliers and shifts; a gather of its 64x64x8 upsampling alone was 128 KB),
    and its ResizeNearest keeps 4 x (64 + 64) bytes."""
    path = tmp_path / "unet.tflite"
    result = invoke(["quantize", CORPUS / "unet_small.onnx", "--calibration",
                      CORPUS / "unet_small_calib.npy", "-o", path])
    assert result.exit_code == 0, result.output
    for kernels in ("portable", "cmsis-nn"):
        _, summary = render_model(prepare_model(load_model(path)), ModelOptions(
            "net", kernels, "1x4" if kernels == "portable" else "rowmajor"))
        assert summary.constant_bytes <= path.stat().st_size, kernels
    step = _resize_step(path)
    assert sum(np.asarray(v).size * 4 for _, _, v in step.arrays) == 4 * (64 + 64)


def _gather_model(path, shape, indices, axis, out_shape, dtype="int8"):
    """x -> Relu -> GATHER(indices, axis) -> Relu (the gather's input dies at it)."""
    from helpers.int8_models import Q8

    n = Q8()
    x = n.input("x", shape, 0.05, 0, dtype=dtype)
    r = n.node("Relu", [x], "r", shape, 0.05, 0, dtype=dtype)
    g = n.node("Gather", [r, n.const("idx", np.asarray(indices, np.int32))], "g", out_shape,
               0.05, 0, dtype=dtype, axis=axis, batch_dims=0)
    n.node("Relu", [g], "z", out_shape, 0.05, 0, dtype=dtype)
    path.write_bytes(n.build(["z"]))
    return path


@pytest.mark.parametrize("kernels", ("portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)))
def test_gather_of_whole_rows_is_runs_bit_exact(tmp_path, kernels):
    """A GATHER of rows (5, 0, 3, 3) of a (1, 6, 8, 4) map is no box copy: it becomes four
    runs of 32 bytes (8 int32 of flash instead of 128), over its dying input, bit-exact."""
    path = _gather_model(tmp_path / "rows.tflite", (1, 6, 8, 4), [5, 0, 3, 3], 1, (1, 4, 8, 4))
    graph = load_model(path).graph
    steps, plans = _planned(graph, lower_graph(graph, KernelOptions(kernels)),
                            KernelOptions(kernels))
    k = next(k for k, s in enumerate(steps) if s.node.op == "Gather")
    assert "qconvert_gather_runs(" in steps[k].call.template
    runs = next(v for name, _, v in steps[k].arrays if name == "runs0")
    np.testing.assert_array_equal(np.asarray(runs).reshape(-1, 2),
                                  [[5 * 32, 32], [0, 32], [3 * 32, 32], [3 * 32, 32]])
    assert any(j == k for j, _, _, _ in plans[-1].overlapped)
    check_host16(path, tmp_path / "c", kernels)


def test_gather_with_short_runs_keeps_the_element_gather(tmp_path):
    """Must not: indices (9, 0, 3, 3, 1, 2, 4, 5) of a (1, 10) tensor make six runs for eight
    elements (12 int32 against 8): the element gather stays."""
    path = _gather_model(tmp_path / "short.tflite", (1, 10), [9, 0, 3, 3, 1, 2, 4, 5], 1, (1, 8))
    step = next(s for s in lower_graph(load_model(path).graph, KernelOptions())
                if s.node.op == "Gather")
    assert "qconvert_gather_s8(" in step.call.template and "runs" not in step.call.template
    check_host16(path, tmp_path / "c", "portable")
