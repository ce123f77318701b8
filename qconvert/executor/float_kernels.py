"""Numpy kernels of IR ops, with ONNX / TFLite semantics: `KERNELS[op](node, inputs, out_dtypes)`.

This module is the table's front door: importing it loads every kernel family, each in its own
module (`float_kernels_base`: the registry, `KernelContext` and shared helpers;
`float_kernels_elementwise`: arithmetic and activations; `float_kernels_shape`: shape and data
movement; `float_kernels_conv`: convolutions and matmuls (`float_kernels_hybrid`: their int8-weight
variants, `float_kernels_window`: sliding-window geometry); `float_kernels_pool`: pools and
reductions; `float_kernels_quant`: Quantize / Dequantize; `float_kernels_math`: transformer-era
ops; `float_kernels_logic`: comparisons (bool outputs) and SelectV2; `float_kernels_spatial`:
resize, transposed conv in NHWC, split). The contract they share:

- `inputs`: one array per input slot, `None` for an omitted optional input. A kernel reads only
  what it needs (Shape reads only `.shape`, so a zero-strided placeholder is enough).
- `out_dtypes`: the IR dtype name declared for each output, `None` where it is unknown. Ops whose
  output type is not implied by their inputs (Cast from TFLite, Shape) use it.
- Returns one array per output. Kernels never write into their inputs; results may be views of
  them (Reshape, Transpose, Expand), so callers that keep a result copy it if they need to.
- A kernel raises (ValueError, IndexError, NotImplementedError, ZeroDivisionError) on anything it
  cannot compute exactly as the runtimes do; callers that only optimize treat that as "skip".
- Kernels of the ops in `CONTEXT_KERNELS` also take a keyword argument `ctx` (a `KernelContext`:
  the quantization parameters of the node's input and output tensors), which only a caller
  holding the graph can give (the executor does; fold-constants does not): hybrid TFLite
  Conv2D / FullyConnected (int8 weights, float input). Without `ctx` they raise
  NotImplementedError where they need it. Quantize / Dequantize take their scale and zero point
  as inputs in both formats: for a TFLite node the executor gives them from the tensor's
  quantization (`implied_inputs`).

Attribute names are the IR's (`qconvert.schemas.ops`): ONNX attributes keep their ONNX names
(`axis`, `to` as an IR dtype name, `allowzero`, `keepdims`), TFLite options their snake_case
field names (`batch_dims`) and the fused activation is `activation`. List-valued parameters
either format may give as an input (Transpose perm, Squeeze / Unsqueeze / reduction axes,
Split sizes) are always inputs.

Semantics worth knowing:
- integer Div truncates toward zero (C semantics, as onnxruntime and TFLite compute it); a zero
  integer divisor raises;
- Reshape: `0` copies the input dimension when `allowzero` is 0 (ONNX default), `-1` is inferred;
  `allowzero` 1 (every TFLite Reshape) reads it literally;
- Cast from float to an integer type truncates toward zero and refuses out-of-range values (the
  runtimes' result is undefined there);
- Range accumulates `value += delta` in the output type, as onnxruntime and TFLite do;
- float layers compute in float32 like the runtimes (BLAS matmuls over an im2col view, sums over
  kernel taps), so they agree with onnxruntime / LiteRT to float rounding, not bitwise;
- pools: padding never wins a max; averages divide by the valid (non-pad) element count
  (TFLite, ONNX count_include_pad=0) or by the taps inside the explicit pads
  (count_include_pad=1); ONNX ceil_mode windows may run past the end padding;
- Quantize rounds as its `rounding` says: half to even (ONNX QuantizeLinear), half away from
  zero (TFLite QUANTIZE) (x / scale in float32 both), and saturates to the output type.
"""

from __future__ import annotations

# the registry, then every kernel family (importing a family registers its kernels)
from . import float_kernels_conv as _conv  # noqa: F401
from . import float_kernels_elementwise as _elementwise  # noqa: F401
from . import float_kernels_logic as _logic  # noqa: F401  (comparisons, SelectV2)
from . import float_kernels_lstm as _float_kernels_lstm  # noqa: F401  (LSTM ops)
from . import float_kernels_math as _float_kernels_math  # noqa: F401  (transformer-era ops)
from . import float_kernels_pool as _pool  # noqa: F401
from . import float_kernels_spatial as _spatial_kernels  # noqa: F401  (resize, split...)
from .float_kernels_base import CONTEXT_KERNELS, KERNELS, KernelContext, kernel
from .float_kernels_quant import IMPLIED_SLOTS, fake_quantize, implied_inputs
from .float_kernels_shape import range_length

__all__ = ["CONTEXT_KERNELS", "IMPLIED_SLOTS", "KERNELS", "KernelContext", "fake_quantize",
           "implied_inputs", "kernel", "range_length"]
