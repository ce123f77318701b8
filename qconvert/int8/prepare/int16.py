"""Prepare of 16x8 layers (int16 activations, int8 weights): what TFLite Micro derives once
per layer that reads or writes an int16 activation (`is_int16_node`); `layer_params` takes these
for such nodes (`LAYER_PARAMS16`), so a mixed model (int8 layers and 16x8 layers joined by
QUANTIZE int8 <-> int16) gets each layer's own parameters.

What TFLite Micro does for int16, each pinned by a test against its interpreter
(tests/executor/test_int16_executor.py):
- int16 activations are symmetric: a zero point other than 0 is refused (TFLite Micro refuses
  it in most int16 kernels and ignores it in CONV_2D's, which would silently mis-compute).
- CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / TRANSPOSE_CONV: the int8 multipliers (double
  products), int16 clamps, and `accumulator_bits`: 64 with an int64 bias (the converter's
  default for 16x8: int64 accumulator, `fixed_point.multiply_by_quantized_multiplier_int64`),
  32 with an int32 one (CONV_2D and FULLY_CONNECTED only). DEPTHWISE_CONV_2D reads its bias as int64
  whatever it is (an int32 bias is refused, as is none: TFLite Micro crashes without one);
  TRANSPOSE_CONV takes an int16 or int64 bias.
- SQUARED_DIFFERENCE: left shift 0 (7 for int8), int16 clamps.
- ADD / SUB: left shift 15 (20 for int8), the ratios in double (this TFLite Micro does so for
  SUB too, where older sources have float32).
- MUL, MEAN, RELU, LEAKY_RELU, PRELU (int8 alpha), BATCH_MATMUL, ABS, RSQRT: the int8 multipliers
  with int16 clamps; RELU6 clamps to [0, min(round(6 / s_in), 32767)].
- SOFTMAX int16 -> int16: QuantizeMultiplier(s_in * beta / (10 / 65535)) and TFLite Micro's two
  513-entry tables (`lut16.softmax_luts`); output scale 1/32768. int8 -> int16: the int8
  scaling, output (1/65536, -32768).
- LOGISTIC / TANH: the 15-bit input multiplier and shift of `lut16.int16_sigmoid_tanh_scaling`;
  output scale 2**-15.
- QUANTIZE: the int8 parameters plus `output_bits` (8 or 16).
- CONCATENATION: inputs quantized unlike the output are refused (TFLite Micro checks only zero
  points and would copy raw values at the wrong scale); PAD pads with 0 or its value input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qconvert.padding import transpose_conv_pads

from ..activation_range import activation_range
from ..lut16 import checked_log2, int16_sigmoid_tanh_scaling, softmax_luts
from ..multipliers import calculate_input_radius, effective_multipliers
from ..rounding import round_half_away
from .arithmetic import add_rescaling, operand_scales, squared_difference_params
from .common import LAYER_PARAMS, fail, fused_activation, no_params, per_tensor, \
    quantize_multipliers, registrar
from .data import NO_PARAMS_OPS, concat_params_with
from .pooling import mean_params, pool_params_with

INT16_MIN, INT16_MAX = -32768, 32767

LAYER_PARAMS16: dict[str, Callable] = {}


prepare16 = registrar(LAYER_PARAMS16)  # @prepare16(op, ...): the 16x8 Prepare of each op


def is_int16_node(graph, node) -> bool:
    """True when `node` reads or writes an int16 activation (a non-constant int16 tensor)."""
    for name in list(node.inputs) + list(node.outputs):
        if name is None:
            continue
        t = graph.tensors[name]
        if t.data is None and str(t.dtype) == "int16":
            return True
    return False


def _symmetric(graph, node, name) -> tuple:
    """(float32 scale, 0) of an int16 activation; a non-zero zero point is refused."""
    scale, zp = per_tensor(graph, node, name)
    if zp != 0 and str(graph.tensors[name].dtype) == "int16":
        fail(node, f"int16 tensor {name!r} has zero point {zp}: 16x8 kernels need 0")
    return scale, zp


def _act_range16(node, scale, zp) -> tuple:
    try:
        return activation_range(fused_activation(node), scale, zp, INT16_MIN, INT16_MAX)
    except ValueError as exc:
        fail(node, str(exc))


def _weights(graph, node, index):
    w = graph.tensors[node.inputs[index]]
    if w.data is None or w.data.dtype != np.int8:
        fail(node, f"weights {node.inputs[index]!r} are not int8 constants (16x8 needs int8)")
    if w.quant is None or w.quant.scale.size == 0:
        fail(node, f"weights {node.inputs[index]!r} have no quantization parameters")
    return w


def _bias16(graph, node, index, channels, allowed):
    """(int64 bias or None, accumulator bits 32 or 64) of a 16x8 layer."""
    name = node.inputs[index] if len(node.inputs) > index else None
    if name is None:
        bits = 32 if str(node.attrs.get("quantized_bias_type") or "").upper() == "INT32" else 64
        return None, bits if "int32" in allowed else 64
    data = graph.tensors[name].data
    if data is None:
        fail(node, f"bias {name!r} is not a constant")
    if str(data.dtype) not in allowed:
        fail(node, f"bias {name!r} is {data.dtype}; TFLite Micro's 16x8 {node.op} takes "
                    f"{' or '.join(allowed)}")
    if data.size != channels:
        fail(node, f"bias {name!r} has {data.size} values for {channels} channels")
    return data.reshape(-1).astype(np.int64), 32 if data.dtype == np.int32 else 64


def _weighted_params(graph, node, w, channels, input_index, per_tensor_ok=True) -> dict:
    s_in, _ = _symmetric(graph, node, node.inputs[input_index])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    s_w = w.quant.scale
    if s_w.size not in (1, channels):
        fail(node, f"{s_w.size} weight scales for {channels} output channels")
    try:
        real = effective_multipliers(s_in, np.broadcast_to(s_w, (channels,)) if per_tensor_ok
                                     else s_w, s_out)
    except ValueError as exc:
        fail(node, str(exc))
    multiplier, shift = quantize_multipliers(node, real)
    act_min, act_max = _act_range16(node, s_out, 0)
    return {"per_channel": bool(s_w.size > 1), "input_offset": 0, "output_offset": 0,
            "output_multiplier": multiplier, "output_shift": shift, "effective_scale": real,
            "activation_min": act_min, "activation_max": act_max}


@prepare16("Conv2D", "DepthwiseConv2D")
def conv16_params(graph, node) -> dict:
    """16x8 CONV_2D / DEPTHWISE_CONV_2D Prepare: per-channel multipliers as int8, int16 clamps,
    the bias type choosing the accumulator."""
    w = _weights(graph, node, 1)
    depthwise = node.op == "DepthwiseConv2D"
    channels = int(w.data.shape[3] if depthwise else w.data.shape[0])
    out = _weighted_params(graph, node, w, channels, 0)
    allowed = ("int64",) if depthwise else ("int64", "int32")
    out["bias"], out["accumulator_bits"] = _bias16(graph, node, 2, channels, allowed)
    attrs = node.attrs
    out.update({"strides": [int(v) for v in attrs.get("strides") or [1, 1]],
                "dilations": [int(v) for v in attrs.get("dilations") or [1, 1]],
                "pads": [int(v) for v in attrs.get("pads") or [0, 0, 0, 0]]})
    x_shape = graph.tensors[node.inputs[0]].shape
    if not depthwise and x_shape and isinstance(x_shape[-1], (int, np.integer)) \
            and int(x_shape[-1]) != int(w.data.shape[3]):
        out["groups"] = int(x_shape[-1]) // int(w.data.shape[3])  # a grouped CONV_2D
    if depthwise:
        if out["bias"] is None:
            fail(node, "TFLite Micro's DEPTHWISE_CONV_2D needs a bias tensor (use zeros)")
        out["depth_multiplier"] = int(attrs.get("depth_multiplier") or 0)
    return out


@prepare16("FullyConnected")
def fc16_params(graph, node) -> dict:
    """16x8 FULLY_CONNECTED Prepare: per channel when the weights carry several scales, else one
    multiplier; int64 or int32 bias."""
    w = _weights(graph, node, 1)
    channels = int(w.data.shape[0])
    per_channel = w.quant.scale.size > 1
    out = _weighted_params(graph, node, w, channels if per_channel else 1, 0)
    if per_channel and w.quant.scale.size != channels:
        fail(node, f"{w.quant.scale.size} weight scales for {channels} output channels")
    out["bias"], out["accumulator_bits"] = _bias16(graph, node, 2, channels, ("int64", "int32"))
    z_w = int(w.quant.zero_point[0]) if w.quant.zero_point.size else 0
    out["weights_offset"] = 0 if per_channel else -z_w
    out["keep_num_dims"] = bool(node.attrs.get("keep_num_dims") or False)
    return out


@prepare16("TransposeConv")
def transpose_conv16_params(graph, node) -> dict:
    """16x8 TRANSPOSE_CONV Prepare: per-channel multipliers, int64 (or int16) bias, the padding
    of the output size."""
    w = _weights(graph, node, 1)
    shape = graph.tensors[node.inputs[0]].data
    if shape is None:
        fail(node, "output_shape is not a constant")
    out_shape = [int(v) for v in np.asarray(shape).reshape(-1)]
    channels, kh, kw, _ = w.data.shape
    out = _weighted_params(graph, node, w, int(channels), 2)
    out["bias"], _ = _bias16(graph, node, 3, int(channels), ("int64", "int16"))
    out["accumulator_bits"] = 64
    strides = [int(v) for v in node.attrs.get("strides") or [1, 1]]
    top, left = transpose_conv_pads(node.attrs.get("padding", "VALID"), out_shape[1:3],
                                    (kh, kw), strides)
    out.update({"strides": strides, "pads": [top, left], "output_shape": out_shape})
    return out


@prepare16("BatchMatMul")
def batch_matmul16_params(graph, node) -> dict:
    """BatchMatMulPrepare (int16): one multiplier of double s_a * s_b / s_out, int16 clamps."""
    (s_a, _), (s_b, _), (s_out, _) = operand_scales(graph, node, _symmetric)
    m, e = quantize_multipliers(node, float(s_a) * float(s_b) / float(s_out))
    return {"output_multiplier": int(m), "output_shift": int(e),
            "adj_x": bool(node.attrs.get("adj_x")), "adj_y": bool(node.attrs.get("adj_y"))}


@prepare16("Add", "Sub")
def add_sub16_params(graph, node) -> dict:
    """CalculateOpDataAdd / Sub (int16): int8's `add_rescaling` with a left shift of 15 (the
    ratios in double: this TFLite Micro does so for SUB too, where older sources have float32:
    pinned by a test); all zero points 0; int16 clamps."""
    (s1, _), (s2, _), (s_out, _) = operand_scales(graph, node, _symmetric)
    rescaling = add_rescaling(node, s1, s2, s_out, 15)
    act_min, act_max = _act_range16(node, s_out, 0)
    return {**rescaling, "activation_min": act_min, "activation_max": act_max}


@prepare16("SquaredDifference")
def squared_difference16_params(graph, node) -> dict:
    """SquaredDifferencePrepare (int16): zero points 0, left shift 0, int16 clamps."""
    operand_scales(graph, node, _symmetric)  # refuses a non-zero zero point
    return squared_difference_params(graph, node, left_shift=0, type_range=(INT16_MIN, INT16_MAX))


@prepare16("Mul")
def mul16_params(graph, node) -> dict:
    """CalculateOpDataMul (int16): double s1 * s2 / s_out; all zero points 0."""
    (s1, _), (s2, _), (s_out, _) = operand_scales(graph, node, _symmetric)
    m, s = quantize_multipliers(node, float(s1) * float(s2) / float(s_out))
    act_min, act_max = _act_range16(node, s_out, 0)
    return {"output_multiplier": int(m), "output_shift": int(s),
            "activation_min": act_min, "activation_max": act_max}


@prepare16("AveragePool", "MaxPool")
def pool16_params(graph, node) -> dict:
    """PoolingPrepare (int16): equal input and output quantization (symmetric), int16 clamps
    (`pooling.pool_params_with`)."""
    return pool_params_with(graph, node, _symmetric, _act_range16)


@prepare16("Mean", "ReduceSum")
def mean16_params(graph, node) -> dict:
    """MEAN (int16): the int8 Prepare (QuantizeMultiplier of s_in / s_out, 1 / count folded)."""
    _symmetric(graph, node, node.inputs[0])
    _symmetric(graph, node, node.outputs[0])
    return mean_params(graph, node)


@prepare16("Softmax")
def softmax16_params(graph, node) -> dict:
    """CalculateSoftmaxParams (int16 -> int16): QuantizeMultiplier(s_in * beta / (10 / 65535));
    the output must be scale 1/32768, zero point 0. An int8 input with an int16 output is the
    int8 softmax's scaling (`softmax8_16`)."""
    if str(graph.tensors[node.inputs[0]].dtype) == "int8":
        return softmax8_16_params(graph, node)
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    if str(graph.tensors[node.inputs[0]].dtype) != "int16" or \
            str(graph.tensors[node.outputs[0]].dtype) != "int16":
        fail(node, "16-bit softmax needs int16 input and output")
    if abs(float(s_out) - 1.0 / 32768) > 0.001 / 32768:
        fail(node, f"output scale {s_out} must be 1/32768")
    beta = float(np.float32(node.attrs.get("beta", 1.0)))
    m, s = quantize_multipliers(node, float(s_in) * beta / (10.0 / 65535.0))
    exp_lut, recip_lut = softmax_luts()
    return {"input_multiplier": int(m), "input_left_shift": int(s), "exp_lut": exp_lut,
            "one_over_one_plus_x_lut": recip_lut}


def softmax8_16_params(graph, node) -> dict:
    """CalculateSoftmaxParams (int8 -> int16): PreprocessSoftmaxScaling with 5 integer bits and
    diff_min as for int8 -> int8; the output must be scale 1/65536, zero point -32768."""
    s_in, _ = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    if z_out != -32768 or abs(float(s_out) - 1.0 / 65536) > 0.001 / 65536:
        fail(node, f"output quantization ({s_out}, {z_out}) must be (1/65536, -32768)")
    beta = float(np.float32(node.attrs.get("beta", 1.0)))
    real = min(beta * float(s_in) * (1 << 26), (1 << 31) - 1.0)
    if not real > 1:
        fail(node, f"input scale x beta {beta * float(s_in)} too small")
    m, s = quantize_multipliers(node, real)
    return {"input_multiplier": int(m), "input_left_shift": int(s),
            "diff_min": -calculate_input_radius(5, int(s))}


def _sigmoid_tanh16_params(graph, node, is_tanh) -> dict:
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    log2, pot = checked_log2(s_out)
    if not pot or log2 != -15:
        fail(node, f"output scale {s_out} must be 2**-15")
    m, shift = int16_sigmoid_tanh_scaling(s_in, is_tanh)
    return {"input_multiplier": m, "input_left_shift": shift}


@prepare16("Sigmoid")
def sigmoid16_params(graph, node) -> dict:
    """CalculateArithmeticOpDataLogistic (int16)."""
    return _sigmoid_tanh16_params(graph, node, False)


@prepare16("Tanh")
def tanh16_params(graph, node) -> dict:
    """TanhPrepare (int16)."""
    return _sigmoid_tanh16_params(graph, node, True)


@prepare16("Relu")
def relu16_params(graph, node) -> dict:
    """CalculateReluOpData<int16_t>: multiplier of double(float32(s_in / s_out)), zero points 0."""
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    s_out, _ = _symmetric(graph, node, node.outputs[0])
    m, s = quantize_multipliers(node, float(np.float32(s_in / s_out)))
    return {"output_multiplier": int(m), "output_shift": int(s),
            "activation_min": 0, "activation_max": INT16_MAX}


@prepare16("Relu6")
def relu6_16_params(graph, node) -> dict:
    """Relu6Prepare (int16): raw values clamped to [0, min(round(6 / s_in), 32767)]."""
    s_in, _ = _symmetric(graph, node, node.inputs[0])
    six = int(round_half_away(np.float32(6.0) / s_in))
    return {"zero": 0, "six": min(six, INT16_MAX)}


def _symmetric_io(graph, node) -> None:
    """Refuses a non-zero zero point on the int16 input (slot 0) or output of `node`."""
    _symmetric(graph, node, node.inputs[0])
    _symmetric(graph, node, node.outputs[0])


@prepare16("LeakyRelu", "Abs", "Rsqrt")
def int8_multipliers16_params(graph, node) -> dict:
    """CalculateOpDataLeakyRelu, PrepareAbsRsqrt (ABS, RSQRT) (int16): zero points 0, the int8
    multipliers."""
    _symmetric_io(graph, node)
    return LAYER_PARAMS[node.op](graph, node)


@prepare16("PRelu")
def prelu16_params(graph, node) -> dict:
    """CalculatePreluParams (int16 input and output, int8 alpha): the int8 multipliers."""
    _symmetric_io(graph, node)
    if str(graph.tensors[node.inputs[1]].dtype) != "int8":
        fail(node, "a 16x8 PRELU takes an int8 alpha (TFLite Micro requires it)")
    return LAYER_PARAMS["PRelu"](graph, node)


@prepare16("Quantize")
def quantize16_params(graph, node) -> dict:
    """PrepareQuantizeReference with an int16 side: the int8 parameters plus the output type's
    range."""
    out = dict(LAYER_PARAMS["Quantize"](graph, node))
    for name in (node.inputs[0], node.outputs[0]):
        if str(graph.tensors[name].dtype) == "int16":
            _symmetric(graph, node, name)
    dtype = str(graph.tensors[node.outputs[0]].dtype)
    if dtype not in ("int8", "int16"):
        fail(node, f"QUANTIZE to {dtype} is not supported")
    out["output_bits"] = 8 if dtype == "int8" else 16
    return out


@prepare16("Concat")
def concat16_params(graph, node) -> dict:
    """ConcatenationPrepare (int16): zero points 0, no fused activation; inputs quantized unlike
    the output are refused (TFLite Micro would copy their raw values at the wrong scale)."""
    return concat_params_with(graph, node, _symmetric, "int16 CONCATENATION does not requantize")


@prepare16("Pack")
def pack16_params(graph, node) -> dict:
    """PACK (int16): zero points 0, inputs quantized as the output."""
    return concat_params_with(graph, node, _symmetric, "int16 PACK does not requantize")


@prepare16("Pad", "PadV2")
def pad16_params(graph, node) -> dict:
    """PAD / PADV2 (int16): the constant value input, else 0."""
    _symmetric(graph, node, node.outputs[0])
    value_name = node.inputs[2] if len(node.inputs) > 2 else None
    if value_name is None:
        return {"pad_value": 0}
    data = graph.tensors[value_name].data
    if data is None:
        fail(node, "pad value is not a constant")
    return {"pad_value": int(np.asarray(data).reshape(-1)[0])}


# Ops that move int16 values as they move int8 ones: the int8 kernels keep the dtype.


# Ops that move int16 values as they move int8 ones: the int8 Prepare.
for _op in ("Reshape", "Dequantize", "Reverse", "SelectV2"):
    LAYER_PARAMS16[_op] = LAYER_PARAMS[_op]
for _op in NO_PARAMS_OPS:
    LAYER_PARAMS16.setdefault(_op, no_params)
