"""export-c --kernels cmsis-nn on Cortex-M55 (Helium): a 1x1 convolution or a depthwise one
whose output overlaps its dying input is one whole-layer CMSIS-NN call, not one call per row
(qconvert.c_export.model.helium_tiles.py).

Oracles: an independent replay of the read and write order of CMSIS-NN's MVE kernels (read by
hand from arm_nn_mat_mult_nt_t_s8 and arm_depthwise_conv_s8_opt) at the plan's displacement:
no read may see a byte an earlier write replaced, and the replay must fail within one block of
four pixels' outputs above it (the bound is not looser than that); the
TFLite Micro interpreter against the export built for the host, Cortex-M4 and Cortex-M55 on a
DS-CNN-like chain whose plan overlaps those layers. Must not: the layers whose Helium call takes
another path (a strided or grouped 1x1, a depthwise convolution over more than 124 channels,
with a depth multiplier, on a batch of 2, dilated, or one channel into many) get no candidate.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers.export_c_harness import NEEDS_CMSIS, NEEDS_CROSS
from helpers.export_c_images import export_models, run_image
from helpers.int8_models import CONV, Q8, int8_feeds

from qconvert.c_export.model.helium_tiles import helium_tiles, merged
from qconvert.c_export.model.memory_plan import PlanStep, plan_memory
from qconvert.padding import same_pads

P1 = {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0]}


def _replay_1x1(pixels, cin, cout, d) -> None:
    """arm_nn_mat_mult_nt_t_s8 (MVE) with the output at displacement d: four pixels at a
    time, for each output channel the four pixels' rows read, then that channel of the four
    written; then each last pixel: each channel read the whole row, channels written by four
    (the remainder at the end)."""
    written = set()

    def read(p):
        for k in range(p * cin, (p + 1) * cin):
            assert k not in written, (p, k)

    def write(p, ch):
        written.add(d + p * cout + ch)

    full = pixels // 4 * 4
    for b in range(0, full, 4):
        for ch in range(cout):
            for p in range(b, b + 4):
                read(p)
            for p in range(b, b + 4):
                write(p, ch)
    for p in range(full, pixels):
        pending = []
        for ch in range(cout):
            read(p)
            pending.append(ch)
            if len(pending) == 4:
                for c in pending:
                    write(p, c)
                pending = []
        for c in pending:
            write(p, c)


def _replay_dw(h, w, c, kernel, stride, pads, oh, ow, d) -> None:
    """arm_depthwise_conv_s8_opt (MVE, one block of channels) at displacement d: the windows of
    four output pixels copied, then their outputs written; the last ones written at the end."""
    written = set()
    pending = []
    for p in range(oh * ow):
        oy, ox = divmod(p, ow)
        for ky in range(kernel):
            for kx in range(kernel):
                y, x = oy * stride - pads[0] + ky, ox * stride - pads[1] + kx
                if 0 <= y < h and 0 <= x < w:
                    for k in range((y * w + x) * c, (y * w + x + 1) * c):
                        assert k not in written, (p, k)
        pending.append(p)
        if len(pending) == 4:
            written.update(d + q * c + ch for q in pending for ch in range(c))
            pending = []
    written.update(d + q * c + ch for q in pending for ch in range(c))


def _first_failure(replay, d, limit) -> int:
    """The smallest displacement >= d (in steps of 4) where `replay` fails (<= d + limit)."""
    for trial in range(d, d + limit + 5, 4):
        try:
            replay(trial)
        except AssertionError:
            return trial
    raise AssertionError(f"the replay never fails up to {d + limit}")


def _plan_d(candidate, in_size, out_size) -> int:
    """The plan's displacement of a step's output over its dying input with `candidate`."""
    sizes = {"x": in_size, "y": out_size, "z": 4}
    plan = plan_memory(sizes, [PlanStep(["x"], ["y"], overlap=[candidate]),
                               PlanStep(["y"], ["z"])], ["x"], ["z"])
    (_, _, _, d), = plan.overlapped
    return d


@pytest.mark.parametrize("pixels,cin,cout", [(125, 48, 48), (7, 16, 8), (10, 8, 24), (9, 5, 5)])
def test_1x1_candidate_replays_and_is_at_most_one_block_loose(pixels, cin, cout):
    """The plan's displacement passes the replay; the replay fails within one block of four
    pixels' outputs above it (the block bound: writes anywhere in the block before its reads)."""
    cand = helium_tiles((1, 1, pixels, cin), (1, 1, pixels, cout), (1, 1), P1, False, cin)
    d = _plan_d(cand, pixels * cin, pixels * cout)
    _replay_1x1(pixels, cin, cout, d)
    assert _first_failure(lambda t: _replay_1x1(pixels, cin, cout, t), d, 4 * cout) > d


@pytest.mark.parametrize("h,w,c,stride", [(25, 5, 48, 1), (7, 6, 12, 2), (5, 3, 8, 1)])
def test_depthwise_candidate_replays_and_is_at_most_one_block_loose(h, w, c, stride):
    pads = same_pads((h, w), (3, 3), (stride, stride), (1, 1))
    p = {"strides": [stride, stride], "dilations": [1, 1], "pads": [pads[0], pads[1]]}
    oh, ow = -(-h // stride), -(-w // stride)
    cand = helium_tiles((1, h, w, c), (1, oh, ow, c), (3, 3), p, True, 1)
    d = _plan_d(cand, h * w * c, oh * ow * c)
    _replay_dw(h, w, c, 3, stride, (pads[0], pads[1]), oh, ow, d)
    assert _first_failure(lambda t: _replay_dw(h, w, c, 3, stride, (pads[0], pads[1]), oh, ow,
                                               t), d, 4 * c) > d


def test_other_paths_get_no_candidate():
    """Must not: every layer whose Helium call is not one of the two walks replayed above."""
    x, y = (1, 6, 6, 16), (1, 6, 6, 16)
    assert helium_tiles(x, (1, 3, 3, 16), (1, 1), {**P1, "strides": [2, 2]}, False, 16) is None
    assert helium_tiles(x, y, (1, 1), P1, False, 8) is None                 # grouped
    assert helium_tiles(x, y, (3, 3), {**P1, "pads": [1, 1]}, False, 16) is None  # not 1x1
    assert helium_tiles(x, y, (1, 1), {**P1, "pads": [1, 0]}, False, 16) is None
    dw = {**P1, "pads": [1, 1]}
    assert helium_tiles((1, 6, 6, 128), (1, 6, 6, 128), (3, 3), dw, True, 1) is None
    assert helium_tiles(x, (1, 6, 6, 32), (3, 3), dw, True, 1) is None      # multiplier 2
    assert helium_tiles((2, 6, 6, 16), (2, 6, 6, 16), (3, 3), dw, True, 1) is None
    assert helium_tiles(x, y, (3, 3), {**dw, "dilations": [2, 2]}, True, 1) is None
    assert helium_tiles((1, 6, 6, 1), (1, 6, 6, 1), (3, 3), dw, True, 1) is not None
    assert helium_tiles((1, 6, 6, 1), (1, 6, 6, 16), (3, 3), dw, True, 1) is None
    assert helium_tiles(x, y, (1, 1), P1, False, 16) is not None
    assert helium_tiles(x, y, (3, 3), dw, True, 1) is not None
    assert merged(None, ("tiles", 0, [4], [0])) is None


def ds_chain_model(seed=0, h=9, w=5, c=16) -> bytes:
    """1x1 conv, 3x3 depthwise, 1x1 conv, each over its dying input (a DS-CNN block)."""
    n = Q8(seed)
    prev = n.input("x", (1, h, w, c), 0.05, -3)
    for k, (op, shape) in enumerate((("Conv2D", (c, 1, 1, c)), ("DepthwiseConv2D", (1, 3, 3, c)),
                                     ("Conv2D", (c, 1, 1, c)))):
        dw = op == "DepthwiseConv2D"
        wt, s_w = n.weights(f"w{k}", shape, 3 if dw else 0)
        b = n.bias(f"b{k}", 0.05, s_w, c)
        kh = shape[1]
        pads = same_pads((h, w), (kh, kh), (1, 1), (1, 1))
        extra = {"depth_multiplier": 1} if dw else {}
        out = f"y{k}"
        n.node(op, [prev, wt, b], out, (1, h, w, c),
               0.05 * float(np.max(s_w)) * 255 * 128 * kh * kh * (1 if dw else c) / 50, 2,
               **dict(CONV, kernel_shape=[kh, kh], pads=pads, activation="RELU", **extra))
        n.fit(out, int8_feeds(n.g, 2, seed))
        prev = out
    return n.build([prev])


def test_the_chain_overlaps_with_whole_layer_calls_on_helium(tmp_path):
    """The Helium build of the chain: every layer over its input, none called band by band."""
    (graph, files, summary), = export_models({"ds": ds_chain_model()}, tmp_path,
                                             "cmsis-nn").values()
    text = files["ds.c"].decode()
    invoke = text[text.index("int ds_invoke_with_arena"):]
    helium = invoke[invoke.index("#if DS_HELIUM_BUILD"):invoke.index("\n#else\n")]
    assert "band by band" not in helium
    assert helium.count("arm_convolve_wrapper_s8(") == 2
    assert helium.count("arm_depthwise_conv_wrapper_s8(") == 1
    calls = [line for line in helium.splitlines() if "_wrapper_s8(" in line]
    for line in calls:  # each output starts below its input, less than a tensor (720 B) below
        source, dest = (int(v) for v in re.findall(r"\(arena_s8 \+ (\d+)\)", line))
        assert 0 < source - dest < 720, line


@NEEDS_CMSIS
@pytest.mark.parametrize("board", [None, pytest.param("m4", marks=NEEDS_CROSS),
                                   pytest.param("m55", marks=NEEDS_CROSS)])
def test_the_chain_is_bit_exact_with_tflite_micro(tmp_path, board):
    run_image({"ds": ds_chain_model(), "ds_odd": ds_chain_model(3, h=7, w=3, c=12)},
              tmp_path / (board or "host"), board, kernels="cmsis-nn")
