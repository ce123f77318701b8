"""The CMSIS-NN paper's power-of-two q7 scheme (`--scheme q7`): a float model plus calibration
ranges -> a chain of `Q7Layer`s (executor.q7_kernels) with q7 weights and shifts.

Every tensor gets fraction bits n (value = q * 2^-n): the most that keep its calibrated range
(`--method`, as for int8) inside q7, `floor(log2(127.5 / max|range|))`. Weights and biases get
their own from their largest magnitude. A linear layer then shifts its bias left by
`bias_shift = in + w - bias` and its accumulator right by `out_shift = in + w - out`; the
legacy kernels take unsigned shifts, so both are made >= 0 by construction: the bias and output
fraction bits are capped at in + w (a coarser format, never a refusal). Pools, ReLU and reshape
keep their input's format, softmax writes 2^-7, sigmoid / tanh read an input with 4..7 fraction
bits (the layer choosing that format, back through pools and reshapes, is clamped into that
range) and write 2^-7.

The model must be a chain (each layer reads the previous one's output) of ops the legacy API
has kernels for; anything else is refused in one line naming the layer. Fused ReLU6 becomes
ReLU (the legacy API has no ReLU6): the output format's saturation is its upper clamp.

Why an internal representation: no TFLite or ONNX file carries a power-of-two q7 scheme, so the
q7 model lives only between calibration and the executor / the C export (docs/q7.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert.errors import QConvertError
from qconvert.executor.q7_kernels import Q7Layer

MAX_SHIFT = 31
TABLE_FRAC = (4, 7)  # arm_nn_activations_direct_q7: int_width 0..3


@dataclass
class Q7Model:
    """A q7 model: the layers, the graph input / output tensor names, the input's shape (no
    batch) and fraction bits."""

    layers: list
    input_name: str
    output_name: str
    input_shape: tuple
    input_frac: int

    @property
    def output_frac(self) -> int:
        """Fraction bits of the model's output."""
        return self.layers[-1].out_frac


def frac_bits(amax: float) -> int:
    """Fraction bits of a q7 format holding magnitudes up to `amax` (7 for an all-zero range)."""
    amax = float(amax)
    if not np.isfinite(amax):
        raise ValueError(f"range {amax}")
    return 7 if amax <= 0 else int(np.floor(np.log2(127.5 / amax)))


def quantize_q7(values: np.ndarray, frac: int) -> np.ndarray:
    """round(values * 2^frac) saturated to q7."""
    scaled = np.round(np.asarray(values, np.float64) * 2.0 ** frac)
    return np.clip(scaled, -128, 127).astype(np.int8)


def least_error_frac(values: np.ndarray) -> int:
    """Fraction bits of a constant (weights, bias) with the least squared error: the format
    that holds its largest magnitude, or one or two more bits when saturating its few largest
    values costs less than the coarser step elsewhere."""
    values = np.asarray(values, np.float64)
    base = frac_bits(np.max(np.abs(values)) if values.size else 0.0)
    candidates = np.arange(base, base + 3)
    errors = [np.sum((quantize_q7(values, f) * 2.0 ** -f - values) ** 2) for f in candidates]
    return int(candidates[int(np.argmin(errors))])


def _range_frac(ranges: dict, name: str) -> int:
    lo, hi = ranges[name]
    return frac_bits(max(abs(lo), abs(hi)))


def _activation(node) -> bool:
    """True for a fused ReLU / ReLU6; refuse any other fused activation."""
    act = node.attrs.get("activation", "NONE") or "NONE"
    if act not in ("NONE", "RELU", "RELU6"):
        raise QConvertError(f"layer {node.name!r} ({node.op}) has fused {act}, which the legacy "
                            "q7 kernels cannot apply (they have ReLU only)")
    return act != "NONE"


def _spatial(node, weights_shape=None) -> dict:
    """kernel / stride / pad (top, left) of a 2-D window op; refuse dilations."""
    attrs = node.attrs
    if any(d != 1 for d in attrs.get("dilations", [1, 1]) or [1, 1]):
        raise QConvertError(f"layer {node.name!r} ({node.op}) is dilated: the legacy q7 "
                            "kernels have no dilation")
    kernel = tuple(attrs.get("kernel_shape") or weights_shape)
    pads = list(attrs.get("pads", [0, 0, 0, 0]) or [0, 0, 0, 0])
    return {"kernel": tuple(int(k) for k in kernel),
            "stride": tuple(int(s) for s in attrs.get("strides", [1, 1])),
            "pad": (int(pads[0]), int(pads[1]))}


def _shape(graph, name) -> tuple:
    return tuple(int(d) for d in graph.tensors[name].shape[1:])


def _linear(kind, node, graph, ranges, in_frac, w, b) -> Q7Layer:
    """conv / depthwise / fc: weights and bias q7, the shifts >= 0 by construction."""
    w_frac = least_error_frac(w)
    b = np.zeros(w.shape[-1] if kind == "depthwise" else w.shape[0]) if b is None else b
    acc_frac = in_frac + w_frac
    b_frac = min(least_error_frac(b), acc_frac)
    out_frac = min(_range_frac(ranges, node.outputs[0]), acc_frac)
    out_frac = max(out_frac, acc_frac - MAX_SHIFT)
    layer = Q7Layer(kind, node.name, _shape(graph, node.inputs[0]), _shape(graph, node.outputs[0]),
                    in_frac, out_frac, quantize_q7(w, w_frac), quantize_q7(b, b_frac), w_frac,
                    b_frac, relu=_activation(node))
    layer.extra["tensor"] = node.outputs[0]
    layer.extra["weights_float"] = np.asarray(w, np.float64)
    layer.extra["bias_float"] = np.asarray(b, np.float64)
    return layer


def _conv(node, graph, ranges, in_frac):
    w = graph.tensors[node.inputs[1]].data
    if int(node.attrs.get("group", 1) or 1) != 1:
        raise QConvertError(f"layer {node.name!r} is a grouped convolution: the legacy q7 API "
                            "has no kernel for it")
    b = graph.tensors[node.inputs[2]].data if len(node.inputs) > 2 and node.inputs[2] else None
    layer = _linear("conv", node, graph, ranges, in_frac, w, b)
    layer.__dict__.update(_spatial(node, w.shape[1:3]))
    return layer


def _depthwise(node, graph, ranges, in_frac):
    w = graph.tensors[node.inputs[1]].data
    if w.shape[3] != graph.tensors[node.inputs[0]].shape[-1]:
        channels = graph.tensors[node.inputs[0]].shape[-1]
        raise QConvertError(f"layer {node.name!r} has depth multiplier {w.shape[3] // channels}: "
                            "arm_depthwise_separable_conv_HWC_q7 takes 1 only")
    b = graph.tensors[node.inputs[2]].data if len(node.inputs) > 2 and node.inputs[2] else None
    layer = _linear("depthwise", node, graph, ranges, in_frac, w[0], b)
    layer.__dict__.update(_spatial(node, w.shape[1:3]))
    return layer


def _fc(node, graph, ranges, in_frac):
    w = graph.tensors[node.inputs[1]].data
    b = graph.tensors[node.inputs[2]].data if len(node.inputs) > 2 and node.inputs[2] else None
    layer = _linear("fc", node, graph, ranges, in_frac, w, b)
    layer.in_shape = (int(np.prod(layer.in_shape)),)
    layer.out_shape = (int(np.prod(layer.out_shape)),)
    return layer


def _pool(kind):
    def make(node, graph, ranges, in_frac):
        spatial = _spatial(node)
        in_shape, out_shape = _shape(graph, node.inputs[0]), _shape(graph, node.outputs[0])
        square = (in_shape[0] == in_shape[1] and spatial["kernel"][0] == spatial["kernel"][1]
                  and spatial["stride"][0] == spatial["stride"][1])
        if not square or any(node.attrs.get("pads", [0, 0, 0, 0]) or [0]):
            raise QConvertError(f"layer {node.name!r} ({node.op}) is not a square unpadded pool: "
                                f"{POOL_FUNCTIONS[kind]} takes square images and windows, no "
                                "padding")
        layer = Q7Layer(kind, node.name, in_shape, out_shape, in_frac, in_frac,
                        relu=_activation(node), **spatial)
        return layer
    return make


POOL_FUNCTIONS = {"maxpool": "arm_maxpool_q7_HWC", "avgpool": "arm_avepool_q7_HWC"}


def _mean(node, graph, ranges, in_frac):
    """A Mean over H and W of a square image: arm_avepool_q7_HWC with the image as window."""
    in_shape = _shape(graph, node.inputs[0])
    axes = graph.tensors[node.inputs[1]].data if len(node.inputs) > 1 else None
    axes = None if axes is None else sorted(int(a) % 4 for a in np.ravel(axes))
    if len(in_shape) != 3 or axes != [1, 2] or in_shape[0] != in_shape[1]:
        raise QConvertError(f"layer {node.name!r} (Mean) is not a mean over H and W of a square "
                            "image: the legacy q7 API has no kernel for it")
    return Q7Layer("avgpool", node.name, in_shape, (1, 1, in_shape[2]), in_frac, in_frac,
                   kernel=(in_shape[0], in_shape[1]), stride=(1, 1))


def _same_format(kind):
    def make(node, graph, ranges, in_frac):
        return Q7Layer(kind, node.name, _shape(graph, node.inputs[0]),
                       _shape(graph, node.outputs[0]), in_frac, in_frac)
    return make


def _softmax(node, graph, ranges, in_frac):
    return Q7Layer("softmax", node.name, _shape(graph, node.inputs[0]),
                   _shape(graph, node.outputs[0]), in_frac, 7)


def _table(kind):
    def make(node, graph, ranges, in_frac):
        if not TABLE_FRAC[0] <= in_frac <= TABLE_FRAC[1]:
            raise QConvertError(f"layer {node.name!r} ({node.op}) reads a q7 input with "
                                f"{in_frac} fraction bits; arm_nn_activations_direct_q7 takes "
                                f"{TABLE_FRAC[0]}..{TABLE_FRAC[1]}")
        return Q7Layer(kind, node.name, _shape(graph, node.inputs[0]),
                       _shape(graph, node.outputs[0]), in_frac, 7)
    return make


# IR op -> the q7 layer it lowers to (the legacy API's kernels; nothing else is reachable)
LOWERINGS = {"Conv2D": _conv, "DepthwiseConv2D": _depthwise, "FullyConnected": _fc,
             "MaxPool": _pool("maxpool"), "AveragePool": _pool("avgpool"), "Mean": _mean,
             "Relu": _same_format("relu"), "Relu6": _same_format("relu"),
             "Reshape": _same_format("reshape"), "Squeeze": _same_format("reshape"),
             "Flatten": _same_format("reshape"), "Softmax": _softmax,
             "Sigmoid": _table("sigmoid"), "Tanh": _table("tanh")}
TABLE_KINDS = ("sigmoid", "tanh")


def _check_chain(graph) -> None:
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise QConvertError(f"the q7 scheme takes one input and one output, the model has "
                            f"{len(graph.inputs)} and {len(graph.outputs)}")
    current = graph.inputs[0]
    for node in graph.nodes:
        if node.op == "Pad":
            _pad_before(graph, node)
        elif node.op not in LOWERINGS:
            raise QConvertError(f"layer {node.name!r} is {node.op}: the legacy q7 API "
                                "(CMSIS_5 NN) has no kernel for it")
        if node.inputs[0] != current or len(node.outputs) != 1:
            raise QConvertError(f"layer {node.name!r} ({node.op}) does not read the previous "
                                "layer's output: the q7 scheme takes a chain of layers")
        current = node.outputs[0]
    if current != graph.outputs[0]:
        raise QConvertError("the model's output is not its last layer's")


def _pad_before(graph, node) -> tuple:
    """(top, left) of a zero Pad of H and W that a convolution reads (the conversion spells
    TFLite SAME padding that way): folded into the convolution's padding, which the legacy
    kernels take as bounds checks. Any other Pad is refused."""
    readers = [n for n in graph.nodes if node.outputs[0] in n.inputs]
    pads = graph.tensors[node.inputs[1]].data
    value = graph.tensors[node.inputs[2]].data if len(node.inputs) > 2 and node.inputs[2] else None
    ok = (pads is not None and pads.shape == (4, 2) and not pads[0].any() and not pads[3].any()
          and (pads >= 0).all() and (value is None or not np.any(value))
          and len(readers) == 1 and readers[0].op in ("Conv2D", "DepthwiseConv2D")
          and not any(readers[0].attrs.get("pads", [0]) or [0]))
    if not ok:
        raise QConvertError(f"layer {node.name!r} is Pad: the legacy q7 API has no kernel for "
                            "it (only a zero H / W padding before a convolution folds into it)")
    return int(pads[1][0]), int(pads[2][0])


# ops whose q7 output keeps its input's format (a table activation's input format is chosen
# where such a run of them starts)
SAME_FORMAT_OPS = ("MaxPool", "AveragePool", "Mean", "Relu", "Relu6", "Reshape", "Squeeze",
                   "Flatten", "Pad")


def _table_inputs(graph) -> dict:
    """{tensor: (lo, hi) fraction bits} the tensors whose format a sigmoid / tanh input
    inherits must keep: its input, back through format-keeping layers to the linear layer (or
    graph input) that chooses the format."""
    pinned = {}
    for node in graph.nodes:
        if node.op in ("Sigmoid", "Tanh"):
            name = node.inputs[0]
            producer = graph.producer(name)
            while producer is not None and producer.op in SAME_FORMAT_OPS:
                name = producer.inputs[0]
                producer = graph.producer(name)
            pinned[name] = TABLE_FRAC
    return pinned


def plan_q7(graph, ranges: dict) -> Q7Model:
    """The q7 model of the fused float NHWC `graph` from calibration `ranges` {tensor: (lo, hi)}."""
    _check_chain(graph)
    pinned = _table_inputs(graph)
    name = graph.inputs[0]
    in_frac = _range_frac(ranges, name)
    if name in pinned:
        in_frac = int(np.clip(in_frac, *pinned[name]))
    frac, layers, pad = in_frac, [], None
    for node in graph.nodes:
        if node.op == "Pad":
            pad = (_pad_before(graph, node), _shape(graph, node.inputs[0]))
            continue
        layer = LOWERINGS[node.op](node, graph, ranges, frac)
        if pad is not None:
            layer.pad, layer.in_shape, pad = pad[0], pad[1], None
        out = node.outputs[0]
        if out in pinned and layer.weights is not None:
            layer.out_frac = int(np.clip(layer.out_frac, pinned[out][0],
                                         min(pinned[out][1], layer.in_frac + layer.w_frac)))
        layer.extra.setdefault("tensor", out)
        layer.extra["op"] = node.op
        layers.append(layer)
        frac = layer.out_frac
    return Q7Model(layers, name, graph.outputs[0], _shape(graph, name), in_frac)


def propagate_formats(model: Q7Model) -> None:
    """After a linear layer's `out_frac` changed: the formats downstream follow (format-keeping
    layers take their input's, the next linear layer's input), its bias is requantized with
    bias / output fraction bits capped at in + w (shifts >= 0)."""
    frac = model.input_frac
    for layer in model.layers:
        layer.in_frac = frac
        if layer.weights is not None:
            acc = layer.in_frac + layer.w_frac
            layer.b_frac = min(least_error_frac(layer.extra["bias_float"]), acc)
            layer.bias = quantize_q7(layer.extra["bias_float"], layer.b_frac)
            layer.out_frac = int(np.clip(layer.out_frac, acc - MAX_SHIFT, acc))
        elif layer.kind in ("softmax", *TABLE_KINDS):
            layer.out_frac = 7
        else:
            layer.out_frac = frac
        frac = layer.out_frac


def accumulator_bound(layer) -> int:
    """The largest magnitude a linear layer's 32-bit accumulator can reach: per output channel
    |bias| * 2^bias_shift + the rounding half + 128 * sum |w| over its taps."""
    w = np.abs(layer.weights.astype(np.int64))
    taps = w.reshape(-1, w.shape[-1]).sum(axis=0) if layer.kind == "depthwise" \
        else w.reshape(w.shape[0], -1).sum(axis=1)
    bias = np.abs(layer.bias.astype(np.int64)) << layer.bias_shift
    return int(np.max(bias + ((1 << layer.out_shift) >> 1) + 128 * taps))


def check_accumulators(model: Q7Model) -> None:
    """Refuse a layer whose accumulator could leave 32 bits (the kernels' int32 sums would
    overflow), naming it."""
    for layer in model.layers:
        if layer.weights is not None and accumulator_bound(layer) >= 2 ** 31:
            raise QConvertError(f"layer {layer.name!r}: its q7 accumulator could exceed 32 bits "
                                f"(bias_shift {layer.bias_shift}, {layer.weights.size} weights)")


def quantize_input(model: Q7Model, x: np.ndarray) -> np.ndarray:
    """Float input samples in the model's q7 input format."""
    return quantize_q7(x, model.input_frac)


def dequantize(values: np.ndarray, frac: int) -> np.ndarray:
    """q7 values as floats: q * 2^-frac."""
    return values.astype(np.float64) * 2.0 ** -frac
