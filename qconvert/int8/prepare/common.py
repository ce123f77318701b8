"""What every Prepare function of `qconvert.int8.prepare` shares: the registry, the node-named
error, and reading a layer's quantization (per-tensor activations, int8 weights, int32 bias).

`LAYER_PARAMS[op](graph, node) -> dict` holds, per IR op, what TFLite Micro computes once at
Prepare time from the tensors' quantization. A check TFLite Micro makes at Prepare raises
`QConvertError` naming the node (`fail`), as the interpreter refuses the model there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qconvert.errors import QConvertError

from ..activation_range import activation_range
from ..multipliers import quantize_multiplier

LAYER_PARAMS: dict[str, Callable] = {}


def prepare(*ops: str):
    """Register the decorated function as the Prepare-time parameters of each op in `ops`."""
    def wrap(fn):
        for op in ops:
            LAYER_PARAMS[op] = fn
        return fn

    return wrap


def no_params(graph, node) -> dict:
    """Prepare of an op TFLite Micro derives nothing for (values moved, parameters kept)."""
    return {}


def node_label(node) -> str:
    """How errors name a node: its op and, when it has one, its name."""
    return f"{node.op} {node.name!r}" if node.name else node.op


def fail(node, cause: str):
    """Raise the one-line QConvertError for `node`: what TFLite Micro refuses, and why."""
    raise QConvertError(f"{node_label(node)}: {cause}")


def per_tensor(graph, node, name) -> tuple:
    """(float32 scale, int zero point) of a per-tensor quantized activation."""
    t = graph.tensors[name]
    q = t.quant
    if q is None or q.scale.size == 0:
        fail(node, f"tensor {name!r} has no quantization parameters")
    scale = np.float32(q.scale[0])
    zp = int(q.zero_point[0]) if q.zero_point.size else 0
    if not (np.isfinite(scale) and scale > 0):
        fail(node, f"tensor {name!r} has scale {scale}")
    return scale, zp


def fused_activation(node) -> str:
    """The node's fused activation as an ActivationFunctionType name (NONE when absent)."""
    act = node.attrs.get("activation") or "NONE"
    return str(act).upper()


def act_range(node, scale, zp) -> tuple:
    """`activation_range` of the node's fused activation, its errors naming the node."""
    try:
        return activation_range(fused_activation(node), scale, zp)
    except ValueError as exc:
        fail(node, str(exc))


def quantize_multipliers(node, real) -> tuple:
    """`quantize_multiplier` of `real`, its errors naming the node."""
    try:
        return quantize_multiplier(real)
    except ValueError as exc:
        fail(node, str(exc))


def bias_of(graph, node, index, channels):
    """The int32 bias constant at input slot `index` as an int64 vector of `channels` values,
    or None when the slot is absent."""
    name = node.inputs[index] if len(node.inputs) > index else None
    if name is None:
        return None
    data = graph.tensors[name].data
    if data is None:
        fail(node, f"bias {name!r} is not a constant")
    if data.dtype != np.int32:
        fail(node, f"bias {name!r} is {data.dtype}, int8 kernels need int32")
    if data.size != channels:
        fail(node, f"bias {name!r} has {data.size} values for {channels} channels")
    return data.reshape(-1).astype(np.int64)


def weights_of(graph, node):
    """The weights tensor (input slot 1), checked to be an int8 constant with scales."""
    w = graph.tensors[node.inputs[1]]
    if w.data is None:
        fail(node, f"weights {node.inputs[1]!r} are not constant")
    if w.data.dtype != np.int8:
        fail(node, f"weights {node.inputs[1]!r} are {w.data.dtype}, not int8")
    if w.quant is None or w.quant.scale.size == 0:
        fail(node, f"weights {node.inputs[1]!r} have no quantization parameters")
    return w
