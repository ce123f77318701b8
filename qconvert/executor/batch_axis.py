"""Which nodes of a fixed-batch graph treat axis 0 as data, not as the batch.

`run_float_batched` feeds N samples on axis 0 of a model that declares a batch of 1 (batch
mode: see `float_executor`). That is sound only while every op leaves axis 0 alone. A model
exported with a fixed batch of 1 may well not: an unstacking export squeezes the batch axis
([1, T, F] -> [T, F]), a time-major LSTM reshapes [1, T, F] to [T, 1, F], a reduction or a
concatenation may run over axis 0. Batched, such a model fails ("Squeeze of an axis whose size
is not 1", "cannot reshape") or, worse, mixes the samples. `sample_mixing_node` finds the first
such node from a table of rules, one per op (`RULES`), each reading the node's constant axis
parameters against its input's declared shape:

- Squeeze of axis 0 (or of every size-1 axis); Unsqueeze / ExpandDims at axis 0;
- Reshape whose constant target moves the leading 1 (its first entry neither 1, 0 nor -1);
- Transpose whose permutation moves axis 0;
- reductions (Mean, ReduceMean / Max / Min / Sum / Prod) over axis 0 or over every axis;
  Softmax along axis 0; Flatten at axis 0;
- Concat, Pack, Unpack, Split (SplitEqual, SplitSizes), Gather along axis 0; a Concat or Pack
  with a constant input (or one computed from constants only) along any axis (the constant holds one sample's leading 1: a batch of
  samples cannot be joined with it, though the model runs on its one sample);
- UnidirectionalSequenceLSTM with `time_major` (axis 0 is time), ONNX LSTM (axis 0 is time).

Only a model whose inputs all declare a static leading dimension is concerned (`fixed_batch`):
a dynamic batch is the model's own promise that its ops follow axis 0 as the batch.

`run_float_batched` picks chunks of one sample for such a model; the executors' own entry
points (`run_float`, `run_int8`), which callers also hand N samples at once (the quantize
report, bias correction, `--verify`), split the feeds with `run_sample_by_sample`.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Graph


def _const(graph: Graph, node, slot: int):
    name = node.inputs[slot] if slot < len(node.inputs) else None
    return None if name is None else graph.constant(name)


def _rank(graph: Graph, node) -> int | None:
    t = graph.tensors.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    return None if t is None or t.shape is None else len(t.shape)


def _axes_touch_zero(axes, rank, empty_means_all: bool) -> bool:
    if axes is None:
        return empty_means_all
    axes = np.asarray(axes).reshape(-1)
    if axes.size == 0:
        return empty_means_all
    return any(int(a) == 0 or (rank is not None and int(a) == -rank) for a in axes)


def _axis_input(slot: int, empty_means_all: bool = False):
    def rule(graph, node):
        return _axes_touch_zero(_const(graph, node, slot), _rank(graph, node), empty_means_all)
    return rule


def _axis_attr(name: str, default, empty_means_all: bool = False):
    def rule(graph, node):
        value = node.attrs.get(name, default)
        return _axes_touch_zero(value, _rank(graph, node), empty_means_all)
    return rule


def _squeeze(graph, node):
    axes = _const(graph, node, 1)
    if axes is None:
        return True  # every size-1 axis: the batch of 1 too
    return _axes_touch_zero(axes, _rank(graph, node), False)


def _unsqueeze(graph, node):
    axes = _const(graph, node, 1)
    if axes is None:
        return False
    rank = _rank(graph, node)
    out_rank = None if rank is None else rank + np.asarray(axes).size
    return _axes_touch_zero(axes, out_rank, False)


def _reshape(graph, node):
    target = _const(graph, node, 1)
    if target is None or np.asarray(target).size == 0:
        return False
    return int(np.asarray(target).reshape(-1)[0]) not in (1, 0, -1)


def _transpose(graph, node):
    perm = _const(graph, node, 1)
    return perm is not None and np.asarray(perm).size > 0 and int(np.asarray(perm)[0]) != 0


def _reduction(graph, node):
    """Over axis 0, or over every axis (no axes, unless `noop_with_empty_axes`)."""
    return _axes_touch_zero(_const(graph, node, 1), _rank(graph, node),
                            not node.attrs.get("noop_with_empty_axes", 0))


def _flatten(graph, node):
    return int(node.attrs.get("axis", 1)) == 0


def _sample_free(graph: Graph, name: str, depth: int = 0) -> bool:
    """True when tensor `name` depends on no graph input: a constant, or computed from
    constants only (a DequantizeLinear of an int8 constant), so it has no batch of N."""
    if name in graph.inputs:
        return False
    producer = graph.producer(name)
    if producer is None:
        return True
    if depth > 8:  # a long constant chain: treat it as data (batching stays the default)
        return False
    return all(_sample_free(graph, n, depth + 1) for n in producer.inputs if n)


def _joins(axis_rule):
    """Concat / Pack: along axis 0, or with a constant input (which has no batch of N)."""
    def rule(graph, node):
        return axis_rule(graph, node) or any(
            name and _sample_free(graph, name) for name in node.inputs)
    return rule


def _lstm_time_major(graph, node):
    return bool(node.attrs.get("time_major", False))


RULES = {
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "ExpandDims": _unsqueeze,  # TFLite EXPAND_DIMS: the axis input, of the output's rank
    "Reshape": _reshape,
    "Transpose": _transpose,
    **{op: _reduction
       for op in ("Mean", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd")},
    "Softmax": _axis_attr("axis", -1),
    "Flatten": _flatten,
    "Concat": _joins(_axis_attr("axis", 0)),
    "Pack": _joins(_axis_attr("axis", 0)),
    "Unpack": _axis_attr("axis", 0),
    "Split": _axis_attr("axis", 0),
    "SplitEqual": _axis_input(0),
    "SplitSizes": _axis_input(2),
    "Gather": _axis_attr("axis", 0),
    "UnidirectionalSequenceLSTM": _lstm_time_major,
    "LSTM": lambda graph, node: True,
}


def fixed_batch(graph: Graph) -> bool:
    """True when every graph input declares a static leading dimension (a fixed batch)."""
    if not graph.inputs:
        return False
    for name in graph.inputs:
        t = graph.tensors[name]
        if not t.shape or not isinstance(t.shape[0], (int, np.integer)):
            return False
    return True


def samples_to_split(graph: Graph, feeds: dict) -> int:
    """N when `feeds` carry N > 1 samples on axis 0 of inputs that declare a batch of 1 and
    fixed-batch `graph` has a node that treats axis 0 as data (they must run one at a time);
    0 otherwise (the feeds' batch is checked first: a one-sample run costs no graph scan)."""
    counts = set()
    for name in graph.inputs:
        t = graph.tensors.get(name)
        a = feeds.get(name)
        if t is None or a is None or not t.shape or np.ndim(a) == 0:
            return 0
        if not isinstance(t.shape[0], (int, np.integer)) or int(t.shape[0]) != 1:
            return 0
        counts.add(int(np.shape(a)[0]))
    if len(counts) != 1 or max(counts) <= 1 or sample_mixing_node(graph) is None:
        return 0
    return counts.pop()


def run_sample_by_sample(run, graph: Graph, feeds: dict, count: int, observe=None) -> dict:
    """`run(feeds_k, observe_k)` on each of `count` samples of `feeds` (axis 0 of the graph
    inputs) in turn; the results concatenated along axis 0 (a result that is the same object
    every time, a kept constant, is returned once; a result whose one-sample shape does not
    start with 1 is refused: N of them could not be told apart). `observe(name, array)` then sees every
    tensor once with all samples, as one batched run would have shown it."""
    seen: dict = {}

    def collect(name, array):
        seen.setdefault(name, []).append(array)

    results: dict = {}
    for k in range(count):
        part = {name: (a[k:k + 1] if name in graph.inputs else a) for name, a in feeds.items()}
        for name, value in run(part, collect if observe is not None else None).items():
            results.setdefault(name, []).append(value)
    for name, parts in seen.items():
        observe(name, _joined(parts))
    for name, parts in results.items():
        if not all(p is parts[0] for p in parts) and (np.ndim(parts[0]) == 0
                                                      or np.shape(parts[0])[0] != 1):
            raise QConvertError(f"output {name!r} of one sample has shape "
                                f"{list(np.shape(parts[0]))}, no batch axis to stack "
                                f"{count} samples on: run the samples one at a time")
    return {name: _joined(parts) for name, parts in results.items()}


def _joined(parts: list):
    if all(p is parts[0] for p in parts):
        return parts[0]
    return np.stack(parts) if np.ndim(parts[0]) == 0 else np.concatenate(parts)


def sample_mixing_node(graph: Graph):
    """The first node of fixed-batch `graph` that treats axis 0 as data (module docstring), or
    None when batch mode is sound (or the batch is dynamic)."""
    if not fixed_batch(graph):
        return None
    for node in graph.nodes:
        rule = None if node.opaque else RULES.get(node.op)
        if rule is not None and rule(graph, node):
            return node
    return None
