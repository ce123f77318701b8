"""Write a quantization plan into an ONNX graph as QuantizeLinear / DequantizeLinear pairs (QDQ).

The QDQ form onnxruntime and most ONNX toolchains read as an int8 model:
- each quantized activation `t` gets `QuantizeLinear -> DequantizeLinear` right after its
  producer (or at the start, for a graph input), and its readers read the dequantized value; a
  graph output keeps its name on the DequantizeLinear output;
- layer weights are stored int8 with a DequantizeLinear per output channel (`axis` = the
  channel axis of the weight layout: 0 for OIHW conv and transB Gemm, 1 for [K, N] Gemm and
  MatMul), biases int32 at s_in * s_w; Gemm's alpha and beta are folded in;
- other float constants (Add / Mul operands) are stored int8 per tensor with a DequantizeLinear,
  one for all the readers of a constant (the plan gives it one scale and zero point), placed
  before the first;
- a tensor read only by a clamping activation (Relu, Clip) planned with the same (scale, zero
  point) as the activation's output gets no pair of its own: Conv -> Relu -> Q -> DQ. Quantizing
  is monotone, so this is the layer with a fused activation of TFLite (clamp(Q(x)) == Q(clamp(x)))
  and a second rounding to the same grid is saved; onnxruntime drops the Relu / Clip when the
  QuantizeLinear's saturation makes it redundant and runs the group as one int8 kernel.
Scales and zero points of activations are scalars (onnxruntime's int8 kernels require it).
Nodes are named after their tensor (`t_QuantizeLinear`, `w_DequantizeLinear`); a weight two
layers share gives two `w_DequantizeLinear` here, which the ONNX writer makes unique
(`formats.node_names`, keeping the source model's own node names).
Per-axis DequantizeLinear needs opset 13: `quantize` raises an older model's opset first
(`opset_upgrade`); `apply_qdq` refuses a graph still below it.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Graph, Node, Tensor

from .plan import CLAMPS, QuantPlan, layer_slots
from .tflite_int8 import quantize_constant

MIN_QDQ_OPSET = 13




def _dq(graph: Graph, q_name: str, scale, zp, axis, base: str) -> tuple:
    """A DequantizeLinear node reading `q_name`; returns (node, output name)."""
    s = graph.add_constant(f"{base}_scale", np.asarray(scale, np.float32), share=True)
    z = graph.add_constant(f"{base}_zero_point", np.asarray(zp), share=True)
    out = graph.fresh_name(f"{base}_dequantized")
    shape = graph.tensors[q_name].shape
    graph.add_tensor(Tensor(out, shape, "float32"))
    attrs = {"axis": int(axis)} if axis is not None else {}
    return Node("Dequantize", [q_name, s, z], [out], attrs, f"{base}_DequantizeLinear"), out


def _fused_into_clamp(graph: Graph, qplan: QuantPlan) -> set:
    """Activations whose sole reader (`Graph.sole_reader`) is a clamp (Relu / Clip) with the
    same parameters, reading it as its data input only; graph inputs are never fused."""
    fused = set()
    for name, params in qplan.activations.items():
        node = graph.sole_reader(name)
        if node is None or name in graph.inputs:
            continue
        if (node.opaque or node.op not in CLAMPS or node.inputs[0] != name
                or name in node.inputs[1:] or not node.outputs):
            continue
        if qplan.activations.get(node.outputs[0]) == params:
            fused.add(name)
    return fused


def apply_qdq(graph: Graph, qplan: QuantPlan, opset: int) -> dict:
    """Rewrite the float ONNX `graph` in place into QDQ form.

    Returns {activation: name of the tensor holding its dequantized int8 value}; activations
    fused into the clamp that reads them (module docstring) have no such tensor and are left out.
    """
    if opset < MIN_QDQ_OPSET:
        raise QConvertError(f"QDQ output needs ONNX opset {MIN_QDQ_OPSET} or later for per-channel "
                            f"weights; this model uses opset {opset}")
    fused = _fused_into_clamp(graph, qplan)
    after: dict = {}   # tensor -> nodes to insert right after its producer
    renamed: dict = {}  # activation -> name its readers read instead
    original: dict = {}  # a graph output's new float name -> the output name
    outputs = set(graph.outputs)
    for name, (scale, zp) in qplan.activations.items():
        if name in fused:
            continue
        t = graph.tensors[name]
        source = name
        # an input that is also an output stays the same float tensor (exact); its readers
        # read it through a Q/DQ pair like any activation's
        as_output = name in outputs and name not in graph.inputs
        if name in graph.inputs and name in outputs and not graph.readers(name):
            continue  # a pass-through input nobody reads: no pair at all
        if as_output:  # keep the output name on the dequantized value
            source = graph.fresh_name(f"{name}_float")
            original[source] = name
            graph.add_tensor(Tensor(source, t.shape, t.dtype))
            producer = graph.producer(name)
            if producer is not None:
                graph.set_outputs(producer, [source if o == name else o
                                             for o in producer.outputs])
        wide = name in qplan.int16  # only in a simulation of a 16x8 plan (`simulate`)
        q = graph.fresh_name(f"{name}_quantized")
        graph.add_tensor(Tensor(q, t.shape, "int16" if wide else "int8"))
        s = graph.add_constant(f"{name}_scale", np.float32(scale), share=True)
        z = graph.add_constant(f"{name}_zero_point", np.int16(zp) if wide else np.int8(zp),
                               share=True)
        nodes = [Node("Quantize", [source, s, z], [q], {}, f"{name}_QuantizeLinear")]
        if as_output:
            nodes.append(Node("Dequantize", [q, s, z], [name], {}, f"{name}_DequantizeLinear"))
        else:
            dq, out = _dq_shared(graph, q, s, z, name)
            nodes.append(dq)
            renamed[name] = out
        after.setdefault(source, []).extend(nodes)
    front = [n for i in graph.inputs for n in after.pop(i, [])]
    new_nodes = list(front)
    constants = qplan.constants
    dequantized: dict = {}  # planned constant -> its DequantizeLinear output, read by every reader
    for node in graph.nodes:
        out0 = original.get(node.outputs[0], node.outputs[0]) if node.outputs else None
        layer = qplan.layers.get(out0)
        s_in = (qplan.activations[node.inputs[layer_slots(node)[0]]][0] if layer is not None
                else None)
        node.inputs = [renamed.get(i, i) for i in node.inputs]
        if layer is not None:
            new_nodes += _layer_weights(graph, node, layer, s_in)
        for name in [i for i in dict.fromkeys(node.inputs) if i in constants]:
            if name not in dequantized:  # one (scale, zero point) per constant: one int8 copy
                scale, zp = constants[name]
                data = graph.constant(name)
                width = "int16" if name in qplan.int16 else "int8"
                q = graph.add_constant(f"{name}_quantized",
                                       quantize_constant(data, scale, zp, width), share=True)
                dq, dequantized[name] = _dq(graph, q, scale, np.dtype(width).type(zp), None, name)
                new_nodes.append(dq)
            node.inputs = [dequantized[name] if i == name else i for i in node.inputs]
        new_nodes.append(node)
        for out in node.outputs:
            new_nodes += after.pop(out, [])
    graph.nodes = new_nodes
    used = {i for n in graph.nodes for i in n.present_inputs()} | set(graph.outputs)
    for name in [n for n, t in graph.tensors.items() if t.data is not None and n not in used]:
        del graph.tensors[name]
    return {n: renamed.get(n, n) for n in qplan.activations if n not in fused}


def _dq_shared(graph, q, s, z, name):
    out = graph.fresh_name(f"{name}_dequantized")
    graph.add_tensor(Tensor(out, graph.tensors[q].shape, "float32"))
    return Node("Dequantize", [q, s, z], [out], {}, f"{name}_DequantizeLinear"), out


def _layer_weights(graph: Graph, node: Node, layer, s_in) -> list:
    axis = layer.channel_axis if layer.per_channel else None
    channels = layer.weight_scales.size
    _x, w_slot, b_slot = layer_slots(node)
    w_name = node.inputs[w_slot]
    q = graph.add_constant(f"{w_name}_quantized", layer.weights, share=True)
    zp = np.zeros(channels, np.int8) if axis is not None else np.int8(0)
    scale = layer.weight_scales if axis is not None else layer.weight_scales.reshape(())
    dq_w, w_out = _dq(graph, q, scale, zp, axis, w_name)
    node.inputs[w_slot] = w_out
    nodes = [dq_w]
    if node.op == "Gemm":
        node.attrs["alpha"] = 1.0
        node.attrs["beta"] = 1.0
    if layer.bias is not None:
        if layer.input_scale is not None:  # the copy a 16x8 border made, in a simulation
            s_in = layer.input_scale
        b_scale = np.float32(s_in) * layer.weight_scales.astype(np.float32)
        b_scale = np.broadcast_to(b_scale, layer.bias.shape).astype(np.float32)
        if len(node.inputs) <= b_slot or node.inputs[b_slot] is None:  # bias correction made it
            node.inputs[b_slot:] = [graph.fresh_name(f"{node.name or node.outputs[0]}_bias")]
        base = node.inputs[b_slot]
        b_type = np.int64 if layer.bias.dtype == np.int64 else np.int32  # int64: 16x8 (simulated)
        bq = graph.add_constant(f"{base}_quantized", layer.bias.astype(b_type), share=True)
        dq_b, b_out = _dq(graph, bq, b_scale, np.zeros(layer.bias.size, b_type), 0, base)
        node.inputs[b_slot] = b_out
        nodes.append(dq_b)
    return nodes

