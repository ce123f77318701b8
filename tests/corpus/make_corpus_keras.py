"""Generate the TensorFlow half of the real-model corpus: Keras applications as float .tflite.

Run once with TensorFlow (not a test dependency), from the repository root:

    /work/venvs/tf/bin/python tests/corpus/make_corpus_keras.py

It writes `tests/models/corpus/<name>.tflite` and `<name>_calib.npy`. The architectures are Keras
applications (Apache-2.0) instantiated with `weights=None` (nothing downloaded): MobileNet V1 at
alpha 0.25 on 96x96x3 (the MLPerf Tiny visual-wake-words model), MobileNetV2 alpha 0.35 and
MobileNetV3-Small (minimalistic and not), cut after an inner block and given a small head so
each file stays small; plus a ResNet-8 (the MLPerf Tiny image classification design), a DS-CNN
keyword spotter (MLPerf Tiny KWS design, narrower) and a streaming keyword spotter whose frame
buffer lives in a resource variable (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE / CALL_ONCE),
all written here in Keras / tf. Weights are random; BatchNorm statistics (mean, var, gamma,
beta) are randomised, and a few ResNet-8 channels get gamma ~ 0 (dead after BN folding). The
TFLite converter folds BatchNorm into the convolutions. Two models also get an int8 version made
by the TFLite converter with representative data (`*_int8_tflc.tflite`).

Calibration data is random with realistic ranges (images in [-1, 1] with smooth spatial
structure, MFCC-like features), 4 or 8 samples stored as float16 (exact in float32): it
exercises the quantizer, it does not stand for a real data set.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "models" / "corpus"


def randomise_batchnorm(model, seed, dead=0):
    """Random gamma, beta, moving mean and variance in every BatchNormalization layer; the first
    `dead` channels of the first one get gamma 1e-8."""
    rng = np.random.default_rng(seed)
    first = True
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            c = layer.get_weights()[0].shape[0]
            gamma = rng.uniform(0.4, 1.6, c)
            if first and dead:
                gamma[:dead] = 1e-8
            first = False
            layer.set_weights([gamma.astype(np.float32),
                               (rng.standard_normal(c) * 0.3).astype(np.float32),
                               (rng.standard_normal(c) * 0.5).astype(np.float32),
                               rng.uniform(0.25, 1.75, c).astype(np.float32)])


def smooth_images(rng, n, h, w, c):
    """Random NHWC images with spatial structure in [-1, 1]: low-resolution noise upsampled."""
    low = rng.standard_normal((n, max(h // 8, 1), max(w // 8, 1), c)).astype(np.float32)
    img = tf.image.resize(low, (h, w), method="bilinear").numpy()
    img = img + 0.1 * rng.standard_normal((n, h, w, c)).astype(np.float32)
    return np.tanh(img).astype(np.float32)


def mfcc_like(rng, n, frames, coeffs):
    """MFCC-like features [n, frames, coeffs]: coefficient 0 large, higher ones smaller."""
    scale = (20.0 / (1.0 + np.arange(coeffs))).astype(np.float32)
    base = rng.standard_normal((n, 1, coeffs)).astype(np.float32)
    x = base + 0.5 * rng.standard_normal((n, frames, coeffs)).astype(np.float32)
    return (x * scale).astype(np.float32)


# -- architectures --------------------------------------------------------------------------------
def vww_mobilenet_v1():
    """MobileNet V1, alpha 0.25, 96x96x3, 2 classes: the MLPerf Tiny visual wake words model."""
    return keras.applications.MobileNet(input_shape=(96, 96, 3), alpha=0.25, weights=None,
                                        classes=2, dropout=0.0)


def _cut(base, layer_name, classes):
    x = base.get_layer(layer_name).output
    x = layers.GlobalAveragePooling2D()(x)
    out = layers.Dense(classes, activation="softmax")(x)
    return keras.Model(base.input, out)


def mobilenet_v2():
    """Keras MobileNetV2 alpha 0.35 on 64x64x3, cut after block 12 (96*0.35 channels)."""
    base = keras.applications.MobileNetV2(input_shape=(64, 64, 3), alpha=0.35, weights=None,
                                          include_top=False)
    return _cut(base, "block_12_add", 10)


def mobilenet_v3(minimalistic):
    """Keras MobileNetV3-Small alpha 0.5 on 64x64x3 (hard-swish and squeeze-excite unless
    minimalistic), cut after its 48-channel stage (the fourth residual add)."""
    base = keras.applications.MobileNetV3Small(input_shape=(64, 64, 3), alpha=0.5,
                                               weights=None, include_top=False,
                                               minimalistic=minimalistic,
                                               include_preprocessing=False)
    names = [layer.name for layer in base.layers if layer.name.endswith("_add")]
    return _cut(base, names[3], 10)


def resnet8():
    """ResNet-8 as in MLPerf Tiny image classification: 16/32/64-filter residual stacks."""
    inp = keras.Input((32, 32, 3))
    x = layers.Conv2D(16, 3, padding="same", use_bias=True)(inp)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        y = layers.Conv2D(filters, 3, strides=stride, padding="same")(x)
        y = layers.BatchNormalization()(y)
        y = layers.Activation("relu")(y)
        y = layers.Conv2D(filters, 3, padding="same")(y)
        y = layers.BatchNormalization()(y)
        if stride != 1:
            x = layers.Conv2D(filters, 1, strides=stride)(x)
        x = layers.Activation("relu")(layers.Add()([x, y]))
    x = layers.AveragePooling2D(pool_size=x.shape[1:3])(x)
    x = layers.Flatten()(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax")(x))


def ds_cnn():
    """DS-CNN keyword spotter (MLPerf Tiny KWS design, 48 filters): 49x10 MFCC in, 12 out."""
    inp = keras.Input((49, 10, 1))
    x = layers.Conv2D(48, (10, 4), strides=(2, 2), padding="same")(inp)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    for _ in range(4):
        x = layers.DepthwiseConv2D(3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.Conv2D(48, 1)(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
    x = layers.AveragePooling2D(pool_size=x.shape[1:3])(x)
    x = layers.Flatten()(x)
    return keras.Model(inp, layers.Dense(12, activation="softmax")(x))


class StreamingKws(tf.Module):
    """Streaming keyword spotter: one MFCC frame [1, 1, 40] per call; the previous two frames
    live in a resource variable that every call reads and overwrites; a conv over the 3-frame
    window, a dense layer, 12 logits."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.state = tf.Variable(tf.zeros([1, 2, 40]), name="frame_buffer")
        self.w1 = tf.constant(rng.standard_normal((3, 5, 1, 8)).astype(np.float32) * 0.05)
        self.b1 = tf.constant(rng.standard_normal(8).astype(np.float32) * 0.1)
        self.w2 = tf.constant(rng.standard_normal((36 * 8, 12)).astype(np.float32) * 0.05)
        self.b2 = tf.constant(rng.standard_normal(12).astype(np.float32) * 0.1)

    @tf.function(input_signature=[tf.TensorSpec([1, 1, 40], tf.float32, name="frame")])
    def __call__(self, frame):
        window = tf.concat([self.state, frame], axis=1)
        self.state.assign(window[:, 1:, :])
        h = tf.nn.conv2d(tf.reshape(window, [1, 3, 40, 1]), self.w1, 1, "VALID") + self.b1
        h = tf.reshape(tf.nn.relu(h), [1, 36 * 8])
        return tf.matmul(h, self.w2) + self.b2


# -- conversion -----------------------------------------------------------------------------------
def to_tflite(model, int8_data=None):
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8_data is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([s[None]] for s in int8_data)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()


def save(name, blob, calib=None):
    (OUT / f"{name}.tflite").write_bytes(blob)
    if calib is not None:
        np.save(OUT / f"{name}_calib.npy", calib.astype(np.float16))
    print(f"{name}: {len(blob)} bytes")


def check_float(blob, model, x):
    """The float .tflite agrees with Keras on one sample (LiteRT-compatible TF interpreter)."""
    it = tf.lite.Interpreter(model_content=blob)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x[:1])
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, model(x[:1]).numpy(), rtol=1e-4, atol=1e-5)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(100)
    img96 = smooth_images(rng, 4, 96, 96, 3)
    img64 = smooth_images(rng, 4, 64, 64, 3)
    img32 = smooth_images(rng, 8, 32, 32, 3)
    mfcc = mfcc_like(rng, 8, 49, 10)[..., None]
    jobs = [("vww_mobilenet_v1", vww_mobilenet_v1, img96, 11, 0, True),
            ("keras_mobilenet_v2", mobilenet_v2, img64, 12, 0, False),
            ("keras_mobilenet_v3_small", lambda: mobilenet_v3(False), img64, 13, 0, False),
            ("keras_mobilenet_v3_minimal", lambda: mobilenet_v3(True), img64, 14, 0, False),
            ("keras_resnet8", resnet8, img32, 15, 4, False),
            ("keras_ds_cnn", ds_cnn, mfcc, 16, 0, True)]
    for name, build, calib, seed, dead, int8 in jobs:
        model = build()
        randomise_batchnorm(model, seed, dead)
        blob = to_tflite(model)
        check_float(blob, model, calib)
        save(name, blob, calib)
        if int8:
            save(f"{name}_int8_tflc", to_tflite(model, calib))
    module = StreamingKws(17)
    fn = module.__call__.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], module)
    converter.experimental_enable_resource_variables = True
    frames = mfcc_like(rng, 8, 1, 40)
    save("streaming_kws_tflite", converter.convert(), frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
