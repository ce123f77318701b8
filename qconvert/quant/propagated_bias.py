"""Empirical bias correction: remove the mean error each layer inherits from the int8 network
in front of it, not only the one its own weight rounding causes.

A layer computes `y = W x + b` in float; the int8 model computes `yq = Wq xq + bq`, where `xq`
is the layer's input as the quantized network upstream delivers it. The mean output error per
channel is `E[y - yq] = (W - Wq) E[x] + Wq (E[x] - E[xq]) + (b - bq)`. The analytic correction
(`bias_correction.weight_error_bias`, folded in by `plan`) removes the first term; this module
removes the second, the mean error of the layer's quantized input carried through its weights.
That one is often the larger: activation rounding and clipping upstream leave mean offsets
(ReLU outputs clipped at the top of their range, small depthwise kernels, a global average of
many rounded values), of either sign, so the first term alone can move an output the wrong way.

`E[x] - E[xq]` is measured on the written model itself, as the literature found works best
(the "empirical" bias correction of Nagel et al.): the int8 TFLite model runs in qconvert's
integer executor (bit-exact with TFLite Micro: the errors are those of the int8 kernels), a QDQ
model in the float executor (onnxruntime's arithmetic), on the first calibration samples
(`propagation_samples`), and each layer input's per-channel mean is compared with the float
model's on the same samples (`ChannelMeans.head_means`, gathered during calibration; paired
sample for sample, so the difference is not buried under the samples' own spread). Layers are
corrected in network order within that one run: when the run reaches a layer's input, the
layer's int32 bias moves by `round(Wq (E[x] - E[xq]) / (s_in s_w))` before the layer computes
(both executors read a constant when the node reading it runs), so each layer downstream sees
its predecessors corrected, as the final model computes them.

An estimate from a few samples is noisy, and adding noise to a bias costs what removing a bias
gains. Each channel's correction `c` is the mean of the per-sample values `c_i`; with its
standard error `se` (over samples) it is applied shrunk, `c * max(0, 1 - se^2 / c^2)`, the
James-Stein factor: a correction lost in the noise is dropped, a clear one kept whole. (With
fewer than MIN_SAMPLES samples the spread itself is too noisy to judge by, and nothing is
applied: on the ResNet-50-shaped bench model, whose report batch is 2 samples, a correction
from those 2 took the held-out output SQNR from 28.0 to 26.9 dB.) A correction that would
leave int32 beside the worst-case accumulator is not applied, nor is anything on a layer
without a bias in the plan or whose input's means are missing.
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.rounding import round_half_away

from .bias_correction import mean_key, contract, sample_means, tap_sums
from .footprint import activation_bytes
from .params import INT32_MAX, bias_scale, quantized_inputs
from .plan import QuantPlan, layer_slots

PROPAGATION_MACS = 1.5e9  # the int8 run stays within this many multiply-accumulates...
PROPAGATION_SAMPLES = 64  # ...and this many samples, at least one
PROPAGATION_BYTES = 256 << 20  # ...and this many bytes of float activations at once
MIN_SAMPLES = 8  # fewer: no empirical correction (the analytic weight term stays)


def propagation_samples(graph, available: int, batch_size: int) -> int:
    """How many of the first calibration samples a run of its own takes (one batch):
    PROPAGATION_SAMPLES, fewer for a large network (the run stays within PROPAGATION_MACS and
    PROPAGATION_BYTES of activations), at least 1, never more than `available`; 1 with
    `batch_size` 1 (a model whose reshapes fix the batch runs with `--batch-size 1`)."""
    from qconvert.formats.layer_table import layer_macs

    macs = sum(layer_macs(node, graph) for node in graph.nodes)
    by_macs = int(PROPAGATION_MACS // max(macs, 1))
    by_bytes = int(PROPAGATION_BYTES // max(activation_bytes(graph), 1))
    if batch_size == 1:
        return 1
    return max(1, min(available, PROPAGATION_SAMPLES, by_macs, by_bytes))


def correction_samples(graph, available: int, options, report_samples: int) -> int:
    """How many of the first calibration samples the correction is measured on (one batch).
    When the report runs the int8 model on the calibration samples itself (`report_samples`
    > 0, the numpy engine), its first batch does it: min(report_samples, PROPAGATION_SAMPLES),
    within PROPAGATION_BYTES of activations; no run of its own. Otherwise
    `propagation_samples`. A batch larger than `--batch-size` is fine where calibration ran in
    batches; `--batch-size 1` (a model whose reshapes fix the batch) gets 1 sample."""
    if options.batch_size == 1:
        return 1
    if report_samples and options.engine == "numpy":
        by_bytes = int(PROPAGATION_BYTES // max(activation_bytes(graph), 1))
        return max(1, min(report_samples, PROPAGATION_SAMPLES, by_bytes))
    return propagation_samples(graph, available, options.batch_size)


def _layer_output(graph, node, layers: dict) -> str | None:
    """The plan's key of layer `node` of the written graph: its output, or, for a layer
    writing a graph output the writer renamed (QDQ: `name_float` -> QuantizeLinear; TFLite with
    float outputs: `name_int8` -> DEQUANTIZE), the output name restored after it."""
    out = node.outputs[0] if node.outputs else None
    if out in layers:
        return out
    for reader in graph.readers(out) if out else ():
        name = (reader.name[:-len("_QuantizeLinear")] if reader.op == "Quantize"
                and reader.name.endswith("_QuantizeLinear") else
                reader.outputs[0] if reader.op == "Dequantize" else None)
        if name in layers and name in graph.outputs:
            return name
    return None


def _layers_by_input(graph, qplan: QuantPlan, head_means: dict, keys: dict) -> dict:
    """{tensor a layer reads (dequantized for QDQ): [(layer output, node, int32 bias tensor,
    means key)]} for the layers that can be corrected; a bias tensor another node also reads
    is replaced by the layer's own copy first."""
    found: dict = {}
    for node in list(graph.nodes):
        out = _layer_output(graph, node, qplan.layers)
        if out is None or qplan.layers[out].bias is None or out not in head_means \
                or keys.get(out) is None:
            continue
        x_slot, _, b_slot = layer_slots(node)
        holder, slot = node, b_slot  # the node reading the int32 bias, and its slot
        b = node.inputs[b_slot] if len(node.inputs) > b_slot else None
        dq = graph.producer(b) if b else None
        if dq is not None and dq.op == "Dequantize":  # QDQ: int32 -> DequantizeLinear -> layer
            holder, slot, b = dq, 0, dq.inputs[0]
        t = graph.tensors.get(b) if b else None
        if t is None or t.data is None or t.dtype != "int32":
            continue
        if graph.reader_count(b) > 1:  # shared: this layer gets its own copy
            inputs = list(holder.inputs)
            inputs[slot] = b = graph.add_constant(f"{b}_corrected", t.data)
            graph.set_inputs(holder, inputs)
        found.setdefault(node.inputs[x_slot], []).append((out, node, b, keys[out]))
    return found


class PropagatedCorrection:
    """The correction of one written int8 model, applied while an executor runs it on the
    first calibration samples (`observe`: the executor hook; module docstring). `samples` is
    how many of them the run must take, in one batch; `changed` lists the layers moved."""

    def __init__(self, model, qplan: QuantPlan, float_graph, head_means: dict, samples: int):
        self.model, self.qplan, self.head_means, self.samples = model, qplan, head_means, samples
        keys = {node.outputs[0]: mean_key(float_graph, node, model.format)
                for node in float_graph.nodes if node.outputs and node.outputs[0] in head_means}
        self.by_input = _layers_by_input(model.graph, qplan, head_means, keys)
        self.changed: list = []

    def observe(self, name: str, array: np.ndarray) -> None:
        layers = self.by_input.get(name)
        if not layers:
            return
        graph = self.model.graph
        t = graph.tensors[name]
        if array.dtype.kind in "iu":  # TFLite: the int8 value, dequantized
            if t.quant is None or array.dtype != np.int8:
                return
            array = (array.astype(np.float32) - np.float32(t.quant.zero_point[0])) \
                * np.float32(t.quant.scale[0])
        for out, node, bias_name, key in layers:
            bias = _corrected_bias(self.qplan.layers[out], node, self.model.format,
                                   self.head_means[out] - sample_means(array, key))
            if bias is not None:
                self.qplan.layers[out].bias = bias
                data = bias.copy()
                data.flags.writeable = False
                graph.tensors[bias_name].data = data  # read when its node runs, after this
                self.changed.append(out)


def correct_propagated_errors(model, qplan: QuantPlan, float_graph, feeds: dict,
                              head_means: dict, rounding: str = "double") -> int:
    """Move the int32 bias of each layer of the written int8 `model` (and of `qplan`) by the
    mean error its quantized input carries through its weights (module docstring), measured
    on `feeds` (the first calibration samples, float, run as one batch; `head_means` their
    float input means per layer and sample, from calibration). `float_graph` is the float
    model the plan was made from. Returns how many layers changed. (Without `--eval` the
    report's own run does this on its first samples instead: `report.build_report`.)"""
    correction = PropagatedCorrection(model, qplan, float_graph, head_means,
                                      len(next(iter(feeds.values()))))
    if not correction.by_input:
        return 0
    with np.errstate(all="ignore"):
        if model.format == "tflite":
            from qconvert.executor.int_executor import run_int8

            run_int8(model.graph, quantized_inputs(model.graph, feeds), rounding=rounding,
                     observe=correction.observe)
        else:
            from qconvert.executor.float_executor import run_float

            run_float(model, feeds, observe=correction.observe)
    return len(correction.changed)


def shrunk_mean(values: np.ndarray) -> np.ndarray:
    """The mean over axis 0 of per-sample estimates, shrunk toward 0 by the James-Stein factor
    `max(0, 1 - se^2 / mean^2)` per entry (`se` the standard error of the mean); one sample:
    the value itself."""
    mean = values.mean(axis=0)
    n = len(values)
    if n < 2:
        return mean
    se2 = values.var(axis=0, ddof=1) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = np.where(mean != 0, np.maximum(0.0, 1.0 - se2 / (mean * mean)), 0.0)
    return mean * keep


def _corrected_bias(layer, node, fmt: str, input_error: np.ndarray) -> np.ndarray | None:
    """Layer's int32 bias moved by `Wq (E[x] - E[xq])` (`input_error`: per sample and input
    channel), shrunk (`shrunk_mean`); None when nothing moves or the result would leave int32
    beside the worst-case accumulator."""
    sums = tap_sums(node, fmt, layer.weights.astype(np.int64)).astype(np.float64)
    per_sample = contract(node, sums, input_error)  # in units of s_w[c]
    if per_sample is None:
        return None
    s_w = layer.weight_scales.astype(np.float64)  # one per channel, or one
    scale = bias_scale(layer.input_scale, layer.weight_scales).astype(np.float64)
    steps = round_half_away(shrunk_mean(per_sample) * s_w / scale).astype(np.int64)
    if not np.any(steps):
        return None
    bias = layer.bias.astype(np.int64) + steps
    axis = layer.channel_axis % layer.weights.ndim
    other = tuple(i for i in range(layer.weights.ndim) if i != axis)
    worst = np.abs(layer.weights).sum(axis=other, dtype=np.int64) * 255
    if np.any(np.abs(bias) + worst > INT32_MAX):
        return None
    return bias.astype(np.int32)
