"""Give an int8 TFLite model uint8 inputs and outputs the way the TFLite converter does with
`inference_input_type = inference_output_type = tf.uint8` (EfficientNet-Lite, Model Maker
classifiers): a uint8 input (same scale, zero point + 128) -> QUANTIZE -> the int8 input, and the
int8 output -> QUANTIZE -> a uint8 output. Used by the tests and the corpus generator (TensorFlow
is not needed: the converter writes exactly these two QUANTIZE ops)."""

from __future__ import annotations

from qconvert.ir import Model, Node, QuantParams, Tensor


def with_uint8_edges(model: Model) -> Model:
    """`model` (int8 inputs and outputs, per-tensor) with uint8 edges, in place."""
    g = model.graph
    for i, name in enumerate(list(g.inputs)):
        t = g.tensors[name]
        u8 = g.fresh_name(f"{name}_uint8")
        g.add_tensor(Tensor(u8, t.shape, "uint8", quant=QuantParams(
            t.quant.scale.copy(), t.quant.zero_point + 128)))
        g.nodes.insert(0, Node("Quantize", [u8], [name], {}, name))
        g.inputs[i] = u8
    for i, name in enumerate(list(g.outputs)):
        t = g.tensors[name]
        u8 = g.fresh_name(f"{name}_uint8")
        g.add_tensor(Tensor(u8, t.shape, "uint8", quant=QuantParams(
            t.quant.scale.copy(), t.quant.zero_point + 128)))
        g.nodes.append(Node("Quantize", [name], [u8], {}, u8))
        g.outputs[i] = u8
    for sd in model.meta.get("signature_defs", []):
        sd["inputs"] = [(k, g.inputs[j]) for j, (k, _) in enumerate(sd["inputs"])]
        sd["outputs"] = [(k, g.outputs[j]) for j, (k, _) in enumerate(sd["outputs"])]
    for t in g.tensors.values():
        t.extra.pop("signature", None)
    g.invalidate_uses()
    model.verify()
    return model
