"""Int8 quantization: fixed-point numerics bit-exact with TFLite Micro and CMSIS-NN.

`numerics` holds the scalar arithmetic (rounding, QuantizeMultiplier, effective multipliers,
requantization, fused-activation clamps); see design.md, "Quantization numerics".
"""
