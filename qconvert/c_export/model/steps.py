"""Each layer of an int8 model as one C kernel call: the lowering of `qconvert export-c`.

    steps = lower_graph(graph, KernelOptions(kernels="portable", fc_layout="1x4"))

A `Step` is what the generated `invoke` does for one node: the kernel call (a
`string.Template` over `$in0`, `$in1`, ..., `$out0`, `$scratch` and `$L`, the layer's C name),
the `static const` arrays and parameter structs it reads (flash), the kernel sources it needs,
and what the memory plan must know (`memory_plan.PlanStep`: aliases, the overlap the kernel
allows, scratch bytes).

Every number is TFLite Micro's Prepare-time value from `qconvert.int8.prepare.layer_params` (the
same numbers `export-c-header` writes). Element-wise functions of one int8 value (Relu, Relu6,
Sigmoid, Tanh, HardSwish, int8 Quantize) become 256-entry tables computed by qconvert's integer
kernels (bit-exact with TFLite Micro), one per rounding when they differ; data movement
(Transpose, StridedSlice, Gather, Pad) becomes strided box copies computed by running
the integer kernel on index arrays (`index_maps`); Concat is `concat_steps`' row copies.
Reshape, Squeeze and ExpandDims are aliases (no code).
`cmsis_lowering.lower_cmsis` replaces the calls CMSIS-NN has kernels for.

The layers whose arithmetic is the same for int8 and 16x8 (int16 activations, int8 weights):
conv, depthwise conv, fully connected, pools, Add / Sub / Mul / Maximum / Minimum / PRelu, Mean,
data movement, TransposeConv and BatchMatMul, are lowered here once for both; what the activation
type changes (kernel suffix, element type, output range, kernel sources, how the bias is passed)
is its row of `ACTIVATIONS`. The 16x8-only lowerings are `steps_s16`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from string import Template

import numpy as np

from qconvert.errors import QConvertError
from qconvert.executor.int_kernels import INT_KERNELS, IntContext
from qconvert.int8.prepare import is_int16_node, layer_params
from qconvert.int8.transcendental import get_reciprocal

from ..c_text import c_int
from ..fc_layout import fc_weights_in_layout
from .index_maps import (MAX_RANK, NEVER, boxes_of, broadcast_strides, conv_minread,
                         contiguous_strides, merged, tagged)
from .gather_runs import gather_call
from .memory_plan import PlanStep
from . import steps_fast as fast

DTYPES = {"int8": ("int8_t", 1), "int16": ("int16_t", 2), "float32": ("float", 4),
          "uint8": ("uint8_t", 1),  # uint8: only at the edges (a uint8-I/O model's QUANTIZE)
          "bool": ("uint8_t", 1)}  # bool: one byte 0 / 1, as TFLite Micro's (comparisons)
PORTABLE_FILES = ("qconvert_fc_1x4.h", "qconvert_fc_1x4.c", "qconvert_nn.h",
                  "qconvert_nn_loops.h")
_CONV_FILES = frozenset({"qconvert_nn_conv.c"})
_OPS_FILES = frozenset({"qconvert_nn_ops.c"})
S16_FILES = frozenset({"qconvert_nn_s16.c"})
_LOOKUP_OPS = ("Relu", "Relu6", "Sigmoid", "Tanh", "HardSwish", "LeakyRelu", "Abs")
BINARY = {"Add": "QCONVERT_ADD", "Sub": "QCONVERT_SUB", "Mul": "QCONVERT_MUL",
          "Maximum": "QCONVERT_MAXIMUM", "Minimum": "QCONVERT_MINIMUM", "PRelu": "QCONVERT_PRELU",
          "Div": "QCONVERT_DIV", "SquaredDifference": "QCONVERT_SQUARED_DIFFERENCE"}
MOVEMENT = ("Transpose", "StridedSlice", "Gather", "Pad", "PadV2", "Concat", "ResizeNearest",
            "SplitEqual", "SplitSizes", "SliceBySize", "Pack", "Unpack", "Reverse")


@dataclass(frozen=True)
class Activation:
    """What a layer's activation type changes in its C: one row of `ACTIVATIONS` per type."""

    bits: int                 # 8: int8 layers; 16: 16x8 layers (int16 activations)
    lo: int                   # the type's range (clamps, binary ops' default activation range)
    hi: int
    conv_files: frozenset     # kernel sources of conv, depthwise, row-major FC and pools
    ops_files: frozenset      # of element-wise ops, Mean and data movement
    extra_files: frozenset    # of TransposeConv and BatchMatMul

    @property
    def suffix(self) -> str:
        """Of the kernel names: qconvert_conv_s8, qconvert_conv_s16."""
        return f"s{self.bits}"

    @property
    def ctype(self) -> str:
        return f"int{self.bits}_t"

    def bias_arguments(self, p, channels) -> tuple:
        """(arrays, C arguments) of a weighted layer's bias: int8 `bias` (int32, or NULL);
        16x8 `bias64, bias32`: an int64 bias (or none) for the 64-bit accumulator, or an int32
        one (zeros when the layer has none) for the 32-bit one, as `accumulator_bits` says."""
        if self.bits == 8:
            if p["bias"] is None:
                return [], "NULL"
            return [("bias", "int32_t", p["bias"])], "@L_bias"
        if p["accumulator_bits"] == 32:
            bias = p["bias"] if p["bias"] is not None else np.zeros(channels, np.int64)
            return [("bias", "int32_t", bias)], "NULL, @L_bias"
        if p["bias"] is None:
            return [], "NULL, NULL"
        return [("bias", "int64_t", p["bias"])], "@L_bias, NULL"

    def overlap_reads(self, minread) -> np.ndarray:
        """The lowest input byte each output byte's element reads, from the lowest input
        element each output element reads (`index_maps.conv_minread`): every byte of output
        element i is written after every tap of element i is read, so each carries element i's
        lowest input byte (conservative for the bytes after the first)."""
        size = self.bits // 8
        if size == 1:
            return minread
        return np.repeat(np.where(minread == NEVER, NEVER, size * minread), size)


ACTIVATIONS = {
    "int8": Activation(8, -128, 127, _CONV_FILES, _OPS_FILES,
                       frozenset({"qconvert_nn_extra.c"})),
    "int16": Activation(16, -32768, 32767, S16_FILES, S16_FILES, S16_FILES),
}


def activation_of(graph, node) -> Activation:
    """The `ACTIVATIONS` row of `node`: int16 when it reads or writes an int16 activation."""
    return ACTIVATIONS["int16" if is_int16_node(graph, node) else "int8"]


@dataclass
class KernelOptions:
    """Which kernels the C calls and how fully connected weights are laid out."""

    kernels: str = "portable"
    fc_layout: str = "1x4"


@dataclass
class Step:
    """One node as C: see the module docstring."""

    index: int
    node: object
    plan: PlanStep
    call: Template
    arrays: list = field(default_factory=list)   # (suffix, ctype, values)
    decls: list = field(default_factory=list)    # C lines using $L
    files: set = field(default_factory=set)
    banded: Template | None = None  # the call used instead when the output overlaps the input
    scratch_builds: dict | None = None  # {"helium": bytes, "other": bytes} (CMSIS-NN calls)
    check: Template | None = None   # C run once (NAME_check): `return 2;` if scratch is short
    banded_check: Template | None = None  # the same for the banded call
    helium_tiles: tuple | None = None  # the whole-layer overlap of the Helium call alone
    resets: list = field(default_factory=list)  # C lines (using @L) putting the layer's own
    #                                              state back to its start (NAME_reset_lstm)


def tensor_dims(graph, name) -> tuple:
    """Static shape of an activation (a dynamic batch is 1); QConvertError if unknown."""
    shape = graph.tensors[name].shape
    if shape is None:
        raise QConvertError(f"tensor {name!r} has an unknown shape; export-c needs static shapes")
    dims = []
    for i, d in enumerate(shape):
        if isinstance(d, (int, np.integer)) and int(d) >= 0:
            dims.append(int(d))
        elif i == 0:
            dims.append(1)
        else:
            raise QConvertError(f"tensor {name!r} has a dynamic dimension {i}")
    return tuple(dims)


def tensor_bytes(graph, name) -> int:
    """Bytes of an activation tensor in the arena."""
    return int(np.prod(tensor_dims(graph, name), dtype=np.int64)) * DTYPES[
        graph.tensors[name].dtype][1]


# -- helpers ----------------------------------------------------------------------------------
def activation_inputs(graph, node) -> list:
    return [n for n in node.inputs if n is not None and graph.tensors[n].data is None]


def c_struct(values) -> str:
    return "{" + ", ".join(v if isinstance(v, str) else c_int(v) for v in values) + "}"


def box_literal(box) -> str:
    rank = len(box["shape"])
    if rank > MAX_RANK:
        raise QConvertError(f"a copy of rank {rank} (more than {MAX_RANK} axes)")
    pad = [0] * (MAX_RANK - rank)
    return c_struct([rank, c_struct(box["shape"] + pad), c_struct(box["in_strides"] + pad),
                     c_struct(box["out_strides"] + pad), box["in_base"], box["out_base"]])


def operand_pointer(graph, node, slot, step_arrays, suffix, bits=8) -> str:
    """C expression for input `slot`: `$inK` for an activation, else a const array (int8, or
    int16 for `bits` 16)."""
    name = node.inputs[slot]
    acts = activation_inputs(graph, node)
    if graph.tensors[name].data is None:
        return f"$in{acts.index(name)}"
    data = graph.tensors[name].data
    if data.dtype != (np.int8 if bits == 8 else np.int16):
        raise QConvertError(f"{node.op} {node.name!r}: constant operand {name!r} is {data.dtype}")
    step_arrays.append((suffix, f"int{bits}_t", data))
    return f"@L_{suffix}"


def plain_step(graph, node, index, call, arrays=(), decls=(), files=(), overlap=None, alias=False):
    plan = PlanStep(inputs=activation_inputs(graph, node), outputs=[n for n in node.outputs if n],
                    alias=alias, overlap=overlap)
    return Step(index, node, plan, Template(call), list(arrays), list(decls), set(files))


# -- convolutions, fully connected, pools -----------------------------------------------------
def conv_struct(graph, node, p, kernel_hw, depth_multiplier=1, quant=True) -> str:
    """The qconvert_conv_params initializer of a conv, depthwise conv or pool node."""
    n, h, w, c = tensor_dims(graph, node.inputs[0])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    (sh, sw), (dh, dw), pads = p["strides"], p.get("dilations", [1, 1]), p["pads"]
    values = [n, h, w, c, oh, ow, oc, kernel_hw[0], kernel_hw[1], sh, sw, dh, dw, pads[0],
              pads[1], depth_multiplier, p.get("input_offset", 0), p.get("output_offset", 0),
              p["activation_min"], p["activation_max"]]
    values += ["@L_multiplier", "@L_shift"] if quant else ["NULL", "NULL"]
    return c_struct(values)


def conv_overlap(graph, node, p, kernel_hw, per_channel_input, act):
    minread = conv_minread(tensor_dims(graph, node.inputs[0]), tensor_dims(graph, node.outputs[0]),
                           kernel_hw, p["strides"], p.get("dilations", [1, 1]), p["pads"],
                           per_channel_input)
    return [("reads", 0, act.overlap_reads(minread))]


def lower_conv(graph, node, index, options):
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    depthwise = node.op == "DepthwiseConv2D"
    kernel_hw = (w.shape[1], w.shape[2])
    c_in = tensor_dims(graph, node.inputs[0])[3]
    if depthwise:  # from the shapes, as TFLM derives it when the option is 0
        mult = int(w.shape[3]) // c_in
    else:  # the group count of a grouped convolution (filter channels divide input channels)
        mult = c_in // int(w.shape[3])
    bias_arrays, bias = act.bias_arguments(p, int(w.shape[3] if depthwise else w.shape[0]))
    arrays = [("weights", "int8_t", w), ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"]), *bias_arrays]
    decls = [f"static const qconvert_conv_params @L_params = "
             f"{conv_struct(graph, node, p, kernel_hw, mult)};"]
    if options.kernels == "portable":  # cmsis_nn reads the OHWI weights of this step
        made = fast_conv_step(graph, node, index)
        if made is not None:
            return made
    fn = f"qconvert_{'depthwise_conv' if depthwise else 'conv'}_{act.suffix}"
    per_group = int(w.shape[0]) // mult if not depthwise else 1
    chan = (lambda oc, m=mult: oc // m) if depthwise else \
        (lambda oc, g=per_group, f=int(w.shape[3]): (oc // g) * f)
    return plain_step(graph, node, index, f"{fn}($in0, @L_weights, {bias}, $out0, &@L_params);",
                      arrays, decls, act.conv_files,
                  conv_overlap(graph, node, p, kernel_hw, chan, act))


def fast_conv_step(graph, node, index):
    """An int8 Conv2D (grouped or not) as qconvert_conv_fast_s8 (`steps_fast`), or None
    for the layers it does not take (depthwise, 16x8, a negative multiplier)."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    in_shape, out_shape = tensor_dims(graph, node.inputs[0]), tensor_dims(graph, node.outputs[0])
    groups = in_shape[3] // int(w.shape[3]) if int(w.shape[3]) else 0
    if (node.op != "Conv2D" or act.bits != 8 or groups < 1
            or groups * int(w.shape[3]) != in_shape[3] or int(w.shape[0]) % groups
            or not fast.nonnegative(p["output_multiplier"])):
        return None
    kernel_hw = (w.shape[1], w.shape[2])
    if whole_window(in_shape, out_shape, kernel_hw, p, groups):
        return _whole_window_fc(graph, node, index, p, w, in_shape[0])
    bias_arrays, bias = act.bias_arguments(p, int(w.shape[0]))
    arrays = [("weights", "int8_t", fast.conv_weights(w, groups)),
              ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"]), *bias_arrays]
    decls = [f"static const qconvert_conv_params @L_params = "
             f"{conv_struct(graph, node, p, kernel_hw, groups)};"]
    ends, reads = fast.conv_bands(in_shape, out_shape, kernel_hw, p["strides"],
                                  p.get("dilations", [1, 1]), p["pads"])
    small = fast.small_accumulators(w, p["bias"], p["input_offset"], 0, p["output_shift"])
    step = plain_step(graph, node, index,
                      f"qconvert_conv_fast_s8($in0, @L_weights, {bias}, $out0, $scratch, "
                      f"&@L_params, {small});", arrays, decls, fast.FAST_FILES,
                      [("tiles", 0, ends, reads)])
    scratch = fast.conv_scratch_bytes(kernel_hw, in_shape[3], out_shape[3], groups)
    step.plan.scratch = scratch
    step.scratch_builds = {"helium": scratch, "other": scratch}
    return step


def whole_window(in_shape, out_shape, kernel_hw, p, groups) -> bool:
    """True when a Conv2D has one output pixel per image whose window is the whole image (no
    padding, no groups): a fully connected layer over the image's values in NHWC order."""
    return (tuple(out_shape[1:3]) == (1, 1) and tuple(int(k) for k in kernel_hw) ==
            tuple(in_shape[1:3]) and not any(p["pads"]) and groups == 1)


def _whole_window_fc(graph, node, index, p, w, batches):
    """A `whole_window` Conv2D as qconvert_fc_fast_s8: the OHWI weights are the rows, the
    accumulator and the per-channel requantization are the convolution's (kws_streaming's
    1x3x40 -> 32 layer on Cortex-M4: 12.0 K instructions with qconvert_conv_fast_s8's one-pixel
    path)."""
    rows = np.asarray(w).reshape(w.shape[0], -1)
    depth, count = rows.shape[1], rows.shape[0]
    arrays = [("weights", "int8_t", fc_weights_in_layout(rows, "1x4")),
              ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"])]
    quant = c_struct([p["input_offset"], 0, p["output_offset"], p["activation_min"],
                     p["activation_max"], "@L_multiplier", "@L_shift", 1])
    decls = [f"static const qconvert_fc_quant @L_quant = {quant};"]
    small = fast.small_accumulators(rows, p["bias"], p["input_offset"], 0, p["output_shift"])
    sums = fast.fc_sums(rows, p["bias"], p["input_offset"], 0)
    arrays += [("sums", "int32_t", sums)] if sums is not None else []
    return plain_step(graph, node, index,
                  f"qconvert_fc_fast_s8($in0, @L_weights, {'NULL' if sums is None else '@L_sums'}, "
                  f"$out0, {batches}, {depth}, {count}, &@L_quant, {small});", arrays, decls,
                  fast.FAST_FILES)


def fc_geometry(graph, node) -> tuple:
    """(batches, accum_depth, output_depth) of a FullyConnected node."""
    rows, depth = graph.tensors[node.inputs[1]].data.shape
    size = int(np.prod(tensor_dims(graph, node.inputs[0]), dtype=np.int64))
    if depth == 0 or size % depth:
        raise QConvertError(f"{node.op} {node.name!r}: input of {size} values is not a whole "
                            f"number of rows of {depth}")
    return size // depth, int(depth), int(rows)


def _lower_fc(graph, node, index, options):
    """FULLY_CONNECTED; 16x8 layers take row-major weights (the 1x4 order is int8's kernel's)."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    batches, depth, rows = fc_geometry(graph, node)
    layout = options.fc_layout if act.bits == 8 else "rowmajor"
    bias_arrays, bias = act.bias_arguments(p, rows)
    arrays = [("weights", "int8_t", fc_weights_in_layout(w, layout)),
              ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"]), *bias_arrays]
    quant = c_struct([p["input_offset"], p["weights_offset"], p["output_offset"],
                      p["activation_min"], p["activation_max"], "@L_multiplier", "@L_shift",
                      1 if p["per_channel"] else 0])
    decls = [f"static const qconvert_fc_quant @L_quant = {quant};"]
    if options.kernels == "portable" and layout == "1x4":  # cmsis_nn reads this step's bias
        made = fast_fc_step(graph, node, index)
        if made is not None:
            return made
    fn = "qconvert_fc_1x4_s8" if layout == "1x4" else f"qconvert_fc_{act.suffix}"
    files = act.conv_files if layout != "1x4" else set()
    return plain_step(graph, node, index,
                      f"{fn}($in0, @L_weights, {bias}, $out0, {batches}, {depth}, {rows}, "
                      "&@L_quant);", arrays, decls, files)


def fast_fc_step(graph, node, index, sums_name=None):
    """An int8 FullyConnected as qconvert_fc_fast_s8 over the 1x4 weight order, starting from
    `steps_fast.fc_sums` (its own array, or the array `sums_name` names, e.g.
    "@L_kernel_sums" beside a CMSIS-NN call, which holds the same values), or None for a layer
    it does not take (16x8, a negative multiplier)."""
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    if activation_of(graph, node).bits != 8 or not fast.nonnegative(p["output_multiplier"]):
        return None
    batches, depth, rows = fc_geometry(graph, node)
    arrays = [("weights", "int8_t", fc_weights_in_layout(w, "1x4")),
              ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"])]
    quant = c_struct([p["input_offset"], p["weights_offset"], p["output_offset"],
                      p["activation_min"], p["activation_max"], "@L_multiplier", "@L_shift",
                      1 if p["per_channel"] else 0])
    decls = [f"static const qconvert_fc_quant @L_quant = {quant};"]
    small = fast.small_accumulators(w, p["bias"], p["input_offset"], p["weights_offset"],
                                    p["output_shift"])
    if sums_name is None:
        sums = fast.fc_sums(w, p["bias"], p["input_offset"], p["weights_offset"])
        arrays += [("sums", "int32_t", sums)] if sums is not None else []
        sums_name = "NULL" if sums is None else "@L_sums"
    return plain_step(graph, node, index,
                      f"qconvert_fc_fast_s8($in0, @L_weights, {sums_name}, $out0, {batches}, "
                      f"{depth}, {rows}, &@L_quant, {small});", arrays, decls, fast.FAST_FILES)


def lower_pool(graph, node, index, options):
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    kernel_hw = tuple(p["kernel_shape"])
    decls = [f"static const qconvert_conv_params @L_params = "
             f"{conv_struct(graph, node, p, kernel_hw, quant=False)};"]
    fn = f"qconvert_{'avgpool' if node.op == 'AveragePool' else 'maxpool'}_{act.suffix}"
    overlap = conv_overlap(graph, node, p, kernel_hw, lambda oc: oc, act)
    return plain_step(graph, node, index, f"{fn}($in0, $out0, &@L_params);", (), decls,
                      act.conv_files, overlap)


# -- element-wise -----------------------------------------------------------------------------
def lookup_tables(graph, node) -> dict:
    """{rounding: 256 int8 outputs for inputs -128..127} of a one-value int8 function."""
    p = layer_params(graph, node)
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    return {r: INT_KERNELS[node.op](node, [x], p, IntContext(rounding=r))[0].reshape(-1)
            for r in ("double", "single")}


def _lower_lookup(graph, node, index, options):
    if graph.tensors[node.inputs[0]].dtype != "int8" or graph.tensors[node.outputs[0]].dtype != "int8":
        raise QConvertError(f"{node.op} {node.name!r}: export-c takes int8 -> int8 here")
    tables = lookup_tables(graph, node)
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    if np.array_equal(tables["double"], tables["single"]):
        arrays = [("table", "int8_t", tables["double"])]
    else:
        arrays = [("table", "int8_t#double", tables["double"]),
                  ("table", "int8_t#single", tables["single"])]
    return plain_step(graph, node, index, f"qconvert_lookup_s8($in0, $out0, {size}, @L_table);",
                      arrays, (), _OPS_FILES, [("same", 0)])


def _lower_quantize(graph, node, index, options):
    """QUANTIZE int8 -> int8 (a table), uint8 <-> int8 (a table over the 256 byte values: the
    edges of a uint8-I/O model, whose uint8 tensors sit in the arena as bytes) or float ->
    int8."""
    dtypes = (graph.tensors[node.inputs[0]].dtype, graph.tensors[node.outputs[0]].dtype)
    if dtypes in (("uint8", "int8"), ("int8", "uint8")):
        return _lower_byte_table(graph, node, index, dtypes)
    if dtypes[0] == "int8":
        return _lower_lookup(graph, node, index, options)
    return lower_quantize_float(graph, node, index, options)


def _lower_byte_table(graph, node, index, dtypes):
    """A uint8 <-> int8 requantization as qconvert_lookup_s8 over the bytes: entry b + 128 is
    the output byte of input byte b (read as int8), computed by the integer executor's QUANTIZE
    (TFLite Micro's Requantize) in the real types. The rounding mode does not matter: a
    requantization by a power of two (the usual scale ratio 1) is exact in both."""
    p = layer_params(graph, node)
    x = np.arange(-128, 128, dtype=np.int8).view(dtypes[0]).reshape(1, 256)
    tables = {r: INT_KERNELS[node.op](node, [x], p, IntContext(rounding=r))[0].reshape(-1)
              .view(np.int8) for r in ("double", "single")}
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    if np.array_equal(tables["double"], tables["single"]):
        arrays = [("table", "int8_t", tables["double"])]
    else:
        arrays = [("table", "int8_t#double", tables["double"]),
                  ("table", "int8_t#single", tables["single"])]
    return plain_step(graph, node, index, f"qconvert_lookup_s8($in0, $out0, {size}, @L_table);",
                      arrays, (), _OPS_FILES, [("same", 0)])


def lower_quantize_float(graph, node, index, options):
    """QUANTIZE float -> int8 / int16: qconvert_quantize_f32_s8 / _s16."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    scale = repr(float(np.float32(p["scale"])))
    return plain_step(graph, node, index,
                      f"qconvert_quantize_f32_{act.suffix}($in0, $out0, {size}, {scale}f, "
                      f"{c_int(p['zero_point'])});", (), (), act.ops_files)


def _lower_dequantize(graph, node, index, options):
    """DEQUANTIZE int8 / int16 -> float."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    return plain_step(graph, node, index,
                      f"qconvert_dequantize_{act.suffix}_f32($in0, $out0, {size}, "
                      f"{repr(float(p['scale']))}, {c_int(p['zero_point'])});", (), (),
                      act.ops_files)


def binary_fields(p, lo=-128, hi=127) -> list:
    """Offsets, multipliers, shifts and clamps of an Add / Sub / Mul in struct order (the clamps
    default to [lo, hi], the activation type's range)."""
    keys = ("input1_offset", "input2_offset", "output_offset", "left_shift", "input1_multiplier",
            "input1_shift", "input2_multiplier", "input2_shift", "output_multiplier",
            "output_shift", "activation_min", "activation_max")
    defaults = {"activation_min": lo, "activation_max": hi}
    return [int(p.get(k, defaults.get(k, 0))) for k in keys]


def _prelu_fields(p) -> dict:
    """PRelu's parameters in the binary kernel's slots (see qconvert_nn.h)."""
    return {"input1_offset": p["input_offset"], "input2_offset": p["alpha_offset"],
            "output_offset": p["output_offset"], "output_multiplier": p["output_multiplier_1"],
            "output_shift": p["output_shift_1"], "input2_multiplier": p["output_multiplier_2"],
            "input2_shift": p["output_shift_2"]}


def lower_binary(graph, node, index, options):
    """Element-wise binary ops with broadcasting; a 16x8 PRELU (int8 alpha) is
    qconvert_prelu_s16, the other int16 ones qconvert_binary_s16."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    if node.op == "PRelu":
        p = _prelu_fields(p)
    out_shape = tensor_dims(graph, node.outputs[0])
    shapes = []
    for name in node.inputs[:2]:
        t = graph.tensors[name]
        shapes.append(tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name))
    box = merged(out_shape, broadcast_strides(shapes[0], out_shape),
                 broadcast_strides(shapes[1], out_shape))
    arrays: list = []
    a = operand_pointer(graph, node, 0, arrays, "input1", act.bits)
    b = operand_pointer(graph, node, 1, arrays, "input2", 8 if node.op == "PRelu" else act.bits)
    pad = [0] * (MAX_RANK - len(box["shape"]))
    if len(box["shape"]) > MAX_RANK:
        raise QConvertError(f"{node.op} {node.name!r}: broadcast over more than {MAX_RANK} axes")
    tables = ["NULL", "NULL"]
    if node.op == "Div":
        inverse, shift = div_reciprocals(p["input2_offset"])
        arrays += [("div_inverse", "int32_t", inverse), ("div_shift", "int8_t", shift)]
        tables = ["@L_div_inverse", "@L_div_shift"]
    fields = [BINARY[node.op], len(box["shape"]), c_struct(box["shape"] + pad),
              c_struct(box["in_strides"] + pad), c_struct(box["out_strides"] + pad),
              *binary_fields(p, act.lo, act.hi), *tables]
    decls = [f"static const qconvert_binary_params @L_params = {c_struct(fields)};"]
    acts = activation_inputs(graph, node)  # overlap slots index the step's activation inputs
    out_dtype = graph.tensors[node.outputs[0]].dtype
    overlap = [("same", acts.index(node.inputs[k])) for k in (0, 1)
               if graph.tensors[node.inputs[k]].data is None and shapes[k] == out_shape
               and graph.tensors[node.inputs[k]].dtype == out_dtype]
    kernel = "prelu" if node.op == "PRelu" and act.bits == 16 else "binary"
    call = f"qconvert_{kernel}_{act.suffix}({a}, {b}, $out0, &@L_params);"
    if node.op == "Div":  # a quotient shift TFLite Micro cannot make: it fails, so does invoke
        call = "\n".join([f"if ({call[:-1]} != 0) {{", "    return 4;", "}"])
    return plain_step(graph, node, index, call, arrays, decls, act.ops_files, overlap)


def div_reciprocals(input2_offset: int) -> tuple:
    """Per raw int8 divisor b (index b + 128): gemmlowp's reciprocal of |b - z2| and its shift,
    as TFLite's GetReciprocal computes them (the DIV kernel takes the same `get_reciprocal`)."""
    return get_reciprocal(np.abs(np.arange(-128, 128, dtype=np.int64) + int(input2_offset)), 31)


def _lower_softmax(graph, node, index, options):
    p = layer_params(graph, node)
    dims = tensor_dims(graph, node.inputs[0])
    row = dims[-1] if dims else 1
    rows = int(np.prod(dims, dtype=np.int64)) // max(row, 1)
    return plain_step(graph, node, index,
                      f"qconvert_softmax_s8($in0, $out0, {rows}, {row}, {p['input_multiplier']}, "
                      f"{p['input_left_shift']}, {c_int(p['diff_min'])});",
                      (), (), {"qconvert_nn_softmax.c"}, [("same", 0)])


def _lower_mean(graph, node, index, options):
    """MEAN and SUM -> qconvert_mean_s8 / _s16 over an outer and an inner index box (SUM's
    multiplier has no 1 / count folded in: `layer_params`)."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    dims = tensor_dims(graph, node.inputs[0])
    axes = sorted({a % len(dims) for a in p["axes"]})
    strides = contiguous_strides(dims)
    keep = [k for k in range(len(dims)) if k not in axes]
    outer_shape = [dims[k] for k in keep]
    outer = merged(outer_shape, [strides[k] for k in keep], contiguous_strides(outer_shape))
    inner_shape = [dims[k] for k in axes]
    inner = merged(inner_shape, [strides[k] for k in axes], [0] * len(axes))
    count = int(np.prod(inner_shape, dtype=np.int64))
    fields = [box_literal(outer), box_literal(inner), count, p["mean_multiplier"],
              p["mean_shift"], p["input_zero_point"], p["output_zero_point"]]
    decls = [f"static const qconvert_mean_params @L_params = {c_struct(fields)};"]
    return plain_step(graph, node, index, f"qconvert_mean_{act.suffix}($in0, $out0, &@L_params);",
                      (), decls, act.ops_files)


# -- data movement ----------------------------------------------------------------------------
def movement_maps(graph, node) -> list:
    """The index map of every output: input elements tagged with their input slot."""
    if node.op == "Concat":
        axis = int(node.attrs.get("axis", 0))
        parts = []
        for slot, name in enumerate(node.inputs):
            t = graph.tensors[name]
            shape = tuple(t.data.shape) if t.data is not None else tensor_dims(graph, name)
            parts.append(tagged(shape, slot))
        return [np.concatenate(parts, axis=axis % parts[0].ndim)]
    p = dict(layer_params(graph, node))
    if "pad_value" in p:
        p["pad_value"] = -1
    inputs = []
    for slot, name in enumerate(node.inputs):
        t = graph.tensors[name] if name is not None else None
        if t is None:
            inputs.append(None)
        elif t.data is None:
            inputs.append(tagged(tensor_dims(graph, name), slot))
        else:
            inputs.append(t.data)
    return [np.asarray(m) for m in INT_KERNELS[node.op](node, inputs, p, IntContext())]


def lower_movement(graph, node, index, options):
    """Data movement as box copies (`qconvert_copy_box_s8` / `_s16`), gathers and fills."""
    act = activation_of(graph, node)
    s, bits = act.suffix, act.bits
    arrays: list = []
    lines, decls = [], []
    ptrs, files = {}, set(act.ops_files)
    for k, index_map in enumerate(movement_maps(graph, node)):
        boxes, fill, table = boxes_of(index_map)
        size = int(index_map.size)
        if boxes is None and table is None:
            raise QConvertError(f"{node.op} {node.name!r}: a data movement export-c cannot "
                                "express")
        if boxes is None:
            slot = int(np.asarray(index_map).reshape(-1)[0]) >> 40
            src = ptrs.setdefault(slot, operand_pointer(graph, node, slot, arrays,
                                                        f"input{slot + 1}", bits))
            line, more_files = gather_call(k, table, act, src, arrays)
            lines.append(line)
            files |= more_files
            continue
        if fill:
            value = layer_params(graph, node).get("pad_value", 0)
            lines.append(f"qconvert_fill_{s}($out{k}, {size}, (int{bits}_t){c_int(value)});")
        for n, (slot, box) in enumerate(boxes):
            src = ptrs.setdefault(slot, operand_pointer(graph, node, slot, arrays,
                                                        f"input{slot + 1}", bits))
            decls.append(f"static const qconvert_box @L_box{k}_{n} = {box_literal(box)};")
            lines.append(f"qconvert_copy_box_{s}({src}, $out{k}, &@L_box{k}_{n});")
    overlap = None
    if len(lines) == 1 and len(node.outputs) == 1:  # one call: may overlap (movement_overlap)
        from .movement_overlap import movement_overlap
        overlap = movement_overlap(graph, node, index_map, boxes, fill, act,
                                   activation_inputs(graph, node))
    return plain_step(graph, node, index, "\n".join(lines), arrays, decls, files, overlap)


def _lower_alias(graph, node, index, options):
    return plain_step(graph, node, index, "", alias=True)


# the portable int8 lowerings defined here; `lowering.LOWERINGS` adds the other families
PORTABLE_LOWERINGS = {
    "Conv2D": lower_conv, "DepthwiseConv2D": lower_conv, "FullyConnected": _lower_fc,
    "AveragePool": lower_pool, "MaxPool": lower_pool, "Softmax": _lower_softmax,
    "ReduceSum": _lower_mean,
    "Mean": _lower_mean, "Quantize": _lower_quantize, "Dequantize": _lower_dequantize,
    "Reshape": _lower_alias, "Squeeze": _lower_alias, "ExpandDims": _lower_alias,
    **{op: _lower_lookup for op in _LOOKUP_OPS if op in INT_KERNELS},
    **{op: lower_binary for op in BINARY},
    **{op: lower_movement for op in MOVEMENT},
    # int8 only (TFLite Micro has no int16 MIRROR_PAD / DEPTH_TO_SPACE)
    "MirrorPad": lower_movement, "DepthToSpaceNHWC": lower_movement,
}
