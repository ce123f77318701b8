"""Layout passes: ONNX (NCHW) to TFLite (NHWC) and the transposes it leaves.

`layout_nhwc` holds the layout rewrite the conversion (`passes.onnx_to_tflite`) runs;
`layout_state` is its bookkeeping (where each ONNX value lives in the TFLite graph),
`layout_rules` and `onnx_to_tflite_ops` / `_math` / `_spatial` its per-op rules;
`tflite_legalize` turns the Clips no layer absorbed into TFLite ops; `cancel_transposes`
composes transposes that meet; `merge_reshapes` merges the RESHAPE pairs the layout pass
leaves.
"""
