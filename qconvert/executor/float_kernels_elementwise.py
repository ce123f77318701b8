"""Float kernels of the elementwise ops and activations: Add, Sub, Mul, Div (integer division
truncates toward zero), Maximum, Minimum, Max / Min (ONNX, any number of operands), Relu, Relu6,
Sigmoid, Tanh, Identity, Clip, BatchNorm, HardSigmoid, HardSwish, Softmax and Dropout
(inference). Registered into `float_kernels.KERNELS` (same contract: see that module's
docstring).
"""

from __future__ import annotations

import numpy as np

from qconvert.schemas.activations import ACTIVATION_RANGES, activation_of_op, clamp_ops

from .float_kernels_base import (KERNELS, _axis, float_input, float_operand, _fused, _layout,
                                 optional_input, clamp, kernel)


# -- elementwise --------------------------------------------------------------------------------
def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise ZeroDivisionError("integer division by zero")
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix.astype(q.dtype)).astype(np.result_type(a, b))


def _div(a, b):
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return _trunc_div(a, b)
    return np.divide(a, b)


def _binary(fn):
    def run(node, inputs, out_dtypes):
        a, b = inputs[0], inputs[1]
        if a.dtype != b.dtype:
            raise ValueError(f"{node.op} of {a.dtype} and {b.dtype}")
        with np.errstate(all="ignore"):
            y = np.asarray(fn(a, b)).astype(a.dtype, copy=False)
        return [_fused(node, y, own=True)]  # a new array of the ufunc

    return run


for _op, _fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", _div),
                 ("Maximum", np.maximum), ("Minimum", np.minimum)):
    KERNELS[_op] = _binary(_fn)


def _variadic(fn):
    def run(node, inputs, out_dtypes):
        if not inputs or any(a.dtype != inputs[0].dtype for a in inputs):
            raise ValueError(f"{node.op} of {[str(a.dtype) for a in inputs]}")
        y = inputs[0]
        for a in inputs[1:]:
            y = fn(y, a)
        return [np.array(y, copy=True)]

    run.__doc__ = "ONNX Max / Min: the elementwise extreme of every operand, broadcast."
    return run


KERNELS["Max"] = _variadic(np.maximum)
KERNELS["Min"] = _variadic(np.minimum)


def _unary(fn):
    def run(node, inputs, out_dtypes):
        x = inputs[0]
        with np.errstate(all="ignore"):
            return [np.asarray(fn(x)).astype(x.dtype, copy=False)]

    return run


def _clamp_to(bounds):
    return lambda x: clamp(x, *bounds)


for _op in sorted(clamp_ops()):  # Relu, Relu6: a clamp to their activation's range (Clip: below)
    if activation_of_op(_op) is not None:
        KERNELS[_op] = _unary(_clamp_to(ACTIVATION_RANGES[activation_of_op(_op)]))
KERNELS["Sigmoid"] = _unary(lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)))
KERNELS["Tanh"] = _unary(np.tanh)
KERNELS["Identity"] = _unary(lambda x: x)


@kernel("Clip")
def clip(node, inputs, out_dtypes):
    """ONNX Clip 11+: optional `min`/`max` inputs; min > max gives max everywhere."""
    x = inputs[0]
    y = x
    if len(inputs) > 1 and inputs[1] is not None:
        y = np.maximum(y, inputs[1].astype(x.dtype))
    if len(inputs) > 2 and inputs[2] is not None:
        y = np.minimum(y, inputs[2].astype(x.dtype))
    return [np.asarray(y, dtype=x.dtype)]


@kernel("BatchNorm")
def batch_norm(node, inputs, out_dtypes):
    """ONNX BatchNormalization at inference, as onnxruntime computes it:
    s = scale / sqrt(var + epsilon), y = x * s + (bias - mean * s), along the channel axis
    (1 for NCHW, the last for NHWC)."""
    x = inputs[0]
    float_input(node, x)
    if int(node.attrs.get("training_mode", 0) or 0):
        raise NotImplementedError("BatchNormalization in training mode")
    if any(o is not None for o in node.outputs[1:]):
        raise NotImplementedError("BatchNormalization with running-statistics outputs")
    scale, bias, mean, var = (float_operand(node, a, x.dtype, "parameters").reshape(-1)
                              for a in inputs[1:5])
    eps = x.dtype.type(node.attrs.get("epsilon", 1e-5))
    s = scale / np.sqrt(var + eps)
    t = bias - mean * s
    axis = x.ndim - 1 if _layout(node) == "NHWC" else 1
    shape = [1] * x.ndim
    shape[axis] = s.size
    y = x * s.reshape(shape)
    y += t.reshape(shape)
    return [y]


@kernel("HardSigmoid")
def hard_sigmoid(node, inputs, out_dtypes):
    """max(0, min(1, alpha * x + beta)) (ONNX defaults alpha 0.2, beta 0.5)."""
    x = inputs[0]
    float_input(node, x)
    t = x.dtype.type
    y = x * t(node.attrs.get("alpha", 0.2)) + t(node.attrs.get("beta", 0.5))
    return [np.clip(y, t(0), t(1))]


@kernel("HardSwish")
def hard_swish(node, inputs, out_dtypes):
    """x * relu6(x + 3) / 6 (TFLite's formula; onnxruntime's x * hardsigmoid(x) differs by
    float rounding only)."""
    x = inputs[0]
    float_input(node, x)
    t = x.dtype.type
    return [x * np.clip(x + t(3), t(0), t(6)) / t(6)]


@kernel("Softmax")
def softmax(node, inputs, out_dtypes):
    """exp(beta * (x - max)) / sum along `axis` (TFLite: the last axis); with `coerce_2d`
    (ONNX before opset 13) the input is flattened to 2-D at `axis` and the softmax runs over
    the whole second part."""
    x = inputs[0]
    float_input(node, x)
    beta = node.attrs.get("beta")
    axis = _axis(int(node.attrs.get("axis", -1)), max(x.ndim, 1))
    axes = tuple(range(axis, x.ndim)) if node.attrs.get("coerce_2d") else (axis,)
    with np.errstate(over="ignore", invalid="ignore"):
        z = x - np.max(x, axis=axes, keepdims=True)
        if beta is not None and float(beta) != 1.0:
            z *= x.dtype.type(beta)
        e = np.exp(z)
        return [e / np.sum(e, axis=axes, keepdims=True)]


@kernel("Dropout")
def dropout(node, inputs, out_dtypes):
    """Inference: the identity; the optional mask output is all true."""
    training = optional_input(inputs, 2)
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        raise NotImplementedError("Dropout in training mode")
    x = inputs[0]
    outs = [x]
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        outs.append(np.ones(x.shape, dtype=bool))
    return outs
