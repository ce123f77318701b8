"""Generate the PyTorch half of the real-model corpus: small ONNX exports of real architectures.

Run once with PyTorch (not a test dependency), from the repository root:

    /work/venvs/torch/bin/python tests/corpus/make_corpus_torch.py

It writes `tests/models/corpus/<name>.onnx` and `<name>_calib.npy` for every model below. The
architectures are torchvision's (BSD-3-Clause) where torchvision ships them (ShuffleNetV2,
MobileNetV3-Small, MobileNetV2, ResNeXt / RegNet blocks), shrunk in width and resolution so each
file stays small; the U-Net, FPN, keyword-spotting Conv1d net, transformer block and streaming
net are written here in plain torch after the usual published designs. Weights are random (no
download); BatchNorm statistics (mean, var, gamma, beta) are randomised so folding them is never
an identity, and a few channels of one model get gamma ~ 0 (dead channels after folding).

Calibration data is random with realistic ranges (images normalised to about [-2, 2] with smooth
spatial structure, MFCC-like features, token embeddings ~ N(0, 1)), 4 or 8 samples per model,
stored as float16 (exact in float32): it exercises the quantizer's range logic, it does not stand
for a real data set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.library
from torch import nn
import torch.nn.functional as F

OUT = Path(__file__).resolve().parents[1] / "models" / "corpus"
OPSET = 17
SAMPLES = 8


def _import_torchvision():
    """torchvision installed without its C extension: skip registering fake kernels for its C ops
    (nms, roi_align...) so `torchvision.models` imports; the models below use none of them."""
    original = torch.library.register_fake

    def register_fake(name, *args, **kwargs):
        if isinstance(name, str) and name.startswith("torchvision::"):
            return lambda fn: fn
        return original(name, *args, **kwargs)

    torch.library.register_fake = register_fake
    try:
        import torchvision.models as tvm
    finally:
        torch.library.register_fake = original
    return tvm


tvm = _import_torchvision()
from torchvision.models.resnet import Bottleneck, conv1x1  # noqa: E402
from torchvision.models.regnet import BlockParams, RegNet  # noqa: E402


def randomise_batchnorm(model: nn.Module, seed: int, dead: int = 0) -> None:
    """Random running mean / var, gamma and beta in every BatchNorm; the first `dead` channels
    of the first BatchNorm get gamma 1e-8 (dead after folding)."""
    g = torch.Generator().manual_seed(seed)
    first = True
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.5)
                m.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.25)
                m.weight.copy_(torch.rand(c, generator=g) * 1.2 + 0.4)
                m.bias.copy_(torch.randn(c, generator=g) * 0.3)
                if first and dead:
                    m.weight[:dead] = 1e-8
            first = False


def smooth_images(rng, n, c, h, w):
    """Random images with spatial structure: low-resolution noise upsampled, about [-2, 2]."""
    low = rng.standard_normal((n, c, max(h // 8, 1), max(w // 8, 1))).astype(np.float32)
    img = F.interpolate(torch.from_numpy(low), size=(h, w), mode="bilinear", align_corners=False)
    img = img.numpy() + 0.1 * rng.standard_normal((n, c, h, w)).astype(np.float32)
    return np.clip(img, -2.2, 2.2).astype(np.float32)


def mfcc_like(rng, n, coeffs, frames):
    """MFCC-like features: coefficient 0 large and slowly varying, higher ones smaller."""
    scale = (20.0 / (1.0 + np.arange(coeffs))).astype(np.float32)[:, None]
    base = rng.standard_normal((n, coeffs, 1)).astype(np.float32)
    x = base + 0.5 * rng.standard_normal((n, coeffs, frames)).astype(np.float32)
    return (x * scale).astype(np.float32)


# -- architectures --------------------------------------------------------------------------------
def shufflenet():
    """torchvision ShuffleNetV2 (x0.5 layout, narrower): channel shuffle and Split, 64x64."""
    return tvm.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 256], num_classes=10)


class ResNeXtSmall(nn.Module):
    """A ResNeXt net of torchvision Bottleneck blocks (cardinality 4, grouped 3x3 convs)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU(inplace=True))
        layers, inplanes = [], 16
        for planes, stride in ((8, 1), (16, 2), (32, 2)):
            down = nn.Sequential(conv1x1(inplanes, planes * 4, stride), nn.BatchNorm2d(planes * 4))
            layers.append(Bottleneck(inplanes, planes, stride, down, groups=4, base_width=32))
            inplanes = planes * 4
            layers.append(Bottleneck(inplanes, planes, 1, None, groups=4, base_width=32))
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.pool(self.layers(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


def mobilenet_v3_small():
    """torchvision MobileNetV3-Small at width 0.25: hard-swish, SE with hard-sigmoid."""
    return tvm.mobilenet_v3_small(weights=None, width_mult=0.25, num_classes=10)


def mobilenet_v2_paddle():
    """torchvision MobileNetV2 at width 0.25 (last conv 1280 kept): exported like Paddle2ONNX
    does, with a -1 batch dimension."""
    net = tvm.mobilenet_v2(weights=None, width_mult=0.25, num_classes=10)
    net.features = net.features[:14]  # up to the 96-channel stage: keeps the file small
    net.classifier[1] = nn.Linear(24, 10)
    net.features.append(nn.Conv2d(24, 24, 1))
    return net


def regnet():
    """torchvision RegNet (X-style blocks: grouped 3x3, group width 8) with SE, two stages."""
    params = BlockParams(depths=[1, 2], widths=[16, 32], group_widths=[8, 8],
                         bottleneck_multipliers=[1.0, 1.0], strides=[2, 2], se_ratio=0.25)
    return RegNet(params, num_classes=10, stem_width=16)


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNetSmall(nn.Module):
    """A three-level U-Net (Ronneberger et al.): MaxPool down, one ConvTranspose up, one nearest
    and one bilinear Upsample, skip connections by Concat; a 1x1 head of 2 classes."""

    def __init__(self):
        super().__init__()
        self.d1, self.d2, self.d3 = DoubleConv(3, 8), DoubleConv(8, 16), DoubleConv(16, 32)
        self.up1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.c1 = DoubleConv(32, 16)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.c2 = DoubleConv(24, 8)
        self.up3 = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        c = self.d3(F.max_pool2d(b, 2))
        u = self.c1(torch.cat([self.up1(c), b], 1))
        u = self.c2(torch.cat([self.up2(u), a], 1))
        return self.head(self.up3(u))


class FPNSmall(nn.Module):
    """A three-level feature pyramid (Lin et al.) on a small conv backbone: 1x1 laterals, nearest
    2x upsampling added top-down, 3x3 output convs; three outputs. Dynamic H and W."""

    def __init__(self):
        super().__init__()
        def stage(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.BatchNorm2d(cout),
                                 nn.ReLU(inplace=True))
        self.s1, self.s2, self.s3 = stage(3, 8), stage(8, 16), stage(16, 32)
        self.lat = nn.ModuleList([nn.Conv2d(c, 16, 1) for c in (8, 16, 32)])
        self.out = nn.ModuleList([nn.Conv2d(16, 16, 3, padding=1) for _ in range(3)])

    def forward(self, x):
        c1 = self.s1(x)
        c2 = self.s2(c1)
        c3 = self.s3(c2)
        p3 = self.lat[2](c3)
        p2 = self.lat[1](c2) + F.interpolate(p3, scale_factor=2.0, mode="nearest")
        p1 = self.lat[0](c1) + F.interpolate(p2, scale_factor=2.0, mode="nearest")
        return self.out[0](p1), self.out[1](p2), self.out[2](p3)


class KwsConv1d(nn.Module):
    """A keyword-spotting net over MFCC frames [N, 40, 49]: Conv1d + BN + ReLU blocks (one
    depthwise-separable), MaxPool1d, global average pooling, a linear head of 12 keywords."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(40, 32, 5, stride=2, padding=2, bias=False), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 32, 3, padding=1, groups=32, bias=False), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 48, 1, bias=False), nn.BatchNorm1d(48), nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(48, 48, 3, padding=1, bias=False), nn.BatchNorm1d(48), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1))
        self.fc = nn.Linear(48, 12)

    def forward(self, x):
        return self.fc(torch.flatten(self.body(x), 1))


class TinyTransformer(nn.Module):
    """One pre-norm transformer encoder block (LayerNorm, 2-head self-attention written with
    MatMul and Softmax, tanh-GELU MLP, residuals) over 16 tokens of width 32, then mean pooling
    and a classifier."""

    def __init__(self, d=32, heads=2, tokens=16, classes=5):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.pos = nn.Parameter(torch.randn(1, tokens, d) * 0.1)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(2 * d, d))
        self.head = nn.Linear(d, classes)
        with torch.no_grad():
            for ln in (self.ln1, self.ln2):
                ln.weight.uniform_(0.5, 1.5)
                ln.bias.normal_(0, 0.1)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x + self.pos)).split(d, dim=-1)
        q = q.reshape(n, t, self.heads, self.dh).transpose(1, 2)
        k = k.reshape(n, t, self.heads, self.dh).transpose(1, 2)
        v = v.reshape(n, t, self.heads, self.dh).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (self.dh ** -0.5), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(n, t, d)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return self.head(x.mean(dim=1))


class StreamingKws(nn.Module):
    """A streaming keyword spotter: each call takes one MFCC frame [1, 40, 1] and the previous
    frames' state [1, 40, 2], runs a causal Conv1d over the 3 frames, and returns the logits and
    the new state (the last two frames): the state lives outside the model, as ONNX needs."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(40, 32, 3, bias=False)
        self.bn = nn.BatchNorm1d(32)
        self.fc = nn.Linear(32, 12)

    def forward(self, frame, state):
        window = torch.cat([state, frame], dim=2)
        h = F.relu(self.bn(self.conv(window)))
        return self.fc(torch.flatten(h, 1)), window[:, :, 1:]


# -- export ---------------------------------------------------------------------------------------
def export(name, build, inputs, input_names, output_names, dynamic=None, seed=0, dead=0,
           calib=None, minus_one_batch=False):
    """Randomise BN, export to ONNX (opset 17, TorchScript exporter; TrainingMode.PRESERVE on an
    eval-mode model keeps BatchNormalization nodes instead of folding them at export, as
    exports made with do_constant_folding off or from other frameworks have them), check with
    onnxruntime against PyTorch, and save the model and its calibration data."""
    import onnx
    import onnxruntime as ort

    torch.manual_seed(seed)  # before building: the weights are reproducible
    model = build()
    randomise_batchnorm(model, seed, dead)
    model.eval()
    path = OUT / f"{name}.onnx"
    torch.onnx.export(model, tuple(torch.from_numpy(a) for a in inputs), str(path),
                      input_names=input_names, output_names=output_names, opset_version=OPSET,
                      dynamic_axes=dynamic, do_constant_folding=True, dynamo=False,
                      training=torch.onnx.TrainingMode.PRESERVE)  # keeps BatchNormalization
    m = onnx.load(str(path))
    if minus_one_batch:  # Paddle2ONNX writes unknown dims as -1, not as a named parameter
        for v in list(m.graph.input) + list(m.graph.output):
            dim = v.type.tensor_type.shape.dim[0]
            dim.Clear()
            dim.dim_value = -1
    m.producer_name, m.producer_version = "qconvert-corpus", "1"
    onnx.save(m, str(path))
    with torch.no_grad():
        want = model(*(torch.from_numpy(a) for a in inputs))
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = ort.InferenceSession(str(path), so).run(None, dict(zip(input_names, inputs)))
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4)
    if calib is not None:  # float16 halves the file; the loader widens it to float32 exactly
        np.save(OUT / f"{name}_calib.npy", calib.astype(np.float16))
    print(f"{name}: {path.stat().st_size} bytes, {len(m.graph.node)} nodes")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    img64 = smooth_images(rng, 4, 3, 64, 64)
    img32 = smooth_images(rng, SAMPLES, 3, 32, 32)
    batch = {0: "batch"}
    export("shufflenet_v2", shufflenet, [img64[:1]], ["image"], ["logits"],
           {"image": batch, "logits": batch}, seed=1, calib=img64)
    export("resnext_small", ResNeXtSmall, [img32[:1]], ["image"], ["logits"],
           {"image": batch, "logits": batch}, seed=2, dead=3, calib=img32)
    export("mobilenet_v3_small", mobilenet_v3_small, [img64[:1]], ["image"], ["logits"],
           seed=3, calib=img64)
    export("mobilenet_v2_paddle", mobilenet_v2_paddle, [img64[:1]], ["x"], ["save_infer_model"],
           seed=4, calib=img64, minus_one_batch=True)
    export("regnet_small", regnet, [img32[:1]], ["image"], ["logits"], seed=5, calib=img32)
    export("unet_small", UNetSmall, [img32[:1]], ["image"], ["mask"],
           {"image": batch, "mask": batch}, seed=6, calib=img32)
    hw = {0: "batch", 2: "height", 3: "width"}
    export("fpn_small", FPNSmall, [img32[:1]], ["image"], ["p1", "p2", "p3"],
           {"image": hw, "p1": hw, "p2": hw, "p3": hw}, seed=7, calib=img32)
    mfcc = mfcc_like(rng, SAMPLES, 40, 49)
    export("kws_conv1d", KwsConv1d, [mfcc[:1]], ["mfcc"], ["logits"],
           {"mfcc": batch, "logits": batch}, seed=8, calib=mfcc)
    tokens = rng.standard_normal((SAMPLES, 16, 32)).astype(np.float32)
    export("tiny_transformer", TinyTransformer, [tokens[:1]], ["tokens"], ["logits"],
           seed=9, calib=tokens)
    frames = mfcc_like(rng, SAMPLES, 40, 3)
    np.savez(OUT / "streaming_kws_onnx_calib.npz", frame=frames[:, :, 2:].astype(np.float16),
             state=frames[:, :, :2].astype(np.float16))
    export("streaming_kws_onnx", StreamingKws, [frames[:1, :, 2:], frames[:1, :, :2]],
           ["frame", "state"], ["logits", "next_state"], seed=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
