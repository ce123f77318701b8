"""Per-op rules of the NCHW -> NHWC layout pass: how each ONNX op becomes TFLite ops.

`RULES[op](cv, node)` reads the node's inputs as `layout_state.Value`s from the `Converter`
`cv`, emits TFLite nodes and defines the node's outputs with their layouts. What each op does:

- Conv: input to NHWC; weights OIHW -> OHWI (CONV_2D) or, when group == C_in and the weights
  have one input channel, [C_out, 1, kH, kW] -> [1, kH, kW, C_out] (DEPTHWISE_CONV_2D, depth
  multiplier C_out / C_in); pads via `spatial_padding`; dilations kept.
- MaxPool, AveragePool: input to NHWC; padding TFLite cannot say becomes explicit padding;
  `count_include_pad` honoured with an explicit PAD; a `ceil_mode` that adds a window becomes
  end padding (max pool).
- Add, Sub, Mul, Div, the comparisons (Equal, Greater, GreaterOrEqual, Less, LessOrEqual: a
  bool output) and Where (SELECT_V2: three operands): operands brought to one layout, constants
  transposed to it (`[C,1,1]` -> `[C]`); Div by a constant is Mul by its reciprocal. Max /
  Min of any number of operands: a chain of MAXIMUM / MINIMUM.
- Relu, Sigmoid, Tanh, HardSwish, Clip, Cast, Abs, Neg, Log, Sin: same op, same layout (Clip
  is legalized after fusion).
- Concat: inputs to one layout, `axis` mapped. Softmax: `axis` mapped; when it is not the last
  TFLite axis, the input is transposed so that it is.
- ReduceMean, ReduceMax, ReduceMin, ReduceSum: MEAN, REDUCE_MAX, REDUCE_MIN, SUM over the
  mapped axes, `keepdims`;
  a ReduceMax over H and W is a MAX_POOL_2D over the whole map (int8 and CMSIS-NN have it).
- Pad: PAD (PADV2 for a non-zero value), paddings reordered; mode reflect -> MIRROR_PAD
  REFLECT, edge (pads of at most 1) -> MIRROR_PAD SYMMETRIC. Squeeze: SQUEEZE with mapped
  `squeeze_dims`. Unsqueeze: RESHAPE inserting size-1 axes.
- Flatten, Reshape: RESHAPE; of a permuted tensor to [N, K], the next FC permutes its weights
  (`Layout.flat`); when only size-1 axes were permuted, a plain RESHAPE; else the data goes
  back to ONNX order first (a TRANSPOSE).
- Transpose: no node; the permutation goes into the layout, so transposes that meet cancel.
- DepthToSpace: DEPTH_TO_SPACE (DCR) on NHWC; CRD gathers its channels into DCR order first.
- Slice: STRIDED_SLICE with mapped axes. Gather: GATHER on the data in ONNX order.
- Identity, Dropout: no node.

The rules of the ONNX-only ops (Gemm, MatMul, GlobalAveragePool, GlobalMaxPool, HardSigmoid)
are in `ops`; those of LeakyRelu, PRelu, Sqrt, Pow, Reciprocal,
LayerNormalization and MatMul of two activations (BATCH_MATMUL) in `ops_math`.
"""

from __future__ import annotations

import numpy as np

from qconvert.padding import same_pads

from .layout_state import (NHWC, Layout, Unmappable, Value, identity, inverse, onnx_op,
                           order_preserving, remaining_perm)
from .ops import (MAPPING_RULES, lower_bound, needs_explicit_pad,
                  spatial_padding)
from .ops_spatial import SPATIAL_RULES


def _ints(a) -> list:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise Unmappable(f"axis {axis} of a rank-{rank} tensor")
    return axis % rank


def _optional_ints(cv, node, index: int):
    """Constant input `index` as ints, None when absent."""
    if index < len(node.inputs) and node.inputs[index] is not None:
        return _ints(cv.require_constant(node, index, "parameter"))
    return None


def _spatial(node, x_shape, kernel) -> tuple:
    """(strides, dilations, pads) with auto_pad resolved on the static input."""
    attrs = node.attrs
    strides = _ints(attrs.get("strides") or [1, 1])
    dilations = _ints(attrs.get("dilations") or [1, 1])
    auto = attrs.get("auto_pad") or "NOTSET"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(x_shape[2:], kernel, strides,
                         dilations if node.op == "Conv2D" else [1, 1], lower=auto == "SAME_LOWER")
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = _ints(attrs.get("pads") or [0, 0, 0, 0])
    return strides, dilations, pads


def _spatial_input(cv, node) -> Value:
    x = cv.value(node.inputs[0])
    if len(x.shape) != 4:
        raise Unmappable(f"{onnx_op(node)} {node.name!r} of a {len(x.shape)}-D input")
    return x


# -- convolutions and pools ------------------------------------------------------------------------
def _conv(cv, node) -> None:
    w = cv.require_constant(node, 1, "weights")
    b_name = node.inputs[2] if len(node.inputs) > 2 else None
    if b_name is not None:
        cv.require_constant(node, 2, "bias")
    x = _spatial_input(cv, node)
    if w.ndim != 4:
        raise Unmappable(f"{w.ndim - 2}-D Conv", "ops with no TFLite mapping")
    group = int(node.attrs.get("group", 1) or 1)
    cin, cout = x.shape[1], w.shape[0]
    kernel = [int(w.shape[2]), int(w.shape[3])]
    strides, dilations, pads = _spatial(node, x.shape, kernel)
    attrs = {"layout": "NHWC", "kernel_shape": kernel, "strides": strides,
             "dilations": dilations, "activation": "NONE"}
    if group == 1:
        op, weights = "Conv2D", np.transpose(w, (0, 2, 3, 1))
        attrs["group"] = 1
    elif w.shape[1] == 1 and group == cin:
        op, weights = "DepthwiseConv2D", np.transpose(w, (1, 2, 3, 0))
        attrs["depth_multiplier"] = cout // cin
    else:  # grouped: TFLite Micro and LiteRT run CONV_2D with C_in a multiple of the filter's
        op, weights = "Conv2D", np.transpose(w, (0, 2, 3, 1))
        attrs["group"] = group
    v, attrs["pads"] = spatial_padding(cv, cv.relayout(x, NHWC), kernel, strides, dilations,
                                       pads, 0.0)
    inputs = [v.name, cv.add_const(f"{node.inputs[1]}_{'ohwi' if op == 'Conv2D' else '1hwc'}",
                                   np.ascontiguousarray(weights))]
    if b_name is not None:
        inputs.append(cv.copy_const(b_name))
    else:  # LiteRT's CONV_2D and grouped kernels and TFLite Micro's depthwise need a bias
        inputs.append(cv.add_const(f"{node.name}_bias", np.zeros(cout, w.dtype)))
    out = cv.define(node.outputs[0], Layout(NHWC))
    cv.emit(op, inputs, [out.name], attrs, node.name)


def _pool(cv, node) -> None:
    x = _spatial_input(cv, node)
    attrs = node.attrs
    kernel = _ints(attrs.get("kernel_shape") or [])
    strides, dilations, pads = _spatial(node, x.shape, kernel)
    out_shape = cv.shape(node.outputs[0])
    floor = [(x.shape[2 + i] + pads[i] + pads[2 + i] - kernel[i]) // strides[i] + 1
             for i in range(2)]
    extra = [max(0, (out_shape[2 + i] - 1) * strides[i] + kernel[i]
                 - (x.shape[2 + i] + pads[i] + pads[2 + i])) for i in range(2)]
    is_max = node.op == "MaxPool"
    if any(d != 1 for d in dilations):
        raise Unmappable(f"{onnx_op(node)} {node.name!r} (dilations {dilations}; TFLite pools "
                         "have none)")
    if is_max and any(p >= k for p, k in zip(pads, kernel + kernel)):
        raise Unmappable(f"MaxPool {node.name!r} (pads {pads} not smaller than the kernel)")
    if list(out_shape[2:]) != floor:  # ceil_mode added windows: pad the end for them
        if not is_max:
            raise Unmappable(f"AveragePool {node.name!r} (ceil_mode adds windows that run past "
                             "the padding; TFLite's average would count differently)")
        pads = [pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1]]
    include_pad = not is_max and bool(int(attrs.get("count_include_pad", 0) or 0))
    v = cv.relayout(x, NHWC)
    if not is_max and not include_pad and needs_explicit_pad(v, kernel, strides, [1, 1], pads):
        raise Unmappable(f"AveragePool {node.name!r} (pads {pads} that TFLite cannot express, "
                         "with count_include_pad 0)")
    fill = 0.0
    if is_max:  # padding must never win: the input's lower bound, else repeated borders
        fill = lower_bound(cv.src, node.inputs[0])
    v, pads = spatial_padding(cv, v, kernel, strides, [1, 1], pads, fill, same_ok=not include_pad)
    out = cv.define(node.outputs[0], Layout(NHWC))
    cv.emit(node.op, [v.name], [out.name],
            {"layout": "NHWC", "kernel_shape": kernel, "strides": strides, "dilations": [1, 1],
             "pads": pads, "activation": "NONE"}, node.name)


# -- elementwise ---------------------------------------------------------------------------------
def _common_flat(acts: dict, consts: dict, rank: int) -> Layout | None:
    """The flattened layout every activation operand shares, if the constants can follow it."""
    layouts = {a.layout for a in acts.values()}
    if rank != 2 or len(layouts) != 1:
        return None
    layout = layouts.pop()
    if layout.flat is None or any(len(a.shape) != 2 for a in acts.values()):
        return None
    k = acts[next(iter(acts))].shape[1]
    if any(c is not None and c.ndim and c.shape[-1] not in (1, k) for c in consts.values()):
        return None
    return layout


def _target_perm(values, rank: int) -> tuple:
    """The layout to compute in: the first full-rank operand's, when it is a real permutation."""
    for v in values:
        if len(v.shape) == rank and v.layout.flat is None and not v.layout.is_identity:
            return v.layout.perm
    return identity(rank)


def _operands(cv, node, flat_ok=True) -> tuple:
    """(op, TFLite operand names, layout) of an elementwise node: activations brought to one
    layout, constants permuted to it (Div by a constant becomes Mul by its reciprocal)."""
    out_shape = cv.shape(node.outputs[0])
    rank = len(out_shape)
    names = node.inputs  # two operands; Where (SELECT_V2) three; ONNX Max / Min any number
    consts = {i: cv.constant(n) for i, n in enumerate(names)}
    acts = {i: cv.value(n) for i, n in enumerate(names) if consts[i] is None}
    layout = (_common_flat(acts, consts, rank) if flat_ok else None) or \
        Layout(_target_perm(acts.values(), rank))
    full = any(len(a.shape) == rank for a in acts.values())
    op, inputs = node.op, []
    for i, name in enumerate(names):
        c = consts[i]
        if c is None:
            v = acts[i] if layout.flat is not None else cv.broadcast_operand(acts[i], layout.perm)
            inputs.append(v.name)
            continue
        if op == "Div" and i == 1 and c.dtype.kind == "f" and np.all(c != 0):
            op, c = "Mul", (1.0 / c.astype(np.float64)).astype(c.dtype)
        data = cv.permute_const(c, layout, rank, strip=full)
        same = data.shape == consts[i].shape and np.array_equal(data, consts[i])
        inputs.append(cv.copy_const(name) if same else cv.add_const(f"{name}_nhwc", data))
    if not acts:  # two constants fold-constants left alone (too large to fold)
        layout = Layout(identity(rank))
    return op, inputs, layout


def _elementwise(cv, node) -> None:
    op, inputs, layout = _operands(cv, node)
    out = cv.define(node.outputs[0], layout)
    cv.emit(op, inputs, [out.name], {}, node.name)


_EXTREMES = {"Max": "Maximum", "Min": "Minimum"}


def _extreme(cv, node) -> None:
    """ONNX Max / Min of any number of operands -> a chain of MAXIMUM / MINIMUM (each step the
    broadcast of the operands so far); one operand is the identity."""
    if len(node.inputs) == 1 and cv.constant(node.inputs[0]) is None:
        cv.alias(node.outputs[0], cv.value(node.inputs[0]))
        return
    _, inputs, layout = _operands(cv, node, flat_ok=False)
    rank = len(cv.shape(node.outputs[0]))
    shapes = [(1,) * (rank - len(cv.shape(n))) + cv.shape(n) for n in node.inputs]
    current, shape = inputs[0], shapes[0]
    for k in range(1, len(inputs)):
        shape = np.broadcast_shapes(shape, shapes[k])
        if k == len(inputs) - 1:
            target = cv.define(node.outputs[0], layout).name
        else:
            target = cv.new_value(f"{node.outputs[0]}_{k}", layout, shape,
                                  cv.src.tensors[node.outputs[0]].dtype).name
        cv.emit(_EXTREMES[node.op], [current, inputs[k]], [target], {},
                node.name if k == len(inputs) - 1 else f"{node.name}_{k}")
        current = target


def _unary(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rest = [None if n is None else cv.copy_const(n) for n in node.inputs[1:]]
    out = cv.define(node.outputs[0], x.layout)
    attrs = {"to": node.attrs["to"]} if node.op == "Cast" else {}
    cv.emit(node.op, [x.name] + rest, [out.name], attrs, node.name)


def _alias(cv, node) -> None:
    if any(o is not None for o in node.outputs[1:]):
        raise Unmappable(f"{onnx_op(node)} {node.name!r} with a mask output")
    cv.alias(node.outputs[0], cv.value(node.inputs[0]))


# -- axis ops ------------------------------------------------------------------------------------
def _concat(cv, node) -> None:
    out_shape = cv.shape(node.outputs[0])
    rank = len(out_shape)
    axis = _axis(int(node.attrs.get("axis", 0)), rank)
    acts = [cv.value(n) for n in node.inputs if cv.constant(n) is None]
    perm = _target_perm(acts, rank)
    inputs = []
    for name in node.inputs:
        c = cv.constant(name)
        if c is None:
            inputs.append(cv.relayout(cv.value(name), perm).name)
        else:
            inputs.append(cv.add_const(f"{name}_nhwc", np.ascontiguousarray(np.transpose(c, perm))))
    out = cv.define(node.outputs[0], Layout(perm))
    cv.emit("Concat", inputs, [out.name], {"axis": perm.index(axis), "activation": "NONE"},
            node.name)


def _softmax(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    axis = _axis(int(node.attrs.get("axis", -1)), rank)
    if node.attrs.get("coerce_2d") and any(d != 1 for d in x.shape[axis + 1:]):
        raise Unmappable(f"Softmax {node.name!r} (opset {cv.opset} flattens from axis {axis})")
    if x.layout.flat is not None and axis != 1:
        x = cv.relayout(x, identity(rank))
    if x.layout.flat is None and x.layout.perm.index(axis) != rank - 1:
        x = cv.relayout(x, tuple(p for p in x.layout.perm if p != axis) + (axis,))
    out = cv.define(node.outputs[0], x.layout)
    cv.emit("Softmax", [x.name], [out.name], {"beta": 1.0, "axis": -1}, node.name)


REDUCERS = {"ReduceMean": "Mean", "ReduceMax": "ReduceMax", "ReduceMin": "ReduceMin",
            "ReduceProd": "ReduceProd",
            "ReduceSum": "ReduceSum"}


def _reduce(cv, node) -> None:
    """ReduceMean / ReduceMax / ReduceMin / ReduceSum -> MEAN / REDUCE_MAX / REDUCE_MIN / SUM
    over the mapped axes."""
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    axes = _optional_ints(cv, node, 1)
    if not axes:
        if int(node.attrs.get("noop_with_empty_axes", 0) or 0):
            cv.alias(node.outputs[0], x)
            return
        axes = list(range(rank))
    axes = sorted({_axis(a, rank) for a in axes})
    keep = bool(int(node.attrs.get("keepdims", 1)))
    if node.op == "ReduceMax" and rank == 4 and axes == [2, 3]:  # a global max pool
        _global_max(cv, node, x, keep)
        return
    if x.layout.flat is not None:
        x = x if axes == [1] else cv.relayout(x, identity(rank))
    perm = x.layout.perm
    layout = Layout(perm if keep else remaining_perm(perm, axes))
    if x.layout.flat is not None:
        layout = Layout(identity(rank if keep else rank - 1))
    out = cv.define(node.outputs[0], layout)
    cv.emit(REDUCERS[node.op], [x.name, cv.int32_const(f"{node.name}_axes",
                                            sorted(perm.index(a) for a in axes))],
            [out.name], {"keepdims": int(keep)}, node.name)


def _global_max(cv, node, x: Value, keep: bool) -> None:
    """ReduceMax over H and W: MAX_POOL_2D over the whole map (then RESHAPE without keepdims)."""
    v = cv.relayout(x, NHWC)
    n, h, w, c = v.dst_shape
    pooled = cv.define(node.outputs[0], Layout(NHWC)) if keep else \
        cv.new_value(f"{node.outputs[0]}_pooled", Layout(NHWC), (n, c, 1, 1), v.dtype)
    cv.emit("MaxPool", [v.name], [pooled.name],
            {"layout": "NHWC", "kernel_shape": [h, w], "strides": [1, 1], "dilations": [1, 1],
             "pads": [0, 0, 0, 0], "activation": "NONE"}, node.name)
    if not keep:
        _reshape_to(cv, node, pooled, Layout((0, 1)))


def _pad(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    rows = np.asarray(cv.require_constant(node, 1, "pads"))  # [k, 2]: (begin, end) per axis
    axes = _optional_ints(cv, node, 3)
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in axes]
    if rows.shape != (len(axes), 2):
        raise Unmappable(f"Pad {node.name!r} (pads {rows.tolist()} for axes {axes})")
    begin, end = [0] * rank, [0] * rank
    for a, (b, e) in zip(axes, rows.tolist()):
        begin[a], end[a] = int(b), int(e)
    if min(begin + end) < 0:
        raise Unmappable(f"Pad {node.name!r} (negative pads crop)")
    mode = node.attrs.get("mode", "constant") or "constant"
    if mode != "constant":
        _mirror_pad(cv, node, x, begin, end, mode)
        return
    value = cv.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    fill = 0.0 if value is None or value.size == 0 else float(np.asarray(value).reshape(-1)[0])
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(rank))
    perm = x.layout.perm
    paddings = cv.add_const(f"{node.name}_paddings",
                            np.array([[begin[p], end[p]] for p in perm], np.int32))
    out = cv.define(node.outputs[0], Layout(perm))
    if fill == 0.0:
        cv.emit("Pad", [x.name, paddings], [out.name], {}, node.name)
    else:
        k = cv.add_const(f"{node.name}_value", np.array([fill], np.dtype(x.dtype)))
        cv.emit("PadV2", [x.name, paddings, k], [out.name], {}, node.name)


# ONNX Pad mode -> TFLite MirrorPadMode: reflect is REFLECT; edge repeats the border value,
# which SYMMETRIC does for pads of at most 1 (wider edge padding has no TFLite op)
_MIRROR_MODES = {"reflect": 0, "edge": 1}


def _mirror_pad(cv, node, x, begin, end, mode) -> None:
    """ONNX Pad reflect / edge -> MIRROR_PAD REFLECT / SYMMETRIC, paddings in the layout held."""
    if mode not in _MIRROR_MODES or (mode == "edge" and max(begin + end) > 1):
        raise Unmappable(f"Pad {node.name!r} (mode {mode}"
                         + (" wider than 1: TFLite has no edge padding)" if mode == "edge"
                            else ")"))
    rank = len(x.shape)
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(rank))
    perm = x.layout.perm
    paddings = cv.add_const(f"{node.name}_paddings",
                            np.array([[begin[p], end[p]] for p in perm], np.int32))
    out = cv.define(node.outputs[0], Layout(perm))
    cv.emit("MirrorPad", [x.name, paddings], [out.name], {"mode": _MIRROR_MODES[mode]},
            node.name)


def _depth_to_space(cv, node) -> None:
    """ONNX DepthToSpace -> DEPTH_TO_SPACE on NHWC (DCR); CRD's channels gathered into DCR
    order first (a GATHER along the channels)."""
    x = _spatial_input(cv, node)
    b = int(node.attrs.get("blocksize", 0) or 0)
    mode = node.attrs.get("mode", "DCR") or "DCR"
    c = x.shape[1]
    if b < 1 or c % (b * b) or mode not in ("DCR", "CRD"):
        raise Unmappable(f"DepthToSpace {node.name!r} (blocksize {b}, mode {mode}, {c} "
                         "channels)")
    v = cv.relayout(x, NHWC)
    if mode == "CRD":  # DCR channel (i b + j) C' + c is CRD channel c b^2 + i b + j
        k = np.arange(c)
        tile, ch = k // (c // (b * b)), k % (c // (b * b))
        order = (ch * b * b + tile).astype(np.int32)
        gathered = cv.new_value(f"{node.outputs[0]}_dcr", Layout(NHWC), tuple(x.shape), v.dtype)
        cv.emit("Gather", [v.name, cv.add_const(f"{node.name}_dcr_order", order)],
                [gathered.name], {"axis": 3, "batch_dims": 0}, f"{node.name}_dcr")
        v = gathered
    out = cv.define(node.outputs[0], Layout(NHWC))
    cv.emit("DepthToSpaceNHWC", [v.name], [out.name], {"block_size": b}, node.name)


def _squeeze(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    axes = _optional_ints(cv, node, 1)
    axes = [a for a in range(rank) if x.shape[a] == 1] if not axes else \
        sorted({_axis(a, rank) for a in axes})
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(rank))
    perm = x.layout.perm
    out = cv.define(node.outputs[0], Layout(remaining_perm(perm, axes)))
    squeeze_dims = cv.int32_const(f"{node.name}@axes", sorted(perm.index(a) for a in axes))
    cv.emit("Squeeze", [x.name, squeeze_dims], [out.name], {}, node.name)


def _unsqueeze(cv, node) -> None:
    x = cv.value(node.inputs[0])
    axes = _optional_ints(cv, node, 1) or []
    rank = len(x.shape) + len(axes)
    axes = sorted({_axis(a, rank) for a in axes})
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(len(x.shape)))
    old_to_new = [j for j in range(rank) if j not in axes]
    perm = [old_to_new[p] for p in x.layout.perm]
    for a in axes:
        perm.insert(min(a, len(perm)), a)
    _reshape_to(cv, node, x, Layout(tuple(perm)))


def _reshape_to(cv, node, x: Value, layout: Layout) -> None:
    out = cv.define(node.outputs[0], layout)
    dims = list(out.dst_shape)
    cv.emit("Reshape", [x.name, cv.int32_const(f"{out.name}_shape", dims)], [out.name],
            {}, node.name)


def _reshape(cv, node) -> None:
    """Flatten and Reshape (the target is the output's static ONNX shape)."""
    x = cv.value(node.inputs[0])
    out_shape = cv.shape(node.outputs[0])
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(len(x.shape)))
    perm = x.layout.perm
    if order_preserving(x.shape, perm):
        layout = Layout(identity(len(out_shape)))
    elif len(out_shape) == 2 and perm[0] == 0 and out_shape[0] == x.shape[0]:
        layout = Layout((0, 1), flat=(x.shape, perm))
    else:
        x = cv.relayout(x, identity(len(x.shape)))
        layout = Layout(identity(len(out_shape)))
    _reshape_to(cv, node, x, layout)


def _transpose(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    perm = _optional_ints(cv, node, 1) or list(range(rank))[::-1]
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(rank))
    inv = inverse(perm)
    layout = Layout(tuple(inv[q] for q in x.layout.perm))
    cv.alias(node.outputs[0], Value(x.name, layout, cv.shape(node.outputs[0]), x.dtype))


def _slice(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    starts = _ints(cv.require_constant(node, 1, "starts"))
    ends = _ints(cv.require_constant(node, 2, "ends"))
    axes = _optional_ints(cv, node, 3) or list(range(len(starts)))
    steps = _optional_ints(cv, node, 4) or [1] * len(starts)
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(rank))
    perm = x.layout.perm
    begin, end, stride = [0] * rank, list(x.dst_shape), [1] * rank
    begin_mask = end_mask = 0
    sliced = set()
    for start, stop, axis, step in zip(starts, ends, axes, steps):
        axis = _axis(axis, rank)
        dim, i = x.shape[axis], perm.index(axis)
        if step == 0:
            raise Unmappable(f"Slice {node.name!r} (step 0)")
        start += dim if start < 0 else 0
        stop += dim if stop < 0 else 0
        if step > 0:
            start, stop = min(max(start, 0), dim), min(max(stop, 0), dim)
        else:
            start, stop = min(max(start, 0), dim - 1), min(max(stop, -1), dim - 1)
        begin[i], end[i], stride[i] = start, stop, step
        if stop < 0:
            end_mask |= 1 << i
        sliced.add(i)
    for i in range(rank):
        if i not in sliced:
            begin_mask |= 1 << i
            end_mask |= 1 << i
    out = cv.define(node.outputs[0], Layout(perm))
    cv.emit("StridedSlice", [x.name, cv.int32_const(f"{node.name}_begin", begin),
                             cv.int32_const(f"{node.name}_end", end),
                             cv.int32_const(f"{node.name}_strides", stride)], [out.name],
            {"begin_mask": begin_mask, "end_mask": end_mask, "ellipsis_mask": 0,
             "new_axis_mask": 0, "shrink_axis_mask": 0, "offset": False}, node.name)


def _gather(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    axis = _axis(int(node.attrs.get("axis", 0) or 0), rank)
    indices = np.asarray(cv.require_constant(node, 1, "indices")).astype(np.int64)
    indices = np.where(indices < 0, indices + x.shape[axis], indices).astype(np.int32)
    if indices.ndim == 1 and x.layout.flat is None:  # same rank: gather in the layout held
        out = cv.define(node.outputs[0], x.layout)
        cv.emit("Gather", [x.name, cv.add_const(f"{node.name}_indices", indices)], [out.name],
                {"axis": x.layout.perm.index(axis), "batch_dims": 0}, node.name)
        return
    x = cv.relayout(x, identity(rank))
    out = cv.define(node.outputs[0], Layout(identity(len(cv.shape(node.outputs[0])))))
    cv.emit("Gather", [x.name, cv.add_const(f"{node.name}_indices", indices)], [out.name],
            {"axis": axis, "batch_dims": 0}, node.name)


RULES = {
    "Conv2D": _conv,
    "MaxPool": _pool,
    "AveragePool": _pool,
    **{op: _elementwise for op in ("Add", "Sub", "Mul", "Div", "Equal", "Greater", "GreaterEqual",
                                   "Less", "LessEqual", "SelectV2")},
    **{op: _unary for op in ("Relu", "Sigmoid", "Tanh", "HardSwish", "Clip", "Cast", "Abs",
                              "Neg", "Log", "Sin")},
    "Identity": _alias,
    "Dropout": _alias,
    "Concat": _concat,
    "Softmax": _softmax,
    **{op: _reduce for op in REDUCERS},
    "Pad": _pad,
    "Squeeze": _squeeze,
    **{op: _extreme for op in _EXTREMES},
    "DepthToSpace": _depth_to_space,
    "Unsqueeze": _unsqueeze,
    "Flatten": _reshape,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Slice": _slice,
    "Gather": _gather,
    **MAPPING_RULES,
    **SPATIAL_RULES,
}
