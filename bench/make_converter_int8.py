"""One-time generator (not a test, not run by the benchmark): the TFLite converter's full-int8
version of `digits_cnn.tflite`, the peer `bench/bench_accuracy.py` compares qconvert against.

The TFLite converter needs a Keras model or SavedModel, not a `.tflite`, and TensorFlow must
never be a dependency of qconvert or of its tests. So this script runs once, in a separate
virtualenv, and its output is kept in the repository:

    python -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.20.0 numpy tflite==2.18.0
    /tmp/tfvenv/bin/python bench/make_converter_int8.py

What it does:
1. reads the float `tests/models/digits_cnn.tflite` with the `tflite` flatbuffer package
   (not qconvert) and checks that it is the expected architecture, op by op: Conv2D 3x3 SAME +
   RELU, DepthwiseConv2D 3x3 SAME + RELU6, Conv2D 1x1 + RELU, MaxPool 2, Conv2D 3x3 stride 2
   SAME + RELU, AveragePool 4, flatten (Shape / StridedSlice / Pack / Reshape), FullyConnected
   10 (the converter already folded the BatchNormalization layers into the convolutions);
2. rebuilds that network as a Keras model with a fixed batch of 1 (a microcontroller's shape),
   with exactly the weights and biases of the file (OHWI -> HWIO, 1HWC -> HWC1, [out, in] ->
   [in, out]);
3. checks that the Keras model reproduces the float `.tflite` run in the TFLite interpreter
   within 1e-5 (relative to the largest logit) on the 128 calibration and 497 test samples;
4. converts it with the TFLite converter to full int8: `optimizations = [tf.lite.Optimize.DEFAULT]`,
   representative dataset = the 128 `calib` samples of `digits_data_nhwc.npz`, one at a time,
   `supported_ops = [TFLITE_BUILTINS_INT8]`, int8 input and output;
5. writes `bench/data/digits_cnn_converter_int8.tflite`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "tests" / "models"
FLOAT_MODEL = MODELS / "digits_cnn.tflite"
DATA = MODELS / "digits_data_nhwc.npz"
OUT = HERE / "data" / "digits_cnn_converter_int8.tflite"
TOLERANCE = 1e-5

# The float file's operators, in order: (builtin name, fused activation, padding, strides).
# None = not checked (ops without those options).
EXPECTED = [
    ("CONV_2D", "RELU", "SAME", (1, 1)),
    ("DEPTHWISE_CONV_2D", "RELU6", "SAME", (1, 1)),
    ("CONV_2D", "RELU", "VALID", (1, 1)),
    ("MAX_POOL_2D", "NONE", "VALID", (2, 2)),
    ("CONV_2D", "RELU", "SAME", (2, 2)),
    ("AVERAGE_POOL_2D", "NONE", "VALID", (4, 4)),
    ("SHAPE", None, None, None),
    ("STRIDED_SLICE", None, None, None),
    ("PACK", None, None, None),
    ("RESHAPE", None, None, None),
    ("FULLY_CONNECTED", "NONE", None, None),
]


def _names(enum_class) -> dict:
    return {v: k for k, v in vars(enum_class).items() if not k.startswith("_")}


def read_float_layers(path: Path) -> list:
    """[(op name, {'weights': array, 'bias': array, 'filter': (h, w)})] of the float .tflite,
    after checking each operator against EXPECTED."""
    import tflite

    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    if model.SubgraphsLength() != 1:
        sys.exit(f"{path}: expected one subgraph")
    graph = model.Subgraphs(0)
    ops = _names(tflite.BuiltinOperator)
    acts = _names(tflite.ActivationFunctionType)
    pads = _names(tflite.Padding)
    options = {"CONV_2D": tflite.Conv2DOptions, "DEPTHWISE_CONV_2D": tflite.DepthwiseConv2DOptions,
               "MAX_POOL_2D": tflite.Pool2DOptions, "AVERAGE_POOL_2D": tflite.Pool2DOptions,
               "FULLY_CONNECTED": tflite.FullyConnectedOptions}

    def const(index):
        tensor = graph.Tensors(index)
        raw = model.Buffers(tensor.Buffer()).DataAsNumpy()
        if tensor.Type() != tflite.TensorType.FLOAT32 or isinstance(raw, int):
            sys.exit(f"{path}: tensor {tensor.Name().decode()} is not a float32 constant")
        return np.frombuffer(raw.tobytes(), "<f4").reshape(tensor.ShapeAsNumpy()).copy()

    if graph.OperatorsLength() != len(EXPECTED):
        sys.exit(f"{path}: {graph.OperatorsLength()} operators, expected {len(EXPECTED)}")
    layers = []
    for i, (want_op, want_act, want_pad, want_strides) in enumerate(EXPECTED):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        name = ops[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
        got = (name, None, None, None)
        layer = {}
        if name in options:
            opts = options[name]()
            table = op.BuiltinOptions()
            opts.Init(table.Bytes, table.Pos)
            act = acts[opts.FusedActivationFunction()]
            pad = pads[opts.Padding()] if hasattr(opts, "Padding") else None
            strides = (opts.StrideH(), opts.StrideW()) if hasattr(opts, "StrideH") else None
            got = (name, act, pad, strides)
            if name.startswith("CONV") or name.startswith("DEPTHWISE") or name == "FULLY_CONNECTED":
                inputs = op.InputsAsNumpy()
                layer = {"weights": const(inputs[1]), "bias": const(inputs[2])}
            if hasattr(opts, "FilterHeight"):
                layer["filter"] = (opts.FilterHeight(), opts.FilterWidth())
            if hasattr(opts, "DilationHFactor") and (opts.DilationHFactor(),
                                                     opts.DilationWFactor()) != (1, 1):
                sys.exit(f"{path}: operator {i} is dilated")
        if got != (want_op, want_act, want_pad, want_strides):
            sys.exit(f"{path}: operator {i} is {got}, expected {EXPECTED[i]}")
        layers.append((name, layer))
    return layers


def build_keras(layers: list):
    """The Keras model of the float file, batch 1, with its exact weights."""
    import keras

    w = [layer for name, layer in layers if "weights" in layer]
    pools = [layer for name, layer in layers if name.endswith("POOL_2D")]
    conv1, dw, pw, conv2, dense = w
    x = inputs = keras.Input((16, 16, 1), batch_size=1, name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.DepthwiseConv2D(3, padding="same")(x)
    x = keras.layers.ReLU(max_value=6.0)(x)
    x = keras.layers.Conv2D(16, 1, activation="relu")(x)
    x = keras.layers.MaxPooling2D(pools[0]["filter"])(x)
    x = keras.layers.Conv2D(24, 3, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.AveragePooling2D(pools[1]["filter"])(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(10, name="logits")(x)
    model = keras.Model(inputs, outputs)
    kernels = {
        0: conv1["weights"].transpose(1, 2, 3, 0),               # OHWI -> HWIO
        1: dw["weights"][0][..., None],                           # 1HWC -> HWC1
        3: pw["weights"].transpose(1, 2, 3, 0),
        5: conv2["weights"].transpose(1, 2, 3, 0),
        8: dense["weights"].T,                                    # [out, in] -> [in, out]
    }
    biases = {0: conv1, 1: dw, 3: pw, 5: conv2, 8: dense}
    weighted = [layer for layer in model.layers if layer.weights]
    for index, layer in zip(sorted(kernels), weighted):
        layer.set_weights([kernels[index], biases[index]["bias"]])
    return model


def float_tflite_logits(path: Path, x: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    it = tf.lite.Interpreter(model_path=str(path))
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    rows = []
    for sample in x:
        it.set_tensor(inp["index"], sample[None])
        it.invoke()
        rows.append(it.get_tensor(out["index"])[0].copy())
    return np.stack(rows)


def rebuilt_keras(samples: np.ndarray, report: bool = False):
    """The Keras rebuild of the float model, checked against the float `.tflite` on `samples`
    (exits when it differs beyond TOLERANCE); `report` prints the difference."""
    model = build_keras(read_float_layers(FLOAT_MODEL))
    ref = float_tflite_logits(FLOAT_MODEL, samples)
    got = np.concatenate([model(samples[i:i + 1], training=False).numpy()
                          for i in range(len(samples))])
    err = float(np.max(np.abs(ref - got))) / float(np.max(np.abs(ref)))
    if report:
        print(f"rebuilt Keras vs float .tflite: max |diff| / max |logit| = {err:.2e} "
              f"over {len(samples)} samples")
    if not err <= TOLERANCE:
        sys.exit(f"the rebuilt Keras model differs from {FLOAT_MODEL.name} by {err:.2e}")
    return model


def convert_and_write(model, calib: np.ndarray, supported_ops: list, io_type, out: Path) -> None:
    """The TFLite converter's full-integer model of `model` (representative data: the `calib`
    samples; `supported_ops`; `io_type` input and output), written to `out` atomically."""
    import tensorflow as tf

    def representative():
        for sample in calib:
            yield [sample[None]]

    tf.keras.utils.set_random_seed(0)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = supported_ops
    converter.inference_input_type = io_type
    converter.inference_output_type = io_type
    blob = converter.convert()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(blob)
    tmp.replace(out)
    print(f"wrote {out} ({len(blob)} bytes, TensorFlow {tf.__version__})")


def main() -> None:
    import tensorflow as tf

    data = np.load(DATA)
    calib, test = data["calib"].astype(np.float32), data["test"].astype(np.float32)
    model = rebuilt_keras(np.concatenate([calib, test]), report=True)
    convert_and_write(model, calib, [tf.lite.OpsSet.TFLITE_BUILTINS_INT8], tf.int8, OUT)


if __name__ == "__main__":
    main()
