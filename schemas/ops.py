"""The op table. One `register(OpSchema(...))` per IR op; see `schemas/__init__.py`.

Ops that exist in both formats share one IR name (Conv2D is TFLite CONV_2D and ONNX Conv); the
layout attribute, not the name, says NCHW or NHWC. Ops that exist in one format only have a spec
for that format alone; cross-format conversion maps them (a later pass).

One IR spelling per op, whatever the format read: a list-valued parameter that either format
can take as an input tensor is an input of the IR node (a constant made by the reader when the
source spelled it as an ONNX attribute, `OnnxSpec.attr_inputs`, or a TFLite option,
`TfliteSpec.option_inputs`), and the writers turn it back. Passes and kernels read such a
parameter from its input only:
- Transpose `perm`, Squeeze / Unsqueeze `axes`, ReduceMean / ReduceMax / ReduceMin / ReduceSum
  `axes`,
  Split `split`: constant integer inputs.
- Reshape: the `shape` input (TFLite's `new_shape` option when it has no input) and
  `allowzero` (TFLite reads a 0 literally: 1).
- Cast: `to`, the IR dtype name (ONNX's TensorProto code; TFLite's output tensor type);
  Quantize (ONNX QuantizeLinear): `output_dtype` a dtype name, absent when unset (code 0);
  Shape: `out_type` a dtype name (TFLite's TensorType code; ONNX: always int64).
- Quantize / Dequantize: `scale` and `zero_point` are inputs (ONNX) or the quantized tensor's
  quantization parameters (TFLite: `Input.from_quantization`; the float executor gives the
  kernel them as the inputs); `axis` the quantized axis (TFLite: the quantized dimension of a
  per-channel tensor); Quantize's `rounding` ``half_away_from_zero`` for TFLite QUANTIZE
  (absent: half to even, ONNX's).
- Reductions (Mean, ReduceMean, ReduceMax, ReduceMin, ReduceSum): `keepdims` 0 / 1 (TFLite
  `keep_dims`);
  `noop_with_empty_axes` 1 where empty axes reduce nothing (TFLite).
- Softmax: `axis` (TFLite: -1), `coerce_2d` 1 where the input is flattened to 2-D at `axis`
  (ONNX before opset 13); `beta` (TFLite) scales the input.
- Pad / PadV2 `pads`: rows [k, 2], (begin, end) per axis of the `axes` input (absent: every
  axis): TFLite's paddings as they are; ONNX's flat [begins..., ends...] converted by the
  reader and back by the writer (`qconvert.formats.pads_spelling`). `mode` absent is constant.
- Not respelled: Clip / Slice / Resize parameters are inputs in both formats already, the
  TFLite-only ops (Mean, StridedSlice, SplitEqual...) keep their option names.
"""

from .registry import Input, OnnxSpec, OpSchema, TfliteSpec, register

HALF_AWAY = "half_away_from_zero"  # Quantize `rounding` of TFLite QUANTIZE (absent: half to even)

X = Input("x")
W = Input("weights", "weights")
B = Input("bias", "bias", optional=True)

_CONV_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
               "pads": None, "strides": None}
_POOL_ATTRS = {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
               "pads": None, "strides": None}

register(OpSchema(
    "Conv2D", "2-D convolution (grouped when `group` > 1).", (X, W, B),
    tflite=TfliteSpec("CONV_2D", "Conv2DOptions", int8_version=3),
    onnx=OnnxSpec("Conv", dict(_CONV_ATTRS), spatial=True),
    layout_sensitive=True, weight_layout={"onnx": "OIHW", "tflite": "OHWI"},
    weight_channel_axis={"onnx": 0, "tflite": 0}, int8="per_channel_weights", macs="conv",
    fuses_activation=True))

register(OpSchema(
    "DepthwiseConv2D", "Depthwise 2-D convolution, weights [1, H, W, C * depth_multiplier].",
    (X, W, B), tflite=TfliteSpec("DEPTHWISE_CONV_2D", "DepthwiseConv2DOptions", int8_version=3),
    layout_sensitive=True, weight_layout={"tflite": "1HWC"}, weight_channel_axis={"tflite": 3},
    int8="per_channel_weights", macs="depthwise", fuses_activation=True))

register(OpSchema(
    "ConvTranspose", "Transposed 2-D convolution, weights [C_in, C_out / group, kH, kW].",
    (X, W, B),
    onnx=OnnxSpec("ConvTranspose", dict(_CONV_ATTRS, output_padding=None, output_shape=None),
                  spatial=True),
    layout_sensitive=True, weight_layout={"onnx": "IOHW"}, weight_channel_axis={"onnx": 1},
    int8="per_channel_weights", macs="conv_transpose"))

register(OpSchema(
    "FullyConnected", "y = x W^T + b with W [out, in] (TFLite FULLY_CONNECTED).", (X, W, B),
    tflite=TfliteSpec("FULLY_CONNECTED", "FullyConnectedOptions", int8_version=4),
    weight_layout={"tflite": "OI"}, weight_channel_axis={"tflite": 0},
    int8="per_channel_weights", macs="fc", fully_connected=True,
    fuses_activation=True))

register(OpSchema(
    "Gemm", "Y = alpha * A' B' + beta * C (ONNX Gemm).",
    (Input("a"), Input("b", "weights"), Input("c", "bias", optional=True)),
    onnx=OnnxSpec("Gemm", {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}),
    int8="per_channel_weights", macs="gemm", fully_connected=True))

register(OpSchema(
    "MatMul", "Matrix product with numpy broadcasting (ONNX MatMul).",
    (Input("a"), Input("b", "weights")), onnx=OnnxSpec("MatMul"),
    weight_layout={"onnx": "IO"}, weight_channel_axis={"onnx": 1}, int8="per_channel_weights",
    macs="matmul", fully_connected=True))

register(OpSchema(
    "BatchNorm", "Inference batch normalization along the channel axis (ONNX, NCHW).",
    (X, Input("scale", "param"), Input("bias", "param"), Input("mean", "param"),
     Input("var", "param")),
    onnx=OnnxSpec("BatchNormalization", {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0}),
    layout_sensitive=True))

for _name, _tfl, _opts, _onnx, _fuses in (("Add", "ADD", "AddOptions", "Add", True),
                                          ("Sub", "SUB", "SubOptions", "Sub", True),
                                          ("Mul", "MUL", "MulOptions", "Mul", True),
                                          ("Div", "DIV", "DivOptions", "Div", False)):
    register(OpSchema(
        _name, f"Elementwise {_name.lower()} with numpy broadcasting (optional fused activation).",
        (Input("a"), Input("b")), tflite=TfliteSpec(_tfl, _opts, int8_version=2),
        onnx=OnnxSpec(_onnx), int8="requantize", fuses_activation=_fuses))

register(OpSchema("Relu", "max(x, 0).", (X,), tflite=TfliteSpec("RELU", int8_version=2),
                  onnx=OnnxSpec("Relu"), int8="requantize", clamp="RELU"))
register(OpSchema("Relu6", "min(max(x, 0), 6) (TFLite RELU6).", (X,),
                  tflite=TfliteSpec("RELU6", int8_version=2), int8="requantize", clamp="RELU6"))
register(OpSchema(
    "Clip", "min(max(x, min), max) with optional constant bounds (ONNX Clip, opset 11+).",
    (X, Input("min", "param", optional=True), Input("max", "param", optional=True)),
    onnx=OnnxSpec("Clip"), int8="requantize", clamp="inputs"))
register(OpSchema("Sigmoid", "1 / (1 + exp(-x)) (TFLite LOGISTIC).", (X,),
                  tflite=TfliteSpec("LOGISTIC", int8_version=2), onnx=OnnxSpec("Sigmoid"),
                  int8="fixed_output", fixed_output=(1.0 / 256.0, -128)))
register(OpSchema("Tanh", "tanh(x).", (X,), tflite=TfliteSpec("TANH", int8_version=2),
                  onnx=OnnxSpec("Tanh"), int8="fixed_output", fixed_output=(1.0 / 128.0, 0)))
register(OpSchema("HardSigmoid", "max(0, min(1, alpha * x + beta)) (ONNX).", (X,),
                  onnx=OnnxSpec("HardSigmoid", {"alpha": 0.2, "beta": 0.5}), int8="requantize"))
register(OpSchema("HardSwish", "x * relu6(x + 3) / 6.", (X,),
                  tflite=TfliteSpec("HARD_SWISH", int8_version=1),
                  onnx=OnnxSpec("HardSwish"), int8="requantize"))
register(OpSchema(
    "Softmax", "softmax(beta * x) along `axis` (TFLite: the last axis); `coerce_2d`: over "
    "every axis from `axis` (ONNX before opset 13).", (X,),
    tflite=TfliteSpec("SOFTMAX", "SoftmaxOptions", int8_version=2),
    onnx=OnnxSpec("Softmax", {"axis": None}),
    int8="fixed_output", fixed_output=(1.0 / 256.0, -128)))

register(OpSchema(
    "MaxPool", "2-D max pooling.", (X,),
    tflite=TfliteSpec("MAX_POOL_2D", "Pool2DOptions", int8_version=2),
    onnx=OnnxSpec("MaxPool", dict(_POOL_ATTRS, storage_order=0), spatial=True),
    layout_sensitive=True, int8="same_scale"))
register(OpSchema(
    "AveragePool", "2-D average pooling.", (X,),
    tflite=TfliteSpec("AVERAGE_POOL_2D", "Pool2DOptions", int8_version=2),
    onnx=OnnxSpec("AveragePool", dict(_POOL_ATTRS, count_include_pad=0), spatial=True),
    layout_sensitive=True, int8="same_scale"))  # TFLite's int8 AVERAGE_POOL_2D does not rescale
register(OpSchema("GlobalAveragePool", "Mean over all spatial axes, kept as size 1 (ONNX).",
                  (X,), onnx=OnnxSpec("GlobalAveragePool"), layout_sensitive=True,
                  int8="requantize"))
register(OpSchema("Mean", "Mean over the axes given by a constant input (TFLite MEAN).",
                  (X, Input("axes", "param")),
                  tflite=TfliteSpec("MEAN", "ReducerOptions", int8_version=2),
                  int8="requantize"))
register(OpSchema("ReduceMean", "Mean over the `axes` input (ONNX ReduceMean; an attribute "
                  "before opset 18).", (X, Input("axes", "param", optional=True)),
                  onnx=OnnxSpec("ReduceMean", {"axes": None, "keepdims": 1,
                                               "noop_with_empty_axes": 0},
                                attr_inputs={"axes": 18}),
                  int8="requantize"))
# REDUCE_MAX / REDUCE_MIN (int8; this TFLite Micro has no int16 kernel): TFLite Micro requires
# the input's scale and zero point on the output (it picks raw values): same_scale; SUM
# requantizes; REDUCE_PROD: no TFLite Micro kernel at all (float executor only, no int8 rule)
for _name, _tfl, _since, _int8, _rule in (("ReduceMax", "REDUCE_MAX", 18, 2, "same_scale"),
                                          ("ReduceMin", "REDUCE_MIN", 18, 2, "same_scale"),
                                          ("ReduceSum", "SUM", 13, 2, "requantize"),
                                          ("ReduceProd", "REDUCE_PROD", 18, None, None)):
    register(OpSchema(
        _name, f"{_name[6:]} over the `axes` input (ONNX {_name}: an attribute before opset "
        f"{_since}, `keepdims`; TFLite {_tfl}: `keep_dims`).",
        (X, Input("axes", "param", optional=True)),
        tflite=TfliteSpec(_tfl, "ReducerOptions", int8_version=_int8),
        onnx=OnnxSpec(_name, {"axes": None, "keepdims": 1, "noop_with_empty_axes": 0},
                      attr_inputs={"axes": _since}),
        int8=_rule))
register(OpSchema("GlobalMaxPool", "Max over all spatial axes, kept as size 1 (ONNX).", (X,),
                  onnx=OnnxSpec("GlobalMaxPool"), layout_sensitive=True, int8="same_scale"))

register(OpSchema("Flatten", "Reshape to 2-D at `axis` (ONNX).", (X,),
                  onnx=OnnxSpec("Flatten", {"axis": 1}), int8="same_scale"))
register(OpSchema(
    "Reshape", "Reshape to the `shape` input (TFLite: the `new_shape` option when the node has "
    "no shape input); `allowzero` 1 reads a 0 literally, 0 copies the input dimension.",
    (X, Input("shape", "param", optional=True)),
    tflite=TfliteSpec("RESHAPE", "ReshapeOptions", option_inputs={"shape": "new_shape"},
                      input_too=frozenset({"shape"}), int8_version=1),
    onnx=OnnxSpec("Reshape", {"allowzero": 0}),
    int8="same_scale"))
register(OpSchema(
    "Transpose", "Permute axes by the constant `perm` input (ONNX's `perm` attribute); absent, "
    "reverse them.", (X, Input("perm", "param", optional=True)),
    tflite=TfliteSpec("TRANSPOSE", "TransposeOptions", int8_version=2),
    onnx=OnnxSpec("Transpose", {"perm": None}, attr_inputs={"perm": None}),
    int8="same_scale"))
register(OpSchema(
    "Concat", "Concatenate along `axis`.", (Input("inputs", variadic=True),),
    tflite=TfliteSpec("CONCATENATION", "ConcatenationOptions", int8_version=2),
    onnx=OnnxSpec("Concat", {"axis": None}), int8="same_scale"))
register(OpSchema(
    "Pad", "Pad by `pads` rows [k, 2] (begin, end) per axis of `axes` (absent: every axis) "
    "with `value` (default 0) or by `mode` (ONNX; the reader turns its flat pads into rows).",
    (X, Input("pads", "param"), Input("value", "param", optional=True),
     Input("axes", "param", optional=True)),
    tflite=TfliteSpec("PAD", "PadOptions", int8_version=2),
    onnx=OnnxSpec("Pad", {"mode": "constant"}),
    int8="same_scale"))
register(OpSchema(
    "Fill", "A tensor of the shape of the 1-D `dims` input filled with the scalar `value` (TFLite "
    "FILL; int8: the value copied, one scale).", (Input("dims", "param"), Input("value")),
    tflite=TfliteSpec("FILL", "FillOptions", int8_version=3), int8="same_scale"))
register(OpSchema(
    "MirrorPad", "Pad by mirroring: `pads` rows [rank, 2] (begin, end); `mode` TFLite's code, 0 "
    "REFLECT (the edge not repeated, ONNX Pad reflect), 1 SYMMETRIC (repeated; ONNX Pad edge "
    "when every pad is at most 1) (TFLite MIRROR_PAD; int8: values copied, one scale).",
    (X, Input("pads", "param")),
    tflite=TfliteSpec("MIRROR_PAD", "MirrorPadOptions", int8_version=2), int8="same_scale"))
register(OpSchema(
    "PadV2", "Pad with the value of a constant input (TFLite PADV2: paddings [rank, 2]).",
    (X, Input("pads", "param"), Input("value", "param")),
    tflite=TfliteSpec("PADV2", "PadV2Options", int8_version=2), int8="same_scale"))
for _name, _tfl in (("Maximum", "MAXIMUM"), ("Minimum", "MINIMUM")):
    register(OpSchema(
        _name, f"Elementwise {_name.lower()} with broadcasting (TFLite {_tfl}; int8: the "
        "operands share the output's scale).", (Input("a"), Input("b")),
        tflite=TfliteSpec(_tfl, "MaximumMinimumOptions", int8_version=2), int8="same_scale"))
for _name, _tfl in (("Max", "MAXIMUM"), ("Min", "MINIMUM")):
    register(OpSchema(
        _name, f"Elementwise {_name.lower()} of any number of operands, numpy broadcasting (ONNX "
        f"{_name}; to TFLite a chain of {_tfl}; QDQ: the output its own range, onnxruntime "
        "runs it on dequantized values).", (Input("inputs", variadic=True),),
        onnx=OnnxSpec(_name), int8="requantize"))
register(OpSchema(
    "Squeeze", "Remove the size-1 axes of the `axes` input (ONNX: an attribute before opset 13; "
    "TFLite: the `squeeze_dims` option); absent or empty, every size-1 axis.",
    (X, Input("axes", "param", optional=True)),
    tflite=TfliteSpec("SQUEEZE", "SqueezeOptions", option_inputs={"axes": "squeeze_dims"},
                      int8_version=1),
    onnx=OnnxSpec("Squeeze", {"axes": None}, attr_inputs={"axes": 13}),
    int8="same_scale"))
register(OpSchema(
    "ExpandDims", "Insert one size-1 axis at the scalar `axis` input (negative: counted from the "
    "output rank) (TFLite EXPAND_DIMS; ONNX Unsqueeze is written as RESHAPE).",
    (X, Input("axis", "param")),
    tflite=TfliteSpec("EXPAND_DIMS", "ExpandDimsOptions", int8_version=1), int8="same_scale"))
register(OpSchema("Unsqueeze", "Insert size-1 axes at the `axes` input (ONNX: an attribute "
                  "before opset 13).", (X, Input("axes", "param", optional=True)),
                  onnx=OnnxSpec("Unsqueeze", {"axes": None}, attr_inputs={"axes": 13}),
                  int8="same_scale"))
register(OpSchema("ConstantOfShape", "A tensor of the given shape filled with `value` (ONNX).",
                  (Input("shape", "param"),), onnx=OnnxSpec("ConstantOfShape", {"value": None})))
# Shape arithmetic (what PyTorch's exporter emits around Reshape/Flatten); `fold-constants`
# evaluates it when the inputs are constants or of static shape.
register(OpSchema(
    "Cast", "Convert the element type to `to`, an IR dtype name (ONNX: a TensorProto code; "
    "TFLite: the output tensor's type).", (X,),
    tflite=TfliteSpec("CAST", "CastOptions"), onnx=OnnxSpec("Cast", {"to": None, "saturate": 1})))
register(OpSchema(
    "Shape", "The input's shape as a 1-D tensor of `out_type`, a dtype name (ONNX: int64; "
    "TFLite: its out_type code), ONNX 15+: dims [start, end).", (X,),
    tflite=TfliteSpec("SHAPE", "ShapeOptions"), onnx=OnnxSpec("Shape", {"start": 0, "end": None})))
register(OpSchema(
    "Gather", "Take entries of `x` along `axis` at `indices` (ONNX: negative indices count "
    "from the end).", (X, Input("indices", "param")),
    tflite=TfliteSpec("GATHER", "GatherOptions", int8_version=2),
    onnx=OnnxSpec("Gather", {"axis": 0}),
    int8="same_scale"))
register(OpSchema(
    "Slice", "Strided slice along `axes` (ONNX 10+: starts, ends, axes, steps inputs).",
    (X, Input("starts", "param"), Input("ends", "param"), Input("axes", "param", optional=True),
     Input("steps", "param", optional=True)),
    onnx=OnnxSpec("Slice"), int8="same_scale"))
register(OpSchema(
    "Range", "start, start + delta, ... up to but excluding limit (scalar inputs).",
    (Input("start", "param"), Input("limit", "param"), Input("delta", "param")),
    tflite=TfliteSpec("RANGE", "RangeOptions"), onnx=OnnxSpec("Range")))
register(OpSchema(
    "Expand", "Broadcast `x` with the shape input (ONNX Expand: two-way numpy broadcasting).",
    (X, Input("shape", "param")), onnx=OnnxSpec("Expand"), int8="same_scale"))
register(OpSchema(
    "StridedSlice", "Strided slice with begin / end / strides inputs and bit masks (TFLite; "
    "the converter's dynamic-batch flatten reads the batch out of Shape with it).",
    (X, Input("begin", "param"), Input("end", "param"), Input("strides", "param", optional=True)),
    tflite=TfliteSpec("STRIDED_SLICE", "StridedSliceOptions", int8_version=2), int8="same_scale"))
register(OpSchema(
    "Pack", "Stack equally shaped inputs along a new `axis` (TFLite PACK).",
    (Input("inputs", variadic=True),), tflite=TfliteSpec("PACK", "PackOptions", int8_version=2),
    int8="same_scale"))
register(OpSchema(
    "Unpack", "Split along `axis` into its `num` slices, that axis removed (TFLite UNPACK).",
    (X,), tflite=TfliteSpec("UNPACK", "UnpackOptions", int8_version=2), int8="same_scale"))
register(OpSchema(
    "SliceBySize", "The box starting at the `begin` input of the `size` input's extent (-1: to "
    "the end) (TFLite SLICE).", (X, Input("begin", "param"), Input("size", "param")),
    tflite=TfliteSpec("SLICE", "SliceOptions", int8_version=2), int8="same_scale"))
register(OpSchema(
    "Reverse", "Reverse the order along the axes of the `axis` input (TFLite REVERSE_V2).",
    (X, Input("axis", "param")),
    tflite=TfliteSpec("REVERSE_V2", "ReverseV2Options", int8_version=3), int8="same_scale"))
register(OpSchema("Identity", "y = x.", (X,), onnx=OnnxSpec("Identity"), int8="same_scale"))
register(OpSchema("Dropout", "Identity at inference (ONNX).",
                  (X, Input("ratio", "param", optional=True),
                   Input("training_mode", "param", optional=True)),
                  onnx=OnnxSpec("Dropout", {"ratio": None, "seed": None}), int8="same_scale"))
register(OpSchema(
    "Quantize", "float -> integer: saturate(round(x / scale) + zero_point); `rounding` half to "
    "even (ONNX QuantizeLinear; absent) or half away from zero (TFLite QUANTIZE, whose scale "
    "and zero point are its output's quantization).",
    (X, Input("scale", "param", optional=True, from_quantization="output"),
     Input("zero_point", "param", optional=True, from_quantization="output")),
    tflite=TfliteSpec("QUANTIZE", int8_version=2),
    onnx=OnnxSpec("QuantizeLinear", {"axis": 1, "saturate": 1, "block_size": 0,
                                     "output_dtype": 0})))
register(OpSchema(
    "Dequantize", "integer -> float: (x - zero_point) * scale (TFLite DEQUANTIZE: its input's "
    "quantization; of float16: a cast).",
    (X, Input("scale", "param", optional=True, from_quantization="input"),
     Input("zero_point", "param", optional=True, from_quantization="input")),
    tflite=TfliteSpec("DEQUANTIZE", int8_version=2),
    onnx=OnnxSpec("DequantizeLinear", {"axis": 1, "block_size": 0})))

# -- activations, normalization and attention of exported transformers (ONNX -> TFLite) --------
register(OpSchema(
    "LeakyRelu", "x if x >= 0 else alpha * x (ONNX LeakyRelu, TFLite LEAKY_RELU).", (X,),
    tflite=TfliteSpec("LEAKY_RELU", "LeakyReluOptions", int8_version=2),
    onnx=OnnxSpec("LeakyRelu", {"alpha": 0.01}), int8="requantize"))
register(OpSchema(
    "PRelu", "x if x >= 0 else slope * x, slope broadcast to x (ONNX PRelu, TFLite PRELU; "
    "int8: slope per tensor).", (X, Input("slope", "param")),
    tflite=TfliteSpec("PRELU", int8_version=1), onnx=OnnxSpec("PRelu"), int8="requantize"))
register(OpSchema(
    "BatchMatMul", "Matrix product of two activations over the last two axes, batch axes "
    "broadcast; `adj_x` / `adj_y` transpose an operand's last two axes (TFLite BATCH_MATMUL).",
    (Input("a"), Input("b")),
    tflite=TfliteSpec("BATCH_MATMUL", "BatchMatMulOptions", int8_version=2),
    int8="requantize", macs="batch_matmul"))
register(OpSchema("Sqrt", "sqrt(x) (int8: TFLite Micro's SQRT is float only).", (X,),
                  tflite=TfliteSpec("SQRT"), onnx=OnnxSpec("Sqrt")))
register(OpSchema("Rsqrt", "1 / sqrt(x) (TFLite RSQRT).", (X,),
                  tflite=TfliteSpec("RSQRT", int8_version=2),
                  int8="requantize"))
register(OpSchema(
    "SquaredDifference", "(a - b) ** 2 with numpy broadcasting (TFLite SQUARED_DIFFERENCE: the "
    "variance of a normalisation).", (Input("a"), Input("b")),
    tflite=TfliteSpec("SQUARED_DIFFERENCE", int8_version=2), int8="requantize"))
register(OpSchema("Abs", "|x| (TFLite ABS, ONNX Abs).", (X,),
                  tflite=TfliteSpec("ABS", int8_version=2), onnx=OnnxSpec("Abs"),
                  int8="requantize"))
# comparisons: a bool output; int8 inputs keep their own scales (TFLite Micro rescales each
# by its scale before comparing: ComparisonsPrepare; no int16 parameters, so no 16x8 form)
for _name, _tfl, _onnx, _sign in (("Equal", "EQUAL", "Equal", "=="),
                                  ("NotEqual", "NOT_EQUAL", None, "!="),
                                  ("Greater", "GREATER", "Greater", ">"),
                                  ("GreaterEqual", "GREATER_EQUAL", "GreaterOrEqual", ">="),
                                  ("Less", "LESS", "Less", "<"),
                                  ("LessEqual", "LESS_EQUAL", "LessOrEqual", "<=")):
    register(OpSchema(
        _name, f"a {_sign} b elementwise with broadcasting, a bool tensor (TFLite {_tfl}"
        + (f", ONNX {_onnx}" if _onnx else "") + "; int8: each input rescaled by its own scale).",
        (Input("a"), Input("b")),
        tflite=TfliteSpec(_tfl, _tfl.title().replace("_", "") + "Options", int8_version=2),
        onnx=OnnxSpec(_onnx) if _onnx else None, int8="requantize"))
register(OpSchema(
    "SelectV2", "x where the bool `condition` holds, else y, the three broadcast (TFLite "
    "SELECT_V2, ONNX Where; int8: x, y and the output share one scale, TFLite Micro copies the "
    "raw values).", (Input("condition"), X, Input("y")),
    tflite=TfliteSpec("SELECT_V2", "SelectV2Options", int8_version=1), onnx=OnnxSpec("Where"),
    int8="same_scale"))
# float only: TFLite Micro's NEG, LOG, SIN and FLOOR_DIV have no int8 kernel (no int8 rule)
for _name, _tfl, _onnx, _doc in (("Neg", "NEG", "Neg", "-x"), ("Log", "LOG", "Log", "log(x)"),
                                 ("Sin", "SIN", "Sin", "sin(x)")):
    register(OpSchema(_name, f"{_doc} (TFLite {_tfl}, ONNX {_onnx}; int8: TFLite Micro's "
                      f"{_tfl} is float only).", (X,), tflite=TfliteSpec(_tfl),
                      onnx=OnnxSpec(_onnx)))
register(OpSchema("FloorDiv", "floor(a / b) with broadcasting (TFLite FLOOR_DIV; int8: TFLite "
                  "Micro's is float only).", (Input("a"), Input("b")),
                  tflite=TfliteSpec("FLOOR_DIV")))
register(OpSchema(
    "L2Normalization", "x / max(||x||, 1e-6) along the last axis (TFLite L2_NORMALIZATION; int8: "
    "the output in steps of 1/128, zero point 0, as TFLite Micro's kernel writes it).", (X,),
    tflite=TfliteSpec("L2_NORMALIZATION", "L2NormOptions", int8_version=2),
    int8="fixed_output", fixed_output=(1.0 / 128.0, 0)))
register(OpSchema("Pow", "x ** y, numpy broadcasting (ONNX Pow; to TFLite only y == 2 (MUL) "
                  "and 0.5 (SQRT)).", (X, Input("exponent", "param")), onnx=OnnxSpec("Pow")))
register(OpSchema("Reciprocal", "1 / x (ONNX; to TFLite DIV(1, x)).", (X,),
                  onnx=OnnxSpec("Reciprocal")))
register(OpSchema(
    "LayerNormalization", "(x - mean) / sqrt(var + epsilon) * scale + bias over the axes from "
    "`axis` (ONNX LayerNormalization, opset 17).",
    (X, Input("scale", "param"), Input("bias", "param", optional=True)),
    onnx=OnnxSpec("LayerNormalization", {"axis": -1, "epsilon": 1e-5, "stash_type": 1}),
    int8="requantize"))

# -- ONNX exports: transposed convolution, resize, split (TFLite forms and their ONNX twins) ----
register(OpSchema(
    "TransposeConv", "Transposed 2-D convolution (TFLite TRANSPOSE_CONV): inputs output_shape "
    "[4], weights OHWI [C_out, kH, kW, C_in], x NHWC, optional bias; `padding` SAME / VALID "
    "sets where the (in - 1) * stride + k wide result is cropped (TFLite's rule).",
    (Input("output_shape", "param"), W, X, B),
    tflite=TfliteSpec("TRANSPOSE_CONV", "TransposeConvOptions", int8_version=3),
    weight_layout={"tflite": "OHWI"}, weight_channel_axis={"tflite": 0},
    int8="per_channel_weights", macs="transpose_conv"))
register(OpSchema(
    "Resize", "Resize the spatial axes (ONNX Resize, opset 11+: roi, scales or sizes inputs; "
    "nearest / linear / cubic, coordinate_transformation_mode, nearest_mode).",
    (X, Input("roi", "param", optional=True, stays_float=True),
     Input("scales", "param", optional=True, stays_float=True),
     Input("sizes", "param", optional=True)),
    onnx=OnnxSpec("Resize", {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                             "nearest_mode": "round_prefer_floor", "cubic_coeff_a": -0.75,
                             "exclude_outside": 0, "extrapolation_value": 0.0, "antialias": 0,
                             "axes": None, "keep_aspect_ratio_policy": "stretch"}),
    int8="same_scale"))  # ONNX QDQ: values interpolated in one scale, as onnxruntime's quantizer
register(OpSchema(
    "ResizeBilinear", "Bilinear resize of NHWC H and W to the constant `size` [h, w] (TFLite "
    "RESIZE_BILINEAR: align_corners, half_pixel_centers).", (X, Input("size", "param")),
    tflite=TfliteSpec("RESIZE_BILINEAR", "ResizeBilinearOptions", int8_version=3),
    int8="same_scale"))
register(OpSchema(
    "ResizeNearest", "Nearest-neighbour resize of NHWC H and W to the constant `size` [h, w] "
    "(TFLite RESIZE_NEAREST_NEIGHBOR: align_corners, half_pixel_centers).",
    (X, Input("size", "param")),
    tflite=TfliteSpec("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions", int8_version=3),
    int8="same_scale"))
register(OpSchema(
    "Split", "Split `x` along `axis` into parts of the sizes of the `split` input (an attribute "
    "before opset 13), else into equal parts, one per output (ONNX Split).",
    (X, Input("split", "param", optional=True)),
    onnx=OnnxSpec("Split", {"axis": 0, "split": None, "num_outputs": None},
                  attr_inputs={"split": 13}), int8="same_scale"))
register(OpSchema(
    "SplitEqual", "Split `x` along the constant `axis` input into `num_splits` equal parts "
    "(TFLite SPLIT: inputs axis, x).", (Input("axis", "param"), X),
    tflite=TfliteSpec("SPLIT", "SplitOptions", int8_version=3), int8="same_scale"))
register(OpSchema(
    "SplitSizes", "Split `x` along the constant `axis` into parts of the constant sizes "
    "(TFLite SPLIT_V: inputs x, size_splits, axis).",
    (X, Input("size_splits", "param"), Input("axis", "param")),
    tflite=TfliteSpec("SPLIT_V", "SplitVOptions", int8_version=2), int8="same_scale"))
register(OpSchema(
    "DepthToSpace", "Move channel blocks into blocksize x blocksize spatial tiles, NCHW (ONNX "
    "DepthToSpace: `mode` DCR, the depth-column-row order, or CRD; to TFLite DEPTH_TO_SPACE, "
    "which is DCR, a CRD one with its channels gathered first).", (X,),
    onnx=OnnxSpec("DepthToSpace", {"blocksize": None, "mode": "DCR"}), layout_sensitive=True,
    int8="same_scale"))
register(OpSchema(
    "DepthToSpaceNHWC", "DepthToSpace of NHWC tensors in DCR order, `block_size` (TFLite "
    "DEPTH_TO_SPACE; int8: values moved, one scale).", (X,),
    tflite=TfliteSpec("DEPTH_TO_SPACE", "DepthToSpaceOptions", int8_version=2),
    int8="same_scale"))
register(OpSchema(
    "Gelu", "x * Phi(x) (ONNX Gelu, opset 20): `approximate` none (erf) or tanh.", (X,),
    onnx=OnnxSpec("Gelu", {"approximate": "none"})))
