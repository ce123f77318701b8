"""Store float weights as float16 behind DEQUANTIZE, as the TFLite converter's float16 option
writes them (`convert` / `fuse --keep-float16`).

A model whose weights came as float16 (TFLite: a float16 constant -> DEQUANTIZE; ONNX: a float16
initializer -> Cast to float) is read with them widened to float32 by `fold-constants`, so every
pass and kernel sees ordinary float weights. A user who shipped float16 weights to halve the file
gets them back with `--keep-float16`: each float32 constant of at least `MIN_ELEMENTS` elements
read by a node is stored as a float16 constant plus a DEQUANTIZE writing the float32 tensor the
readers already read. Weights the passes did not change come back bit for bit (float16 ->
float32 -> float16 is exact); weights a fusion changed (BatchNorm folded into a conv) are rounded
to float16, as the converter rounds them. Small constants (shape vectors, scalars) stay float32:
a DEQUANTIZE per scalar costs more than it saves. A constant whose values do not fit float16
(|x| > 65504) stays float32.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node, Tensor

MIN_ELEMENTS = 16
_FLOAT16_MAX = float(np.finfo(np.float16).max)


def has_float16_weights(graph: Graph) -> bool:
    """True when the graph stores a constant as float16 (the input had float16 weights)."""
    return any(t.data is not None and t.dtype == "float16" for t in graph.tensors.values())


def store_float16(graph: Graph) -> int:
    """Rewrite the graph's float32 weights as float16 + DEQUANTIZE (see the module docstring);
    returns how many constants changed."""
    read = {name for node in graph.nodes for name in node.present_inputs()}
    outputs = set(graph.outputs)
    changed = []
    for name, t in graph.tensors.items():
        if (t.data is None or t.dtype != "float32" or t.quant is not None or name not in read
                or name in outputs or t.data.size < MIN_ELEMENTS
                or not np.all(np.abs(t.data) <= _FLOAT16_MAX)):
            continue
        changed.append(name)
    dequantize = []
    for name in changed:
        t = graph.tensors[name]
        half = t.data.astype(np.float16)
        half.flags.writeable = False
        stored = graph.fresh_name(f"{name}_float16")
        graph.add_tensor(Tensor(stored, tuple(t.shape), "float16", half))
        t.data = None
        dequantize.append(Node("Dequantize", [stored], [name], {}, name))
    graph.nodes[:0] = dequantize
    graph.invalidate_uses()
    return len(changed)
