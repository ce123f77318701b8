"""ONNX -> TFLite for what PyTorch / PaddlePaddle exports add to plain CNNs: transposed
convolutions, Resize, Split, 1-D convolutions and pools, channel shuffle.

Rules (`SPATIAL_RULES`, merged into `layout_rules.RULES`):
- ConvTranspose (group 1, dilation 1) -> TRANSPOSE_CONV, weights [C_in, C_out, kH, kW] ->
  OHWI [C_out, kH, kW, C_in], output_shape the ONNX output's in NHWC. ONNX crops `pads` (or
  what output_shape / SAME implies) from a (in - 1) * stride + k + output_padding canvas;
  TFLite crops the floor half of what its padding mode implies for the output size. SAME or
  VALID is used when its crop equals ONNX's; else a VALID TRANSPOSE_CONV makes the canvas and a
  STRIDED_SLICE crops it (PyTorch's k 3, stride 2, padding 1, output_padding 1 needs this).
- Resize (opset 11+, H and W only, scales or sizes constant):
  nearest -> RESIZE_NEAREST_NEIGHBOR when one of TFLite's (align_corners, half_pixel_centers)
  settings reads exactly the pixels ONNX's coordinate mode and nearest_mode read (compared
  index by index), else one GATHER per resized axis with ONNX's indices (exact for any mode);
  linear -> RESIZE_BILINEAR: align_corners -> align_corners, half_pixel (and
  pytorch_half_pixel with outputs > 1) -> half_pixel_centers, asymmetric -> neither, provided
  ONNX's source coordinates equal TFLite's (a scale that is not output / input is refused).
  Cubic, tf_crop_and_resize, half_pixel_symmetric, antialiased downscaling, resizing N or C,
  keep_aspect_ratio_policy other than stretch: refused, named.
- Split -> SPLIT (equal parts) or SPLIT_V, the axis mapped to the layout; outputs keep it.
Rewrites of the static ONNX graph before the layout pass:
- `lift_1d`: Conv / ConvTranspose / MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool
  on [N, C, L] become their 2-D form on [N, C, 1, L] between an Unsqueeze and a Squeeze of
  axis 2 (weights [O, I, K] -> [O, I, 1, K]; one Unsqueeze per input however many layers
  read it); then each Squeeze is moved past the unary elementwise ops that read it (Relu,
  Clip, Sigmoid...) and past an Add / Sub / Mul / Div with another such Squeeze (a residual)
  or a constant (given the size-1 axis), and a Squeeze read only by Unsqueezes of the same axis
  disappears, so a Conv1d stack runs as 2-D layers with H = 1 and neither a TRANSPOSE nor a
  RESHAPE between them (a RESHAPE only where 1-D and 2-D meet).
- `channel_shuffle`: ShuffleNet's Reshape [N, g, C / g, H, W] -> Transpose (0, 2, 1, 3,
  4) -> Reshape [N, C, H, W] becomes one Gather of the channels, which the layout pass keeps
  in NHWC (GATHER on the channel axis: no 5-D TRANSPOSE, int8 in TFLite Micro).
Grouped convolutions are native CONV_2D (see `layout_rules._conv`): TFLite Micro and LiteRT
both run a CONV_2D whose input has a multiple of the filter's input channels.
"""

from __future__ import annotations

import numpy as np

from qconvert.executor.float_kernels_spatial import (RESIZE_COORDINATE_MODES, bilinear_taps,
                                                     nearest_indices, onnx_nearest_indices,
                                                     onnx_resize_plan, onnx_source_coordinates,
                                                     onnx_split_sizes)
from qconvert.ir import Graph, Node
from qconvert.padding import transpose_conv_geometry

from .layout_state import NHWC, Layout, Unmappable, identity, onnx_op
from .ops import CHECKS, NON_CONSTANT, UNMAPPED

EXPRESS = "cannot be expressed in TFLite"


def _ints(a) -> list:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _const(cv, node, index):
    name = node.inputs[index] if index < len(node.inputs) else None
    if name is None:
        return None
    return cv.require_constant(node, index, "parameter")


# -- ConvTranspose -> TRANSPOSE_CONV --------------------------------------------------------
def onnx_transpose_conv_crop(attrs, spatial, kernel, strides) -> list:
    """[top, left] rows / columns ONNX ConvTranspose crops from its canvas (explicit pads, or
    what output_shape / auto_pad SAME imply: the odd one at the end for SAME_UPPER)."""
    auto = attrs.get("auto_pad") or "NOTSET"
    adj = _ints(attrs.get("output_padding") or [0, 0])
    target = attrs.get("output_shape")
    if target is not None:
        target = _ints(target)[-2:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [spatial[i] * strides[i] for i in range(2)]
    if target is None:
        return _ints(attrs.get("pads") or [0, 0, 0, 0])[:2] if auto == "NOTSET" else [0, 0]
    crop = []
    for i in range(2):
        full = (spatial[i] - 1) * strides[i] + kernel[i] + adj[i]
        total = max(full - target[i], 0)
        crop.append(total // 2 if auto == "SAME_UPPER" else total - total // 2)
    return crop


def _conv_transpose(cv, node) -> None:
    w = cv.require_constant(node, 1, "weights")
    b_name = node.inputs[2] if len(node.inputs) > 2 else None
    x = cv.value(node.inputs[0])
    if len(x.shape) != 4 or w.ndim != 4:
        raise Unmappable(f"{w.ndim - 2}-D ConvTranspose", UNMAPPED)
    group = int(node.attrs.get("group", 1) or 1)
    dilations = _ints(node.attrs.get("dilations") or [1, 1])
    if group != 1 or dilations != [1, 1]:
        raise Unmappable(_transpose_conv_limits(node, group, dilations))
    kernel = [int(w.shape[2]), int(w.shape[3])]
    strides = _ints(node.attrs.get("strides") or [1, 1])
    out_shape = cv.shape(node.outputs[0])
    n, cout, oh, ow = out_shape
    crop = onnx_transpose_conv_crop(node.attrs, x.shape[2:], kernel, strides)
    weights = np.ascontiguousarray(np.transpose(w, (1, 2, 3, 0)))
    inputs = [None, cv.add_const(f"{node.inputs[1]}_ohwi", weights),
              cv.relayout(x, NHWC).name]
    if b_name is not None:
        inputs.append(cv.copy_const(b_name))
    attrs = {"strides": strides, "activation": "NONE"}
    spatial = list(x.shape[2:])
    for padding in ("SAME", "VALID"):
        if transpose_conv_geometry(padding, (oh, ow), kernel, strides) == (crop, spatial):
            out = cv.define(node.outputs[0], Layout(NHWC))
            inputs[0] = cv.int32_const(f"{node.name}_output_shape", [n, oh, ow, cout])
            cv.emit("TransposeConv", inputs, [out.name], dict(attrs, padding=padding), node.name)
            return
    canvas = tuple(max((spatial[i] - 1) * strides[i] + kernel[i], crop[i] + (oh, ow)[i])
                   for i in range(2))
    if transpose_conv_geometry("VALID", canvas, kernel, strides) != ([0, 0], spatial):
        raise Unmappable(f"ConvTranspose {node.name!r} (pads {crop} for output {[oh, ow]})")
    big = cv.new_value(f"{node.outputs[0]}_canvas", Layout(NHWC), (n, cout) + canvas, x.dtype)
    inputs[0] = cv.int32_const(f"{node.name}_output_shape", [n, *canvas, cout])
    cv.emit("TransposeConv", inputs, [big.name], dict(attrs, padding="VALID"), big.name)
    out = cv.define(node.outputs[0], Layout(NHWC))
    cv.emit("StridedSlice", [big.name, cv.int32_const(f"{node.name}_begin", [0, *crop, 0]),
                             cv.int32_const(f"{node.name}_end", [n, crop[0] + oh, crop[1] + ow,
                                                                 cout]),
                             cv.int32_const(f"{node.name}_strides", [1, 1, 1, 1])], [out.name],
            {"begin_mask": 0b1001, "end_mask": 0b1001, "ellipsis_mask": 0, "new_axis_mask": 0,
             "shrink_axis_mask": 0, "offset": False}, node.name)  # N and C whole


# -- Resize -> RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR / GATHER ----------------------------
NEAREST_SETTINGS = ((False, False), (False, True), (True, False))  # (align_corners, hpc)
LINEAR_SETTINGS = {"align_corners": (True, False), "half_pixel": (False, True),
                   "pytorch_half_pixel": (False, True), "asymmetric": (False, False)}


def _resize_setup(cv, node) -> tuple:
    """(x value, output shape, ONNX per-axis scales, mode, coordinate mode, nearest mode)."""
    x = cv.value(node.inputs[0])
    inputs = [None] + [_const(cv, node, i) for i in (1, 2, 3)]
    try:
        out, scales = onnx_resize_plan(node, x.shape, inputs)
    except (ValueError, NotImplementedError) as exc:
        raise Unmappable(f"Resize {node.name!r} ({exc})") from None
    attrs = node.attrs
    mode = attrs.get("mode") or "nearest"
    coord = attrs.get("coordinate_transformation_mode") or "half_pixel"
    nearest = attrs.get("nearest_mode") or "round_prefer_floor"
    what = f"Resize {node.name!r}"
    if len(x.shape) != 4 or tuple(out[:2]) != tuple(x.shape[:2]):
        raise Unmappable(f"{what} (resizes {list(x.shape)} to {list(out)}; TFLite resizes H "
                         "and W of a 4-D tensor only)")
    if mode not in ("nearest", "linear"):
        raise Unmappable(f"{what} (mode {mode})")
    if coord not in RESIZE_COORDINATE_MODES:
        raise Unmappable(f"{what} (coordinate_transformation_mode {coord})")
    if int(attrs.get("antialias", 0) or 0) and any(s < 1 for s in scales):
        raise Unmappable(f"{what} (antialias when downscaling)")
    if tuple(out) != cv.shape(node.outputs[0]):
        raise Unmappable(f"{what} (output {list(cv.shape(node.outputs[0]))}, the scales give "
                         f"{list(out)})")
    return x, out, scales, mode, coord, nearest


def _resize(cv, node) -> None:
    x, out, scales, mode, coord, nearest = _resize_setup(cv, node)
    v = cv.relayout(x, NHWC)
    sizes = [int(out[2]), int(out[3])]
    axes = [(int(x.shape[2 + i]), sizes[i], scales[2 + i]) for i in range(2)]
    if mode == "nearest":
        want = [onnx_nearest_indices(coord, nearest, o, i, s) for i, o, s in axes]
        for align, hpc in NEAREST_SETTINGS:
            if all(np.array_equal(nearest_indices(i, o, align, hpc), idx)
                   for (i, o, _), idx in zip(axes, want)):
                _emit_resize(cv, node, "ResizeNearest", v, sizes, align, hpc)
                return
        steps = [(axis, idx) for axis, idx in ((1, want[0]), (2, want[1]))
                 if not np.array_equal(idx, np.arange(v.dst_shape[axis]))]
        if not steps:  # the identity
            cv.alias(node.outputs[0], v)
            return
        for k, (axis, idx) in enumerate(steps):  # exact for any ONNX mode
            shape = list(v.shape)
            shape[v.layout.perm[axis]] = len(idx)
            nxt = cv.define(node.outputs[0], Layout(NHWC)) if k == len(steps) - 1 else \
                cv.new_value(f"{node.outputs[0]}_rows", Layout(NHWC), tuple(shape), v.dtype)
            cv.emit("Gather", [v.name, cv.add_const(f"{nxt.name}_index", idx.astype(np.int32))],
                    [nxt.name], {"axis": axis, "batch_dims": 0}, nxt.name)
            v = nxt
        return
    if coord not in LINEAR_SETTINGS or (coord == "pytorch_half_pixel" and min(sizes) == 1):
        raise Unmappable(f"Resize {node.name!r} (linear with {coord})")
    align, hpc = LINEAR_SETTINGS[coord]
    for i, o, s in axes:
        onnx_c = np.clip(onnx_source_coordinates(coord, o, i, s), 0, i - 1)
        tfl_c = np.clip(bilinear_taps(i, o, align, hpc)[2], 0, i - 1)
        if not np.allclose(onnx_c, tfl_c, rtol=0, atol=1e-5 * max(i, 1)):
            raise Unmappable(f"Resize {node.name!r} (scale {float(s):g} of {i} pixels is not "
                             f"{o}/{i}: TFLite resizes by the output size)")
    _emit_resize(cv, node, "ResizeBilinear", v, sizes, align, hpc)


def _emit_resize(cv, node, op, v, sizes, align, hpc) -> None:
    out = cv.define(node.outputs[0], Layout(NHWC))
    cv.emit(op, [v.name, cv.int32_const(f"{node.name}_size", sizes)], [out.name],
            {"align_corners": align, "half_pixel_centers": hpc}, node.name)


# -- Split -> SPLIT / SPLIT_V ---------------------------------------------------------------
def _split(cv, node) -> None:
    x = cv.value(node.inputs[0])
    rank = len(x.shape)
    axis = int(node.attrs.get("axis", 0) or 0)
    if not -rank <= axis < rank:
        raise Unmappable(f"Split {node.name!r} (axis {axis} of a rank-{rank} tensor)")
    axis %= rank
    sizes = onnx_split_sizes(node, [None, _const(cv, node, 1)], x.shape[axis])
    if len(sizes) != len(node.outputs) or sum(sizes) != x.shape[axis] or min(sizes) < 1:
        raise Unmappable(f"Split {node.name!r} (parts {sizes} of {x.shape[axis]})")
    if x.layout.flat is not None:
        x = cv.relayout(x, identity(rank))
    t_axis = x.layout.perm.index(axis)
    outs = [cv.define(o, x.layout).name for o in node.outputs]
    attrs = {"num_splits": len(sizes)}
    if len(set(sizes)) == 1:
        cv.emit("SplitEqual", [cv.int32_const(f"{node.name}_axis", [t_axis]), x.name], outs,
                attrs, node.name)
    else:
        cv.emit("SplitSizes", [x.name, cv.int32_const(f"{node.name}_sizes", sizes),
                               cv.int32_const(f"{node.name}_axis", [t_axis])], outs, attrs,
                node.name)


SPATIAL_RULES = {"ConvTranspose": _conv_transpose, "Resize": _resize, "Split": _split}


# -- checks before converting ---------------------------------------------------------------
def _check_conv_transpose(graph, node):
    for index, what in ((1, "weights"), (2, "bias")):
        name = node.inputs[index] if index < len(node.inputs) else None
        if name is not None and graph.constant(name) is None:
            return NON_CONSTANT, f"ConvTranspose {node.name!r} ({what} {name!r} is not a constant)"
    w = graph.constant(node.inputs[1])
    if w.ndim not in (3, 4):
        return UNMAPPED, f"{w.ndim - 2}-D ConvTranspose"
    group = int(node.attrs.get("group", 1) or 1)
    dilations = _ints(node.attrs.get("dilations") or [1] * (w.ndim - 2))
    if group != 1 or set(dilations) != {1}:
        return EXPRESS, _transpose_conv_limits(node, group, dilations)
    return None


def _transpose_conv_limits(node, group, dilations) -> str:
    what = ([f"group {group}"] if group != 1 else []) + \
        ([f"dilations {dilations}"] if set(dilations) != {1} else [])
    return (f"ConvTranspose {node.name!r} ({', '.join(what)}: TRANSPOSE_CONV has no groups "
            "and no dilation)")


def _check_params(*indices):
    def check(graph, node):
        for i in indices:
            name = node.inputs[i] if i < len(node.inputs) else None
            if name is not None and graph.constant(name) is None:
                return NON_CONSTANT, f"{onnx_op(node)} {node.name!r} (parameter {name!r} is " \
                                     "not a constant)"
        return None

    return check


def _check_resize(graph, node):
    problem = _check_params(1, 2, 3)(graph, node)
    if problem:
        return problem
    mode = node.attrs.get("mode") or "nearest"
    coord = node.attrs.get("coordinate_transformation_mode") or "half_pixel"
    if mode not in ("nearest", "linear"):
        return EXPRESS, f"Resize {node.name!r} (mode {mode})"
    if coord not in RESIZE_COORDINATE_MODES:
        return EXPRESS, f"Resize {node.name!r} (coordinate_transformation_mode {coord})"
    return None


SPATIAL_CHECKS = {"ConvTranspose": _check_conv_transpose, "Resize": _check_resize,
                  "Split": _check_params(1)}
CHECKS.update(SPATIAL_CHECKS)


# -- rewrites of the static ONNX graph ------------------------------------------------------
LIFTED = frozenset({"Conv2D", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
                    "GlobalMaxPool"})
SINKS = frozenset({"Relu", "Clip", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "LeakyRelu",
                   "Identity", "Dropout"})


def _axis_const(graph: Graph, base: str) -> str:
    return graph.add_constant(base, np.array([2], np.int64))


def _lift_node(graph: Graph, node, tag: str, lifted_inputs: dict) -> list:
    """[Unsqueeze (unless `x` has one already: `lifted_inputs`), the node made 2-D, Squeeze]
    for a 1-D node."""
    x, y = node.inputs[0], node.outputs[0]
    xt, yt = graph.tensors[x], graph.tensors[y]
    parts = []
    if x not in lifted_inputs:
        x4 = graph.add_value(f"{x}_2d", tuple(xt.shape[:2]) + (1,) + tuple(xt.shape[2:]),
                             xt.dtype)
        parts.append(Node("Unsqueeze", [x, _axis_const(graph, f"{node.name}_axis")], [x4], {},
                          f"{node.name}/{tag}_in"))
        lifted_inputs[x] = x4
    x4 = lifted_inputs[x]
    y4 = graph.add_value(f"{y}_2d", tuple(yt.shape[:2]) + (1,) + tuple(yt.shape[2:]), yt.dtype)
    attrs = dict(node.attrs)
    for key, unit in (("kernel_shape", 1), ("strides", 1), ("dilations", 1),
                      ("output_padding", 0)):
        if attrs.get(key) is not None:
            attrs[key] = [unit] + _ints(attrs[key])
    if attrs.get("pads") is not None:
        p = _ints(attrs["pads"])
        attrs["pads"] = [0, p[0], 0, p[1]]
    if attrs.get("output_shape") is not None:
        attrs["output_shape"] = [1] + _ints(attrs["output_shape"])[-1:]
    inputs = [x4] + list(node.inputs[1:])
    if node.op in ("Conv2D", "ConvTranspose"):
        w = graph.constant(node.inputs[1])
        inputs[1] = graph.add_constant(f"{node.inputs[1]}_2d",
                                       w.reshape(w.shape[:2] + (1,) + w.shape[2:]))
        attrs["kernel_shape"] = [1, int(w.shape[2])]
    lifted = Node(node.op, inputs, [y4], attrs, node.name)
    return parts + [lifted, Node("Squeeze", [y4, _axis_const(graph, f"{node.name}_axis")], [y],
                                 {}, f"{node.name}/{tag}_out")]


def _is_1d(graph: Graph, node) -> bool:
    if node.opaque or node.op not in LIFTED:
        return False
    shape = graph.tensors[node.inputs[0]].shape
    if shape is None or len(shape) != 3:
        return False
    if node.op in ("Conv2D", "ConvTranspose"):
        w = graph.constant(node.inputs[1])
        return w is not None and w.ndim == 3
    return True


def lift_1d(graph: Graph) -> int:
    """1-D convs and pools as 2-D ones with H = 1 (module docstring). Returns how many."""
    replacements, squeezes, lifted_inputs = {}, set(), {}
    for node in graph.nodes:
        if _is_1d(graph, node):
            parts = _lift_node(graph, node, "h1", lifted_inputs)
            squeezes.add(id(parts[-1]))
            replacements[id(node)] = parts
    graph.remove_nodes((), replacements)
    if replacements:
        _sink_squeezes(graph, squeezes)
    return len(replacements)


def _sink_squeezes(graph: Graph, squeezes: set) -> None:
    """Move each lifted Squeeze past the unary ops reading it, and past an Add / Sub / Mul / Div
    whose other operand is another lifted Squeeze's output (a residual) or a constant (given
    the size-1 axis); drop Squeeze -> Unsqueeze."""
    changed = True
    while changed:
        changed = False
        outputs = set(graph.outputs)
        for s in [n for n in graph.nodes if id(n) in squeezes]:
            y3 = s.outputs[0]
            readers = graph.readers(y3)
            if y3 in outputs or not readers:
                continue
            u = readers[0]
            if len(readers) == 1 and not u.opaque and _single_output(u):
                if u.op in SINKS and u.inputs[0] == y3:
                    _move_past(graph, s, u, [s.inputs[0]] + list(u.inputs[1:]))
                    changed = True
                    break
                operands = _binary_operands(graph, u, y3, squeezes)
                if operands is not None:
                    other = graph.producer(u.inputs[1] if u.inputs[0] == y3 else u.inputs[0])
                    _move_past(graph, s, u, operands)
                    if other is not None and id(other) in squeezes:
                        graph.remove_nodes([other])
                        squeezes.discard(id(other))
                    changed = True
                    break
            unsqueezes = [r for r in readers if r.op == "Unsqueeze" and not r.opaque
                          and _axis_two(graph, r) and r.outputs[0] not in outputs]
            if len(unsqueezes) == len(readers):
                for r in readers:
                    graph.replace_uses(r.outputs[0], s.inputs[0])
                graph.remove_nodes(readers + [s])
                changed = True
                break
    used = graph.needed_names() | set(graph.inputs) | set(graph.uses.producer)
    for name in [k for k in graph.tensors if k not in used]:
        del graph.tensors[name]


BINARY_SINKS = frozenset({"Add", "Sub", "Mul", "Div"})


def _binary_operands(graph, node, y3, squeezes):
    """The 4-D operands of elementwise `node` reading lifted Squeeze output `y3`, or None."""
    if node.op not in BINARY_SINKS or len(node.inputs) != 2 or y3 not in node.inputs[:2] \
            or node.inputs[0] == node.inputs[1]:
        return None
    out = graph.tensors[node.outputs[0]].shape
    if out is None or len(out) != 3:
        return None
    operands = []
    for name in node.inputs:
        p = graph.producer(name)
        c = graph.constant(name)
        if p is not None and id(p) in squeezes and graph.sole_reader(name) is node:
            operands.append(p.inputs[0])
        elif c is not None:
            data = c if c.ndim < 2 else c.reshape(c.shape[:-1] + (1,) + c.shape[-1:])
            # 1-D at least (a scalar operand becomes [1]); a 1-D one keeps its array, so the
            # two tensors share one buffer when both are written
            operands.append(graph.add_constant(f"{name}_2d", np.ascontiguousarray(data),
                                               share=True))
        else:
            return None
    return operands


def _move_past(graph: Graph, s, node, inputs) -> None:
    """Squeeze `s` now follows `node`, which reads `inputs` (4-D) and writes a 4-D tensor."""
    z3 = node.outputs[0]
    t = graph.tensors[s.inputs[0]]
    z4 = graph.add_value(f"{z3}_2d", tuple(t.shape), graph.tensors[z3].dtype)
    graph.set_inputs(node, inputs)
    graph.set_outputs(node, [z4] + node.outputs[1:])
    graph.nodes.remove(s)  # moved in the list, not out of the graph: the index stays
    graph.set_inputs(s, [z4] + s.inputs[1:])
    graph.set_outputs(s, [z3] + s.outputs[1:])
    graph.nodes.insert(graph.nodes.index(node) + 1, s)


def _single_output(node) -> bool:
    return all(o is None for o in node.outputs[1:])


def _axis_two(graph: Graph, node) -> bool:
    axes = graph.constant(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    return axes is not None and _ints(axes) in ([2], [-2]) and \
        len(graph.tensors[node.outputs[0]].shape or ()) == 4
