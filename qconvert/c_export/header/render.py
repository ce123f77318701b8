"""Rendering of the C header: every layer's weights, biases, multipliers, shifts and constants.

    text = render_header(graph, HeaderOptions(prefix="kws", source_name="kws.tflite", ...))

The numbers are TFLite Micro's load-time values from `qconvert.int8.prepare.layer_params`; the
op table `layer_spec.OP_SPECS` says what each op contributes; names come from `c_names`. Output
is a pure function of the graph and the options (no dates, no absolute paths), so the same model
and options give byte-identical headers.

Per layer (identifier `<prefix>_<layer>_<suffix>`, arrays lower case, macros upper case):
- `OP_INDEX` (position in the model's operator list); `INPUT_SHAPE` / `_RANK` / `_LEN` for each
  activation input (`INPUT`, `INPUT2`, ...) and output (`OUTPUT`, ...); `SHAPE` macros are
  brace initializers;
- the op's parameters (see `layer_spec`), arrays with a `_LEN` macro;
- weights (`const int8_t`), constant int8 operands of other ops (`input2`...), constant
  integer operands the op reads (paddings, permutation, indices) as `const int32_t`.
Arrays are `static const` (flash), aligned to 4 bytes by `QCONVERT_ARRAY_ATTR` (int64 arrays:
naturally aligned, `QCONVERT_CONST_ATTR`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert import __version__
from qconvert.errors import QConvertError
from qconvert.int8.prepare import layer_params
from qconvert.ir.graph import list_ops

from ..c_names import NameTable, layer_base
from ..c_text import c_array_body, c_comment, c_float, c_int
from ..fc_layout import FC_LAYOUTS, fc_weights_in_layout
from .layer_spec import OP_SPECS

ROUNDINGS = {
    "double": "double rounding: TFLite's MultiplyByQuantizedMultiplier (TFLite Micro, CMSIS-NN's "
              "default build)",
    "single": "single rounding: CMSIS-NN built with CMSIS_NN_USE_SINGLE_ROUNDING (qconvert's "
              "kernel: -DQCONVERT_SINGLE_ROUNDING)",
}
_DATA_CTYPES = {"int8": "int8_t", "int16": "int16_t"}
_MODEL_SUFFIXES = ("NUM_LAYERS", "SINGLE_ROUNDING", "FC_LAYOUT_1X4", "NUM_INPUTS",
                   "NUM_OUTPUTS", "WEIGHTS_H")
_IO_SUFFIXES = ("SCALE", "ZERO_POINT", "SHAPE", "RANK", "LEN")

ARRAY_ATTR_BLOCK = """\
#ifndef QCONVERT_ARRAY_ATTR /* 4-byte aligned, and no warning for the arrays a file leaves unused */
#if defined(__GNUC__) || defined(__clang__) || defined(__ARMCC_VERSION) || defined(__CC_ARM)
#define QCONVERT_ARRAY_ATTR __attribute__((aligned(4), unused))
#elif defined(__ICCARM__)
#define QCONVERT_ARRAY_ATTR _Pragma("data_alignment=4")
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define QCONVERT_ARRAY_ATTR _Alignas(4)
#else
#error "define QCONVERT_ARRAY_ATTR to align arrays to 4 bytes with this compiler"
#endif
#endif
#ifndef QCONVERT_CONST_ATTR /* int64 arrays and structs: their own alignment, never lowered */
#if defined(__GNUC__) || defined(__clang__) || defined(__ARMCC_VERSION) || defined(__CC_ARM)
#define QCONVERT_CONST_ATTR __attribute__((unused))
#else
#define QCONVERT_CONST_ATTR
#endif
#endif
"""
# aligned(4) on an int64_t array or a struct holding pointers would LOWER its alignment on a
# host whose int64_t / pointers are 8-byte aligned (GCC honours it; C11 forbids it): those
# get QCONVERT_CONST_ATTR (their natural alignment, which is at least what their loads need)
WIDE_CTYPES = frozenset({"int64_t", "uint64_t", "double"})


def const_attr(ctype: str) -> str:
    """The attribute macro of a static const array of `ctype`: 4-byte aligned for the narrow
    types the kernels read as words, natural alignment for the wider ones."""
    return "QCONVERT_CONST_ATTR" if ctype in WIDE_CTYPES else "QCONVERT_ARRAY_ATTR"


@dataclass
class HeaderOptions:
    """What the header is called and how it is laid out (see the CLI's export-c-header)."""

    prefix: str
    fc_layout: str = "1x4"
    rounding: str = "double"
    source_name: str = "model.tflite"
    source_sha256: str = ""
    provenance: str | None = None


@dataclass
class _Item:
    """One `#define` (`value`) or one array (`ctype` and `data`) of a layer or of the model."""

    suffix: str
    value: str | None = None
    ctype: str | None = None
    data: np.ndarray | None = None


@dataclass
class _Layer:
    index: int
    node: object
    items: list
    comment: list
    name: str = ""


def render_header(graph, options: HeaderOptions) -> str:
    """The C header of the int8 TFLite `graph` (a Graph or a Model), as text.

    Raises QConvertError naming every op the header cannot express (at once), and every layer
    whose parameters TFLite Micro would refuse.
    """
    graph = graph.graph if hasattr(graph, "graphs") else graph
    if options.fc_layout not in FC_LAYOUTS:
        raise QConvertError(f"unknown --fc-layout {options.fc_layout!r}; one of {FC_LAYOUTS}")
    if options.rounding not in ROUNDINGS:
        raise QConvertError(f"unknown rounding {options.rounding!r}")
    _check_ops(graph)
    from qconvert.quant.invariants import check_int8_tflite

    check_int8_tflite(graph)
    params = _all_params(graph)
    layers = [_layer(graph, i, node, params[i], options) for i, node in enumerate(graph.nodes)]
    model_items = _model_items(graph, options)
    table = NameTable(options.prefix, [it.suffix for it in model_items])
    for layer in layers:
        layer.name = table.claim(layer_base(layer.node.name or layer.node.outputs[0],
                                            layer.index), _suffixes(layer.items))
    upper = options.prefix.upper()
    out = _preamble(layers, options)
    out += [f"#ifndef {upper}_WEIGHTS_H", f"#define {upper}_WEIGHTS_H", "",
            "#include <stdint.h>", "", ARRAY_ATTR_BLOCK]
    out += _model_section(model_items, options)
    for layer in layers:
        out += [""] + layer.comment
        out += _items_text(f"{options.prefix}_{layer.name}", layer.items)
    out += ["", f"#endif /* {upper}_WEIGHTS_H */", ""]
    return "\n".join(out)


# -- checks -----------------------------------------------------------------------------------
def _check_ops(graph) -> None:
    counts = graph.op_counts(lambda node: node.opaque or node.op not in OP_SPECS)
    if counts:
        raise QConvertError(f"cannot export a C header: ops it cannot express (no int8 "
                            f"parameters): {list_ops(counts)}")


def _all_params(graph) -> list:
    """layer_params of every node; all refusals reported at once."""
    result, errors = [], []
    for node in graph.nodes:
        try:
            result.append(layer_params(graph, node))
        except QConvertError as exc:
            errors.append(str(exc))
            result.append(None)
    if errors:
        raise QConvertError("cannot export a C header: " + "; ".join(errors))
    return result


def _static_shape(graph, name) -> tuple:
    """Static shape of an activation; a dynamic first (batch) dimension counts as 1."""
    shape = graph.tensors[name].shape
    if shape is None:
        raise QConvertError(f"tensor {name!r} has an unknown shape; a C header needs static "
                            "shapes")
    dims = []
    for i, d in enumerate(shape):
        if isinstance(d, (int, np.integer)) and int(d) >= 0:
            dims.append(int(d))
        elif i == 0:
            dims.append(1)
        else:
            raise QConvertError(f"tensor {name!r} has a dynamic dimension {i}; a C header needs "
                                "static shapes")
    return tuple(dims)


# -- items ------------------------------------------------------------------------------------
def _suffixes(items) -> list:
    names = []
    for it in items:
        names.append(it.suffix)
        if it.ctype is not None:
            names.append(f"{it.suffix}_LEN")
    if len(set(names)) != len(names):
        raise RuntimeError(f"internal: duplicate identifiers in one layer: {sorted(names)}")
    return names


def _shape_items(tag: str, shape: tuple, with_len: bool = True) -> list:
    items = [] if not shape else [_Item(f"{tag}_SHAPE", "{" + ", ".join(map(str, shape)) + "}")]
    items.append(_Item(f"{tag}_RANK", str(len(shape))))
    if with_len:
        items.append(_Item(f"{tag}_LEN", str(int(np.prod(shape, dtype=np.int64)))))
    return items


def _array(suffix, ctype, values) -> _Item:
    return _Item(suffix, ctype=ctype, data=np.asarray(values).reshape(-1))


def _field_items(key, suffix, kind, value, params=None) -> list:
    if kind == "int":
        return [_Item(suffix, c_int(value))]
    if kind == "bool":
        return [_Item(suffix, "1" if value else "0")]
    if kind == "float":
        return [_Item(suffix, c_float(value))]
    if kind == "hw":
        return [_Item(f"{suffix}_H", c_int(value[0])), _Item(f"{suffix}_W", c_int(value[1]))]
    if kind == "pads":
        return [_Item(f"{suffix}_{side}", c_int(v))
                for side, v in zip(("TOP", "LEFT", "BOTTOM", "RIGHT"), value)]
    if kind == "array":
        if key == "bias":  # optional: TFLite's CONV_2D and FULLY_CONNECTED may have none
            if value is None:
                return [_Item("HAS_BIAS", "0")]
            wide = (params or {}).get("accumulator_bits") == 64  # a 16x8 layer's int64 bias
            return [_Item("HAS_BIAS", "1"), _array(suffix, "int64_t" if wide else "int32_t",
                                                   value)]
        return [_array(suffix, "int32_t", value)]
    if kind == "array16":
        return [_array(suffix, "int16_t", value)]
    raise RuntimeError(f"internal: unknown field kind {kind!r}")


def _layer(graph, index, node, params, options) -> _Layer:
    spec = OP_SPECS[node.op]
    emitted = {key for key, _, _ in spec.fields}
    unknown = set(params) - emitted - spec.skipped
    if unknown:
        raise RuntimeError(f"internal: layer_spec has no rule for {node.op} parameters "
                           f"{sorted(unknown)}")
    items = [_Item("OP_INDEX", str(index))]
    used = set()
    if spec.weights is not None:
        used |= set(spec.weight_slots)
    used |= {i for i, _ in spec.constants}
    for slot, name in enumerate(node.inputs):
        if name is None or slot in used:
            continue
        tag = "INPUT" if slot == spec.data_slot else f"INPUT{slot + 1}"
        t = graph.tensors[name]
        if t.data is None:
            items += _shape_items(tag, _static_shape(graph, name))
        elif t.dtype in _DATA_CTYPES:  # a constant operand of Add, Mul, Concat...
            items += _shape_items(tag, tuple(t.data.shape), with_len=False)
            items.append(_array(tag, _DATA_CTYPES[t.dtype], t.data))
    for k, name in enumerate(node.outputs):
        if name is not None:
            items += _shape_items("OUTPUT" if k == 0 else f"OUTPUT{k + 1}",
                                  _static_shape(graph, name))
    items += _dims_items(graph, node, spec.dims, options, spec.data_slot)
    if spec.weights is not None:
        w = graph.tensors[node.inputs[1]].data
        data = fc_weights_in_layout(w, options.fc_layout) if spec.weights == "fc" else w
        items.append(_array("WEIGHTS", "int8_t", data))
    for key, suffix, kind in spec.fields:
        if key in params:
            items += _field_items(key, suffix, kind, params[key], params)
    for attr, suffix in spec.attrs:
        if node.attrs.get(attr) is not None:
            items.append(_Item(suffix, c_int(node.attrs[attr])))
    for slot, suffix in spec.constants:
        data = graph.constant(node.inputs[slot]) if slot < len(node.inputs) else None
        if data is not None and np.asarray(data).dtype.kind in "iu":
            wide = spec.int64_constants and np.asarray(data).dtype == np.int64
            items.append(_array(suffix, "int64_t" if wide else "int32_t", data))
    return _Layer(index, node, items, _layer_comment(graph, index, node, spec, options))


def _dims_items(graph, node, dims, options, data_slot: int = 0) -> list:
    """Dimension macros by kind: `conv`, `spatial` (NHWC input and output), `fc`, `rows`."""
    if dims is None:
        return []
    x = _static_shape(graph, node.inputs[data_slot])
    y = _static_shape(graph, node.outputs[0])
    if dims in ("conv", "spatial"):
        if len(x) != 4 or len(y) != 4:
            raise QConvertError(f"{node.op} {node.name!r}: expected NHWC input and output")
        items = [_Item("BATCHES", str(x[0])), _Item("INPUT_H", str(x[1])),
                 _Item("INPUT_W", str(x[2])), _Item("INPUT_C", str(x[3])),
                 _Item("OUTPUT_H", str(y[1])), _Item("OUTPUT_W", str(y[2])),
                 _Item("OUTPUT_C", str(y[3]))]
        if dims == "conv":
            w = graph.tensors[node.inputs[1]].data.shape
            items += [_Item("KERNEL_H", str(w[1])), _Item("KERNEL_W", str(w[2]))]
        return items
    if dims == "fc":
        rows, depth = graph.tensors[node.inputs[1]].data.shape
        size = int(np.prod(x, dtype=np.int64))
        if depth == 0 or size % depth:
            raise QConvertError(f"{node.op} {node.name!r}: input of {size} values is not a "
                                f"whole number of rows of {depth}")
        return [_Item("BATCHES", str(size // depth)), _Item("ACCUM_DEPTH", str(depth)),
                _Item("OUTPUT_DEPTH", str(rows)),
                _Item("WEIGHTS_1X4", "1" if options.fc_layout == "1x4" else "0")]
    if dims == "rows":
        size = int(np.prod(x, dtype=np.int64))
        row = x[-1] if x else 1
        return [_Item("NUM_ROWS", str(size // row if row else 0)), _Item("ROW_SIZE", str(row))]
    raise RuntimeError(f"internal: unknown dims kind {dims!r}")


def _model_items(graph, options) -> list:
    items = [_Item("NUM_LAYERS", str(len(graph.nodes))),
             _Item("SINGLE_ROUNDING", "1" if options.rounding == "single" else "0"),
             _Item("FC_LAYOUT_1X4", "1" if options.fc_layout == "1x4" else "0"),
             _Item("NUM_INPUTS", str(len(graph.inputs))),
             _Item("NUM_OUTPUTS", str(len(graph.outputs)))]
    for tag, names in (("INPUT", graph.inputs), ("OUTPUT", graph.outputs)):
        for i, name in enumerate(names):
            t = graph.tensors[name]
            if t.quant is not None and t.quant.scale.size == 1:
                items += [_Item(f"{tag}{i}_SCALE", c_float(t.quant.scale[0])),
                          _Item(f"{tag}{i}_ZERO_POINT",
                                c_int(t.quant.zero_point[0] if t.quant.zero_point.size else 0))]
            items += _shape_items(f"{tag}{i}", _static_shape(graph, name))
    items.append(_Item("WEIGHTS_H"))  # the include guard
    return items


# -- text -------------------------------------------------------------------------------------
def _describe(graph, name) -> str:
    t = graph.tensors[name]
    shape = "?" if t.shape is None else "[" + ", ".join(
        str(d) if isinstance(d, (int, np.integer)) else "?" for d in t.shape) + "]"
    shown = name if len(name) <= 64 else name[:61] + "..."
    text = f"{c_comment(shown)} {shape} {t.dtype}"
    q = t.quant
    if q is not None and q.scale.size == 1:
        zp = int(q.zero_point[0]) if q.zero_point.size else 0
        text += f", scale {c_float(q.scale[0])[:-1]}, zero point {zp}"
    elif q is not None and q.scale.size > 1:
        text += (f", per-channel scales {c_float(q.scale.min())[:-1]}.."
                 f"{c_float(q.scale.max())[:-1]}")
    return text


def _op_label(node) -> str:
    act = str(node.attrs.get("activation") or "NONE").upper()
    return node.op if act == "NONE" else f"{node.op}+{act}"


def _layer_comment(graph, index, node, spec, options) -> list:
    lines = ["/* " + "-" * 93, f" * Layer {index}: {_op_label(node)}",
             f" * name:    {c_comment(node.name)}"]
    for slot, name in enumerate(node.inputs):
        if name is not None:
            role = {1: "weights", 2: "bias"}.get(slot, "input") if spec.weights else "input"
            lines.append(f" * {role + ':':8} {_describe(graph, name)}")
    for name in node.outputs:
        if name is not None:
            lines.append(f" * output:  {_describe(graph, name)}")
    if spec.weights == "fc":
        order = ("1x4 interleaved (qconvert_fc_1x4_s8)" if options.fc_layout == "1x4"
                 else "row-major [OUTPUT_DEPTH][ACCUM_DEPTH] (arm_fully_connected_s8)")
        lines.append(f" * weights order: {order}")
    lines.append(" */")
    return lines


def _items_text(stem: str, items: list) -> list:
    defines = []
    for it in items:
        if it.ctype is None:
            defines.append((f"{stem}_{it.suffix}".upper(), it.value))
        else:
            defines.append((f"{stem}_{it.suffix}_LEN".upper(), str(it.data.size)))
    width = max(len(n) for n, _ in defines) + 1
    lines = [f"#define {n:{width}}{v}" for n, v in defines]
    for it in items:
        if it.ctype is not None:
            name = f"{stem}_{it.suffix}".lower()
            length = f"{stem}_{it.suffix}_LEN".upper()
            body = c_array_body(it.data, it.ctype)
            lines.append(f"{const_attr(it.ctype)} static const {it.ctype} {name}[{length}] = {{")
            lines += ([body] if body else []) + ["};"]
    return lines


def _model_section(items, options) -> list:
    upper = options.prefix.upper()
    lines = ["/* The model: its layer count, the rounding assumed, and its inputs and outputs",
             " * (real value = scale * (q - zero point)). */"]
    lines += _items_text(upper, [it for it in items if it.value is not None])
    return lines


def _preamble(layers, options) -> list:
    lines = [
        "/* SPDX-License-Identifier: Apache-2.0 */",
        (f"/* {options.prefix}: int8 weights and requantization parameters for CMSIS-NN-style "
         "firmware."),
        f" * Generated by qconvert {__version__} (qconvert export-c-header); do not edit.",
        " *",
        f" * Source model:   {c_comment(options.source_name)}",
        f" * SHA-256:        {options.source_sha256}",
        f" * qconvert:       {__version__}",
    ]
    if options.provenance:
        lines.append(f" * Quantization:   {c_comment(options.provenance)}")
    lines += [
        f" * Rounding:       {ROUNDINGS[options.rounding]}",
        " * Multipliers and shifts: TFLite Micro's load-time computation from the model's scales",
        " *   (QuantizeMultiplier of double(s_in) * double(s_w[c]) / double(s_out)), so firmware",
        " *   built on this header and firmware running TFLite Micro agree bit for bit.",
        " *",
        " * Arrays (static const: they stay in flash; aligned to 4 bytes, int64_t ones to their",
        " * own alignment; include this header in one .c file), <prefix>_<layer>_<what>, each",
        " * with a <PREFIX>_<LAYER>_<WHAT>_LEN:",
        " *   _weights     int8_t   Conv2D: OHWI [OUTPUT_C][KERNEL_H][KERNEL_W][INPUT_C]",
        " *                         DepthwiseConv2D: [1][KERNEL_H][KERNEL_W][OUTPUT_C]",
        " *                         FullyConnected: " + (
            "1x4 interleaved order (--fc-layout 1x4), for"
            if options.fc_layout == "1x4" else
            "row-major [OUTPUT_DEPTH][ACCUM_DEPTH] (arm_fully_connected_s8)"),
        *([" *                         qconvert_fc_1x4_s8 and CMSIS-NN's legacy",
           " *                         arm_fully_connected_q7_opt only; arm_fully_connected_s8",
           " *                         reads row-major weights: export with --fc-layout rowmajor"]
          if options.fc_layout == "1x4" else []),
        " *   _bias        int32_t  [output channels]; absent when _HAS_BIAS is 0; int64_t in",
        " *                         a 16x8 layer (int16 activations) whose _ACCUMULATOR_BITS",
        " *                         is 64 (int64 accumulator, TFLite's 64-bit requantization)",
        " *   _multiplier  int32_t  [output channels], or [1] for a per-tensor FullyConnected",
        " *   _shift       int32_t  same length; > 0 is a left shift (CMSIS-NN's convention)",
        " *   _paddings, _perm, _indices, _axes  int32_t  constant operands; _input2...  int8_t",
        " *                         (int16_t in 16x8 layers); _exp_lut and",
        " *                         _one_over_one_plus_x_lut  int16_t  an int16 Softmax's tables",
        " * Macros: _INPUT_OFFSET = -z_in and _OUTPUT_OFFSET = +z_out (as CMSIS-NN takes them),",
        " *   _ACTIVATION_MIN / _MAX, _STRIDE_H / _W, _DILATION_H / _W, _PAD_TOP / _LEFT / _BOTTOM /",
        " *   _RIGHT, _INPUT_H / _W / _C, _OUTPUT_H / _W / _C, _KERNEL_H / _W, _ACCUM_DEPTH,",
        " *   _OUTPUT_DEPTH, _BATCHES, _INPUT_SHAPE / _OUTPUT_SHAPE (brace initializers),",
        " *   _INPUT_LEN / _OUTPUT_LEN, and the op's own parameters (Add, Softmax, pools...).",
        " *",
        " * Layers:",
    ]
    width = max([len(_op_label(layer.node)) for layer in layers] + [2])
    for layer in layers:
        lines.append(f" * {layer.index:4d}  {_op_label(layer.node):{width}}  "
                     f"{options.prefix}_{layer.name}")
    lines += [" */", ""]
    return lines
