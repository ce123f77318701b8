"""Int8 quantization: calibration, the quantization plan and the int8 TFLite / QDQ ONNX writers.

The fixed-point arithmetic (rounding, QuantizeMultiplier, effective multipliers, requantization,
fused-activation clamps) is `qconvert.int8`'s, shared with the integer executor and the C
exporter; see design.md, "Quantization numerics".
"""
