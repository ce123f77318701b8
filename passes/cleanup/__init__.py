"""Cleanup passes: rewrites that compute nothing new but make the graph smaller or static.

- `eliminate`: Identity, inference Dropout, no-op Reshape / Transpose, dead nodes, unused tensors;
- `fold_constants`: nodes whose inputs are all constants become constants;
- `static_batch`: a dynamic batch becomes 1 and every shape static (for TFLite Micro);
- `store_float16`: float weights stored as float16 behind DEQUANTIZE (`convert --keep-float16`),
  the inverse of folding a float16 DEQUANTIZE (not a pipeline pass).
"""
