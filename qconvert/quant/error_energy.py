"""Per-activation (signal, noise) energies of a quantized model against the float model.

`EndToEnd` adds up, batch by batch, each activation's quantized value against the float
model's; `energy_add` accumulates one pair; `float_qdq_errors` measures an ONNX QDQ model (or the
16x8 plan's fake-quantized graph) with the float executor. The report (`report.build_report`),
its 16x8 simulation (`int16_report`) and the onnxruntime engine (`ort_engine.qdq_errors`) all
measure with these, so they sit below all three.
"""

from __future__ import annotations

import numpy as np

from qconvert.executor.float_executor import run_float_batched
from qconvert.ir import Model


class EndToEnd:
    """(signal, noise) energies of each activation's quantized value against the float model's
    value on the first samples (`reference`: {activation: float array}), fed batch by batch in
    sample order."""

    def __init__(self, reference: dict):
        self.reference = reference
        self.seen = dict.fromkeys(reference, 0)
        self.energy: dict = {}

    def add(self, name: str, values: np.ndarray) -> None:
        ref = self.reference.get(name)
        if ref is None or self.seen[name] >= len(ref):
            return
        start = self.seen[name]
        got = values[:len(ref) - start]
        r = ref[start:start + len(got)].astype(np.float64)
        if got.ndim and got[:1].size != r[:1].size:  # a prefix of each sample (`first_samples`)
            got = got.reshape(len(got), -1)[:, :r[:1].size]
        got = got.astype(np.float64)  # a copy of ours: overwritten below
        self.seen[name] += len(got)
        np.subtract(r, got, out=got)
        np.square(got, out=got)
        np.square(r, out=r)  # the same values and sums as sum(r * r) and sum((r - got) ** 2)
        energy_add(self.energy, name, float(np.sum(r)), float(np.sum(got)))


def energy_add(energy: dict, name: str, signal: float, noise: float) -> None:
    """Add (signal, noise) energies to `energy[name]`."""
    s, e = energy.get(name, (0.0, 0.0))
    energy[name] = (s + signal, e + noise)


def float_qdq_errors(model: Model, names: dict, feeds: dict, batch_size: int,
                     layer_reference: dict, correct=None):
    """ONNX QDQ, from one batched run of the QDQ graph: per activation the (signal, noise)
    energies end to end (its dequantized value against the float model's, `layer_reference`:
    {activation: float value on the first samples}) and added (what its own QuantizeLinear ->
    DequantizeLinear pair changes in the float value its layer computed from dequantized inputs:
    the error the layer adds, not the one it inherits, measured by the executor while it
    computes the pair, `run_float`'s `pair_error`); and the QDQ model's outputs. `correct` as
    in `report._tflite_errors`: its samples run first, as one batch, corrected as they go."""
    activation_of = {d: a for a, d in names.items()}
    tracker = EndToEnd(layer_reference)
    added: dict = {}

    def observe(name, array):
        act = activation_of.get(name)
        if act is not None:
            tracker.add(act, array)

    def pair_error(name, signal, noise):
        act = activation_of.get(name)
        if act is not None:
            energy_add(added, act, signal, noise)

    head = 0 if correct is None else correct.samples
    outputs: dict = {}
    if head:  # first, so that every later sample runs the corrected model
        def both(name, array):
            correct.observe(name, array)
            observe(name, array)

        outputs = run_float_batched(model, {k: v[:head] for k, v in feeds.items()}, head,
                                    observe=both, pair_error=pair_error)
    if head < len(next(iter(feeds.values()))):  # what it does not compare may go unseen
        unseen = frozenset(model.graph.tensors) - set(activation_of)
        rest = run_float_batched(model, {k: v[head:] for k, v in feeds.items()}, batch_size,
                                 observe=observe, pair_error=pair_error, unobserved=unseen)
        outputs = {k: np.concatenate([outputs[k], v]) if k in outputs else v
                   for k, v in rest.items()}
    return tracker.energy, added, outputs
