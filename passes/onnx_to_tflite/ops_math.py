"""ONNX -> TFLite rules of the activation, normalization and attention ops of exported
transformers (used by `layout-nhwc` through `ops.MAPPING_RULES`).

- LeakyRelu(alpha) -> LEAKY_RELU; PRelu -> PRELU, the slope transposed with the layout
  (PyTorch's [C, 1, 1] becomes [C] on NHWC data), a computed slope brought to the layout.
- Sqrt -> SQRT (float: TFLite Micro has no int8 SQRT); Pow with a constant exponent: 2 -> MUL(x,
  x) (int8 everywhere), 0.5 -> SQRT, 1 -> nothing; other exponents are refused (TFLite Micro has
  no POW). Reciprocal -> DIV(1, x) (float).
- `rsqrt` (on the ONNX graph, before the layout pass): Div(a, Sqrt(v)) -> Mul(a, Rsqrt(v))
  and Reciprocal(Sqrt(v)) -> Rsqrt(v) when the Sqrt has no other reader: the decomposed
  LayerNorm then needs only ops TFLite Micro runs in int8 (RSQRT, MUL).
- LayerNormalization(axis, epsilon) -> MEAN, SUB, MUL (square), MEAN, ADD epsilon, RSQRT, MUL,
  MUL scale, ADD bias over the mapped axes (every step has an int8 TFLite Micro kernel); its
  optional Mean / InvStdDev outputs are refused.
- Gelu (opset 20) with approximate tanh -> MUL, ADD, TANH (its formula); the exact form needs
  ERF, which TFLite Micro has not: refused by name, as a lone Erf is.
- MatMul of two activations (or of a constant that is not a 2-D weight) -> BATCH_MATMUL; an
  operand whose last two axes the layout holds swapped (an ONNX Transpose of K in attention,
  absorbed into the layout) is read as is with `adj_x` / `adj_y` instead of being transposed.
"""

from __future__ import annotations

import numpy as np

from .layout_state import Layout, Unmappable, Value, identity

UNMAPPED = "ops with no TFLite mapping"
NON_CONSTANT = "non-constant weights or parameters"


def _emit_value(cv, op, inputs, base, like: Value, attrs=None, shape=None) -> Value:
    out = cv.new_value(base, like.layout, shape or like.shape, like.dtype)
    cv.emit(op, [i.name if isinstance(i, Value) else i for i in inputs], [out.name],
            attrs or {}, out.name)
    return out


def _finish(cv, node, op, inputs, attrs, layout: Layout) -> None:
    out = cv.define(node.outputs[0], layout)
    cv.emit(op, [i.name if isinstance(i, Value) else i for i in inputs], [out.name], attrs,
            node.name)


def _broadcasts_to(shape, target) -> bool:
    """True when an array of `shape` broadcasts to `target` without enlarging it."""
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


def _const_like(cv, base, value: float, dtype) -> str:
    return cv.add_const(base, np.array([value], np.dtype(dtype)))


# -- activations -----------------------------------------------------------------------------------
def _leaky_relu(cv, node) -> None:
    x = cv.value(node.inputs[0])
    alpha = node.attrs.get("alpha")
    _finish(cv, node, "LeakyRelu", [x], {"alpha": float(0.01 if alpha is None else alpha)},
            x.layout)


def _prelu(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    if rank > 4:
        raise Unmappable(f"PRelu {node.name!r} of a {rank}-D tensor (TFLite Micro's PRELU "
                         "broadcasts up to 4-D)")
    slope = cv.constant(node.inputs[1])
    if slope is None:
        s = cv.value(node.inputs[1])
        x = cv.relayout(x, identity(rank)) if x.layout.flat is not None else x
        alpha = cv.broadcast_operand(s, x.layout.perm).name
    else:
        if not _broadcasts_to(slope.shape, x.shape):
            raise Unmappable(f"PRelu {node.name!r} (slope {list(slope.shape)} does not broadcast "
                             f"to {list(x.shape)})")
        data = cv.permute_const(slope, x.layout, rank, strip=True)
        alpha = cv.add_const(f"{node.inputs[1]}_alpha", np.ascontiguousarray(data))
    _finish(cv, node, "PRelu", [x, alpha], {}, x.layout)


def _sqrt(cv, node) -> None:
    x = cv.value(node.inputs[0])
    _finish(cv, node, node.op, [x], {}, x.layout)


def _pow(cv, node) -> None:
    x = cv.value(node.inputs[0])
    y = cv.require_constant(node, 1, "exponent")
    values = np.unique(np.asarray(y, np.float64))
    if values.size != 1 or not _broadcasts_to(y.shape, x.shape):
        raise Unmappable(f"Pow {node.name!r} (exponent of shape {list(y.shape)})", UNMAPPED)
    k = float(values[0])
    if k == 1.0:
        cv.alias(node.outputs[0], x)
    elif k == 2.0:
        _finish(cv, node, "Mul", [x, x], {"activation": "NONE"}, x.layout)
    elif k == 0.5:
        _finish(cv, node, "Sqrt", [x], {}, x.layout)
    else:
        raise Unmappable(f"Pow {node.name!r} (exponent {k:g}; only 2 and 0.5 map: TFLite Micro "
                         "has no POW)", UNMAPPED)


def _reciprocal(cv, node) -> None:
    x = cv.value(node.inputs[0])
    one = _const_like(cv, f"{node.name}_one", 1.0, x.dtype)
    _finish(cv, node, "Div", [one, x], {"activation": "NONE"}, x.layout)


def _gelu(cv, node) -> None:
    """Gelu(approximate tanh) -> 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) as MUL, ADD,
    TANH (int8 everywhere); the exact (erf) form needs ERF, which TFLite has not."""
    approximate = node.attrs.get("approximate") or "none"
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate != "tanh":
        raise Unmappable(f"Gelu (approximate {approximate}: erf, which TFLite Micro has not)",
                         UNMAPPED)
    x = cv.value(node.inputs[0])
    base, none = node.outputs[0], {"activation": "NONE"}

    def k(tag, value):
        return _const_like(cv, f"{base}_{tag}", value, x.dtype)

    x2 = _emit_value(cv, "Mul", [x, x], f"{base}_x2", x, none)
    x3 = _emit_value(cv, "Mul", [x2, x], f"{base}_x3", x, none)
    cubic = _emit_value(cv, "Mul", [x3, k("c", 0.044715)], f"{base}_cubic", x, none)
    inner = _emit_value(cv, "Add", [x, cubic], f"{base}_inner", x, none)
    scaled = _emit_value(cv, "Mul", [inner, k("s", float(np.sqrt(2.0 / np.pi)))],
                         f"{base}_scaled", x, none)
    t = _emit_value(cv, "Tanh", [scaled], f"{base}_tanh", x)
    one_plus = _emit_value(cv, "Add", [t, k("one", 1.0)], f"{base}_one_plus", x, none)
    half = _emit_value(cv, "Mul", [x, k("half", 0.5)], f"{base}_half", x, none)
    _finish(cv, node, "Mul", [half, one_plus], none, x.layout)


# -- layer normalization ---------------------------------------------------------------------------
def _layer_norm(cv, node) -> None:
    if any(o is not None for o in node.outputs[1:]):
        raise Unmappable(f"LayerNormalization {node.name!r} (Mean / InvStdDev outputs are read)")
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    axis = int(node.attrs.get("axis", -1))
    if not -rank <= axis < rank:
        raise Unmappable(f"LayerNormalization {node.name!r} (axis {axis} of a rank-{rank} tensor)")
    axis %= rank
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(rank))
    perm = x.layout.perm
    eps = float(node.attrs.get("epsilon", 1e-5))
    axes = cv.int32_const(f"{node.name}_axes", sorted(perm.index(a) for a in range(axis, rank)))
    reduced = tuple(1 if i >= axis else d for i, d in enumerate(x.shape))
    base = node.outputs[0]
    keep = {"keepdims": 1}
    mean = _emit_value(cv, "Mean", [x, axes], f"{base}_mean", x, keep, reduced)
    d = _emit_value(cv, "Sub", [x, mean], f"{base}_centered", x, {"activation": "NONE"})
    sq = _emit_value(cv, "Mul", [d, d], f"{base}_squared", x, {"activation": "NONE"})
    var = _emit_value(cv, "Mean", [sq, axes], f"{base}_var", x, keep, reduced)
    ve = _emit_value(cv, "Add", [var, _const_like(cv, f"{base}_eps", eps, x.dtype)],
                     f"{base}_var_eps", var, {"activation": "NONE"})
    inv = _emit_value(cv, "Rsqrt", [ve], f"{base}_inv_std", var)
    scale = cv.require_constant(node, 1, "scale")
    bias = cv.require_constant(node, 2, "bias") if len(node.inputs) > 2 and node.inputs[2] \
        else None
    steps = [("Mul", inv)]  # normalized = centered * inv_std
    for op, data, neutral, tag in (("Mul", scale, 1.0, "scale"), ("Add", bias, 0.0, "bias")):
        if data is None or np.all(data == neutral):
            continue
        if not _broadcasts_to(data.shape, x.shape[axis:]):
            raise Unmappable(f"LayerNormalization {node.name!r} ({tag} {list(data.shape)} for "
                             f"axes from {axis})")
        data = cv.permute_const(data.astype(np.dtype(x.dtype)), x.layout, rank, strip=True)
        steps.append((op, cv.add_const(f"{node.name}_{tag}", np.ascontiguousarray(data))))
    cur, attrs = d, {"activation": "NONE"}
    for i, (op, operand) in enumerate(steps):
        if i == len(steps) - 1:
            _finish(cv, node, op, [cur, operand], attrs, x.layout)
        else:
            cur = _emit_value(cv, op, [cur, operand], f"{base}_{op.lower()}{i}", x, attrs)


# -- attention -------------------------------------------------------------------------------------
def _matmul_operand(cv, v: Value) -> tuple:
    """(value, adj): `v` as BATCH_MATMUL reads it; adj when its last two axes are swapped."""
    rank = len(v.shape)
    if v.layout.flat is None:
        perm = v.layout.perm
        if perm == identity(rank):
            return v, False
        if perm[:-2] == identity(rank - 2) and perm[-2:] == (rank - 1, rank - 2):
            return v, True
    return cv.relayout(v, identity(rank)), False


def batch_matmul(cv, node) -> None:
    """MatMul whose second operand is not a 2-D constant weight -> BATCH_MATMUL."""
    a, b = cv.value(node.inputs[0]), cv.value(node.inputs[1])
    if not (2 <= len(a.shape) <= 5 and 2 <= len(b.shape) <= 5):
        raise Unmappable(f"MatMul {node.name!r} of {list(a.shape)} and {list(b.shape)} (BATCH_"
                         "MATMUL takes ranks 2 to 5)")
    a, adj_x = _matmul_operand(cv, a)
    b, adj_y = _matmul_operand(cv, b)
    out_rank = len(cv.shape(node.outputs[0]))
    _finish(cv, node, "BatchMatMul", [a, b], {"adj_x": adj_x, "adj_y": adj_y,
                                             "asymmetric_quantize_inputs": False},
            Layout(identity(out_rank)))


# -- problems found before converting --------------------------------------------------------------
def _check_layer_norm(graph, node):
    for i, what in ((1, "scale"), (2, "bias")):
        name = node.inputs[i] if i < len(node.inputs) else None
        if name is not None and graph.constant(name) is None:
            return NON_CONSTANT, (f"LayerNormalization {node.name!r} ({what} {name!r} is not a "
                                  "constant)")
    return None


def _check_pow(graph, node):
    y = graph.constant(node.inputs[1])
    if y is None:
        return NON_CONSTANT, f"Pow {node.name!r} (exponent {node.inputs[1]!r} is not a constant)"
    values = np.unique(np.asarray(y, np.float64))
    if values.size != 1 or float(values[0]) not in (0.5, 1.0, 2.0):
        return UNMAPPED, f"Pow (exponent {', '.join(f'{v:g}' for v in values[:4])})"
    return None


MATH_RULES = {
    "LeakyRelu": _leaky_relu,
    "PRelu": _prelu,
    "Sqrt": _sqrt,
    "Rsqrt": _sqrt,
    "Pow": _pow,
    "Reciprocal": _reciprocal,
    "LayerNormalization": _layer_norm,
    "Gelu": _gelu,
}
MATH_CHECKS = {
    "LayerNormalization": _check_layer_norm,
    "Pow": _check_pow,
    "MatMul": lambda graph, node: None,  # a computed B is BATCH_MATMUL
}
__all__ = ["MATH_RULES", "MATH_CHECKS", "batch_matmul"]
