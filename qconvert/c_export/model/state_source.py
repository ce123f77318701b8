"""The C text of a streaming model's state (`resource_state.StateProgram`): NAME.h's
description and macros of the state, NAME.c's state buffer, initial values and
`NAME_init` / `NAME_reset` / `NAME_variable`, and the first lines of `NAME_invoke`.
"""

from __future__ import annotations

import textwrap

import numpy as np

from ..c_text import c_array_body, c_comment, c_float, c_int


def header_lines(state, name: str) -> list:
    """NAME.h: what the state is and how init / reset work, and its macros."""
    upper = name.upper()
    text = (f"State: a streaming model. {upper}_STATE_SIZE bytes of state (its TFLite resource "
            f"variables) live in a static buffer inside {name}.c, outside the arena, from one "
            f"call to the next: consecutive calls of {name}_invoke (or "
            f"{name}_invoke_with_arena) are consecutive frames of ONE stream (one stream per "
            f"model; calls must not interleave). {name}_init() writes the initial values (those "
            f"the model's CALL_ONCE init subgraph assigns); {name}_invoke calls it itself on its "
            f"first call if you did not. {name}_reset() writes them again to start a new "
            "stream: the state a new TFLite Micro interpreter starts from (TFLite Micro's "
            "MicroInterpreter::Reset instead fills each variable with one byte, 0 or its zero "
            "point by version). "
            f"{name}_variable(i) points at variable i's current value "
            f"({upper}_VARIABLE<i>_SIZE elements; NULL for an index out of range).")
    wrapped = textwrap.wrap(text, 92)
    lines = ["/* " + wrapped[0]] + [" * " + w for w in wrapped[1:]] + [" */"]
    lines += [f"#define {upper}_STATE_SIZE {state.size}",
              f"#define {upper}_NUM_VARIABLES {len(state.variables)}"]
    for i, v in enumerate(state.variables):
        lines.append(f"#define {upper}_VARIABLE{i}_SIZE {int(np.prod(v.dims, dtype=np.int64))}")
        q = v.quant
        if q is not None and q.scale.size == 1:
            zp = int(q.zero_point[0]) if q.zero_point.size else 0
            lines.append(f"#define {upper}_VARIABLE{i}_SCALE {c_float(q.scale[0])}")
            lines.append(f"#define {upper}_VARIABLE{i}_ZERO_POINT {c_int(zp)}")
        lines.append(f"/* variable {i}: {c_comment(v.label)} {list(v.dims)} {v.dtype}, "
                     f"state bytes {v.offset}..{v.offset + v.nbytes - 1} */")
    return lines


def prototypes(name: str) -> list:
    """NAME.h: the functions of the state."""
    return [f"void {name}_init(void);", f"void {name}_reset(void);",
            f"const void *{name}_variable(int index);"]


def comment_lines(state) -> list:
    """NAME.c's top comment: the state layout and what each READ / ASSIGN became."""
    out = [f" * State: {state.size} bytes, static, outside the arena (offset, bytes, "
           "variable):"]
    for v in state.variables:
        out.append(f" *   {v.offset:7d} {v.nbytes:7d}  {c_comment(v.label[:70])}")
    out += [f" *   {c_comment(n)}" for n in state.notes]
    for t, v in sorted(state.placed.items(), key=lambda kv: (kv[1].offset, kv[0])):
        out.append(f" *   tensor {c_comment(t[:60])} lives in variable {c_comment(v.label)}")
    return out


def source_lines(state, name: str) -> list:
    """NAME.c: the state buffer, the initial values, NAME_init / NAME_reset /
    NAME_variable."""
    upper = name.upper()
    out = ["/* the variables (4-byte aligned regions); they outlive each call */",
           f"static int32_t {name}_state[{max(state.size // 4, 1)}]; /* {upper}_STATE_SIZE */",
           f"static int {name}_state_set; /* nonzero once {name}_init has run */", ""]
    body = []
    for i, v in enumerate(state.variables):
        where = f"state_s8 + {v.offset}"
        if v.init is None:  # assigned before any read in every call
            body.append(f"    memset({where}, 0, {v.nbytes});")
            continue
        variants = {r: np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                    for r, a in v.init.items()}
        if len({a.tobytes() for a in variants.values()}) == 1:
            variants = {"": variants["double"]}
        for rounding, raw in variants.items():
            guard = {"double": "#ifndef QCONVERT_SINGLE_ROUNDING",
                     "single": "#ifdef QCONVERT_SINGLE_ROUNDING"}.get(rounding)
            if guard:
                body.append(guard)
            if np.all(raw == raw[0]):
                body.append(f"    memset({where}, {int(raw[0])}, {v.nbytes});")
            else:
                array = f"{name}_initial{i}{'_' + rounding if rounding else ''}"
                if guard:
                    out.append(guard)
                out += [f"QCONVERT_ARRAY_ATTR static const uint8_t {array}[{raw.size}] = {{",
                        c_array_body(raw, "int8_t"), "};"]
                if guard:
                    out.append("#endif")
                body.append(f"    memcpy({where}, {array}, {v.nbytes});")
            if guard:
                body.append("#endif")
    cases = [f"    case {i}: return state_s8 + {v.offset};"
             for i, v in enumerate(state.variables)]
    body = body or ["    (void)state_s8; /* no variable: the main graph uses none */"]
    out += ["", f"void {name}_init(void)", "{",
            f"    int8_t *const state_s8 = (int8_t *)(void *){name}_state;", *body,
            f"    {name}_state_set = 1;", "}", "",
            f"void {name}_reset(void)", "{", f"    {name}_init();", "}", "",
            f"const void *{name}_variable(int index)", "{",
            f"    const int8_t *const state_s8 = (const int8_t *)(const void *){name}_state;",
            *(["    switch (index) {", *cases, "    default: return NULL;", "    }"]
              if state.variables else ["    (void)state_s8;", "    (void)index;",
                                       "    return NULL;"]), "}", ""]
    return out


def invoke_prologue(name: str) -> list:
    """The first lines of NAME_invoke_with_arena after its arena check."""
    return [f"    int8_t *const state_s8 = (int8_t *)(void *){name}_state;",
            "    (void)state_s8;",
            f"    if (!{name}_state_set) {{",
            f"        {name}_init();",
            "    }"]
