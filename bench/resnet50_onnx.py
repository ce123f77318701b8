"""Write the ~100 MB ResNet-50-shaped ONNX model with unfused BatchNormalization used by the
benchmarks: torchvision's resnet50 as a PyTorch (opset 13, no constant folding) export would look,
with random He-initialised weights and realistic BN statistics. No torch needed: the generator is
`pytorch_like.resnet50` (bench/pytorch_like.py, which also builds MobileNetV2 and small versions
for tests).

    python bench/resnet50_onnx.py bench/out/resnet50.onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pytorch_like import resnet50, save  # noqa: E402


def build(seed: int = 0):
    """The full-size model (kept for callers of the former generator)."""
    return resnet50(seed=seed)


if __name__ == "__main__":
    out = save(build(), sys.argv[1] if len(sys.argv) > 1 else "bench/out/resnet50.onnx")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
