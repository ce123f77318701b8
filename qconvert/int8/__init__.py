"""int8 numerics of TFLite Micro and CMSIS-NN: the bottom layer every int8 computation uses.

One definition of each, so the quantization plan, the integer executor and the C exporter agree
to the last bit:

- `rounding`: round half away from zero (C `round`, TfLiteRound);
- `fixed_point`: gemmlowp's 32-bit primitives (SaturatingRoundingDoublingHighMul,
  RoundingDivideByPOT, ...) and MultiplyByQuantizedMultiplier in its double-rounding (TFLite) and
  single-rounding (CMSIS-NN) forms; `fixed_point16`: the 16-bit ones of HARD_SWISH;
- `transcendental`: gemmlowp's fixed-point exp, 1 / (1 + x), logistic, tanh, reciprocal and
  inverse square root;
- `multipliers`: QuantizeMultiplier and its variants, the effective multipliers of layers with
  weights, and the other multiplier arithmetic of TFLite's kernels;
- `activation_range`: the int clamps of fused activations;
- `prepare`: the per-layer parameters TFLite Micro computes at Prepare (`layer_params`).

Layering: this package imports only numpy, `qconvert.errors`, `qconvert.padding` and the IR's
data (graph, node, tensor attributes); the executor, the passes, the quantizer and the C
exporter import it, never the other way (tests/test_architecture.py checks it).
"""
