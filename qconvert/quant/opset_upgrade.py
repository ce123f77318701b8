"""Raise an ONNX model's default-domain opset to the one QDQ output needs (13: per-axis
DequantizeLinear), instead of refusing an opset-11 / 12 model.

The IR spells each op's meaning, not its opset's spelling: the ONNX writer writes every
attribute-or-input (Squeeze / Unsqueeze / ReduceSum axes, Split sizes) the way the model's
opset wants, so raising the opset is a change of `meta` plus the one op whose meaning changed
between opsets 11 and 13 in a way the IR records: Softmax before opset 13 flattens its input to
2-D at `axis` (`coerce_2d`). Where every dimension after `axis` but the last is 1, or `axis` is
the last, that is the opset-13 Softmax along the last axis; otherwise the model is refused,
naming the node. LogSoftmax / Hardmax are opaque to qconvert (quantize refuses them anyway). The
IR version goes to at least 7 (the first to allow opset 13).
"""

from __future__ import annotations

from qconvert.errors import QConvertError
from qconvert.ir import Model

MIN_IR_VERSION = {13: 7}


def upgrade_opset(model: Model, target: int) -> int | None:
    """Raise `model`'s default-domain opset to `target` in place; returns the old opset when it
    changed, None when it already was at least `target`."""
    old = int(model.meta.get("opset") or 13)
    if old >= target:
        return None
    for graph in model.graphs:
        for node in graph.nodes:
            if node.op != "Softmax" or not node.attrs.get("coerce_2d"):
                continue
            shape = graph.tensors[node.inputs[0]].shape
            rank = len(shape) if shape is not None else None
            axis = int(node.attrs.get("axis", 1))
            axis = axis + rank if rank is not None and axis < 0 else axis
            if rank is None or not (axis == rank - 1 or all(
                    d == 1 for d in shape[axis:rank - 1])):
                raise QConvertError(
                    f"Softmax {node.name!r} (opset {old}) flattens {list(shape) if shape else '?'}"
                    f" at axis {axis}, which QDQ's opset {target} cannot spell; export opset "
                    f"{target}")
            node.attrs["axis"] = -1
            node.attrs.pop("coerce_2d")
    model.meta["opset"] = target
    imports = [(d, target if d in ("", "ai.onnx") else v)
               for d, v in model.meta.get("opset_import", [("", old)])]
    model.meta["opset_import"] = imports
    model.meta["ir_version"] = max(int(model.meta.get("ir_version") or 0),
                                   MIN_IR_VERSION.get(target, 7))
    return old
