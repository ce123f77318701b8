"""RAM and flash a quantized TFLite model costs on a microcontroller, estimated from its plan.

- RAM: the activation arena, planned as TFLite Micro's baseline planner does (`arena_bytes`:
  lifetimes from first writer to last reader, greedy by size, 4-byte aligned; Reshape and
  Squeeze outputs alias their inputs), with int8 activations 1 byte and int16 ones 2 bytes
  per element (border QUANTIZE copies of a mixed model included). Scratch buffers of the
  kernels are not counted (they depend on the kernel library). export-c's planner
  (`c_export.model.memory_plan`) adds in-place kernels on top of this; an estimate of what a
  TFLite Micro build needs stays with the plain greedy planner.
- flash: the constants: int8 weights (1 byte), biases (int32, 4 bytes per channel; int64, 8
  bytes, on a 16x8 layer), other constants at their activation width. Flatbuffer metadata
  (tensors, operators) is not counted.
Works on the float graph before it is written (`int16`: the activations planned int16), so the
16x8 choice can price a candidate without writing it.
"""

from __future__ import annotations

import numpy as np

from qconvert import schemas

from .plan import BORDER, is_activation, layer_slots, weight_channel_axis

ALIASES = frozenset({"Reshape", "Squeeze", "ExpandDims"})
ALIGN = 4


def _elements(shape) -> int:
    n = 1
    for d in shape or ():
        n *= int(d) if isinstance(d, (int, np.integer)) and d > 0 else 1
    return n


def activation_bytes(graph) -> int:
    """Bytes of one sample's float activations (dynamic dimensions counted as 1)."""
    return sum(t.nbytes() for t in graph.tensors.values()
               if t.data is None and t.dtype.startswith("float") and t.shape is not None)


def footprint(graph, int16=frozenset(), fmt: str = "tflite", qplan=None) -> dict:
    """{"arena_bytes", "weight_bytes", "bias_bytes", "other_constant_bytes", "flash_bytes"} of
    `graph` quantized with the activations `int16` at 16 bits and the rest at 8; with `qplan`
    (the plan of `graph`) a layer's bias is the one planned (bias correction may add one)."""
    sizes = {}
    steps = []
    for name in graph.inputs:
        if is_activation(graph, name):
            sizes[name] = _elements(graph.tensors[name].shape) * (2 if name in int16 else 1)
    weight = bias = other = 0
    for node in graph.nodes:
        ins = [i for i in node.present_inputs() if is_activation(graph, i)]
        outs = [o for o in node.outputs if o and is_activation(graph, o)]
        for o in outs:
            sizes[o] = _elements(graph.tensors[o].shape) * (2 if o in int16 else 1)
        steps.append((list(dict.fromkeys(ins)), outs,
                      node.op in ALIASES and len(ins) == 1 and len(outs) == 1))
        if node.origin.get(BORDER) or node.opaque:
            continue
        schema = schemas.get(node.op)
        wide = bool(outs) and outs[0] in int16
        skip = set()
        if schema is not None and schema.int8 == "per_channel_weights":
            _x, w_slot, b_slot = layer_slots(node)
            w = graph.constant(node.inputs[w_slot])
            if w is not None:
                weight += int(w.size)
                channels = int(w.shape[weight_channel_axis(node, fmt)])
                layer = None if qplan is None else qplan.layers.get(node.outputs[0])
                has_bias = (len(node.inputs) > b_slot and node.inputs[b_slot]) or node.op in (
                    "Conv2D", "DepthwiseConv2D") or (layer is not None and layer.bias is not None)
                bias += channels * (8 if wide else 4) if has_bias else 0
                skip = {node.inputs[i] for i in (w_slot, b_slot) if i < len(node.inputs)}
        for name in node.present_inputs():
            t = graph.tensors[name]
            if name in skip or t.data is None or not t.dtype.startswith("float"):
                continue
            other += int(t.data.size) * (2 if wide else 1)
    arena = arena_bytes(sizes, steps, graph.inputs, graph.outputs)
    return {"arena_bytes": arena, "weight_bytes": weight, "bias_bytes": bias,
            "other_constant_bytes": other, "flash_bytes": weight + bias + other}


def arena_steps(graph, sizes: dict) -> list:
    """[(inputs, outputs, alias)] of `graph`'s nodes over the buffers of `sizes` (the steps
    `arena_bytes` reads; Reshape and Squeeze of one buffer alias it)."""
    steps = []
    for node in graph.nodes:
        ins = [i for i in dict.fromkeys(node.present_inputs()) if i in sizes]
        outs = [o for o in node.outputs if o in sizes]
        steps.append((ins, outs, node.op in ALIASES and len(ins) == 1 and len(outs) == 1))
    return steps


def _align(n: int) -> int:
    return (int(n) + ALIGN - 1) // ALIGN * ALIGN


def arena_bytes(sizes: dict, steps: list, inputs, outputs) -> int:
    """The arena of TFLite Micro's greedy planner for `steps` [(inputs, outputs, alias)]:
    buffers (an alias shares its input's) live from their writer's step (graph inputs: -1) to
    their last reader's (graph outputs: the end) and are placed largest first, each at the
    lowest 4-byte-aligned offset free over its lifetime."""
    root = {name: name for name in sizes}
    for ins, outs, alias in steps:
        if alias:
            root[outs[0]] = root[ins[0]]
    start: dict = {}
    end: dict = {}
    for name in inputs:
        if name in sizes:
            start[root[name]] = -1
    for i, (ins, outs, _alias) in enumerate(steps):
        for name in outs:
            start.setdefault(root[name], i)
        for name in list(ins) + list(outs):
            end[root[name]] = i
    for name in outputs:
        if name in sizes:
            end[root[name]] = len(steps)
    size: dict = {}
    for name, r in root.items():
        size[r] = max(size.get(r, 0), _align(sizes[name]))
    order = sorted(size, key=lambda r: (-size[r], start.get(r, 0), r))
    placed: list = []  # (offset, size, start, end)
    top = 0
    for r in order:
        s, e = start.get(r, 0), end.get(r, start.get(r, 0))
        busy = sorted((o, o + n) for o, n, s2, e2 in placed if s2 <= e and s <= e2)
        offset = 0
        for lo, hi in busy:
            if offset + size[r] <= lo:
                break
            offset = max(offset, hi)
        placed.append((offset, size[r], s, e))
        top = max(top, offset + size[r])
    return _align(top)
