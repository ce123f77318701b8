"""The integer reference executor: runs an int8 TFLite graph exactly as TFLite Micro does.

    outputs = run_int8(graph, {"input": x_int8})            # {output name: array}

`run_int8` evaluates the nodes in order with `int_kernels.INT_KERNELS`, deriving each node's
parameters (`qconvert.int8.prepare.layer_params`) once per run the way TFLM's Prepare does.
Nodes that read or write an int16 activation (16x8 layers: int16 activations, int8 weights, in
a 16x8 model or a mixed one) run with `int16_kernels.INT16_KERNELS` and their 16x8 parameters.
Outputs are bit for bit those of the TFLite Micro interpreter with its reference kernels
(checked by tests/executor/test_int_executor.py and tests/executor/test_int16_executor.py). `rounding="single"` swaps TFLite's double-rounding requantization
for CMSIS-NN's single rounding (see `int_kernels`). `observe(name, array)` is called for every
graph input (as fed) and every tensor a node produces, in execution order (the hook of
`quant.ranges.RangeCollector`).

Feeds are the model's input arrays in their declared dtype (int8 normally; float32 for a model
with a QUANTIZE at its input); integer feeds of another integer dtype are accepted when their
values fit. Outputs keep the dtype of the graph output tensors (int8, or float32 after a
DEQUANTIZE).

Batch rule. A feed may carry N samples on axis 0 when the input's declared first dimension is
1 or dynamic; all inputs must then carry the same N. Every op runs on the N samples at once, and
output n equals what TFLM computes for sample n alone. Ops that compute their output shape from
attributes (Reshape, Squeeze) are evaluated for one sample, and the leading 1 of that result
becomes N: a Reshape to a hard-coded [1, 64] gives [N, 64]. A one-sample result that does not
start with 1 (the batch folded into another axis), and ops that would mix samples (Concat, Pad,
Mean, Gather along axis 0, a Transpose that moves axis 0, a FullyConnected that flattens more
than the batch into its rows) raise `QConvertError` for N > 1: run those models one sample at a
time. With N == 1 nothing is rewritten: the semantics are TFLite's exactly.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.int8.fixed_point import ROUNDINGS
from qconvert.int8.prepare import layer_params
from qconvert.ir import Graph
from qconvert.ir.graph import list_ops

from .batch_axis import run_sample_by_sample, samples_to_split
from .int16_kernels import INT16_KERNELS, is_int16_node
from .streaming import STATE_SLOTS, store_final_state
from .int_kernels import INT_KERNELS, IntContext

__all__ = ["INT_KERNELS", "INT16_KERNELS", "run_int8", "supported_ops", "supported_ops16"]


def supported_ops() -> list:
    """IR op names the integer executor can run (int8; `supported_ops16` for 16x8)."""
    return sorted(INT_KERNELS)


def supported_ops16() -> list:
    """IR op names the integer executor can run with int16 activations (16x8)."""
    return sorted(INT16_KERNELS)


def _kernels(graph, node) -> dict:
    """The kernel table of `node`: the 16x8 one (`int16_kernels`) when it touches int16."""
    return INT16_KERNELS if is_int16_node(graph, node) else INT_KERNELS


def run_int8(graph, feeds: dict, rounding: str = "double", observe=None,
             params: dict | None = None, carry: dict | None = None) -> dict:
    """Run `graph` (an int8 TFLite IR Graph, or a Model) on `feeds`; {output name: array}.
    `params`: a dict shared by runs of the same, unchanged graph, which keeps each node's
    Prepare-time parameters (`layer_params`) for the next run instead of deriving them again
    (small: the weights stay the graph's own, converted per run). N samples given to a
    fixed-batch model whose ops use axis 0 run one at a time (`batch_axis`). `carry`: an op's
    variable state from call to call (an LSTM's hidden and cell state, `streaming.STATE_SLOTS`):
    read from it when there, the final state written into it, as TFLite Micro keeps its
    variable tensors between invokes (None: every call from the reset state)."""
    graph = _graph(graph)
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    _check_ops(graph)
    values, batch = _feeds(graph, feeds)
    count = samples_to_split(graph, values) if batch > 1 and carry is None else 0
    if count:  # a fixed batch of 1 whose ops use axis 0 (batch_axis): one sample at a time
        return run_sample_by_sample(
            lambda part, seen: run_int8(graph, part, rounding, seen, params), graph, values,
            count, observe)
    ctx = IntContext(rounding=rounding, batch=batch)
    if observe is not None:
        for name in graph.inputs:
            observe(name, values[name])
    last_use = _last_use(graph)
    keep = set(graph.outputs)
    for step, node in enumerate(graph.nodes):
        inputs = [None if n is None else values[n] if n in values else
                  carry[n] if carry is not None and n in carry else graph.tensors[n].data
                  for n in node.inputs]
        p = None if params is None else params.get(id(node))
        if p is None:
            p = layer_params(graph, node)
            if params is not None:
                params[id(node)] = p
        try:
            outputs = _kernels(graph, node)[node.op](node, inputs, p, ctx)
        except QConvertError:
            raise
        except (ValueError, IndexError, NotImplementedError) as exc:
            raise QConvertError(f"{node.op} {node.name!r}: {exc}") from exc
        for name, array in zip(node.outputs, outputs):
            if name is None:
                continue
            declared = graph.tensors[name].dtype
            if array.dtype != np.dtype(declared):
                raise QConvertError(f"{node.op} {node.name!r} produced {array.dtype} for "
                                    f"{name!r}, declared {declared}")
            values[name] = array
            if observe is not None:
                observe(name, array)
        if carry is not None and node.op in STATE_SLOTS and not node.opaque:
            store_final_state(graph, node, outputs[len(node.outputs):], carry)
        for name in node.present_inputs():
            if last_use.get(name) == step and name not in keep:
                values.pop(name, None)
    return {name: values[name] for name in graph.outputs}


def _graph(graph) -> Graph:
    return graph.graph if hasattr(graph, "graphs") else graph


def _check_ops(graph) -> None:
    """Refuse unsupported ops, naming all of them (with counts) at once."""
    counts = graph.op_counts(lambda node: node.opaque or node.op not in _kernels(graph, node))
    if counts:
        raise QConvertError(f"the integer executor does not support: {list_ops(counts)}")


def _last_use(graph) -> dict:
    last: dict = {}
    for step, node in enumerate(graph.nodes):
        for name in node.present_inputs():
            if graph.tensors[name].data is None:
                last[name] = step
    return last


def _feeds(graph, feeds: dict) -> tuple:
    """Feed arrays in their declared dtypes, and the batch size N they carry on axis 0."""
    missing = [n for n in graph.inputs if n not in feeds]
    if missing:
        raise QConvertError(f"no feed for graph input(s) {', '.join(map(repr, missing))}")
    values, batches = {}, set()
    for name in graph.inputs:
        t = graph.tensors[name]
        a = np.asarray(feeds[name])
        want = np.dtype(t.dtype)
        if a.dtype != want:
            if a.dtype.kind in "iu" and want.kind in "iu":
                info = np.iinfo(want)
                if a.size and (a.min() < info.min or a.max() > info.max):
                    raise QConvertError(f"feed {name!r} has values outside {want}")
            elif not (a.dtype.kind == "f" and want.kind == "f"):
                raise QConvertError(f"feed {name!r} is {a.dtype}, the model input is {want}")
            a = a.astype(want)
        batches.add(_batch_of(name, t.shape, a.shape))
        values[name] = a
    if len(batches) > 1:
        raise QConvertError(f"feeds carry different batch sizes {sorted(batches)}")
    return values, (batches.pop() if batches else 1)


def _batch_of(name, declared, shape) -> int:
    if declared is None:
        return 1
    declared = tuple(declared)
    static = [isinstance(d, (int, np.integer)) for d in declared]
    if len(shape) != len(declared) or any(
            s and int(d) != n for d, s, n in zip(declared[1:], static[1:], shape[1:])):
        raise QConvertError(f"feed {name!r} has shape {tuple(shape)}, the model input is "
                            f"{tuple(d if s else None for d, s in zip(declared, static))}")
    if not declared:
        return 1
    if static[0] and int(declared[0]) == shape[0]:
        return 1
    if static[0] and int(declared[0]) != 1:
        raise QConvertError(f"feed {name!r} has {shape[0]} rows on axis 0, the model input "
                            f"has {declared[0]}")
    return int(shape[0])
