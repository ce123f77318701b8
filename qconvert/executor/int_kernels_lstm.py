"""The integer UNIDIRECTIONAL_SEQUENCE_LSTM, bit-exact with TFLite Micro's reference kernel.

One Eval over the sequence (the Prepare is `qconvert.int8.prepare.lstm`): per step, the forget,
input and cell gates, the cell update, the output gate and the hidden state, each as TFLite
Micro computes it (FULLY_CONNECTED into int16 Q3.12 with int32 accumulators, saturating int16
adds, the int16 LOGISTIC / TANH tables, int16 x int16 multiplies requantized with
MultiplyByQuantizedMultiplier). Vectorised over the batch and the units; the loop is over time.

State: the kernel starts from the state tensors' values (a variable tensor: its reset value
at the first call, or what the previous call left when the executor runs a stream) and returns,
after the sequence output, the final hidden and cell state, which the executor carries to the
next call of a stream (`streaming.STATE_SLOTS`). A state of batch 1 serves
every sample of a batch-mode run (each sample its own recurrence).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.fixed_point import (multiply_by_quantized_multiplier,
                                       multiply_by_quantized_multiplier_int64, wrap32)
from qconvert.int8.prepare.lstm import GATES

from . import int16_lut
from .int_kernel_base import INT_KERNELS

_I16 = (-32768, 32767)


def _fc16(x, w, bias, offset, mult_shift, wide: bool):
    """FULLY_CONNECTED of x [B, K] (+ offset) by w [S, K] into int16 (output offset 0)."""
    acc = (x.astype(np.int64) + offset) @ w.astype(np.int64).T
    if bias is not None:
        acc = acc + bias
    m, s = mult_shift
    if wide:  # 16-bit activations: int64 accumulator and bias
        scaled = multiply_by_quantized_multiplier_int64(acc, m, s)
    else:
        scaled = multiply_by_quantized_multiplier(wrap32(acc), m, s).astype(np.int64)
    return np.clip(scaled, *_I16)


def _mul(a, b, mult_shift, offset=0, bounds=_I16):
    """reference_integer_ops::MulElementwise of two int16 arrays (input offsets 0)."""
    m, s = mult_shift
    prod = a.astype(np.int64) * b.astype(np.int64)
    out = multiply_by_quantized_multiplier(wrap32(prod), m, s).astype(np.int64) + offset
    return np.clip(out, *bounds)


def _gate(p, k, x_t, h, weights, nonlinear):
    def fc(j):
        return int(p["fc_multiplier"][j]), int(p["fc_shift"][j])

    a = _fc16(x_t, weights[k], p["bias"][GATES[k]], p["input_offset"], fc(k), p["wide"])
    r = _fc16(h, weights[4 + k], None, p["hidden_offset"], fc(4 + k), p["wide"])
    return nonlinear(np.clip(a + r, *_I16))


def _mul_of(p, what):
    return p[f"{what}_multiplier"], p[f"{what}_shift"]


def _sigmoid(v):
    return int16_lut.logistic16(v, 0, 0).astype(np.int64)


def _tanh_of(power: int):
    """TFLite Micro's lstm_internal::Tanh for an input of scale 2**power."""
    shift = 15 + power - 3
    mult = 0
    if shift < 0:
        shift, mult = -shift, 3
    return lambda v: int16_lut.tanh16(v, mult, shift).astype(np.int64)


def lstm_sequence(p, x, weights, h, c):
    """The recurrence over batch-major integer `x` [B, T, I]: `weights` the eight int8 matrices
    (input-to-gate, then recurrent-to-gate, TFLite's gate order), `h` [B, S] and `c` [B, S]
    the state. Returns (outputs [B, T, S], h, c) as int64 arrays."""
    batch, steps = x.shape[0], x.shape[1]
    h = np.broadcast_to(np.asarray(h, np.int64), (batch, h.shape[-1])).copy()
    c = np.broadcast_to(np.asarray(c, np.int64), (batch, c.shape[-1])).copy()
    if p["activation"] != "TANH":
        raise NotImplementedError(f"integer LSTM with activation {p['activation']}")
    cell_tanh = _tanh_of(-12)
    hidden_tanh = _tanh_of(p["cell_scale_power"])
    bits = 16 if p["wide"] else 8
    h_bounds = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    out = np.empty((batch, steps, h.shape[-1]), np.int64)
    for t in range(steps):
        x_t = x[:, t]
        f = _gate(p, 1, x_t, h, weights, _sigmoid)
        i = _gate(p, 0, x_t, h, weights, _sigmoid)
        g = _gate(p, 2, x_t, h, weights, cell_tanh)
        c = np.clip(_mul(f, c, _mul_of(p, "forget")) + _mul(i, g, _mul_of(p, "input")), *_I16)
        if p["cell_clip"] > 0:
            c = np.clip(c, -p["cell_clip"], p["cell_clip"])
        o = _gate(p, 3, x_t, h, weights, _sigmoid)
        h = _mul(hidden_tanh(c), o, _mul_of(p, "hidden"), p["hidden_zero_point"], h_bounds)
        out[:, t] = h
    return out, h, c


def unidirectional_sequence_lstm(node, inputs, p, ctx):
    """Integer UNIDIRECTIONAL_SEQUENCE_LSTM (see the module docstring). A state tensor with no
    value yet (a variable before the first call) holds what TFLite Micro's reset writes: the
    zero point of an int8 tensor, else 0."""
    x = inputs[0]
    units = inputs[2].shape[0]
    seq = np.swapaxes(x, 0, 1) if p["time_major"] else x
    h, c = inputs[18], inputs[19]
    reset_h = 0 if p["wide"] else p["hidden_zero_point"]
    h = np.full((1, units), reset_h, np.int64) if h is None else h.reshape(-1, h.shape[-1])
    c = np.zeros((1, units), np.int64) if c is None else c.reshape(-1, c.shape[-1])
    weights = [inputs[k] for k in (1, 2, 3, 4, 5, 6, 7, 8)]
    out, h, c = lstm_sequence(p, seq, weights, h, c)
    if p["time_major"]:
        out = np.swapaxes(out, 0, 1)
    return [np.ascontiguousarray(out).astype(x.dtype), h, c]


INT_KERNELS["UnidirectionalSequenceLSTM"] = unidirectional_sequence_lstm  # int16_kernels too
