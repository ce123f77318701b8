"""The C source of a whole int8 model (`qconvert export-c`): `NAME.h`, `NAME.c` and kernels.

    files, summary = render_model(prepare_model(model), ModelOptions(name="kws"))  # {name: bytes}

`NAME.c` holds every layer's weights and parameters as `static const` data (flash), one static
arena, and `NAME_invoke`: the graph inputs are copied into the arena, the layers run in the
order `op_order` chooses (a topological order of the graph that lowers the arena) on the offsets
of the memory plan (`memory_plan`), the outputs are copied out (memcpy).
The first invoke runs `NAME_check` (CMSIS-NN's scratch sizes against the plan, once); built with
-DQCONVERT_PROFILE a user hook is called around each layer (`_hook_macro`). The summary carries
the per-layer figures of the export report (`export_report`).
`NAME.h` is the contract (see `_header`). The text is a pure function of the graph and the
options, so the same model and options give byte-identical files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template

import numpy as np

from qconvert import __version__
from qconvert.errors import QConvertError

from ..c_text import HELIUM_TEST, c_array_body, c_comment, c_float, c_int
from .export_report import CTYPE_BYTES, array_bytes, layer_rows  # noqa: F401 (CTYPE_BYTES)
from ..header.render import ARRAY_ATTR_BLOCK, const_attr
from .memory_plan import plan_memory
from .op_order import plan_in_best_order
from .pad_fold import fold_pads
from .io_helpers import definitions, layout_macros, prototypes
from .lowering import lower_graph
from .steps import DTYPES, KernelOptions, tensor_bytes, tensor_dims
from ..shipped_kernels import KERNEL_FILES, MODEL_KERNEL_FILES, OPTIONAL_HEADERS, kernel_source

KERNEL_SETS = ("portable", "cmsis-nn")


@dataclass
class ModelOptions:
    """Names, kernels and provenance of an export (see the CLI's export-c)."""

    name: str
    kernels: str = "portable"
    fc_layout: str = "1x4"
    source_name: str = "model.tflite"
    source_sha256: str = ""
    provenance: str | None = None
    patches: int = 0  # --patches N: the first stage in N x N tiles (patches.py); 0: off
    example: bool = False  # --example: main.c, CMakeLists.txt and NAME.mk too (example.py)


@dataclass
class ExportSummary:
    """What the export produced: arena bytes, constant bytes, layer count, overlaps."""

    arena_size: int
    constant_bytes: int
    layers: int
    overlapped: int
    files: list
    arena_helium: int | None = None  # CMSIS-NN Helium (MVE) builds, when it differs
    rows: list | None = None  # per layer (export_report.layer_rows), in the order of NAME.c
    helium_constant_bytes: int = 0  # flash of the arrays only Helium (MVE) builds link
    state_size: int = 0  # a streaming model's static state (resource variables), bytes
    banded: int = 0  # CMSIS-NN convolutions called band by band to overlap their input
    patches: str = ""  # what --patches did (or why not)


def render_model(prepared, options: ModelOptions) -> tuple:
    """({file name: bytes}, ExportSummary) of `prepared` (`prepare.PreparedModel`: an int8
    TFLite model whose shapes `prepare.prepare_model` made static; a bare Graph is one without
    state). Renders only: no pass runs here."""
    if hasattr(prepared, "graphs"):
        raise TypeError("render_model takes prepare.prepare_model(model), not the Model")
    graph, state = (prepared.graph, prepared.state) if hasattr(prepared, "state") else \
        (prepared, None)  # state: a streaming model's variables (`resource_state`)
    if options.kernels not in KERNEL_SETS:
        raise QConvertError(f"unknown --kernels {options.kernels!r}; one of {KERNEL_SETS}")
    _check_io(graph)
    stems = {Path(f).stem for f in KERNEL_FILES + MODEL_KERNEL_FILES}
    if options.name in stems or (options.example and options.name == "main"):
        raise QConvertError(f"--name {options.name!r} is the name of a kernel file qconvert "
                            "writes beside it; choose another")
    kernel_options = KernelOptions(options.kernels, options.fc_layout)
    if state is None:  # a streaming model's steps keep the graph's nodes and order (splice)
        graph = fold_pads(graph)
    steps = lower_graph(graph, kernel_options)
    note = ""
    if options.patches and state is not None:
        note = "patches: not used: a streaming model (its state ops keep the graph's steps)"
    elif options.patches:
        from .patches import patch_stage

        steps, note = patch_stage(graph, steps, options.patches, lambda candidate: _planned(
            graph, candidate, kernel_options)[1][-1].arena_size)
    steps, plans = _planned(graph, steps, kernel_options, state)
    plans = dict(zip(_builds(steps), plans))
    name = options.name
    files = sorted(set().union(*[s.files for s in steps]) if steps else set())
    const_bytes = sum(array_bytes(s) for s in steps)
    source = _source(graph, steps, plans, options, state)
    out = {f"{name}.h": _header(graph, steps, plans, options, state).encode(),
           f"{name}.c": source.encode()}
    for f in files:
        out[f] = kernel_source(f)
    if options.example:
        from .example import check_example, example_files

        check_example(graph, state)
        out.update(example_files(graph, name, [f for f in out if f.endswith(".c")],
                                 options.kernels))
    main = plans.get("all") or plans["other"]
    helium = plans["helium"].arena_size if "helium" in plans else None
    summary = ExportSummary(main.arena_size, int(const_bytes), len(steps), len(main.overlapped),
                            list(out), helium, layer_rows(graph, steps, plans),
                            sum(array_bytes(s, "helium") for s in steps),
                            state.size if state is not None else 0, len(main.banded), note)
    return out, summary


def _planned(graph, steps, kernel_options, state=None) -> tuple:
    """(the steps lowered for the kernel set in the chosen execution order, [the plan of each
    build of `_builds`]); a streaming model's `state` (`resource_state`) splices its READ /
    ASSIGN steps in and pins the graph's order."""
    if kernel_options.kernels == "cmsis-nn":
        from .cmsis_lowering import lower_cmsis

        steps = [lower_cmsis(graph, step, kernel_options) for step in steps]
    if state is not None:
        steps = state.splice(steps)
        for step in steps:  # READ / ASSIGN decisions hold for this order only
            step.plan.pinned = True
    sizes = {}
    for name in list(graph.inputs) + list(graph.outputs):
        sizes[name] = tensor_bytes(graph, name)
    for step in steps:
        for name in step.plan.inputs + step.plan.outputs:
            sizes[name] = tensor_bytes(graph, name)
    if state is not None:
        state.plan_sizes(sizes)
    plans = []
    for build in _builds(steps):
        for step in steps:
            if step.scratch_builds:
                step.plan.scratch = int(step.scratch_builds[build] if build != "all"
                                        else max(step.scratch_builds.values()))
        if not plans:  # the execution order (op_order), chosen once for every build
            order, plan = plan_in_best_order(sizes, [s.plan for s in steps], graph.inputs,
                                             graph.outputs)
            steps = [steps[i] for i in order]
        else:
            plan = plan_memory(sizes, [s.plan for s in steps], graph.inputs, graph.outputs)
        if state is not None:
            state.after_plan(plan)
        plans.append(plan)
    return steps, plans


def _builds(steps) -> list:
    """["all"], or ["helium", "other"] when CMSIS-NN's scratch differs between Helium (MVE)
    builds and the others (each gets its own plan)."""
    if any(s.scratch_builds and s.scratch_builds["helium"] != s.scratch_builds["other"]
           for s in steps):
        return ["helium", "other"]
    return ["all"]


def _check_io(graph) -> None:
    bad = [n for n in list(graph.inputs) + list(graph.outputs)
           if graph.tensors[n].dtype not in DTYPES or graph.tensors[n].data is not None]
    if bad:
        raise QConvertError("export-c takes int8, uint8 or float32 model inputs and outputs; "
                            + ", ".join(f"{n!r} is {graph.tensors[n].dtype}" for n in bad))
    for n in list(graph.inputs) + list(graph.outputs):
        tensor_dims(graph, n)


# -- NAME.h -----------------------------------------------------------------------------------
def _io_macros(graph, tag, names, upper) -> list:
    lines = []
    for i, n in enumerate(names):
        t = graph.tensors[n]
        keys = [f"{tag}{i}"] + ([tag] if len(names) == 1 else [])
        size = int(np.prod(tensor_dims(graph, n), dtype=np.int64))
        for k in keys:
            lines.append(f"#define {upper}_{k}_SIZE {size}")
            if t.quant is not None and t.quant.scale.size == 1:
                zp = int(t.quant.zero_point[0]) if t.quant.zero_point.size else 0
                lines.append(f"#define {upper}_{k}_SCALE {c_float(t.quant.scale[0])}")
                lines.append(f"#define {upper}_{k}_ZERO_POINT {c_int(zp)}")
        lines.append(f"/* {tag.lower()} {i}: {c_comment(n)} {list(tensor_dims(graph, n))} "
                     f"{t.dtype} */")
    return lines


def _signature(graph, name, with_arena) -> str:
    def ctype(n):
        return DTYPES[graph.tensors[n].dtype][0]

    ins, outs = list(graph.inputs), list(graph.outputs)
    args = []
    for i, n in enumerate(ins):
        args.append(f"const {ctype(n)} *input{'' if len(ins) == 1 else i}")
    for i, n in enumerate(outs):
        args.append(f"{ctype(n)} *output{'' if len(outs) == 1 else i}")
    if with_arena:
        args.append("void *arena")
    fn = f"{name}_invoke_with_arena" if with_arena else f"{name}_invoke"
    return f"int {fn}({', '.join(args)})"



def _arena_macros(plans, upper) -> list:
    if "all" in plans:
        return [f"#define {upper}_ARENA_SIZE {plans['all'].arena_size}"]
    return [f"#if {HELIUM_TEST}",
            f"#define {upper}_HELIUM_BUILD 1 /* CMSIS-NN's Helium (MVE) kernels: more scratch */",
            f"#define {upper}_ARENA_SIZE {plans['helium'].arena_size}",
            "#else",
            f"#define {upper}_HELIUM_BUILD 0",
            f"#define {upper}_ARENA_SIZE {plans['other'].arena_size}",
            "#endif"]


def _header(graph, steps, plans, options, state=None) -> str:
    name, upper = options.name, options.name.upper()
    lines = [
        "/* SPDX-License-Identifier: Apache-2.0 */",
        f"/* {name}.h: the int8 model {c_comment(options.source_name)} as C, generated by "
        f"qconvert {__version__}",
        " * (qconvert export-c); do not edit.",
        " *",
        f" * {name}_invoke runs the whole model on the static arena inside {name}.c:",
        " * the inputs are copied into the arena, the layers run, the outputs are copied out.",
        " * It returns 0 on success, nonzero if a kernel refused its arguments (CMSIS-NN) or",
        f" * the arena given to {name}_invoke_with_arena is NULL or not 4-byte aligned; that",
        f" * arena must hold {upper}_ARENA_SIZE bytes, and one call uses it at a time.",
        " * Sizes are in elements; real value = scale * (q - zero point).",
        " * Models with several inputs or outputs take one pointer per input, then one per",
        " * output, in the model's order (input0, input1, ..., output0, ...), with",
        f" * {upper}_INPUT<i>_SIZE... macros; single-input, single-output models also get",
        f" * {upper}_INPUT_SIZE, {upper}_OUTPUT_SIZE... . The layout of each is in",
        f" * {upper}_INPUT<i>_DIMS (NHWC for 4-D: _BATCH, _HEIGHT, _WIDTH, _CHANNELS).",
        *([f" * {name}_quantize_input turns the application's floats into the model's input",
           f" * (TFLite's QUANTIZE), {name}_dequantize_output its output into floats."]
          if prototypes(graph, name) else []),
        " *",
        f" * {name}_check returns 0 when the kernels linked in fit the scratch the arena plan",
        " * reserved (CMSIS-NN's own *_get_buffer_size answers for this build), 2 if not;",
        f" * {name}_invoke runs it once, before its first layer, and returns 2 (every call, no",
        " * layer run) if it fails. Call it at start-up to fail early.",
        " *",
        " * Per-layer profiling: built with -DQCONVERT_PROFILE (every model) or",
        f" * -D{upper}_PROFILE, {name}_invoke calls {name}_layer_hook, which the application",
        f" * defines, before (phase {upper}_LAYER_BEGIN) and after (phase {upper}_LAYER_END) every",
        " * layer that runs code: index is the layer's number (the `layer N` comments of",
        f" * {name}.c, the export report; below {upper}_NUM_LAYERS), op its operator",
        " * (\"Conv2D\"...). Read the cycle counter there (DWT->CYCCNT on Cortex-M). Not built",
        " * with it: no call, no code. A layer that fails gets no END call.",
        " */",
        f"#ifndef {upper}_H",
        f"#define {upper}_H",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        *_arena_macros(plans, upper),
        *(state.header_lines(name) if state is not None else []),
        f"#define {upper}_NUM_INPUTS {len(graph.inputs)}",
        f"#define {upper}_NUM_OUTPUTS {len(graph.outputs)}",
    ]
    lines += _io_macros(graph, "INPUT", graph.inputs, upper)
    lines += _io_macros(graph, "OUTPUT", graph.outputs, upper)
    lines += layout_macros(graph, upper)
    lines += [f"#define {upper}_NUM_LAYERS {max((s.index for s in steps), default=-1) + 1}",
              f"#define {upper}_LAYER_BEGIN 0", f"#define {upper}_LAYER_END 1",
              "", _signature(graph, name, False) + ";",
              _signature(graph, name, True) + ";", f"int {name}_check(void);",
              *prototypes(graph, name),
              *(state.prototypes(name) if state is not None else []),
              *_reset_prototype(steps, name), "",
              f"#if defined(QCONVERT_PROFILE) || defined({upper}_PROFILE)",
              f"void {name}_layer_hook(int index, const char *op, int phase);",
              "#endif", "",
              "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {upper}_H */", ""]
    return "\n".join(lines)


def _reset_prototype(steps, name) -> list:
    """NAME.h's NAME_reset_lstm, when a layer keeps state of its own (an LSTM)."""
    if not any(s.resets for s in steps):
        return []
    return [f"/* {name}_reset_lstm: the LSTM layers' hidden and cell state back to their start "
            "(a new sequence);",
            f" * {name}_invoke carries them from one call to the next. */",
            f"void {name}_reset_lstm(void);"]


def _reset_function(steps, name) -> list:
    """NAME.c's NAME_reset_lstm (see `_reset_prototype`)."""
    if not any(s.resets for s in steps):
        return []
    out = [f"void {name}_reset_lstm(void)", "{"]
    for step in steps:
        out += ["    " + line.replace("@L", f"l{step.index}") for line in step.resets]
    return out + ["}", ""]


# -- NAME.c -----------------------------------------------------------------------------------
def _array_lines(prefix, suffix, ctype, values) -> list:
    base, _, rounding = ctype.partition("#")
    data = np.asarray(values).reshape(-1)
    body = c_array_body(data, base)
    lines = [f"{const_attr(base)} static const {base} {prefix}_{suffix}[{max(data.size, 1)}] = {{",
             body if body else "    0", "};"]
    if rounding == "double":
        return ["#ifndef QCONVERT_SINGLE_ROUNDING"] + lines + ["#endif"]
    if rounding == "single":
        return ["#ifdef QCONVERT_SINGLE_ROUNDING"] + lines + ["#endif"]
    if rounding == "helium":  # read by CMSIS-NN's MVE kernels only: not linked elsewhere
        return [f"#if {HELIUM_TEST}"] + lines + ["#endif"]
    if rounding == "other":  # read only by builds without Helium (cmsis_fast)
        return [f"#if !({HELIUM_TEST})"] + lines + ["#endif"]
    return lines


def _pointer(graph, plan, tensor, state=None) -> str:
    placed = state.pointer(graph, tensor) if state is not None else None
    if placed is not None:
        return placed
    dtype = graph.tensors[tensor].dtype
    ctype = DTYPES[dtype][0]
    off = plan.offset[tensor]
    if dtype in ("int8", "uint8"):  # a uint8 edge tensor is bytes to its QUANTIZE table
        return f"(arena_s8 + {off})"
    return f"(({ctype} *)(void *)(arena_s8 + {off}))"


def _plan_comment(graph, steps, plan, label) -> list:
    out = [f" * Arena{label}: {plan.arena_size} bytes, planned ahead of time "
           "(offset, bytes, tensor):"]
    for t in sorted(plan.offset, key=lambda n: (plan.offset[n], n)):
        out.append(f" *   {plan.offset[t]:7d} {tensor_bytes(graph, t):7d}  {c_comment(t[:70])}")
    for position, off in sorted(plan.scratch.items()):
        step = steps[position]
        out.append(f" *   {off:7d} {step.plan.scratch:7d}  (scratch of layer {step.index})")
    return out


def _scratch_bytes(step, build) -> int:
    """Scratch bytes of a CMSIS-NN call in `build` ("all": the largest of the builds)."""
    if not step.scratch_builds:
        return 0
    return int(step.scratch_builds[build] if build != "all"
               else max(step.scratch_builds.values()))


def _op_label(step) -> str:
    """The op as the layer hook's C string: letters, digits and `_` only."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in step.node.op)


def _body(graph, steps, plan, build, state=None) -> list:
    """The layer calls of `invoke` on the offsets of `plan`, each between two calls of the
    profiling hook (nothing unless NAME.c is built with it, see `_hook_macro`)."""
    body = []
    for position, step in enumerate(steps):
        if not step.call.template:
            continue
        prefix = f"l{step.index}"
        mapping = {"L": prefix}
        for k, t in enumerate(step.plan.inputs):
            mapping[f"in{k}"] = _pointer(graph, plan, t, state)
        for k, t in enumerate(step.plan.outputs):
            mapping[f"out{k}"] = _pointer(graph, plan, t, state)
        scratch = _scratch_bytes(step, build)
        mapping["scratch"] = f"(arena_s8 + {plan.scratch[position]})" if scratch else "NULL"
        mapping["scratch_size"] = str(scratch)
        mapping["band_rows"] = str(plan.banded.get(position, 1))  # a banded call's rows
        chosen = step.banded if step.banded is not None and position in plan.banded \
            else step.call
        text = chosen.template.replace("@L", prefix)
        body.append(f"    /* layer {step.index}: {step.node.op} */")
        body.append(f'    QCONVERT_LAYER_HOOK({step.index}, "{_op_label(step)}", 0);')
        body += ["    " + line for line in Template(text).substitute(mapping).split("\n")]
        body.append(f'    QCONVERT_LAYER_HOOK({step.index}, "{_op_label(step)}", 1);')
    return body


def _checks(steps, plan, build) -> list:
    """The body of NAME_check for `build`: each layer's run-once check (`Step.check`, or
    `Step.banded_check` where the plan runs it band by band) against its reservation."""
    out = []
    for position, step in enumerate(steps):
        check = step.banded_check if step.banded is not None and position in plan.banded \
            else step.check
        if not step.call.template or check is None:
            continue
        text = check.template.replace("@L", f"l{step.index}")
        out.append(f"    /* layer {step.index}: {step.node.op} */")
        out += ["    " + line for line in Template(text).substitute(
            {"scratch_size": str(_scratch_bytes(step, build)),
             "band_rows": str(plan.banded.get(position, 1))}).split("\n")]
    return out


def _hook_macro(name, upper) -> list:
    """QCONVERT_LAYER_HOOK: the user's NAME_layer_hook when built with -DQCONVERT_PROFILE or
    -DNAME_PROFILE, else nothing (no code, no data)."""
    return [f"#if defined(QCONVERT_PROFILE) || defined({upper}_PROFILE)",
            f"#define QCONVERT_LAYER_HOOK(index, op, phase) {name}_layer_hook(index, op, phase)",
            "#else",
            "#define QCONVERT_LAYER_HOOK(index, op, phase) ((void)0)",
            "#endif"]


def _copies(graph, names, plan, inward) -> list:
    out = []
    for i, t in enumerate(names):
        arg = ("input" if inward else "output") + ("" if len(names) == 1 else str(i))
        where = f"arena_s8 + {plan.offset[t]}"
        pair = f"{where}, {arg}" if inward else f"{arg}, {where}"
        out.append(f"    memcpy({pair}, {tensor_bytes(graph, t)});")
    return out


def _check_function(name, upper, checks) -> list:
    """NAME_check (and the flag that makes the first invoke run it) from {build: lines}."""
    out = []
    if any(checks.values()):
        out += [f"static int {name}_checked; /* nonzero once {name}_check passed */", ""]
    out += [f"int {name}_check(void)", "{"]
    if any(checks.values()):
        for build, lines in checks.items():
            if build == "helium":
                out.append(f"#if {upper}_HELIUM_BUILD")
            elif build == "other":
                out.append("#else")
            out += lines
        if "helium" in checks:
            out.append(f"#endif /* {upper}_HELIUM_BUILD */")
    out += ["    return 0;", "}", ""]
    return out


def _source(graph, steps, plans, options, state=None) -> str:
    name, upper = options.name, options.name.upper()
    kernels = "CMSIS-NN (and qconvert's portable kernels for the other ops)" \
        if options.kernels == "cmsis-nn" else "qconvert's portable C99 kernels"
    out = ["/* SPDX-License-Identifier: Apache-2.0 */",
           f"/* {name}.c: the int8 model {c_comment(options.source_name)} as C, generated by "
           f"qconvert {__version__}",
           " * (qconvert export-c); do not edit.",
           f" * SHA-256 of the model: {options.source_sha256}"]
    if options.provenance:
        out.append(f" * Quantization: {c_comment(options.provenance)}")
    out += [f" * Kernels: {kernels}; fully connected weights "
            + ("in the 1x4 order" if options.fc_layout == "1x4" else "row-major") + ".",
            " * Rounding: TFLite's double rounding; build with -DQCONVERT_SINGLE_ROUNDING (and",
            " * CMSIS-NN with CMSIS_NN_USE_SINGLE_ROUNDING) for CMSIS-NN's single rounding."]
    labels = {"all": "", "helium": " (Helium builds)", "other": " (other builds)"}
    for build, plan in plans.items():
        out += _plan_comment(graph, steps, plan, labels[build])
    if state is not None:
        out += state.comment_lines()
    out += [" */", f'#include "{name}.h"', "", "#include <stddef.h>", "#include <string.h>", "",
            '#include "qconvert_nn.h"']
    for header in OPTIONAL_HEADERS:  # the layer-specialised kernels' headers, when called
        if any(header in s.files for s in steps):
            out.append(f'#include "{header}"')
    if options.kernels == "cmsis-nn":
        out.append('#include "arm_nnfunctions.h"')
    out += ["", ARRAY_ATTR_BLOCK, *_hook_macro(name, upper), ""]
    for step in steps:
        prefix = f"l{step.index}"
        node = step.node
        out.append(f"/* layer {step.index}: {node.op} {c_comment(node.name[:80])} */")
        for suffix, ctype, values in step.arrays:
            out += _array_lines(prefix, suffix, ctype, values)
        # structs (pointers inside): their natural alignment, never lowered to 4
        out += ["QCONVERT_CONST_ATTR " + line.replace("@L", prefix) for line in step.decls]
        out.append("")
    ins, outs = list(graph.inputs), list(graph.outputs)
    out += [f"static int32_t {name}_arena[{upper}_ARENA_SIZE / 4 + 1]; /* 4-byte aligned */",
            "", *(state.source_lines(name) if state is not None else []),
            *_reset_function(steps, name)]
    checks = {build: _checks(steps, plan, build) for build, plan in plans.items()}
    out += _check_function(name, upper, checks)
    out += [_signature(graph, name, True),
            "{",
            "    int8_t *const arena_s8 = (int8_t *)arena;",
            "    if (arena == NULL || ((uintptr_t)arena & 3u) != 0) {",
            "        return -1;",
            "    }"]
    if any(checks.values()):
        out += [f"    if (!{name}_checked) {{ /* once: the scratch checks of {name}_check */",
                f"        if ({name}_check() != 0) {{", "            return 2;", "        }",
                f"        {name}_checked = 1;", "    }"]
    if state is not None:
        out += state.invoke_prologue(name)
    for build, plan in plans.items():
        if build == "helium":
            out.append(f"#if {upper}_HELIUM_BUILD")
        elif build == "other":
            out.append("#else")
        out += _copies(graph, ins, plan, True)
        out += _body(graph, steps, plan, build, state)
        out += _copies(graph, outs, plan, False)
    if "helium" in plans:
        out.append(f"#endif /* {upper}_HELIUM_BUILD */")
    args = [("input" if len(ins) == 1 else f"input{i}") for i in range(len(ins))]
    args += [("output" if len(outs) == 1 else f"output{i}") for i in range(len(outs))]
    out += ["    return 0;", "}", "", _signature(graph, name, False), "{",
            f"    return {name}_invoke_with_arena({', '.join(args + [f'{name}_arena'])});",
            "}", "", *definitions(graph, name, upper)]
    return "\n".join(out)
