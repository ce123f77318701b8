"""JSON text of the reports qconvert writes (`quantize --report`, `fuse --report`, `inspect
--json`): strict JSON, which has no Infinity or NaN. A non-finite float (an infinite SQNR: a
layer whose int8 output equals the float one, e.g. a Relu of negative data; a NaN scale read
from a model) is written as null, the value a reader already handles for "no figure"."""

from __future__ import annotations

import json
import math


def finite_or_null(value):
    """`value` with every non-finite float, at any depth of dicts, lists and tuples, None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def dumps(value, indent: int | None = 2) -> str:
    """Strict JSON of `value` (non-finite floats as null); never writes Infinity or NaN."""
    return json.dumps(finite_or_null(value), indent=indent, allow_nan=False)
