"""Write a quantization plan into a TFLite graph: the int8 model of the TFLite int8 spec.

Every float activation becomes an int8 tensor with its (scale, zero point); layer weights become
int8 with per-channel (axis 0 of OHWI conv and [out, in] fully connected, axis 3 of depthwise
1HWC) or per-tensor scales, biases int32 at s_in * s_w (a conv without bias gets a zero one:
TFLite's CONV_2D kernels require it); other float constants (ADD / MUL operands) become int8
per tensor. With `io_type="float32"` the model keeps float inputs and outputs: a QUANTIZE after
each input and a DEQUANTIZE before each output (the graph's tensor names stay the float ones).
Op versions are set to those the TFLite converter writes for int8 kernels.
"""

from __future__ import annotations

import numpy as np

from qconvert import schemas
from qconvert.errors import QConvertError
from qconvert.ir import Graph, Node, QuantParams, Tensor
from qconvert.schemas.ops import HALF_AWAY

from .lstm_plan import write_lstm
from .plan import QuantPlan, layer_slots

# op -> the builtin version of its int8 form (the schema's `TfliteSpec.int8_version`)
INT8_VERSIONS = {s.name: s.tflite.int8_version for s in schemas.all_schemas()
                 if s.tflite is not None and s.tflite.int8_version is not None}
FC_PER_CHANNEL_VERSION = 12
REQUANTIZED_INPUTS = frozenset({"Concat", "Pack", "Maximum", "Minimum"})


def _quant(scale, zero_point, axis=None) -> QuantParams:
    scale = np.atleast_1d(np.asarray(scale, np.float32))
    zero_point = np.zeros(scale.size, np.int64) if zero_point is None else np.broadcast_to(
        np.asarray(zero_point, np.int64), scale.shape)
    return QuantParams(scale, zero_point, axis if scale.size > 1 else None)


def frozen(a: np.ndarray) -> np.ndarray:
    """A read-only C-contiguous array of the same shape (0-d stays 0-d)."""
    a = np.asarray(a)
    a = a.copy(order="C") if not a.flags.c_contiguous else a.view()
    a.flags.writeable = False
    return a


def quantize_constant(data: np.ndarray, scale, zp, dtype: str = "int8") -> np.ndarray:
    from qconvert.int8.rounding import round_half_away

    q = round_half_away(data.astype(np.float64) / float(scale)) + zp
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def apply_tflite_int8(graph: Graph, qplan: QuantPlan, io_type: str = "int8") -> None:
    """Rewrite `graph` (float, TFLite layout) in place into its int8 form."""
    layers = [(node, qplan.layers[node.outputs[0]]) for node in graph.nodes
              if node.outputs and node.outputs[0] in qplan.layers]
    # the constants several nodes read (asked before any layer takes its own copy)
    shared = {name for node, _ in layers for name in node.present_inputs()
              if graph.reader_count(name) > 1}
    for name, (scale, zp) in qplan.activations.items():
        t = graph.tensors[name]
        t.dtype, t.quant = _width(qplan, name), _quant(scale, zp)
    for node, layer in layers:
        _write_layer(graph, node, layer, qplan, shared)
    for node in list(graph.nodes):
        if node.outputs and node.outputs[0] in qplan.lstms:
            write_lstm(graph, node, qplan.lstms[node.outputs[0]], _width(qplan, node.outputs[0]))
    _requantize_inputs(graph, qplan)
    for node in graph.nodes:
        if node.op in INT8_VERSIONS:
            node.origin["version"] = INT8_VERSIONS[node.op]
        if node.op in ("Add", "Sub") and node.outputs and node.outputs[0] in qplan.int16:
            node.attrs["pot_scale_int16"] = False  # general scales (the schema default is POT)
    for name, (scale, zp) in qplan.constants.items():
        t = graph.tensors[name]
        if t.dtype.startswith("float"):
            t.data = frozen(quantize_constant(t.data, scale, zp, _width(qplan, name)))
            t.dtype, t.quant = _width(qplan, name), _quant(scale, zp)
    if io_type == "float32":
        _float_edges(graph)


def _requantize_inputs(graph: Graph, qplan: QuantPlan) -> None:
    """A QUANTIZE (int8 -> int8) before each CONCATENATION / PACK / MAXIMUM / MINIMUM input planned
    with parameters other than the node's output (`plan.concat_inputs_apart`,
    `plan.SHARED_OPERANDS`): TFLite Micro's int8 concatenation copies the bytes and its
    MAXIMUM / MINIMUM compare them, so every input must already be in the output's scale."""
    nodes = []
    for node in graph.nodes:
        out = node.outputs[0] if node.outputs else None
        if node.op in REQUANTIZED_INPUTS and out in qplan.activations:
            want = qplan.activations[out]
            inputs = list(node.inputs)
            for slot, name in enumerate(inputs):
                if name not in qplan.activations or qplan.activations[name] == want:
                    continue
                t = graph.tensors[name]
                copy = graph.fresh_name(f"{name}_requantized")
                graph.add_tensor(Tensor(copy, t.shape, t.dtype, quant=_quant(*want)))
                nodes.append(Node("Quantize", [name], [copy], {"rounding": HALF_AWAY},
                                  f"{copy}/requantize",
                                  origin={"version": INT8_VERSIONS["Quantize"]}))
                inputs[slot] = copy
            graph.set_inputs(node, inputs)
        nodes.append(node)
    graph.nodes = nodes


def _width(qplan: QuantPlan, name: str) -> str:
    return "int16" if name in qplan.int16 else "int8"


def _write_layer(graph: Graph, node: Node, layer, qplan: QuantPlan, shared: set) -> None:
    axis = layer.channel_axis if layer.per_channel else None
    x_slot, w_slot, b_slot = layer_slots(node)
    w_name = node.inputs[w_slot]
    if w_name in shared:  # shared weights: this layer's int8 copy
        w_name = graph.add_constant(f"{w_name}_int8", layer.weights, "int8")
        _set_input(graph, node, w_slot, w_name)
    w = graph.tensors[w_name]
    w.data, w.dtype = frozen(layer.weights), "int8"
    w.quant = _quant(layer.weight_scales, 0, axis)
    s_in = qplan.activations[node.inputs[x_slot]][0]
    bias = layer.bias
    if bias is None and node.op in ("Conv2D", "DepthwiseConv2D"):
        wide = node.outputs[0] in qplan.int16  # a 16x8 layer: int64, as its other biases
        bias = np.zeros(layer.weights.shape[layer.channel_axis], np.int64 if wide else np.int32)
    if bias is None:
        return
    b_name = node.inputs[b_slot] if b_slot < len(node.inputs) else None
    if b_name is None or b_name in shared:
        b_name = graph.add_constant(f"{node.name or node.outputs[0]}_bias",
                                    bias.astype(np.int32), "int32")
        _set_input(graph, node, b_slot, b_name)
    b = graph.tensors[b_name]
    b_type = "int64" if bias.dtype == np.int64 else "int32"  # int64: a 16x8 layer's bias
    b.data, b.dtype, b.shape = frozen(bias.astype(b_type)), b_type, tuple(bias.shape)
    b_scale = np.float32(s_in) * layer.weight_scales.astype(np.float32)
    b.quant = _quant(b_scale, 0, 0)
    if node.op == "FullyConnected" and layer.per_channel:
        node.origin["version"] = FC_PER_CHANNEL_VERSION


def _set_input(graph: Graph, node: Node, slot: int, name: str) -> None:
    """Make `node` read `name` as input `slot` (absent inputs before it: None)."""
    inputs = list(node.inputs) + [None] * (slot + 1 - len(node.inputs))
    inputs[slot] = name
    graph.set_inputs(node, inputs)


def _float_edges(graph: Graph) -> None:
    """QUANTIZE after each float input, DEQUANTIZE before each output; names stay float. An
    input that is also an output (a pass-through) is refused: it would need both at once."""
    through = [name for name in graph.inputs if name in graph.outputs]
    if through:
        raise QConvertError(f"input {through[0]!r} is also an output of the model: --io-type "
                            "float32 cannot put QUANTIZE after it and DEQUANTIZE before it; "
                            "use --io-type int8, or give the output its own node")
    front, back = [], []
    for name in list(graph.inputs):
        t = graph.tensors[name]
        q_name = graph.fresh_name(f"{name}_int8")
        # the float input keeps the source's spelling of its name (`tflite_name`), not the copy
        extra = {k: v for k, v in t.extra.items() if k != "tflite_name"}
        graph.add_tensor(Tensor(q_name, t.shape, t.dtype, quant=t.quant, extra=extra))
        t.dtype, t.quant = "float32", None
        graph.replace_uses(name, q_name)
        graph.outputs = [q_name if o == name else o for o in graph.outputs]
        front.append(Node("Quantize", [name], [q_name], {"rounding": HALF_AWAY},
                          f"{name}/quantize",
                          origin={"version": INT8_VERSIONS["Quantize"]}))
    for i, name in enumerate(list(graph.outputs)):
        t = graph.tensors[name]
        q_name = graph.fresh_name(f"{name}_int8")
        graph.add_tensor(Tensor(q_name, t.shape, t.dtype, quant=t.quant))
        producer = graph.producer(name)
        if producer is not None:
            graph.set_outputs(producer, [q_name if o == name else o for o in producer.outputs])
        graph.replace_uses(name, q_name)
        t.dtype, t.quant = "float32", None
        back.append(Node("Dequantize", [q_name], [name], {}, f"{name}/dequantize",
                         origin={"version": INT8_VERSIONS["Dequantize"]}))
    graph.nodes = front + graph.nodes + back
