"""ONNX (NCHW) to TFLite (NHWC): the conversion and everything only it runs.

`convert` is the conversion (`convert_onnx_to_tflite`, its steps in order). Before the layout
rewrite, on the ONNX graph: `hard_swish`, `rsqrt`, `channel_shuffle` (ONNX spellings made one
op). `layout_nhwc` holds the layout rewrite; `layout_state` is its bookkeeping (where each ONNX
value lives in the TFLite graph), `layout_rules` and `ops` / `ops_math` / `ops_spatial` its
per-op rules and lowerings; `tflite_legalize` turns the Clips no layer absorbed into TFLite ops;
`cancel_transposes` composes transposes that meet; `merge_reshapes` merges the RESHAPE pairs the
layout pass leaves.
"""
