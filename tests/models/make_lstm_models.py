"""Build the small LSTM test models: a TFLite UNIDIRECTIONAL_SEQUENCE_LSTM denoiser-like model
(written with qconvert's own TFLite writer: TensorFlow is not needed) and an ONNX LSTM (built
with onnx.helper). Tests import the builders and make the models in a temporary folder;
`python tests/models/make_lstm_models.py OUT_DIR` writes them to OUT_DIR to look at.

The denoiser shape: a [1, T, F] feature sequence (F spectral bins), an LSTM of S units, a
FULLY_CONNECTED back to F bins and a LOGISTIC mask multiplied into the input, the usual
recurrent speech denoiser's mask head. The weights are seeded random, scaled so every gate
works in its non-linear range.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.tflite_writer import write_tflite

GATES = ("input", "forget", "cell", "output")


def lstm_weights(rng, features: int, units: int, *, cifg=False, peephole=False,
                 projection=0, layer_norm=False) -> dict:
    """{slot name: float32 array} of an UnidirectionalSequenceLSTM's constant inputs."""
    out_units = projection or units
    w = {}
    for g in GATES:
        if cifg and g == "input":
            continue
        w[f"input_to_{g}_weights"] = rng.normal(0, 0.6 / np.sqrt(features), (units, features))
        w[f"recurrent_to_{g}_weights"] = rng.normal(0, 0.6 / np.sqrt(out_units),
                                                    (units, out_units))
        w[f"{g}_gate_bias"] = rng.normal(0.5 if g == "forget" else 0.0, 0.2, units)
        if layer_norm:
            w[f"{g}_layer_norm_coefficients"] = rng.uniform(0.5, 1.5, units)
    if peephole:
        for g in ("input", "forget", "output"):
            if not (cifg and g == "input"):
                w[f"cell_to_{g}_weights"] = rng.normal(0, 0.3, units)
    if projection:
        w["projection_weights"] = rng.normal(0, 0.5 / np.sqrt(units), (projection, units))
        w["projection_bias"] = rng.normal(0, 0.1, projection)
    return {k: v.astype(np.float32) for k, v in w.items()}


def add_lstm(g: Graph, x: str, out: str, weights: dict, *, batch: int, steps: int, units: int,
             time_major=False, cell_clip=0.0, proj_clip=0.0, name="lstm") -> Node:
    """Append an UnidirectionalSequenceLSTM reading `x` and writing `out` to `g`, with its two
    state tensors (variables, zero at the first call)."""
    from qconvert.schemas.lstm import LSTM_SLOTS

    proj = weights.get("projection_weights")
    out_units = units if proj is None else proj.shape[0]
    inputs = [x]
    for slot in LSTM_SLOTS[1:]:
        if slot.name in weights:
            inputs.append(g.add_constant(f"{name}/{slot.name}", weights[slot.name]))
        elif slot.name in ("output_state", "cell_state"):
            size = out_units if slot.name == "output_state" else units
            t = g.add_tensor(Tensor(f"{name}/{slot.name}", (batch, size), "float32",
                                    extra={"is_variable": True}))
            inputs.append(t.name)
        else:
            inputs.append(None)
    shape = (steps, batch, out_units) if time_major else (batch, steps, out_units)
    g.add_tensor(Tensor(out, shape, "float32"))
    node = Node("UnidirectionalSequenceLSTM", inputs, [out],
                {"activation": "TANH", "cell_clip": float(cell_clip),
                 "proj_clip": float(proj_clip), "time_major": bool(time_major),
                 "asymmetric_quantize_inputs": False}, out)
    g.nodes.append(node)
    return node


def lstm_tflite(seed=0, *, batch=1, steps=6, features=5, units=7, time_major=False,
                cell_clip=0.0, proj_clip=0.0, **variant) -> bytes:
    """A TFLite model of one UnidirectionalSequenceLSTM (its output the graph output)."""
    rng = np.random.default_rng(seed)
    g = Graph(name="main")
    shape = (steps, batch, features) if time_major else (batch, steps, features)
    g.add_tensor(Tensor("x", shape, "float32"))
    g.inputs = ["x"]
    add_lstm(g, "x", "y", lstm_weights(rng, features, units, **variant), batch=batch,
             steps=steps, units=units, time_major=time_major, cell_clip=cell_clip,
             proj_clip=proj_clip)
    g.outputs = ["y"]
    return write_tflite(Model("tflite", [g], {"version": 3}))


def denoiser_tflite(seed=1, *, steps=8, bins=16, units=12) -> bytes:
    """The denoiser-like model: LSTM -> FULLY_CONNECTED -> LOGISTIC mask * input."""
    rng = np.random.default_rng(seed)
    g = Graph(name="main")
    g.add_tensor(Tensor("features", (1, steps, bins), "float32"))
    g.inputs = ["features"]
    add_lstm(g, "features", "lstm_out", lstm_weights(rng, bins, units), batch=1, steps=steps,
             units=units)
    w = g.add_constant("mask/weights", rng.normal(0, 0.8 / np.sqrt(units),
                                                  (bins, units)).astype(np.float32))
    b = g.add_constant("mask/bias", rng.normal(0.3, 0.2, bins).astype(np.float32))
    g.add_tensor(Tensor("mask_logits", (1, steps, bins), "float32"))
    g.nodes.append(Node("FullyConnected", ["lstm_out", w, b], ["mask_logits"],
                        {"activation": "NONE", "keep_num_dims": True,
                         "weights_format": 0, "asymmetric_quantize_inputs": False},
                        "mask_logits"))
    g.add_tensor(Tensor("mask", (1, steps, bins), "float32"))
    g.nodes.append(Node("Sigmoid", ["mask_logits"], ["mask"], {}, "mask"))
    g.add_tensor(Tensor("denoised", (1, steps, bins), "float32"))
    g.nodes.append(Node("Mul", ["features", "mask"], ["denoised"], {"activation": "NONE"},
                        "denoised"))
    g.outputs = ["denoised"]
    return write_tflite(Model("tflite", [g], {"version": 3}))


def lstm_onnx(seed=0, *, batch=1, steps=6, features=5, hidden=7, direction="forward",
              layout=0, bias=True, initial=False, peephole=False, outputs=("Y",),
              wrap=None, opset=14) -> bytes:
    """An ONNX model of one LSTM (outputs any of Y, Y_h, Y_c) reading the time-major input x
    [T, B, I], or, with `wrap`, a batch-first model around it (input x [B, T, I], output y
    [B, T, H], batch 1): "transpose" as PyTorch exports `batch_first=True` (Transpose, LSTM,
    Squeeze of the direction axis, Transpose); "squeeze" as an unstacking export does
    (Squeeze of the batch axis 0 to [T, I], Unsqueeze to [T, 1, I], LSTM, Squeeze of axes
    (1, 2) to [T, H], Unsqueeze of axis 0): a fixed-batch model whose ops name the batch axis."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array(
        rng.normal(0, 0.6 / np.sqrt(features), (dirs, 4 * hidden, features)).astype(np.float32),
        "W"), numpy_helper.from_array(
        rng.normal(0, 0.6 / np.sqrt(hidden), (dirs, 4 * hidden, hidden)).astype(np.float32), "R")]
    ins = ["x", "W", "R"]
    if bias or initial or peephole:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.3, (dirs, 8 * hidden))
                                             .astype(np.float32), "B") if bias else None)
        ins.append("B" if bias else "")
    inits = [i for i in inits if i is not None]
    if initial or peephole:
        ins.append("")  # sequence_lens
        for n in ("initial_h", "initial_c"):
            if initial:
                inits.append(numpy_helper.from_array(
                    rng.normal(0, 0.5, (dirs, batch, hidden)).astype(np.float32), n))
            ins.append(n if initial else "")
    if peephole:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.3, (dirs, 3 * hidden))
                                             .astype(np.float32), "P"))
        ins.append("P")
    names = {"Y": "Y", "Y_h": "Y_h", "Y_c": "Y_c"}
    node_outs = [names[o] if o in outputs else "" for o in ("Y", "Y_h", "Y_c")]
    while node_outs and not node_outs[-1]:
        node_outs.pop()
    nodes = [helper.make_node("LSTM", ins, node_outs, hidden_size=hidden, direction=direction,
                              layout=layout)]
    xshape = [batch, steps, features] if layout else [steps, batch, features]
    yshape = [batch, steps, dirs, hidden] if layout else [steps, dirs, batch, hidden]
    graph_outs = []
    for o in outputs:
        shape = yshape if o == "Y" else ([batch, dirs, hidden] if layout else [dirs, batch, hidden])
        graph_outs.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, shape))
    x_name = "x"
    if wrap is not None:
        assert batch == 1 and outputs == ("Y",) and direction == "forward"
        used = (("axes1", [1]),) if wrap == "transpose" else (("axes0", [0]), ("axes1", [1]),
                                                               ("axes12", [1, 2]))
        for n, v in used:
            inits.append(numpy_helper.from_array(np.array(v, np.int64), n))
        if wrap == "transpose":
            pre = [helper.make_node("Transpose", ["x_bf"], ["x"], perm=[1, 0, 2])]
            post = [helper.make_node("Squeeze", ["Y", "axes1"], ["y_tbh"]),
                    helper.make_node("Transpose", ["y_tbh"], ["y"], perm=[1, 0, 2])]
        else:
            pre = [helper.make_node("Squeeze", ["x_bf", "axes0"], ["x_seq"]),
                   helper.make_node("Unsqueeze", ["x_seq", "axes1"], ["x"])]
            post = [helper.make_node("Squeeze", ["Y", "axes12"], ["y_seq"]),
                    helper.make_node("Unsqueeze", ["y_seq", "axes0"], ["y"])]
        nodes = pre + nodes + post
        x_name, xshape = "x_bf", [1, steps, features]
        graph_outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                    [1, steps, hidden])]
    graph = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info(
        x_name, TensorProto.FLOAT, xshape)], graph_outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    (out / "lstm_denoiser.tflite").write_bytes(denoiser_tflite())
    (out / "lstm.tflite").write_bytes(lstm_tflite())
    (out / "lstm.onnx").write_bytes(lstm_onnx())


def lstm_int8_tflite(seed=0, *, batch=1, steps=6, features=5, units=7, time_major=False,
                     cell_clip=0.0, x_q=(0.05, 3), h_q=(1 / 128, -2), cell_power=-11,
                     wide=False, zero_points16=(0, 0), weight_gain=1.0) -> bytes:
    """An integer UnidirectionalSequenceLSTM built directly: random int8 weights (per-tensor
    scales), int32 (int64 when `wide`: 16-bit activations) biases at s_x * s_w, input / output
    quantization `x_q` / `h_q` (scale, zero point; `wide`: the scales / 256 and the zero points
    `zero_points16`), an int16 cell state of scale 2**cell_power; `weight_gain` scales the
    weights' real values (larger: gate pre-activations beyond Q3.12's [-8, 8) more often)."""
    from qconvert.ir import QuantParams
    from qconvert.schemas.lstm import LSTM_SLOTS

    rng = np.random.default_rng(seed)
    act = "int16" if wide else "int8"
    if wide:
        x_q, h_q = (x_q[0] / 256, zero_points16[0]), (h_q[0] / 256, zero_points16[1])
    g = Graph(name="main")
    shape = (steps, batch, features) if time_major else (batch, steps, features)
    g.add_tensor(Tensor("x", shape, act, quant=QuantParams([x_q[0]], [x_q[1]])))
    g.inputs = ["x"]
    inputs = ["x"]
    for slot in LSTM_SLOTS[1:]:
        name = f"lstm/{slot.name}"
        if slot.name.startswith(("input_to_", "recurrent_to_")):
            cols = features if slot.name.startswith("input_to_") else units
            scale = float(rng.uniform(0.6, 1.2) / (127 * np.sqrt(cols)) * 3 * weight_gain)
            data = rng.integers(-127, 128, (units, cols)).astype(np.int8)
            g.add_tensor(Tensor(name, data.shape, "int8", data, QuantParams([scale], [0])))
        elif slot.name.endswith("_gate_bias"):
            w = g.tensors[f"lstm/input_to_{slot.name.split('_')[0]}_weights"]
            scale = float(np.float32(x_q[0]) * w.quant.scale[0])
            real = rng.normal(0.5 if slot.name.startswith("forget") else 0.0, 0.3, units)
            dtype = "int64" if wide else "int32"
            data = np.round(real / scale).astype(dtype)
            g.add_tensor(Tensor(name, data.shape, dtype, data, QuantParams([scale], [0])))
        elif slot.name == "output_state":
            g.add_tensor(Tensor(name, (batch, units), act, quant=QuantParams([h_q[0]], [h_q[1]]),
                                extra={"is_variable": True}))
        elif slot.name == "cell_state":
            g.add_tensor(Tensor(name, (batch, units), "int16",
                                quant=QuantParams([2.0 ** cell_power], [0]),
                                extra={"is_variable": True}))
        else:
            inputs.append(None)
            continue
        inputs.append(name)
    out_shape = (steps, batch, units) if time_major else (batch, steps, units)
    g.add_tensor(Tensor("y", out_shape, act, quant=QuantParams([h_q[0]], [h_q[1]])))
    g.nodes.append(Node("UnidirectionalSequenceLSTM", inputs, ["y"],
                        {"activation": "TANH", "cell_clip": float(cell_clip), "proj_clip": 0.0,
                         "time_major": bool(time_major), "asymmetric_quantize_inputs": False},
                        "y"))
    g.outputs = ["y"]
    return write_tflite(Model("tflite", [g], {"version": 3}))
