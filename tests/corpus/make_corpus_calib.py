"""Calibration data for the shared MLPerf Tiny models of the corpus (numpy only).

    python tests/corpus/make_corpus_calib.py

Random with the ranges the models were trained on (read off the int8 versions' input scales):
ResNet-8 takes raw 0..255 CIFAR-10 pixels (smooth random images); the anomaly detector takes
5 frames of 128 log-mel energies, about -85..15 dB (a per-band level plus frame noise). 8 samples
each, float16 (exact in float32); the streaming KWS models of tests/models/make_streaming.py take
one frame of 10 features ~ N(0, 1) per call (16 frames). They exercise the quantizer; they are not
real data. The MLPerf KWS models reuse the corpus DS-CNN's MFCC-like data
(`keras_ds_cnn_calib.npy`).
"""

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "models" / "corpus"


def main():
    rng = np.random.default_rng(200)
    low = rng.uniform(0, 255, (8, 4, 4, 3))
    images = np.repeat(np.repeat(low, 8, axis=1), 8, axis=2)  # blocky 32x32
    images = np.clip(images + rng.normal(0, 12, images.shape), 0, 255).round()
    np.save(OUT / "mlperf_resnet8_calib.npy", images.astype(np.float16))
    band = np.linspace(-20, -60, 128)
    frames = band[None, None, :] + rng.normal(0, 8, (8, 5, 1)) + rng.normal(0, 4, (8, 5, 128))
    np.save(OUT / "mlperf_ad01_calib.npy", np.clip(frames, -85, 15).reshape(8, 640)
            .astype(np.float16))
    np.save(OUT / "streaming_kws_features_calib.npy",
            rng.normal(0, 1, (16, 10)).astype(np.float16))


if __name__ == "__main__":
    main()
