"""Float kernels of the activation, normalization and attention ops of exported transformers:
LeakyRelu, PRelu, Sqrt, Rsqrt, L2Normalization, Neg, Log, Sin, FloorDiv, Pow, Reciprocal, Gelu,
LayerNormalization and BatchMatMul (TFLite BATCH_MATMUL). Registered into
`float_kernels.KERNELS` (same contract: see that module's docstring); kept apart so the big
kernel file does not grow.

Semantics follow the runtimes: LeakyRelu / PRelu keep x where x >= 0 (TFLite writes `x > 0`;
the two agree, 0 * alpha is 0); PRelu's slope broadcasts against x (numpy rules, as ONNX's
unidirectional broadcast and TFLite's PRELU); Rsqrt is 1 / sqrt(x) in float32; LayerNorm
reduces in float64 and casts once, within float32 rounding of onnxruntime.
"""

from __future__ import annotations

import numpy as np

from .float_kernels_base import _axis, kernel


def _float32(node, x: np.ndarray) -> None:
    if x.dtype.kind != "f":
        raise NotImplementedError(f"{node.op} of {x.dtype}")


@kernel("LeakyRelu")
def leaky_relu(node, inputs, out_dtypes):
    """x where x >= 0, else alpha * x (alpha in the input's float type; ONNX default 0.01)."""
    x = inputs[0]
    _float32(node, x)
    alpha = node.attrs.get("alpha")
    alpha = x.dtype.type(0.01 if alpha is None else alpha)
    return [np.where(x >= 0, x, x * alpha).astype(x.dtype, copy=False)]


@kernel("PRelu")
def prelu(node, inputs, out_dtypes):
    """x where x >= 0, else slope * x, slope broadcast against x (never enlarging it)."""
    x, slope = inputs[0], inputs[1].astype(inputs[0].dtype, copy=False)
    _float32(node, x)
    if np.broadcast_shapes(x.shape, slope.shape) != x.shape:
        raise ValueError(f"PRelu slope {slope.shape} does not broadcast to {x.shape}")
    return [np.where(x >= 0, x, x * slope).astype(x.dtype, copy=False)]


@kernel("Sqrt")
def sqrt(node, inputs, out_dtypes):
    """sqrt(x) (NaN below 0, as the runtimes give)."""
    x = inputs[0]
    _float32(node, x)
    with np.errstate(invalid="ignore"):
        return [np.sqrt(x)]


@kernel("Rsqrt")
def rsqrt(node, inputs, out_dtypes):
    """1 / sqrt(x) in the input's float type (TFLite RSQRT: 1.f / std::sqrt(f))."""
    x = inputs[0]
    _float32(node, x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return [(x.dtype.type(1) / np.sqrt(x)).astype(x.dtype, copy=False)]


@kernel("SquaredDifference")
def squared_difference(node, inputs, out_dtypes):
    """(a - b) * (a - b) with broadcasting, in the inputs' float type (TFLite
    SQUARED_DIFFERENCE)."""
    d = inputs[0] - inputs[1]
    return [d * d]


@kernel("Abs")
def abs_(node, inputs, out_dtypes):
    """|x| (ONNX Abs, TFLite ABS)."""
    return [np.abs(inputs[0])]


@kernel("L2Normalization")
def l2_normalization(node, inputs, out_dtypes):
    """TFLite L2_NORMALIZATION: x / max(sqrt(sum of squares along the last axis), 1e-6), in the
    input's float type (a fused activation is refused: TFLite has none for it)."""
    x = inputs[0]
    if (node.attrs.get("activation") or "NONE") != "NONE":
        raise ValueError("L2Normalization with a fused activation")
    norm = np.sqrt(np.sum(np.square(x, dtype=x.dtype), axis=-1, keepdims=True, dtype=x.dtype))
    return [(x / np.maximum(norm, x.dtype.type(1e-6))).astype(x.dtype, copy=False)]


@kernel("Neg")
def neg(node, inputs, out_dtypes):
    """-x (ONNX Neg, TFLite NEG)."""
    return [np.negative(inputs[0])]


@kernel("Log")
def log(node, inputs, out_dtypes):
    """log(x) in the input's float type (-inf at 0, NaN below, as the runtimes give)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return [np.log(inputs[0])]


@kernel("Sin")
def sin(node, inputs, out_dtypes):
    """sin(x) in the input's float type."""
    return [np.sin(inputs[0])]


@kernel("FloorDiv")
def floor_div(node, inputs, out_dtypes):
    """floor(a / b) with broadcasting (TFLite FLOOR_DIV: std::floor of the float quotient;
    integers: floor division, refused by 0 as TFLite refuses it)."""
    a, b = inputs
    if a.dtype.kind in "iu":
        if np.any(b == 0):
            raise ValueError("FloorDiv by 0")
        return [np.floor_divide(a, b)]
    with np.errstate(invalid="ignore", divide="ignore"):
        return [np.floor(a / b).astype(a.dtype, copy=False)]


@kernel("Reciprocal")
def reciprocal(node, inputs, out_dtypes):
    """1 / x (inf at 0)."""
    x = inputs[0]
    _float32(node, x)
    with np.errstate(divide="ignore"):
        return [(x.dtype.type(1) / x).astype(x.dtype, copy=False)]


@kernel("Pow")
def pow_(node, inputs, out_dtypes):
    """x ** y with broadcasting, in x's type (ONNX Pow 12+: the exponent may be another type)."""
    x, y = inputs[0], inputs[1]
    _float32(node, x)
    with np.errstate(all="ignore"):
        if y.size == 1 and float(y.reshape(-1)[0]) == 2.0:
            out = x * x  # what onnxruntime computes for a square
            return [np.broadcast_to(out, np.broadcast_shapes(x.shape, y.shape)).astype(x.dtype)]
        return [np.power(x, y.astype(x.dtype)).astype(x.dtype, copy=False)]


@kernel("LayerNormalization")
def layer_norm(node, inputs, out_dtypes):
    """ONNX LayerNormalization: normalize over the axes from `axis` to the end, then scale and
    bias (broadcast over those axes). Optional outputs: Mean and InvStdDev (kept dims)."""
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    _float32(node, x)
    axis = _axis(int(node.attrs.get("axis", -1)), x.ndim)
    eps = float(node.attrs.get("epsilon", 1e-5))
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = np.square(x64 - mean).mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    y = (x64 - mean) * inv * scale.astype(np.float64)
    if bias is not None:
        y = y + bias.astype(np.float64)
    outs = [y.astype(x.dtype)]
    n_out = len(out_dtypes) if out_dtypes is not None else 1
    if n_out > 1:
        outs.append(mean.astype(np.float32))
    if n_out > 2:
        outs.append(inv.astype(np.float32))
    return outs


@kernel("BatchMatMul")
def batch_matmul(node, inputs, out_dtypes):
    """TFLite BATCH_MATMUL: a @ b over the last two axes (each transposed first when `adj_x` /
    `adj_y`), the leading axes broadcast."""
    a, b = inputs[0], inputs[1]
    _float32(node, a)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("BATCH_MATMUL needs operands of rank 2 or more")
    if node.attrs.get("adj_x"):
        a = np.swapaxes(a, -1, -2)
    if node.attrs.get("adj_y"):
        b = np.swapaxes(b, -1, -2)
    return [np.matmul(a, b.astype(a.dtype, copy=False)).astype(a.dtype, copy=False)]


@kernel("Gelu")
def gelu(node, inputs, out_dtypes):
    """ONNX Gelu: 0.5 x (1 + erf(x / sqrt 2)), or with `approximate` tanh
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); computed in float64, cast once."""
    x = inputs[0]
    _float32(node, x)
    x64 = x.astype(np.float64)
    approximate = node.attrs.get("approximate") or "none"
    if isinstance(approximate, bytes):
        approximate = approximate.decode()
    if approximate == "tanh":
        inner = np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)
        return [(0.5 * x64 * (1.0 + np.tanh(inner))).astype(x.dtype)]
    if approximate != "none":
        raise ValueError(f"Gelu approximate {approximate!r}")
    return [(0.5 * x64 * (1.0 + _erf(x64 / np.sqrt(2.0)))).astype(x.dtype)]


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64, vectorized (Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7,
    well inside float32 comparisons of Gelu)."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                         + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))
