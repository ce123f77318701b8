"""The quantization of UNIDIRECTIONAL_SEQUENCE_LSTM (int8 rule `lstm`): TFLite Micro's scheme.

TFLite Micro's integer LSTM (`qconvert.int8.prepare.lstm`) fixes most of it; the plan chooses
what calibration decides:
- the input and the output: int8 activations of their calibrated ranges (planned with the
  others: the output has its own range); the hidden state (a variable tensor) takes the
  output's (scale, zero point): TFLite copies one into the other at every step;
- the cell state: int16, zero point 0, the power-of-two scale 2**ceil(log2(max |c|)) / 32768
  covering the largest cell value calibration saw (`float_kernels_lstm` hands the cell
  state of every step to the calibration observer; with cell_clip the clip bounds it too);
- each of the eight gate matrices: int8, symmetric, one scale per tensor (max |w| / 127;
  TFLite Micro's LSTM has one multiplier per matrix); each gate bias int32 at s_x * s_w of its
  input matrix (16x8: int64, at the same product).
The gate outputs and the gate pre-activations need no tensors in TFLite Micro: their scales are
fixed (2**-12 and 2**-15), the effective scales of each matmul follow from the above. LiteRT's
integer kernel wants the five intermediate tensors the TFLite converter writes (the four gate
pre-activations at 2**-12, the hidden value in the hidden state's parameters): they are added,
so the model runs there too (LiteRT's integer LSTM is close to TFLite Micro's, not bit-exact
with it).

TFLite Micro runs no CIFG, peephole, projection or layer-norm LSTM in integers: such a node
is refused by name at planning time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import QuantParams, Tensor

from .params import quantize_layer

LSTM_RULE = "lstm"
CELL_SLOT, HIDDEN_SLOT = 19, 18
_UNSUPPORTED = {9: "peephole", 10: "peephole", 11: "peephole", 16: "projection",
                17: "projection", 20: "layer norm", 21: "layer norm", 22: "layer norm",
                23: "layer norm"}


@dataclass
class LstmPlan:
    """One LSTM's integer constants and state parameters: `weights` {slot: (int8 array,
    scale)}, `biases` {slot: (int32 / int64 array, scale)}, `hidden` (scale, zero point),
    `cell` float32 power-of-two scale."""

    node: str
    weights: dict
    biases: dict
    hidden: tuple
    cell: np.float32


def cell_scale(peak: float) -> np.float32:
    """The power-of-two int16 scale whose range covers |c| <= peak (2**-15 at least, the
    range of [-1, 1]: a cell that never leaves it)."""
    peak = max(float(peak), 1.0)
    return np.float32(2.0 ** int(np.ceil(np.log2(peak))) / 32768.0)


def _check(graph, node) -> None:
    present = sorted({what for slot, what in _UNSUPPORTED.items()
                      if slot < len(node.inputs) and node.inputs[slot] is not None})
    if node.inputs[1] is None:
        present.insert(0, "CIFG")
    if present:
        raise QConvertError(f"cannot quantize UnidirectionalSequenceLSTM {node.name!r}: "
                            f"TFLite Micro's integer LSTM has no {', '.join(present)}")
    if str(node.attrs.get("activation", "TANH")).upper() != "TANH":
        raise QConvertError(f"cannot quantize UnidirectionalSequenceLSTM {node.name!r}: "
                            f"activation {node.attrs.get('activation')} (TFLite Micro: TANH)")
    for slot in range(1, 9):
        if graph.constant(node.inputs[slot]) is None:
            raise QConvertError(f"cannot quantize UnidirectionalSequenceLSTM {node.name!r}: "
                                f"weights {node.inputs[slot]!r} are not a constant")


def plan_lstm(graph, node, acts: dict, ranges: dict, wide: bool = False) -> LstmPlan:
    """The `LstmPlan` of `node` against the planned activations `acts` (module docstring)."""
    _check(graph, node)
    s_x = acts[node.inputs[0]][0]
    hidden = acts[node.outputs[0]]
    s_h = hidden[0]
    cell = node.inputs[CELL_SLOT]
    if cell not in ranges:
        raise QConvertError(f"cannot quantize UnidirectionalSequenceLSTM {node.name!r}: its "
                            "cell state was never observed during calibration")
    lo, hi = ranges[cell][:2]
    peak = max(abs(float(lo)), abs(float(hi)))
    clip = float(node.attrs.get("cell_clip", 0.0) or 0.0)
    if clip > 0:
        peak = min(peak, clip)
    weights, biases = {}, {}
    for k in range(4):
        w_slot, r_slot, b_slot = 1 + k, 5 + k, 12 + k
        w = graph.constant(node.inputs[w_slot])
        b = graph.constant(node.inputs[b_slot])
        try:
            w_q, s_w, b_q, _ = quantize_layer(w, b, s_x, 0, False, 64 if wide else 32)
            r_q, s_r, _, _ = quantize_layer(graph.constant(node.inputs[r_slot]), None, s_h, 0,
                                            False)
        except ValueError as exc:
            raise QConvertError(f"UnidirectionalSequenceLSTM {node.name!r}: {exc}") from exc
        weights[w_slot] = (w_q, np.float32(s_w[0]))
        weights[r_slot] = (r_q, np.float32(s_r[0]))
        if b_q is None:  # TFLite Micro reads every gate bias
            b_q = np.zeros(w.shape[0], np.int64 if wide else np.int32)
        biases[b_slot] = (b_q, np.float32(s_x) * np.float32(s_w[0]))
    return LstmPlan(node.name, weights, biases, hidden, cell_scale(peak))


def plan_lstms(graph, acts: dict, ranges: dict, int16=frozenset()) -> dict:
    """{LSTM output name: LstmPlan} of every LSTM node of `graph`."""
    from qconvert import schemas

    return {node.outputs[0]: plan_lstm(graph, node, acts, ranges, node.outputs[0] in int16)
            for node in graph.nodes if not node.opaque and schemas.get(node.op) is not None
            and schemas.get(node.op).int8 == LSTM_RULE}


def lstm_constants(node) -> set:
    """The constant inputs the LSTM plan quantizes itself (the generic constants skip them)."""
    return {n for n in node.inputs[1:] if n is not None}


def write_lstm(graph, node, plan: LstmPlan, act_dtype: str = "int8") -> None:
    """Write `plan` into `node` of the graph being made int8: int8 gate matrices, int32 (int64)
    biases, the hidden state in the output's parameters, the int16 cell state."""
    def own(slot, base):  # a constant another node also reads gets a copy of its own
        name = node.inputs[slot]
        if graph.reader_count(name) > 1:
            name = graph.add_constant(f"{name}_{base}", graph.tensors[name].data)
            inputs = list(node.inputs)
            inputs[slot] = name
            graph.set_inputs(node, inputs)
        return graph.tensors[name]

    for slot, (q, scale) in plan.weights.items():
        t = own(slot, "int8")
        t.data, t.dtype = _frozen(q), "int8"
        t.quant = QuantParams([scale], [0])
    for slot, (q, scale) in plan.biases.items():
        t = own(slot, "bias") if node.inputs[slot] is not None else None
        if t is None:
            name = graph.add_constant(f"{node.name}_bias{slot}", q)
            inputs = list(node.inputs)
            inputs[slot] = name
            graph.set_inputs(node, inputs)
            t = graph.tensors[name]
        t.data, t.dtype, t.shape = _frozen(q), str(q.dtype), tuple(q.shape)
        t.quant = QuantParams([scale], [0])
    h = graph.tensors[node.inputs[HIDDEN_SLOT]]
    h.dtype, h.quant = act_dtype, QuantParams([plan.hidden[0]], [plan.hidden[1]])
    h.extra.pop("variable_init", None)
    c = graph.tensors[node.inputs[CELL_SLOT]]
    c.dtype, c.quant = "int16", QuantParams([plan.cell], [0])
    c.extra.pop("variable_init", None)
    _intermediates(graph, node, plan.hidden, act_dtype)


def _intermediates(graph, node, hidden: tuple, act_dtype: str) -> None:
    """The five intermediate tensors LiteRT's integer LSTM reads (TFLite Micro ignores them):
    the four gate pre-activations, int16 at TFLite's fixed Q3.12 scale 2**-12 (without layer
    norm LiteRT uses that scale whatever they say), and the hidden value o * tanh(c), which
    LiteRT requantizes into this tensor's parameters before the output even without a
    projection: the hidden state's. Shape [0]: TFLite Micro refuses an intermediate tensor of
    any other size."""
    names = []
    for k, (dtype, q) in enumerate([("int16", (2.0 ** -12, 0))] * 4 + [(act_dtype, hidden)]):
        name = graph.fresh_name(f"{node.name or node.outputs[0]}/intermediate_{k}")
        graph.add_tensor(Tensor(name, (0,), dtype, quant=QuantParams([q[0]], [q[1]])))
        names.append(name)
    node.origin["intermediates"] = names


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a
