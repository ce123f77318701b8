"""The fast int8 Conv2D and FullyConnected kernels of `export-c --kernels portable`
(kernels/qconvert_nn_convfc.c: int16 im2col of two pixels, 2x2 output blocking with SMLAD, the
four-row fully connected kernel) against TFLite Micro.

Oracles: the TFLite Micro interpreter (reference kernels) for every output of one-layer models
on random shapes (odd channel counts, counts not multiple of 4, pads on every side, strides 2,
dilation, batches > 1, per-tensor and per-channel quantization, fused clamps, a left shift, zero
and non-zero offsets; grouped convolutions of 2, 4 and 8 groups with odd channels per group)
and of the test models; built by gcc on the host (the plain C path) and
by arm-none-eabi-gcc for Cortex-M3 (mps2-an385, no DSP: plain C), Cortex-M4 (mps2-an386, the
DSP intrinsics) and Cortex-M55 (mps3-an547) under qemu, one firmware image per board. The memory
plan's band overlap is checked against an independent replay of the kernel's read and write
order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.export_c_harness import (NEEDS_CMSIS, NEEDS_CROSS, build_cortex_m, build_host,
                                      image_source, io_layout, parse, run_qemu,
                                      split_image_output)
from helpers.export_c_checks import assert_bit_exact, expected, int8_samples
from helpers.export_c_images import run_image
from helpers.int8_models import CONV, Q8, int8_feeds, tflm

from qconvert.c_export.model.memory_plan import PlanStep, plan_memory
from qconvert.c_export.model.render import ModelOptions, render_model
from qconvert.c_export.model.prepare import prepare_model
from qconvert.c_export.model.steps_fast import conv_bands, conv_weights
from qconvert.formats.model_io import load_model
from qconvert.padding import same_pads

ROOT = Path(__file__).resolve().parents[2]

# id: (batch, h, w, cin, cout, kernel, strides, dilations, padding, activation, z_in,
#      per-channel)
CONV_CASES = {
    "cin3_cout5_stride2_same": (1, 9, 8, 3, 5, (3, 3), (2, 2), (1, 1), "SAME", "RELU", -128,
                                True),
    "cin8_cout7_k4x3_pads_every_side": (1, 7, 6, 8, 7, (4, 3), (1, 1), (1, 1), "SAME", "RELU6",
                                        5, True),
    "cin5_dilation2_valid": (1, 10, 9, 5, 4, (3, 2), (1, 1), (2, 2), "VALID", "NONE", 127,
                             False),
    "batch3_cin4_stride2x1_zero_offset": (3, 6, 7, 4, 6, (3, 3), (2, 1), (1, 1), "SAME", "NONE",
                                          0, True),
    "pointwise_batch2_odd_pixels": (2, 5, 3, 12, 9, (1, 1), (1, 1), (1, 1), "VALID", "RELU", -7,
                                    True),
    "pointwise_stride2": (1, 6, 6, 8, 8, (1, 1), (2, 2), (1, 1), "VALID", "NONE", 3, False),
    "pointwise_cin1_cout1": (1, 4, 5, 1, 1, (1, 1), (1, 1), (1, 1), "VALID", "NONE", 20, True),
    "pointwise_cin6_same_stride2": (1, 5, 5, 6, 3, (1, 1), (2, 2), (1, 1), "SAME", "NONE", -1,
                                    True),
    "one_output_pixel": (1, 3, 3, 6, 3, (3, 3), (1, 1), (1, 1), "VALID", "RELU", 9, True),  # FC
    "kws_like_10x4_cin1_stride2": (1, 25, 10, 1, 16, (10, 4), (2, 2), (1, 1), "SAME", "RELU",
                                   -30, True),
    "cin16_cout16_3x3_same": (1, 8, 8, 16, 16, (3, 3), (1, 1), (1, 1), "SAME", "NONE", -128,
                              True),
}

# id: (case as CONV_CASES, groups): channels per group odd / not multiples of 4
GROUPED_CASES = {
    "g2_cin3_cout5_per_group_stride2_same": ((1, 9, 8, 6, 10, (3, 3), (2, 2), (1, 1), "SAME",
                                              "RELU", -128, True), 2),
    "g4_cin5_cout3_per_group_pads_batch2": ((2, 7, 6, 20, 12, (4, 3), (1, 1), (1, 1), "SAME",
                                             "RELU6", 5, True), 4),
    "g8_cin3_cout6_per_group_dilation2": ((1, 10, 9, 24, 48, (3, 2), (1, 1), (2, 2), "VALID",
                                           "NONE", 127, False), 8),
    "g4_cin6_cout7_per_group_stride2x1": ((2, 6, 7, 24, 28, (3, 3), (2, 1), (1, 1), "SAME",
                                           "NONE", 0, True), 4),
    "g2_pointwise_cin7_cout1_per_group_odd_pixels": ((1, 5, 3, 14, 2, (1, 1), (1, 1), (1, 1),
                                                      "VALID", "RELU", -7, True), 2),
    # one input row, a 1x5 kernel, stride 2, pads 2: CMSIS-NN's 1xN geometry, not its path
    "g2_one_row_k1x5_stride2": ((1, 1, 13, 8, 6, (1, 5), (1, 2), (1, 1), "SAME", "NONE", -7,
                                 True), 2),
}

# id: (case as CONV_CASES, a fully connected layer?): one output pixel per image
WHOLE_CASES = {
    "whole_3x5_cin7": ((1, 3, 5, 7, 9, (3, 5), (1, 1), (1, 1), "VALID", "RELU", -5, True),
                       True),
    "whole_1x3_cin40_streaming": ((1, 1, 3, 40, 32, (1, 3), (1, 1), (1, 1), "VALID", "NONE",
                                   -128, True), True),
    "whole_batch2_per_tensor": ((2, 4, 4, 3, 5, (4, 4), (1, 1), (1, 1), "VALID", "RELU6", 7,
                                 False), True),
    # must not: one output pixel whose window is not the whole image (stride 3 over 5x5)
    "one_pixel_window_inside": ((1, 5, 5, 4, 6, (3, 3), (3, 3), (1, 1), "VALID", "NONE", 3,
                                 True), False),
}

# id: (batches, depth, units, per-channel, weights zero point, activation, z_in)
FC_CASES = {
    "depth13_units7": (1, 13, 7, False, 0, "RELU", 11),
    "batches3_depth20_units8_per_channel": (3, 20, 8, True, 0, "NONE", -128),
    "depth3_units5": (1, 3, 5, False, 0, "RELU6", 0),
    "depth40_units12_weights_offset": (1, 40, 12, False, 3, "NONE", 17),
    "depth9_units5_weights_offset_batches2": (2, 9, 5, False, -5, "RELU", -60),
}


def _out(size, k, stride, dil, padding):
    eff = (k - 1) * dil + 1
    return -(-size // stride) if padding == "SAME" else (size - eff) // stride + 1


def conv_model(case, seed=0, group=1, left_shift=False) -> bytes:
    """A one-layer int8 Conv2D model of `case` (CONV_CASES), its output quantization fitted
    to what TFLite Micro computes (or, with `left_shift`, a scale that makes the requantization
    shift left)."""
    b, h, w, cin, cout, (kh, kw), strides, dil, padding, act, z_in, per_channel = case
    n = Q8(seed)
    s_in = 0.05
    x = n.input("x", (b, h, w, cin), s_in, z_in)
    wt, s_w = n.weights("w", (cout, kh, kw, cin // group), 0, per_channel)
    bias = n.bias("b", s_in, s_w, cout)
    oh, ow = _out(h, kh, strides[0], dil[0], padding), _out(w, kw, strides[1], dil[1], padding)
    pads = same_pads((h, w), (kh, kw), strides, dil) if padding == "SAME" else [0] * 4
    coarse = s_in * float(s_w.max()) * 255 * 128 * kh * kw * cin / 100
    n.node("Conv2D", [x, wt, bias], "y", (b, oh, ow, cout), coarse, 0,
           **dict(CONV, kernel_shape=[kh, kw], strides=list(strides), dilations=list(dil),
                  pads=pads, group=group, activation="NONE"))
    if left_shift:
        n.g.tensors["y"].quant = n._q(s_in * float(s_w.min()) / 6.0, -3)
    else:
        n.fit("y", int8_feeds(n.g, 3, seed))
    n.g.nodes[-1].attrs["activation"] = act
    return n.build(["y"])


def fc_model(case, seed=0) -> bytes:
    """A one-layer int8 FullyConnected model of `case` (FC_CASES)."""
    batches, depth, units, per_channel, w_zp, act, z_in = case
    n = Q8(seed)
    s_in = 0.03
    x = n.input("x", (batches, depth), s_in, z_in)
    data = n.rng.integers(-127, 128, (units, depth)).astype(np.int8)
    scales = n.rng.uniform(0.002, 0.02, units if per_channel else 1).astype(np.float32)
    wt = n.const("w", data, scales, w_zp, 0)
    bias = n.bias("b", s_in, scales, units)
    coarse = s_in * float(scales.max()) * 255 * 255 * depth / 100
    n.node("FullyConnected", [x, wt, bias], "y", (batches, units), coarse, 0,
           activation="NONE", keep_num_dims=False)
    if per_channel:
        n.g.nodes[-1].origin["version"] = 12
    n.fit("y", int8_feeds(n.g, 3, seed))
    n.g.nodes[-1].attrs["activation"] = act
    return n.build(["y"])


def _case_samples(path: Path, count=3) -> list:
    """Random int8 inputs: wide, and close to the input zero point (what a left shift needs)."""
    graph = load_model(path).graph
    t = graph.tensors[graph.inputs[0]]
    z = int(t.quant.zero_point[0])
    rng = np.random.default_rng(7)
    out = []
    for k in range(count):
        lo, hi = (-128, 128) if k % 2 == 0 else (max(z - 2, -128), min(z + 3, 128))
        out.append([rng.integers(lo, hi, size=t.shape).astype(np.int8)])
    return out


@pytest.fixture(scope="module")
def case_models(tmp_path_factory) -> dict:
    """{name: path} of every one-layer model of this file."""
    folder = tmp_path_factory.mktemp("fast_cases")
    built = {f"conv_{k}": conv_model(c, seed=i) for i, (k, c) in enumerate(CONV_CASES.items())}
    built.update({f"conv_grouped_{k}": conv_model(c, seed=20 + i, group=g)
                  for i, (k, (c, g)) in enumerate(GROUPED_CASES.items())})
    built.update({f"conv_{k}": conv_model(c, seed=40 + i)
                  for i, (k, (c, _)) in enumerate(WHOLE_CASES.items())})
    built["conv_left_shift"] = conv_model(CONV_CASES["cin8_cout7_k4x3_pads_every_side"], 5,
                                          left_shift=True)
    built.update({f"fc_{k}": fc_model(c, seed=i) for i, (k, c) in enumerate(FC_CASES.items())})
    out = {}
    for name, data in built.items():
        out[name] = folder / f"{name}.tflite"
        out[name].write_bytes(data)
    return out


def _export_into(folder: Path, path: Path, name: str) -> str:
    """Export `path` as model `name` into the shared folder; its NAME.c text."""
    files, _ = render_model(prepare_model(load_model(path)),
                            ModelOptions(name=name, kernels="portable",
                                         fc_layout="1x4"))
    folder.mkdir(parents=True, exist_ok=True)
    for f, data in files.items():
        if (folder / f).exists():
            assert (folder / f).read_bytes() == data, f  # kernels: the same for every model
        else:
            (folder / f).write_bytes(data)
    return files[f"{name}.c"].decode()


def _run_image(folder: Path, paths: dict, board: str | None, samples: dict) -> None:
    """Every model of `paths` in one image (host or `board`), checked against TFLite Micro."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, path in paths.items():
        _export_into(folder, path, name)
        entries.append((name, io_layout(load_model(path).graph), samples[name]))
    if board is None:
        exe = build_host(folder, image_source(entries))
        text = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    else:
        # the Cortex-M55 board's flash is its 512 KB ITCM: the constants of every case go to RAM
        text = run_qemu(build_cortex_m(folder, image_source(entries), board,
                                       rodata_in_ram=board == "m55"), board, timeout=600)
    blocks = split_image_output(text)
    assert sorted(blocks) == sorted(paths)
    for name, path in paths.items():
        graph = load_model(path).graph
        got = parse(blocks[name], [np.dtype(graph.tensors[n].dtype) for n in graph.outputs],
                    len(samples[name]))
        assert_bit_exact(got, expected(path, samples[name]), f"{name} ({board or 'host'})")


def test_every_case_takes_the_fast_kernels(case_models, tmp_path):
    """The cases exercise the new kernels (else the bit-exactness tests prove nothing)."""
    for name, path in case_models.items():
        text = _export_into(tmp_path, path, name)
        whole = WHOLE_CASES.get(name[5:], (None, False))[1] or name == "conv_one_output_pixel"
        fn = "qconvert_conv_fast_s8" if name.startswith("conv_") and not whole \
            else "qconvert_fc_fast_s8"
        assert fn + "(" in text, name
        assert ("qconvert_conv_fast_s8(" in text) == (not whole and fn != "qconvert_fc_fast_s8")


def test_host_cases_bit_exact_with_tflite_micro(case_models, tmp_path):
    samples = {name: _case_samples(path) for name, path in case_models.items()}
    _run_image(tmp_path / "host", case_models, None, samples)


@NEEDS_CROSS
@pytest.mark.parametrize("board", ["m3", "m4", "m55"])
def test_cortex_m_models_and_cases_bit_exact(models, case_models, tmp_path, board):
    """One image per board: the test models and every case (Cortex-M3: the plain C path;
    M4 and M55: the DSP intrinsics)."""
    paths = {f"m_{k}": v for k, v in models.items()}
    samples = {f"m_{k}": int8_samples(load_model(v).graph, k, count=2) for k, v in models.items()}
    paths.update(case_models)
    samples.update({name: _case_samples(path, 2) for name, path in case_models.items()})
    _run_image(tmp_path / board, paths, board, samples)


# -- must not: the layers that keep the generic kernels ----------------------------------------
def test_depthwise_16x8_and_rowmajor_layers_keep_the_generic_kernels(tmp_path):
    kws = ROOT / "tests" / "models" / "kws_ref_model.tflite"
    text = _export_into(tmp_path / "k", kws, "kws")
    assert text.count("qconvert_conv_fast_s8(") == 5  # the convolutions; not the 4 depthwise
    assert text.count("qconvert_dw_s8(") == 4  # depthwise: its own kernel
    conv16 = ROOT / "tests" / "models" / "int16" / "conv_16x8.tflite"
    text = _export_into(tmp_path / "c16", conv16, "c16")
    assert "qconvert_conv_s16(" in text and "_fast_s8(" not in text
    ad01 = load_model(ROOT / "tests" / "models" / "ad01_int8.tflite")
    files, _ = render_model(prepare_model(ad01),
                            ModelOptions(name="ad", kernels="portable", fc_layout="rowmajor"))
    text = files["ad.c"].decode()
    assert "qconvert_fc_s8(" in text and "qconvert_fc_fast_s8(" not in text
    # --kernels cmsis-nn: Helium builds keep CMSIS-NN's convolution and fully connected (faster
    # there than these DSP kernels), the others take the fast ones; depthwise stays CMSIS-NN's
    files, _ = render_model(prepare_model(load_model(kws)),
                            ModelOptions(name="kc", kernels="cmsis-nn",
                                         fc_layout="rowmajor"))
    text = files["kc.c"].decode()
    for cmsis, fast in (("arm_convolve_wrapper_s8(", "qconvert_conv_fast_s8("),
                        ("arm_fully_connected_s8(", "qconvert_fc_fast_s8(")):
        at = text.index(fast)
        before = text[:at]
        assert cmsis in before[before.rindex("#if (defined(__ARM_FEATURE_MVE)"):]
        assert before.rstrip().endswith("#else")
    assert text.count("arm_depthwise_conv_wrapper_s8(") >= 4


def grouped_chain_model(seed=0, h=12, w=10, c=16, groups=4, out_c=32) -> bytes:
    """A 1x1 Conv2D then a grouped 3x3 one (SAME) whose output the plan puts over its dying
    input: --kernels cmsis-nn calls CMSIS-NN on it band by band on Helium builds."""
    n = Q8(seed)
    x = n.input("x", (1, h, w, c), 0.05, -3)
    wt, s_w = n.weights("w0", (c, 1, 1, c), 0)
    b = n.bias("b0", 0.05, s_w, c)
    n.node("Conv2D", [x, wt, b], "a", (1, h, w, c), 0.05 * float(s_w.max()) * 255 * 128 * c / 50,
           0, **dict(CONV, kernel_shape=[1, 1], pads=[0] * 4))
    n.fit("a", int8_feeds(n.g, 2, seed))
    wt, s_w = n.weights("w1", (out_c, 3, 3, c // groups), 0)
    b = n.bias("b1", 0.05, s_w, out_c)
    n.node("Conv2D", ["a", wt, b], "y", (1, h, w, out_c),
           0.05 * float(s_w.max()) * 255 * 128 * 9 * c / 50, 0,
           **dict(CONV, kernel_shape=[3, 3], pads=same_pads((h, w), (3, 3), (1, 1), (1, 1)),
                  group=groups))
    n.fit("y", int8_feeds(n.g, 2, seed))
    return n.build(["y"])


def _cmsis_text(path_or_bytes, name: str, tmp_path: Path) -> str:
    if isinstance(path_or_bytes, bytes):
        (tmp_path / f"{name}.tflite").write_bytes(path_or_bytes)
        path_or_bytes = tmp_path / f"{name}.tflite"
    files, summary = render_model(prepare_model(load_model(path_or_bytes)), ModelOptions(
        name=name, kernels="cmsis-nn", fc_layout="rowmajor"))
    return files[f"{name}.c"].decode(), summary


def test_grouped_conv_with_cmsis_nn_calls_cmsis_nn_on_helium_and_the_fast_kernel_elsewhere(
        case_models, tmp_path):
    """A grouped Conv2D with --kernels cmsis-nn: Helium builds call arm_convolve_wrapper_s8
    (which sends it to arm_convolve_s8, group after group: the channels of the filter dims are
    a group's, not the input's), the other builds the fast kernel (must not: the portable
    generic kernel)."""
    path = case_models["conv_grouped_g4_cin5_cout3_per_group_pads_batch2"]
    text, _ = _cmsis_text(path, "gc", tmp_path)
    assert "qconvert_conv_s8(" not in text
    assert "static const cmsis_nn_dims l0_filter_dims = {12, 4, 3, 5};" in text
    at = text.index("qconvert_conv_fast_s8(")
    before = text[:at]
    helium = before[before.rindex("#if (defined(__ARM_FEATURE_MVE)"):]
    assert "arm_convolve_wrapper_s8(" in helium and before.rstrip().endswith("#else")
    # the chain: the grouped layer's output over its input, CMSIS-NN called band by band
    text, summary = _cmsis_text(grouped_chain_model(), "gb", tmp_path)
    assert summary.overlapped == 1 and "band by band" in text
    assert "static const cmsis_nn_dims l1_filter_dims = {32, 3, 3, 4};" in text


@NEEDS_CMSIS
@pytest.mark.parametrize("board", [None, pytest.param("m4", marks=NEEDS_CROSS),
                                   pytest.param("m55", marks=NEEDS_CROSS)])
def test_grouped_conv_cmsis_nn_bit_exact_with_tflite_micro(case_models, board, tmp_path):
    """Every grouped case, the banded chain and the one-pixel cases with --kernels cmsis-nn,
    against TFLite Micro: the host and Cortex-M4 builds run the fast kernels (a whole-window
    layer qconvert_fc_fast_s8), Cortex-M55 CMSIS-NN's Helium arm_convolve_s8 (whole layer, and
    band by band)."""
    models = {k: Path(v).read_bytes() for k, v in case_models.items()
              if k.startswith("conv_grouped_") or k[5:] in WHOLE_CASES}
    models["grouped_chain"] = grouped_chain_model()
    run_image(models, tmp_path / (board or "host"), board, kernels="cmsis-nn")


def test_grouped_conv_weights_are_each_groups_own_order():
    w = np.arange(6 * 1 * 1 * 3, dtype=np.int64).reshape(6, 1, 1, 3).astype(np.int8)
    got = conv_weights(w, 2)
    per_group = [conv_weights(w[:3]), conv_weights(w[3:])]
    assert got.tolist() == np.concatenate(per_group).tolist()
    # group 0: channels 0, 1 interleaved (rows padded to 4), then channel 2's row
    assert per_group[0].tolist() == [0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 8, 0]


def test_negative_multipliers_keep_the_generic_kernels(tmp_path, monkeypatch):
    """The fast kernels' requantization assumes multipliers >= 0 (TFLite's always are): a
    layer with a negative one must keep qconvert_conv_s8 / qconvert_fc_1x4_s8."""
    from qconvert.c_export.model import steps as model_steps

    real = model_steps.layer_params

    def negative(graph, node):
        p = dict(real(graph, node))
        if node.op in ("Conv2D", "FullyConnected"):
            p["output_multiplier"] = -np.abs(np.asarray(p["output_multiplier"]))
        return p

    monkeypatch.setattr(model_steps, "layer_params", negative)
    kws_model = load_model(ROOT / "tests" / "models" / "kws_ref_model.tflite")
    files, _ = render_model(prepare_model(kws_model),
                            ModelOptions(name="neg", kernels="portable", fc_layout="1x4"))
    text = files["neg.c"].decode()
    assert "qconvert_conv_s8(" in text and "qconvert_fc_1x4_s8(" in text
    assert "qconvert_conv_fast_s8(" not in text and "qconvert_fc_fast_s8(" not in text


# -- the weight order ------------------------------------------------------------------------
def test_conv_weights_pad_rows_and_interleave_channel_pairs():
    w = np.arange(5 * 1 * 2 * 3, dtype=np.int64).reshape(5, 1, 2, 3).astype(np.int8)
    got = conv_weights(w).astype(np.int64)
    rows = np.zeros((5, 8), np.int64)
    rows[:, :6] = w.reshape(5, 6)
    want = []
    for pair in range(2):
        for g in range(2):
            want += list(rows[2 * pair, 4 * g:4 * g + 4]) + list(rows[2 * pair + 1, 4 * g:4 * g + 4])
    want += list(rows[4])
    assert got.tolist() == want


# -- the memory plan -------------------------------------------------------------------------
def _replay_pairs(in_shape, out_shape, kernel, strides, dilations, pads, d) -> None:
    """Replay qconvert_conv_fast_s8's order with its output at displacement d from its input:
    the columns of pixels 2j, 2j + 1 of each image read every input byte of their windows,
    then their outputs are written; no read may see a byte an earlier write replaced."""
    n, h, w, c = in_shape
    _, oh, ow, oc = out_shape
    written_end = d  # input-relative bytes [d, written_end) hold outputs
    for b in range(n):
        for first in range(0, oh * ow, 2):
            pixels = [p for p in (first, first + 1) if p < oh * ow]
            for p in pixels:
                oy, ox = divmod(p, ow)
                for ky in range(kernel[0]):
                    y = oy * strides[0] - pads[0] + ky * dilations[0]
                    for kx in range(kernel[1]):
                        x = ox * strides[1] - pads[1] + kx * dilations[1]
                        if 0 <= y < h and 0 <= x < w:
                            lowest = ((b * h + y) * w + x) * c
                            assert not (lowest < written_end and lowest + c > d), (b, p, y, x)
            written_end = d + (b * oh * ow + pixels[-1] + 1) * oc


@pytest.mark.parametrize("case", [
    ((1, 9, 9, 8), (1, 9, 9, 8), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 8, 8, 16), (1, 4, 4, 32), (3, 3), (2, 2), (1, 1), (0, 0, 1, 1)),
    ((2, 5, 5, 8), (2, 5, 5, 4), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 7, 3, 4), (1, 7, 3, 12), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 10, 6, 2), (1, 6, 6, 2), (3, 1), (1, 1), (2, 1), (0, 0, 0, 0)),
])
def test_plan_overlaps_the_fast_conv_only_as_its_pairs_allow(case):
    """The planner's band overlap of the fast conv, replayed access by access; and it does
    overlap (the output shares bytes with the input when that saves room)."""
    in_shape, out_shape, kernel, strides, dilations, pads = case
    ends, reads = conv_bands(in_shape, out_shape, kernel, strides, dilations, pads)
    sizes = {"x": int(np.prod(in_shape)), "y": int(np.prod(out_shape)), "z": 4}
    steps = [PlanStep(["x"], ["y"], overlap=[("tiles", 0, ends, reads)], scratch=64),
             PlanStep(["y"], ["z"])]
    plan = plan_memory(sizes, steps, ["x"], ["z"])
    if plan.overlapped:
        (_, _, _, d), = plan.overlapped
        _replay_pairs(in_shape, out_shape, kernel, strides, dilations, pads, d)
    assert plan.overlapped or sizes["y"] > sizes["x"], "no overlap where one saves room"


def test_plan_of_a_larger_displacement_fails_the_replay():
    """The replay can fail: one byte more of overlap than the bands allow is caught."""
    case = ((1, 9, 9, 8), (1, 9, 9, 8), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    in_shape, out_shape, kernel, strides, dilations, pads = case
    ends, reads = conv_bands(in_shape, out_shape, kernel, strides, dilations, pads)
    sizes = {"x": int(np.prod(in_shape)), "y": int(np.prod(out_shape)), "z": 4}
    plan = plan_memory(sizes, [PlanStep(["x"], ["y"], overlap=[("tiles", 0, ends, reads)]),
                               PlanStep(["y"], ["z"])], ["x"], ["z"])
    (_, _, _, d), = plan.overlapped
    with pytest.raises(AssertionError):
        _replay_pairs(in_shape, out_shape, kernel, strides, dilations, pads, d + 1)


def test_fast_conv_overlaps_in_a_real_model_and_stays_bit_exact(tmp_path):
    """ResNet-8's plan puts some fast conv outputs over their inputs (the bands), and the
    firmware built from it matches TFLite Micro (host)."""
    path = ROOT / "tests" / "models" / "pretrainedResnet_quant.tflite"
    graph = load_model(path).graph
    files, summary = render_model(prepare_model(load_model(path)),
                                  ModelOptions(name="r", kernels="portable",
                                               fc_layout="1x4"))
    assert summary.overlapped > 0
    samples = {"r": int8_samples(graph, "pretrainedResnet_quant", count=2)}
    _run_image(tmp_path / "r", {"r": path}, None, samples)


def test_grouped_fast_conv_in_a_real_model_stays_bit_exact(tmp_path):
    """regnet_small (corpus; grouped 3x3 convolutions, groups 2 and 4) quantized, its grouped
    layers on the fast kernel, the whole firmware (its plan's overlaps included) matching
    TFLite Micro on the host."""
    corpus = ROOT / "tests" / "models" / "corpus"
    path = tmp_path / "regnet_small.tflite"
    subprocess.run([sys.executable, "-m", "qconvert.cli", "quantize",
                    str(corpus / "regnet_small.onnx"), "--calibration",
                    str(corpus / "regnet_small_calib.npy"), "-o", str(path)],
                   check=True, capture_output=True, cwd=ROOT)
    text = _export_into(tmp_path / "e", path, "rg")
    assert "qconvert_conv_s8(" not in text
    graph = load_model(path).graph
    grouped = [n for n in graph.nodes if n.op == "Conv2D" and graph.tensors[n.inputs[1]].shape[3]
               != graph.tensors[n.inputs[0]].shape[3]]
    assert len(grouped) == 3
    samples = {"rg": _case_samples(path, 2)}
    _run_image(tmp_path / "rh", {"rg": path}, None, samples)


# -- the short requantization: only where it is exact -----------------------------------------
def test_small_accumulators_only_below_2_pow_30_and_without_left_shifts():
    """`small` (the SMMULR requantization) must not be promised when an accumulator can reach
    2^30 (bias included, weights offset included) or when a shift is a left shift."""
    from qconvert.c_export.model.steps_fast import small_accumulators

    w = np.full((2, 1000), -127, np.int8)  # |sum| <= 1000 * 127 * 128 = 16,256,000
    assert small_accumulators(w, None, 0, 0, [0, -3]) == 1
    assert small_accumulators(w, None, 0, 0, [1, -3]) == 0  # a left shift
    assert small_accumulators(w, np.array([2**30 - 16_256_001, 0]), 0, 0, [0, 0]) == 1
    assert small_accumulators(w, np.array([2**30 - 16_256_000, 0]), 0, 0, [0, 0]) == 0
    assert small_accumulators(w, np.array([0, -(2**30)]), 0, 0, [0, 0]) == 0
    # x + input_offset up to 256 in magnitude; weights + offset up to 255
    big = np.full((1, 16_500), -128, np.int8)
    assert small_accumulators(big, None, 0, 0, [0]) == 1       # 16500 * 128 * 128 < 2^30
    assert small_accumulators(big, None, -128, 0, [0]) == 1    # * 256: 540,672,000 < 2^30
    assert small_accumulators(big, None, -128, -127, [0]) == 0  # * 255 * 256 > 2^30
