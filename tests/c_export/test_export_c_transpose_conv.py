"""export-c on TransposeConv and ResizeBilinear, the upsampling layers of a U-Net.

- `--kernels cmsis-nn`: a TransposeConv whose kernel is its stride (every output pixel gets one
  tap) becomes CMSIS-NN fully connected calls, one per input row and tap row
  (qconvert/c_export/model/transpose_conv_cmsis.py); every other one (overlapping taps, a cropped
  output) must keep qconvert's portable kernel.
- `qconvert_resize_bilinear_s8` sums in int32 (TFLite sums in int64; the bound is 2^27).

Oracle: the TFLite Micro interpreter (reference kernels) on one-layer models built here
(batches, odd channel counts, per-tensor and per-channel weights, no bias, fused clamps, wide
and extreme inputs), against the export built on the host (gcc, CMSIS-NN's plain C) and for
Cortex-M4 (DSP) and Cortex-M55 (Helium: the kernel sums path) under QEMU.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.export_c_harness import NEEDS_CMSIS, NEEDS_CROSS
from helpers.export_c_images import export_models, run_image
from helpers.int8_models import Q8, int8_feeds

# id: (batch, h, w, cin, cout, kernel, strides, output hw or None (input x stride), padding,
#      activation, per-channel, bias, input zero point, tiled: one tap per output)
TC_CASES = {
    "k2s2_unet_like": (1, 8, 8, 32, 16, (2, 2), (2, 2), None, "SAME", "NONE", True, True,
                       -128, True),
    "k2s2_batch2_relu_no_bias": (2, 3, 5, 7, 5, (2, 2), (2, 2), None, "VALID", "RELU", True,
                                 False, 5, True),
    "k3s3_per_tensor": (1, 4, 3, 6, 4, (3, 3), (3, 3), None, "VALID", "NONE", False, True, 0,
                        True),
    "k1x2_s1x2_relu6": (1, 5, 4, 9, 3, (1, 2), (1, 2), None, "SAME", "RELU6", True, True, -7,
                        True),
    # must not: taps overlap (kernel 3, stride 2); the output cropped by one row and column
    "k3s2_overlapping": (1, 4, 4, 8, 6, (3, 3), (2, 2), None, "SAME", "NONE", True, True, 3,
                         False),
    "k2s2_cropped_output": (1, 4, 4, 8, 6, (2, 2), (2, 2), (7, 7), "SAME", "NONE", True, True,
                            3, False),
}

# id: (input shape, output hw, align_corners, half_pixel_centers)
RESIZE_CASES = {
    "half_pixel_2x": ((1, 5, 6, 7), (10, 12), False, True),
    "align_corners_batch2": ((2, 4, 5, 3), (7, 9), True, False),
    "plain_downscale": ((1, 9, 8, 5), (4, 5), False, False),
}


def tc_model(case, seed=0) -> bytes:
    """A one-TransposeConv int8 model of `case` (TC_CASES), its output range fitted to what
    TFLite Micro computes."""
    b, h, w, cin, cout, (kh, kw), (sh, sw), out_hw, padding, act, per_channel, with_bias, z_in, \
        _ = case
    n = Q8(seed)
    x = n.input("x", (b, h, w, cin), 0.05, z_in)
    wt, s_w = n.weights("w", (cout, kh, kw, cin), 0, per_channel)
    if out_hw is not None:
        oh, ow = out_hw
    elif padding == "VALID":
        oh, ow = (h - 1) * sh + kh, (w - 1) * sw + kw
    else:
        oh, ow = h * sh, w * sw
    ins = [n.const("shape", np.asarray([b, oh, ow, cout], np.int32)), wt, x]
    if with_bias:
        ins.append(n.bias("b", 0.05, s_w, cout))
    coarse = 0.05 * float(np.max(s_w)) * 255 * 128 * kh * kw * cin / 50
    n.node("TransposeConv", ins, "y", (b, oh, ow, cout), coarse, 0, strides=[sh, sw],
           padding=padding, activation="NONE")
    n.fit("y", int8_feeds(n.g, 2, seed))
    n.g.nodes[-1].attrs["activation"] = act
    return n.build(["y"])


def resize_model(case, seed=0) -> bytes:
    shape, (oh, ow), align, hpc = case
    n = Q8(seed)
    x = n.input("x", shape, 0.05, -3)
    n.node("ResizeBilinear", [x, n.const("size", np.asarray([oh, ow], np.int32))], "y",
           (shape[0], oh, ow, shape[3]), 0.05, -3, align_corners=align, half_pixel_centers=hpc)
    return n.build(["y"])


TC_MODELS = {f"tc_{k}": tc_model(c, seed) for seed, (k, c) in enumerate(TC_CASES.items())}
RESIZE_MODELS = {f"rb_{k}": resize_model(c, seed)
                 for seed, (k, c) in enumerate(RESIZE_CASES.items())}


def test_the_tiled_cases_and_only_they_become_fully_connected_calls(tmp_path):
    exported = export_models(TC_MODELS, tmp_path, "cmsis-nn")
    for name, (_, files, _) in exported.items():
        text = files[f"{name}.c"].decode()
        tiled = TC_CASES[name[3:]][-1]
        assert ("arm_fully_connected_per_channel_s8(" in text) == tiled, name
        assert ("qconvert_transpose_conv_s8(" in text) == (not tiled), name
    portable = export_models(TC_MODELS, tmp_path / "p", "portable")
    for name, (_, files, _) in portable.items():
        assert "qconvert_transpose_conv_s8(" in files[f"{name}.c"].decode(), name


@NEEDS_CMSIS
@pytest.mark.parametrize("board", [None, pytest.param("m4", marks=NEEDS_CROSS),
                                   pytest.param("m55", marks=NEEDS_CROSS)])
def test_transpose_conv_and_resize_cmsis_nn_bit_exact_with_tflite_micro(tmp_path, board):
    run_image({**TC_MODELS, **RESIZE_MODELS}, tmp_path / (board or "host"), board,
              kernels="cmsis-nn")


@pytest.mark.parametrize("board", [None, pytest.param("m4", marks=NEEDS_CROSS)])
def test_transpose_conv_and_resize_portable_bit_exact_with_tflite_micro(tmp_path, board):
    run_image({**TC_MODELS, **RESIZE_MODELS}, tmp_path / (board or "host"), board)
