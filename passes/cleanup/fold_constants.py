"""The `fold-constants` pass: evaluate nodes whose inputs are all constants into constants.

Pattern: a node of a known op that has a kernel in `qconvert.executor.float_kernels.KERNELS`
and whose every present input is a constant; for Shape, an input of static shape is enough (its
values need not be known). Typical sources: PyTorch's shape arithmetic
`x -> Shape -> Gather(0) -> Unsqueeze -> Concat([.., -1]) -> Reshape(x, ..)` for an `x` of static
shape, Cast / ConstantOfShape / Range / Expand of constants, Transpose / Reshape / arithmetic
applied to weights.

Math: the outputs are what the kernel computes with the op's ONNX / TFLite semantics, in the
element type the runtime uses (integer Div truncates toward zero, Cast truncates floats, Range
accumulates in its type); see the kernels' module docstring.

Rewrite: each output tensor keeps its name and becomes a constant holding the result (shape made
static, dtype the declared one); the node is removed. Nodes are visited once, in topological
order, so whole chains fold in one run. Constants no longer read are left to `eliminate`.

Conditions (otherwise the node is kept; a pass never fails on what it cannot fold):
- the node is not opaque and is not Quantize / Dequantize (int8 weights behind a Dequantize
  of a quantized model are stored that way on purpose), except a Dequantize of a float16
  constant (the TFLite converter's float16 output): that is a float constant stored at half
  size, and folding it to float32 lets quantize / fuse treat the weights as any float weights;
  and a TFLite DEQUANTIZE of an int8 / uint8 constant with its scale and zero point on the
  tensor in a graph whose activations are all float (the converter's weight-only, "dynamic
  range" output): `(q - zero_point) * scale` as TFLite's DEQUANTIZE computes it (a per-tensor
  scale in double, per-channel ones in float). A QDQ ONNX model (DequantizeLinear with scale
  inputs, quantized activations) and an int8 TFLite model keep theirs;
- no output is a graph output (a constant graph output is not valid TFLite, and a graph output
  keeps a producer), every output is present;
- no input (but Shape's) or output carries quantization parameters (a float kernel would compute
  on the raw integers) and none has a dtype numpy cannot hold;
- the result is not large: it has at most `MAX_FOLD_ELEMENTS` = 2**20 (1,048,576) elements, or no
  more than the largest constant input (a Transpose or Reshape of a big weight folds whatever its
  size; ConstantOfShape / Expand / Range / a broadcast that would write more than 2**20 new
  elements into the file does not). The size is bounded before the kernel runs;
- the result is not empty (TFLite cannot hold an empty constant buffer) and a float result is
  finite (readers refuse NaN and infinite weights);
- the result matches the declared output: same rank, equal static dimensions (symbolic ones take
  the computed value), and the declared dtype or one of the same kind it converts to without
  changing a value (int64 -> int32, float64 -> float32); a declared-unknown dtype takes the result's;
- the kernel computes the node (it raises on what it cannot compute exactly: integer division by
  zero, out-of-range indices, unsupported attributes...).
Inputs are never modified; results are fresh read-only arrays (possibly views of read-only inputs).
"""

from __future__ import annotations

import math

import numpy as np

from qconvert.executor.float_kernels import KERNELS, range_length
from qconvert.ir import Graph
from qconvert.ir.tensor import RAW_DTYPES

from ..registry import register_pass

MAX_FOLD_ELEMENTS = 1 << 20
NEVER_FOLD = frozenset({"Quantize", "Dequantize"})


def _inputs(node, graph: Graph):
    """Arrays for the kernel (a zero-strided stand-in for Shape's input), or None to skip."""
    arrays = []
    for i, name in enumerate(node.inputs):
        if name is None:
            arrays.append(None)
            continue
        t = graph.tensors[name]
        if t.dtype in RAW_DTYPES:
            return None
        if node.op == "Shape" and i == 0:
            if t.data is None:
                if not t.static_shape:
                    return None
                t_shape = tuple(int(d) for d in t.shape)
                arrays.append(np.broadcast_to(np.zeros((), np.uint8), t_shape))
            else:
                arrays.append(t.data)
            continue
        if t.data is None or t.quant is not None:
            return None
        arrays.append(t.data)
    return arrays


def _ints(a) -> list:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _size_bound(node, arrays) -> int:
    """An upper bound of the elements the node produces, found without running it."""
    op = node.op
    if op == "Shape":
        return arrays[0].ndim
    if op == "ConstantOfShape":
        return math.prod(max(d, 0) for d in _ints(arrays[0]))
    if op == "Expand":
        return math.prod(np.broadcast_shapes(arrays[0].shape, tuple(_ints(arrays[1]))))
    if op == "Range":
        return range_length(*arrays[:3])
    if op in ("Add", "Sub", "Mul", "Div"):
        return math.prod(np.broadcast_shapes(arrays[0].shape, arrays[1].shape))
    if op == "Gather":
        data, indices = arrays[0], arrays[1]
        axis = int(node.attrs.get("axis", 0) or 0) % max(data.ndim, 1)
        return math.prod(data.shape[:axis]) * indices.size * math.prod(data.shape[axis + 1:])
    # every other kernel moves or maps its inputs' elements: never more than they hold
    return sum(a.size for a in arrays if a is not None)


def _fits(arr: np.ndarray, t) -> np.ndarray | None:
    """`arr` as the constant of tensor `t` (declared dtype and shape), or None if it is not."""
    arr = np.asarray(arr)
    if arr.size == 0:
        return None
    if not t.extra.get("dtype_unknown"):
        dtype = np.dtype(t.dtype)
        if arr.dtype != dtype:
            ints = arr.dtype.kind in "iu" and dtype.kind in "iu"
            if not (ints or arr.dtype.kind == dtype.kind == "f"):
                return None
            converted = arr.astype(dtype)
            if ints and not np.array_equal(converted, arr):
                return None
            arr = converted
    if t.shape is not None:
        if len(t.shape) != arr.ndim:
            return None
        for d, n in zip(t.shape, arr.shape):
            if isinstance(d, (int, np.integer)) and int(d) != n:
                return None
    if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        return None
    # a new C-contiguous array object, even for Identity (ascontiguousarray would make a
    # scalar 1-D)
    arr = (arr if arr.flags.c_contiguous else arr.copy(order="C")).view()
    arr.flags.writeable = False
    return arr


def _float16_weights(node, graph: Graph) -> bool:
    """True for a Dequantize reading one float16 constant without quantization parameters (or a
    float32 one: hybrid weights `quant.plan.dequantize_hybrid_weights` already widened)."""
    if node.op != "Dequantize" or len(node.present_inputs()) != 1:
        return False
    t = graph.tensors[node.inputs[0]]
    return t.data is not None and t.dtype in ("float16", "float32") and t.quant is None


def _float_activations(graph: Graph) -> bool:
    """True when no activation (non-constant tensor) is an integer or carries quantization."""
    return not any(a.data is None and (a.quant is not None or a.dtype in ("int8", "uint8"))
                   for a in graph.tensors.values())


def _hybrid_weights(node, graph: Graph) -> np.ndarray | None:
    """The float32 values of a TFLite DEQUANTIZE of int8 / uint8 weights (see the module
    docstring), or None. The caller checks that the graph's activations are float."""
    if node.op != "Dequantize" or len(node.present_inputs()) != 1:
        return None
    t = graph.tensors[node.inputs[0]]
    q = t.quant
    if t.data is None or q is None or t.dtype not in ("int8", "uint8") or not q.scale.size:
        return None
    if q.per_channel:
        shape = [1] * t.data.ndim
        shape[q.axis] = -1
        values = ((t.data.astype(np.float32) - q.zero_point.astype(np.float32).reshape(shape))
                  * q.scale.reshape(shape))
    else:
        values = ((t.data.astype(np.float64) - float(q.zero_point[0]))
                  * float(q.scale[0])).astype(np.float32)
    return values.astype(np.float32)


def _fold(node, graph: Graph, graph_outputs: set, float_graph: bool) -> list | None:
    """The constants replacing `node`'s outputs, or None when a condition fails."""
    hybrid = _hybrid_weights(node, graph) if float_graph else None
    if hybrid is not None:
        out = graph.tensors[node.outputs[0]] if node.outputs[0] else None
        if out is None or out.quant is not None or out.name in graph_outputs:
            return None
        fitted = _fits(hybrid, out)
        return None if fitted is None else [fitted]
    if node.opaque or (node.op in NEVER_FOLD and not _float16_weights(node, graph)) \
            or node.op not in KERNELS:
        return None
    if not node.present_inputs() or not node.outputs or any(o is None for o in node.outputs):
        return None
    tensors = graph.tensors
    if node.op != "Shape" and any(tensors[n].data is None for n in node.inputs if n is not None):
        return None  # an input computed at run time (what `_inputs` finds, found sooner)
    outs = [graph.tensors[o] for o in node.outputs]
    if any(o.name in graph_outputs or o.quant is not None or o.dtype in RAW_DTYPES for o in outs):
        return None
    arrays = _inputs(node, graph)
    if arrays is None:
        return None
    try:
        bound = _size_bound(node, arrays)
        largest = max((graph.tensors[n].data.size for n in node.present_inputs()
                       if graph.tensors[n].data is not None), default=0)
        if bound > MAX_FOLD_ELEMENTS and bound > largest:
            return None
        out_dtypes = [None if o.extra.get("dtype_unknown") else o.dtype for o in outs]
        with np.errstate(all="ignore"):
            results = KERNELS[node.op](node, arrays, out_dtypes)
        if len(results) != len(outs):
            return None
        fitted = [_fits(r, t) for r, t in zip(results, outs)]
    except Exception:  # the kernel cannot compute it exactly: keep the node
        return None
    return None if any(f is None for f in fitted) else fitted


@register_pass("fold-constants")
def fold_constants(graph: Graph, context) -> int:
    """Evaluate nodes whose inputs are constants (or Shape of a static tensor) into constants."""
    graph_outputs = set(graph.outputs)
    float_graph = any(n.op == "Dequantize" for n in graph.nodes) and _float_activations(graph)
    folded = []
    for node in graph.nodes:  # topological: a folded output is a constant for its readers
        constants = _fold(node, graph, graph_outputs, float_graph)
        if constants is None:
            continue
        for name, data in zip(node.outputs, constants):
            t = graph.tensors[name]
            t.data = data
            t.dtype = data.dtype.name
            t.shape = tuple(int(d) for d in data.shape)
            t.extra.pop("dtype_unknown", None)
            t.extra.pop("has_rank", None)
            if "shape_signature" in t.extra:
                t.extra["shape_signature"] = list(t.shape)
        folded.append(node)
    graph.remove_nodes(folded)  # one walk over the list, however many folded
    return len(folded)
