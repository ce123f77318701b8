"""Integer kernels of int8 TFLite graphs, bit-exact with TFLite Micro's reference kernels.

`INT_KERNELS[op](node, inputs, params, ctx) -> list of arrays`, keyed by IR op name, runs one
Eval (contract: `int_kernel_base`). The parameters are what TFLite Micro computes once at
Prepare (`qconvert.int8.prepare.layer_params`); the arithmetic is `qconvert.int8`'s. The kernels
live by family: `int_kernels_conv` (conv, depthwise, fully connected, pools),
`int_kernels_elementwise` (add, sub, mul, mean, quantize, dequantize), `int_kernels_activation`
(softmax, logistic, tanh, hard swish, relu, relu6), `int_kernels_data` (concat, pad, shape ops),
`int_kernels_math` (leaky relu, prelu, batch matmul, rsqrt, div), `int_kernels_spatial`
(transpose conv, resize, split), `int_kernels_logic` (comparisons, select), `int_kernels_lstm`
(UNIDIRECTIONAL_SEQUENCE_LSTM).

Conventions are TFLite Micro's: `input_offset = -z_in` and `weights_offset = -z_w` are added to
the int8 values, `output_offset = z_out` is added after requantization; shifts are positive for
a left shift. Every C `int32_t` quantity is held in int64 numpy arrays and wrapped back to 32
bits wherever the C code could overflow (two's complement, as on the devices).

`rounding="single"` replaces MultiplyByQuantizedMultiplier (Conv2D, DepthwiseConv2D,
FullyConnected, Add, Sub, Mul, Mean, Relu, Quantize int8->int8, the input scaling of Logistic /
Tanh) by CMSIS-NN's single-rounding requantization, i.e. what CMSIS-NN kernels built with
CMSIS_NN_USE_SINGLE_ROUNDING compute for those layers. It is not a model of a TFLite Micro
build with TFLITE_SINGLE_ROUNDING (whose softmax scaling also changes), nor of CMSIS-NN's own
softmax / sigmoid kernels.

What this TFLite Micro (tflite-micro 0.dev2026, reference kernels) does that older sources or
other runtimes may suggest otherwise, each pinned by a test:
- FullyConnected with per-tensor weights takes double(s_in) * double(s_w) / double(s_out), like
  conv (not a float32 product s_in * s_w);
- int8 MEAN always goes through QuantizedMeanOrSum (no truncating raw mean when input and
  output share their quantization);
- int8 CONCATENATION requires every input to carry the output's quantization (it never
  requantizes) and refuses a fused activation;
- DEPTHWISE_CONV_2D needs a bias tensor (it crashes without one); CONV_2D and
  FULLY_CONNECTED accept none;
- pooling requires equal input and output quantization; TANH ignores its output tensor's
  quantization (it writes scale 1/128, zero point 0); RELU6 clamps the raw input to
  [z_in, z_in + round(6 / s_in)] (the output tensor's quantization is not read);
- a float -> int8 QUANTIZE of a value beyond int32 (or NaN) gives what x86 gives:
  INT32_MIN + z_out, wrapped, then clamped.
"""

from __future__ import annotations

from . import (int_kernels_activation, int_kernels_conv, int_kernels_data,  # noqa: F401
               int_kernels_elementwise, int_kernels_logic, int_kernels_lstm, int_kernels_math,
               int_kernels_spatial)
from .int_kernel_base import INT_KERNELS, IntContext

__all__ = ["INT_KERNELS", "IntContext"]
