"""ONNX LSTM -> TFLite UNIDIRECTIONAL_SEQUENCE_LSTM (a rule of `layout-nhwc`, through
`ops.MAPPING_RULES`).

The forward direction of an ONNX LSTM (layout 0: X [T, B, I]) is TFLite's op with
`time_major` true: W [1, 4H, I] and R [1, 4H, H] split into the four gate matrices (ONNX's
order i, o, f, c to TFLite's input, forget, cell, output), the gate bias Wb + Rb, the peepholes
P (i, o, f) as cell_to_input / cell_to_output / cell_to_forget; the hidden and cell state become
the op's two variable tensors (zero at the first call). Its output [T, B, H] is Y [T, 1, B, H]
by a RESHAPE; Y_h, the last step, a SLICE of it.

Refused in one line each (`LSTM_CHECKS`, before anything is converted), naming the node and the
cause: reverse and bidirectional directions (TFLite Micro has no reverse op to run them with),
Y_c read (the TFLite op does not output its cell state), non-zero or non-constant initial
states (TFLite's state starts at zero), sequence_lens other than the full length, `clip`
(ONNX clips the gate pre-activations, TFLite the cell state), activations other than Sigmoid /
Tanh / Tanh, `input_forget`, layout 1, and weights computed at run time.
"""

from __future__ import annotations

import numpy as np

from qconvert.ir import Tensor
from qconvert.executor.float_kernels_lstm import onnx_gates
from qconvert.schemas.lstm import GATES, LSTM_SLOTS

from .layout_state import Layout, Unmappable, identity

UNMAPPED = "ops with no TFLite mapping"
NON_CONSTANT = "non-constant weights or parameters"
_DEFAULT_ACTIVATIONS = ["Sigmoid", "Tanh", "Tanh"]


def _input(node, i):
    return node.inputs[i] if i < len(node.inputs) else None


def _check_lstm(graph, node):
    """(category, detail) of why `node` cannot be lowered, or None."""
    label = f"LSTM {node.name!r}"
    for i, what in ((1, "W"), (2, "R"), (3, "B"), (4, "sequence_lens"), (5, "initial_h"),
                    (6, "initial_c"), (7, "P")):
        name = _input(node, i)
        if name is not None and graph.constant(name) is None:
            return NON_CONSTANT, f"{label} ({what} {name!r} is not a constant)"
    direction = node.attrs.get("direction", "forward") or "forward"
    if direction != "forward":
        return UNMAPPED, f"{label} (direction {direction}; only forward)"
    if int(node.attrs.get("layout", 0) or 0):
        return UNMAPPED, f"{label} (layout 1)"
    if len(node.outputs) > 2 and node.outputs[2] is not None:
        return UNMAPPED, f"{label} (its cell state output Y_c is read)"
    if node.attrs.get("clip") is not None:
        return UNMAPPED, f"{label} (clip: TFLite clips the cell state, not the gates)"
    if int(node.attrs.get("input_forget", 0) or 0):
        return UNMAPPED, f"{label} (input_forget)"
    acts = node.attrs.get("activations")
    if acts and list(acts) != _DEFAULT_ACTIVATIONS:
        return UNMAPPED, f"{label} (activations {', '.join(acts)})"
    for i, what in ((5, "initial_h"), (6, "initial_c")):
        data = graph.constant(_input(node, i))
        if data is not None and np.any(data != 0):
            return UNMAPPED, f"{label} (non-zero {what}: TFLite's state starts at zero)"
    lens = graph.constant(_input(node, 4))
    x = graph.tensors[node.inputs[0]]
    if lens is not None and x.static_shape and np.any(np.asarray(lens) != x.shape[0]):
        return UNMAPPED, f"{label} (sequence_lens shorter than the sequence)"
    return None


def _lstm(cv, node) -> None:
    """Lower a forward ONNX LSTM (checked by `_check_lstm`) to UnidirectionalSequenceLSTM."""
    problem = _check_lstm(cv.src, node)
    if problem:
        raise Unmappable(problem[1], problem[0])
    x = cv.value(node.inputs[0])
    if x.layout.flat is not None or x.layout.perm != identity(3):
        x = cv.relayout(x, identity(3))
    steps, batch, _ = x.shape
    w = cv.require_constant(node, 1, "W")[0]
    r = cv.require_constant(node, 2, "R")[0]
    hidden = int(r.shape[-1])
    b = cv.constant(_input(node, 3))
    p = cv.constant(_input(node, 7))
    base = node.name or node.outputs[0] or "lstm"
    dtype = x.dtype
    consts = {}
    for g, wg, rg in zip(GATES, onnx_gates(w, hidden), onnx_gates(r, hidden)):
        consts[f"input_to_{g}_weights"] = wg
        consts[f"recurrent_to_{g}_weights"] = rg
    bias = (np.zeros((4, hidden), dtype) if b is None else
            np.stack(onnx_gates(b[0][:4 * hidden], hidden)) +
            np.stack(onnx_gates(b[0][4 * hidden:], hidden)))
    for g, bg in zip(GATES, bias):
        consts[f"{g}_gate_bias"] = bg
    if p is not None:
        p = p[0]
        consts.update(cell_to_input_weights=p[:hidden], cell_to_output_weights=p[hidden:2 * hidden],
                      cell_to_forget_weights=p[2 * hidden:])
    inputs = [x.name]
    for slot in LSTM_SLOTS[1:]:
        if slot.name in consts:
            data = np.ascontiguousarray(consts[slot.name], dtype=np.dtype(dtype))
            inputs.append(cv.add_const(f"{base}/{slot.name}", data))
        elif slot.name in ("output_state", "cell_state"):
            name = cv.fresh(f"{base}/{slot.name}")
            cv.dst.add_tensor(Tensor(name, (batch, hidden), dtype, extra={"is_variable": True}))
            inputs.append(name)
        else:
            inputs.append(None)
    seq = cv.new_value(f"{base}_sequence", Layout(identity(3)), (steps, batch, hidden), dtype)
    cv.emit("UnidirectionalSequenceLSTM", inputs, [seq.name],
            {"activation": "TANH", "cell_clip": 0.0, "proj_clip": 0.0, "time_major": True,
             "asymmetric_quantize_inputs": False}, base)
    y, y_h = node.outputs[0] if node.outputs else None, _input_out(node, 1)
    if y is not None:
        out = cv.define(y, Layout(identity(4)))
        cv.emit("Reshape", [seq.name, cv.int32_const(f"{out.name}_shape",
                                                     [steps, 1, batch, hidden])],
                [out.name], {}, out.name)
    if y_h is not None:
        out = cv.define(y_h, Layout(identity(3)))
        cv.emit("SliceBySize", [seq.name, cv.int32_const(f"{out.name}_begin", [steps - 1, 0, 0]),
                                cv.int32_const(f"{out.name}_size", [1, batch, hidden])],
                [out.name], {}, out.name)


def _input_out(node, i):
    return node.outputs[i] if i < len(node.outputs) else None


LSTM_RULES = {"LSTM": _lstm}
LSTM_CHECKS = {"LSTM": _check_lstm}
