"""Fusion passes: ops folded into the layer before them, or rewritten as a cheaper form.

Each fusion declares its pattern, conditions and rewrite for the matcher (`passes.matcher`),
one file each. `linear_layer` describes the layers that absorb a per-channel affine op and the
one rewrite they share, `affine` the pattern and conditions of the fusions into them:
`conv_batchnorm`, `conv_mul`, `conv_add`. `matmul_add` turns MatMul + Add into Gemm;
`batchnorm_to_affine` rewrites a BatchNorm no layer absorbs as Mul + Add; `fuse_activation`
makes Relu / Relu6 / Clip a TFLite fused activation; `equalize` is cross-layer equalization
before int8 quantization (a chain through Relu / MaxPool, not a fixed pattern). The rewrites
only the ONNX -> TFLite conversion runs (hard_swish, rsqrt, channel_shuffle) live in
`passes/onnx_to_tflite/`.
"""
