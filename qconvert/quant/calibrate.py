"""Calibration: run the float model over the calibration samples and collect what the plan needs.

`calibrate` feeds every sample through the float reference executor (or onnxruntime,
`ort_engine`), batch by batch, and gathers each activation's range (`ranges.RangeCollector`,
`--method`) and, for bias correction, each layer's per-channel input means, over all samples
and per sample over the first few (`bias_correction.ChannelMeans`). On the way it keeps the float model's outputs on the first
samples and its activations on the first few of them: the report's float reference, so the
report (`report`) need not run the float model again. A model with state (resource variables,
or an LSTM, whose hidden and cell state TFLite carries from one invoke to the next) runs its
samples as consecutive frames of one stream, the state carried (`float_stream`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert.ir import Graph, Model

from .footprint import activation_bytes
from .plan import clamped_inputs
from .ranges import RangeCollector
from .tensor_stats import tensor_stats

LAYER_REFERENCE_BYTES = 64 << 20  # float activations kept from calibration for the ONNX report


@dataclass
class Calibration:
    """What a calibration run measured: `ranges` {activation: (lo, hi)} (as `--method` takes
    them), `extremes` {activation: (min, max)} (the values seen), `means` (bias correction's
    per-channel input means, None without it), `reference` (the float outputs on the first
    samples, None when none were kept), `layer_reference` (float activations on the first
    few samples) and `head_means` (per layer, each of the first `head` samples' input means:
    the empirical correction's float side, `propagated_bias`)."""

    ranges: dict
    extremes: dict
    means: dict | None
    reference: dict | None
    layer_reference: dict
    head_means: dict | None = None
    head: int = 0


def calibrate(model: Model, calibration: dict, options, keep_first: int,
              progress=None) -> Calibration:
    """Run the float `model` over every sample of `calibration` ({input: array (N, ...)}) with
    the `QuantizeOptions` `options` (method, percentile, bias correction, batch size, engine);
    keep the float reference on the first `keep_first` samples (0: none)."""
    collector = RangeCollector(options.method, options.percentile, needed_ranges(model.graph))
    observe = collector.observe
    means = None
    head = 0
    if options.bias_correction:
        from .bias_correction import ChannelMeans
        from .propagated_bias import correction_samples

        head = correction_samples(model.graph, len(next(iter(calibration.values()))),
                                  options, keep_first)
        means = ChannelMeans(model.graph, model.format, head)

        def observe(name, array):  # one pass over a layer input for both (`tensor_stats`)
            stats = None
            if means.summed_by_stats(name, array) and collector.wants(name, array):
                stats = tensor_stats(array, collector.method != "minmax", True)
            collector.observe(name, array, stats)
            means.observe(name, array, None if stats is None else stats.channel_sums)

    quiet = clamped_inputs(model.graph)  # ranges the clamps replace...
    if means is not None:  # ...unless bias correction reads them
        quiet = quiet - set(means.wanted) - {means.first_input}
    with np.errstate(all="ignore"):  # an overflow is reported by the range check, in one line
        reference, layers = run_calibration(model, calibration, options.batch_size, observe,
                                            progress, keep_first, options.engine, quiet)
    return Calibration(collector.ranges(),
                       {k: (collector.lo[k], collector.hi[k]) for k in collector.lo},
                       None if means is None else means.means(), reference, layers,
                       None if means is None else means.head_means(), head)


def needed_ranges(graph) -> set:
    """The float activations whose calibrated range the plan reads: all but those a clamping
    activation gives its own range (`plan.clamped_inputs`)."""
    names = {n for n, t in graph.tensors.items()
             if t.data is None and t.dtype.startswith("float")}
    return names - clamped_inputs(graph)


def reference_extent(graph, samples: int) -> tuple:
    """(samples, fraction) of the float activations the report keeps as its per-layer
    reference: as many of the first `samples` as LAYER_REFERENCE_BYTES hold, at least one; when
    one sample is larger than that (a ResNet-50 at 224 x 224: 101 MB), the leading `fraction` of
    each tensor's values of the first sample, so the reference stays within the budget."""
    size = max(1, activation_bytes(graph))
    kept = max(1, min(samples, LAYER_REFERENCE_BYTES // size))
    return kept, min(1.0, LAYER_REFERENCE_BYTES / size) if kept == 1 else 1.0


def first_samples(store: dict, count: int, skip=frozenset(), fraction: float = 1.0):
    """An observer that appends copies of each float tensor's samples to `store` ({name: list of
    arrays}) until it holds the first `count` (the observer sees batches in order); tensors in
    `skip` (those that get no int8 value of their own) are not kept. `fraction` < 1 (with
    `count` 1): only the leading fraction of the first sample's values, as an array [1, m]
    (`report.EndToEnd` compares that prefix)."""
    held: dict = {}

    def keep(name, array):
        have = held.get(name, 0)
        if array.dtype.kind != "f" or not array.ndim or have >= count or name in skip:
            return
        if fraction < 1.0:
            first = array[:1].reshape(1, -1)
            part = np.array(first[:, :max(1, int(first.shape[1] * fraction))])
        else:
            part = np.array(array[:count - have])
        store.setdefault(name, []).append(part)
        held[name] = have + len(part)

    return keep


def joined(store: dict) -> dict:
    """{name: one array} from `first_samples`' lists, emptying them as it goes (never two
    copies of everything at once)."""
    result = {}
    for name in list(store):
        parts = store.pop(name)
        result[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return result


def run_calibration(model: Model, calibration: dict, batch_size: int, observe, progress,
                    keep_first: int, engine: str = "numpy", unobserved=frozenset()) -> tuple:
    """Run the float model over every calibration sample for `observe`; return its outputs on
    the first `keep_first` samples and its float activations on the first few of them, as many
    as LAYER_REFERENCE_BYTES hold (at least one): the report's float reference, so the report
    need not run the float model again. (None, {}) when `keep_first` is 0. `engine`: the
    float executor, or onnxruntime (`ort_engine`). The head is sliced from the first whole
    batch, not run as a batch of its own: 16 samples are one run, not 2 + 14 (whose small
    batch multiplies narrow matrices and has every tensor sampled by the histograms again).
    `unobserved`: tensors `observe` does not need (the executor may then run a convolution and
    its clamp together: `run_float`); the report's reference keeps what it compares."""
    from qconvert.executor.float_executor import run_float_batched
    from qconvert.executor.streaming import carries_state

    extra = {}
    stream = carries_state(model)
    if stream:
        run_float_batched = float_stream  # noqa: F811  (frames in order, the state carried)
    total = len(next(iter(calibration.values())))
    head = min(total, keep_first)
    if not stream:  # the report's reference needs what it compares, first batch too
        extra["unobserved"] = frozenset(unobserved) & (unreported(model) if head else
                                                       frozenset(unobserved))
    reference, layers = None, {}
    watch = observe
    if head:
        kept, fraction = reference_extent(model.graph, head)
        keep = first_samples(layers, kept, unreported(model), fraction)

        def watch(name, array):
            observe(name, array)
            keep(name, array)

    if engine == "onnxruntime":  # one session, one pass: its outputs kept on the head only
        from .ort_engine import run_ort_batched

        outputs = run_ort_batched(model, calibration, batch_size, observe=watch,
                                  progress=progress, collect=head)
        return (outputs if head else None), joined(layers)
    first = max(head, min(total, batch_size)) if head else 0  # the head's run: a whole batch

    def advance(start):  # progress over all the samples
        return None if progress is None else (lambda done, _n: progress(start + done, total))

    if first:
        outputs = run_float_batched(model, {k: v[:first] for k, v in calibration.items()},
                                    batch_size, observe=watch, progress=advance(0), **extra)
        reference = {k: v[:head] for k, v in outputs.items()}
        layers = joined(layers)
    if first < total:
        run_float_batched(model, {k: v[first:] for k, v in calibration.items()}, batch_size,
                          observe=observe, progress=advance(first), collect=False, **extra)
    return reference, layers


def frames(feeds: dict) -> list:
    """{input: array (N, ...)} -> N single-sample feeds, in order (a stream of frames)."""
    n = len(next(iter(feeds.values())))
    return [{k: v[i:i + 1] for k, v in feeds.items()} for i in range(n)]


def float_stream(model: Model, feeds: dict, batch_size: int = 1, observe=None, progress=None,
                 collect: bool = True, opset=None) -> dict:
    """`run_float_batched` for a model with state (resource variables, an LSTM's variable
    state): the samples are consecutive frames of one stream, run one at a time with the state
    carried (`run_frames`)."""
    from qconvert.executor.float_executor import run_float
    from qconvert.executor.streaming import run_frames

    stream = frames(feeds)
    outs = run_frames(model, stream, lambda g, f, o, k, c: run_float(g, f, o, k, carry=c),
                      observe)
    if progress is not None:
        progress(len(stream), len(stream))
    if not collect:
        return {}
    return {name: np.concatenate([o[name] for o in outs]) for name in model.graph.outputs}


def unreported(model: Model) -> set:
    """Activations the report never compares: in ONNX QDQ, those a clamp absorbs (no Q/DQ pair
    of their own); TFLite has an int8 value for every activation."""
    return clamped_inputs(model.graph) if model.format == "onnx" else set()


def float_reference(float_graph, feeds: dict, batch_size: int, opset, skip=frozenset(),
                    float_model: Model | None = None) -> tuple:
    """The float model's outputs on `feeds` and its activations on the first samples (as
    `run_calibration` keeps them), for a report on data calibration did not see (`--eval`).
    `float_model` (a streaming model with its init subgraphs) runs frame by frame, and so does
    a graph with an op's variable state (an LSTM)."""
    from qconvert.executor.float_executor import run_float_batched
    from qconvert.executor.streaming import has_variable_state

    if float_model is None and isinstance(float_graph, Graph) and has_variable_state(
            Model("tflite", [float_graph], {})):
        float_model = Model("tflite", [float_graph], {})
    if float_model is not None:
        run_float_batched = float_stream  # noqa: F811
        float_graph = float_model

    n = len(next(iter(feeds.values())))
    kept, fraction = reference_extent(
        float_graph.graph if isinstance(float_graph, Model) else float_graph, n)
    layers: dict = {}
    outputs = run_float_batched(float_graph, feeds, batch_size,
                                observe=first_samples(layers, kept, skip, fraction), opset=opset)
    return outputs, joined(layers)
