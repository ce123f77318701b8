"""The real-model corpus: every model qconvert is checked on, with what each test needs to know.

One row per model: its file, format and precision, the calibration data (in the model's own
layout), concrete input shapes for dynamic dimensions, whether it keeps state between calls
(run frame by frame), and where it comes from. The commands that apply follow from the format
and precision (`commands_for`); `tests/test_corpus.py` runs every (model, command) pair and
`bench/model_coverage.py` prints the table. Generated models live in `tests/models/corpus/`
(made once by `make_corpus_torch.py` / `make_corpus_keras.py`); the MLPerf Tiny and digits models
are the shared copies in `tests/models/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "models"
CORPUS = MODELS / "corpus"

# The commands of the coverage table, in its column order.
COMMANDS = ("inspect", "convert", "to-tflite", "fuse", "quantize", "quantize-qdq",
            "export-c-header", "export-c")


@dataclass(frozen=True)
class CorpusModel:
    """One corpus model. `calibration` is a file (``.npy`` / ``.npz`` / ``file.npz:key``) in the
    model's layout; `shapes` (input name -> shape) fixes dynamic dims with `--input-shape` on
    every command that takes it, as a user of such a model would; `frames` > 0 marks a model
    with state kept between invocations (run that many frames in a row); `source` says where
    it comes from."""

    name: str
    path: Path
    format: str  # "onnx" | "tflite"
    precision: str  # "float" | "int8"
    source: str
    calibration: str
    shapes: dict = field(default_factory=dict)
    frames: int = 0
    calibration_options: tuple = ()  # e.g. ("--scale", "1"): how its users normalise the data

    @property
    def calibration_args(self) -> list:
        """`--calibration FILE` and the model's normalisation options, as its users pass them."""
        return ["--calibration", self.calibration, *self.calibration_options]

    @property
    def commands(self) -> tuple:
        return commands_for(self)


def commands_for(model: CorpusModel) -> tuple:
    """The commands that apply: every model is inspected, converted to its own format, fused and
    exported as a C header and as C; float models are quantized (ONNX ones to int8 TFLite and to QDQ
    ONNX) and ONNX ones converted to TFLite."""
    out = ["inspect", "convert"]
    if model.format == "onnx":
        out.append("to-tflite")
    out.append("fuse")
    if model.precision == "float":
        out.append("quantize")
        if model.format == "onnx":
            out.append("quantize-qdq")
    out += ["export-c-header", "export-c"]
    return tuple(out)


def _gen(name, fmt, source, precision="float", calib=None, **kw):
    """A generated model of tests/models/corpus; its calibration file defaults to
    `<name>_calib.npy`."""
    ext = "onnx" if fmt == "onnx" else "tflite"
    calibration = str(CORPUS / (calib or f"{name}_calib.npy"))
    return CorpusModel(name, CORPUS / f"{name}.{ext}", fmt, precision, source, calibration, **kw)


_TV = "torchvision architecture (BSD-3-Clause), random weights"
_PT = "written in PyTorch for qconvert, random weights"
_KA = "Keras application (Apache-2.0), random weights"
_KW = "written in Keras for qconvert, random weights"
_MLPERF = "MLPerf Tiny (mlcommons/tiny, Apache-2.0), trained"

README_MODELS = (
    # PyTorch exports (tests/corpus/make_corpus_torch.py)
    _gen("shufflenet_v2", "onnx", _TV + "; channel shuffle, Split"),
    CorpusModel("shufflenet_v2_input_shape", CORPUS / "shufflenet_v2.onnx", "onnx", "float",
                "the same model given --input-shape image:1,3,64,64",
                str(CORPUS / "shufflenet_v2_calib.npy"), shapes={"image": (1, 3, 64, 64)}),
    _gen("resnext_small", "onnx", _TV + " (Bottleneck); grouped conv, dead BN channels"),
    _gen("regnet_small", "onnx", _TV + "; grouped conv, squeeze-excite"),
    _gen("mobilenet_v3_small", "onnx", _TV + "; hard-swish, hard-sigmoid"),
    _gen("mobilenet_v2_paddle", "onnx", _TV + "; -1 batch dim (Paddle2ONNX style)"),
    _gen("unet_small", "onnx", _PT + "; ConvTranspose, Resize nearest / bilinear"),
    _gen("fpn_small", "onnx", _PT + "; Resize, dynamic H and W"),
    CorpusModel("fpn_small_input_shape", CORPUS / "fpn_small.onnx", "onnx", "float",
                "the same model given --input-shape image:1,3,32,32",
                str(CORPUS / "fpn_small_calib.npy"), shapes={"image": (1, 3, 32, 32)}),
    _gen("kws_conv1d", "onnx", _PT + "; Conv1d keyword spotter"),
    _gen("tiny_transformer", "onnx", _PT + "; LayerNorm, attention MatMul, Softmax, GELU"),
    _gen("streaming_kws_onnx", "onnx", _PT + "; streaming, state as input / output",
         calib="streaming_kws_onnx_calib.npz"),
    # Keras -> TFLite converter (tests/corpus/make_corpus_keras.py)
    _gen("vww_mobilenet_v1", "tflite", _KA + "; MobileNet 0.25 96x96, MLPerf VWW design"),
    _gen("vww_mobilenet_v1_int8_tflc", "tflite", _KA + "; int8 by the TFLite converter",
         precision="int8", calib="vww_mobilenet_v1_calib.npy"),
    _gen("keras_mobilenet_v2", "tflite", _KA + "; MobileNetV2 0.35, cut after block 12"),
    _gen("keras_mobilenet_v3_small", "tflite", _KA + "; hard-swish, squeeze-excite"),
    _gen("keras_mobilenet_v3_minimal", "tflite", _KA + "; MobileNetV3-Small minimalistic"),
    _gen("keras_resnet8", "tflite", _KW + "; ResNet-8 design, dead BN channels"),
    _gen("keras_ds_cnn", "tflite", _KW + "; DS-CNN keyword spotter"),
    _gen("keras_ds_cnn_int8_tflc", "tflite", _KW + "; int8 by the TFLite converter",
         precision="int8", calib="keras_ds_cnn_calib.npy"),
    _gen("streaming_kws_tflite", "tflite", _KW + "; streaming, state in resource variables",
         frames=4),
    # shared models (tests/models)
    CorpusModel("digits_cnn_onnx", MODELS / "digits_cnn.onnx", "onnx", "float",
                "trained for qconvert (scikit-learn digits)",
                str(MODELS / "digits_data_nchw.npz") + ":calib"),
    CorpusModel("digits_cnn_tflite", MODELS / "digits_cnn.tflite", "tflite", "float",
                "trained for qconvert (scikit-learn digits)",
                str(MODELS / "digits_data_nhwc.npz") + ":calib"),
    CorpusModel("mlperf_kws_float", MODELS / "kws_ref_model_float32.tflite", "tflite", "float",
                _MLPERF, str(CORPUS / "keras_ds_cnn_calib.npy")),
    CorpusModel("mlperf_kws_int8", MODELS / "kws_ref_model.tflite", "tflite", "int8", _MLPERF,
                str(CORPUS / "keras_ds_cnn_calib.npy")),
    # MLPerf Tiny's ResNet-8 takes raw 0..255 pixels: its users confirm that with --scale 1
    # (qconvert warns about whole-number 0..255 data for a float model, and refuses under --verify)
    CorpusModel("mlperf_resnet8_float", MODELS / "pretrainedResnet.tflite", "tflite", "float",
                _MLPERF, str(CORPUS / "mlperf_resnet8_calib.npy"),
                calibration_options=("--scale", "1")),
    CorpusModel("mlperf_resnet8_int8", MODELS / "pretrainedResnet_quant.tflite", "tflite", "int8",
                _MLPERF, str(CORPUS / "mlperf_resnet8_calib.npy")),
    CorpusModel("mlperf_ad01_float", MODELS / "ad01_fp32.tflite", "tflite", "float", _MLPERF,
                str(CORPUS / "mlperf_ad01_calib.npy")),
    CorpusModel("streaming_kws_float", MODELS / "streaming_kws_float.tflite", "tflite", "float",
                "written in tf for qconvert (tests/models/make_streaming.py), random weights",
                str(CORPUS / "streaming_kws_features_calib.npy"), frames=6),
    CorpusModel("streaming_kws_int8", MODELS / "streaming_kws_int8.tflite", "tflite", "int8",
                "the same, int8 by the TFLite converter",
                str(CORPUS / "streaming_kws_features_calib.npy"), frames=6),
    CorpusModel("mlperf_ad01_int8", MODELS / "ad01_int8.tflite", "tflite", "int8", _MLPERF,
                str(CORPUS / "mlperf_ad01_calib.npy")),
)

_R2 = "written for qconvert (tests/corpus/make_corpus_real.py), random weights"

# Issue 28's real-model shapes (docs/real-models.md shows their table): float16 and int8
# weight-only storage, sparse weights, a detector head, uint8 I/O, an LSTM whose state is kept
# across calls.
REAL_MODELS = (
    _gen("yolo_head", "onnx", _R2 + "; YOLO-style head: box pixels, objectness, classes "
         "concatenated"),
    _gen("blazeface_fp16", "tflite", _R2 + "; BlazeFace-like detector, float16 weights behind "
         "DEQUANTIZE"),
    _gen("landmarks_hybrid", "tflite", _R2 + "; landmark regressor, int8 weight-only "
         "(dynamic-range) storage behind DEQUANTIZE"),
    _gen("sparse_cnn", "tflite", _R2 + "; pruned CNN, block-sparse and CSR weights behind "
         "DENSIFY"),
    _gen("kws_logmel", "onnx", _R2 + "; keyword spotter with its own log-mel front end (DFT "
         "MatMuls, mel filters, Log)"),
    CorpusModel("uint8_classifier", CORPUS / "uint8_classifier.tflite", "tflite", "int8",
                _R2 + "; int8 digits CNN with uint8 input and output (Model Maker style)",
                str(MODELS / "digits_data_nhwc.npz") + ":calib"),
    _gen("lstm_denoiser", "tflite", _R2 + "; speech denoiser: UNIDIRECTIONAL_SEQUENCE_LSTM "
         "(state kept across calls), FULLY_CONNECTED mask, LOGISTIC, MUL", frames=6),
)

MODELS_TABLE = README_MODELS + REAL_MODELS

BY_NAME = {m.name: m for m in MODELS_TABLE}


def cells() -> list:
    """Every (model name, command) pair of the coverage table that applies."""
    return [(m.name, c) for m in MODELS_TABLE for c in m.commands]
