"""Float kernels of the LSTM ops: TFLite UNIDIRECTIONAL_SEQUENCE_LSTM and ONNX LSTM.

Both run one recurrence (`run_lstm`) over a batch-major sequence [B, T, I], in float32 as LiteRT
and onnxruntime compute it (a matmul per gate per step; agreement to float rounding):

    i = sigmoid(W_i x + R_i h + p_i * c + b_i)     (CIFG, no input gate: i = 1 - f)
    f = sigmoid(W_f x + R_f h + p_f * c + b_f)
    g = act(W_c x + R_c h + b_c)
    c = f * c + i * g                               (clipped to +-cell_clip when > 0)
    o = sigmoid(W_o x + R_o h + p_o * c + b_o)      (the new c)
    h = o * act(c)                                  (projected: h = clip(P h + p_b, proj_clip))

With layer norm (TFLite), each gate's W x + R h (+ peephole) is normalized over the units and
scaled by its coefficients before the bias is added, as LiteRT's kernel does. TFLite's `act` is
the fused activation (TANH in every converter output; NONE, RELU, RELU6, SIGMOID also run);
ONNX's are the `activations` attribute (Sigmoid, Tanh, Tanh by default; Relu, HardSigmoid,
Affine... are refused). ONNX `clip` clamps every gate's pre-activation (not the cell state).

The TFLite kernel reads its state tensors (zero before the first call: the executor gives a
variable tensor's initial value, or the value the previous call left when it runs a stream:
`streaming.STATE_SLOTS`). A state of batch 1 serves every sample of a batch-mode run.
Besides its output it returns the cell state of every step ([B, T, S]): the executor hands it to
`observe` as the values of the cell-state tensor (`OBSERVED_STATES`), so calibration measures
the range the int16 cell state must hold; then the final hidden and cell state ([B, P or S],
[B, S]), which the executor carries to the next call of a stream.
"""

from __future__ import annotations

import numpy as np

from .float_kernels_base import kernel

_F32 = np.float32
# op -> input slots whose values over the call a kernel returns after its outputs (observed)
OBSERVED_STATES = {"UnidirectionalSequenceLSTM": (19,)}


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (_F32(1) / (_F32(1) + np.exp(-x))).astype(_F32, copy=False)


# activation name (TFLite's ActivationFunctionType or ONNX's) -> function on float32 arrays
ACTIVATIONS = {
    "NONE": lambda x: x,
    "RELU": lambda x: np.maximum(x, _F32(0)),
    "RELU6": lambda x: np.clip(x, _F32(0), _F32(6)),
    "TANH": np.tanh,
    "SIGMOID": _sigmoid,
    "Sigmoid": _sigmoid,
    "Tanh": np.tanh,
    "Relu": lambda x: np.maximum(x, _F32(0)),
}


def _activation(name: str):
    fn = ACTIVATIONS.get(name)
    if fn is None:
        raise NotImplementedError(f"LSTM activation {name} is not supported")
    return fn


def _layer_norm(a, coeff):
    """(a - mean) / sqrt(var + 1e-8) over the units, times `coeff` (LiteRT's normalization)."""
    mean = a.mean(axis=-1, keepdims=True)
    var = ((a - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((a - mean) / np.sqrt(var + _F32(1e-8))).astype(_F32) * coeff


def run_lstm(x, w, r, b, h, c, *, act_gate="TANH", act_hidden=None, peephole=(None,) * 3,
             norm=(None,) * 4, projection=(None, None), cell_clip=0.0, proj_clip=0.0,
             gate_clip=None):
    """The recurrence over batch-major `x` [B, T, I]: `w` / `r` / `b` / `norm` are 4-tuples in
    TFLite's gate order (input, forget, cell, output; the input entries None for CIFG), `peephole`
    (input, forget, output); `h` [B, P] and `c` [B, S] the initial state. Returns (outputs
    [B, T, P], the last h, the last c, every step's c [B, T, S])."""
    x = np.asarray(x, _F32)
    steps = x.shape[1]
    act_g = _activation(act_gate)
    act_h = _activation(act_hidden or act_gate)
    batch = x.shape[0]
    h = np.broadcast_to(np.asarray(h, _F32), (batch, h.shape[-1])).copy()
    c = np.broadcast_to(np.asarray(c, _F32), (batch, c.shape[-1])).copy()
    # every step's input contributions at once: [B, T, S] per gate
    xw = [None if wg is None else np.matmul(x, np.asarray(wg, _F32).T) for wg in w]
    pw, pb = projection
    out = np.empty((batch, steps, h.shape[-1]), _F32)
    cells = np.empty((batch, steps, c.shape[-1]), _F32)

    def gate(k, t, peep=None, cell=None):
        a = xw[k][:, t] + h @ np.asarray(r[k], _F32).T
        if peep is not None:
            a = a + np.asarray(peep, _F32) * cell
        if norm[k] is not None:
            a = _layer_norm(a, np.asarray(norm[k], _F32))
        if b[k] is not None:
            a = a + np.asarray(b[k], _F32)
        if gate_clip is not None:
            a = np.clip(a, _F32(-gate_clip), _F32(gate_clip))
        return a

    for t in range(steps):
        f = _sigmoid(gate(1, t, peephole[1], c))
        if w[0] is None:
            i = _F32(1) - f
        else:
            i = _sigmoid(gate(0, t, peephole[0], c))
        g = act_g(gate(2, t))
        c = f * c + i * g
        if cell_clip and cell_clip > 0:
            c = np.clip(c, _F32(-cell_clip), _F32(cell_clip))
        o = _sigmoid(gate(3, t, peephole[2], c))
        h = o * act_h(c)
        if pw is not None:
            h = h @ np.asarray(pw, _F32).T
            if pb is not None:
                h = h + np.asarray(pb, _F32)
            if proj_clip and proj_clip > 0:
                h = np.clip(h, _F32(-proj_clip), _F32(proj_clip))
        out[:, t] = h
        cells[:, t] = c
    return out, h, c, cells


@kernel("UnidirectionalSequenceLSTM")
def unidirectional_sequence_lstm(node, inputs, out_dtypes):
    """TFLite UNIDIRECTIONAL_SEQUENCE_LSTM in float32 (see the module docstring)."""
    x = inputs[0]
    if x.dtype != _F32 or (inputs[2] is not None and inputs[2].dtype != _F32):
        raise NotImplementedError("UNIDIRECTIONAL_SEQUENCE_LSTM with non-float32 tensors "
                                  "(hybrid int8 weights) is not supported")
    if x.ndim != 3:
        raise ValueError(f"LSTM input must be 3-D, got {list(x.shape)}")
    time_major = bool(node.attrs.get("time_major", False))
    seq = np.swapaxes(x, 0, 1) if time_major else x
    state_h, state_c = inputs[18], inputs[19]
    h0 = np.reshape(state_h, (-1, state_h.shape[-1]))
    c0 = np.reshape(state_c, (-1, state_c.shape[-1]))
    out, h, c, cells = run_lstm(
        seq, inputs[1:5], inputs[5:9], inputs[12:16], h0, c0,
        act_gate=node.attrs.get("activation", "TANH"), peephole=inputs[9:12],
        norm=inputs[20:24], projection=(inputs[16], inputs[17]),
        cell_clip=float(node.attrs.get("cell_clip", 0.0) or 0.0),
        proj_clip=float(node.attrs.get("proj_clip", 0.0) or 0.0))
    return [np.swapaxes(out, 0, 1).copy() if time_major else out, cells, h, c]


_ONNX_ORDER = (0, 2, 3, 1)  # TFLite gate k is ONNX's block _ONNX_ORDER[k] (ONNX: i, o, f, c)


def onnx_gates(m, hidden: int):
    """The four [H, ...] blocks of an ONNX LSTM W / R / B-half (gates i, o, f, c) in TFLite's
    gate order (input, forget, cell, output)."""
    return tuple(m[k * hidden:(k + 1) * hidden] for k in _ONNX_ORDER)


@kernel("LSTM")
def onnx_lstm(node, inputs, out_dtypes):
    """ONNX LSTM (forward, reverse or bidirectional; layout 0) in float32."""
    x, w, r = inputs[0], inputs[1], inputs[2]
    b, lens, h0, c0, p = (inputs[i] if i < len(inputs) else None for i in range(3, 8))
    hidden = int(r.shape[-1])
    if int(node.attrs.get("layout", 0) or 0):  # onnxruntime has no kernel for it either
        raise NotImplementedError("LSTM layout=1 (batch-major) is not supported")
    seq = np.swapaxes(x, 0, 1)  # [B, T, I]
    batch, steps = seq.shape[0], seq.shape[1]
    if lens is not None and np.any(np.asarray(lens) != steps):
        raise NotImplementedError("LSTM sequence_lens shorter than the sequence is not supported")
    direction = node.attrs.get("direction", "forward") or "forward"
    dirs = 2 if direction == "bidirectional" else 1
    acts = node.attrs.get("activations") or ["Sigmoid", "Tanh", "Tanh"] * dirs
    if any(a != "Sigmoid" for a in acts[0::3]):
        raise NotImplementedError(f"LSTM gate activation {acts[0]} is not supported")
    clip = node.attrs.get("clip")
    if node.attrs.get("input_forget"):
        raise NotImplementedError("LSTM input_forget=1 is not supported")
    outs, hs, cs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        bias = (None,) * 4
        if b is not None:
            bias = tuple(bw + br for bw, br in zip(onnx_gates(b[d][:4 * hidden], hidden),
                                                   onnx_gates(b[d][4 * hidden:], hidden)))
        peep = (None,) * 3
        if p is not None:
            peep = (p[d][:hidden], p[d][2 * hidden:], p[d][hidden:2 * hidden])  # i, f, o
        state_h = np.zeros((batch, hidden), _F32) if h0 is None else h0[d]
        state_c = np.zeros((batch, hidden), _F32) if c0 is None else c0[d]
        s = seq[:, ::-1] if reverse else seq
        out, h, c, _ = run_lstm(s, onnx_gates(w[d], hidden), onnx_gates(r[d], hidden), bias,
                             state_h, state_c, act_gate=acts[3 * d + 1],
                             act_hidden=acts[3 * d + 2], peephole=peep,
                             gate_clip=None if clip is None else float(clip))
        outs.append(out[:, ::-1] if reverse else out)
        hs.append(h)
        cs.append(c)
    y = np.transpose(np.stack(outs, axis=1), (2, 1, 0, 3))  # [B, D, T, H] -> [T, D, B, H]
    y_h, y_c = np.stack(hs), np.stack(cs)  # [D, B, H]
    return [np.ascontiguousarray(y), np.ascontiguousarray(y_h), np.ascontiguousarray(y_c)]
