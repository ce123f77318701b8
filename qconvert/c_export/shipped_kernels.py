"""The portable C kernels qconvert ships (`export-c-header --with-kernels`, `export-c`).

The sources live in `qconvert/c_export/kernels/` and are installed as package data; this reads
them through importlib.resources, so a regular (non-editable) install works the same.
"""

from __future__ import annotations

from importlib import resources

KERNEL_FILES = ("qconvert_fc_1x4.h", "qconvert_fc_1x4.c")
# the kernels of whole-model C (export-c), which also uses KERNEL_FILES
# (qconvert_nn_loops.h: the loops and helpers the int8 and 16x8 sources share, private to them)
MODEL_KERNEL_FILES = ("qconvert_nn.h", "qconvert_nn_loops.h", "qconvert_nn_conv.c",
                      "qconvert_nn_ops.c", "qconvert_nn_softmax.c", "qconvert_nn_extra.c",
                      "qconvert_nn_s16.c", "qconvert_nn_s16_math.c", "qconvert_nn_fast.h",
                      "qconvert_nn_simd.h", "qconvert_nn_depthwise.c",
                      "qconvert_nn_depthwise_hwc.c", "qconvert_nn_pool.c", "qconvert_nn_add.c",
                      "qconvert_nn_concat.h", "qconvert_nn_concat.c",
                      "qconvert_nn_convfc.h", "qconvert_nn_convfc.c",
                      "qconvert_nn_resize.h", "qconvert_nn_resize.c",
                      "qconvert_nn_runs.h", "qconvert_nn_runs.c",
                      "qconvert_nn_logic.h", "qconvert_nn_logic.c",
                      "qconvert_nn_lstm.h", "qconvert_nn_lstm.c")
# the power-of-two q7 kernels of `export-c --scheme q7 --kernels portable` (`q7_model`)
Q7_KERNEL_FILES = ("qconvert_q7.h", "qconvert_q7.c")
# headers NAME.c includes only when one of its layers calls into them
OPTIONAL_HEADERS = ("qconvert_nn_fast.h", "qconvert_nn_concat.h", "qconvert_nn_convfc.h",
                    "qconvert_nn_resize.h", "qconvert_nn_runs.h", "qconvert_nn_logic.h",
                    "qconvert_nn_lstm.h")


def kernel_source(name: str) -> bytes:
    """The bytes of the shipped kernel source `name` (a file of `kernels/`)."""
    return resources.files("qconvert.c_export").joinpath("kernels").joinpath(name).read_bytes()


def kernel_sources() -> dict:
    """{file name: bytes} of the fully connected kernel export-c-header ships, in
    `KERNEL_FILES` order."""
    return {name: kernel_source(name) for name in KERNEL_FILES}
