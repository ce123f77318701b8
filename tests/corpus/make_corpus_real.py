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
  format (blocks of 4 input channels and plain CSR, uint16 / uint8 indices) behind DENSIFY.
- `kws_logmel.onnx`: a keyword spotter with its own log-mel front end (a DFT as MatMuls,
  mel filters, Log) and a small CNN.
- `uint8_classifier.tflite`: an int8 classifier (qconvert's int8 digits CNN) with uint8 inputs
  and outputs as Model Maker / EfficientNet-Lite ship them.
- `lstm_denoiser.tflite`: a recurrent speech denoiser (tests/models/make_lstm_models.py's
  builder: UNIDIRECTIONAL_SEQUENCE_LSTM of 12 units over 8 steps x 16 bins, a FULLY_CONNECTED
  mask head, LOGISTIC, the mask multiplied into the input); its state is carried from one call
  to the next, so its calibration file is one stream cut into consecutive calls.
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


def yolo_head(out: Path, tmp: Path | None = None) -> None:
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


class _Onnx:
    """A small ONNX graph builder (NCHW float32, random seeded weights)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.inits, self.nodes, self.count = [], [], 0

    def const(self, name, a):
        from onnx import numpy_helper as nh

        self.inits.append(nh.from_array(np.asarray(a), name))
        return name

    def node(self, op, inputs, **attrs):
        from onnx import helper as h

        self.count += 1
        out = f"{op.lower()}_{self.count}"
        self.nodes.append(h.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, cin, cout, k, s=1, group=1, act="Relu", prune=None):
        w = self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2 / (cin // group * k * k))
        if prune is not None:  # zero whole blocks of 4 input channels, most of them
            keep = self.rng.random((cout, 1, 1, cin // 4)) < prune
            w = w * np.repeat(keep, 4, axis=3).transpose(0, 3, 1, 2)
        b = 0.1 * self.rng.standard_normal(cout)
        y = self.node("Conv", [x, self.const(f"w{self.count}", w.astype(np.float32)),
                               self.const(f"b{self.count}", b.astype(np.float32))],
                      kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4, group=group)
        return self.node(act, [y]) if act else y

    def save(self, path, inputs, outputs):
        import onnx
        from onnx import TensorProto as T
        from onnx import helper as h

        g = h.make_graph(self.nodes, path.stem,
                         [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                         [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in outputs],
                         self.inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)],
                         producer_name="qconvert-corpus")
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, str(path))


def _to_tflite(onnx_path: Path):
    """The float TFLite model qconvert's ONNX -> TFLite conversion writes (the architecture's
    TFLite form; the storage of its weights is then set as the converter would write it)."""
    from qconvert.ir import Model
    from qconvert.formats.model_io import load_model
    from qconvert.passes.onnx_to_tflite.convert import convert_onnx_to_tflite

    return convert_onnx_to_tflite(load_model(onnx_path)).model


def _images(rng, n, c, size):
    """Smooth random images in 0..1, NHWC, float16 (exact in float32)."""
    low = rng.uniform(0, 1, (n, size // 8, size // 8, c))
    x = np.repeat(np.repeat(low, 8, axis=1), 8, axis=2)
    return np.clip(x + rng.normal(0, 0.05, x.shape), 0, 1).astype(np.float16)


def blazeface_fp16(out: Path, tmp: Path) -> None:
    """BlazeFace-like: 5x5 stem, BlazeBlocks (depthwise 5x5 + pointwise, residual add), a
    strided block, two heads (16 box regressors, 1 score per anchor, 2 anchors per cell);
    float16 weights behind DEQUANTIZE."""
    from qconvert.formats.model_io import serialize
    from qconvert.passes.cleanup.store_float16 import store_float16

    b = _Onnx(21)
    x = b.conv("image", 3, 16, 5, 2)
    for _ in range(2):  # BlazeBlock: x + pw(dw(x))
        d = b.conv(x, 16, 16, 5, group=16, act=None)
        p = b.conv(d, 16, 16, 1, act=None)
        x = b.node("Relu", [b.node("Add", [x, p])])
    d = b.conv(x, 16, 16, 5, s=2, group=16, act=None)
    x = b.conv(d, 16, 24, 1)
    regs = b.conv(x, 24, 32, 1, act=None)  # 2 anchors x 16 regressors per cell
    scores = b.conv(x, 24, 2, 1, act=None)
    r = b.node("Transpose", [regs], perm=[0, 2, 3, 1])
    r = b.node("Reshape", [r, b.const("rshape", np.array([1, 128, 16], np.int64))])
    s = b.node("Transpose", [scores], perm=[0, 2, 3, 1])
    s = b.node("Reshape", [s, b.const("sshape", np.array([1, 128, 1], np.int64))])
    b.nodes[-1].output[0] = "classificators"
    b.nodes[-3].output[0] = "regressors"
    b.save(tmp / "blazeface.onnx", [("image", [1, 3, 32, 32])],
           [("regressors", [1, 128, 16]), ("classificators", [1, 128, 1])])
    model = _to_tflite(tmp / "blazeface.onnx")
    store_float16(model.graph)
    (out / "blazeface_fp16.tflite").write_bytes(serialize(model))
    np.save(out / "blazeface_fp16_calib.npy", _images(b.rng, 8, 3, 32))


def _weight_only_int8(graph) -> None:
    """Each layer weight (float32, 4-D conv or 2-D FC) stored int8 per output channel behind a
    DEQUANTIZE, as the TFLite converter's dynamic-range option writes weights for ops it keeps
    float (symmetric, scale max|w| / 127, zero point 0)."""
    from qconvert.ir import Node, QuantParams, Tensor

    layers = {n.inputs[1] for n in graph.nodes if n.op in ("Conv2D", "DepthwiseConv2D",
                                                           "FullyConnected")}
    for name in sorted(layers):
        t = graph.tensors[name]
        if t.data is None or t.dtype != "float32":
            continue
        axis = 3 if any(n.op == "DepthwiseConv2D" and n.inputs[1] == name
                        for n in graph.nodes) else 0
        w = t.data.astype(np.float64)
        other = tuple(a for a in range(w.ndim) if a != axis)
        scale = np.maximum(np.abs(w).max(axis=other), 1e-8) / 127
        shape = [1] * w.ndim
        shape[axis] = -1
        q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
        stored = graph.fresh_name(name + "_int8")
        graph.add_tensor(Tensor(stored, t.shape, "int8", q, QuantParams(
            scale.astype(np.float32), np.zeros(scale.size, np.int64), axis)))
        t.data = None
        graph.nodes.insert(0, Node("Dequantize", [stored], [name], {"axis": axis}, name))
    graph.invalidate_uses()


def landmarks(out: Path, tmp: Path) -> None:
    """A MediaPipe-style landmark regressor: conv stack with strides, global average pooling,
    a fully connected head of 21 x 3 coordinates (pixels of a 32x32 crop) and a presence
    score (sigmoid); weights int8 behind DEQUANTIZE (dynamic-range storage)."""
    from qconvert.formats.model_io import serialize

    b = _Onnx(31)
    x = b.conv("crop", 3, 16, 3, 2)
    x = b.conv(x, 16, 16, 3, group=16, act=None)
    x = b.conv(x, 16, 32, 1)
    x = b.conv(x, 32, 32, 3, 2)
    g = b.node("GlobalAveragePool", [x])
    f = b.node("Flatten", [g])
    w = (b.rng.standard_normal((63, 32)) * 0.3).astype(np.float32)
    lm = b.node("Gemm", [f, b.const("lm_w", w), b.const("lm_b", np.full(63, 16, np.float32))],
                transB=1)
    b.nodes[-1].output[0] = "landmarks"
    wp = (b.rng.standard_normal((1, 32)) * 0.3).astype(np.float32)
    p = b.node("Gemm", [f, b.const("p_w", wp), b.const("p_b", np.zeros(1, np.float32))],
               transB=1)
    b.node("Sigmoid", [p])
    b.nodes[-1].output[0] = "presence"
    b.save(tmp / "landmarks.onnx", [("crop", [1, 3, 32, 32])],
           [("landmarks", [1, 63]), ("presence", [1, 1])])
    model = _to_tflite(tmp / "landmarks.onnx")
    _weight_only_int8(model.graph)
    (out / "landmarks_hybrid.tflite").write_bytes(serialize(model))
    np.save(out / "landmarks_hybrid_calib.npy", _images(b.rng, 8, 3, 32))


def sparse_cnn(out: Path, tmp: Path) -> None:
    """A pruned CNN (most 4-channel blocks of its convs' input channels zero, 70 % of its FC
    weights zero) stored sparse: conv weights block-sparse (blocks of 4 input channels, CSR
    over the blocks, uint16 indices), the FC weights plain CSR (uint8 indices), each behind
    DENSIFY, as the converter's sparsity option writes them."""
    from qconvert.ir import Model
    from helpers.sparse_tflite import densify_node, make_sparse, write_sparse

    b = _Onnx(41)
    x = b.conv("image", 3, 16, 3, 2)
    x = b.conv(x, 16, 32, 3, 2, prune=0.3)
    x = b.conv(x, 32, 32, 3, 1, prune=0.3)
    g = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    w = b.rng.standard_normal((10, 32)) * 0.3 * (b.rng.random((10, 32)) < 0.3)
    y = b.node("Gemm", [g, b.const("fc_w", w.astype(np.float32)),
                        b.const("fc_b", np.zeros(10, np.float32))], transB=1)
    b.node("Softmax", [y], axis=1)
    b.nodes[-1].output[0] = "probs"
    b.save(tmp / "sparse_cnn.onnx", [("image", [1, 3, 32, 32])], [("probs", [1, 10])])
    model = _to_tflite(tmp / "sparse_cnn.onnx")
    graph = model.graph
    for node in list(graph.nodes):
        if node.op not in ("Conv2D", "FullyConnected"):
            continue
        name = node.inputs[1]
        t = graph.tensors[name]
        if node.op == "Conv2D" and (t.shape[3] % 4 or np.count_nonzero(t.data) > t.data.size / 2):
            continue  # the stem is dense
        stored = graph.fresh_name(name + "_sparse")
        graph.add_tensor(type(t)(stored, t.shape, "float32", t.data))
        t.data = None
        graph.nodes.insert(0, densify_node(name, stored, name))
        if node.op == "Conv2D":
            make_sparse(graph, stored, [0, 1, 2, 3, 4], {3: 4},
                        ["dense", "dense", "dense", "csr", "dense"], np.uint16)
        else:
            make_sparse(graph, stored, [0, 1], {}, ["dense", "csr"], np.uint8)
    graph.invalidate_uses()
    (out / "sparse_cnn.tflite").write_bytes(write_sparse(Model("tflite", [graph], model.meta)))
    np.save(out / "sparse_cnn_calib.npy", _images(b.rng, 8, 3, 32))


def uint8_classifier(out: Path, tmp: Path) -> None:
    """qconvert's int8 digits CNN (tests/models/digits_cnn.tflite quantized by `qconvert
    quantize` on its calibration set) with uint8 input and output QUANTIZE ops, as Model Maker /
    the converter's `inference_input_type=tf.uint8` ship classifiers."""
    from click.testing import CliRunner

    from qconvert.cli import main as cli
    from qconvert.formats.model_io import load_model, serialize
    from helpers.uint8_edges import with_uint8_edges

    q8 = tmp / "digits_int8.tflite"
    result = CliRunner().invoke(cli, ["quantize", str(ROOT / "tests/models/digits_cnn.tflite"),
                                      "--calibration",
                                      str(ROOT / "tests/models/digits_data_nhwc.npz") + ":calib",
                                      "-o", str(q8)])
    assert result.exit_code == 0, result.output
    (out / "uint8_classifier.tflite").write_bytes(serialize(with_uint8_edges(load_model(q8))))


def kws_logmel(out: Path, tmp: Path) -> None:
    """A keyword spotter with its own log-mel front end: 49 Hann-windowed frames of 128 audio
    samples -> a real DFT as two MatMuls (cos, sin) -> power -> 40 triangular mel filters (a
    MatMul) -> log(x + 1e-6) -> a small CNN (two convs, global pooling, FC, softmax over 12
    words), as wake-word packages ship STFT front ends inside the model."""
    b = _Onnx(51)
    n, bins, mels = 128, 65, 40
    t = np.arange(n)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * t / n)
    k = np.arange(bins)
    cos = (window[:, None] * np.cos(2 * np.pi * np.outer(t, k) / n)).astype(np.float32)
    sin = (window[:, None] * -np.sin(2 * np.pi * np.outer(t, k) / n)).astype(np.float32)
    hz = np.linspace(0, 8000, bins)
    mel = 2595 * np.log10(1 + hz / 700)
    edges = np.linspace(mel[0], mel[-1], mels + 2)
    fb = np.maximum(0, 1 - np.abs(mel[:, None] - edges[None, 1:-1]) / (edges[1] - edges[0]))
    re = b.node("MatMul", ["frames", b.const("dft_cos", cos)])
    im = b.node("MatMul", ["frames", b.const("dft_sin", sin)])
    power = b.node("Add", [b.node("Mul", [re, re]), b.node("Mul", [im, im])])
    melspec = b.node("MatMul", [power, b.const("mel_fb", fb.astype(np.float32))])
    logmel = b.node("Log", [b.node("Add", [melspec, b.const("eps", np.float32(1e-6))])])
    x = b.node("Reshape", [logmel, b.const("img", np.array([1, 1, 49, mels], np.int64))])
    x = b.conv(x, 1, 16, 3, 2)
    x = b.conv(x, 16, 32, 3, 2)
    g = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    w = (b.rng.standard_normal((12, 32)) * 0.3).astype(np.float32)
    y = b.node("Gemm", [g, b.const("fc_w", w), b.const("fc_b", np.zeros(12, np.float32))],
               transB=1)
    b.node("Softmax", [y], axis=1)
    b.nodes[-1].output[0] = "words"
    b.save(out / "kws_logmel.onnx", [("frames", [1, 49, n])], [("words", [1, 12])])
    rng = np.random.default_rng(52)  # noise-like audio, 0.1 rms, with a louder burst
    audio = rng.normal(0, 0.1, (8, 49, n)) * (1 + 4 * (np.arange(49) > 20)[None, :, None])
    np.save(out / "kws_logmel_calib.npy", audio.astype(np.float16))


def lstm_denoiser(out: Path, tmp: Path) -> None:
    """The LSTM denoiser of tests/models/make_lstm_models.py (1 x 8 steps x 16 bins per call,
    12 units) and a calibration stream: 16 consecutive calls of log-magnitude-like features
    (slowly varying per bin in time, a louder stretch in the middle), in call order: the
    corpus feeds the first calls in a row to one interpreter, as a denoiser runs."""
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from make_lstm_models import denoiser_tflite

    steps, bins, calls = 8, 16, 16
    (out / "lstm_denoiser.tflite").write_bytes(denoiser_tflite(steps=steps, bins=bins, units=12))
    rng = np.random.default_rng(61)
    x = np.zeros((calls * steps, bins))
    for t in range(1, calls * steps):  # AR(1) in time: consecutive calls belong together
        x[t] = 0.8 * x[t - 1] + 0.6 * rng.standard_normal(bins)
    x += 1.5 * (np.arange(calls * steps) % 48 > 24)[:, None]  # speech-like louder stretches
    np.save(out / "lstm_denoiser_calib.npy", x.reshape(calls, steps, bins).astype(np.float16))


def main(names=None) -> None:
    import tempfile

    makers = {"yolo_head": yolo_head, "blazeface_fp16": blazeface_fp16,
              "landmarks_hybrid": landmarks, "sparse_cnn": sparse_cnn,
              "uint8_classifier": uint8_classifier, "kws_logmel": kws_logmel,
              "lstm_denoiser": lstm_denoiser}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in makers.items():
            if names is None or name in names:
                make(OUT, Path(tmp))
                print(f"wrote {name}")


if __name__ == "__main__":
    main(set(sys.argv[1:]) or None)
