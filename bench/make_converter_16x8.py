"""One-time generator (not a test, not run by the benchmark): the TFLite converter's 16x8
version of `digits_cnn.tflite` (int16 activations, int8 weights), the peer
`bench/bench_int16.py` compares `qconvert quantize --activations int16` against.

Same rebuild as `make_converter_int8.py` (the float `.tflite` read with the `tflite` package,
rebuilt in Keras with its exact weights, checked against the float file), then converted with
`supported_ops = [EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]`, the 128
`calib` samples as representative data, int16 input and output. Run it once with TensorFlow
in its own virtualenv (never a dependency of qconvert or its tests):

    /work/venvs/tf/bin/python bench/make_converter_16x8.py

It writes `bench/data/digits_cnn_converter_16x8.tflite`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_converter_int8 import (DATA, FLOAT_MODEL, TOLERANCE, build_keras,  # noqa: E402
                                 float_tflite_logits, read_float_layers)

OUT = HERE / "data" / "digits_cnn_converter_16x8.tflite"


def main() -> None:
    import tensorflow as tf

    calib = np.load(DATA)["calib"].astype(np.float32)
    model = build_keras(read_float_layers(FLOAT_MODEL))
    ref = float_tflite_logits(FLOAT_MODEL, calib)
    got = np.concatenate([model(calib[i:i + 1], training=False).numpy()
                          for i in range(len(calib))])
    err = float(np.max(np.abs(ref - got))) / float(np.max(np.abs(ref)))
    if not err <= TOLERANCE:
        sys.exit(f"the rebuilt Keras model differs from {FLOAT_MODEL.name} by {err:.2e}")

    def representative():
        for sample in calib:
            yield [sample[None]]

    tf.keras.utils.set_random_seed(0)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    converter.inference_input_type = tf.int16
    converter.inference_output_type = tf.int16
    blob = converter.convert()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".tmp")
    tmp.write_bytes(blob)
    tmp.replace(OUT)
    print(f"wrote {OUT} ({len(blob)} bytes, TensorFlow {tf.__version__})")


if __name__ == "__main__":
    main()
