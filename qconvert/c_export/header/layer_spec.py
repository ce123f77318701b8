"""What the C header emits for each op: one table entry per IR op.

Every number comes from `qconvert.int8.prepare.layer_params` (TFLite Micro's Prepare-time
values); this table only says under which name and in which form each one appears:

- `fields`: (layer_params key, suffix, kind). Kinds: `int` and `bool` (a `#define`), `float`
  (a `#define` of a float32 literal), `hw` (a [h, w] pair: `_H`, `_W`), `pads` (IR pads
  [top, left, bottom, right]: `_TOP`, `_LEFT`, `_BOTTOM`, `_RIGHT`), `array` (a
  `const int32_t` array plus its `_LEN`; `None` means absent: `_HAS_<suffix>` is 0; a 16x8
  layer's bias is `int64_t` when its accumulator is), `array16` (a `const int16_t` array:
  the 16-bit softmax tables). A field absent from a layer's parameters is not written (16x8
  layers have no diff_min, radius or input zero points; int8 layers no ACCUMULATOR_BITS).
- `skipped`: layer_params keys left out on purpose (each with its reason below); a key that is
  neither emitted nor skipped is a bug the exporter refuses to hide.
- `constants`: (input index, suffix): constant integer inputs written as `const int32_t` arrays
  (paddings, permutation, indices); `int64_constants`: an int64 one keeps `int64_t` (the 16x8
  LSTM's gate biases, which may exceed int32).
- `attrs`: (node attribute, suffix): integer attributes written as `#define`s.
- `weights`: `conv` (OHWI), `depthwise` ([1, H, W, C]) or `fc` (the chosen FC layout).
- `dims`: which dimension macros the op gets (`conv`, `fc`, `spatial`, `rows`) beyond the
  shapes and lengths every layer gets.
- `data_slot` / `weight_slots`: where the activation and the weights and bias are (TFLite's
  TRANSPOSE_CONV: output_shape, weights, x, bias; SPLIT: axis, x).

An op missing from this table (opaque ops, ops without int8 parameters) cannot be exported.
"""

from __future__ import annotations

from dataclasses import dataclass

from qconvert.int8.prepare.logic import COMPARISON_OPS

_CLAMPS = (("activation_min", "ACTIVATION_MIN", "int"), ("activation_max", "ACTIVATION_MAX", "int"))
_REQUANT_ARRAYS = (("output_multiplier", "MULTIPLIER", "array"),
                   ("output_shift", "SHIFT", "array"))
# accumulator_bits: 16x8 layers only (int16 activations): 64 with an int64 bias (TFLite's
# 64-bit requantization), 32 with an int32 one; the bias array is int64_t or int32_t to match
_LAYER = (("input_offset", "INPUT_OFFSET", "int"), ("output_offset", "OUTPUT_OFFSET", "int"),
          *_CLAMPS, ("per_channel", "PER_CHANNEL", "bool"), ("bias", "BIAS", "array"),
          *_REQUANT_ARRAYS, ("accumulator_bits", "ACCUMULATOR_BITS", "int"))
_GEOMETRY = (("strides", "STRIDE", "hw"), ("dilations", "DILATION", "hw"),
             ("pads", "PAD", "pads"))
# effective_scale: the real multiplier, encoded exactly by MULTIPLIER and SHIFT.
_LAYER_SKIPPED = frozenset({"effective_scale"})


@dataclass(frozen=True)
class OpSpec:
    """The header's entry for one op (see the module docstring)."""

    fields: tuple = ()
    skipped: frozenset = frozenset()
    constants: tuple = ()
    attrs: tuple = ()
    weights: str | None = None
    dims: str | None = None
    data_slot: int = 0          # the input slot of the layer's activation (`INPUT`)
    weight_slots: tuple = (1, 2)  # weights and bias slots (written as WEIGHTS and BIAS)
    int64_constants: bool = False  # int64 constants written as int64_t, not int32_t


_ADD = OpSpec(fields=(
    ("input1_offset", "INPUT1_OFFSET", "int"), ("input2_offset", "INPUT2_OFFSET", "int"),
    ("output_offset", "OUTPUT_OFFSET", "int"), ("left_shift", "LEFT_SHIFT", "int"),
    ("input1_multiplier", "INPUT1_MULTIPLIER", "int"), ("input1_shift", "INPUT1_SHIFT", "int"),
    ("input2_multiplier", "INPUT2_MULTIPLIER", "int"), ("input2_shift", "INPUT2_SHIFT", "int"),
    ("output_multiplier", "OUTPUT_MULTIPLIER", "int"), ("output_shift", "OUTPUT_SHIFT", "int"),
    *_CLAMPS))
_POOL = OpSpec(fields=(*_CLAMPS, ("kernel_shape", "KERNEL", "hw"), ("strides", "STRIDE", "hw"),
                       ("pads", "PAD", "pads")),
               skipped=frozenset({"dilations"}),  # always [1, 1] for TFLite pooling
               dims="spatial")
_SIGMOID_TANH = OpSpec(fields=(
    ("input_zero_point", "INPUT_ZERO_POINT", "int"),
    ("input_multiplier", "INPUT_MULTIPLIER", "int"),
    ("input_left_shift", "INPUT_LEFT_SHIFT", "int"),
    ("input_range_radius", "INPUT_RANGE_RADIUS", "int")))

_MEAN = OpSpec(fields=(
    ("multiplier", "MULTIPLIER", "int"), ("shift", "SHIFT", "int"),
    ("input_zero_point", "INPUT_ZERO_POINT", "int"),
    ("output_zero_point", "OUTPUT_ZERO_POINT", "int"), ("axes", "AXES", "array"),
    ("keep_dims", "KEEP_DIMS", "bool"), ("count", "COUNT", "int"),
    ("mean_multiplier", "MEAN_MULTIPLIER", "int"), ("mean_shift", "MEAN_SHIFT", "int")))

OP_SPECS: dict[str, OpSpec] = {
    "Conv2D": OpSpec(fields=_LAYER + _GEOMETRY + (("groups", "GROUPS", "int"),),
                     skipped=_LAYER_SKIPPED, weights="conv", dims="conv"),
    "DepthwiseConv2D": OpSpec(fields=_LAYER + _GEOMETRY
                              + (("depth_multiplier", "DEPTH_MULTIPLIER", "int"),),
                              skipped=_LAYER_SKIPPED, weights="depthwise", dims="conv"),
    "FullyConnected": OpSpec(fields=_LAYER + (("weights_offset", "WEIGHTS_OFFSET", "int"),),
                             # keep_num_dims only shapes the output: see OUTPUT_SHAPE
                             skipped=_LAYER_SKIPPED | {"keep_num_dims"}, weights="fc",
                             dims="fc"),
    "Add": _ADD,
    "Sub": _ADD,
    "Mul": OpSpec(fields=(
        ("input1_offset", "INPUT1_OFFSET", "int"), ("input2_offset", "INPUT2_OFFSET", "int"),
        ("output_offset", "OUTPUT_OFFSET", "int"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"), *_CLAMPS)),
    "AveragePool": _POOL,
    "MaxPool": _POOL,
    "Mean": _MEAN,
    "ReduceSum": _MEAN,  # SUM: MEAN_MULTIPLIER / _SHIFT are the multiplier (no 1 / count)
    "Softmax": OpSpec(fields=(
        ("input_multiplier", "INPUT_MULTIPLIER", "int"),
        ("input_left_shift", "INPUT_LEFT_SHIFT", "int"), ("diff_min", "DIFF_MIN", "int"),
        # int16 softmax: TFLite Micro's exp and 1 / (1 + x) tables (513 entries each)
        ("exp_lut", "EXP_LUT", "array16"),
        ("one_over_one_plus_x_lut", "ONE_OVER_ONE_PLUS_X_LUT", "array16")),
        dims="rows"),
    "Sigmoid": _SIGMOID_TANH,
    "Tanh": _SIGMOID_TANH,
    "HardSwish": OpSpec(fields=(
        ("input_zero_point", "INPUT_ZERO_POINT", "int"),
        ("output_zero_point", "OUTPUT_ZERO_POINT", "int"),
        ("output_multiplier_fixedpoint_int16", "OUTPUT_MULTIPLIER_FIXEDPOINT_INT16", "int"),
        ("output_multiplier_exponent", "OUTPUT_MULTIPLIER_EXPONENT", "int"),
        ("reluish_multiplier_fixedpoint_int16", "RELUISH_MULTIPLIER_FIXEDPOINT_INT16", "int"),
        ("reluish_multiplier_exponent", "RELUISH_MULTIPLIER_EXPONENT", "int"))),
    "Relu": OpSpec(fields=(
        ("input_zero_point", "INPUT_ZERO_POINT", "int"),
        ("output_zero_point", "OUTPUT_ZERO_POINT", "int"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"), *_CLAMPS)),
    "Relu6": OpSpec(fields=(("zero", "ACTIVATION_MIN", "int"), ("six", "ACTIVATION_MAX", "int"))),
    "Quantize": OpSpec(fields=(
        ("scale", "OUTPUT_SCALE", "float"), ("zero_point", "OUTPUT_ZERO_POINT", "int"),
        ("input_zero_point", "INPUT_ZERO_POINT", "int"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"), ("output_bits", "OUTPUT_BITS", "int")),
        skipped=frozenset({"output_dtype"})),  # the output tensor's type, in the header already
    "Dequantize": OpSpec(fields=(("scale", "INPUT_SCALE", "float"),
                                 ("zero_point", "INPUT_ZERO_POINT", "int"))),
    "Concat": OpSpec(fields=(("axis", "AXIS", "int"),)),
    "Pad": OpSpec(fields=(("pad_value", "PAD_VALUE", "int"),), constants=((1, "PADDINGS"),)),
    # PADV2: the value operand (an int8 constant) also appears as PAD_VALUE
    "PadV2": OpSpec(fields=(("pad_value", "PAD_VALUE", "int"),), constants=((1, "PADDINGS"),)),
    "Maximum": OpSpec(),  # raw int8 comparison: operands and output share one quantization
    "Minimum": OpSpec(),
    # output_shape: the same as OUTPUT_SHAPE, which every layer gets
    "Reshape": OpSpec(skipped=frozenset({"output_shape"})),
    "Squeeze": OpSpec(),
    "ExpandDims": OpSpec(),
    # SELECT_V2 copies raw values: x, y and the output share one quantization
    "SelectV2": OpSpec(),
    "Fill": OpSpec(constants=((0, "DIMS"),), data_slot=1),
    "L2Normalization": OpSpec(fields=(("input_zero_point", "INPUT_ZERO_POINT", "int"),)),
    "DepthToSpaceNHWC": OpSpec(attrs=(("block_size", "BLOCK_SIZE"),)),
    "MirrorPad": OpSpec(constants=((1, "PADDINGS"),), attrs=(("mode", "MODE"),)),
    **{op: OpSpec(fields=(("axes", "AXES", "array"), ("keep_dims", "KEEP_DIMS", "bool")))
       for op in ("ReduceMax", "ReduceMin")},
    **{op: OpSpec(fields=(
        ("scaled", "SCALED", "bool"), ("left_shift", "LEFT_SHIFT", "int"),
        ("input1_offset", "INPUT1_OFFSET", "int"),
        ("input1_multiplier", "INPUT1_MULTIPLIER", "int"), ("input1_shift", "INPUT1_SHIFT", "int"),
        ("input2_offset", "INPUT2_OFFSET", "int"),
        ("input2_multiplier", "INPUT2_MULTIPLIER", "int"),
        ("input2_shift", "INPUT2_SHIFT", "int"))) for op in COMPARISON_OPS},
    "Transpose": OpSpec(constants=((1, "PERM"),)),
    "SliceBySize": OpSpec(constants=((1, "BEGIN"), (2, "SIZE"))),
    "Reverse": OpSpec(fields=(("axes", "AXES", "array"),), constants=((1, "AXIS"),)),
    "Pack": OpSpec(fields=(("axis", "AXIS", "int"),), attrs=(("values_count", "VALUES_COUNT"),)),
    "Unpack": OpSpec(attrs=(("axis", "AXIS"), ("num", "NUM"))),
    "Gather": OpSpec(constants=((1, "INDICES"),), attrs=(("axis", "AXIS"),)),
    # transformer-era ops (the constant slope of PRELU is written as its `_input2` array)
    "LeakyRelu": OpSpec(fields=(
        ("input_zero_point", "INPUT_ZERO_POINT", "int"),
        ("output_zero_point", "OUTPUT_ZERO_POINT", "int"),
        ("output_multiplier_alpha", "OUTPUT_MULTIPLIER_ALPHA", "int"),
        ("output_shift_alpha", "OUTPUT_SHIFT_ALPHA", "int"),
        ("output_multiplier_identity", "OUTPUT_MULTIPLIER_IDENTITY", "int"),
        ("output_shift_identity", "OUTPUT_SHIFT_IDENTITY", "int"))),
    "PRelu": OpSpec(fields=(
        ("input_offset", "INPUT_OFFSET", "int"), ("alpha_offset", "ALPHA_OFFSET", "int"),
        ("output_offset", "OUTPUT_OFFSET", "int"),
        ("output_multiplier_1", "OUTPUT_MULTIPLIER_1", "int"),
        ("output_shift_1", "OUTPUT_SHIFT_1", "int"),
        ("output_multiplier_2", "OUTPUT_MULTIPLIER_2", "int"),
        ("output_shift_2", "OUTPUT_SHIFT_2", "int"))),
    "BatchMatMul": OpSpec(fields=(
        ("lhs_offset", "LHS_OFFSET", "int"), ("rhs_offset", "RHS_OFFSET", "int"),
        ("output_offset", "OUTPUT_OFFSET", "int"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"), ("adj_x", "ADJ_X", "bool"),
        ("adj_y", "ADJ_Y", "bool"))),
    "Div": OpSpec(fields=(
        ("input1_offset", "INPUT1_OFFSET", "int"), ("input2_offset", "INPUT2_OFFSET", "int"),
        ("output_offset", "OUTPUT_OFFSET", "int"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"), *_CLAMPS)),
    "SquaredDifference": OpSpec(fields=(
        ("input1_offset", "INPUT1_OFFSET", "int"), ("input2_offset", "INPUT2_OFFSET", "int"),
        ("output_offset", "OUTPUT_OFFSET", "int"), ("left_shift", "LEFT_SHIFT", "int"),
        ("input1_multiplier", "INPUT1_MULTIPLIER", "int"), ("input1_shift", "INPUT1_SHIFT", "int"),
        ("input2_multiplier", "INPUT2_MULTIPLIER", "int"), ("input2_shift", "INPUT2_SHIFT", "int"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"), *_CLAMPS)),
    "Abs": OpSpec(fields=(
        ("input_zero_point", "INPUT_ZERO_POINT", "int"),
        ("output_zero_point", "OUTPUT_ZERO_POINT", "int"),
        ("needs_rescale", "NEEDS_RESCALE", "bool"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"))),
    "Rsqrt": OpSpec(fields=(
        ("input_zero_point", "INPUT_ZERO_POINT", "int"),
        ("output_zero_point", "OUTPUT_ZERO_POINT", "int"),
        ("output_multiplier", "OUTPUT_MULTIPLIER", "int"),
        ("output_shift", "OUTPUT_SHIFT", "int"))),
    "StridedSlice": OpSpec(constants=((1, "BEGIN"), (2, "END"), (3, "STRIDES")),
                           attrs=(("begin_mask", "BEGIN_MASK"), ("end_mask", "END_MASK"),
                                  ("shrink_axis_mask", "SHRINK_AXIS_MASK"),
                                  ("ellipsis_mask", "ELLIPSIS_MASK"),
                                  ("new_axis_mask", "NEW_AXIS_MASK"), ("offset", "OFFSET"))),
    # -- ONNX exports: transposed conv, resize, split ---------------------------------------
    # TRANSPOSE_CONV: OUTPUT_SHAPE (every layer's) is the output_shape input; PAD the crop
    "TransposeConv": OpSpec(fields=_LAYER + (("strides", "STRIDE", "hw"), ("pads", "PAD", "hw")),
                            skipped=_LAYER_SKIPPED | {"output_shape"}, weights="conv",
                            dims="conv", data_slot=2, weight_slots=(0, 1, 3)),
    "ResizeBilinear": OpSpec(constants=((1, "SIZE"),),
                             attrs=(("align_corners", "ALIGN_CORNERS"),
                                    ("half_pixel_centers", "HALF_PIXEL_CENTERS"))),
    "ResizeNearest": OpSpec(constants=((1, "SIZE"),),
                            attrs=(("align_corners", "ALIGN_CORNERS"),
                                   ("half_pixel_centers", "HALF_PIXEL_CENTERS"))),
    "SplitEqual": OpSpec(constants=((0, "AXIS"),), attrs=(("num_splits", "NUM_SPLITS"),),
                         data_slot=1),
    "SplitSizes": OpSpec(constants=((1, "SIZE_SPLITS"), (2, "AXIS")),
                         attrs=(("num_splits", "NUM_SPLITS"),)),
}

# UNIDIRECTIONAL_SEQUENCE_LSTM (int8/prepare/lstm.py): the eight int8 gate matrices are written as
# the layer's constant inputs (INPUT2..INPUT9), the four gate biases as arrays (int32_t; int64_t
# in a 16x8 LSTM); `bias` (the same biases as int64 copies), `activation` (always TANH: checked
# at Prepare) and `wide` (16x8: the activation type, in the tensors' types) are not repeated.
OP_SPECS["UnidirectionalSequenceLSTM"] = OpSpec(
    fields=(("input_offset", "INPUT_OFFSET", "int"), ("hidden_offset", "HIDDEN_OFFSET", "int"),
            ("hidden_zero_point", "HIDDEN_ZERO_POINT", "int"),
            ("fc_multiplier", "FC_MULTIPLIER", "array"), ("fc_shift", "FC_SHIFT", "array"),
            ("forget_multiplier", "FORGET_MULTIPLIER", "int"),
            ("forget_shift", "FORGET_SHIFT", "int"),
            ("input_multiplier", "INPUT_MULTIPLIER", "int"), ("input_shift", "INPUT_SHIFT", "int"),
            ("hidden_multiplier", "HIDDEN_MULTIPLIER", "int"),
            ("hidden_shift", "HIDDEN_SHIFT", "int"),
            ("cell_scale_power", "CELL_SCALE_POWER", "int"), ("cell_clip", "CELL_CLIP", "int"),
            ("time_major", "TIME_MAJOR", "bool")),
    skipped=frozenset({"bias", "activation", "wide"}),
    constants=((12, "INPUT_GATE_BIAS"), (13, "FORGET_GATE_BIAS"), (14, "CELL_GATE_BIAS"),
               (15, "OUTPUT_GATE_BIAS")), int64_constants=True)
