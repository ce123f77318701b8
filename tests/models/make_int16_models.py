"""One-time generator (not a test): the small 16x8 test models in `tests/models/int16/`.

16x8 means int16 activations (symmetric, zero point 0) with int8 weights, TFLite's
`EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8` mode. TensorFlow must never be a
dependency of qconvert or of its tests, so this script runs once, in a separate virtualenv with
TensorFlow 2.20 (and `tflite-micro`, to check each model), and its outputs are committed:

    /work/venvs/tf/bin/python tests/models/make_int16_models.py

Each model is a small `tf.function` of random (seeded) weights, converted by the TFLite
converter with `optimizations = [DEFAULT]`, a representative dataset of 32 seeded normal samples
and `supported_ops = [EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]` (no float
fallback: an op the converter cannot make 16x8 fails the script). Inputs and outputs are int16
unless the model's name ends in `_float_io` (float32 at the boundary: QUANTIZE float -> int16 at
the input, DEQUANTIZE int16 -> float at the output). `fc_int32_bias` is converted with int32
biases (`_experimental_full_integer_quantization_bias_type = tf.int32`), every other conv /
FC / transpose conv carries TFLite's default int64 16x8 bias; `fc_per_tensor_16x8` has
per-tensor fully connected weights (`_experimental_disable_per_channel_quantization_for_dense_
layers`), the others the converter's per-channel ones.

After writing each model the script runs it in the TFLite Micro interpreter on a random int16
input, and prints its operators, so a model an op of which TFLite Micro cannot run is never
committed. The converter cannot make a mixed int8 / int16 model (what `--int16-layers` writes),
so this script converts its three parts (`mixed_head_int8`, `mixed_body_16x8`,
`mixed_tail_int8`, kept for `make_mixed_model.py`, which joins them with QUANTIZE int8 <->
int16 into `mixed_int8_int16.tflite`, using qconvert's own reader and writer). The models of
`FLOAT_TOO` are also written unquantized, to `int16/float/`, for `quantize --activations int16`.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import tensorflow as tf

OUT = Path(__file__).resolve().parent / "int16"
RNG = np.random.default_rng(1615)


def weight(*shape, scale=None):
    """A seeded random weight of `shape` with a fan-in-like scale."""
    fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
    return tf.constant(RNG.normal(0, s, shape).astype(np.float32))


def conv_net(x):
    """CONV_2D (SAME, RELU), CONV_2D (stride 2, VALID, RELU6, no bias), DEPTHWISE_CONV_2D
    (multiplier 2, RELU6), CONV_2D dilated 2, MAX_POOL_2D, AVERAGE_POOL_2D, RESHAPE,
    FULLY_CONNECTED, SOFTMAX."""
    w1, b1 = weight(3, 3, 3, 8), weight(8, scale=0.3)
    y = tf.nn.relu(tf.nn.conv2d(x, w1, 1, "SAME") + b1)
    y = tf.nn.relu6(tf.nn.conv2d(y, weight(3, 3, 8, 8), 2, "VALID"))
    dw, db = weight(3, 3, 8, 2), weight(16, scale=0.2)
    y = tf.nn.relu6(tf.nn.depthwise_conv2d(y, dw, [1, 1, 1, 1], "SAME") + db)
    y = tf.nn.conv2d(y, weight(3, 3, 16, 8), 1, "SAME", dilations=2) + weight(8, scale=0.1)
    y = tf.nn.max_pool2d(y, 2, 1, "SAME")
    y = tf.nn.avg_pool2d(y, 3, 2, "SAME")
    y = tf.reshape(y, [1, -1])
    y = tf.matmul(y, weight(int(y.shape[1]), 10)) + weight(10, scale=0.2)
    return tf.nn.softmax(y)


def eltwise_net(x):
    """ADD (with RELU), SUB, MUL, CONCATENATION, LOGISTIC, TANH, MEAN, PAD, TRANSPOSE."""
    a = tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME") + weight(6, scale=0.1)
    b = tf.nn.conv2d(x, weight(3, 3, 4, 6), 1, "SAME")
    s = tf.nn.relu(a + b)
    d = a - 0.5 * b
    m = a * b
    c = tf.concat([s, d, m], axis=3)
    g = tf.sigmoid(c[..., :9]) * tf.tanh(c[..., 9:])
    p = tf.pad(g, [[0, 0], [1, 2], [0, 1], [0, 0]])
    t = tf.transpose(p, [0, 3, 1, 2])
    return tf.reduce_mean(t, axis=[2, 3], keepdims=True), tf.tanh(d)


def misc_net(x):
    """LEAKY_RELU, MAXIMUM, MINIMUM, STRIDED_SLICE, RESIZE_NEAREST_NEIGHBOR, SPLIT, SQUEEZE,
    RELU and RELU6 (standalone), TRANSPOSE_CONV, BATCH_MATMUL."""
    y = tf.nn.leaky_relu(tf.nn.conv2d(x, weight(3, 3, 4, 8), 1, "SAME"), alpha=0.2)
    u, v = tf.split(y, 2, axis=3)
    z = tf.maximum(u, v) + tf.minimum(u, 0.25 * v)
    z = tf.nn.relu(tf.concat([z, u], axis=3))
    z = tf.image.resize(z[:, 1:7:2, :, :], [6, 8], method="nearest")
    t = tf.nn.conv2d_transpose(z, weight(3, 3, 4, 8), [1, 12, 16, 4], 2, "SAME")
    t = tf.nn.relu6(tf.concat([t, t * -0.5], axis=3))
    q = tf.squeeze(tf.reduce_mean(t, axis=[1], keepdims=True), axis=1)
    return tf.matmul(q, q, transpose_b=True)


def fc_net(x):
    """FULLY_CONNECTED (RELU) and FULLY_CONNECTED, a RESHAPE between; converted with int32 bias."""
    y = tf.nn.relu(tf.matmul(x, weight(24, 32)) + weight(32, scale=0.2))
    y = tf.reshape(y, [1, 4, 8])
    y = tf.reshape(y, [1, 32])
    return tf.matmul(y, weight(32, 5)) + weight(5, scale=0.5)


def float_io_net(x):
    """QUANTIZE float -> int16, CONV_2D, LOGISTIC, DEQUANTIZE int16 -> float."""
    y = tf.nn.conv2d(x, weight(3, 3, 3, 4), 1, "SAME") + weight(4, scale=0.1)
    return tf.sigmoid(y), y


def mixed_head(x):
    """int8 part of the mixed model: CONV_2D (RELU)."""
    return tf.nn.relu(tf.nn.conv2d(x, weight(3, 3, 3, 8), 1, "VALID") + weight(8, scale=0.2))


def mixed_body(x):
    """16x8 part of the mixed model: DEPTHWISE_CONV_2D, CONV_2D, ADD (residual), AVERAGE_POOL_2D."""
    d = tf.nn.depthwise_conv2d(x, weight(3, 3, 8, 1), [1, 1, 1, 1], "SAME") + weight(8, scale=0.1)
    y = tf.nn.relu(tf.nn.conv2d(d, weight(1, 1, 8, 8), 1, "SAME") + weight(8, scale=0.1))
    return tf.nn.avg_pool2d(x + y, 2, 2, "VALID")


def mixed_tail(x):
    """int8 part of the mixed model: RESHAPE, FULLY_CONNECTED, SOFTMAX."""
    y = tf.reshape(x, [1, -1])
    return tf.nn.softmax(tf.matmul(y, weight(int(y.shape[1]), 6)) + weight(6, scale=0.3))


def rsqrt_net(x):
    """RELU, ADD of a constant, RSQRT (the inverse standard deviation of a normalisation)."""
    return tf.math.rsqrt(tf.nn.relu(x) + 0.25)


def abs_net(x):
    """CONV_2D, ABS."""
    return tf.abs(tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME") + weight(6, scale=0.2))


def squared_difference_net(x):
    """CONV_2D, MEAN, SQUARED_DIFFERENCE (broadcast: each value against its channel's mean)."""
    y = tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME")
    return tf.math.squared_difference(y, tf.reduce_mean(y, axis=[1, 2], keepdims=True))


def sum_net(x):
    """CONV_2D, SUM over H and W (kept) and over the channels (dropped)."""
    y = tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME")
    return tf.reduce_sum(y, axis=[1, 2], keepdims=True), tf.reduce_sum(y, axis=3)


def slice_net(x):
    """CONV_2D, SLICE (begin and size)."""
    y = tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME")
    return tf.slice(y, [0, 1, 2, 1], [1, 4, 5, 4])


def pack_net(x):
    """CONV_2D, STRIDED_SLICE, PACK (a new axis 1)."""
    y = tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME")
    return tf.stack([y[..., 0], y[..., 3], y[..., 5]], axis=1)


def unpack_net(x):
    """CONV_2D, UNPACK along the channels (two of the six outputs read)."""
    parts = tf.unstack(tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME"), axis=3)
    return parts[1], parts[4]


def reverse_net(x):
    """CONV_2D, REVERSE_V2 along W."""
    return tf.reverse(tf.nn.conv2d(x, weight(1, 1, 4, 6), 1, "SAME"), [2])


# name: (function, input shape, input std, int32 bias, float io); a name starting with
# "mixed_" and ending in "_int8" is converted to plain int8 (a part of the mixed model)
MODELS = {
    "conv_16x8": (conv_net, [1, 12, 12, 3], 1.0, False, False),
    "eltwise_16x8": (eltwise_net, [1, 6, 5, 4], 1.0, False, False),
    "misc_16x8": (misc_net, [1, 6, 8, 4], 1.0, False, False),
    "fc_int32_bias": (fc_net, [1, 24], 2.0, True, False),
    "conv_16x8_float_io": (float_io_net, [1, 8, 8, 3], 1.0, False, True),
    "fc_per_tensor_16x8": (fc_net, [1, 24], 2.0, False, False),
    "mixed_head_int8": (mixed_head, [1, 10, 10, 3], 1.0, False, False),
    "mixed_body_16x8": (mixed_body, [1, 8, 8, 8], 0.7, False, False),
    "mixed_tail_int8": (mixed_tail, [1, 4, 4, 8], 1.0, False, False),
    "rsqrt_16x8": (rsqrt_net, [1, 6, 8, 4], 1.0, False, False),
    "abs_16x8": (abs_net, [1, 6, 8, 4], 1.0, False, False),
    "squared_difference_16x8": (squared_difference_net, [1, 6, 8, 4], 1.0, False, False),
    "sum_16x8": (sum_net, [1, 6, 8, 4], 1.0, False, False),
    "slice_16x8": (slice_net, [1, 6, 8, 4], 1.0, False, False),
    "pack_16x8": (pack_net, [1, 6, 8, 4], 1.0, False, False),
    "unpack_16x8": (unpack_net, [1, 6, 8, 4], 1.0, False, False),
    "reverse_16x8": (reverse_net, [1, 6, 8, 4], 1.0, False, False),
}
# models also written as float TFLite (float/<name>.tflite, the converter without
# quantization) for `qconvert quantize --activations int16` to quantize
FLOAT_TOO = ("rsqrt_16x8", "abs_16x8", "squared_difference_16x8", "sum_16x8", "misc_16x8",
             "slice_16x8", "pack_16x8", "unpack_16x8", "reverse_16x8")


def convert_float(fn, shape) -> bytes:
    """The float TFLite flatbuffer of `fn` on inputs of `shape`."""
    concrete = tf.function(fn, input_signature=[tf.TensorSpec(shape, tf.float32)],
                           autograph=False).get_concrete_function()
    return tf.lite.TFLiteConverter.from_concrete_functions([concrete]).convert()


def convert(fn, shape, std, int32_bias, float_io, int8=False, per_tensor_fc=False) -> bytes:
    """The 16x8 (or with `int8`, full int8) TFLite flatbuffer of `fn` on inputs of `shape`."""
    concrete = tf.function(fn, input_signature=[tf.TensorSpec(shape, tf.float32)],
                           autograph=False).get_concrete_function()
    data = np.random.default_rng(7).normal(0, std, [32] + shape).astype(np.float32)

    def representative():
        for sample in data:
            yield [sample]

    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if int8 else
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    if not float_io:
        converter.inference_input_type = tf.int8 if int8 else tf.int16
        converter.inference_output_type = tf.int8 if int8 else tf.int16
    if int32_bias:
        converter._experimental_full_integer_quantization_bias_type = tf.int32
    if per_tensor_fc:
        converter._experimental_disable_per_channel_quantization_for_dense_layers = True
    return converter.convert()


def operators(model_bytes: bytes) -> list:
    """Builtin operator names of the model's main subgraph, in order."""
    import tflite

    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    model = tflite.Model.GetRootAsModel(model_bytes, 0)
    graph = model.Subgraphs(0)
    codes = [max(model.OperatorCodes(i).BuiltinCode(),
                 model.OperatorCodes(i).DeprecatedBuiltinCode())
             for i in range(model.OperatorCodesLength())]
    return [names[codes[graph.Operators(i).OpcodeIndex()]] for i in range(graph.OperatorsLength())]


def check_tflm(model_bytes: bytes) -> None:
    """Run the model once in TFLite Micro on a random input (fails loudly if it cannot)."""
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(model_bytes)
    d = interp.get_input_details(0)
    if np.dtype(d["dtype"]) == np.float32:
        x = np.random.default_rng(0).normal(0, 1, d["shape"]).astype(np.float32)
    else:
        info = np.iinfo(d["dtype"])
        x = np.random.default_rng(0).integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"])
    interp.set_input(x, 0)
    interp.invoke()
    interp.get_output(0)


def main() -> int:
    OUT.mkdir(exist_ok=True)
    only = set(sys.argv[1:])
    for name, (fn, shape, std, int32_bias, float_io) in MODELS.items():
        if only and name not in only:
            continue
        global RNG
        RNG = np.random.default_rng(zlib.crc32(name.encode()))  # weights seeded per model
        int8 = name.startswith("mixed_") and name.endswith("_int8")
        model = convert(fn, shape, std, int32_bias, float_io, int8,
                        per_tensor_fc=name.startswith("fc_per_tensor"))
        check_tflm(model)
        path = OUT / f"{name}.tflite"
        path.write_bytes(model)
        print(f"{path.name}: {len(model)} bytes: {' '.join(operators(model))}")
        if name in FLOAT_TOO:
            RNG = np.random.default_rng(zlib.crc32(name.encode()))  # the same weights
            (OUT / "float").mkdir(exist_ok=True)
            path = OUT / "float" / f"{name}.tflite"
            path.write_bytes(convert_float(fn, shape))
            print(f"float/{path.name}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
