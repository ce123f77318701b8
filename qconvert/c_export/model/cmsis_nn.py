"""`export-c --kernels cmsis-nn`: the layer calls CMSIS-NN has kernels for.

    step = cmsis_lowering.lower_cmsis(graph, portable_step, options)

Conv2D -> arm_convolve_wrapper_s8, DepthwiseConv2D -> arm_depthwise_conv_wrapper_s8,
FullyConnected -> arm_fully_connected_s8 (per-tensor) / arm_fully_connected_per_channel_s8, with
row-major weights and the per-row kernel sums the Helium (MVE) kernels read instead of the bias
(`bias[r] + input_offset * sum_k(w[r][k] + weights_offset)`, a const array given as the
context buffer in Helium builds only: the other builds never read it, so it is not linked
there and the context is NULL), Add and Mul of equal shapes -> arm_elementwise_add_s8 /
arm_elementwise_mul_s8,
AveragePool / MaxPool -> arm_avgpool_s8 / arm_max_pool_s8, Softmax -> arm_softmax_s8, a
TransposeConv whose kernel is its stride -> arm_fully_connected_per_channel_s8 row by row
(`transpose_conv_cmsis`). Every other op keeps qconvert's portable kernel.

Scratch buffers: CMSIS-NN sizes them per build (scalar, DSP or MVE) with its
`*_get_buffer_size` functions, which exist only in the library. The plan reserves, for Helium
(MVE) builds and for the others, the largest size any path of that build asks for (the formulas
of CMSIS-NN 7, computed here; `render` plans each build when they differ), and the
generated code checks the library's own answer against the reservation once, in NAME_check,
which the first `invoke` runs before any layer (`Step.check`; the sizes depend only on the
build and the constant layer parameters): `invoke` returns 2, every time, rather than write
past it, and no call pays for the check. CMSIS-NN kernels are never run over their own input
except element for element (element-wise ones) and band by band: a convolution offers the plan
"bands" overlaps of 1 to 16 output rows (`row_bands`), and where the plan uses one (only where
it lowers the arena: memory_plan's step 5; `MemoryPlan.banded`, the rows per band) the layer is
called once per band on the input rows that band reads (`_banded_call`), so the plan needs only
the kernel's contract (it reads its input and writes its output), never its inner order. Every
other layer is one whole-layer call.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template
from typing import Callable

import numpy as np

from qconvert.errors import QConvertError
from qconvert.int8.fixed_point import wrap32
from qconvert.int8.prepare import is_int16_node, layer_params

from ..c_text import HELIUM_TEST
from .steps import Step, activation_inputs, fast_conv_step, fast_fc_step, fc_geometry, tensor_dims
from .memory_plan import PlanStep
from .cmsis_fast import on_dsp_builds
from .helium_tiles import helium_tiles

_CH_IN_BLOCK_MVE = 124


def _ceil(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def conv_scratch(cin, kh, kw, pad_w) -> dict:
    """Bytes of arm_convolve_wrapper_s8's buffer: {"helium": MVE builds, "other": scalar and
    DSP builds}, the largest any of the wrapper's paths asks for."""
    k = kh * kw * cin
    generic = 4 * (k + (-k) % 4)                       # im2col, 2 columns of int16
    mve = 64 * _ceil(k, 16)                            # 4 im2col rows of 16 lanes
    one_by_n = (kw + 2 * pad_w + 2) * cin              # the 1 x N MVE path (bounded)
    fast_1x1 = 4 * cin                                 # 1x1 with Arm Compiler (DSP)
    return {"helium": max(mve, one_by_n), "other": max(generic, fast_1x1)}


def depthwise_scratch(cin, cout, kh, kw, pad_w) -> dict:
    """Bytes of arm_depthwise_conv_wrapper_s8's buffer per build (see conv_scratch)."""
    dsp = 2 * cin * kh * kw
    mve = 4 * _CH_IN_BLOCK_MVE * kh * kw
    one_in_channel = conv_scratch(1, kh, kw, pad_w)["helium"] + kh * kw * cout
    return {"helium": max(mve, one_in_channel), "other": dsp}


def _dims(shape4) -> str:
    n, h, w, c = (int(d) for d in shape4)
    return f"{{{n}, {h}, {w}, {c}}}"


def cmsis_context(scratch) -> list:
    if scratch and max(scratch.values()):
        return ["cmsis_nn_context ctx;", "ctx.buf = $scratch;", "ctx.size = $scratch_size;"]
    return ["cmsis_nn_context ctx;", "ctx.buf = NULL;", "ctx.size = 0;"]


def cmsis_step(graph, node, index, call, arrays, decls, scratch=None, overlap=None) -> Step:
    plan = PlanStep(inputs=activation_inputs(graph, node), outputs=[n for n in node.outputs if n],
                    overlap=overlap, scratch=max((scratch or {}).values(), default=0))
    return Step(index, node, plan, Template("\n".join(call)), arrays, decls,
                {"qconvert_nn.h", "qconvert_fc_1x4.h", "qconvert_fc_1x4.c"},
                scratch_builds=scratch)


def status_check(status_call: str) -> list:
    return [f"if ({status_call} != ARM_CMSIS_NN_SUCCESS) {{", "    return 1;", "}"]


@dataclass(frozen=True)
class ConvKernels:
    """What differs between the int8 (`S8_CONV`) and the 16x8 (`cmsis_nn_s16.S16_CONV`) calls
    of CMSIS-NN's convolution wrappers: the kernel suffix, the scratch bytes per build of a conv
    and of a depthwise conv ((x, y, kh, kw, layer params) -> {"helium": .., "other": ..}), the
    bias ((graph, node, layer params, channels, depthwise) -> (array, C argument, declarations))
    and whether an output overlapping its input is run band by band (else the plan keeps them
    apart)."""

    suffix: str
    conv_scratch: Callable
    depthwise_scratch: Callable
    bias: Callable
    banded: bool


def _bias_s8(graph, node, p, channels, depthwise) -> tuple:
    bias = graph.tensors[node.inputs[2]].data if len(node.inputs) > 2 and node.inputs[2] else None
    return ("bias", "int32_t", bias if bias is not None else np.zeros(channels, np.int32)), \
        "@L_bias", []


S8_CONV = ConvKernels(
    "s8", lambda x, y, kh, kw, p: conv_scratch(x[3], kh, kw, p["pads"][1]),
    lambda x, y, kh, kw, p: depthwise_scratch(x[3], y[3], kh, kw, p["pads"][1]), _bias_s8, True)


def conv_step(graph, node, step, kernels: ConvKernels) -> Step:
    """Conv2D / DepthwiseConv2D `step` as arm_convolve_wrapper_<suffix> /
    arm_depthwise_conv_wrapper_<suffix>; the library's scratch size is checked once
    (`Step.check`, run by NAME_check), not at every call."""
    p = layer_params(graph, node)
    x, y = tensor_dims(graph, node.inputs[0]), tensor_dims(graph, node.outputs[0])
    w = graph.tensors[node.inputs[1]].data
    depthwise = node.op == "DepthwiseConv2D"
    kh, kw = int(w.shape[1]), int(w.shape[2])
    act = f"{{{p['activation_min']}, {p['activation_max']}}}"
    geo = (f"{{{p['strides'][1]}, {p['strides'][0]}}}, {{{p['pads'][1]}, {p['pads'][0]}}}, "
           f"{{{p['dilations'][1]}, {p['dilations'][0]}}}, {act}")
    offsets = f"{p['input_offset']}, {p['output_offset']}"
    if depthwise:
        mult = y[3] // x[3]
        scratch = kernels.depthwise_scratch(x, y, kh, kw, p)
        decls = [f"static const cmsis_nn_dw_conv_params @L_conv = {{{offsets}, {mult}, {geo}}};",
                 f"static const cmsis_nn_dims @L_filter_dims = {{1, {kh}, {kw}, {y[3]}}};"]
        fn = f"arm_depthwise_conv_wrapper_{kernels.suffix}"
    else:
        scratch = kernels.conv_scratch(x, y, kh, kw, p)
        decls = [f"static const cmsis_nn_conv_params @L_conv = {{{offsets}, {geo}}};",
                 f"static const cmsis_nn_dims @L_filter_dims = "
                 f"{{{y[3]}, {kh}, {kw}, {int(w.shape[3])}}};"]
        fn = f"arm_convolve_wrapper_{kernels.suffix}"
    size_fn = f"{fn}_get_buffer_size"
    generic = not depthwise and kernels.suffix == "s8" and int(w.shape[3]) == x[3] and \
        _one_by_n_inexact(x, y, kh, kw, p)
    size_args = "&@L_conv, &@L_input_dims, &@L_filter_dims, &@L_output_dims"
    if generic:  # the wrapper's MVE 1 x N path would be wrong: its generic kernel, unbanded
        fn, size_fn = "arm_convolve_s8", "arm_convolve_s8_get_buffer_size"
        size_args = "&@L_input_dims, &@L_filter_dims"
    bias, bias_arg, bias_decls = kernels.bias(graph, node, p, y[3], depthwise)
    arrays = [a for a in step.arrays if a[0] != "bias"] + [bias]
    decls += [*bias_decls,
              "static const cmsis_nn_per_channel_quant_params @L_quant = "
              "{(int32_t *)@L_multiplier, (int32_t *)@L_shift};",
              f"static const cmsis_nn_dims @L_input_dims = {_dims(x)};",
              f"static const cmsis_nn_dims @L_bias_dims = {{1, 1, 1, {y[3]}}};",
              f"static const cmsis_nn_dims @L_output_dims = {_dims(y)};"]
    call = ["{", *("    " + c for c in cmsis_context(scratch)),
            *("    " + c for c in status_check(
                f"{fn}(&ctx, &@L_conv, &@L_quant, &@L_input_dims, $in0, &@L_filter_dims, "
                f"@L_weights, &@L_bias_dims, {bias_arg}, {'NULL, ' if generic else ''}"
                "&@L_output_dims, $out0)")), "}"]
    made = cmsis_step(graph, node, step.index, call, arrays, decls, scratch)
    made.check = Template("\n".join(_fits(f"{size_fn}({size_args})")))
    if kernels.suffix == "s8" and not generic:
        made.helium_tiles = helium_tiles(x, y, (kh, kw), p, depthwise, int(w.shape[3]))
    heights = [k for k in BAND_ROWS if k < y[1]] if kernels.banded and not generic else []
    bands = [(k, row_bands(x, y, kh, p, k)) for k in heights]
    bands = [(k, b) for k, b in bands if b is not None]
    if bands:
        made.plan.overlap = [("bands", 0, *b, k) for k, b in bands]
        made.banded = Template("\n".join(_banded_call(fn, x, y, kh, p, scratch, depthwise)))
        made.banded_check = Template("\n".join(_banded_fits(size_fn, x, y, kh, p,
                                                              depthwise)))
    return made


def _one_by_n_inexact(x, y, kh, kw, p) -> bool:
    """True when arm_convolve_wrapper_s8, on the whole layer or on a band of one input row,
    would take the MVE 1 x N path and that path is not exact here (`cmsis_1xn`): such a layer
    calls arm_convolve_s8 itself, the wrapper's own choice on every other build."""
    from .cmsis_1xn import one_by_n_exact, takes_one_by_n

    pads = (p["pads"][0], p["pads"][1])
    if not takes_one_by_n(1, kh, kw, p["strides"][1], p["dilations"], x[3], pads):
        return False
    return not one_by_n_exact(x[2], kw, y[2], p["pads"][1], p["strides"][1])


def _fits(size_call: str) -> list:
    """C lines: `return 2;` when the library asks for more scratch than the plan reserved."""
    return [f"if ({size_call} > $scratch_size) {{", "    return 2;", "}"]


BAND_ROWS = (1, 2, 4, 8, 16)  # band heights offered to the plan (it keeps the tallest it can)


def row_bands(x, y, kh, p, rows=1):
    """(ends, reads) of bands of `rows` output rows (see memory_plan), or None when a band
    would read no input row or the batch is not 1."""
    n, h, w, c = x
    _, oh, ow, oc = y
    if n != 1:
        return None
    extent = (kh - 1) * p["dilations"][0] + 1
    top = np.arange(0, oh, rows)
    bottom = np.minimum(top + rows, oh)
    first = np.maximum(top * p["strides"][0] - p["pads"][0], 0)
    last = np.minimum((bottom - 1) * p["strides"][0] - p["pads"][0] + extent, h)
    if np.any(last <= first):
        return None
    return (bottom * ow * oc, first * w * c)


def _band_shape(x, y, kh, p, depthwise) -> list:
    """C lines: the band from output row `oy` of `$band_rows` rows (the plan's choice) as
    `conv`, `in_dims`, `out_dims` and its `first` input row."""
    _, h, w, c = x
    _, oh, ow, oc = y
    extent = (kh - 1) * p["dilations"][0] + 1
    stride, pad = p["strides"][0], p["pads"][0]
    params = "cmsis_nn_dw_conv_params" if depthwise else "cmsis_nn_conv_params"
    return [f"const int32_t rows = {oh} - oy < $band_rows ? {oh} - oy : $band_rows;",
            f"const int32_t y0 = oy * {stride} - {pad};",
            f"const int32_t y1 = (oy + rows - 1) * {stride} - {pad} + {extent};",
            "const int32_t first = y0 > 0 ? y0 : 0;",
            f"const int32_t last = y1 < {h} ? y1 : {h};",
            f"{params} conv = @L_conv;",
            f"cmsis_nn_dims in_dims = {{1, 0, {w}, {c}}};",
            f"cmsis_nn_dims out_dims = {{1, 0, {ow}, {oc}}};",
            "in_dims.h = last - first;",
            "out_dims.h = rows;",
            "conv.padding.h = first - y0;"]


def _banded_fits(size_fn, x, y, kh, p, depthwise) -> list:
    """The scratch checks of the banded call: every band's shape (input rows, top padding), in
    a loop as compact as the call's own (run once, so its cost does not matter; its flash
    does)."""
    oh = y[1]
    body = [*_band_shape(x, y, kh, p, depthwise),
            *_fits(f"{size_fn}(&conv, &in_dims, &@L_filter_dims, &out_dims)")]
    return ["{", "    int32_t oy;", f"    for (oy = 0; oy < {oh}; oy += $band_rows) {{",
            *("        " + b for b in body), "    }", "}"]


def _banded_call(fn, x, y, kh, p, scratch, depthwise) -> list:
    """The kernel called once per band of `$band_rows` output rows, on the input rows that
    band reads."""
    _, h, w, c = x
    _, oh, ow, oc = y
    body = [*_band_shape(x, y, kh, p, depthwise),
            *status_check(f"{fn}(&ctx, &conv, &@L_quant, &in_dims, $in0 + first * {w * c}, "
                          "&@L_filter_dims, @L_weights, &@L_bias_dims, @L_bias, &out_dims, "
                          f"$out0 + oy * {ow * oc})")]
    return ["{", "    int32_t oy;", *("    " + c for c in cmsis_context(scratch)),
            "    /* band by band: the output overlaps the input (memory plan) */",
            f"    for (oy = 0; oy < {oh}; oy += $band_rows) {{", *("        " + b for b in body),
            "    }", "}"]


def kernel_sums(weights, bias, input_offset, weights_offset) -> np.ndarray:
    """Per-row sums the MVE fully connected kernels start from instead of the bias:
    bias[r] + input_offset * sum_k(w[r][k] + weights_offset), wrapped to int32 as in C."""
    w = np.asarray(weights, dtype=np.int64)
    total = w.sum(axis=1) + w.shape[1] * int(weights_offset)
    b = np.zeros(w.shape[0], np.int64) if bias is None else np.asarray(bias, np.int64)
    return wrap32(b + int(input_offset) * total).astype(np.int64)


def fc_step(graph, node, step, options):
    if options.fc_layout != "rowmajor":
        raise QConvertError("arm_fully_connected_s8 reads row-major weights: use "
                            "--fc-layout rowmajor with --kernels cmsis-nn")
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    batches, depth, rows = fc_geometry(graph, node)
    arrays = list(step.arrays)
    arrays.append(("kernel_sums", "int32_t#helium",  # read by the MVE kernel only
                   kernel_sums(w, p["bias"], p["input_offset"], p["weights_offset"])))
    act = f"{{{p['activation_min']}, {p['activation_max']}}}"
    decls = [f"static const cmsis_nn_fc_params @L_fc = {{{p['input_offset']}, "
             f"{p['weights_offset']}, {p['output_offset']}, {act}}};",
             f"static const cmsis_nn_dims @L_input_dims = {{{batches}, 1, 1, {depth}}};",
             f"static const cmsis_nn_dims @L_filter_dims = {{{depth}, 1, 1, {rows}}};",
             f"static const cmsis_nn_dims @L_bias_dims = {{1, 1, 1, {rows}}};",
             f"static const cmsis_nn_dims @L_output_dims = {{{batches}, 1, 1, {rows}}};"]
    if p["per_channel"]:
        decls.append("static const cmsis_nn_per_channel_quant_params @L_quant = "
                     "{(int32_t *)@L_multiplier, (int32_t *)@L_shift};")
        fn = "arm_fully_connected_per_channel_s8"
    else:
        decls.append("static const cmsis_nn_per_tensor_quant_params @L_quant = "
                     f"{{{int(p['output_multiplier'][0])}, {int(p['output_shift'][0])}}};")
        fn = "arm_fully_connected_s8"
    bias = "@L_bias" if p["bias"] is not None else "NULL"
    call = ["{", "    cmsis_nn_context ctx;",
            f"#if {HELIUM_TEST}",
            "    ctx.buf = (void *)@L_kernel_sums; /* read by the Helium (MVE) kernel only */",
            f"    ctx.size = {4 * rows};",
            "#else",
            "    ctx.buf = NULL;",
            "    ctx.size = 0;",
            "#endif",
            *("    " + c for c in status_check(
                f"{fn}(&ctx, &@L_fc, &@L_quant, &@L_input_dims, $in0, &@L_filter_dims, "
                f"@L_weights, &@L_bias_dims, {bias}, &@L_output_dims, $out0)")), "}"]
    return cmsis_step(graph, node, step.index, call, arrays, decls)


def pool_step(graph, node, step, suffix="s8"):
    """AveragePool / MaxPool (batch 1) -> arm_avgpool_<suffix> / arm_max_pool_<suffix> (the
    int8 "s8" and the 16x8 "s16" calls take the same arguments); other batches keep `step`."""
    p = layer_params(graph, node)
    x, y = tensor_dims(graph, node.inputs[0]), tensor_dims(graph, node.outputs[0])
    if x[0] != 1:
        return step
    kh, kw = p["kernel_shape"]
    avg = node.op == "AveragePool"
    scratch = {"helium": 0, "other": 4 * x[3] if avg else 0}
    decls = [f"static const cmsis_nn_pool_params @L_pool = {{{{{p['strides'][1]}, "
             f"{p['strides'][0]}}}, {{{p['pads'][1]}, {p['pads'][0]}}}, "
             f"{{{p['activation_min']}, {p['activation_max']}}}}};",
             f"static const cmsis_nn_dims @L_input_dims = {_dims(x)};",
             f"static const cmsis_nn_dims @L_filter_dims = {{1, {kh}, {kw}, 1}};",
             f"static const cmsis_nn_dims @L_output_dims = {_dims(y)};"]
    fn = f"arm_avgpool_{suffix}" if avg else f"arm_max_pool_{suffix}"
    call = ["{", *("    " + c for c in cmsis_context(scratch)),
            *("    " + c for c in status_check(
                f"{fn}(&ctx, &@L_pool, &@L_input_dims, $in0, &@L_filter_dims, "
                "&@L_output_dims, $out0)")), "}"]
    made = cmsis_step(graph, node, step.index, call, [], decls, scratch)
    if avg:
        made.check = Template("\n".join(_fits(f"arm_avgpool_{suffix}_get_buffer_size("
                                               f"{y[2]}, {x[3]})")))
    return made


def elementwise_step(graph, node, step, suffix="s8"):
    """Add / Mul of equal shapes -> arm_elementwise_add_<suffix> / arm_elementwise_mul_<suffix>
    (int8 "s8", or 16x8 "s16" whose parameters carry no offsets: 0); a broadcast or a constant
    operand keeps `step`."""
    out = tensor_dims(graph, node.outputs[0])
    names = node.inputs[:2]
    if any(graph.tensors[n].data is not None or tensor_dims(graph, n) != out for n in names):
        return step  # broadcasting or a constant operand: the portable kernel
    p = layer_params(graph, node)
    size = int(np.prod(out, dtype=np.int64))
    a, b = ("$in0", "$in1") if names[0] != names[1] else ("$in0", "$in0")
    if node.op == "Add":
        call = (f"arm_elementwise_add_{suffix}({a}, {b}, {p.get('input1_offset', 0)}, "
                f"{p['input1_multiplier']}, {p['input1_shift']}, {p.get('input2_offset', 0)}, "
                f"{p['input2_multiplier']}, {p['input2_shift']}, {p['left_shift']}, $out0, "
                f"{p.get('output_offset', 0)}, {p['output_multiplier']}, {p['output_shift']}, "
                f"{p['activation_min']}, {p['activation_max']}, {size})")
    else:
        call = (f"arm_elementwise_mul_{suffix}({a}, {b}, {p.get('input1_offset', 0)}, "
                f"{p.get('input2_offset', 0)}, $out0, {p.get('output_offset', 0)}, "
                f"{p['output_multiplier']}, "
                f"{p['output_shift']}, {p['activation_min']}, {p['activation_max']}, {size})")
    overlap = [c for c in step.plan.overlap or [] if c[0] == "same"]
    return cmsis_step(graph, node, step.index, status_check(call), [], [], None, overlap)


def softmax_step(graph, node, step, fn="arm_softmax_s8"):
    """Softmax from int8 -> arm_softmax_s8 (int8 output) or arm_softmax_s8_s16 (int16 output:
    the same code with 16 output bits); both take the same arguments."""
    p = layer_params(graph, node)
    dims = tensor_dims(graph, node.inputs[0])
    row = dims[-1]
    rows = int(np.prod(dims, dtype=np.int64)) // row
    call = [f"{fn}($in0, {rows}, {row}, {p['input_multiplier']}, "
            f"{p['input_left_shift']}, {p['diff_min']}, $out0);"]
    return cmsis_step(graph, node, step.index, call, [], [])
