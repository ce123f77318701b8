"""Benchmark (not a test): the float executor's 3x3 convolutions with Winograd F(2x2, 3x3)
(`qconvert/executor/float_kernels_winograd.py`) against its im2col product, on the stride-1
3x3 layers of ResNet-50 (and narrower ones, where the im2col product stays the choice).

    python bench/bench_winograd.py [--batch 16] [--repeats 5]

For each layer shape: the best time of each path through the executor's Conv2D kernel (both on
every CPU, as the executor runs them), their ratio, and each result's largest error against a
float64 direct sum, relative to the output's largest magnitude.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qconvert.executor import float_kernels_conv
from qconvert.executor.float_kernels_conv import conv2d
from qconvert.ir import Node

# (channels, size) of ResNet-50's stride-1 3x3 layers (channels in = out), then narrower ones
SHAPES = ((64, 56), (128, 28), (256, 14), (512, 7), (32, 56), (32, 28))


def _reference(x, w, b) -> np.ndarray:
    """The convolution (pads 1) as a float64 sum over the nine taps."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ho, wo = x.shape[2:]
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(3):
        for j in range(3):
            out += np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64),
                             xp[:, :, i:i + ho, j:j + wo])
    return out + b.reshape(1, -1, 1, 1)


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    node = Node("Conv2D", ["x", "w", "b"], ["y"],
                {"pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}, name="conv")
    print(f"batch {args.batch}; best of {args.repeats}; error: max |y - y64| / max |y64|")
    print(f"{'channels':>8} {'size':>5} {'im2col ms':>10} {'winograd ms':>12} {'ratio':>6} "
          f"{'err im2col':>11} {'err winograd':>13}")
    applies = float_kernels_conv.winograd_applies
    for channels, size in SHAPES:
        x = rng.standard_normal((args.batch, channels, size, size)).astype(np.float32)
        w = (rng.standard_normal((channels, channels, 3, 3)) / (3 * channels ** 0.5)
             ).astype(np.float32)
        b = rng.standard_normal(channels).astype(np.float32)
        ref = _reference(x, w, b)
        result = {}
        for name, rule in (("im2col", lambda *a: False), ("winograd", lambda *a: True)):
            float_kernels_conv.winograd_applies = rule
            try:
                y = conv2d(node, [x, w, b], [None])[0]
                result[name] = (_best(lambda: conv2d(node, [x, w, b], [None]), args.repeats),
                                float(np.abs(y - ref).max() / np.abs(ref).max()))
            finally:
                float_kernels_conv.winograd_applies = applies
        (t_i, e_i), (t_w, e_w) = result["im2col"], result["winograd"]
        chosen = "" if applies(x, w, [3, 3], [1, 1], [1, 1], (size, size)) else "  (im2col chosen)"
        print(f"{channels:>8} {size:>5} {t_i * 1e3:>10.2f} {t_w * 1e3:>12.2f} "
              f"{t_w / t_i:>6.2f} {e_i:>11.1e} {e_w:>13.1e}{chosen}")


if __name__ == "__main__":
    main()
