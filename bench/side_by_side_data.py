"""The models and data of `bench/bench_side_by_side.py` (numpy only: the TensorFlow-side helper
`bench/side_by_side_peers.py` imports it too, so both sides see the same samples).

Each row names a float model, where its calibration and evaluation samples come from and which
peers apply. Digits samples are real (scikit-learn's handwritten digits, the `calib` / `test`
split of tests/models/digits_data_*.npz). Corpus models have random weights; their samples are
drawn from the generators their calibration files were drawn from (smooth images, MFCC-like
features, unit-normal tokens; tests/corpus/make_corpus_*.py), with other seeds, so calibration
and evaluation sets are disjoint. The MLPerf Tiny models are trained; their samples are synthetic
(bench/bench_accuracy.py's `realistic_inputs`), so their rows say how closely each int8 model
tracks float on that distribution, not accuracy in use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "tests" / "models"
CORPUS = MODELS / "corpus"
CALIB_SAMPLES, EVAL_SAMPLES = 64, 100
CALIB_SEED, EVAL_SEED = 2024, 4048


@dataclass(frozen=True)
class Case:
    """One float model of the comparison. `data` names the sample generator; `keras` the
    make_corpus_keras.py builder to rebuild for the TFLite converter (None: no Keras model);
    `shapes` fixes dynamic input dims (qconvert --input-shape and the peers' inputs)."""

    name: str
    path: Path
    data: str
    shape: tuple  # one sample, in the model's layout
    real: bool = False
    keras: str | None = None
    shapes: dict = field(default_factory=dict)
    classifier: bool = True


CASES = (
    Case("digits_cnn.tflite", MODELS / "digits_cnn.tflite", "digits_nhwc", (16, 16, 1), True),
    Case("digits_cnn.onnx", MODELS / "digits_cnn.onnx", "digits_nchw", (1, 16, 16), True),
    Case("vww_mobilenet_v1", CORPUS / "vww_mobilenet_v1.tflite", "images_nhwc", (96, 96, 3),
         keras="vww_mobilenet_v1"),
    Case("keras_mobilenet_v2", CORPUS / "keras_mobilenet_v2.tflite", "images_nhwc", (64, 64, 3),
         keras="keras_mobilenet_v2"),
    Case("keras_mobilenet_v3_small", CORPUS / "keras_mobilenet_v3_small.tflite", "images_nhwc",
         (64, 64, 3), keras="keras_mobilenet_v3_small"),
    Case("keras_mobilenet_v3_minimal", CORPUS / "keras_mobilenet_v3_minimal.tflite",
         "images_nhwc", (64, 64, 3), keras="keras_mobilenet_v3_minimal"),
    Case("keras_resnet8", CORPUS / "keras_resnet8.tflite", "images_nhwc", (32, 32, 3),
         keras="keras_resnet8"),
    Case("keras_ds_cnn", CORPUS / "keras_ds_cnn.tflite", "mfcc_frames_first", (49, 10, 1),
         keras="keras_ds_cnn"),
    Case("shufflenet_v2", CORPUS / "shufflenet_v2.onnx", "images_nchw", (3, 64, 64),
         shapes={"image": (1, 3, 64, 64)}),
    Case("mobilenet_v3_small", CORPUS / "mobilenet_v3_small.onnx", "images_nchw", (3, 64, 64)),
    Case("mobilenet_v2_paddle", CORPUS / "mobilenet_v2_paddle.onnx", "images_nchw", (3, 64, 64)),
    Case("regnet_small", CORPUS / "regnet_small.onnx", "images_nchw", (3, 32, 32)),
    Case("resnext_small", CORPUS / "resnext_small.onnx", "images_nchw", (3, 32, 32)),
    Case("unet_small", CORPUS / "unet_small.onnx", "images_nchw", (3, 32, 32), classifier=False),
    Case("fpn_small", CORPUS / "fpn_small.onnx", "images_nchw", (3, 32, 32),
         shapes={"image": (1, 3, 32, 32)}, classifier=False),
    Case("kws_conv1d", CORPUS / "kws_conv1d.onnx", "mfcc_coeffs_first", (40, 49)),
    Case("tiny_transformer", CORPUS / "tiny_transformer.onnx", "tokens", (16, 32)),
    Case("mlperf_resnet8", MODELS / "pretrainedResnet.tflite", "mlperf_resnet", (32, 32, 3)),
    Case("mlperf_kws", MODELS / "kws_ref_model_float32.tflite", "mlperf_kws", (49, 10, 1)),
    Case("mlperf_ad01", MODELS / "ad01_fp32.tflite", "mlperf_ad01", (640,), classifier=False),
)


def _upsample_bilinear(low: np.ndarray, size: int) -> np.ndarray:
    """[n, h, w, c] -> [n, size, size, c], half-pixel bilinear (separable, vectorised)."""
    def axis_weights(n_in):
        pos = np.clip((np.arange(size) + 0.5) * n_in / size - 0.5, 0, n_in - 1)
        i0 = np.floor(pos).astype(int)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, (pos - i0).astype(np.float32)

    i0, i1, t = axis_weights(low.shape[1])
    rows = low[:, i0] * (1 - t)[None, :, None, None] + low[:, i1] * t[None, :, None, None]
    j0, j1, u = axis_weights(low.shape[2])
    return rows[:, :, j0] * (1 - u)[None, None, :, None] + rows[:, :, j1] * u[None, None, :, None]


def smooth_images(rng, n: int, size: int, channels: int) -> np.ndarray:
    """NHWC images with spatial structure: low-resolution noise upsampled plus fine noise."""
    low = rng.standard_normal((n, max(size // 8, 1), max(size // 8, 1), channels))
    img = _upsample_bilinear(low.astype(np.float32), size)
    return img + 0.1 * rng.standard_normal(img.shape).astype(np.float32)


def mfcc_like(rng, n: int, frames: int, coeffs: int) -> np.ndarray:
    """[n, frames, coeffs] MFCC-like features: coefficient 0 large, higher ones smaller."""
    scale = (20.0 / (1.0 + np.arange(coeffs))).astype(np.float32)
    base = rng.standard_normal((n, 1, coeffs)).astype(np.float32)
    return (base + 0.5 * rng.standard_normal((n, frames, coeffs)).astype(np.float32)) * scale


def _digits(layout: str, split: str) -> np.ndarray:
    data = np.load(MODELS / f"digits_data_{layout}.npz")
    return data[split].astype(np.float32)


def digits_labels() -> np.ndarray:
    """Labels of the digits `test` samples (the last len(test) labels)."""
    data = np.load(MODELS / "digits_data_nhwc.npz")
    return data["labels"][-len(data["test"]):]


def samples(case: Case, split: str) -> np.ndarray:
    """float32 samples of `case` ('calib' or 'eval'), in the model's layout."""
    if case.data.startswith("digits"):
        return _digits(case.data.split("_")[1], "calib" if split == "calib" else "test")
    n = CALIB_SAMPLES if split == "calib" else EVAL_SAMPLES
    rng = np.random.default_rng((CALIB_SEED if split == "calib" else EVAL_SEED)
                                + sum(map(ord, case.name)))
    kind = case.data
    if kind == "images_nhwc":  # make_corpus_keras.py: tanh of the smooth image, [-1, 1]
        x = np.tanh(smooth_images(rng, n, case.shape[0], case.shape[2]))
    elif kind == "images_nchw":  # make_corpus_torch.py: clipped to [-2.2, 2.2]
        x = np.clip(smooth_images(rng, n, case.shape[1], case.shape[0]), -2.2, 2.2)
        x = x.transpose(0, 3, 1, 2)
    elif kind == "mfcc_frames_first":
        x = mfcc_like(rng, n, case.shape[0], case.shape[1])[..., None]
    elif kind == "mfcc_coeffs_first":
        x = mfcc_like(rng, n, case.shape[1], case.shape[0]).transpose(0, 2, 1)
    elif kind == "tokens":
        x = rng.standard_normal((n, *case.shape))
    elif kind.startswith("mlperf_"):
        return _mlperf(kind.split("_")[1], n, rng)
    else:
        raise ValueError(kind)
    return np.ascontiguousarray(x, dtype=np.float32)


def _mlperf(name: str, n: int, rng) -> np.ndarray:
    """Synthetic inputs shaped like the MLPerf Tiny training data, inside the input range of the
    MLCommons int8 files (as bench_accuracy.py's realistic_inputs)."""
    if name == "resnet":
        low = rng.uniform(0, 255, (n, 4, 4, 3))
        x = np.repeat(np.repeat(low, 8, axis=1), 8, axis=2) + rng.normal(0, 12, (n, 32, 32, 3))
        return np.round(np.clip(x, 0, 255)).astype(np.float32)
    if name == "ad01":
        band = np.linspace(-20, -60, 128)
        x = band[None, None, :] + rng.normal(0, 8, (n, 5, 1)) + rng.normal(0, 4, (n, 5, 128))
        return np.clip(x.reshape(n, 640), -84.85, 14.85).astype(np.float32)
    scale = np.linspace(1.0, 0.15, 10)  # MFCC-like, centred in the int8 input range of the
    base = rng.standard_normal((n, 1, 10))  # MLCommons file, [-123.4, 25.7]
    x = (base + 0.5 * rng.standard_normal((n, 49, 10))) * scale * 17.35 - 48.8
    return np.clip(x, -123.37, 25.72)[..., None].astype(np.float32)
