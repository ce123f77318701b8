"""The float kernel registry and what every float kernel family shares.

`KERNELS` maps an IR op name to its kernel, `CONTEXT_KERNELS` names the ops whose kernel also
takes `ctx` (a `KernelContext`), `kernel(...)` registers a kernel; the contract the kernels
follow is in `float_kernels` (import the table from there: it loads every family). The helpers
read constant inputs / attributes, check dtypes and apply TFLite's fused activation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from qconvert.schemas.activations import ACTIVATION_RANGES

from .bound_rows import maximum, minimum


KERNELS: dict[str, Callable] = {}
CONTEXT_KERNELS: set = set()  # ops whose kernel takes the keyword argument `ctx`


@dataclass(frozen=True)
class KernelContext:
    """Facts about a node that live in the graph, not in the node: given to the kernels of
    `CONTEXT_KERNELS` as the keyword argument `ctx` (the executor builds one per node).

    - `input_quant` / `output_quant`: the `QuantParams` (or None) of each input / output tensor,
      in slot order. A TFLite Conv2D / FullyConnected with int8 weights and a float input (a
      "hybrid" op, from dynamic-range quantization) reads its weights'. (Quantize / Dequantize
      get theirs as inputs: `float_kernels_quant.implied_inputs`.)
    - `clamp`: (lower, upper) of the clamping activation that reads the output alone, which
      the executor asks Conv2D to apply while its results are in cache (`run_float`'s
      `unobserved`); None otherwise.
    - `onnx_opset`: the model's default-domain ONNX opset; None for TFLite or when unknown.
      No kernel needs it: the readers spell what an opset means in the node's attributes
      (Softmax `coerce_2d`, parameters as inputs; see `qconvert.schemas.ops`).

    A caller without a graph (fold-constants) passes no `ctx`; a kernel that cannot compute the
    node exactly without it raises NotImplementedError (so fold-constants skips the node).
    """

    input_quant: tuple = ()
    output_quant: tuple = ()
    onnx_opset: int | None = None
    clamp: tuple | None = None  # (lower, upper) of a clamp the executor runs within the node

    def in_quant(self, index: int):
        return self.input_quant[index] if index < len(self.input_quant) else None

    def out_quant(self, index: int):
        return self.output_quant[index] if index < len(self.output_quant) else None


def kernel(*ops: str, context: bool = False):
    """Register the decorated function as the kernel of each IR op in `ops`; with `context`,
    the kernel also takes `ctx=None` (a `KernelContext`)."""

    def wrap(fn):
        for op in ops:
            KERNELS[op] = fn
            if context:
                CONTEXT_KERNELS.add(op)
        return fn

    return wrap


# -- helpers ------------------------------------------------------------------------------------
def _ints(a) -> list:
    """A constant input or attribute as a list of Python ints."""
    return [int(v) for v in np.asarray(a).reshape(-1)]


def input_or_attr(node, inputs, index: int, *attrs):
    """Input `index` when present, else the first attribute of `attrs` that is set, else None.
    (List-valued parameters are inputs in the IR, whatever the format's spelling: see
    `qconvert.schemas.ops`.)"""
    if len(inputs) > index and inputs[index] is not None:
        return _ints(inputs[index])
    for name in attrs:
        if node.attrs.get(name) is not None:
            return _ints(node.attrs[name])
    return None


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def clamp(x: np.ndarray, lower, upper, out: np.ndarray | None = None) -> np.ndarray:
    """`x` clamped to [lower, upper] in its own dtype (None: unbounded on that side), the max
    taken first, as the runtimes do; `out` receives the result (it may be `x`: in place). The
    float form of every clamp (Relu, Relu6, fused activations: `schemas.activations`)."""
    y = x
    if lower is not None:
        y = maximum(y, lower, out=out)
    if upper is not None:
        y = minimum(y, upper, out=out)
    return y


def _fused(node, y: np.ndarray, own: bool = False) -> np.ndarray:
    """Apply the TFLite fused activation of `node` (ONNX nodes have none): a clamp to the
    activation's range, or tanh. `own`: `y` is the kernel's own new array, clamped in place
    (span by span on every CPU: `parallel.elementwise`) instead of into two new arrays; the
    same values."""
    name = node.attrs.get("activation", "NONE")
    if name == "TANH":
        return np.asarray(np.tanh(y), dtype=y.dtype)
    if name not in ACTIVATION_RANGES:
        raise NotImplementedError(f"fused activation {name}")
    bounds = ACTIVATION_RANGES[name]
    if own and bounds != (None, None) and isinstance(y, np.ndarray) and y.flags.writeable:
        from .parallel import elementwise

        return elementwise(lambda a, out: clamp(a, *bounds, out=out), y, y)
    return np.asarray(clamp(y, *bounds), dtype=y.dtype)


def fused_bounds(node) -> tuple | None:
    """(lower, upper) of `node`'s fused clamp (RELU, RELU6, RELU_N1_TO_1), None when it has
    none (NONE) or another activation (TANH)."""
    bounds = ACTIVATION_RANGES.get(node.attrs.get("activation", "NONE") or "NONE")
    return None if bounds is None or bounds == (None, None) else bounds


def optional_input(inputs, index: int):
    """Optional input `index`, or None when it is omitted."""
    return inputs[index] if len(inputs) > index else None


def float_input(node, x: np.ndarray) -> None:
    if x.dtype.kind != "f":
        raise NotImplementedError(f"{node.op} of {x.dtype} (the float executor computes floats; "
                                  "quantized ops are the integer executor's)")


def float_operand(node, a: np.ndarray, dtype, what: str) -> np.ndarray:
    """A float weight / bias operand in the computation's dtype (float16 weights widen)."""
    if a.dtype.kind != "f":
        raise NotImplementedError(f"{node.op} with {a.dtype} {what} and a float input")
    return aligned(a.astype(dtype, copy=False))


def aligned(a: np.ndarray) -> np.ndarray:
    """`a`, copied when unaligned or not C-contiguous: constants read from ONNX files are views
    of the file's bytes, often unaligned, and numpy's matmul skips BLAS (100x slower) on those."""
    return np.require(a, requirements=("C", "A"))


def _layout(node) -> str:
    layout = node.attrs.get("layout", "NCHW") or "NCHW"
    if layout not in ("NCHW", "NHWC"):
        raise NotImplementedError(f"layout {layout}")
    return layout
