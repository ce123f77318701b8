"""Reference execution of IR nodes in numpy.

`float_kernels.KERNELS` maps an IR op name to a function
`(node, inputs, out_dtypes) -> list of output arrays` implementing the op's ONNX / TFLite
semantics in float (and in integers for shape arithmetic). `fold-constants` evaluates nodes with
it; the float reference executor runs whole graphs with the same table.
"""
