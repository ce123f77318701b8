"""export-c's layer-specialised int8 kernels (kernels/qconvert_nn_fast.h: depthwise convolution,
pools, element-wise add) against TFLite Micro, and the conditions of their fast paths.

Oracles: the TFLite Micro interpreter on one-layer models built here (random shapes, odd and
non-multiple-of-4 channel counts, strides, dilations, pads, batches, clamps, per-channel
quantization), run from C built by gcc on the host (the plain-C path, the same C a Cortex-M3
compiles) and by arm-none-eabi-gcc for emulated Cortex-M4 and Cortex-M55 (the DSP path); the
integer executor with single rounding for -DQCONVERT_SINGLE_ROUNDING; qconvert_requantize (the
general requantization, itself checked against TFLite Micro by the model tests) for the short
requantization form. Every fast-path condition has a must-not case: a layer outside it still
exports bit-exact, through the general kernel.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from helpers.export_c_harness import NEEDS_CROSS, STRICT, cmsis_nn_available, cross_tools_available
from helpers.export_c_images import export_models, run_image
from helpers.int8_models import CONV, Q8, int8_feeds

from qconvert.c_export.model.depthwise_steps import dw_weights_layout, fast_requantize
from qconvert.c_export.shipped_kernels import kernel_source
from qconvert.executor.int_executor import run_int8
from qconvert.padding import same_pads
from qconvert.formats.tflite_reader import read_tflite

def _out_size(size, k, stride, dilation, padding):
    eff = (k - 1) * dilation + 1
    return -(-size // stride) if padding == "SAME" else (size - eff) // stride + 1


# -- one-layer models -------------------------------------------------------------------------
DW_CASES = {  # name: (batch, h, w, c, (kh, kw), strides, dilations, padding, act, z_in, mult,
    #                    per_channel, output scale factor: None = fitted to the outputs)
    "kws3x3": (1, 25, 5, 64, (3, 3), (1, 1), (1, 1), "SAME", "RELU", -128, 1, True, None),
    "odd_c_s2": (1, 9, 8, 7, (3, 3), (2, 2), (1, 1), "SAME", "RELU6", 5, 1, True, None),
    "c6_5x5": (1, 7, 9, 6, (5, 5), (1, 1), (1, 1), "SAME", "NONE", -3, 1, False, None),
    "c3_valid": (1, 6, 5, 3, (3, 3), (1, 1), (1, 1), "VALID", "NONE", 127, 1, True, None),
    "nonsquare_dil": (1, 10, 9, 12, (3, 2), (1, 2), (2, 2), "SAME", "RELU", 0, 1, True, None),
    "batch2_1x1": (2, 5, 4, 9, (1, 1), (1, 1), (1, 1), "VALID", "NONE", -7, 1, True, None),
    "c1_2x4": (1, 6, 7, 1, (2, 4), (2, 1), (1, 1), "SAME", "NONE", 20, 1, True, None),
    "c13_s2_valid": (1, 11, 10, 13, (3, 3), (2, 2), (1, 1), "VALID", "RELU", -100, 1, True, None),
    "c8_s2_dil2": (1, 13, 12, 8, (3, 3), (2, 2), (2, 2), "SAME", "RELU", -20, 1, True, None),
    # more taps than the tap-list path takes (25): the general loop
    "c5_7x7": (1, 9, 8, 5, (7, 7), (1, 1), (1, 1), "SAME", "NONE", 2, 1, True, None),
    # must not take qconvert_dw_s8: depth multiplier 2 (the general kernel)
    "mult2": (1, 6, 6, 4, (3, 3), (1, 1), (1, 1), "SAME", "RELU6", -128, 2, True, None),
    # must not take the short requantization: shifts > -2 (an output scale near the product's)
    "big_multiplier": (1, 5, 5, 8, (3, 3), (1, 1), (1, 1), "SAME", "NONE", 0, 1, True, 0.8),
}


def dw_model(case, seed=0) -> bytes:
    """A one-DepthwiseConv2D int8 model of `case` (a DW_CASES row)."""
    (batch, h, w, c, (kh, kw), strides, dil, padding, act, z_in, mult, per_channel,
     out_factor) = case
    n = Q8(seed)
    s_in = 0.05
    x = n.input("x", (batch, h, w, c), s_in, z_in)
    wt, s_w = n.weights("w", (1, kh, kw, c * mult), 3, per_channel)
    b = n.bias("b", s_in, s_w, c * mult)
    oh = _out_size(h, kh, strides[0], dil[0], padding)
    ow = _out_size(w, kw, strides[1], dil[1], padding)
    pads = same_pads((h, w), (kh, kw), strides, dil) if padding == "SAME" else [0] * 4
    coarse = s_in * float(np.max(s_w)) * 255 * 128 * kh * kw / 50
    scale = coarse if out_factor is None else s_in * float(np.max(s_w)) * out_factor
    n.node("DepthwiseConv2D", [x, wt, b], "y", (batch, oh, ow, c * mult), scale, 3,
           **dict(CONV, kernel_shape=[kh, kw], strides=list(strides), dilations=list(dil),
                  pads=pads, activation="NONE", depth_multiplier=mult))
    if out_factor is None:
        n.fit("y", int8_feeds(n.g, 2))
    n.g.nodes[-1].attrs["activation"] = act
    return n.build(["y"])


def dw_chain_model(seed=0) -> bytes:
    """Two depthwise layers (14x6x20, 3x3 stride 1, SAME): each output may be placed over its
    input (the input dies there)."""
    n = Q8(seed)
    x = n.input("x", (1, 14, 6, 20), 0.05, -9)
    prev, s_prev = x, 0.05
    for k in range(2):
        wt, s_w = n.weights(f"w{k}", (1, 3, 3, 20), 3)
        b = n.bias(f"b{k}", s_prev, s_w, 20)
        coarse = s_prev * float(np.max(s_w)) * 255 * 128 * 9 / 50
        prev = n.node("DepthwiseConv2D", [prev, wt, b], f"y{k}", (1, 14, 6, 20), coarse, 3,
                      **dict(CONV, kernel_shape=[3, 3], pads=[1, 1, 1, 1], activation="NONE",
                             depth_multiplier=1))
        n.fit(prev, int8_feeds(n.g, 2))
        s_prev = float(n.g.tensors[prev].quant.scale[0])
    return n.build([prev])


DW_MODELS = {name: dw_model(case, seed) for seed, (name, case) in enumerate(DW_CASES.items())}
DW_MODELS["chain_inplace"] = dw_chain_model()


def assert_written_over_their_inputs(exported: dict) -> None:
    """Each one-layer model's output is placed over its input (which dies there), so the
    bit-exact runs check the kernels' read-before-write order the plan relies on; x + x reads
    one buffer twice and is never overlapped."""
    for name, (_, _, summary) in exported.items():
        assert summary.overlapped >= (0 if name.startswith("x_") else 1), name


def test_depthwise_host_bit_exact_with_tflite_micro(tmp_path):
    exported = run_image(DW_MODELS, tmp_path)
    assert_written_over_their_inputs(exported)
    for name, (_, files, _) in exported.items():
        source = files[f"{name}.c"].decode()
        uses_fast = "qconvert_dw_s8(" in source
        assert uses_fast == (name != "mult2"), name
    # the in-place case really overlaps: each layer's output starts about one row before its
    # input, which it overwrites as it goes
    assert exported["chain_inplace"][2].overlapped == 2


def test_depthwise_single_rounding_matches_the_executor(tmp_path):
    def single(name, data, sample):
        graph = read_tflite(data).graph
        return list(run_int8(graph, dict(zip(graph.inputs, sample)), rounding="single").values())

    run_image(DW_MODELS, tmp_path, defines=["-DQCONVERT_SINGLE_ROUNDING"], expected=single)


@NEEDS_CROSS
@pytest.mark.parametrize("board", ("m4", "m55"))
def test_depthwise_cortex_m_bit_exact_with_tflite_micro(tmp_path, board):
    run_image(DW_MODELS, tmp_path, board)


POOL_CASES = {  # name: (op, batch, h, w, c, (kh, kw), strides, padding, act, z)
    "kws_global_avg": ("AveragePool", 1, 25, 5, 64, (25, 5), (1, 1), "VALID", "NONE", -3),
    "global_avg_289": ("AveragePool", 1, 17, 17, 6, (17, 17), (1, 1), "VALID", "NONE", 0),
    "avg_same_pad": ("AveragePool", 2, 7, 6, 7, (3, 3), (2, 2), "SAME", "RELU", 4),
    "avg_2x2": ("AveragePool", 1, 8, 8, 12, (2, 2), (2, 2), "VALID", "RELU6", -128),
    "avg_c1_3x2": ("AveragePool", 1, 5, 7, 1, (3, 2), (1, 2), "SAME", "NONE", 10),
    "max_same_pad": ("MaxPool", 1, 9, 7, 10, (3, 3), (2, 2), "SAME", "RELU", -5),
    "max_2x2": ("MaxPool", 2, 6, 6, 8, (2, 2), (2, 2), "VALID", "NONE", 0),
    "max_c3_clamp": ("MaxPool", 1, 5, 5, 3, (2, 3), (1, 1), "SAME", "RELU6", 60),
    "max_global": ("MaxPool", 1, 6, 5, 20, (6, 5), (1, 1), "VALID", "RELU", -128),
}


def pool_model(case, seed=0) -> bytes:
    """A one-pool int8 model of `case` (a POOL_CASES row); the output keeps the input's
    quantization, as TFLite's int8 pools require."""
    op, batch, h, w, c, (kh, kw), strides, padding, act, z = case
    n = Q8(seed)
    scale = 0.05 if act != "RELU6" else 6.0 / 200
    x = n.input("x", (batch, h, w, c), scale, z)
    oh, ow = _out_size(h, kh, strides[0], 1, padding), _out_size(w, kw, strides[1], 1, padding)
    pads = same_pads((h, w), (kh, kw), strides, (1, 1)) if padding == "SAME" else [0] * 4
    n.node(op, [x], "y", (batch, oh, ow, c), scale, z, layout="NHWC", kernel_shape=[kh, kw],
           strides=list(strides), pads=pads, activation=act)
    return n.build(["y"])


POOL_MODELS = {name: pool_model(case, seed) for seed, (name, case) in
               enumerate(POOL_CASES.items())}


def test_pools_host_bit_exact_with_tflite_micro(tmp_path):
    exported = run_image(POOL_MODELS, tmp_path)
    assert_written_over_their_inputs(exported)
    for name, (_, files, _) in exported.items():
        source = files[f"{name}.c"].decode()
        fn = "qconvert_avgpool_fast_s8(" if "avg" in name else "qconvert_maxpool_fast_s8("
        assert fn in source, name


@NEEDS_CROSS
@pytest.mark.parametrize("board", ("m4", "m55"))
def test_pools_cortex_m_bit_exact_with_tflite_micro(tmp_path, board):
    run_image(POOL_MODELS, tmp_path, board)


ADD_CASES = {  # name: (shape a, shape b or "x" (the same tensor), b constant, act, out scale)
    "same_shape": ((1, 8, 8, 16), (1, 8, 8, 16), False, "NONE", 0.12),
    "odd_relu_batch2": ((2, 3, 5, 7), (2, 3, 5, 7), False, "RELU", 0.1),
    "x_plus_x": ((1, 5, 5, 6), "x", False, "RELU6", 0.2),
    "const_operand": ((1, 4, 3, 5), (1, 4, 3, 5), True, "NONE", 0.09),
    # one operand broadcast: one value per channel, per row (pixel), in all; a lower rank
    "channel_input": ((1, 4, 4, 8), (1, 1, 1, 8), False, "NONE", 0.1),
    "row_const": ((1, 4, 4, 8), (1, 4, 4, 1), True, "RELU", 0.1),
    "scalar_const": ((2, 3, 5), (1,), True, "NONE", 0.1),
    "rank2_const": ((1, 16, 32), (16, 32), True, "NONE", 0.1),
    "row_input_first": ((1, 6, 1), (1, 6, 9), False, "NONE", 0.1),
    "sub_same_shape": ((1, 5, 4, 6), (1, 5, 4, 6), False, "NONE", 0.1, "Sub"),
    "sub_row_input": ((1, 16, 32), (1, 16, 1), False, "NONE", 0.1, "Sub"),
    "sub_const_first": ((1, 4, 7), (7,), "first", "RELU", 0.1, "Sub"),
    # must not take qconvert_add_fast_s8: broadcasts over other axes (the general kernel)
    "broadcast_middle": ((1, 4, 4, 8), (1, 4, 1, 8), False, "NONE", 0.1),
    "broadcast_outer_and_inner": ((1, 4, 4, 8), (1, 1, 4, 1), True, "NONE", 0.1, "Sub"),
    # must not take the short requantization: an output scale below the inputs' by 2^18
    "tiny_output_scale": ((1, 3, 3, 4), (1, 3, 3, 4), False, "NONE", 0.1 / (1 << 18)),
}


def add_model(case, seed=0) -> bytes:
    """A one-ADD (or SUB: a sixth field) int8 model of `case` (an ADD_CASES row); b constant
    "first": the constant is the first operand."""
    shape_a, shape_b, const_b, act, out_scale = case[:5]
    op = case[5] if len(case) > 5 else "Add"
    n = Q8(seed)
    a = n.input("a", shape_a, 0.05, -3)
    if shape_b == "x":
        b = a
    elif const_b:
        b = n.const("b", n.rng.integers(-128, 128, shape_b).astype(np.int8), 0.08, 6)
    else:
        b = n.input("b", shape_b, 0.08, 6)
    out_shape = tuple(np.broadcast_shapes(shape_a, shape_a if shape_b == "x" else shape_b))
    n.node(op, [b, a] if const_b == "first" else [a, b], "y", out_shape, out_scale, -2,
           activation=act)
    return n.build(["y"])


ADD_MODELS = {name: add_model(case, seed) for seed, (name, case) in
              enumerate(ADD_CASES.items())}


def test_add_host_bit_exact_with_tflite_micro(tmp_path):
    exported = run_image(ADD_MODELS, tmp_path)
    assert_written_over_their_inputs(exported)
    for name, (_, files, summary) in exported.items():
        source = files[f"{name}.c"].decode()
        assert ("qconvert_add_fast_s8(" in source) == (not name.startswith("broadcast")), name
        line = next((ln for ln in source.splitlines() if "qconvert_add_params" in ln), "")
        assert line.rstrip("};").rstrip().endswith(", 0") == (name == "tiny_output_scale") \
            or name.startswith("broadcast"), line
    assert exported["same_shape"][2].overlapped == 1  # written over an input that dies there


def test_add_single_rounding_matches_the_executor(tmp_path):
    def single(name, data, sample):
        graph = read_tflite(data).graph
        return list(run_int8(graph, dict(zip(graph.inputs, sample)), rounding="single").values())

    run_image(ADD_MODELS, tmp_path, defines=["-DQCONVERT_SINGLE_ROUNDING"], expected=single)


@NEEDS_CROSS
@pytest.mark.parametrize("board", ("m4", "m55"))
def test_add_cortex_m_bit_exact_with_tflite_micro(tmp_path, board):
    run_image(ADD_MODELS, tmp_path, board)


MUL_CASES = {  # name: (shape a, shape b or "x", b constant, act, out scale / (s_a * s_b))
    "same_shape": ((1, 6, 6, 8), (1, 6, 6, 8), False, "NONE", 120.0),
    "x_times_x": ((2, 3, 5, 7), "x", False, "RELU", 90.0),
    "channel_const": ((1, 5, 4, 12), (12,), True, "RELU6", 150.0),
    "channel_act_first": ((1, 1, 1, 9), (1, 3, 4, 9), False, "NONE", 100.0),
    "row_input": ((1, 4, 4, 8), (1, 4, 4, 1), False, "NONE", 100.0),
    "scalar_const": ((1, 2, 16, 16), (1,), True, "NONE", 100.0),
    # must not take qconvert_mul_fast_s8: a broadcast over another axis
    "broadcast_pixel_column": ((1, 4, 4, 8), (1, 1, 4, 1), False, "NONE", 100.0),
    # must not take the short requantization: shift > -2
    "tiny_output_scale": ((1, 3, 3, 4), (1, 3, 3, 4), False, "NONE", 0.4),
}


def mul_model(case, seed=0) -> bytes:
    """A one-MUL int8 model of `case` (a MUL_CASES row)."""
    shape_a, shape_b, const_b, act, factor = case
    n = Q8(seed)
    s_a, s_b = 0.05, 0.08
    a = n.input("a", shape_a, s_a, -3)
    if shape_b == "x":
        b, s_b = a, s_a
    elif const_b:
        b = n.const("b", n.rng.integers(-128, 128, shape_b).astype(np.int8), s_b, 6)
    else:
        b = n.input("b", shape_b, s_b, 6)
    out_shape = tuple(np.broadcast_shapes(shape_a, shape_a if shape_b == "x" else shape_b))
    scale = 6.0 / 250 if act == "RELU6" else s_a * s_b * factor
    n.node("Mul", [a, b], "y", out_shape, scale, -2 if act != "RELU6" else -128, activation=act)
    return n.build(["y"])


MUL_MODELS = {name: mul_model(case, seed) for seed, (name, case) in
              enumerate(MUL_CASES.items())}


def test_mul_host_bit_exact_with_tflite_micro(tmp_path):
    exported = run_image(MUL_MODELS, tmp_path)
    assert_written_over_their_inputs(exported)
    for name, (_, files, _) in exported.items():
        source = files[f"{name}.c"].decode()
        assert ("qconvert_mul_fast_s8(" in source) == (not name.startswith("broadcast")), name
        line = next((ln for ln in source.splitlines() if "qconvert_mul_params" in ln), "")
        if not name.startswith("broadcast"):
            assert line.rstrip("};").rstrip().endswith(", 0") == (name == "tiny_output_scale"), \
                line
    assert exported["same_shape"][2].overlapped == 1


def test_mul_single_rounding_matches_the_executor(tmp_path):
    def single(name, data, sample):
        graph = read_tflite(data).graph
        return list(run_int8(graph, dict(zip(graph.inputs, sample)), rounding="single").values())

    run_image(MUL_MODELS, tmp_path, defines=["-DQCONVERT_SINGLE_ROUNDING"], expected=single)


@NEEDS_CROSS
@pytest.mark.parametrize("board", ("m4", "m55"))
def test_mul_cortex_m_bit_exact_with_tflite_micro(tmp_path, board):
    run_image(MUL_MODELS, tmp_path, board)


# -- --kernels cmsis-nn keeps the kernels measured faster, on cores without Helium ------------
KEEP_MODELS = {"same_shape": ADD_MODELS["same_shape"],
               "const_operand": ADD_MODELS["const_operand"],
               "channel_input": ADD_MODELS["channel_input"],
               "broadcast_middle": ADD_MODELS["broadcast_middle"],
               "kws_global_avg": POOL_MODELS["kws_global_avg"],
               "max_same_pad": POOL_MODELS["max_same_pad"], "kws3x3": DW_MODELS["kws3x3"],
               "mul_same": MUL_MODELS["same_shape"], "mul_channel": MUL_MODELS["channel_const"],
               "mul_row_input": MUL_MODELS["row_input"],
               "mul_broadcast_pixel_column": MUL_MODELS["broadcast_pixel_column"],
               "max_batch2": POOL_MODELS["max_2x2"], "mult2": DW_MODELS["mult2"],
               "chain_inplace": DW_MODELS["chain_inplace"], "odd_c_s2": DW_MODELS["odd_c_s2"],
               "big_multiplier": DW_MODELS["big_multiplier"], "c5_7x7": DW_MODELS["c5_7x7"],
               "c6_5x5": DW_MODELS["c6_5x5"], "nonsquare_dil": DW_MODELS["nonsquare_dil"],
               "batch2_1x1": DW_MODELS["batch2_1x1"]}


def _kept(source: str, fn: str) -> str:
    """"dsp" when `fn` is called only in the #else of an __ARM_FEATURE_MVE test, "all" when it
    is called unguarded, "no" when it is not called."""
    if f"{fn}(" not in source:
        return "no"
    return "dsp" if "#if defined(__ARM_FEATURE_MVE)" in source else "all"


@pytest.mark.skipif(not cmsis_nn_available(), reason="CMSIS-NN is not beside the repository")
@pytest.mark.parametrize("board", (None, "m4", "m55"))
def test_cmsis_nn_keeps_the_faster_kernels_without_helium(tmp_path, board):
    """Add, Mul, AveragePool, MaxPool, DepthwiseConv2D (qconvert_dw_hwc_s8, on the weights
    CMSIS-NN reads): the qconvert kernel on cores without Helium, CMSIS-NN's with it; must not:
    a depth multiplier 2 stays CMSIS-NN's, an Add or a Mul broadcast over a middle axis the
    general kernel; what CMSIS-NN has no call for (a constant operand, a channel
    vector, batch 2 pools) the qconvert kernel everywhere. Bit-exact on the host, Cortex-M4 and
    Cortex-M55 (MVE)."""
    if board is not None and not cross_tools_available():
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm missing")
    exported = run_image(KEEP_MODELS, tmp_path, board, kernels="cmsis-nn")
    src = {name: files[f"{name}.c"].decode() for name, (_, files, _) in exported.items()}
    assert _kept(src["same_shape"], "qconvert_add_fast_s8") == "dsp"
    assert "arm_elementwise_add_s8(" in src["same_shape"]
    assert _kept(src["const_operand"], "qconvert_add_fast_s8") == "all"
    assert _kept(src["channel_input"], "qconvert_add_fast_s8") == "all"
    assert _kept(src["broadcast_middle"], "qconvert_add_fast_s8") == "no"
    assert _kept(src["kws_global_avg"], "qconvert_avgpool_fast_s8") == "dsp"
    assert _kept(src["max_same_pad"], "qconvert_maxpool_fast_s8") == "dsp"
    assert "arm_max_pool_s8(" in src["max_same_pad"]
    assert _kept(src["max_batch2"], "qconvert_maxpool_fast_s8") == "all"
    assert _kept(src["mul_same"], "qconvert_mul_fast_s8") == "dsp"
    assert "arm_elementwise_mul_s8(" in src["mul_same"]
    assert _kept(src["mul_channel"], "qconvert_mul_fast_s8") == "all"
    assert _kept(src["mul_row_input"], "qconvert_mul_fast_s8") == "all"
    assert _kept(src["mul_broadcast_pixel_column"], "qconvert_mul_fast_s8") == "no"
    assert _kept(src["kws3x3"], "qconvert_dw_hwc_s8") == "dsp"
    assert "arm_depthwise_conv_wrapper_s8(" in src["kws3x3"]
    assert src["kws3x3"].count("l0_weights[") == 1  # one copy of the weights
    assert _kept(src["mult2"], "qconvert_dw_hwc_s8") == "no"
    assert _kept(src["chain_inplace"], "qconvert_dw_hwc_s8") == "dsp"
    assert exported["chain_inplace"][2].overlapped == 2  # CMSIS-NN per row, ours whole


def test_fast_requantize_condition_and_flag(tmp_path):
    """The short form only when every multiplier is in [2^30, 2^31) and every shift <= -2; the
    exported layer says which (must-not: one channel outside is enough to refuse)."""
    assert fast_requantize([1 << 30, (1 << 31) - 1], [-2, -31])
    assert not fast_requantize([1 << 30, 1 << 30], [-2, -1])
    assert not fast_requantize([1 << 30, 1 << 30], [-5, 3])
    assert not fast_requantize([(1 << 30) - 1, 1 << 30], [-5, -5])
    assert not fast_requantize([0, 1 << 30], [-5, -5])
    for name, expect in (("kws3x3", 1), ("big_multiplier", 0)):
        files = export_models({name: DW_MODELS[name]}, tmp_path / name)[name][1]
        line = next(ln for ln in files[f"{name}.c"].decode().splitlines()
                    if "qconvert_dw_params" in ln)
        assert line.rstrip("};").rstrip().endswith(f", {expect}"), line


def test_dw_weights_layout_groups_four_channels_then_the_rest():
    w = np.arange(2 * 3 * 6, dtype=np.int8).reshape(1, 2, 3, 6)  # taps 6, channels 6
    got = dw_weights_layout(w)
    taps = w.reshape(6, 6)
    want = np.concatenate([taps[:, :4].reshape(-1), taps[:, 4:].reshape(-1)])
    assert np.array_equal(got, want)
    w7 = np.arange(9 * 9, dtype=np.int8).reshape(1, 3, 3, 9)
    got = dw_weights_layout(w7).reshape(-1)
    t = w7.reshape(9, 9)
    assert np.array_equal(got[:36], t[:, 0:4].reshape(-1))      # group 0, tap-major
    assert np.array_equal(got[36:72], t[:, 4:8].reshape(-1))    # group 1
    assert np.array_equal(got[72:], t[:, 8])                    # the last channel


REQUANT_MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include "qconvert_nn_simd.h"
#include "qconvert_fc_1x4.h"
static uint32_t state = 12345u;
static uint32_t next(void) { state = state * 1664525u + 1013904223u; return state; }
int main(void)
{
    long bad = 0, k;
    for (k = 0; k < 3000000; ++k) {
        const int32_t n = 2 + (int32_t)(next() % 30);                 /* shift -2 .. -31 */
        const int32_t m = (int32_t)(0x40000000u + (next() & 0x3FFFFFFFu));
        int32_t acc = (int32_t)next();
        if (k % 4 == 1) {
            acc >>= (next() % 31);
        }
        if (k % 4 == 2) { /* near a tie of the final rounding */
            const int64_t y = (int64_t)((int32_t)(next() % 2001) - 1000) * ((int64_t)1 << n)
                              + ((int64_t)1 << (n - 1));
            acc = (int32_t)((y << 31) / m + (int32_t)(next() % 5) - 2);
        }
        if (k % 4 == 3) {
            acc = (int32_t)(next() % 512) - 256;
        }
        if (qconvert_requantize_fast(acc, m, n - 2) != qconvert_requantize(acc, m, -n)) {
            if (bad < 5) {
                printf("acc %ld m %ld n %ld\n", (long)acc, (long)m, (long)n);
            }
            ++bad;
        }
    }
    printf("bad %ld\n", bad);
    return 0;
}
"""


@pytest.mark.parametrize("rounding", ([], ["-DQCONVERT_SINGLE_ROUNDING"]))
def test_short_requantization_equals_the_general_one(tmp_path, rounding):
    """qconvert_requantize_fast == qconvert_requantize on random, small and near-tie
    accumulators for every shift -2..-31 (both roundings)."""
    for f in ("qconvert_nn_simd.h", "qconvert_nn_fast.h", "qconvert_nn.h", "qconvert_fc_1x4.h",
              "qconvert_fc_1x4.c"):
        (tmp_path / f).write_bytes(kernel_source(f))
    (tmp_path / "main.c").write_text(REQUANT_MAIN)
    exe = tmp_path / "requant"
    subprocess.run(["gcc", *STRICT, "-O2", *rounding, str(tmp_path / "main.c"),
                    str(tmp_path / "qconvert_fc_1x4.c"), "-o", str(exe)], check=True)
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("bad 0"), out
