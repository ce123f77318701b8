"""SAME / VALID padding as explicit pads, shared by the TFLite and ONNX readers and writers.

Pads are `[begin_0, begin_1, ..., end_0, end_1, ...]` over the spatial axes (ONNX order; for
2-D that is [top, left, bottom, right]). SAME follows TFLite and ONNX SAME_UPPER:
`out = ceil(in / stride)`, `total = max((out - 1) * stride + (k - 1) * dilation + 1 - in, 0)`,
`begin = total // 2`, `end = total - begin`; SAME_LOWER puts the odd pixel at the begin side.
TFLite's TRANSPOSE_CONV crops its output by pads computed from the output size
(`transpose_conv_pads`), which the float and int8 kernels and the ONNX -> TFLite layout pass share.
"""

from __future__ import annotations


def same_pads(spatial, kernel, strides, dilations, lower: bool = False) -> list:
    """Explicit pads of SAME padding for input spatial sizes `spatial`."""
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-int(size) // int(s))
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begins.append(large if lower else small)
        ends.append(small if lower else large)
    return begins + ends


def valid_pads(rank: int) -> list:
    """Explicit pads of VALID padding: zeros, begins then ends, for `rank` spatial axes."""
    return [0] * (2 * rank)


def tflite_padding_of(pads, spatial, kernel, strides, dilations) -> str | None:
    """'VALID' or 'SAME' when the explicit `pads` equal one of them (VALID preferred), else None."""
    pads = [int(p) for p in pads]
    if pads == valid_pads(len(kernel)):
        return "VALID"
    if spatial is not None and pads == same_pads(spatial, kernel, strides, dilations):
        return "SAME"
    return None


def transpose_conv_pads(padding: str, out_hw, kernel_hw, strides) -> list:
    """[top, left] crop of TFLite's TRANSPOSE_CONV: ComputePaddingHeightWidth on the output
    size (dilation 1), the floor half of the total (TFLite Micro ignores the odd offset)."""
    return transpose_conv_geometry(padding, out_hw, kernel_hw, strides)[0]


def transpose_conv_geometry(padding: str, out_hw, kernel_hw, strides) -> tuple:
    """([top, left] crop, [h, w] input size TFLite expects) of a TRANSPOSE_CONV with output
    size `out_hw`: LiteRT refuses an input of any other size."""
    pads, sizes = [], []
    for out, k, s in zip(out_hw, kernel_hw, strides):
        size = (out + s - 1) // s if padding == "SAME" else (out - k + s) // s
        pads.append(max((size - 1) * s + k - out, 0) // 2)
        sizes.append(size)
    return pads, sizes
