"""export-c --kernels cmsis-nn on 1 x N convolutions (one input row, a 1-row kernel): CMSIS-NN's
wrapper sends them to arm_convolve_1_x_n_s8, whose Helium (MVE) code is wrong for some
geometries (qconvert/c_export/model/cmsis_1xn.py); there export-c must not call the wrapper.

Oracle: the TFLite Micro interpreter on one-layer models built here, against the export run on
emulated Cortex-M55 (mps3-an547, the MVE path) and Cortex-M4 (the DSP path) with CMSIS-NN. Each
case says, from the kernel's code read by hand, whether the MVE path is exact; the export must
call arm_convolve_s8 exactly where it is not (must-not cases: the first three), and keep the
wrapper elsewhere, and every case must be bit-exact on both cores.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.export_c_harness import NEEDS_CMSIS, NEEDS_CROSS
from helpers.export_c_images import run_image
from helpers.int8_models import CONV, Q8, int8_feeds

from qconvert.c_export.model.cmsis_1xn import one_by_n_exact

CASES = {  # name: (width, channels, kernel, stride, (left, right) pads, MVE 1xN path exact)
    # kws_conv1d's first layer: the last window has 3 input columns, the kernel copies 4
    "k5_s2_p2": (49, 40, 5, 2, (2, 2), False),
    # VALID with a column left over: the kernel pads where input column 48 is
    "k5_s2_valid_leftover": (50, 8, 5, 2, (0, 0), False),
    # ONNX-style explicit pads wider than TFLite's SAME: the kernel returns a failure
    "k3_s2_p1": (10, 4, 3, 2, (1, 1), False),
    "k3_s1_p1": (12, 48, 3, 1, (1, 1), True),
    "k5_s1_p2": (20, 8, 5, 1, (2, 2), True),
    "k3_s2_same": (16, 4, 3, 2, (0, 1), True),
    "k5_s2_valid": (13, 8, 5, 2, (0, 0), True),
    # stride * channels not a multiple of 4: the wrapper's generic path, never the 1xN one
    "k3_c3_s1_p1": (11, 3, 3, 1, (1, 1), True),
}


def conv_1xn_model(case, seed=0) -> bytes:
    """A one-Conv2D int8 model of `case`: input 1 x 1 x width x channels, kernel 1 x k."""
    width, c, k, stride, (left, right), _ = case
    n = Q8(seed)
    x = n.input("x", (1, 1, width, c), 0.05, -7)
    if (left, right) == (1, 1) and stride == 2:  # not SAME: a PAD that export-c folds
        paddings = np.array([[0, 0], [0, 0], [left, right], [0, 0]], np.int32)
        x = n.node("Pad", [x, n.const("paddings", paddings)], "xp",
                   (1, 1, width + left + right, c), 0.05, -7)
        width, left, right = width + left + right, 0, 0
    cout = 12
    wt, s_w = n.weights("w", (cout, 1, k, c), 0)
    b = n.bias("b", 0.05, s_w, cout)
    ow = (width + left + right - k) // stride + 1
    coarse = 0.05 * float(np.max(s_w)) * 255 * 128 * k * c / 50
    n.node("Conv2D", [x, wt, b], "y", (1, 1, ow, cout), coarse, 3,
           **dict(CONV, kernel_shape=[1, k], strides=[1, stride], pads=[0, left, 0, right]))
    n.fit("y", int8_feeds(n.g, 2))
    return n.build(["y"])


MODELS = {name: conv_1xn_model(case, seed) for seed, (name, case) in enumerate(CASES.items())}


def test_the_replay_agrees_with_the_cases():
    for name, (width, c, k, stride, (left, right), exact) in CASES.items():
        if (stride * c) % 4:
            continue  # not the 1xN path at all
        ow = (width + left + right - k) // stride + 1
        assert one_by_n_exact(width, k, ow, left, stride) == exact, name


@NEEDS_CMSIS
@NEEDS_CROSS
@pytest.mark.parametrize("board", ("m55", "m4"))
def test_1xn_convolutions_cmsis_nn_bit_exact_with_tflite_micro(tmp_path, board):
    exported = run_image(MODELS, tmp_path, board, kernels="cmsis-nn")
    for name, (_, files, _) in exported.items():
        source = files[f"{name}.c"].decode()
        assert ("arm_convolve_s8(" in source) == (not CASES[name][5]), name
        assert ("arm_convolve_wrapper_s8(" in source) == CASES[name][5], name
