"""Layer names made into unique C identifiers under one prefix.

TFLite layer names are long tensor names such as
`functional_1/activation/Relu;functional_1/batch_normalization/FusedBatchNormV3;...`. A layer's
C name is its first `;`-separated part, lower-cased, with every run of characters outside
`[a-z0-9]` turned into one `_` (`functional_1_activation_relu`), cut to `MAX_BASE` characters.
Identifiers are `<prefix>_<layer>_<suffix>`: arrays in lower case, macros in upper case.

`NameTable` hands out layer names so that no identifier of one layer equals an identifier of
another (compared case-insensitively, so the lower- and upper-case spellings are both safe):
on a clash the layer name gets `_2`, `_3`... appended.

`export-c` writes NAME.h and NAME.c beside the kernels; firmware builds add the folder with
`-I`, so a NAME that is also a header's name (`stdint`, `arm_nnfunctions`, `qconvert_nn`)
would replace that header for the whole build (and NAME.h's include guard NAME_H would hide
CMSIS-NN's `arm_nn_types.h`). `shadowed` tells which names do, case-insensitively:
`check_file_prefix` refuses them as `--name`, `prefix_from_stem` prefixes a model file's stem
that is one with `m_`.
"""

from __future__ import annotations

import re

from qconvert.errors import QConvertError

MAX_BASE = 40
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OUTSIDE = re.compile(r"[^a-z0-9]+")

# Every header of C99, C11, C17 and C23 (without .h).
C_STANDARD_HEADERS = frozenset("""
    assert complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal
    stdalign stdarg stdatomic stdbit stdbool stdckdint stddef stdint stdio stdlib stdnoreturn
    string tgmath threads time uchar wchar wctype""".split())

# CMSIS-NN's headers and sources (Include/**.h, Source/**.c, without the suffix), as in its
# v6/v7 tree; tests/cli/test_reliability_misuse.py checks the table against the copy in ../shared.
CMSIS_NN_FILES = frozenset("""
    arm_avg_pool_f16 arm_avg_pool_f32 arm_avgpool_get_buffer_sizes_s16
    arm_avgpool_get_buffer_sizes_s8 arm_avgpool_s16 arm_avgpool_s8 arm_batch_matmul_f16
    arm_batch_matmul_f32 arm_batch_matmul_s16 arm_batch_matmul_s8 arm_batch_norm_f16
    arm_batch_norm_f32 arm_concatenation_common arm_concatenation_f16 arm_concatenation_f32
    arm_concatenation_s8_w arm_concatenation_s8_x arm_concatenation_s8_y
    arm_concatenation_s8_z arm_conv1x1_opt_common arm_conv1x1_opt_f16 arm_conv1x1_opt_f32
    arm_conv_opt_common arm_conv_opt_f16 arm_conv_opt_f32 arm_convolve_1_x_n_f16
    arm_convolve_1_x_n_f32 arm_convolve_1_x_n_s4 arm_convolve_1_x_n_s8 arm_convolve_1x1_f16
    arm_convolve_1x1_f32 arm_convolve_1x1_s4 arm_convolve_1x1_s4_fast arm_convolve_1x1_s8
    arm_convolve_1x1_s8_fast arm_convolve_even_s4 arm_convolve_f16 arm_convolve_f32
    arm_convolve_get_buffer_sizes_s16 arm_convolve_get_buffer_sizes_s4
    arm_convolve_get_buffer_sizes_s8 arm_convolve_s16 arm_convolve_s4 arm_convolve_s8
    arm_convolve_wrapper_s16 arm_convolve_wrapper_s4 arm_convolve_wrapper_s8
    arm_depthwise_conv_3x3_s8 arm_depthwise_conv_f16 arm_depthwise_conv_f32
    arm_depthwise_conv_fast_s16 arm_depthwise_conv_get_buffer_sizes_s16
    arm_depthwise_conv_get_buffer_sizes_s4 arm_depthwise_conv_get_buffer_sizes_s8
    arm_depthwise_conv_opt_common arm_depthwise_conv_opt_f16 arm_depthwise_conv_opt_f32
    arm_depthwise_conv_s16 arm_depthwise_conv_s4 arm_depthwise_conv_s4_opt
    arm_depthwise_conv_s8 arm_depthwise_conv_s8_opt arm_depthwise_conv_wrapper_s16
    arm_depthwise_conv_wrapper_s4 arm_depthwise_conv_wrapper_s8 arm_elementwise_add_f16
    arm_elementwise_add_f32 arm_elementwise_add_s16 arm_elementwise_add_s8
    arm_elementwise_mul_acc_s16 arm_elementwise_mul_f16 arm_elementwise_mul_f32
    arm_elementwise_mul_s16 arm_elementwise_mul_s16_batch_offset arm_elementwise_mul_s16_s8
    arm_elementwise_mul_s8 arm_fully_connected_f16 arm_fully_connected_f32
    arm_fully_connected_get_buffer_sizes_s16 arm_fully_connected_get_buffer_sizes_s8
    arm_fully_connected_per_channel_s8 arm_fully_connected_s16 arm_fully_connected_s4
    arm_fully_connected_s8 arm_fully_connected_wrapper_s8 arm_get_buffer_size_common
    arm_get_buffer_size_f16 arm_get_buffer_size_f32 arm_lstm_unidirectional_f16
    arm_lstm_unidirectional_f32 arm_lstm_unidirectional_s16 arm_lstm_unidirectional_s8
    arm_max_pool_f16 arm_max_pool_f32 arm_max_pool_s16 arm_max_pool_s8 arm_maximum_f16
    arm_maximum_f32 arm_maximum_s8 arm_minimum_f16 arm_minimum_f32 arm_minimum_s8
    arm_minmax_f16_common arm_minmax_f32_common arm_nn_activation_f16 arm_nn_activation_f32
    arm_nn_activation_flt arm_nn_activation_s16 arm_nn_compiler arm_nn_config
    arm_nn_conv1d_k3_f16 arm_nn_conv1d_k3_f32 arm_nn_conv1d_k3_packed_f16
    arm_nn_conv1d_k3_packed_f32 arm_nn_conv1d_k5_f16 arm_nn_conv1d_k5_f32
    arm_nn_conv1d_k5_packed_f16 arm_nn_conv1d_k5_packed_f32 arm_nn_depthwise_conv1d_k3_f16
    arm_nn_depthwise_conv1d_k3_f32 arm_nn_depthwise_conv2x5_f16 arm_nn_depthwise_conv3x3_f16
    arm_nn_depthwise_conv3x3_f32 arm_nn_depthwise_conv_nt_t_f16 arm_nn_depthwise_conv_nt_t_f32
    arm_nn_depthwise_conv_nt_t_padded_s8 arm_nn_depthwise_conv_nt_t_s16
    arm_nn_depthwise_conv_nt_t_s4 arm_nn_depthwise_conv_nt_t_s8 arm_nn_depthwise_conv_s8_core
    arm_nn_lstm_calculate_gate_s16 arm_nn_lstm_calculate_gate_s8_s16 arm_nn_lstm_step_f16
    arm_nn_lstm_step_f32 arm_nn_lstm_step_s16 arm_nn_lstm_step_s8 arm_nn_mat_mul_core_1x_s4
    arm_nn_mat_mul_core_1x_s8 arm_nn_mat_mul_core_4x_s8
    arm_nn_mat_mult_kernel_row_offset_s8_s16 arm_nn_mat_mult_kernel_s16
    arm_nn_mat_mult_kernel_s4_s16 arm_nn_mat_mult_kernel_s8_s16
    arm_nn_mat_mult_nt_interleaved_t_even_s4 arm_nn_mat_mult_nt_n_packed_f16
    arm_nn_mat_mult_nt_n_packed_f32 arm_nn_mat_mult_nt_t_f16 arm_nn_mat_mult_nt_t_f32
    arm_nn_mat_mult_nt_t_s16 arm_nn_mat_mult_nt_t_s4 arm_nn_mat_mult_nt_t_s8
    arm_nn_mat_mult_nt_t_s8_s32 arm_nn_mat_mult_s8 arm_nn_math_types arm_nn_math_types_flt
    arm_nn_maxpool1d_f16 arm_nn_maxpool1d_f32 arm_nn_pack_conv_patch_f16
    arm_nn_pack_conv_patch_f32 arm_nn_softmax_common_s8 arm_nn_tables
    arm_nn_transpose_conv_row_s8_s32 arm_nn_types arm_nn_types_flt
    arm_nn_vec_mat_mul_result_acc_s16 arm_nn_vec_mat_mul_result_acc_s8_s16
    arm_nn_vec_mat_mult_t_per_ch_s8 arm_nn_vec_mat_mult_t_s16 arm_nn_vec_mat_mult_t_s16_s16
    arm_nn_vec_mat_mult_t_s4 arm_nn_vec_mat_mult_t_s8 arm_nn_vec_mat_mult_t_svdf_s8
    arm_nnfunctions arm_nnfunctions_flt arm_nnsupportfunctions arm_nnsupportfunctions_flt
    arm_nntables arm_nntables_flt arm_pad_f16 arm_pad_f32 arm_pad_s8 arm_q7_to_q15_with_offset
    arm_relu6_s8 arm_relu_q15 arm_relu_q7 arm_reshape_f16 arm_reshape_f32 arm_reshape_s8
    arm_s8_to_s16_unordered_with_offset arm_softmax_f16 arm_softmax_f32 arm_softmax_s16
    arm_softmax_s8 arm_softmax_s8_s16 arm_softmax_u8 arm_svdf_f16 arm_svdf_f32
    arm_svdf_get_buffer_sizes_s8 arm_svdf_s8 arm_svdf_state_s16_s8 arm_transpose_common
    arm_transpose_conv_f16 arm_transpose_conv_f32 arm_transpose_conv_get_buffer_sizes_s8
    arm_transpose_conv_s8 arm_transpose_conv_wrapper_s8 arm_transpose_f16 arm_transpose_f32
    arm_transpose_s8 arm_vector_sum_s8 arm_vector_sum_s8_s64""".split())


def sanitize(text: str, fallback: str) -> str:
    """`text` as a lower-case C identifier fragment (letters, digits, single underscores), or
    `fallback` when nothing is left."""
    base = _OUTSIDE.sub("_", str(text).lower()).strip("_")
    return base[:MAX_BASE].rstrip("_") or fallback


def prefix_from_stem(stem: str) -> str:
    """The default prefix from a model file's stem: sanitized, starting with a letter, and
    `m_`-prefixed when the name would shadow a header (`shadowed`)."""
    base = sanitize(stem, "model")
    return base if base[0].isalpha() and shadowed(base) is None else f"m_{base}"


# What a float model's file name often ends with; the int8 C of it should not carry it
# (`vww_96_float_invoke` for an int8 model)
_FLOAT_TAIL = re.compile(r"[_.-](float32|float|fp32|f32)$", re.IGNORECASE)


def int8_stem(stem: str) -> str:
    """The stem of a float model's file without its float tag (vww_96_float -> vww_96), for
    the C names of the int8 model an export quantized from it; the stem itself when that
    would leave nothing."""
    return _FLOAT_TAIL.sub("", stem) or stem


def kernel_file_stems() -> frozenset:
    """The names (without suffix) of qconvert's own kernel files, which export-c writes."""
    from pathlib import Path

    folder = Path(__file__).with_name("kernels")
    return frozenset(p.name.split(".")[0].lower() for p in folder.iterdir()
                     if p.suffix in (".c", ".h"))


def shadowed(name: str) -> str | None:
    """What the files NAME.h / NAME.c would shadow (compared case-insensitively): "the C
    standard header <stdint.h>", "CMSIS-NN's arm_nnfunctions", "qconvert's kernel file
    qconvert_nn"; None when nothing."""
    low = name.lower()
    if low in C_STANDARD_HEADERS:
        return f"the C standard header <{low}.h>"
    if low in CMSIS_NN_FILES:
        return f"CMSIS-NN's file {low} (.h or .c)"
    if low in kernel_file_stems():
        return f"qconvert's kernel file {low}"
    return None


def check_file_prefix(name: str) -> str:
    """A `--name` that names export-c's files: `check_prefix`, and not a header's name."""
    prefix = check_prefix(name)
    what = shadowed(prefix)
    if what is not None:
        raise QConvertError(f"--name {name!r} would write {prefix}.h and {prefix}.c, which "
                            f"shadow {what} in a build that adds the folder with -I; choose "
                            "another name")
    return prefix


def check_prefix(name: str) -> str:
    """A `--name` given by the user: it must be a C identifier; returned lower-cased."""
    if not _IDENTIFIER.match(name or "") or name.startswith("_"):
        raise QConvertError(f"--name {name!r} is not a C identifier (letters, digits and "
                         "underscores, starting with a letter)")
    return name.lower()


def layer_base(layer_name: str, index: int) -> str:
    """The C name of a layer: the first `;` part of its name, sanitized (`layer<i>` if empty).
    A name starting with a digit stays valid: it always follows the prefix and a `_`."""
    return sanitize(str(layer_name).split(";", 1)[0], f"layer{index}")


class NameTable:
    """Unique layer names under `prefix`, given each layer's identifier suffixes."""

    def __init__(self, prefix: str, reserved=()):
        self.prefix = prefix
        self.taken = {f"{prefix}_{s}".lower() for s in reserved}

    def claim(self, base: str, suffixes) -> str:
        """`base`, or `base_2`, `base_3`... : the first whose identifiers
        `<prefix>_<name>_<suffix>` are all new; they are then taken."""
        name, n = base, 1
        while True:
            wanted = {f"{self.prefix}_{name}_{s}".lower() for s in suffixes}
            if not wanted & self.taken:
                self.taken |= wanted
                return name
            n += 1
            name = f"{base}_{n}"
