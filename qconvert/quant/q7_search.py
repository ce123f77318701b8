"""The least-error choice of the q7 scheme's activation formats (`--scheme q7`).

`plan_q7` gives each activation the fraction bits its calibrated range needs; with power-of-two
scales that choice can be a whole bit off the best one (a range just above a power of two
wastes half the codes; a format that clips a few outliers can be worth it), and the error a
format causes shows only downstream (an average pool or a fully connected layer reads it at the
same step). So, layer by layer in order, each linear layer's output format is tried one bit
coarser and one bit finer, the rest of the model following (`propagate_formats`), and the one
giving the q7 model's output the least squared error against the float model's on the
calibration samples is kept: a greedy search, three executor runs per linear layer.
"""

from __future__ import annotations

import numpy as np

from qconvert.executor.q7_kernels import run_q7

from .q7_plan import TABLE_FRAC, Q7Model, dequantize, propagate_formats, quantize_input


def output_error(model: Q7Model, x: np.ndarray, reference: np.ndarray) -> float:
    """Squared error of the q7 model's dequantized output against the float `reference`."""
    out = run_q7(model.layers, quantize_input(model, x))
    return float(np.sum((dequantize(out, model.output_frac).reshape(reference.shape)
                         - reference) ** 2))


def _allowed(model: Q7Model) -> bool:
    """False when the formats break a table activation's input constraint."""
    return all(TABLE_FRAC[0] <= layer.in_frac <= TABLE_FRAC[1] for layer in model.layers
               if layer.kind in ("sigmoid", "tanh"))


def search_formats(model: Q7Model, x: np.ndarray, reference: np.ndarray) -> dict:
    """Refine `model`'s linear layers' output formats in place (module docstring) on float
    inputs `x` with float outputs `reference`; returns {layer name: (planned, chosen)}."""
    changes = {}
    best = output_error(model, x, reference)
    for layer in model.layers:
        if layer.weights is None:
            continue
        planned = chosen = layer.out_frac
        for candidate in (planned - 1, planned + 1):
            layer.out_frac = candidate
            propagate_formats(model)
            if layer.out_frac != candidate or not _allowed(model):
                continue
            error = output_error(model, x, reference)
            if error < best:
                best, chosen = error, candidate
        layer.out_frac = chosen
        propagate_formats(model)
        if chosen != planned:
            changes[layer.name] = (planned, chosen)
    return changes
