"""export-c folds a Pad with -128 into the int8 MaxPool reading it (qconvert.c_export.model.pad_fold.py):
the padded copy is never made, and the pool skips the taps outside the image.

Oracle: the TFLite Micro interpreter on Pad + MaxPool models built here (pads on one side and on
every side, strides 1 and 2, batch 2, a clamp), against the export built for the host and for
Cortex-M4 and Cortex-M55 with both kernel sets. Must not fold: a Pad with another value (0: a
window of negative values would take it), a side padded by the whole kernel (a window of
padding alone), a Pad into an average pool (it counts padded taps).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.export_c_harness import NEEDS_CMSIS, NEEDS_CROSS
from helpers.export_c_images import export_models, run_image
from helpers.int8_models import Q8

from qconvert.c_export.model.pad_fold import fold_pads
from qconvert.formats.tflite_reader import read_tflite

# id: (input shape, ((top, bottom), (left, right)), kernel, stride, zero point, pool op,
#      activation, folded)
CASES = {
    "top_left_3x3_s2": ((1, 8, 8, 8), ((1, 0), (1, 0)), 3, 2, -128, "MaxPool", "NONE", True),
    "every_side_batch2": ((2, 5, 6, 3), ((1, 1), (1, 1)), 3, 1, -128, "MaxPool", "RELU", True),
    "bottom_right_2x2": ((1, 7, 5, 16), ((0, 1), (0, 1)), 2, 2, -128, "MaxPool", "NONE", True),
    # must not fold
    "value_zero": ((1, 8, 8, 4), ((1, 0), (1, 0)), 3, 2, 0, "MaxPool", "NONE", False),
    "a_whole_kernel_of_padding": ((1, 6, 6, 4), ((2, 0), (0, 0)), 2, 1, -128, "MaxPool", "NONE",
                                  False),
    "average_pool": ((1, 8, 8, 4), ((1, 0), (1, 0)), 3, 2, -128, "AveragePool", "NONE", False),
}


def pad_pool_model(case, seed=0) -> bytes:
    shape, ((top, bottom), (left, right)), k, stride, z, op, act, _ = case
    n = Q8(seed)
    x = n.input("x", shape, 0.05, z)
    paddings = np.array([[0, 0], [top, bottom], [left, right], [0, 0]], np.int32)
    b, h, w, c = shape
    ph, pw = h + top + bottom, w + left + right
    n.node("Pad", [x, n.const("paddings", paddings)], "xp", (b, ph, pw, c), 0.05, z)
    oh, ow = (ph - k) // stride + 1, (pw - k) // stride + 1
    n.node(op, ["xp"], "y", (b, oh, ow, c), 0.05, z, layout="NHWC", kernel_shape=[k, k],
           strides=[stride, stride], pads=[0, 0, 0, 0], activation=act)
    return n.build(["y"])


MODELS = {name: pad_pool_model(case, seed) for seed, (name, case) in enumerate(CASES.items())}


def test_only_the_safe_pads_are_folded():
    for name, data in MODELS.items():
        graph = read_tflite(data).graph
        folded = fold_pads(graph)
        has_pad = any(n.op == "Pad" for n in folded.nodes)
        assert has_pad != CASES[name][-1], name
        if CASES[name][-1]:
            pool, = folded.nodes
            (top, bottom), (left, right) = CASES[name][1]
            assert pool.attrs["pads"] == [top, left, bottom, right]


@pytest.mark.parametrize("board", [None, pytest.param("m4", marks=NEEDS_CROSS),
                                   pytest.param("m55", marks=NEEDS_CROSS)])
@pytest.mark.parametrize("kernels", ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)])
def test_pad_and_max_pool_bit_exact_with_tflite_micro(tmp_path, board, kernels):
    exported = run_image(MODELS, tmp_path / (board or "host"), board, kernels=kernels)
    for name, (_, files, _) in exported.items():
        text = files[f"{name}.c"].decode()
        assert (": Pad */" in text) != CASES[name][-1], name


def test_export_writes_no_pad_layer_when_folded(tmp_path):
    exported = export_models(MODELS, tmp_path)
    for name, (_, _, summary) in exported.items():
        assert summary.layers == (1 if CASES[name][-1] else 2), name
