"""Generate the streaming keyword-spotting test models (run once with TensorFlow; not a test).

    /work/venvs/tf/bin/python tests/models/make_streaming.py

A small KWS-like net that sees one feature frame per call and keeps the last `FRAMES` frames in a
`tf.Variable` (a ring buffer: shift by one frame, append the new one). Converted with resource
variables, the TFLite model holds VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE and a CALL_ONCE
subgraph that initialises the state. Writes, next to this script:

- `streaming_kws_float.tflite`: float32 everywhere;
- `streaming_kws_int8.tflite`: full-integer int8 (int8 input / output, int8 state variable).

The weights are random but fixed (seeded) and biased so the detector's output moves with the
input; the conv and dense layers carry bias, ReLU and a softmax head.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
FEATURES = 10
FRAMES = 8
FILTERS = 8
CLASSES = 4


class StreamingKws(tf.Module):
    """Ring buffer of the last FRAMES frames -> conv over (time, feature) -> dense -> softmax."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(11)
        self.state = tf.Variable(np.zeros((1, FRAMES, FEATURES, 1), np.float32), name="state")
        self.w_conv = tf.constant(rng.normal(0, 0.4, (3, 3, 1, FILTERS)).astype(np.float32))
        self.b_conv = tf.constant(rng.normal(0, 0.1, FILTERS).astype(np.float32))
        units = (FRAMES - 2) * (FEATURES - 2) * FILTERS
        self.w_fc = tf.constant(rng.normal(0, 0.15, (units, 16)).astype(np.float32))
        self.b_fc = tf.constant(rng.normal(0, 0.1, 16).astype(np.float32))
        self.w_out = tf.constant(rng.normal(0, 0.5, (16, CLASSES)).astype(np.float32))
        self.b_out = tf.constant(rng.normal(0, 0.1, CLASSES).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, FEATURES], tf.float32, name="frame")])
    def __call__(self, frame):
        frame = tf.reshape(frame, [1, 1, FEATURES, 1])
        state = tf.concat([self.state[:, 1:], frame], axis=1)
        self.state.assign(state)
        x = tf.nn.relu(tf.nn.conv2d(state, self.w_conv, 1, "VALID") + self.b_conv)
        x = tf.reshape(x, [1, -1])
        x = tf.nn.relu(tf.matmul(x, self.w_fc) + self.b_fc)
        return tf.nn.softmax(tf.matmul(x, self.w_out) + self.b_out)


def frames(n: int, seed: int = 0) -> np.ndarray:
    """`n` feature frames (1, FEATURES), float32; the calibration and test stream."""
    return np.random.default_rng(seed).normal(0, 1, (n, 1, FEATURES)).astype(np.float32)


def convert(module: StreamingKws, int8: bool) -> bytes:
    fn = module.__call__.get_concrete_function()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn], module)
    conv.experimental_enable_resource_variables = True
    if int8:
        def representative():
            for f in frames(200, seed=1):
                yield [f]
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
        conv._experimental_variable_quantization = True
    return conv.convert()


def main() -> None:
    module = StreamingKws()
    for name, int8 in (("streaming_kws_float.tflite", False), ("streaming_kws_int8.tflite", True)):
        data = convert(module, int8)
        (HERE / name).write_bytes(data)
        print(f"wrote {name} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
