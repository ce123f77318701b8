"""Fake-quantized runs of a float graph: what a quantization plan does to the outputs, fast.

The float graph with a QuantizeLinear -> DequantizeLinear pair on every activation (`apply_qdq`
on a copy, in either format) and the layers' int8 weights dequantized: run by the float
executor, it gives the outputs an integer model with that plan computes, up to the
requantization arithmetic (rounding of the multipliers, ties). `QdqSimulation.set_bits` moves
an activation to the int16 grid (its symmetric int16 scale, zero point 0) or back in place, so
the 16x8 sensitivity pass (`int16_choice`) runs one graph many times without rebuilding it.
"""

from __future__ import annotations

import numpy as np

from .plan import QuantPlan
from .qdq import apply_qdq


class QdqSimulation:
    """A fake-quantized copy of `float_graph` planned by `qplan` (int8 everywhere)."""

    def __init__(self, float_graph, qplan: QuantPlan, opset: int | None = None):
        self.graph = float_graph.copy()
        self.outputs = list(float_graph.outputs)
        self.names = apply_qdq(self.graph, qplan, max(int(opset or 13), 13))
        self.int8 = dict(qplan.activations)
        self.pairs: dict = {}   # activation -> (scale tensor, zero point tensor, quantized tensor)
        for node in self.graph.nodes:
            if node.op == "Quantize" and len(node.inputs) == 3 and node.name.endswith(
                    "_QuantizeLinear"):
                name = node.name[:-len("_QuantizeLinear")]
                if name in self.int8:
                    self.pairs[name] = (node.inputs[1], node.inputs[2], node.outputs[0])

    def set_params(self, name: str, scale, zero_point, bits: int) -> None:
        """Put activation `name` on the grid of (scale, zero point) with `bits` (8 or 16)."""
        pair = self.pairs.get(name)
        if pair is None:  # fused into the clamp that reads it: the clamp's pair holds it
            return
        s, z, q = pair
        dtype = np.int16 if bits == 16 else np.int8
        scale_data = np.asarray(np.float32(scale))
        zero_data = np.asarray(dtype(zero_point))
        for tensor, data in ((s, scale_data), (z, zero_data)):
            data.flags.writeable = False
            t = self.graph.tensors[tensor]
            t.data, t.dtype = data, str(data.dtype)
        self.graph.tensors[q].dtype = "int16" if bits == 16 else "int8"

    def run(self, feeds: dict, batch_size: int) -> dict:
        """{output: float array} of the fake-quantized graph on `feeds`."""
        from qconvert.executor.float_executor import run_float_batched

        with np.errstate(all="ignore"):
            return run_float_batched(self.graph, feeds, batch_size)


def output_noise(reference: dict, outputs: dict) -> tuple:
    """(signal, noise) energies summed over the float outputs."""
    signal = noise = 0.0
    for name, ref in reference.items():
        if name not in outputs or ref.dtype.kind != "f":
            continue
        r = ref.astype(np.float64)
        signal += float(np.sum(r * r))
        noise += float(np.sum((r - outputs[name].astype(np.float64)) ** 2))
    return signal, noise


def db(signal: float, noise: float) -> float:
    """10 log10(signal / noise), inf when noise is 0."""
    return float("inf") if noise <= 0 else 10.0 * np.log10(max(signal, 1e-300) / noise)
