"""Integer kernels of int8 TFLite graphs, bit-exact with TFLite Micro's reference kernels.

Two tables, both keyed by IR op name:

- `INT_PARAMS[op](graph, node) -> dict`: what TFLM computes once at Prepare time from the
  tensors' quantization (multipliers and shifts, offsets, activation clamps, bias...). The
  executor's `layer_params` returns these, so the quantizer report and the C-header exporter
  reuse exactly TFLM's values. Checks TFLM makes at Prepare (softmax output scale, pooling with
  equal input/output quantization, FC bias scale...) raise `QConvertError` naming the node.
- `INT_KERNELS[op](node, inputs, params, ctx) -> list of arrays`: one Eval. `inputs` holds one
  array per input slot (`None` for an omitted optional input); `ctx.rounding` is "double"
  (TFLM) or "single" (CMSIS-NN's single-rounding requantization), `ctx.batch` the number of
  samples carried on axis 0 (see `int_executor` for the batch rule).

Conventions are TFLM's: `input_offset = -z_in` and `weights_offset = -z_w` are added to the
int8 values, `output_offset = z_out` is added after requantization; shifts are positive for a
left shift (QuantizeMultiplier's exponent). Multipliers and shifts are int32 arrays, one entry
per output channel for Conv2D / DepthwiseConv2D / per-channel FullyConnected, one entry for
per-tensor FullyConnected.

Arithmetic: every C `int32_t` quantity is held in int64 numpy arrays and wrapped back to 32
bits wherever the C code could overflow (two's-complement, as on the devices). Accumulators of
Conv2D / FullyConnected are computed with float BLAS, which is exact because every partial sum
is an integer the float type holds: float32 when the layer's bound (sum |w| over a channel times
max |x - z_in|, `exact_float`) is below 2**24, as it is for most layers, else float64 (below
2**53: each term is at most 255 * 255 in magnitude). Spatial layers read the
IR's explicit `pads` [top, left, bottom, right]: taps outside the image are skipped (conv: the
input is padded with x - z_in = 0; pools: excluded from the max and from the average's count),
so pads TFLite cannot express (from ONNX) run as TFLM would after an explicit PAD.
The fixed-point transcendental kernels (softmax exp, logistic, tanh) follow gemmlowp's
`fixedpoint.h` step by step, vectorized over elements.

`rounding="single"` replaces MultiplyByQuantizedMultiplier (Conv2D, DepthwiseConv2D,
FullyConnected, Add, Sub, Mul, Mean, Relu, Quantize int8->int8, the input scaling of Logistic /
Tanh) by CMSIS-NN's single-rounding requantization, i.e. what CMSIS-NN kernels built with
CMSIS_NN_USE_SINGLE_ROUNDING compute for those layers. It is not a model of a TFLite Micro
build with TFLITE_SINGLE_ROUNDING (whose softmax scaling also changes), nor of CMSIS-NN's own
softmax / sigmoid kernels.

What this TFLite Micro (tflite-micro 0.dev2026, reference kernels) does that older sources or
other runtimes may suggest otherwise, each pinned by a test:
- FullyConnected with per-tensor weights takes double(s_in) * double(s_w) / double(s_out), like
  conv (not a float32 product s_in * s_w);
- int8 MEAN always goes through QuantizedMeanOrSum (no truncating raw mean when input and
  output share their quantization);
- int8 CONCATENATION requires every input to carry the output's quantization (it never
  requantizes) and refuses a fused activation;
- DEPTHWISE_CONV_2D needs a bias tensor (it crashes without one); CONV_2D and
  FULLY_CONNECTED accept none;
- pooling requires equal input and output quantization; TANH ignores its output tensor's
  quantization (it writes scale 1/128, zero point 0); RELU6 clamps the raw input to
  [z_in, z_in + round(6 / s_in)] (the output tensor's quantization is not read);
- a float -> int8 QUANTIZE of a value beyond int32 (or NaN) gives what x86 gives:
  INT32_MIN + z_out, wrapped, then clamped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from qconvert.errors import QConvertError
from qconvert.quant.numerics import (activation_range, effective_multipliers,
                                     multiply_by_quantized_multiplier, quantize_multiplier,
                                     round_half_away)

from .float_kernels import KERNELS as FLOAT_KERNELS

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

INT_KERNELS: dict[str, Callable] = {}
INT_PARAMS: dict[str, Callable] = {}


@dataclass
class IntContext:
    """Per-run settings handed to every kernel."""

    rounding: str = "double"
    batch: int = 1


def kernel(*ops: str):
    """Register the decorated function as the int8 kernel of each IR op in `ops`."""
    def wrap(fn):
        for op in ops:
            INT_KERNELS[op] = fn
        return fn

    return wrap


def params(*ops: str):
    """Register the decorated function as the Prepare-time parameters of each op in `ops`."""
    def wrap(fn):
        for op in ops:
            INT_PARAMS[op] = fn
        return fn

    return wrap


def _no_params(graph, node) -> dict:
    return {}


# -- 32-bit fixed-point arithmetic on int64 arrays (gemmlowp / TFLite common.h) ----------------
def wrap32(x):
    """Two's-complement truncation to int32, kept in int64 (C int32 overflow on devices)."""
    return ((np.asarray(x, dtype=np.int64) + 2**31) & 0xFFFFFFFF) - 2**31


def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul of int32 values (int64 arrays in, int64 out)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    high = (a * b + 2**30) >> 31
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high)


def rdbpot(x, exponent):
    """RoundingDivideByPOT: x / 2**exponent, rounded to nearest, ties away from zero."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def sat_mul_pot(x, exponent: int):
    """SaturatingRoundingMultiplyByPOT<exponent> of int32 raw values."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX,
                    np.where(x < -threshold, INT32_MIN, x << exponent))


def rounding_half_sum(a, b):
    """gemmlowp RoundingHalfSum for int32: (a + b + sign) / 2 with C truncating division."""
    s = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t // 2, -((-t) // 2))


def mbqm_greater_than_one(x, multiplier: int, left_shift: int):
    """MultiplyByQuantizedMultiplierGreaterThanOne: SRDHM(x * 2**left_shift, multiplier)."""
    return srdhm(wrap32(np.asarray(x, dtype=np.int64) << left_shift), multiplier)


def clz32(x):
    """Count of leading zeros of positive 32-bit values (CountLeadingZeros of uint32)."""
    x = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    _, e = np.frexp(x.astype(np.float64))  # exact: x < 2**53
    return np.where(x == 0, 32, 32 - e).astype(np.int64)


def exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out (gemmlowp's Taylor expansion around -1/8)."""
    constant_term = 1895147668  # exp(-1/8)
    constant_1_over_3 = 715827883
    x = wrap32(a + (1 << 28))  # a + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(wrap32(srdhm(wrap32(x4_over_4 + x3), constant_1_over_3) + x2), 1)
    return wrap32(constant_term + srdhm(constant_term, wrap32(x + poly)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int):
    """exp(a) for a <= 0 given as Q(integer_bits).(31 - integer_bits); result in Q0.31."""
    a = np.asarray(a, dtype=np.int64)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = wrap32((a & (one_quarter - 1)) - one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        sat_mul_pot(a_mod_quarter_minus_one_quarter, integer_bits))
    remainder = wrap32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = (remainder >> (fractional_bits + exponent)) & 1
            result = np.where(bit != 0, srdhm(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (fractional_bits + 5)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal(half_denominator):
    """Three Newton-Raphson steps of gemmlowp's 1 / (1 + x), in Q2.29."""
    x = wrap32(1515870810 + srdhm(half_denominator, -1010580540))  # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus = wrap32((1 << 29) - srdhm(half_denominator, x))
        x = wrap32(x + sat_mul_pot(srdhm(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp's 1 / (1 + x) for x in [0, 1), Q0.31 in and out (Newton-Raphson)."""
    x = _newton_reciprocal(rounding_half_sum(a, INT32_MAX))
    return sat_mul_pot(x, 1)  # Rescale<0>(ExactMulByPot<-1>(x))


def one_minus_x_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp's (1 - x) / (1 + x) for x in [0, 1), Q0.31 in and out."""
    x = _newton_reciprocal(rounding_half_sum(a, INT32_MAX))
    return sat_mul_pot(wrap32(x - (1 << 29)), 2)


def fixed_logistic(a, integer_bits: int = 4):
    """gemmlowp logistic of Q(integer_bits) raw values; Q0.31 result."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_input = np.where(positive, a, wrap32(-a))
    result_pos = one_over_one_plus_x_for_x_in_0_1(
        exp_on_negative_values(wrap32(-abs_input), integer_bits))
    result_neg = wrap32(INT32_MAX - result_pos)
    return np.where(a == 0, 1 << 30, np.where(positive, result_pos, result_neg))


def fixed_tanh(a, integer_bits: int = 4):
    """gemmlowp tanh of Q(integer_bits) raw values; Q0.31 result."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, wrap32(-a))
    # neg_tanh_on_negative_values: ExactMulByPot<1> reinterprets the raw with one more
    # integer bit, i.e. exp(2 n).
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, wrap32(-t), t))


# -- 16-bit helpers of HardSwish -------------------------------------------------------------
def _wrap16(x):
    return ((np.asarray(x, dtype=np.int64) + 2**15) & 0xFFFF) - 2**15


def _trunc_div_pot(x, bits: int):
    """C integer division of int64 values by 2**bits (truncation toward zero)."""
    return np.where(x >= 0, x >> bits, -((-x) >> bits))


def srdhm16(a, b):
    """Saturating rounding doubling high multiply of int16 values (gemmlowp, int16 flavour)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = _wrap16(_trunc_div_pot(ab + nudge, 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


def sdhm16(a, b):
    """SaturatingDoublingHighMul (hard_swish.h): like srdhm16 but truncating toward zero."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    high = _wrap16(_trunc_div_pot(a * b, 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


def saturating_left_shift16(x, amount: int):
    """x << amount saturated to int16."""
    return np.clip(np.asarray(x, dtype=np.int64) << amount, -32768, 32767)


def downscale_int32_to_int16_multiplier(m: int) -> int:
    """TFLite's DownScaleInt32ToInt16Multiplier: a Q31 multiplier rounded to Q15, saturated."""
    if m >= INT32_MAX - (1 << 15):
        return 32767
    return (m + (1 << 15)) >> 16


# -- tensor quantization helpers -------------------------------------------------------------
def _label(node) -> str:
    return f"{node.op} {node.name!r}" if node.name else node.op


def _fail(node, cause: str):
    raise QConvertError(f"{_label(node)}: {cause}")


def _per_tensor(graph, node, name) -> tuple:
    """(float32 scale, int zero point) of a per-tensor quantized activation."""
    t = graph.tensors[name]
    q = t.quant
    if q is None or q.scale.size == 0:
        _fail(node, f"tensor {name!r} has no quantization parameters")
    scale = np.float32(q.scale[0])
    zp = int(q.zero_point[0]) if q.zero_point.size else 0
    if not (np.isfinite(scale) and scale > 0):
        _fail(node, f"tensor {name!r} has scale {scale}")
    return scale, zp


def _activation(node) -> str:
    act = node.attrs.get("activation") or "NONE"
    return str(act).upper()


def _act_range(node, scale, zp) -> tuple:
    try:
        return activation_range(_activation(node), scale, zp)
    except ValueError as exc:
        _fail(node, str(exc))


def _quantize_multipliers(node, real) -> tuple:
    try:
        return quantize_multiplier(real)
    except ValueError as exc:
        _fail(node, str(exc))


def _mbqm(x, multiplier, shift, ctx):
    """TFLite MultiplyByQuantizedMultiplier of int32 values (wrapped first, as C would)."""
    return multiply_by_quantized_multiplier(wrap32(x), multiplier, shift,
                                            rounding=ctx.rounding).astype(np.int64)


def _batch_guard(node, ctx, ok: bool, what: str):
    if ctx.batch > 1 and not ok:
        _fail(node, f"{what}: cannot run a batch of {ctx.batch} samples on axis 0 "
                    "(run the samples one at a time)")


# -- Conv2D / DepthwiseConv2D / FullyConnected ------------------------------------------------
def _bias(graph, node, index, channels):
    name = node.inputs[index] if len(node.inputs) > index else None
    if name is None:
        return None
    data = graph.tensors[name].data
    if data is None:
        _fail(node, f"bias {name!r} is not a constant")
    if data.dtype != np.int32:
        _fail(node, f"bias {name!r} is {data.dtype}, int8 kernels need int32")
    if data.size != channels:
        _fail(node, f"bias {name!r} has {data.size} values for {channels} channels")
    return data.reshape(-1).astype(np.int64)


def _weights(graph, node):
    w = graph.tensors[node.inputs[1]]
    if w.data is None:
        _fail(node, f"weights {node.inputs[1]!r} are not constant")
    if w.data.dtype != np.int8:
        _fail(node, f"weights {node.inputs[1]!r} are {w.data.dtype}, not int8")
    if w.quant is None or w.quant.scale.size == 0:
        _fail(node, f"weights {node.inputs[1]!r} have no quantization parameters")
    return w


@params("Conv2D", "DepthwiseConv2D")
def conv_params(graph, node) -> dict:
    """PopulateConvolutionQuantizationParams: per channel (a per-tensor weight scale is
    broadcast), effective scale double(s_in) * double(s_w[c]) / double(s_out)."""
    w = _weights(graph, node)
    depthwise = node.op == "DepthwiseConv2D"
    channels = int(w.data.shape[3] if depthwise else w.data.shape[0])
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    s_w = w.quant.scale
    if s_w.size not in (1, channels):
        _fail(node, f"{s_w.size} weight scales for {channels} output channels")
    s_w = np.broadcast_to(s_w, (channels,))
    try:
        real = effective_multipliers(s_in, s_w, s_out)
    except ValueError as exc:
        _fail(node, str(exc))
    multiplier, shift = _quantize_multipliers(node, real)
    act_min, act_max = _act_range(node, s_out, z_out)
    attrs = node.attrs
    out = {
        "per_channel": bool(w.quant.scale.size > 1),
        "input_offset": -z_in, "output_offset": z_out,
        "output_multiplier": multiplier, "output_shift": shift,
        "effective_scale": real,
        "activation_min": act_min, "activation_max": act_max,
        "bias": _bias(graph, node, 2, channels),
        "strides": [int(v) for v in attrs.get("strides") or [1, 1]],
        "dilations": [int(v) for v in attrs.get("dilations") or [1, 1]],
        "pads": [int(v) for v in attrs.get("pads") or [0, 0, 0, 0]],
    }
    x_shape = graph.tensors[node.inputs[0]].shape
    if not depthwise and x_shape and isinstance(x_shape[-1], (int, np.integer)) \
            and int(x_shape[-1]) != int(w.data.shape[3]):
        out["groups"] = int(x_shape[-1]) // int(w.data.shape[3])  # a grouped CONV_2D
    if depthwise:
        if out["bias"] is None:  # TFLM's DEPTHWISE_CONV_2D dereferences it (segfault)
            _fail(node, "TFLite Micro's DEPTHWISE_CONV_2D needs a bias tensor (use zeros)")
        out["depth_multiplier"] = int(attrs.get("depth_multiplier") or 0)
    return out


@params("FullyConnected")
def fc_params(graph, node) -> dict:
    """CalculateOpDataFullyConnected: per channel when the weights carry more than one scale,
    else one multiplier (and TFLM's bias-scale check). Both take the double product
    double(s_in) * double(s_w) / double(s_out): probes of TFLite Micro (and of LiteRT's
    reference kernels) show that the per-tensor path does *not* round s_in * s_w to float32
    first (tests/test_int_executor.py::test_layer_params_multipliers_are_tflms_to_the_last_bit).
    """
    w = _weights(graph, node)
    channels = int(w.data.shape[0])
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    s_w = w.quant.scale
    per_channel = s_w.size > 1
    if per_channel and s_w.size != channels:
        _fail(node, f"{s_w.size} weight scales for {channels} output channels")
    bias = _bias(graph, node, 2, channels)
    if not per_channel and bias is not None:
        bq = graph.tensors[node.inputs[2]].quant
        bias_scale = float(bq.scale[0]) if bq is not None and bq.scale.size else 0.0
        product = float(s_in) * float(s_w[0])
        if abs(product - bias_scale) / float(s_out) > 0.02:
            _fail(node, f"bias scale {bias_scale} differs from input scale x weight scale "
                        f"{product} (TFLite Micro rejects the layer)")
    try:
        real = effective_multipliers(s_in, s_w if per_channel else s_w[:1], s_out)
    except ValueError as exc:
        _fail(node, str(exc))
    multiplier, shift = _quantize_multipliers(node, real)
    act_min, act_max = _act_range(node, s_out, z_out)
    z_w = int(w.quant.zero_point[0]) if w.quant.zero_point.size else 0
    return {
        "per_channel": bool(per_channel),
        "input_offset": -z_in, "weights_offset": 0 if per_channel else -z_w,
        "output_offset": z_out,
        "output_multiplier": multiplier, "output_shift": shift, "effective_scale": real,
        "activation_min": act_min, "activation_max": act_max, "bias": bias,
        "keep_num_dims": bool(node.attrs.get("keep_num_dims") or False),
    }


FLOAT32_EXACT = 2 ** 24  # every integer of magnitude up to this is a float32


def exact_float(x: np.ndarray, input_offset: int, w: np.ndarray, reduce_axes: tuple):
    """np.float32 when every partial sum of sum_k w[c, k] * (x_k + input_offset), in any order
    (BLAS chooses its own), stays an integer below 2**24 in magnitude, so that float32 BLAS
    computes it exactly (twice the speed and half the memory of float64); else np.float64,
    exact below 2**53 (an int8 layer's sums always are). The bound, per output channel c:
    sum_k |w[c, k]| * max |x + input_offset| (`reduce_axes`: the axes of w summed for one
    channel, the output channels on axis 0)."""
    if x.size == 0 or w.size == 0:
        return np.float64
    x_peak = max(abs(int(x.min()) + int(input_offset)), abs(int(x.max()) + int(input_offset)))
    w_peak = int(np.abs(w).sum(axis=reduce_axes, dtype=np.int64).max())
    return np.float32 if x_peak * w_peak < FLOAT32_EXACT else np.float64


def _requantize_acc(acc, p, ctx):
    """acc (exact integers, float64 or int64) -> + bias, requantize, + z_out, clamp, int8."""
    acc = np.asarray(acc)
    if acc.dtype.kind == "f":
        acc = acc.astype(np.int64)
    if p["bias"] is not None:
        acc = acc + p["bias"]
    out = _mbqm(acc, p["output_multiplier"], p["output_shift"], ctx) + p["output_offset"]
    return np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)


def _spatial(x, p, kh, kw, value=0):
    """Padded input (with `value`) and output size of a strided, dilated window."""
    _, h, w, _ = x.shape
    (sh, sw), (dh, dw) = p["strides"], p["dilations"]
    pt, pl, pb, pr = p["pads"]
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError("window larger than the padded input")
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=value) \
        if any(p["pads"]) else x
    return xp, oh, ow


def _tap(xp, ky, kx, p, oh, ow):
    (sh, sw), (dh, dw) = p["strides"], p["dilations"]
    y0, x0 = ky * dh, kx * dw
    return xp[:, y0:y0 + (oh - 1) * sh + 1:sh, x0:x0 + (ow - 1) * sw + 1:sw, :]


@kernel("Conv2D")
def conv2d(node, inputs, p, ctx):
    """reference_integer_ops::ConvPerChannel: acc = sum w * (x - z_in) over the taps inside
    the image (outside taps contribute nothing: the input is padded with x - z_in = 0)."""
    x, w = inputs[0], inputs[1]
    if x.ndim != 4:
        raise ValueError(f"Conv2D input of rank {x.ndim}")
    cout, kh, kw, cin = w.shape
    groups = x.shape[3] // cin if cin else 0
    if groups < 1 or groups * cin != x.shape[3] or cout % groups:
        _fail(node, f"{x.shape[3]} input channels for weights {tuple(w.shape)} (grouped "
                    "convolutions need a multiple of the filter's input channels)")
    dtype = exact_float(x, p["input_offset"], w, (1, 2, 3))
    xo = x.astype(dtype) + dtype(p["input_offset"])
    xp, oh, ow = _spatial(xo, p, kh, kw)
    n = x.shape[0]
    wf = w.astype(dtype)
    acc = np.zeros((n * oh * ow, cout), dtype)
    for ky in range(kh):
        for kx in range(kw):
            patch = _tap(xp, ky, kx, p, oh, ow).reshape(-1, x.shape[3])
            if groups == 1:
                acc += patch @ wf[:, ky, kx, :].T
            else:  # output channel o reads input channels of group o // (cout / groups)
                wg = wf[:, ky, kx, :].reshape(groups, cout // groups, cin)
                acc += np.einsum("pgc,goc->pgo", patch.reshape(-1, groups, cin),
                                 wg).reshape(-1, cout)
    return [_requantize_acc(acc.reshape(n, oh, ow, cout), p, ctx)]


@kernel("DepthwiseConv2D")
def depthwise_conv2d(node, inputs, p, ctx):
    """reference_integer_ops::DepthwiseConvPerChannel: output channel ic * M + m reads input
    channel ic with weights [0, ky, kx, ic * M + m]."""
    x, w = inputs[0], inputs[1]
    if x.ndim != 4:
        raise ValueError(f"DepthwiseConv2D input of rank {x.ndim}")
    _, kh, kw, cout = w.shape
    cin = x.shape[3]
    if cout % cin:
        _fail(node, f"{cout} output channels for {cin} input channels")
    m = cout // cin
    if p["depth_multiplier"] not in (0, m):
        _fail(node, f"depth_multiplier {p['depth_multiplier']} but weights give {m}")
    xo = x.astype(np.int64) + p["input_offset"]
    if m > 1:
        xo = np.repeat(xo, m, axis=3)
    xp, oh, ow = _spatial(xo, p, kh, kw)
    w64 = w.astype(np.int64)
    acc = np.zeros((x.shape[0], oh, ow, cout), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += _tap(xp, ky, kx, p, oh, ow) * w64[0, ky, kx, :]
    return [_requantize_acc(acc, p, ctx)]


@kernel("FullyConnected")
def fully_connected(node, inputs, p, ctx):
    """reference_integer_ops::FullyConnected(PerChannel): rows of `accum_depth` input values;
    acc = sum (w + weights_offset) * (x + input_offset)."""
    x, w = inputs[0], inputs[1]
    units, depth = w.shape
    if x.size % depth:
        raise ValueError(f"FullyConnected input of {x.size} values, weights of depth {depth}")
    wf = w.astype(np.int64) + p["weights_offset"]
    dtype = exact_float(x, p["input_offset"], wf, (1,))
    xf = x.reshape(-1, depth).astype(dtype) + dtype(p["input_offset"])
    _batch_guard(node, ctx, p["keep_num_dims"] or xf.shape[0] == x.shape[0],
                 "FullyConnected folding the batch axis into rows")
    wf = wf.astype(dtype)
    out = _requantize_acc(xf @ wf.T, p, ctx)
    if p["keep_num_dims"]:
        if x.shape[-1] != depth:
            raise ValueError("FullyConnected keep_num_dims with a last axis other than depth")
        return [out.reshape(x.shape[:-1] + (units,))]
    return [out]


# -- elementwise arithmetic -------------------------------------------------------------------
@params("Add", "Sub")
def add_params(graph, node) -> dict:
    """CalculateOpDataAdd / Sub: inputs rescaled to twice the larger input scale with a left
    shift of 20, QuantizeMultiplierSmallerThanOneExp of each ratio."""
    s1, z1 = _per_tensor(graph, node, node.inputs[0])
    s2, z2 = _per_tensor(graph, node, node.inputs[1])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    left_shift = 20
    twice_max = 2 * float(max(s1, s2))
    real = np.array([float(s1) / twice_max, float(s2) / twice_max,
                     twice_max / ((1 << left_shift) * float(s_out))])
    if not (real[2] < 1):
        _fail(node, "output scale too small for the input scales (multiplier >= 1)")
    m, s = _quantize_multipliers(node, real)
    act_min, act_max = _act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "left_shift": left_shift,
            "input1_multiplier": int(m[0]), "input1_shift": int(s[0]),
            "input2_multiplier": int(m[1]), "input2_shift": int(s[1]),
            "output_multiplier": int(m[2]), "output_shift": int(s[2]),
            "activation_min": act_min, "activation_max": act_max}


@kernel("Add", "Sub")
def add_sub(node, inputs, p, ctx):
    """ADD / SUB: both inputs rescaled to a common scale << 20, summed, requantized, clamped."""
    a = inputs[0].astype(np.int64) + p["input1_offset"]
    b = inputs[1].astype(np.int64) + p["input2_offset"]
    sa = _mbqm(a << p["left_shift"], p["input1_multiplier"], p["input1_shift"], ctx)
    sb = _mbqm(b << p["left_shift"], p["input2_multiplier"], p["input2_shift"], ctx)
    raw = sa + sb if node.op == "Add" else sa - sb
    out = _mbqm(raw, p["output_multiplier"], p["output_shift"], ctx) + p["output_offset"]
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


@params("Mul")
def mul_params(graph, node) -> dict:
    """CalculateOpDataMul: double(s1) * double(s2) / double(s_out)."""
    s1, z1 = _per_tensor(graph, node, node.inputs[0])
    s2, z2 = _per_tensor(graph, node, node.inputs[1])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    real = float(s1) * float(s2) / float(s_out)
    m, s = _quantize_multipliers(node, real)
    act_min, act_max = _act_range(node, s_out, z_out)
    return {"input1_offset": -z1, "input2_offset": -z2, "output_offset": z_out,
            "output_multiplier": int(m), "output_shift": int(s),
            "activation_min": act_min, "activation_max": act_max}


@kernel("Mul")
def mul(node, inputs, p, ctx):
    """MUL: (x1 - z1) * (x2 - z2) requantized with one multiplier, clamped."""
    a = inputs[0].astype(np.int64) + p["input1_offset"]
    b = inputs[1].astype(np.int64) + p["input2_offset"]
    out = _mbqm(a * b, p["output_multiplier"], p["output_shift"], ctx) + p["output_offset"]
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


# -- pooling and reductions -------------------------------------------------------------------
@params("AveragePool", "MaxPool")
def pool_params(graph, node) -> dict:
    """PoolingPrepare: input and output must share their quantization; fused activation."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    if abs(float(s_in) - float(s_out)) > 1e-6 or z_in != z_out:
        _fail(node, "input and output quantization differ (TFLite Micro requires them equal)")
    act_min, act_max = _act_range(node, s_out, z_out)
    attrs = node.attrs
    return {"activation_min": act_min, "activation_max": act_max,
            "kernel_shape": [int(v) for v in attrs["kernel_shape"]],
            "strides": [int(v) for v in attrs.get("strides") or [1, 1]],
            "dilations": [1, 1],
            "pads": [int(v) for v in attrs.get("pads") or [0, 0, 0, 0]]}


@kernel("AveragePool")
def average_pool(node, inputs, p, ctx):
    """Sum of the taps inside the image divided by their count, rounded half away from zero
    with C integer division: (acc +- count / 2) / count."""
    x = inputs[0]
    kh, kw = p["kernel_shape"]
    xp, oh, ow = _spatial(x.astype(np.int64), p, kh, kw)
    ones = np.ones((1,) + x.shape[1:3] + (1,), dtype=np.int64)
    op, _, _ = _spatial(ones, p, kh, kw)
    acc = np.zeros((x.shape[0], oh, ow, x.shape[3]), dtype=np.int64)
    count = np.zeros((1, oh, ow, 1), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += _tap(xp, ky, kx, p, oh, ow)
            count += _tap(op, ky, kx, p, oh, ow)
    if np.any(count == 0):
        _fail(node, "a pooling window lies entirely in the padding")
    half = count // 2
    out = np.where(acc > 0, (acc + half) // count, -((half - acc) // count))
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


@kernel("MaxPool")
def max_pool(node, inputs, p, ctx):
    """MAX_POOL_2D on int8 values (padding never wins), clamped to the activation range."""
    x = inputs[0]
    kh, kw = p["kernel_shape"]
    # padding never wins: TFLM skips the taps outside the image
    xp, oh, ow = _spatial(x.astype(np.int16), p, kh, kw, value=-129)
    out = np.full((x.shape[0], oh, ow, x.shape[3]), -128, dtype=np.int16)
    for ky in range(kh):
        for kx in range(kw):
            np.maximum(out, _tap(xp, ky, kx, p, oh, ow), out=out)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


def _resolve_axes(node, axes, rank) -> list:
    resolved = []
    for a in np.asarray(axes).reshape(-1).tolist():
        a = int(a) + rank if int(a) < 0 else int(a)
        if not 0 <= a < rank:
            _fail(node, f"axis {a} out of range for rank {rank}")
        if a not in resolved:
            resolved.append(a)
    return resolved


@params("Mean")
def mean_params(graph, node) -> dict:
    """PrepareMeanOrSumHelper: QuantizeMultiplier(double(s_in) / double(s_out)); Eval folds
    1 / count into it (`mean_multiplier`). `count`, `mean_multiplier` and `mean_shift` are
    given when the reduced dimensions are static."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    m, s = _quantize_multipliers(node, float(s_in) / float(s_out))
    axes = graph.tensors[node.inputs[1]].data if len(node.inputs) > 1 and node.inputs[1] else None
    if axes is None:
        _fail(node, "axes are not a constant")
    out = {"multiplier": int(m), "shift": int(s), "input_zero_point": z_in,
           "output_zero_point": z_out, "axes": [int(a) for a in np.asarray(axes).reshape(-1)],
           "keep_dims": bool(node.attrs.get("keep_dims") or False)}
    shape = graph.tensors[node.inputs[0]].shape
    if shape is not None:
        axes_r = _resolve_axes(node, out["axes"], len(shape))
        dims = [shape[a] for a in axes_r]
        if all(isinstance(d, (int, np.integer)) for d in dims):
            count = int(np.prod(dims, dtype=np.int64))
            out["count"] = count
            out["mean_multiplier"], out["mean_shift"] = mean_multiplier(m, s, count)
    return out


def mean_multiplier(multiplier: int, shift: int, count: int) -> tuple:
    """QuantizedMeanOrSum's folding of 1 / count: k = min(floor(log2 count), 32, 31 + shift),
    multiplier' = (multiplier << k) // count, shift' = shift - k."""
    if count <= 0:
        return int(multiplier), int(shift)
    k = min(count.bit_length() - 1, 32, 31 + shift)
    return int((int(multiplier) << k) // count), int(shift) - k


@kernel("Mean")
def mean(node, inputs, p, ctx):
    """TFLM EvalIntegerMean -> QuantizedMeanOrSum for every int8 MEAN (also when input and
    output share their quantization; TFLM releases before 2024 took a truncating raw mean
    there): int32 sum over the axes, minus z_in * count, requantized with 1 / count folded
    into the multiplier, + z_out, clamped."""
    x = inputs[0]
    axes = _resolve_axes(node, p["axes"], x.ndim)
    _batch_guard(node, ctx, 0 not in axes, "Mean over axis 0")
    total = wrap32(x.astype(np.int64).sum(axis=tuple(axes), keepdims=True))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    m, s = mean_multiplier(p["multiplier"], p["shift"], count)
    shifted = wrap32(total - p["input_zero_point"] * count)
    out = np.clip(_mbqm(shifted, m, s, ctx) + p["output_zero_point"], -128, 127)
    if not p["keep_dims"]:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in axes])
    return [out.astype(np.int8)]


# -- softmax and activation functions ---------------------------------------------------------
_SCALED_DIFF_INTEGER_BITS = 5
_ACCUMULATION_INTEGER_BITS = 12


def calculate_input_radius(integer_bits: int, left_shift: int, total_bits: int = 31) -> int:
    """TFLite CalculateInputRadius: floor((2**ib - 1) * 2**(tb - ib) / 2**left_shift)."""
    real = 1.0 * ((1 << integer_bits) - 1) * (1 << (total_bits - integer_bits)) / (1 << left_shift) \
        if left_shift >= 0 else \
        1.0 * ((1 << integer_bits) - 1) * (1 << (total_bits - integer_bits)) * 2.0 ** -left_shift
    return math.floor(real)


@params("Softmax")
def softmax_params(graph, node) -> dict:
    """CalculateSoftmaxParams (int8 -> int8): PreprocessSoftmaxScaling with 5 integer bits,
    diff_min = -CalculateInputRadius(5, left_shift); output must be scale 1/256, zp -128."""
    s_in, _ = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    if graph.tensors[node.outputs[0]].dtype != "int8":
        _fail(node, "only int8 output is supported")
    if z_out != -128 or s_out != np.float32(1.0 / 256):
        _fail(node, f"output quantization ({s_out}, {z_out}) must be (1/256, -128)")
    beta = float(np.float32(node.attrs.get("beta", 1.0)))
    real = min(beta * float(s_in) * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    if not real > 1:
        _fail(node, f"input scale x beta {beta * float(s_in)} too small")
    m, s = _quantize_multipliers(node, real)
    return {"input_multiplier": int(m), "input_left_shift": int(s),
            "diff_min": -calculate_input_radius(_SCALED_DIFF_INTEGER_BITS, int(s))}


@kernel("Softmax")
def softmax(node, inputs, p, ctx):
    """reference_ops::Softmax<int8, int8>: gemmlowp exp of the (rescaled, Q5.26) differences to
    the row max, Q12.19 sum, reciprocal by Newton-Raphson, output (q * 256) - 128."""
    x = inputs[0].astype(np.int64)
    diff = x - x.max(axis=-1, keepdims=True)
    inside = diff >= p["diff_min"]
    rescaled = mbqm_greater_than_one(diff, p["input_multiplier"], p["input_left_shift"])
    exp = exp_on_negative_values(rescaled, _SCALED_DIFF_INTEGER_BITS)
    terms = np.where(inside, rdbpot(exp, _ACCUMULATION_INTEGER_BITS), 0)
    total = wrap32(terms.sum(axis=-1, keepdims=True))
    headroom_plus_one = clz32(total)
    bits_over_unit = _ACCUMULATION_INTEGER_BITS - headroom_plus_one
    shifted_minus_one = wrap32((((total & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF)
                               - (1 << 31))
    scale = one_over_one_plus_x_for_x_in_0_1(shifted_minus_one)
    exponent = bits_over_unit + 31 - 8
    if np.any((exponent < 0) | (exponent > 31)):
        raise ValueError("softmax reciprocal exponent out of range")
    out = rdbpot(srdhm(scale, exp), exponent) - 128
    out = np.where(inside, np.clip(out, -128, 127), -128)
    return [out.astype(np.int8)]


def _sigmoid_tanh_params(graph, node) -> dict:
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    real = float(s_in) * float(1 << (31 - 4))
    q, e = math.frexp(real)
    multiplier = int(round_half_away(q * float(1 << 31)))
    if multiplier == 2**31:  # static_cast<int32_t> of 2**31 on the devices TFLM targets
        multiplier = INT32_MIN
    return {"input_zero_point": z_in, "input_multiplier": multiplier, "input_left_shift": e,
            "input_range_radius": calculate_input_radius(4, e, 31)}


@params("Sigmoid")
def sigmoid_params(graph, node) -> dict:
    """CalculateArithmeticOpDataLogistic: input scale * 2**27 split by frexp (no
    QuantizeMultiplier normalization), radius CalculateInputRadius(4, shift); output zp -128."""
    _, z_out = _per_tensor(graph, node, node.outputs[0])
    if z_out != -128:
        _fail(node, f"output zero point {z_out} must be -128")
    return _sigmoid_tanh_params(graph, node)


@params("Tanh")
def tanh_params(graph, node) -> dict:
    """TanhPrepare (int8): same input scaling as Logistic; the output is read as scale 1/128,
    zero point 0 whatever the tensor says (TFLM does not check it)."""
    return _sigmoid_tanh_params(graph, node)


def _q4_input(x, p, ctx):
    """(x - z_in, radius, x - z_in rescaled to Q4.27 by MultiplyByQuantizedMultiplier)."""
    inp = x.astype(np.int64) - p["input_zero_point"]
    m, shift = p["input_multiplier"], p["input_left_shift"]
    if m >= 0 and -31 <= shift <= 30:
        q4 = _mbqm(inp, m, shift, ctx)
    else:  # out of MultiplyByQuantizedMultiplier's domain: only saturated outputs remain
        q4 = rdbpot(srdhm(wrap32(inp << max(shift, 0)), m), min(max(-shift, 0), 31))
    return inp, p["input_range_radius"], q4


@kernel("Sigmoid")
def sigmoid(node, inputs, p, ctx):
    """reference_integer_ops::Logistic (int8): saturate outside the input radius, else gemmlowp
    logistic in Q4.27, output RoundingDivideByPOT(., 23) - 128."""
    inp, radius, q4 = _q4_input(inputs[0], p, ctx)
    out = np.clip(rdbpot(fixed_logistic(q4, 4), 31 - 8) - 128, -128, 127)
    out = np.where(inp <= -radius, -128, np.where(inp >= radius, 127, out))
    return [out.astype(np.int8)]


@kernel("Tanh")
def tanh(node, inputs, p, ctx):
    """reference_integer_ops::Tanh (int8): gemmlowp tanh in Q4.27, RoundingDivideByPOT(., 24)."""
    inp, radius, q4 = _q4_input(inputs[0], p, ctx)
    out = np.clip(rdbpot(fixed_tanh(q4, 4), 31 - 7), -128, 127)
    out = np.where(inp <= -radius, -128, np.where(inp >= radius, 127, out))
    return [out.astype(np.int8)]


@params("HardSwish")
def hard_swish_params(graph, node) -> dict:
    """HardSwishPrepare: float32 ratios hires_input_scale / s_out and hires / (3 / 32768),
    quantized then downscaled to 16-bit multipliers."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    hires = np.float32(1.0 / 128.0) * s_in
    out_real = float(np.float32(hires / s_out))
    relu_real = float(np.float32(hires / np.float32(3.0 / 32768.0)))
    m_out, e_out = _quantize_multipliers(node, out_real)
    m_rel, e_rel = _quantize_multipliers(node, relu_real)
    if int(e_out) > 0:
        _fail(node, "output scale too small for the input scale (TFLite Micro rejects it)")
    return {"input_zero_point": z_in, "output_zero_point": z_out,
            "output_multiplier_fixedpoint_int16": downscale_int32_to_int16_multiplier(int(m_out)),
            "output_multiplier_exponent": int(e_out),
            "reluish_multiplier_fixedpoint_int16": downscale_int32_to_int16_multiplier(int(m_rel)),
            "reluish_multiplier_exponent": int(e_rel)}


@kernel("HardSwish")
def hard_swish(node, inputs, p, ctx):
    """reference_ops::HardSwish (quantized): 16-bit fixed point, see hard_swish.h."""
    value = _wrap16(inputs[0].astype(np.int64) - p["input_zero_point"])
    hires = _wrap16(value * 128)
    preshift = srdhm16(hires, p["output_multiplier_fixedpoint_int16"])
    rel = hires
    e = p["reluish_multiplier_exponent"]
    if e > 0:
        rel = saturating_left_shift16(rel, e - 1)
    rel = srdhm16(rel, p["reluish_multiplier_fixedpoint_int16"])
    if e > 0:
        rel = saturating_left_shift16(rel, 1)
    if e < 0:
        rel = rdbpot(rel, -e)
    rel = (rel + (1 << 15)) >> 1
    pre = sdhm16(rel, preshift)
    out = _wrap16(rdbpot(pre, -p["output_multiplier_exponent"]) + p["output_zero_point"])
    return [np.clip(out, -128, 127).astype(np.int8)]


@params("Relu")
def relu_params(graph, node) -> dict:
    """CalculateReluOpData<int8>: multiplier of double(float32(s_in / s_out)); clamp from
    z_out + roundf(0 / s_out)."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    m, s = _quantize_multipliers(node, float(np.float32(s_in / s_out)))
    return {"input_zero_point": z_in, "output_zero_point": z_out,
            "output_multiplier": int(m), "output_shift": int(s),
            "activation_min": max(-128, z_out), "activation_max": 127}


@kernel("Relu")
def relu(node, inputs, p, ctx):
    """RELU (TFLM ReluQuantized): x - z_in requantized to the output, plus z_out, clamped."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    out = p["output_zero_point"] + _mbqm(v, p["output_multiplier"], p["output_shift"], ctx)
    return [np.clip(out, p["activation_min"], p["activation_max"]).astype(np.int8)]


@params("Relu6")
def relu6_params(graph, node) -> dict:
    """Relu6Prepare (int8): clamps the raw values to [z_in, z_in + round(6 / s_in)] (the input's
    quantization; the output tensor's is not read)."""
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    six = int(round_half_away(np.float32(6.0) / s_in)) + z_in
    six = min(max(six, -128), 127)
    return {"zero": z_in, "six": six}


@kernel("Relu6")
def relu6(node, inputs, p, ctx):
    """RELU6 (int8): the raw values clamped to the input's [0, 6] (no requantization)."""
    x = inputs[0]
    out = np.where(x > p["six"], p["six"], np.where(x < p["zero"], p["zero"], x))
    return [out.astype(np.int8)]


# -- quantize / dequantize --------------------------------------------------------------------
@params("Quantize")
def quantize_params(graph, node) -> dict:
    """PrepareQuantizeReference: float input -> AffineQuantize with the output's (scale, zp);
    integer input -> Requantize with QuantizeMultiplier(double(s_in) / double(s_out))."""
    out_t = graph.tensors[node.outputs[0]]
    if out_t.quant is None or out_t.quant.scale.size != 1:
        _fail(node, "output must be quantized per tensor")
    s_out, z_out = _per_tensor(graph, node, node.outputs[0])
    result = {"scale": float(s_out), "zero_point": z_out}
    if graph.tensors[node.inputs[0]].dtype in ("int8", "uint8", "int16"):
        s_in, z_in = _per_tensor(graph, node, node.inputs[0])
        m, s = _quantize_multipliers(node, float(s_in) / float(s_out))
        result.update({"input_zero_point": z_in, "output_multiplier": int(m),
                       "output_shift": int(s)})
    return result


def _float_to_int32_x86(v):
    """static_cast<int32_t> of floats as x86 does it: out of range or NaN -> INT32_MIN."""
    v = np.asarray(v, dtype=np.float64)
    ok = np.isfinite(v) & (v >= -2.0**31) & (v < 2.0**31)
    return np.where(ok, np.where(ok, v, 0).astype(np.int64), INT32_MIN)


@kernel("Quantize")
def quantize(node, inputs, p, ctx):
    """QUANTIZE: float -> int8 (round half away), or int8 -> int8 requantization."""
    x = inputs[0]
    if x.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            q = round_half_away(x.astype(np.float32) / np.float32(p["scale"]))
        out = wrap32(_float_to_int32_x86(q) + p["zero_point"])
    else:
        out = _mbqm(x.astype(np.int64) - p["input_zero_point"], p["output_multiplier"],
                    p["output_shift"], ctx) + p["zero_point"]
    return [np.clip(out, -128, 127).astype(np.int8)]


@params("Dequantize")
def dequantize_params(graph, node) -> dict:
    s_in, z_in = _per_tensor(graph, node, node.inputs[0])
    return {"scale": float(s_in), "zero_point": z_in}


@kernel("Dequantize")
def dequantize(node, inputs, p, ctx):
    """float32(double(scale) * (x - zp))."""
    v = inputs[0].astype(np.float64) - p["zero_point"]
    return [(p["scale"] * v).astype(np.float32)]


# -- data movement ----------------------------------------------------------------------------
@params("Concat")
def concat_params(graph, node) -> dict:
    """ConcatenationPrepare (int8): every input must carry the output's scale and zero point
    and there is no fused activation; Eval copies the raw int8 values. TFLite Micro has no
    requantizing int8 concatenation, so a model needing one is refused, as TFLM refuses it."""
    if _activation(node) != "NONE":
        _fail(node, "fused activation on CONCATENATION (TFLite Micro refuses it)")
    out_q = _per_tensor(graph, node, node.outputs[0])
    for name in node.inputs:
        if name is not None and _per_tensor(graph, node, name) != out_q:
            _fail(node, f"input {name!r} is quantized {_per_tensor(graph, node, name)}, the "
                        f"output {out_q}: TFLite Micro requires them equal (no requantization)")
    return {"axis": int(node.attrs.get("axis", 0))}


@kernel("Concat")
def concat(node, inputs, p, ctx):
    """CONCATENATION of int8 inputs that share the output's parameters (no requantization)."""
    rank = inputs[0].ndim
    axis = p["axis"] + rank if p["axis"] < 0 else p["axis"]
    _batch_guard(node, ctx, axis != 0, "Concat along axis 0")
    return [np.concatenate(inputs, axis=axis).astype(np.int8, copy=False)]


@params("Pad", "PadV2")
def pad_params(graph, node) -> dict:
    """PAD / PADV2 (int8): the pad value is the constant input, else the output zero point."""
    _, z_out = _per_tensor(graph, node, node.outputs[0])
    value_name = node.inputs[2] if len(node.inputs) > 2 else None
    if value_name is not None:
        data = graph.tensors[value_name].data
        if data is None:
            _fail(node, "pad value is not a constant")
        value = int(np.asarray(data).reshape(-1)[0])
    else:
        value = z_out
    return {"pad_value": value}


@kernel("Pad", "PadV2")
def pad(node, inputs, p, ctx):
    """PAD / PADV2: pad with the pad value (the output zero point by default)."""
    x = inputs[0]
    paddings = np.asarray(inputs[1], dtype=np.int64).reshape(-1, 2)
    if paddings.shape[0] != x.ndim or np.any(paddings < 0):
        raise ValueError(f"Pad paddings {paddings.tolist()} for rank {x.ndim}")
    _batch_guard(node, ctx, not paddings[0].any(), "Pad of axis 0")
    return [np.pad(x, [tuple(r) for r in paddings.tolist()], constant_values=p["pad_value"])]


@kernel("Maximum", "Minimum")
def maximum_minimum(node, inputs, p, ctx):
    """MAXIMUM / MINIMUM (int8): compares the raw values, as TFLM does (the operands and the
    output share one quantization; the quantizer gives them the same)."""
    fn = np.maximum if node.op == "Maximum" else np.minimum
    return [np.asarray(fn(inputs[0], inputs[1]), dtype=np.int8)]


def _per_sample(node, fn, x, ctx):
    """Run a shape op on one sample; its leading 1 becomes the batch (see int_executor)."""
    if ctx.batch == 1:
        return fn(x)
    y1 = fn(x[:1])
    if y1.ndim == 0 or y1.shape[0] != 1:
        _fail(node, f"result {tuple(y1.shape)} of one sample does not start with a batch axis of "
                    f"1: cannot run a batch of {ctx.batch} (run the samples one at a time)")
    return x.reshape((x.shape[0],) + y1.shape[1:])


@params("Reshape")
def reshape_params(graph, node) -> dict:
    """The output tensor's shape (dynamic dimensions as -1): TFLM's fallback when the node has
    neither a shape input nor `new_shape`."""
    shape = graph.tensors[node.outputs[0]].shape
    return {"output_shape": None if shape is None else
            [int(d) if isinstance(d, (int, np.integer)) else -1 for d in shape]}


@kernel("Reshape", "Squeeze")
def reshape(node, inputs, p, ctx):
    """Same bytes, new shape (the shape input, else `new_shape`, else the output tensor's)."""
    float_kernel = FLOAT_KERNELS[node.op]
    rest = list(inputs[1:])
    if node.op == "Reshape" and (not rest or rest[0] is None) and not node.attrs.get("new_shape") \
            and p.get("output_shape") is not None:
        rest = [np.asarray(p["output_shape"], dtype=np.int64)]
    return [_per_sample(node, lambda a: float_kernel(node, [a] + rest, [None])[0],
                        inputs[0], ctx)]


@kernel("Transpose")
def transpose(node, inputs, p, ctx):
    """TRANSPOSE: the values moved, parameters kept."""
    y = FLOAT_KERNELS["Transpose"](node, inputs, [None])[0]
    perm = inputs[1] if len(inputs) > 1 and inputs[1] is not None else node.attrs.get("perm")
    first = int(np.asarray(perm).reshape(-1)[0]) if perm is not None else inputs[0].ndim - 1
    _batch_guard(node, ctx, first == 0, "Transpose moving axis 0")
    return [np.ascontiguousarray(y)]


@kernel("Gather")
def gather(node, inputs, p, ctx):
    """GATHER: the values taken, parameters kept."""
    axis = int(node.attrs.get("axis", 0) or 0)
    _batch_guard(node, ctx, axis % inputs[0].ndim != 0, "Gather along axis 0")
    return [FLOAT_KERNELS["Gather"](node, inputs, [None])[0]]


@kernel("StridedSlice")
def strided_slice(node, inputs, p, ctx):
    """STRIDED_SLICE: the values taken (TFLite Micro copies them: input and output share one
    quantization), evaluated per sample for a batch (the slice of axis 0 is one sample's)."""
    def one(a):
        return FLOAT_KERNELS["StridedSlice"](node, [a] + list(inputs[1:]), [None])[0]

    if ctx.batch == 1:
        return [np.ascontiguousarray(one(inputs[0]))]
    parts = [one(inputs[0][i:i + 1]) for i in range(ctx.batch)]
    if parts[0].ndim == 0 or parts[0].shape[0] != 1:
        _fail(node, f"the slice of one sample has shape {tuple(parts[0].shape)}, not a batch "
                    f"axis of 1: cannot run a batch of {ctx.batch} (run the samples one at a time)")
    return [np.concatenate(parts)]


for _op in ("Squeeze", "Transpose", "Gather", "Maximum", "Minimum", "StridedSlice"):
    INT_PARAMS[_op] = _no_params


# LEAKY_RELU, PRELU, BATCH_MATMUL and RSQRT live apart (the file is big enough)
from . import int_kernels_math as _int_kernels_math  # noqa: E402,F401  (registers them)
from . import int_kernels_spatial as _spatial_kernels  # noqa: E402,F401  (resize, split...)
