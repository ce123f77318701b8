"""UNIDIRECTIONAL_SEQUENCE_LSTM in `qconvert export-c`: one call of c_export/kernels/qconvert_nn_lstm.c.

The numbers are TFLite Micro's Prepare-time values (`qconvert.int8.prepare.lstm`); the eight
int8 gate matrices, the four gate biases (int32; int64 in a 16x8 LSTM) and TFLite's sigmoid
table are flash arrays; the hidden and cell state are two static arrays of the layer, outside
the arena (they live from one call to the next), initialised as TFLite Micro resets its
variable tensors: an int8 hidden state to its zero point, an int16 one and the cell to 0. So
consecutive calls of NAME_invoke carry the state, as consecutive invokes of one TFLite Micro
interpreter do; NAME_reset_lstm() writes the initial state again (a new sequence: TFLite
Micro's MicroInterpreter::Reset). The kernel's scratch (five int16 rows of `units`: the four
gates and tanh(c)) is in the arena.

int8 activations call `qconvert_lstm_s8`, int16 ones (16x8) `qconvert_lstm_s16`; both also in
`--kernels cmsis-nn` builds (CMSIS-NN's LSTM kernels are not bit-exact with TFLite Micro's
reference LSTM: docs/lstm.md). A 16x8 fully connected multiplier whose shift leaves TFLite's
64-bit requantization range [-31, 7] is refused in one line (the C shift would be undefined).
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.int8.lut16 import sigmoid_table
from qconvert.int8.prepare import layer_params

from ..c_text import c_array_body
from .steps import S16_FILES, plain_step, c_struct, tensor_dims

LSTM_FILES = frozenset({"qconvert_nn_lstm.h", "qconvert_nn_lstm.c"}) | S16_FILES


def hidden_tanh_scaling(cell_scale_power: int) -> tuple:
    """(multiplier, left shift) of the TANH of the cell state, as TFLite Micro's LSTM gives
    its int16 TANH: shift 12 + power, or multiplier 3 and shift -(12 + power) when negative."""
    shift = 15 + int(cell_scale_power) - 3
    return (3, -shift) if shift < 0 else (0, shift)


# by activation width (16-bit: 16x8): the C element type, the kernel, the gate biases' C type
_WIDTHS = {False: ("int8_t", "qconvert_lstm_s8", "int32_t"),
           True: ("int16_t", "qconvert_lstm_s16", "int64_t")}


def _lower_lstm(graph, node, index, options):
    p = layer_params(graph, node)
    ctype, kernel, bias_type = _WIDTHS[p["wide"]]
    shifts = [int(v) for v in p["fc_shift"]]
    if p["wide"] and not all(-31 <= v <= 7 for v in shifts):
        raise QConvertError(f"cannot export C: UnidirectionalSequenceLSTM {node.name!r}: a "
                            f"gate multiplier's shift ({min(shifts)}..{max(shifts)}) is outside "
                            "TFLite's 64-bit requantization range [-31, 7]")
    x_dims = tensor_dims(graph, node.inputs[0])
    units = int(graph.tensors[node.inputs[2]].data.shape[0])
    time_major = bool(p["time_major"])
    steps, batch = (x_dims[0], x_dims[1]) if time_major else (x_dims[1], x_dims[0])
    arrays = [(f"w{j}", "int8_t", graph.tensors[node.inputs[1 + j]].data) for j in range(8)]
    arrays += [(f"bias{k}", bias_type, graph.tensors[node.inputs[12 + k]].data)
               for k in range(4)]
    arrays.append(("sigmoid_table", "uint16_t", sigmoid_table()))
    tanh_mult, tanh_shift = hidden_tanh_scaling(p["cell_scale_power"])
    biases, none = c_struct([f"@L_bias{k}" for k in range(4)]), c_struct(["0"] * 4)
    fields = [batch, steps, x_dims[2], units, int(time_major), p["input_offset"],
              p["hidden_offset"], p["hidden_zero_point"],
              c_struct([f"@L_w{j}" for j in range(8)]),
              *((none, biases) if p["wide"] else (biases, none)),  # bias, bias64
              c_struct([int(v) for v in p["fc_multiplier"]]),
              c_struct([int(v) for v in p["fc_shift"]]),
              p["forget_multiplier"], p["forget_shift"], p["input_multiplier"],
              p["input_shift"], p["hidden_multiplier"], p["hidden_shift"], tanh_mult, tanh_shift,
              p["cell_clip"], "@L_sigmoid_table"]
    state = batch * units
    reset = 0 if p["wide"] else int(p["hidden_zero_point"])  # TFLite Micro: zp for int8 only
    hidden = np.full(state, reset, np.int64)
    decls = [f"static const qconvert_lstm_params @L_params = {c_struct(fields)};",
             f"static {ctype} @L_hidden[{state}] = {{\n{c_array_body(hidden, ctype)}\n}};",
             f"static int16_t @L_cell[{state}]; /* zero */"]
    step = plain_step(graph, node, index,
                      f"{kernel}($in0, $out0, @L_hidden, @L_cell, "
                      "(int16_t *)(void *)$scratch, &@L_params);", arrays, decls, LSTM_FILES)
    scratch = 5 * units * 2
    step.plan.scratch = scratch
    step.scratch_builds = {"helium": scratch, "other": scratch}
    step.plan.pinned = True  # state: one call per invoke, in the graph's order
    step.resets = [f"memset(@L_hidden, {reset}, sizeof(@L_hidden));",
                   "memset(@L_cell, 0, sizeof(@L_cell));"]
    return step


LSTM_LOWERINGS = {"UnidirectionalSequenceLSTM": _lower_lstm}
