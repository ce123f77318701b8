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

from make_converter_int8 import DATA, convert_and_write, rebuilt_keras  # noqa: E402

OUT = HERE / "data" / "digits_cnn_converter_16x8.tflite"


def main() -> None:
    import tensorflow as tf

    calib = np.load(DATA)["calib"].astype(np.float32)
    model = rebuilt_keras(calib)
    convert_and_write(model, calib,
                      [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8],
                      tf.int16, OUT)


if __name__ == "__main__":
    main()
