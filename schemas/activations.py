"""Clamps, defined once: the range each TFLite fused activation clamps to, and the ops that clamp.

`ACTIVATION_RANGES[name]` is the (lower, upper) range of a fused activation (None: unbounded on
that side). Everything that clamps reads it: the float kernels apply a node's fused activation
with it, the int8 parameters quantize its limits (TFLite's CalculateActivationRangeQuantized),
`fuse-activation` turns a clamp op into the fused activation of its range, and the ONNX -> TFLite
conversion turns a Clip into the clamp op of its range. The clamp ops are the schema entries
with `clamp` set (Relu, Relu6: a fused activation's range; Clip: the range of its min / max
inputs).
"""

from __future__ import annotations

from . import all_schemas, get

ACTIVATION_RANGES = {
    "NONE": (None, None),
    "RELU": (0.0, None),
    "RELU6": (0.0, 6.0),
    "RELU_N1_TO_1": (-1.0, 1.0),
}


def activation_of_range(lower, upper) -> str | None:
    """The fused activation that clamps to exactly [lower, upper] (None: unbounded), or None
    when none does (an unbounded range is no clamp: never NONE)."""
    for name, bounds in ACTIVATION_RANGES.items():
        if name != "NONE" and bounds == (lower, upper):
            return name
    return None


def clamp_ops() -> frozenset:
    """The ops that clamp their input (the schema entries with `clamp`)."""
    return frozenset(s.name for s in all_schemas() if s.clamp is not None)


def activation_of_op(op: str) -> str | None:
    """The fused activation an op with a fixed range is (Relu: RELU), or None (Clip's range
    comes from its inputs; other ops do not clamp)."""
    schema = get(op)
    clamp = schema.clamp if schema is not None else None
    return clamp if clamp in ACTIVATION_RANGES else None


def clamp_op_of_range(lower, upper) -> str | None:
    """The op whose fixed range is exactly [lower, upper] (Relu6 for (0, 6)), or None."""
    for schema in all_schemas():
        if schema.clamp in ACTIVATION_RANGES and ACTIVATION_RANGES[schema.clamp] == (lower, upper):
            return schema.name
    return None
