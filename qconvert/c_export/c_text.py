"""C literals and array initializers, formatted deterministically.

- `c_int`: an integer literal valid in any context (negatives parenthesized; INT32_MIN as
  `(-2147483647 - 1)`, since `-2147483648` is the negation of a `long` constant).
- `c_float`: the shortest decimal that reads back as the same float32, with an `f` suffix.
- `c_array_body`: the values of an integer array as right-aligned rows (vectorized: numpy turns
  the values into strings, Python only joins rows).
- `c_comment`: arbitrary text (layer names) made safe inside a `/* */` comment (no comment
  delimiters, no trigraphs: `-std=c99` reads `??/` as a backslash).
"""

from __future__ import annotations

import re

import numpy as np

INT32_MIN = -(2**31)
_PER_ROW = {"int8_t": 16, "int16_t": 12, "uint16_t": 12, "int32_t": 8, "int64_t": 4}


def c_int(value) -> str:
    """An integer as a C expression: `12`, `(-3)`, `(-2147483647 - 1)`."""
    value = int(value)
    if value == INT32_MIN:
        return "(-2147483647 - 1)"
    return str(value) if value >= 0 else f"({value})"


def c_float(value) -> str:
    """A float32 as the shortest C literal that reads back as the same float: `0.5847029f`
    (negatives parenthesized)."""
    v = np.float32(value)
    if not np.isfinite(v):
        raise ValueError(f"cannot write {v} as a C float literal")
    if v != 0 and not 1e-5 <= abs(v) < 1e7:
        mantissa, exponent = np.format_float_scientific(v, unique=True, trim="0").split("e")
        text = f"{mantissa}e{int(exponent)}f"
    else:
        text = np.format_float_positional(v, unique=True, trim="0") + "f"
    return f"({text})" if text.startswith("-") else text


def c_array_body(values, ctype: str, indent: str = "    ") -> str:
    """Rows of `values` (an integer array) for an initializer: `    1,    2, ...` lines."""
    flat = np.asarray(values).reshape(-1).astype(np.int64)
    if flat.size == 0:
        return ""
    text = np.where(flat == INT32_MIN, "-2147483647 - 1", flat.astype(str))
    text = np.char.rjust(text, int(np.char.str_len(text).max()))
    text = np.char.add(text, ",")
    per_row = _PER_ROW[ctype]
    pad = (-flat.size) % per_row
    rows = np.concatenate([text, np.full(pad, "", dtype=text.dtype)]).reshape(-1, per_row)
    lines = [indent + " ".join(row).rstrip() for row in rows.tolist()]
    return "\n".join(lines)


def c_comment(text) -> str:
    """`text` for a C comment: printable ASCII only (others become `_`), no `*/`, `/*` or
    `??` (trigraphs)."""
    text = "".join(ch if " " <= ch <= "~" else "_" for ch in str(text))
    text = text.replace("*/", "*_/").replace("/*", "/_*")
    return re.sub(r"\?(?=\?)", "?_", text)


# the preprocessor test of a Helium (MVE) build: CMSIS-NN's kernels and the arena plan differ
HELIUM_TEST = ("(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)) || "
               "defined(ARM_MATH_MVEI) || defined(ARM_MATH_HELIUM)")
