"""The "real models 2" corpus models (issue 28), made with numpy, onnx.helper and qconvert's own
IR and TFLite writer (no TensorFlow / PyTorch):

    python tests/corpus/make_corpus_real.py

- `yolo_head.onnx`: a YOLO-style detector, backbone of three convs, one head per output kind
  concatenated into [1, 8, 256]: box coordinates in pixels (sigmoid x 96), objectness and three
  class scores in 0..1 (sigmoid): the concat whose inputs' ranges differ ~100x.
- `blazeface_fp16.tflite`: a BlazeFace-like face detector (depthwise-separable blocks with
  residual adds, two heads: 16 regressors and a score per anchor) whose weights are float16
  behind DEQUANTIZE, as the TFLite converter's float16 option writes them.
- `landmarks.tflite`: a MediaPipe-style landmark regressor (conv stack, global pooling, a fully
  connected head of 3 x 21 coordinates), weights int8 behind DEQUANTIZE (the converter's
  dynamic-range output for ops without a hybrid kernel).
- `sparse_cnn.tflite`: a pruned CNN whose conv and FC weights are stored in TFLite's sparsity
  format (block-sparse 1x4 and plain CSR, uint8 / int32 indices) behind DENSIFY.
- `uint8_classifier.tflite`: an int8 classifier (qconvert's int8 digits CNN) with uint8 inputs
  and outputs as Model Maker / EfficientNet-Lite ship them.
Weights are random (seeded); each model has a `*_calib.npy` of random data with the ranges its
input takes (images 0..1). Files are small (< 100 KB).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "models" / "corpus"
sys.path.insert(0, str(ROOT / "tests"))


def yolo_head(out: Path) -> None:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(11)
    inits, nodes = [], []

    def const(name, a):
        inits.append(nh.from_array(np.asarray(a), name))
        return name

    def conv(x, cin, cout, k, s, name, act="Relu"):
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / (cin * k * k))).astype(
            np.float32)
        b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
        nodes.append(h.make_node("Conv", [x, const(name + "_w", w), const(name + "_b", b)],
                                 [name], kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4))
        nodes.append(h.make_node(act, [name], [name + "_a"]))
        return name + "_a"

    f = conv("images", 3, 16, 3, 2, "c1")
    f = conv(f, 16, 32, 3, 2, "c2")
    f = conv(f, 32, 32, 3, 1, "c3")
    box = conv(f, 32, 4, 1, 1, "box", act="Sigmoid")
    nodes.append(h.make_node("Mul", [box, const("box_scale", np.float32(96.0))], ["box_px"]))
    conv(f, 32, 1, 1, 1, "obj", act="Sigmoid")
    conv(f, 32, 3, 1, 1, "cls", act="Sigmoid")
    for name, ch in (("box_px", 4), ("obj_a", 1), ("cls_a", 3)):
        nodes.append(h.make_node("Reshape", [name, const(name + "_shape",
                                                         np.array([1, ch, -1], np.int64))],
                                 [name + "_flat"]))
    nodes.append(h.make_node("Concat", ["box_px_flat", "obj_a_flat", "cls_a_flat"],
                             ["detections"], axis=1))
    g = h.make_graph(nodes, "yolo_head",
                     [h.make_tensor_value_info("images", T.FLOAT, [1, 3, 64, 64])],
                     [h.make_tensor_value_info("detections", T.FLOAT, [1, 8, 256])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="qconvert-corpus")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(out / "yolo_head.onnx"))
    smooth = np.kron(rng.uniform(0, 1, (8, 3, 8, 8)), np.ones((1, 1, 8, 8)))
    np.save(out / "yolo_head_calib.npy",
            np.clip(smooth + rng.normal(0, 0.05, smooth.shape), 0, 1).astype(np.float16))


def main(names=None) -> None:
    makers = {"yolo_head": yolo_head}
    for name, make in makers.items():
        if names is None or name in names:
            make(OUT)
            print(f"wrote {name}")


if __name__ == "__main__":
    main(set(sys.argv[1:]) or None)
