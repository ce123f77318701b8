"""The C call of each q7 layer kind, for both kernel sets of `export-c --scheme q7`
(`q7_source` renders NAME.c around them).

`LEGACY` (`--kernels cmsis-nn-legacy`): CMSIS_5's legacy q7 API, square or `_nonsquare`
variant by the layer's geometry. Which legacy convolution runs (`conv_function`): _RGB for a
square 3-channel input, _fast (_fast_nonsquare) when the input channels are a multiple of 4 and
the output channels even (their own argument checks) and the padding is as wide after as before
(`_fast_regions_fit`: their DSP build reads outside the image otherwise), else _basic
(_basic_nonsquare). `PORTABLE` (`--kernels portable`): qconvert's `qconvert_q7_*`.

Each entry takes (index, layer, src, dst: C expressions) and returns one C statement; a legacy
kernel returning an error status makes NAME_invoke return 1.
"""

from __future__ import annotations

import numpy as np

def _square(layer) -> bool:
    (ih, iw, _), (oh, ow, _) = layer.in_shape, layer.out_shape
    return (ih == iw and oh == ow and layer.kernel[0] == layer.kernel[1]
            and layer.stride[0] == layer.stride[1] and layer.pad[0] == layer.pad[1])


def _fast_regions_fit(layer) -> bool:
    """The _fast kernels' DSP build checks bounds only in the first and last `padding`
    output rows / columns: the windows between must lie inside the image. True when they do
    (a padding that is as wide at the bottom / right as at the top / left); TensorFlow's SAME
    padding of a stride-2 layer (0 before, 1 after) does not, and runs on _basic."""
    for axis in (0, 1):
        size, out = layer.in_shape[axis], layer.out_shape[axis]
        k, s, p = layer.kernel[axis], layer.stride[axis], layer.pad[axis]
        last_middle = out - p - 1
        if last_middle >= p and last_middle * s - p + k > size:
            return False
    return True


def conv_function(layer) -> str:
    """The legacy convolution whose argument checks `layer` passes (module docstring)."""
    cin, cout = layer.in_shape[2], layer.out_shape[2]
    square = _square(layer)
    if square and cin == 3:
        return "arm_convolve_HWC_q7_RGB"
    fast = cin % 4 == 0 and cout % 2 == 0 and _fast_regions_fit(layer)
    return "arm_convolve_HWC_q7_" + ("fast" if fast else "basic") + ("" if square else "_nonsquare")


_SCRATCH = "(q15_t *)(void *)scratch"
_CHECKED = "if ({fn}({args}) != ARM_CMSIS_NN_SUCCESS) {{ return 1; }}"


def _size(layer) -> int:
    return int(np.prod(layer.out_shape))


def _window_args(i, layer, src, dst, square: bool) -> str:
    """The arguments of a legacy convolution / depthwise call (square or _nonsquare order:
    x before y)."""
    (ih, iw, ic), (oh, ow, oc) = layer.in_shape, layer.out_shape
    k, s, p = layer.kernel, layer.stride, layer.pad
    shifts = f"l{i}_b, {layer.bias_shift}, {layer.out_shift}, {dst}"
    if square:
        return (f"{src}, {ih}, {ic}, l{i}_w, {oc}, {k[0]}, {p[0]}, {s[0]}, {shifts}, {oh}, "
                f"{_SCRATCH}, NULL")
    return (f"{src}, {iw}, {ih}, {ic}, l{i}_w, {oc}, {k[1]}, {k[0]}, {p[1]}, {p[0]}, {s[1]}, "
            f"{s[0]}, {shifts}, {ow}, {oh}, {_SCRATCH}, NULL")


def _legacy_conv(i, layer, src, dst) -> str:
    fn = conv_function(layer)
    return _CHECKED.format(fn=fn, args=_window_args(i, layer, src, dst,
                                                    not fn.endswith("nonsquare")))


def depthwise_function(layer) -> str:
    """The legacy depthwise convolution for `layer`'s geometry."""
    return "arm_depthwise_separable_conv_HWC_q7" + ("" if _square(layer) else "_nonsquare")


def _legacy_depthwise(i, layer, src, dst) -> str:
    return _CHECKED.format(fn=depthwise_function(layer),
                           args=_window_args(i, layer, src, dst, _square(layer)))


def _legacy_fc(i, layer, src, dst) -> str:
    return _CHECKED.format(fn="arm_fully_connected_q7_opt", args=(
        f"{src}, l{i}_w, {layer.in_shape[0]}, {layer.out_shape[0]}, {layer.bias_shift}, "
        f"{layer.out_shift}, l{i}_b, {dst}, {_SCRATCH}"))


def _legacy_pool(fn: str, scratch: str):
    def call(i, layer, src, dst) -> str:
        return (f"{fn}({src}, {layer.in_shape[0]}, {layer.in_shape[2]}, {layer.kernel[0]}, 0, "
                f"{layer.stride[0]}, {layer.out_shape[0]}, {scratch}, {dst});")
    return call


def _legacy_table(kind: str):
    def call(i, layer, src, dst) -> str:
        return (f"arm_nn_activations_direct_q7({dst}, {_size(layer)}, {7 - layer.in_frac}, "
                f"{kind});")
    return call


LEGACY = {
    "conv": _legacy_conv, "depthwise": _legacy_depthwise, "fc": _legacy_fc,
    "maxpool": _legacy_pool("arm_maxpool_q7_HWC", "NULL"),
    "avgpool": _legacy_pool("arm_avepool_q7_HWC", "scratch"),
    "relu": lambda i, layer, src, dst: f"arm_relu_q7({dst}, {_size(layer)});",
    "softmax": lambda i, layer, src, dst: f"arm_softmax_q7({src}, {_size(layer)}, {dst});",
    "sigmoid": _legacy_table("ARM_SIGMOID"), "tanh": _legacy_table("ARM_TANH"),
    "reshape": lambda i, layer, src, dst: "/* reshape: the same bytes */",
}


def _portable_linear(i, layer, src, dst) -> str:
    return (f"qconvert_q7_{layer.kind}({src}, &l{i}_g, l{i}_w, l{i}_b, {layer.bias_shift}, "
            f"{layer.out_shift}, {dst});")


PORTABLE = {
    "conv": _portable_linear, "depthwise": _portable_linear,
    "fc": lambda i, layer, src, dst: (
        f"qconvert_q7_fc_1x4({src}, {layer.in_shape[0]}, l{i}_w, {layer.out_shape[0]}, "
        f"l{i}_b, {layer.bias_shift}, {layer.out_shift}, {dst});"),
    "maxpool": lambda i, layer, src, dst: f"qconvert_q7_maxpool({src}, &l{i}_g, {dst});",
    "avgpool": lambda i, layer, src, dst: f"qconvert_q7_avgpool({src}, &l{i}_g, {dst});",
    "relu": lambda i, layer, src, dst: f"qconvert_q7_relu({dst}, {_size(layer)});",
    "softmax": lambda i, layer, src, dst: f"qconvert_q7_softmax({src}, {_size(layer)}, {dst});",
    "sigmoid": lambda i, layer, src, dst: (
        f"qconvert_q7_table({dst}, {_size(layer)}, {layer.in_frac}, q7_sigmoid_table);"),
    "tanh": lambda i, layer, src, dst: (
        f"qconvert_q7_table({dst}, {_size(layer)}, {layer.in_frac}, q7_tanh_table);"),
    "reshape": lambda i, layer, src, dst: "/* reshape: the same bytes */",
}

CALLS = {"cmsis-nn-legacy": LEGACY, "portable": PORTABLE}


def relu_call(kernels: str, layer, data: str) -> str:
    """The in-place ReLU a layer with a fused ReLU is followed by (arm_relu_q7 for legacy)."""
    name = "arm_relu_q7" if kernels == "cmsis-nn-legacy" else "qconvert_q7_relu"
    return f"{name}({data}, {_size(layer)});"
