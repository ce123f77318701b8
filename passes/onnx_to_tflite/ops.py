"""ONNX ops with no TFLite twin, and how each becomes TFLite ops (used by `layout-nhwc`).

Mappings (`MAPPING_RULES`, rules of the same form as `layout_rules.RULES`):
- Gemm -> FULLY_CONNECTED: weights [out, in] = (transB ? B : B^T) * alpha, bias = beta * C
  when C is a per-output vector (else an ADD after); after a flatten of a permuted tensor the
  weight columns are permuted from C,H,W to H,W,C order (`layout_state.columns`), so no
  TRANSPOSE is needed. transA transposes A (a TRANSPOSE, reported).
- MatMul with a constant 2-D weight -> FULLY_CONNECTED (weights B^T; inputs of rank > 2 keep
  their leading dims with `keep_num_dims`); any other MatMul -> BATCH_MATMUL.
- LeakyRelu, PRelu, Sqrt, Pow, Reciprocal, LayerNormalization, MatMul of two activations:
  `ops_math` (its rules are part of `MAPPING_RULES`).
- GlobalAveragePool / GlobalMaxPool -> AVERAGE_POOL_2D / MAX_POOL_2D over the whole H x W.
- HardSigmoid(alpha, beta) -> MUL(6 alpha), ADD(6 beta), RELU6, MUL(1/6): the same function,
  made of ops every TFLite runtime has; `x * HardSigmoid(x)` with PyTorch's alpha 1/6 and
  beta 1/2 (hardswish exported before opset 14) becomes one HARD_SWISH (`hard_swish`).
- LSTM (forward) -> UNIDIRECTIONAL_SEQUENCE_LSTM: `ops_lstm`.
- Clip, after the layers took what they could as fused activations: `tflite_legalize`.
- Padding TFLite cannot express as SAME / VALID (asymmetric, SAME_LOWER, PyTorch's symmetric
  padding at stride 2) -> explicit padding and VALID (`spatial_padding`), end padding no window
  reads dropped first: before a conv or an average pool counting its padding, a PAD (zeros);
  before a max pool, padding must never win the max: a PAD / PADV2 of the lowest value its input
  can take when the op making it says (`lower_bound`: 0 after Relu / Relu6 / Sigmoid, -1 after
  Tanh, Clip's min...), else its border rows and columns repeated (GATHER), which is exact
  because ONNX pads are narrower than the kernel. Neither widens the int8 calibration range
  beyond what the input can take.

`conversion_problems` lists, before anything is converted, what no rule can map: ops outside
the table (opaque) or without a rule, weights or parameters computed at run time, convolutions
and pools that are neither 1-D nor 2-D (the checks of `ops_spatial` join `CHECKS`).
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Node
from qconvert.padding import tflite_padding_of
from qconvert.schemas.activations import ACTIVATION_RANGES, activation_of_op, clamp_ops

from .layout_state import NHWC, Layout, Unmappable, Value, columns, identity, onnx_op
from .ops_lstm import LSTM_CHECKS, LSTM_RULES
from .ops_math import MATH_CHECKS, MATH_RULES, batch_matmul

UNMAPPED = "ops with no TFLite mapping"
NON_CONSTANT = "non-constant weights or parameters"
INVALID = "invalid parameters"
# Shape arithmetic fold-constants evaluates once the batch is static; not a problem before.
FOLDS_WHEN_STATIC = frozenset({"Shape", "ConstantOfShape", "Range", "Expand"})


# -- padding -------------------------------------------------------------------------------------
def _trim_end_pads(spatial, kernel, strides, dilations, pads) -> list:
    """Pads without the end rows / columns no window reads (the output size is unchanged)."""
    rank = len(kernel)
    pads = [int(p) for p in pads]
    for i in range(rank):
        span = (kernel[i] - 1) * dilations[i] + 1
        out = (spatial[i] + pads[i] + pads[rank + i] - span) // strides[i] + 1
        needed = max(0, (out - 1) * strides[i] + span - spatial[i] - pads[i])
        pads[rank + i] = min(pads[rank + i], needed)
    return pads


def needs_explicit_pad(v: Value, kernel, strides, dilations, pads, same_ok: bool = True) -> bool:
    """True when TFLite cannot say `pads` on NHWC `v` (SAME or VALID; only VALID when not
    `same_ok`), even after dropping the end padding no window reads."""
    spatial = v.dst_shape[1:3]
    for p in (pads, _trim_end_pads(spatial, kernel, strides, dilations, pads)):
        if not any(p) or (same_ok and tflite_padding_of(p, spatial, kernel, strides, dilations)):
            return False
    return True


def spatial_padding(cv, v: Value, kernel, strides, dilations, pads, fill: float | None,
                    same_ok: bool = True) -> tuple:
    """(value to read, pads for the node): `pads` themselves when TFLite can say them (SAME or
    VALID; only VALID when not `same_ok`), else explicit padding and VALID: PAD (`fill` 0),
    PADV2 (another `fill`) or, with `fill` None, the border rows / columns repeated (GATHER;
    exact for a max pool whose padding is narrower than its kernel)."""
    n, h, w, c = v.dst_shape
    pads = [int(p) for p in pads]
    if not needs_explicit_pad(v, kernel, strides, dilations, pads, same_ok):
        trimmed = _trim_end_pads((h, w), kernel, strides, dilations, pads)
        if (same_ok or not any(pads)) and tflite_padding_of(pads, (h, w), kernel, strides,
                                                            dilations):
            return v, pads
        return v, trimmed
    pads = _trim_end_pads((h, w), kernel, strides, dilations, pads)
    top, left, bottom, right = pads
    if fill is None:
        return _repeat_borders(cv, v, pads), [0, 0, 0, 0]
    out = cv.new_value(f"{v.name}_padded", Layout(NHWC), (n, c, h + top + bottom, w + left + right),
                       v.dtype)
    paddings = cv.add_const(f"{out.name}_paddings",
                            np.array([[0, 0], [top, bottom], [left, right], [0, 0]], np.int32))
    if fill == 0:
        cv.emit("Pad", [v.name, paddings], [out.name], {}, out.name)
    else:
        value = cv.add_const(f"{out.name}_value", np.array([fill], np.float32))
        cv.emit("PadV2", [v.name, paddings, value], [out.name], {}, out.name)
    return out, [0, 0, 0, 0]


def _repeat_borders(cv, v: Value, pads) -> Value:
    """`v` (NHWC) with its first / last rows and columns repeated `pads` times: one GATHER per
    padded axis."""
    top, left, bottom, right = pads
    for axis, begin, end in ((1, top, bottom), (2, left, right)):
        if not begin and not end:
            continue
        size = v.dst_shape[axis]
        index = np.concatenate([np.zeros(begin, np.int32), np.arange(size, dtype=np.int32),
                                np.full(end, size - 1, np.int32)])
        shape = list(v.shape)
        shape[v.layout.perm[axis]] = len(index)
        out = cv.new_value(f"{v.name}_edge", v.layout, tuple(shape), v.dtype)
        cv.emit("Gather", [v.name, cv.add_const(f"{out.name}_index", index)], [out.name],
                {"axis": axis, "batch_dims": 0}, out.name)
        v = out
    return v


def lower_bound(graph: Graph, name: str, depth: int = 8) -> float | None:
    """A value no element of tensor `name` can be below (from the op that makes it: Relu 0,
    Tanh -1, Clip its min...), or None when unbounded or unknown."""
    node = graph.producer(name)
    if node is None or node.opaque or depth == 0:
        return None
    if node.op in LOWER_BOUNDS:
        return LOWER_BOUNDS[node.op]
    if node.op == "Clip":
        lo = graph.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
        return None if lo is None else float(np.asarray(lo).reshape(-1)[0])
    if node.op in BOUND_PRESERVING:
        bounds = [lower_bound(graph, i, depth - 1) for i in node.present_inputs()
                  if graph.constant(i) is None]
        return None if not bounds or None in bounds else min(bounds)
    return None


# the lowest output value of each op (a clamp's: the lower end of its range)
LOWER_BOUNDS = {**{op: ACTIVATION_RANGES[activation_of_op(op)][0] for op in clamp_ops()
                   if activation_of_op(op) is not None},
                "Sigmoid": 0.0, "HardSigmoid": 0.0, "Softmax": 0.0, "Tanh": -1.0,
                "HardSwish": -0.375}
# ops whose outputs are taken from their inputs' values (never below the smallest input)
BOUND_PRESERVING = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "Identity",
                              "Dropout", "Reshape", "Flatten", "Transpose", "Concat", "Squeeze",
                              "Unsqueeze"})


# -- fully connected -----------------------------------------------------------------------------
def _fc_input(cv, a: Value, w: np.ndarray) -> tuple:
    """(value, weights) for a FULLY_CONNECTED reading 2-D `a` (columns permuted if flattened)."""
    if a.layout.flat is not None:
        return a, w[:, columns(a.layout)]
    return cv.relayout(a, (0, 1)), w


def _bias_vector(c: np.ndarray | None, n: int) -> np.ndarray | None:
    """C as a per-output bias [n], or None when it is not one (a full [M, N] matrix)."""
    if c is None:
        return None
    if c.ndim > 2 or (c.ndim == 2 and c.shape[0] != 1) or c.size not in (1, n):
        return None
    return np.broadcast_to(c.reshape(-1), (n,))


def _gemm(cv, node: Node) -> None:
    b = cv.require_constant(node, 1, "weights")
    attrs = node.attrs
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    a = cv.value(node.inputs[0])
    if len(a.shape) != 2 or b.ndim != 2:
        raise Unmappable(f"Gemm {node.name!r} of {list(a.shape)} and {list(b.shape)}")
    if int(attrs.get("transA", 0)):
        at = cv.relayout(a, (1, 0))
        a = Value(at.name, Layout((0, 1)), (a.shape[1], a.shape[0]), a.dtype)
    w = b if int(attrs.get("transB", 0)) else b.T
    if alpha != 1.0:
        w = (w.astype(np.float64) * alpha).astype(b.dtype)
    a, w = _fc_input(cv, a, w)
    c_name = node.inputs[2] if len(node.inputs) > 2 else None
    c = cv.constant(c_name)
    bias = _bias_vector(c, w.shape[0]) if c is not None else None
    inputs = [a.name, cv.add_const(f"{node.inputs[1]}_fc", w)]
    if bias is not None:
        inputs.append(cv.add_const(f"{c_name}_bias", (bias.astype(np.float64) * beta)
                                   .astype(c.dtype) if beta != 1.0 else bias))
    fc_attrs = {"activation": "NONE", "keep_num_dims": False}
    if c_name is None or bias is not None:
        out = cv.define(node.outputs[0], Layout((0, 1)))
        cv.emit("FullyConnected", inputs, [out.name], fc_attrs, node.name)
        return
    mid = cv.new_value(f"{node.outputs[0]}_ab", Layout((0, 1)), cv.shape(node.outputs[0]), a.dtype)
    cv.emit("FullyConnected", inputs, [mid.name], fc_attrs, node.name)
    if c is not None:
        scaled = c if beta == 1.0 else (c.astype(np.float64) * beta).astype(c.dtype)
        other = cv.add_const(f"{c_name}_c", cv.permute_const(scaled, Layout((0, 1)), 2, True))
    else:
        if beta != 1.0:
            raise Unmappable(f"Gemm {node.name!r} (beta {beta} on a computed C)")
        other = cv.broadcast_operand(cv.value(c_name), (0, 1)).name
    out = cv.define(node.outputs[0], Layout((0, 1)))
    cv.emit("Add", [mid.name, other], [out.name], {}, f"{node.name}/add_c")


def _matmul(cv, node: Node) -> None:
    b = cv.constant(node.inputs[1])
    if b is None or b.ndim != 2:  # two activations (attention): see ops_math
        batch_matmul(cv, node)
        return
    a = cv.value(node.inputs[0])
    rank = len(a.shape)
    if rank < 2:
        raise Unmappable(f"MatMul {node.name!r} of {list(a.shape)} and {list(b.shape)}")
    w = np.ascontiguousarray(b.T)
    if rank == 2:
        a, w = _fc_input(cv, a, w)
        layout = Layout((0, 1))
    else:  # FC over the last axis: any layout that keeps the last ONNX axis last will do
        if a.layout.flat is not None or a.layout.perm[-1] != rank - 1:
            a = cv.relayout(a, identity(rank))
        layout = Layout(a.layout.perm)
    out = cv.define(node.outputs[0], layout)
    cv.emit("FullyConnected", [a.name, cv.add_const(f"{node.inputs[1]}_fc", w)], [out.name],
            {"activation": "NONE", "keep_num_dims": rank > 2}, node.name)


# -- pooling and activations ---------------------------------------------------------------------
def _global_pool(cv, node: Node) -> None:
    x = cv.value(node.inputs[0])
    if len(x.shape) != 4:
        raise Unmappable(f"{onnx_op(node)} {node.name!r} of a {len(x.shape)}-D tensor")
    v = cv.relayout(x, NHWC)
    kernel = [int(x.shape[2]), int(x.shape[3])]
    out = cv.define(node.outputs[0], Layout(NHWC))
    cv.emit(GLOBAL_POOLS[node.op], [v.name], [out.name],
            {"layout": "NHWC", "kernel_shape": kernel, "strides": [1, 1], "dilations": [1, 1],
             "pads": [0, 0, 0, 0], "activation": "NONE"}, node.name)


def _hard_sigmoid(cv, node: Node) -> None:
    """relu6(6 alpha x + 6 beta) / 6, each step skipped when it is the identity."""
    x = cv.value(node.inputs[0])
    alpha = float(node.attrs.get("alpha", 0.2))
    beta = float(node.attrs.get("beta", 0.5))
    dtype = np.dtype(x.dtype)
    cur = x
    steps = [("Mul", 6.0 * alpha, 1.0), ("Add", 6.0 * beta, 0.0)]
    for op, k, neutral in steps:
        if k == neutral:
            continue
        mid = cv.new_value(f"{node.outputs[0]}_{op.lower()}", cur.layout, cur.shape, cur.dtype)
        cv.emit(op, [cur.name, cv.add_const(f"{mid.name}_k", np.array([k], dtype))], [mid.name], {},
                mid.name)
        cur = mid
    six = cv.new_value(f"{node.outputs[0]}_relu6", cur.layout, cur.shape, cur.dtype)
    cv.emit("Relu6", [cur.name], [six.name], {}, six.name)
    out = cv.define(node.outputs[0], cur.layout)
    cv.emit("Mul", [six.name, cv.add_const(f"{out.name}_sixth", np.array([1.0 / 6.0], dtype))],
            [out.name], {}, node.name)


GLOBAL_POOLS = {"GlobalAveragePool": "AveragePool", "GlobalMaxPool": "MaxPool"}
MAPPING_RULES = {
    "Gemm": _gemm,
    "MatMul": _matmul,
    **{op: _global_pool for op in GLOBAL_POOLS},
    "HardSigmoid": _hard_sigmoid,
    **MATH_RULES,
    **LSTM_RULES,
}


# -- problems found before converting ------------------------------------------------------------
def _weights_problem(graph, node, index, what):
    name = node.inputs[index] if index < len(node.inputs) else None
    if name is not None and graph.constant(name) is None:
        return NON_CONSTANT, f"{onnx_op(node)} {node.name!r} ({what} {name!r} is not a constant)"
    return None


def _check_conv(graph, node):
    problem = _weights_problem(graph, node, 1, "weights") or _weights_problem(graph, node, 2,
                                                                              "bias")
    if problem:
        return problem
    w = graph.constant(node.inputs[1])
    if w.ndim not in (3, 4):  # 1-D convs run as 2-D ones (`ops_spatial.lift_1d`)
        return UNMAPPED, f"{w.ndim - 2}-D Conv"
    return None


def _check_pool(graph, node):
    if len(node.attrs.get("kernel_shape") or []) not in (1, 2):
        return UNMAPPED, f"{len(node.attrs.get('kernel_shape') or [])}-D {node.op}"
    if any(int(d) != 1 for d in node.attrs.get("dilations") or []):
        return "cannot be expressed in TFLite", f"{onnx_op(node)} {node.name!r} (dilations)"
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        return "cannot be expressed in TFLite", f"MaxPool {node.name!r} (Indices output)"
    return None


def _check_params(*indices):
    def check(graph, node):
        for i in indices:
            problem = _weights_problem(graph, node, i, "parameter")
            if problem:
                return problem
        return None

    return check


def _check_pad(graph, node):
    mode = node.attrs.get("mode", "constant") or "constant"
    if mode not in ("constant", "reflect", "edge"):  # reflect, edge: MIRROR_PAD (layout_rules)
        return UNMAPPED, f"Pad (mode {mode})"
    return _check_params(1, 2, 3)(graph, node)


CHECKS = {
    "Conv2D": _check_conv,
    "Gemm": lambda g, n: _weights_problem(g, n, 1, "weights"),
    "MaxPool": _check_pool,
    "AveragePool": _check_pool,
    "Clip": _check_params(1, 2),
    "Pad": _check_pad,
    **{op: _check_params(1) for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum",
                                       "ReduceProd")},
    "Squeeze": _check_params(1),
    "Unsqueeze": _check_params(1),
    "Slice": _check_params(1, 2, 3, 4),
    "Gather": _check_params(1),
    "BatchNorm": lambda g, n: (NON_CONSTANT, f"BatchNormalization {n.name!r} (parameters "
                                             "computed at run time, or training mode)"),
    **MATH_CHECKS,
    **LSTM_CHECKS,
}


def _batchnorm_problem(graph: Graph, node: Node) -> tuple:
    """Why a BatchNormalization was left after fusion (the fusions take every valid inference
    one): variance + epsilon not positive (a division by zero or a negative root), else
    unmapped."""
    var = graph.constant(node.inputs[4]) if len(node.inputs) > 4 else None
    if var is not None and not node.attrs.get("training_mode", 0):
        bad = np.asarray(var, np.float64) + float(node.attrs.get("epsilon", 1e-5)) <= 0
        if np.any(bad):
            return INVALID, (f"BatchNormalization {node.name!r} (variance + epsilon not "
                             f"positive in {int(bad.sum())} of {bad.size} channels)")
    return UNMAPPED, "BatchNormalization"


def conversion_problems(graph: Graph, rules: dict, static: bool) -> list:
    """(category, detail) of every node no rule can convert (see the module docstring).
    Before the batch is static (`static` False), shape arithmetic that will fold is not one, nor
    a parameter computed from it only (torchvision ShuffleNet's chunk: Slice ends from Shape)."""
    problems = []
    memo = {}
    for node in graph.nodes:
        if node.opaque or node.op not in rules:
            if not static and not node.opaque and node.op in FOLDS_WHEN_STATIC:
                continue
            problems.append(_batchnorm_problem(graph, node) if node.op == "BatchNorm"
                            and not node.opaque else (UNMAPPED, onnx_op(node)))
            continue
        check = CHECKS.get(node.op)
        problem = check(graph, node) if check else None
        if problem and not static and problem[0] == NON_CONSTANT and all(
                shape_derived(graph, name, memo) for name in node.inputs[1:] if name):
            continue  # folds once the shapes are static; checked again then
        if problem:
            problems.append(problem)
    return problems


def shape_derived(graph: Graph, name: str, memo: dict, depth: int = 0) -> bool:
    """True when tensor `name` is computed from constants and Shape nodes only (so it becomes
    a constant once every shape is static)."""
    if name in memo:
        return memo[name]
    node = graph.producer(name)
    if graph.constant(name) is not None:
        result = True
    elif node is None or node.opaque or depth > 64:
        result = False
    elif node.op == "Shape":
        result = True
    else:
        result = all(shape_derived(graph, i, memo, depth + 1)
                     for i in node.present_inputs())
    memo[name] = result
    return result
