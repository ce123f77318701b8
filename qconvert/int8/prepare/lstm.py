"""Prepare of the integer UNIDIRECTIONAL_SEQUENCE_LSTM, as TFLite Micro derives it.

TFLite Micro's integer LSTM is the standard one only (no CIFG, peephole, projection or layer
norm: those inputs must be absent) with 8-bit (or 16-bit: "16x8") activations and int8 weights;
the gate biases int32 (16x8: int64, and the fully connected layers accumulate in int64 with
TFLite's 64-bit requantization); the cell state int16 in both:

- each gate computes two FULLY_CONNECTED into int16 at the fixed scale 2**-12 (Q3.12): the input
  x (offset -z_x, per-tensor weights, the gate's int32 bias: scale s_x * s_w) and the hidden
  state h (offset -z_h, no bias), requantized by double(s_x) * double(s_w) / 2**-12 and
  double(s_h) * double(s_r) / 2**-12, added with int16 saturation;
- the gate nonlinearities are TFLite's int16 LOGISTIC / TANH tables with output scale 2**-15;
  the cell gate's TANH reads Q3.12 (shift 0), the hidden state's TANH reads the cell state whose
  scale must be a power of two 2**p (`cell_state_scale_power` p; TANH input shift 12 + p, or
  multiplier 3 and shift -(12 + p) when negative);
- the cell state is int16 symmetric (zero point 0): c = f * c (multiplier 2**-15 * s_c / s_c) +
  i * g (2**-30 / s_c), saturated, then clipped to +-`quantized_cell_clip` = trunc(clip / s_c)
  when the option's cell_clip > 0;
- the hidden state h = o * tanh(c) requantized by 2**-30 / s_h with its zero point, into the
  hidden-state (variable) tensor and the output (TFLite copies it: both share s_h, z_h).

Every multiplier is TFLite's QuantizeMultiplier of the double quotient of the float32 scales.
"""

from __future__ import annotations

import numpy as np

from ..multipliers import effective_multipliers
from ..lut16 import checked_log2
from .common import LAYER_PARAMS, fail, per_tensor, quantize_multipliers
from .int16 import LAYER_PARAMS16

GATE_INPUT_SCALE = 2.0 ** -12   # the int16 scale of every gate's FC output (Q3.12)
GATE_OUTPUT_SCALE = 2.0 ** -15  # the int16 scale of every gate's LOGISTIC / TANH output
GATES = ("input", "forget", "cell", "output")
_ABSENT = (9, 10, 11, 16, 17, 20, 21, 22, 23)  # peephole, projection, layer norm
_CIFG = (1, 5, 12)  # the input gate's weights and bias: absent in a CIFG LSTM
# the gate biases' type by activation width (16-bit: 16x8); TFLite Micro reads them as this type
# without checking, so another type would be misread: refused
_BIAS_DTYPE = {False: "int32", True: "int64"}


def _weight_scale(graph, node, index) -> np.float32:
    name = node.inputs[index]
    t = graph.tensors[name]
    if t.data is None or t.data.dtype != np.int8:
        fail(node, f"weights {name!r} must be an int8 constant")
    q = t.quant
    if q is None or q.scale.size != 1:
        fail(node, f"weights {name!r} must be quantized per tensor (TFLite Micro's LSTM has one "
                   "multiplier per gate matrix)")
    if q.zero_point.size and int(q.zero_point[0]) != 0:
        fail(node, f"weights {name!r} have zero point {int(q.zero_point[0])}; they must be "
                   "symmetric")
    return np.float32(q.scale[0])


def _multiplier(node, real) -> tuple:
    m, s = quantize_multipliers(node, np.float64(real))
    return int(m), int(s)


def lstm_params(graph, node) -> dict:
    """TFLite Micro's Prepare of an integer UnidirectionalSequenceLSTM (module docstring):
    `fc_multiplier` / `fc_shift` (int32 [8]: the input-to-gate FCs of the gates input, forget,
    cell, output, then the recurrent ones); `bias` {gate: int64 array or None};
    `input_offset`, `hidden_offset`, `hidden_zero_point`; `forget_multiplier` / `_shift`
    (f * c), `input_multiplier` / `_shift` (i * g), `hidden_multiplier` / `_shift`
    (o * tanh(c)); `cell_scale_power`, `cell_clip` (quantized; 0: none); `time_major`;
    `activation` (the cell gate's); `wide` (16-bit activations)."""
    missing = [i for i in _ABSENT if i < len(node.inputs) and node.inputs[i] is not None]
    if missing:
        fail(node, "TFLite Micro's integer LSTM takes no CIFG, peephole, projection or layer "
                   f"norm inputs (input slots {missing} are present)")
    if any(i >= len(node.inputs) or node.inputs[i] is None for i in _CIFG):
        fail(node, "TFLite Micro's integer LSTM needs the input gate (a CIFG LSTM has none)")
    x_scale, x_zp = per_tensor(graph, node, node.inputs[0])
    h_scale, h_zp = per_tensor(graph, node, node.inputs[18])
    out_scale, out_zp = per_tensor(graph, node, node.outputs[0])
    if (out_scale, out_zp) != (h_scale, h_zp):
        fail(node, f"output quantization ({out_scale}, {out_zp}) differs from the hidden "
                   f"state's ({h_scale}, {h_zp}); TFLite copies one into the other")
    c_t = graph.tensors[node.inputs[19]]
    if str(c_t.dtype) != "int16":
        fail(node, f"cell state {node.inputs[19]!r} is {c_t.dtype}; the integer LSTM needs int16")
    c_scale, c_zp = per_tensor(graph, node, node.inputs[19])
    if c_zp != 0:
        fail(node, f"cell state {node.inputs[19]!r} has zero point {c_zp}; it must be 0")
    power, exact = checked_log2(c_scale)
    if not exact:
        fail(node, f"cell state scale {c_scale} is not a power of two")
    if graph.tensors[node.inputs[0]].dtype != graph.tensors[node.inputs[18]].dtype:
        fail(node, "the hidden state's type differs from the input's")
    wide = str(graph.tensors[node.inputs[0]].dtype) == "int16"
    fc, bias = [None] * 8, {}
    for k, gate in enumerate(GATES):
        s_w = _weight_scale(graph, node, 1 + k)
        s_r = _weight_scale(graph, node, 5 + k)
        fc[k] = _multiplier(node, effective_multipliers(x_scale, s_w,
                                                        np.float32(GATE_INPUT_SCALE)))
        fc[4 + k] = _multiplier(node, effective_multipliers(h_scale, s_r,
                                                            np.float32(GATE_INPUT_SCALE)))
        b = node.inputs[12 + k]
        data = graph.tensors[b].data if b is not None else None
        if b is not None and data is None:
            fail(node, f"bias {b!r} is not a constant")
        if data is not None and str(data.dtype) != _BIAS_DTYPE[wide]:
            fail(node, f"bias {b!r} is {data.dtype}; TFLite Micro's LSTM with "
                       f"{'int16' if wide else 'int8'} activations reads {_BIAS_DTYPE[wide]} "
                       "biases")
        bias[gate] = None if data is None else data.reshape(-1).astype(np.int64)
    g = np.float64(np.float32(GATE_OUTPUT_SCALE))
    clip = float(node.attrs.get("cell_clip", 0.0) or 0.0)
    quantized_clip = int(min(max(np.float64(np.float32(clip)) / np.float64(c_scale), -32768.0),
                             32767.0)) if clip > 0 else 0
    muls = {"forget": g * np.float64(c_scale) / np.float64(c_scale), "input":
            g * g / np.float64(c_scale), "hidden": g * g / np.float64(h_scale)}
    out = {
        "fc_multiplier": np.array([m for m, _ in fc], np.int32),
        "fc_shift": np.array([sh for _, sh in fc], np.int32),
        "bias": bias, "input_offset": -x_zp, "hidden_offset": -h_zp,
        "hidden_zero_point": h_zp,
        "cell_scale_power": power, "cell_clip": quantized_clip,
        "time_major": bool(node.attrs.get("time_major", False)),
        "activation": str(node.attrs.get("activation", "TANH") or "TANH").upper(),
        "wide": wide,
    }
    for what, real in muls.items():
        out[f"{what}_multiplier"], out[f"{what}_shift"] = _multiplier(node, real)
    return out


# the cell state is int16: the node is a "16-bit" node for the executor; one Prepare for both
LAYER_PARAMS["UnidirectionalSequenceLSTM"] = lstm_params
LAYER_PARAMS16["UnidirectionalSequenceLSTM"] = lstm_params
