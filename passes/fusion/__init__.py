"""Fusion passes: ops folded into the layer before them, or rewritten as a cheaper form.

`linear_layer` describes the layers that absorb a per-channel affine op and the one rewrite they
share; `fuse_linear` folds BatchNorm, Mul / Div, Add / Sub into them; `matmul_add` turns MatMul +
Add into Gemm; `batchnorm_to_affine` rewrites a BatchNorm no layer absorbs as Mul + Add;
`fuse_activation` makes Relu / Relu6 / Clip a TFLite fused activation; `equalize` is cross-layer
equalization before int8 quantization.
"""
