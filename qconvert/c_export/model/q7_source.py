"""`qconvert export-c --scheme q7`: a q7 model (`quant.q7_plan.Q7Model`) as NAME.c / NAME.h.

Two kernel sets: "cmsis-nn-legacy" calls CMSIS_5's legacy q7 API (the CMSIS-NN paper's
kernels; the application compiles them from its own copy), "portable" calls qconvert's
`qconvert_q7_*` (kernels/qconvert_q7.c, shipped beside NAME.c), bit-exact with the legacy ones
on every build. The header keeps export-c's API: NAME_invoke(input, output),
NAME_invoke_with_arena, NAME_check, NAME_INPUT0_SCALE = 2^-n, zero points 0.

Memory: the model is a chain, so a layer's input and output are the only live activations;
they sit at opposite ends of one activation region (a layer's output at the end its input is
not at), which is as large as the largest input plus output of a layer. ReLU, sigmoid / tanh
and reshapes work in place. After the region, the legacy kernels' scratch (`_scratch` per
layer kind: im2col columns, the fully connected layer's q15 vector, the average pool's q15
row). One static arena holds both.

The calls themselves, and which legacy convolution runs, are `q7_calls`'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert.errors import QConvertError

from ..c_text import c_array_body, c_comment, c_float
from ..fc_layout import to_1x4
from .q7_calls import CALLS, relu_call

KERNEL_SETS = ("cmsis-nn-legacy", "portable")
LEGACY_FILES = ("ConvolutionFunctions/arm_convolve_HWC_q7_basic.c",
                "ConvolutionFunctions/arm_convolve_HWC_q7_basic_nonsquare.c",
                "ConvolutionFunctions/arm_convolve_HWC_q7_fast.c",
                "ConvolutionFunctions/arm_convolve_HWC_q7_fast_nonsquare.c",
                "ConvolutionFunctions/arm_convolve_HWC_q7_RGB.c",
                "ConvolutionFunctions/arm_depthwise_separable_conv_HWC_q7.c",
                "ConvolutionFunctions/arm_depthwise_separable_conv_HWC_q7_nonsquare.c",
                "ConvolutionFunctions/arm_nn_mat_mult_kernel_q7_q15.c",
                "ConvolutionFunctions/arm_nn_mat_mult_kernel_q7_q15_reordered.c",
                "FullyConnectedFunctions/arm_fully_connected_q7_opt.c",
                "PoolingFunctions/arm_pool_q7_HWC.c",
                "ActivationFunctions/arm_relu_q7.c",
                "ActivationFunctions/arm_nn_activations_q7.c",
                "SoftmaxFunctions/arm_softmax_q7.c",
                "NNSupportFunctions/arm_q7_to_q15_no_shift.c",
                "NNSupportFunctions/arm_q7_to_q15_reordered_no_shift.c",
                "NNSupportFunctions/arm_nntables.c")


def _scratch(layer) -> int:
    """Bytes of legacy scratch `layer` needs (its q15 / q7 buffers)."""
    kh, kw = layer.kernel
    if layer.kind == "conv":
        return 2 * 2 * layer.in_shape[2] * kh * kw
    if layer.kind == "depthwise":
        return layer.in_shape[2] * kh * kw + 4  # + the 4-byte reads past the last channel
    if layer.kind == "fc":
        return 2 * layer.in_shape[0]
    if layer.kind == "avgpool":
        return 2 * max(layer.out_shape[1], 1) * layer.in_shape[2]
    return 0


IN_PLACE = ("relu", "reshape", "sigmoid", "tanh")


@dataclass
class ArenaPlan:
    """The activation region's size, each activation's offset in it (the model input's, then
    every layer output's), the scratch's offset and the arena's size (bytes)."""

    region: int
    offsets: list
    scratch: int
    size: int


def _round4(n: int) -> int:
    return (int(n) + 3) // 4 * 4


def plan_arena(model, kernels: str) -> ArenaPlan:
    """The static arena of `model` (module docstring)."""
    sizes = [_round4(np.prod(model.input_shape))] + [_round4(np.prod(l.out_shape))
                                                    for l in model.layers]
    region = max([sizes[0]] + [sizes[i] + sizes[i + 1] for i, l in enumerate(model.layers)
                               if l.kind not in IN_PLACE])
    offsets, low = [0], True
    for i, layer in enumerate(model.layers):
        if layer.kind not in IN_PLACE:
            low = not low
        offsets.append(0 if low else region - sizes[i + 1])
    scratch = _round4(max(_scratch(l) for l in model.layers)) if kernels == "cmsis-nn-legacy" \
        else 0
    return ArenaPlan(region, offsets, region, region + scratch)


def _array(name: str, values: np.ndarray, pad: int = 0) -> list:
    """A static const int8_t array (`pad` zero bytes after the values)."""
    flat = np.concatenate([np.asarray(values, np.int8).reshape(-1), np.zeros(pad, np.int8)])
    return [f"static const int8_t {name}[{flat.size}] = {{", c_array_body(flat, "int8_t"), "};"]


def _geom(layer) -> str:
    (ih, iw, ic), (oh, ow, oc) = layer.in_shape, layer.out_shape
    return (f"{{{ih}, {iw}, {ic}, {oh}, {ow}, {oc}, {layer.kernel[0]}, {layer.kernel[1]}, "
            f"{layer.stride[0]}, {layer.stride[1]}, {layer.pad[0]}, {layer.pad[1]}}}")





def _constants(model, kernels: str) -> list:
    from qconvert.executor.q7_kernels import activation_table

    lines = []
    for i, layer in enumerate(model.layers):
        if layer.weights is not None:
            w = to_1x4(layer.weights) if layer.kind == "fc" else layer.weights
            lines += _array(f"l{i}_w", w, 4 if layer.kind == "depthwise" else 0)
            lines += _array(f"l{i}_b", layer.bias)
        if kernels == "portable" and layer.kind in ("conv", "depthwise", "maxpool", "avgpool"):
            lines.append(f"static const qconvert_q7_geom l{i}_g = {_geom(layer)};")
    if kernels == "portable":
        for kind in sorted({l.kind for l in model.layers} & {"sigmoid", "tanh"}):
            lines += _array(f"q7_{kind}_table", activation_table(kind))
    return lines


def _check(model, kernels: str) -> None:
    if kernels not in KERNEL_SETS:
        raise QConvertError(f"--scheme q7 takes --kernels {' or '.join(KERNEL_SETS)}, "
                            f"not {kernels}")
    for layer in model.layers:
        if layer.weights is not None and not (0 <= layer.bias_shift <= 31
                                              and 0 <= layer.out_shift <= 31):
            raise QConvertError(f"layer {layer.name!r}: shifts {layer.bias_shift}, "
                                f"{layer.out_shift} out of the legacy kernels' 0..31")


def _header(model, name: str, kernels: str, provenance: str, arena: ArenaPlan) -> list:
    """NAME.h's lines: export-c's API (sizes, scales 2^-n, zero points 0, the profiling hook)."""
    upper = name.upper()
    lines = [
        "/* SPDX-License-Identifier: Apache-2.0 */",
        f"/* {name}.h: {c_comment(provenance)} as C in the CMSIS-NN paper's power-of-two q7",
        f" * scheme, generated by qconvert (export-c --scheme q7 --kernels {kernels}); do not",
        " * edit.",
        " *",
        f" * {name}_invoke runs the model on the static arena inside {name}.c (the input is",
        " * copied in, the output out); it returns 0, or 1 when a kernel refused its arguments.",
        f" * {name}_invoke_with_arena takes a 4-byte aligned arena of {upper}_ARENA_SIZE bytes.",
        " * Real value = scale * q, scale = 2^-FRAC (zero points 0). Sizes are in elements.",
        " *",
        f" * Per-layer profiling: built with -DQCONVERT_PROFILE or -D{upper}_PROFILE, {name}_invoke",
        f" * calls {name}_layer_hook (the application's) before ({upper}_LAYER_BEGIN) and after",
        f" * ({upper}_LAYER_END) every layer that runs code (index: the `layer N` comments of",
        f" * {name}.c; op: its operator).",
        " */",
        f"#ifndef {upper}_H", f"#define {upper}_H", "", "#include <stdint.h>", "",
        "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
        f"#define {upper}_ARENA_SIZE {arena.size}",
        f"#define {upper}_NUM_INPUTS 1", f"#define {upper}_NUM_OUTPUTS 1"]
    ios = (("INPUT", model.input_shape, model.input_frac),
           ("OUTPUT", model.layers[-1].out_shape, model.output_frac))
    for io, shape, frac in ios:
        for tag in (f"{io}0", io):
            lines += [f"#define {upper}_{tag}_SIZE {int(np.prod(shape))}",
                      f"#define {upper}_{tag}_FRAC {frac}",
                      f"#define {upper}_{tag}_SCALE {c_float(2.0 ** -frac)}",
                      f"#define {upper}_{tag}_ZERO_POINT 0"]
        lines.append(f"/* {io.lower()} 0: [1, {', '.join(map(str, shape))}] int8 */")
    lines += [f"#define {upper}_NUM_LAYERS {len(model.layers)}",
              f"#define {upper}_LAYER_BEGIN 0", f"#define {upper}_LAYER_END 1", "",
              f"int {name}_invoke(const int8_t *input, int8_t *output);",
              f"int {name}_invoke_with_arena(const int8_t *input, int8_t *output, void *arena);",
              f"int {name}_check(void);", "",
              f"#if defined(QCONVERT_PROFILE) || defined({upper}_PROFILE)",
              f"void {name}_layer_hook(int index, const char *op, int phase);", "#endif", "",
              "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {upper}_H */", ""]
    return lines


def _layer_calls(model, kernels: str, arena: ArenaPlan) -> list:
    """The body of NAME_invoke_with_arena between copying the input in and the output out:
    each layer's call(s) between the profiling hooks."""
    at = [f"(a + {o})" if o else "a" for o in arena.offsets]
    lines = []
    for i, layer in enumerate(model.layers):
        src, dst = at[i], at[i + 1]
        op = layer.extra.get("op", layer.kind)
        lines.append(f"    /* layer {i}: {op} {c_comment(layer.name[:60])} */")
        if layer.kind == "reshape":
            lines.append("    /* a reshape: the same bytes, no code */")
            continue
        lines += [f'    QCONVERT_Q7_HOOK({i}, "{op}", 0);',
                  "    " + CALLS[kernels][layer.kind](i, layer, src, dst)]
        if layer.relu and layer.kind not in IN_PLACE:
            lines.append("    " + relu_call(kernels, layer, dst))
        lines.append(f'    QCONVERT_Q7_HOOK({i}, "{op}", 1);')
    return lines


def render_q7(model, name: str, kernels: str, provenance: str) -> dict:
    """{file name: bytes}: NAME.h, NAME.c and, for the portable set, its kernel sources."""
    from ..shipped_kernels import Q7_KERNEL_FILES, kernel_source

    _check(model, kernels)
    if name in {f.rsplit(".", 1)[0] for f in Q7_KERNEL_FILES}:
        raise QConvertError(f"--name {name!r} is the name of a kernel file qconvert writes "
                            "beside it; choose another")
    arena = plan_arena(model, kernels)
    upper = name.upper()
    in_size = int(np.prod(model.input_shape))
    out_size = int(np.prod(model.layers[-1].out_shape))
    include = '#include "arm_nnfunctions.h"' if kernels == "cmsis-nn-legacy" \
        else '#include "qconvert_q7.h"'
    last = arena.offsets[-1]
    source = ["/* SPDX-License-Identifier: Apache-2.0 */",
              f"/* {name}.c: generated by qconvert (export-c --scheme q7 --kernels {kernels}); "
              "do not edit. */",
              f'#include "{name}.h"', "", "#include <stddef.h>", "#include <stdint.h>",
              "#include <string.h>", "", include, "",
              f"#if defined(QCONVERT_PROFILE) || defined({upper}_PROFILE)",
              f"#define QCONVERT_Q7_HOOK(index, op, phase) {name}_layer_hook(index, op, phase)",
              "#else", "#define QCONVERT_Q7_HOOK(index, op, phase) ((void)0)", "#endif", "",
              *_constants(model, kernels), "",
              f"static int32_t {name}_arena[{arena.size // 4}];", "",
              f"int {name}_check(void)", "{", "    return 0;", "}", "",
              f"int {name}_invoke_with_arena(const int8_t *input, int8_t *output, void *arena)",
              "{",
              "    int8_t *a = (int8_t *)arena;",
              "    int8_t *scratch;",
              "    if (arena == NULL || ((uintptr_t)arena & 3u) != 0u) { return 1; }",
              f"    scratch = a + {arena.scratch};",
              "    (void)scratch;",
              f"    memcpy(a, input, {in_size});",
              *_layer_calls(model, kernels, arena),
              f"    memcpy(output, {f'(a + {last})' if last else 'a'}, {out_size});",
              "    return 0;", "}", "",
              f"int {name}_invoke(const int8_t *input, int8_t *output)", "{",
              f"    return {name}_invoke_with_arena(input, output, {name}_arena);", "}", ""]
    files = {f"{name}.h": "\n".join(_header(model, name, kernels, provenance, arena))
             .encode("ascii"),
             f"{name}.c": "\n".join(source).encode("ascii")}
    if kernels == "portable":
        files.update({f: kernel_source(f) for f in Q7_KERNEL_FILES})
    return files
