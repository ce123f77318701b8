"""The float reference executor: run an IR graph on numpy inputs, node by node.

    outputs = run_float(model_or_graph, {"input": x}, observe=None, keep=())
    outputs = run_float_batched(model_or_graph, {"input": xs}, batch_size=32, observe=...,
                                progress=lambda done, total: ...)

Each node runs with its kernel from `float_kernels.KERNELS` (ONNX / TFLite semantics in
float32, as onnxruntime and LiteRT compute them up to float rounding). Kernels that need facts
from the graph (quantization parameters, the ONNX opset) get a `KernelContext` (see
`float_kernels`); a TFLite Quantize / Dequantize gets its tensor's scale and zero point as
inputs, the form of ONNX's (`float_kernels_quant.implied_inputs`). An opaque node, or any op without a kernel, makes `run_float` raise
`UnsupportedOpsError` before anything runs, naming every such op with its count.

Memory: each intermediate tensor is dropped as soon as its last reader has run (reference
counts), so the peak is a few activations, not the whole network. Graph outputs and tensors named
in `keep` are kept and returned. Results may be views of inputs or constants (a Reshape of a
feed, an Identity of a weight); copy before writing into them.

`observe(name, array)` is called once for every graph input and every tensor a node produces
(optional outputs that are absent excepted), right after it exists: the calibration hook. It
must not modify the array (an observer may keep a reference: see below). An LSTM's cell state
(a variable input it updates) is observed too, with its values at every step
(`float_kernels_lstm.OBSERVED_STATES`).

QuantizeLinear -> DequantizeLinear. A QuantizeLinear (per tensor, constant scalar scale and int8
/ uint8 zero point, float32 input) whose output is read only by DequantizeLinear nodes with the
same scale and zero point tensors, and is not a graph output or kept, is not run: each of those
DequantizeLinear computes the pair's result from the float input at once
(`float_kernels.fake_quantize`, bit for bit the two kernels' result). The int8 tensor between
them is never made, so `observe` does not see it; the result goes into the float input when
that is the executor's own dead array (as "In place" below).

In place. An elementwise op (Relu, Relu6, Clip, Add, Sub, Mul; `IN_PLACE`) whose input is the
executor's own array and dies with the op writes its result into it instead of a new array: the
same values (the same numpy ufuncs), no allocation, one pass less over memory; a TFLite Add /
Sub / Mul with a fused clamp (RELU, RELU6, RELU_N1_TO_1) clamps in the same pass. "Own" means: a
tensor some node produced (never a feed, a constant, a graph output or a kept tensor), read by
this node only, an array owning its memory, and referenced by nothing else (no view of it, no
observer holding it: checked with its reference count).

Clamps in the producer. A Conv2D, Add, Sub or Mul (no fused activation of its own) whose
output is read only by a Relu or Relu6, is not a graph output or kept, and is among the
caller's `unobserved` tensors (calibration: a range the clamp replaces, a value no statistic
needs) runs the clamp itself: the convolution on each piece of its output while that is in
cache, the elementwise op in the same pass as its in-place result (or on its new array when it
cannot run in place). The clamp's output is the producer's array, the clamp node does not run,
and the producer's own output is never stored nor observed. The same values as the two nodes
(the same numpy ufuncs), one pass less over memory.

Batching rule. Feeds may carry N samples on axis 0 where the model declares a batch of 1 (or a
dynamic batch). The executor then runs in *batch mode*: most ops are batch-agnostic, but a
Reshape whose target shape was written for one sample hard-codes the batch as a leading 1 (a
TFLite `new_shape` [1, 64], an ONNX constant [1, -1], a shape computation fold-constants turned
into a constant). In batch mode, a Reshape whose input has N on axis 0 and whose target's leading
dimension is a literal 1 gets N there instead: [1, 64] -> [N, 64], [1, -1] -> [N, -1]. So a
batch of N gives the N single-sample results stacked. Targets led by -1 or 0 (copy) already
follow the batch. Ops that hard-code the batch elsewhere (a Concat with a [1, ...] constant, an
Expand / ConstantOfShape to a constant shape, a Reshape folding the batch into another axis) are
not rewritten; they fail with a clear error or, for a shape that broadcasts, give the batch-1
model's answer. A model whose declared batch is a fixed B > 1 must be fed exactly B. A TFLite
SLICE of begin 0 and size 1 on axis 0 takes the whole batch in batch mode, as such a Reshape
does. `run_float_batched` does not use batch mode for a fixed-batch model with an op that
treats axis 0 as data (`batch_axis`): it runs its samples one at a time.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Callable

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Graph, Model
from qconvert.ir.graph import list_ops
from qconvert.schemas.activations import ACTIVATION_RANGES, activation_of_op, clamp_ops

from .float_kernels import (CONTEXT_KERNELS, IMPLIED_SLOTS, KERNELS, KernelContext,
                            fake_quantize, implied_inputs)
from .batch_axis import (run_sample_by_sample, sample_mixing_node,
                         samples_to_split)
from .streaming import STATE_SLOTS, store_final_state
from .bound_rows import maximum, minimum
from .float_kernels_base import clamp
from .float_kernels_lstm import OBSERVED_STATES
from .parallel import elementwise, one_blas_thread

__all__ = ["run_float", "run_float_batched", "unsupported_ops", "UnsupportedOpsError",
           "ExecutionError"]

_KERNEL_ERRORS = (ValueError, IndexError, NotImplementedError, ZeroDivisionError, TypeError)


class UnsupportedOpsError(QConvertError):
    """The graph has ops the float executor cannot run; `ops` maps each op (as shown to users)
    to its number of nodes."""

    def __init__(self, ops: dict):
        self.ops = dict(ops)
        super().__init__(f"the float executor cannot run {len(self.ops)} op type(s): "
                         f"{list_ops(self.ops)}")


class ExecutionError(QConvertError):
    """Bad feeds, or a node the executor could not compute; names the node and its op."""


def unsupported_ops(graph: Graph) -> dict:
    """{op label: count} of the nodes of `graph` the executor has no kernel for."""
    counts: Counter = Counter()
    for node in graph.nodes:
        if node.opaque:
            counts[node.label] += 1
        elif KERNELS.get(node.op) is None:
            counts[node.op] += 1
    return dict(counts)


def variable_value(t) -> np.ndarray:
    """A TFLite variable tensor's value at the first call: its initial buffer, else zeros
    (UNIDIRECTIONAL_SEQUENCE_LSTM's state)."""
    init = t.extra.get("variable_init")
    shape = tuple(int(d) for d in t.shape)
    if init:
        return np.frombuffer(init, t.dtype).reshape(shape)
    return np.zeros(shape, t.dtype)


def _split(model_or_graph, opset):
    if isinstance(model_or_graph, Model):
        graph = model_or_graph.graph
        if opset is None and model_or_graph.format == "onnx":
            opset = model_or_graph.meta.get("opset")
        return graph, opset
    if isinstance(model_or_graph, Graph):
        return model_or_graph, opset
    raise TypeError(f"run_float needs a Model or a Graph, not {type(model_or_graph).__name__}")


def _declared_batch(t):
    """The declared leading dimension: an int, or None when dynamic / unknown / rank 0."""
    if not t.shape:
        return None
    d = t.shape[0]
    return int(d) if isinstance(d, (int, np.integer)) else None


def _prepare_feeds(graph: Graph, feeds: dict):
    """Checked feed arrays and the run's batch N (None unless batch mode)."""
    missing = [name for name in graph.inputs if name not in feeds]
    if missing:
        raise ExecutionError(f"no feed for graph input(s) {', '.join(map(repr, missing))}")
    arrays, batch = {}, None
    for name in graph.inputs:
        t = graph.tensors[name]
        a = np.asarray(feeds[name])
        declared = np.dtype(t.dtype)
        if a.dtype != declared:
            if a.dtype.kind != declared.kind or (declared.kind == "f" and a.dtype.itemsize > 8):
                raise ExecutionError(f"input {name!r} is {t.dtype}; the feed is {a.dtype}")
            a = a.astype(declared)
        if t.shape is not None:
            if a.ndim != len(t.shape):
                raise ExecutionError(f"input {name!r} has rank {len(t.shape)} "
                                     f"{list(t.shape)}; the feed has shape {list(a.shape)}")
            for i, d in enumerate(t.shape[1:], start=1):
                if isinstance(d, (int, np.integer)) and a.shape[i] != d:
                    raise ExecutionError(f"input {name!r} is {list(t.shape)}; the feed has "
                                         f"shape {list(a.shape)}")
            lead = _declared_batch(t)
            if a.ndim and lead not in (None, 1):
                if a.shape[0] != lead:
                    raise ExecutionError(f"input {name!r} has a fixed batch of {lead}; the feed "
                                         f"has {a.shape[0]}")
            elif a.ndim and a.shape[0] != 1:
                if batch is not None and batch != a.shape[0]:
                    raise ExecutionError(f"feeds disagree on the batch size ({batch} and "
                                         f"{a.shape[0]})")
                batch = a.shape[0]
        arrays[name] = a
    return arrays, batch


def _batch_reshape(node, inputs, batch: int):
    """Reshape inputs with a leading target 1 replaced by the batch (see the module docstring)."""
    x = inputs[0]
    if x.ndim == 0 or x.shape[0] != batch:
        return inputs
    shape = inputs[1] if len(inputs) > 1 else None
    if shape is None:
        return inputs
    dims = np.array(shape, dtype=np.int64).reshape(-1)
    if dims.size == 0 or dims[0] != 1:
        return inputs
    dims[0] = batch
    return [x, dims] + list(inputs[2:])


def _batch_slice(node, inputs, batch: int):
    """SLICE inputs taking the one sample of axis 0 (begin 0, size 1) made to take the whole
    batch (size -1), as a Reshape's leading 1 is (see the module docstring)."""
    x = inputs[0]
    if x.ndim == 0 or x.shape[0] != batch or len(inputs) < 3 or inputs[1] is None \
            or inputs[2] is None:
        return inputs
    begin = np.array(inputs[1], dtype=np.int64).reshape(-1)
    size = np.array(inputs[2], dtype=np.int64).reshape(-1)
    if begin.size == 0 or begin[0] != 0 or size[0] != 1:
        return inputs
    size[0] = -1
    return [x, begin, size] + list(inputs[3:])


def _batch_expand_dims(node, inputs, batch: int):
    """EXPAND_DIMS inputs inserting the new axis after the batch rather than before it: one
    sample [1, ...] expanded at axis 0 is [1, 1, ...], so N samples give [N, 1, ...]."""
    x = inputs[0]
    if x.ndim == 0 or x.shape[0] != batch or inputs[1] is None:
        return inputs
    axis = np.array(inputs[1], dtype=np.int64).reshape(-1)
    if axis.size != 1 or int(axis[0]) % (x.ndim + 1) != 0:
        return inputs
    return [x, np.array([1], np.int64)] + list(inputs[2:])


# ops whose inputs name the batch's leading 1 of one sample: rewritten for a batch of N
_BATCH_INPUTS = {"Reshape": _batch_reshape, "SliceBySize": _batch_slice,
                 "ExpandDims": _batch_expand_dims}


def _clip_in_place(node, x, inputs):
    lo, hi = _opt_input(inputs, 1), _opt_input(inputs, 2)
    if any(b is not None and np.ndim(b) for b in (lo, hi)):
        return None
    lo = None if lo is None else lo.astype(x.dtype)
    hi = None if hi is None else hi.astype(x.dtype)

    def run(a, out):  # the max first, then the min, as the kernel
        if lo is not None:
            a = maximum(a, lo, out=out)
        if hi is not None:
            a = minimum(a, hi, out=out)
        return a

    return elementwise(run, x, x)


def _opt_input(inputs, i):
    return inputs[i] if len(inputs) > i else None


def _binary_in_place(ufunc):
    def run(node, x, inputs, reader_bounds=None):
        a, b = inputs[0], inputs[1]
        bounds = ACTIVATION_RANGES.get(node.attrs.get("activation", "NONE") or "NONE")
        if reader_bounds is not None:  # its reader's clamp (it has no activation of its own)
            bounds = reader_bounds
        if a.dtype != b.dtype or bounds is None:  # TANH: the kernel's
            return None
        if np.broadcast_shapes(a.shape, b.shape) != x.shape:
            return None
        with np.errstate(all="ignore"):
            if bounds == (None, None):
                return elementwise(ufunc, x, a, b)
            # a fused clamp (TFLite ADD with RELU...): in the same pass, as the kernel's order
            return elementwise(lambda p, q, out: clamp(ufunc(p, q, out=out), *bounds, out=out),
                               x, a, b)
    return run


# op -> fn(node, donated array, inputs) computing the op's result into the donated array (an
# input it may overwrite), or None when it cannot (the kernel then runs as usual). Each computes
# exactly what its kernel in float_kernels computes.
def _clamp_in_place(bounds):
    return lambda node, x, inputs: elementwise(
        lambda a, out: clamp(a, *bounds, out=out), x, x)


IN_PLACE = {
    **{op: _clamp_in_place(ACTIVATION_RANGES[activation_of_op(op)]) for op in sorted(clamp_ops())
       if activation_of_op(op) is not None},  # Relu, Relu6
    "Clip": _clip_in_place,
    "Add": _binary_in_place(np.add),
    "Sub": _binary_in_place(np.subtract),
    "Mul": _binary_in_place(np.multiply),
}
_UNARY_IN_PLACE = clamp_ops()  # Relu, Relu6, Clip: the clamps
_CLAMP_BOUNDS = {op: ACTIVATION_RANGES[activation_of_op(op)] for op in sorted(clamp_ops())
                 if activation_of_op(op) is not None}  # Relu, Relu6: (lower, upper)
_OWN_REFERENCES = 4  # values dict, the inputs list, the local name, getrefcount's argument


def _donated(node, inputs, values, readers, private) -> np.ndarray | None:
    """The input of `node` it may overwrite (module docstring, "In place"), or None."""
    slots = (0,) if node.op in _UNARY_IN_PLACE else (0, 1)
    present = node.present_inputs()
    for i in slots:
        name = node.inputs[i] if len(node.inputs) > i else None
        if name is None or name not in private or readers[name] != 1 or present.count(name) != 1:
            continue
        array = values.get(name)
        if (isinstance(array, np.ndarray) and array.flags.owndata and array.flags.writeable
                and array.flags.c_contiguous and array.dtype.kind == "f" and array is inputs[i]
                and sys.getrefcount(array) <= _OWN_REFERENCES):
            return array
    return None


def _scalar_constant(graph: Graph, name, dtypes) -> bool:
    t = graph.tensors.get(name) if name else None
    return t is not None and t.data is not None and t.data.size == 1 and t.dtype in dtypes


def _qdq_pairs(graph: Graph, pinned: set) -> tuple:
    """(ids of the QuantizeLinear nodes not run, {id(DequantizeLinear): its QuantizeLinear}) for
    the pairs computed at once (module docstring)."""
    skipped, pair_of = set(), {}
    for node in graph.nodes:
        if node.op != "Quantize" or node.opaque or len(node.inputs) != 3 or not node.outputs:
            continue
        x, scale, zero = node.inputs
        q = node.outputs[0]
        t = graph.tensors[x]
        if (q in pinned or node.attrs.get("block_size") or t.dtype != "float32"
                or t.extra.get("dtype_unknown")
                or not _scalar_constant(graph, scale, ("float32",))
                or not _scalar_constant(graph, zero, ("int8", "uint8", "int16"))):
            continue
        users = graph.readers(q)
        if users and all(u.op == "Dequantize" and not u.opaque and u.inputs[1:] == [scale, zero]
                         and not u.attrs.get("block_size") and u.inputs[0] == q for u in users):
            skipped.add(id(node))
            for u in users:
                pair_of[id(u)] = node
    return skipped, pair_of


def _check_result(node, name, t, value, batch):
    """A kernel's result must agree with the declared tensor (dtype, rank, static dims)."""
    if not isinstance(value, np.ndarray):
        raise ExecutionError(f"node {node.name!r} ({node.op}) produced no array for {name!r}")
    if not t.extra.get("dtype_unknown") and value.dtype != np.dtype(t.dtype):
        raise ExecutionError(f"node {node.name!r} ({node.op}) produced {value.dtype} for "
                             f"{name!r}, declared {t.dtype}")
    if t.shape is None or t.extra.get("has_rank") is False:
        return
    if value.ndim != len(t.shape):
        raise ExecutionError(f"node {node.name!r} ({node.op}) produced shape {list(value.shape)} "
                             f"for {name!r}, declared {list(t.shape)}")
    for i, (d, got) in enumerate(zip(t.shape, value.shape)):
        if not isinstance(d, (int, np.integer)) or d == got:
            continue
        if batch is not None and d == 1 and got == batch:  # batch mode
            continue
        raise ExecutionError(f"node {node.name!r} ({node.op}) produced shape {list(value.shape)} "
                             f"for {name!r}, declared {list(t.shape)}")


def run_float(model_or_graph, feeds: dict, observe: Callable | None = None, keep=(),
              *, opset: int | None = None, check_shapes: bool = True,
              pair_error: Callable | None = None, unobserved=frozenset(),
              carry: dict | None = None) -> dict:
    """Run the graph (of a `Model`, or a bare `Graph`) on `feeds` {input name: array}.

    Returns {name: array} for the graph outputs and the tensors named in `keep` (constants and
    graph inputs may be kept too). `observe(name, array)` sees every graph input and every
    produced tensor. `opset` is the ONNX opset when a bare Graph is given (taken from the Model
    otherwise; only ONNX Softmax before opset 13 needs it). `check_shapes` compares each result
    with the declared shape and dtype (a leading 1 may be the batch N in batch mode).
    `pair_error(name, signal, noise)` is called for every QuantizeLinear -> DequantizeLinear
    pair computed at once (module docstring) with the DequantizeLinear output's name, the sum
    of squares of the pair's float input and that of what quantizing changed in it.
    `unobserved`: tensors the caller need not see; a convolution whose output is one of them
    may run its reader clamp itself (module docstring, "Clamps in the convolution").
    `carry`: an op's variable state from call to call (`streaming.STATE_SLOTS`, an LSTM's
    hidden and cell state): a variable is read from it when there, and the op's final state is
    written into it, as TFLite writes its variable tensors (None: every call from the start).
    Raises `UnsupportedOpsError` (unknown ops, all named) before running, and `ExecutionError`
    for bad feeds or a node that fails, naming it. N samples given to a fixed-batch model whose
    ops use axis 0 run one at a time (`batch_axis.run_sample_by_sample`).
    """
    graph, opset = _split(model_or_graph, opset)
    count = samples_to_split(graph, feeds) if carry is None else 0
    if count:  # a fixed batch of 1 whose ops use axis 0 (batch_axis): one sample at a time
        return run_sample_by_sample(
            lambda part, seen: run_float(graph, part, seen, keep, opset=opset,
                                         check_shapes=check_shapes, pair_error=pair_error,
                                         unobserved=unobserved), graph, feeds, count, observe)
    with one_blas_thread():
        return _run_float(graph, feeds, observe, keep, opset, check_shapes, pair_error,
                          unobserved, carry)


_CLAMPING_PRODUCERS = {"Conv2D", "Add", "Sub", "Mul"}  # ops that can run their reader's clamp


def _producer_clamps(graph: Graph, readers: Counter, pinned: set, unobserved) -> dict:
    """{id(producer node): its reader clamp node} for the pairs computed together (module
    docstring, "Clamps in the producer")."""
    found = {}
    if not unobserved:
        return found
    for node in graph.nodes:
        bounds = _CLAMP_BOUNDS.get(node.op)
        if bounds is None or node.opaque or len(node.outputs) != 1 or not node.inputs:
            continue
        x = node.inputs[0]
        producer = graph.producer(x)
        if (x in unobserved and x not in pinned and readers[x] == 1
                and not graph.read_in_body(x) and producer is not None
                and producer.op in _CLAMPING_PRODUCERS and not producer.opaque
                and len(producer.outputs) == 1
                and producer.attrs.get("activation", "NONE") in ("NONE", None)):
            found[id(producer)] = node
    return found


def _run_float(model_or_graph, feeds: dict, observe, keep, opset, check_shapes,
               pair_error, unobserved, carry=None) -> dict:
    graph, opset = _split(model_or_graph, opset)
    missing = unsupported_ops(graph)
    if missing:
        raise UnsupportedOpsError(missing)
    keep = list(dict.fromkeys(keep))
    for name in keep:
        if name not in graph.tensors:
            raise ExecutionError(f"cannot keep {name!r}: no such tensor")
    values, batch = _prepare_feeds(graph, feeds)
    pinned = set(graph.outputs) | set(keep)

    skipped, pair_of = _qdq_pairs(graph, pinned)
    readers: Counter = Counter()
    for node in graph.nodes:
        if id(node) in skipped:
            continue
        source = pair_of.get(id(node), node)
        for name in set(source.present_inputs()):
            readers[name] += 1

    clamp_of = _producer_clamps(graph, readers, pinned, unobserved)
    ran_within = {id(c) for c in clamp_of.values()}  # clamps their convolution computed
    if observe is not None:
        for name in graph.inputs:
            observe(name, values[name])
    produced: set = set()  # tensors whose arrays a node made (candidates for in place)

    def fetch(name):
        if name is None:
            return None
        if name in values:
            return values[name]
        t = graph.tensors[name]
        data = t.data
        if data is None:
            if carry is not None and name in carry:  # the state the previous call left
                return carry[name]
            if t.extra.get("is_variable"):  # a TFLite variable at the first call
                return variable_value(t)
            raise ExecutionError(f"tensor {name!r} is read before it is produced")
        return data

    for node in graph.nodes:
        if id(node) in skipped or id(node) in ran_within:
            continue
        quantize = pair_of.get(id(node))
        read = node if quantize is None else quantize  # a fused pair reads the float input
        inputs = [fetch(name) for name in read.inputs]
        if quantize is None and node.op in IMPLIED_SLOTS:  # TFLite Quantize / Dequantize
            inputs = implied_inputs(graph, node, inputs)
        out_dtypes = [None if o is None or graph.tensors[o].extra.get("dtype_unknown")
                      else graph.tensors[o].dtype for o in node.outputs]
        if batch is not None and node.op in _BATCH_INPUTS and not node.opaque:
            inputs = _BATCH_INPUTS[node.op](node, inputs, batch)
        try:
            results = None
            if quantize is not None:  # in place into a dead float input (see "In place")
                donated = _donated(quantize, inputs, values, readers, produced)
                error = [] if pair_error is not None else None
                results = [fake_quantize(inputs[0], inputs[1], inputs[2], out=donated,
                                         error=error)]
                del donated
                if error:
                    pair_error(node.outputs[0], *error[0])
            elif node.op in IN_PLACE and not node.opaque:
                donated = _donated(node, inputs, values, readers, produced)
                if donated is not None:
                    within = clamp_of.get(id(node))
                    results = (IN_PLACE[node.op](node, donated, inputs) if within is None else
                               IN_PLACE[node.op](node, donated, inputs,
                                                 _CLAMP_BOUNDS[within.op]))
                    results = None if results is None else [results]
                del donated
            if results is not None:
                pass
            elif node.op in CONTEXT_KERNELS:
                within = clamp_of.get(id(node))
                ctx = KernelContext(
                    tuple(None if n is None else graph.tensors[n].quant for n in node.inputs),
                    tuple(None if n is None else graph.tensors[n].quant for n in node.outputs),
                    opset, None if within is None else _CLAMP_BOUNDS[within.op])
                results = KERNELS[node.op](node, inputs, out_dtypes, ctx=ctx)
            else:
                results = KERNELS[node.op](node, inputs, out_dtypes)
                within = clamp_of.get(id(node))
                if within is not None:  # an elementwise producer not run in place
                    results = [clamp(results[0], *_CLAMP_BOUNDS[within.op])]
        except _KERNEL_ERRORS as exc:
            raise ExecutionError(f"node {node.name!r} ({node.label}) failed: {exc}") from exc
        del inputs
        if len(results) < sum(1 for o in node.outputs if o is not None):
            raise ExecutionError(f"node {node.name!r} ({node.op}) produced too few outputs")
        within = clamp_of.get(id(node))
        if observe is not None and node.op in OBSERVED_STATES:  # internal state (LSTM cell)
            for slot, value in zip(OBSERVED_STATES[node.op], results[len(node.outputs):]):
                observe(node.inputs[slot], value)
        if carry is not None and node.op in STATE_SLOTS and not node.opaque:
            store_final_state(graph, node, results[len(node.outputs)
                                                   + len(OBSERVED_STATES.get(node.op, ())):],
                              carry)
        for name, value in zip(node.outputs if within is None else within.outputs, results):
            if name is None:
                continue
            if check_shapes:
                _check_result(node, name, graph.tensors[name], value, batch)
            if observe is not None:
                observe(name, value)
            if readers[name] or name in pinned:
                values[name] = value
                if name not in pinned:
                    produced.add(name)
        results = value = None  # hold no reference into the next node (see `_donated`)
        for name in set(read.present_inputs()):
            readers[name] -= 1
            if readers[name] == 0 and name not in pinned:
                values.pop(name, None)

    result = {}
    for name in list(graph.outputs) + keep:
        if name not in result:
            result[name] = fetch(name)
    return result


def run_float_batched(model_or_graph, feeds: dict, batch_size: int,
                      observe: Callable | None = None, progress: Callable | None = None,
                      keep=(), *, opset: int | None = None, check_shapes: bool = True,
                      collect: bool = True, pair_error: Callable | None = None,
                      unobserved=frozenset()) -> dict:
    """`run_float` over N samples in chunks of `batch_size` along axis 0 of every feed,
    outputs (and kept tensors) concatenated along axis 0. `observe` is called per chunk;
    `progress(done, total)` after each chunk with the number of samples done. `collect=False`
    drops the outputs and returns {} (calibration over many samples needs only `observe`).
    `pair_error` and `unobserved` as in `run_float`, per chunk. A fixed-batch model with an
    op that treats axis 0 as data (`batch_axis.sample_mixing_node`: a Squeeze of the batch axis,
    a time-major LSTM...) runs one sample at a time whatever `batch_size` says: batched, its
    samples would mix or fail."""
    graph, opset = _split(model_or_graph, opset)
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if batch_size > 1 and sample_mixing_node(graph) is not None:
        batch_size = 1  # a fixed-batch model whose ops use axis 0: one sample at a time
    arrays = {k: np.asarray(v) for k, v in feeds.items()}
    sizes = {a.shape[0] for k, a in arrays.items() if k in graph.inputs and a.ndim}
    if len(sizes) != 1:
        raise ExecutionError(f"feeds must share one sample count on axis 0, got {sorted(sizes)}")
    total = sizes.pop()
    chunks: dict = {}
    done = 0
    while done < total:
        stop = min(done + batch_size, total)
        part = {k: (a[done:stop] if k in graph.inputs and a.ndim else a)
                for k, a in arrays.items()}
        out = run_float(graph, part, observe, keep, opset=opset, check_shapes=check_shapes,
                        pair_error=pair_error, unobserved=unobserved)
        for name, value in (out.items() if collect else ()):
            if value.ndim == 0 or value.shape[0] != stop - done:
                raise ExecutionError(f"output {name!r} of shape {list(value.shape)} does not "
                                     f"carry the batch of {stop - done} on axis 0")
            chunks.setdefault(name, []).append(value)
        done = stop
        if progress is not None:
            progress(done, total)
    return {name: np.concatenate(parts, axis=0) for name, parts in chunks.items()}
