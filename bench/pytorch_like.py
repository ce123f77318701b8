"""ONNX models shaped like PyTorch exports of torchvision's ResNet-50 and MobileNetV2, built with
onnx.helper and numpy only (no torch).

They imitate `torch.onnx.export(model.eval(), x, f, opset_version=13, do_constant_folding=False,
input_names=["input"], output_names=["output"])` of the torchvision models *before* any fusion:

- node names from the module hierarchy ("/layer1/layer1.0/conv1/Conv", "/layer1/layer1.0/relu_1/Relu",
  "/features/features.1/conv/conv.0/conv.0.0/Conv", "/classifier/classifier.1/Gemm"), outputs named
  "<node name>_output_0", initializers named after the state dict ("layer1.0.bn1.running_var");
- Conv without bias followed by BatchNormalization (epsilon 1e-5, momentum 0.9), then Relu, or for
  MobileNetV2 ReLU6 as Clip whose min/max (0 and 6) come from two Constant nodes (or initializers,
  `clip_inputs="initializer"`); depthwise convs are Conv with group = channels;
- ResNet-50: stem conv 7x7/2 + MaxPool, bottlenecks [3, 4, 6, 3] (stride on the 3x3 conv, v1.5),
  downsample conv+BN on the shortcut, residual Add then Relu; MobileNetV2: inverted residual blocks
  (expand 1x1, depthwise 3x3, linear 1x1) with residual Add, final 1x1 conv to 1280;
  both end in GlobalAveragePool, Flatten, Gemm (transB=1) to 1000 classes;
- value_info for every intermediate tensor, as torch's exporter writes after shape inference.

Weights are He-initialised; BatchNorm statistics are those a trained network would have: the
generator runs the network eagerly in numpy on a batch of N(0, 1) "images" while it builds it and
sets each BN's running mean / variance to the (slightly perturbed) statistics of its input, with
random gamma / beta. Activations stay O(1) through the whole net and the logits are O(1), so a
before/after comparison with a relative tolerance of 1e-4 means something.

`width` scales the channel counts (rounded to multiples of 8, as torchvision's width_mult does) and
`resolution` the input size, so tests can build small versions of the same architecture quickly:

    resnet50(width=0.25, resolution=64)      # ~1.5 MB, well under a second
    mobilenet_v2(width=0.5, resolution=64)

Command line (writes atomically):

    python bench/pytorch_like.py resnet50 bench/out/resnet50.onnx [--width 1.0] [--resolution 224]
    python bench/pytorch_like.py mobilenet_v2 bench/out/mobilenet_v2.onnx

This file imports only numpy and onnx, so tests can load it by path:

    spec = importlib.util.spec_from_file_location("pytorch_like", ROOT / "bench" / "pytorch_like.py")
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

__all__ = ["resnet50", "mobilenet_v2", "save", "make_divisible"]

OPSET = 13
BN_EPS = 1e-5
BN_MOMENTUM = 0.9  # torch exports 1 - momentum(0.1)


def make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's `_make_divisible`: round to the nearest multiple, never down by more than 10%."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _unqualified(qualname: str) -> str:
    """torch.onnx's scope component of a module: its name from the last non-numeric atom on
    ("layer1.0" -> "layer1.0", "layer1.0.conv1" -> "conv1", "features.1.conv.0.0" -> "conv.0.0")."""
    atoms = qualname.split(".")
    last = max((i for i, a in enumerate(atoms) if not a.isdigit()), default=0)
    return ".".join(atoms[last:])


# ---------------------------------------------------------------------------------------------
# numpy kernels for the eager forward (NCHW, float32)

def _np_conv(x, w, stride, pad, group):
    n, c, h, wd = x.shape
    o, cg, k, _ = w.shape
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (x.shape[2] - k) // stride + 1
    wo = (x.shape[3] - k) // stride + 1
    if group == 1:
        if k == 1:
            xs = x[:, :, ::stride, ::stride][:, :, :ho, :wo].reshape(n, c, ho * wo)
            return np.matmul(w.reshape(o, c), xs).reshape(n, o, ho, wo)
        cols = sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride][:, :, :ho, :wo]
        cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * k * k)
        y = cols @ w.reshape(o, -1).T
        return np.ascontiguousarray(y.reshape(n, ho, wo, o).transpose(0, 3, 1, 2))
    if group == c == o and cg == 1:
        y = np.zeros((n, c, ho, wo), np.float32)
        for i in range(k):
            for j in range(k):
                y += (x[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
                      * w[:, 0, i, j][None, :, None, None])
        return y
    raise NotImplementedError("grouped conv other than depthwise")


def _np_maxpool(x, k, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    ho = (x.shape[2] - k) // stride + 1
    wo = (x.shape[3] - k) // stride + 1
    y = np.full(x.shape[:2] + (ho, wo), -np.inf, np.float32)
    for i in range(k):
        for j in range(k):
            np.maximum(y, x[:, :, i:i + stride * (ho - 1) + 1:stride,
                            j:j + stride * (wo - 1) + 1:stride], out=y)
    return y


# ---------------------------------------------------------------------------------------------
# eager tracer: builds the ONNX graph and runs it in numpy at the same time

class _T:
    """A traced tensor: ONNX name and its numpy value on the calibration batch."""

    __slots__ = ("name", "value")

    def __init__(self, name, value):
        self.name, self.value = name, value


class _Tracer:
    def __init__(self, seed: int, resolution: int, clip_inputs: str = "constant"):
        if resolution < 32:
            raise ValueError(f"resolution must be >= 32, got {resolution}")
        if clip_inputs not in ("constant", "initializer"):
            raise ValueError(f"clip_inputs must be 'constant' or 'initializer', got {clip_inputs!r}")
        self.rng = np.random.default_rng(seed)
        self.clip_inputs = clip_inputs
        self.nodes, self.inits, self.value_info = [], [], []
        self.node_names, self.calls = Counter(), Counter()
        self.n_clip_consts = 0
        # enough calibration images that even the last 7x7 (or 1x1) stage sees >= 64 positions
        last = math.ceil(resolution / 32) ** 2
        batch = max(1, math.ceil(64 / last))
        calib = np.random.default_rng([seed, 1]).standard_normal(
            (batch, 3, resolution, resolution)).astype(np.float32)
        self.input = _T("input", calib)

    # -- naming ---------------------------------------------------------------------------------
    def scope(self, qualname: str) -> str:
        """Scope path of one call of module `qualname`; a module called again gets "_1", "_2"."""
        if not qualname:
            return ""
        atoms = qualname.split(".")
        comps = [_unqualified(".".join(atoms[:i + 1])) for i in range(len(atoms))]
        n = self.calls[qualname]
        self.calls[qualname] += 1
        if n:
            comps[-1] = f"{comps[-1]}_{n}"
        return "/" + "/".join(comps)

    def _node(self, scope, op, inputs, val, **attrs):
        base = f"{scope}/{op}"
        k = self.node_names[base]
        self.node_names[base] += 1
        name = base if k == 0 else f"{base}_{k}"
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        shape = [1] + list(val.shape[1:]) if val.ndim else []
        self.value_info.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, shape))
        return _T(out, val)

    def param(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    # -- modules --------------------------------------------------------------------------------
    def conv(self, qualname, x, cout, k, stride=1, group=1):
        cin = x.value.shape[1]
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * math.sqrt(2.0 / fan_in)
             ).astype(np.float32)
        wname = self.param(f"{qualname}.weight", w)
        pad = (k - 1) // 2
        y = _np_conv(x.value, w, stride, pad, group)
        return self._node(self.scope(qualname), "Conv", [x.name, wname], y,
                          dilations=[1, 1], group=group, kernel_shape=[k, k],
                          pads=[pad] * 4, strides=[stride] * 2)

    def bn(self, qualname, x, gamma_range=(0.5, 1.5), hot=0.0):
        """BatchNormalization with running stats from `x`; a fraction `hot` of the channels gets a
        large gamma and beta (channels that a following ReLU6 saturates, as in trained nets)."""
        v = x.value
        c = v.shape[1]
        m = v.mean(axis=(0, 2, 3), dtype=np.float64)
        var = v.var(axis=(0, 2, 3), dtype=np.float64)
        var = np.maximum(var, 1e-2 * var.mean() + 1e-12)
        # running statistics of a trained net: close to, not exactly, this batch's statistics
        mean = m + 0.05 * np.sqrt(var) * self.rng.standard_normal(c)
        var = var * self.rng.uniform(0.8, 1.25, c)
        gamma = self.rng.uniform(*gamma_range, c)
        beta = self.rng.normal(0.0, 0.2, c)
        if hot:
            sel = self.rng.random(c) < hot
            gamma[sel] = self.rng.uniform(1.5, 3.0, sel.sum())
            beta[sel] = self.rng.uniform(2.0, 5.0, sel.sum())
        names = [self.param(f"{qualname}.{p}", a) for p, a in
                 (("weight", gamma), ("bias", beta), ("running_mean", mean), ("running_var", var))]
        f32 = [np.float32(a) for a in (gamma, beta, mean, var)]
        s = (f32[0] / np.sqrt(f32[3] + np.float32(BN_EPS))).astype(np.float32)
        y = ((v - f32[2][None, :, None, None]) * s[None, :, None, None]
             + f32[1][None, :, None, None]).astype(np.float32)
        return self._node(self.scope(qualname), "BatchNormalization", [x.name] + names, y,
                          epsilon=BN_EPS, momentum=BN_MOMENTUM)

    def relu(self, qualname, x):
        return self._node(self.scope(qualname), "Relu", [x.name], np.maximum(x.value, 0))

    def relu6(self, qualname, x):
        scope = self.scope(qualname)
        bounds = []
        for bound in (0.0, 6.0):
            if self.clip_inputs == "constant":
                t = helper.make_tensor("value", TensorProto.FLOAT, [], [bound])
                bounds.append(self._node(scope, "Constant", [], np.float32(bound), value=t).name)
            else:
                name = f"onnx::Clip_{1000 + self.n_clip_consts}"
                self.n_clip_consts += 1
                bounds.append(self.param(name, np.float32(bound)))
        return self._node(scope, "Clip", [x.name] + bounds, np.clip(x.value, 0, 6))

    def add(self, scope, a, b):
        return self._node(scope, "Add", [a.name, b.name], a.value + b.value)

    def maxpool(self, qualname, x):
        return self._node(self.scope(qualname), "MaxPool", [x.name], _np_maxpool(x.value, 3, 2, 1),
                          ceil_mode=0, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])

    def head(self, pool_scope, fc_qualname, x, num_classes):
        g = self._node(pool_scope, "GlobalAveragePool", [x.name],
                       x.value.mean(axis=(2, 3), keepdims=True))
        f = self._node("", "Flatten", [g.name], g.value.reshape(g.value.shape[0], -1), axis=1)
        cin = f.value.shape[1]
        bound = 1 / math.sqrt(cin)  # nn.Linear's default init
        w = self.rng.uniform(-bound, bound, (num_classes, cin)).astype(np.float32)
        b = self.rng.uniform(-bound, bound, num_classes).astype(np.float32)
        names = [self.param(f"{fc_qualname}.weight", w), self.param(f"{fc_qualname}.bias", b)]
        scope = self.scope(fc_qualname)
        self.nodes.append(helper.make_node("Gemm", [f.name] + names, ["output"], name=f"{scope}/Gemm",
                                           alpha=1.0, beta=1.0, transB=1))
        return _T("output", f.value @ w.T + b)

    def model(self, graph_doc: str, out: _T) -> onnx.ModelProto:
        shape = [1] + list(self.input.value.shape[1:])
        graph = helper.make_graph(
            self.nodes, "main_graph",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, out.value.shape[1]])],
            self.inits, value_info=self.value_info)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="pytorch", producer_version="2.1.0",
                                  doc_string=f"synthetic, bench/pytorch_like.py: {graph_doc}")
        model.ir_version = 8
        return model


# ---------------------------------------------------------------------------------------------
# the two architectures

def resnet50(width: float = 1.0, resolution: int = 224, seed: int = 0, *,
             num_classes: int = 1000) -> onnx.ModelProto:
    """torchvision resnet50 (v1.5) as torch.onnx.export writes it at opset 13 without constant
    folding: 53 Conv (no bias) + 53 BatchNormalization, 49 Relu, 16 Add, MaxPool,
    GlobalAveragePool, Flatten, Gemm. `width` scales every channel count (1.0: ~25.6M parameters,
    ~102 MB); input "input" [1, 3, resolution, resolution], output "output" [1, num_classes]."""
    t = _Tracer(seed, resolution)

    def conv_bn(conv, bn, x, cout, k, stride=1, gamma_range=(0.5, 1.5)):
        return t.bn(bn, t.conv(conv, x, cout, k, stride), gamma_range)

    stem = make_divisible(64 * width)
    x = t.relu("relu", conv_bn("conv1", "bn1", t.input, stem, 7, 2))
    x = t.maxpool("maxpool", x)
    cin = stem
    for li, (planes, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2),
                                                   (512, 3, 2)), start=1):
        mid = make_divisible(planes * width)
        cout = mid * 4
        for bi in range(blocks):
            p = f"layer{li}.{bi}"
            s = stride if bi == 0 else 1
            h = t.relu(f"{p}.relu", conv_bn(f"{p}.conv1", f"{p}.bn1", x, mid, 1))
            h = t.relu(f"{p}.relu", conv_bn(f"{p}.conv2", f"{p}.bn2", h, mid, 3, s))
            # trained nets keep the last BN of a residual branch small (cf. zero_init_residual)
            h = conv_bn(f"{p}.conv3", f"{p}.bn3", h, cout, 1, gamma_range=(0.1, 0.5))
            if s != 1 or cin != cout:
                x = conv_bn(f"{p}.downsample.0", f"{p}.downsample.1", x, cout, 1, s)
            x = t.relu(f"{p}.relu", t.add(t.scope(p), h, x))
            cin = cout
    out = t.head("/avgpool", "fc", x, num_classes)
    return t.model(f"resnet50 width={width} resolution={resolution} seed={seed}", out)


_MBV2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                  (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(width: float = 1.0, resolution: int = 224, seed: int = 0, *,
                 num_classes: int = 1000, clip_inputs: str = "constant") -> onnx.ModelProto:
    """torchvision mobilenet_v2 as torch.onnx.export writes it at opset 13 without constant
    folding: 52 Conv (no bias; 17 depthwise with group = channels) + 52 BatchNormalization,
    35 Clip(0, 6) (ReLU6) whose bounds come from Constant nodes (`clip_inputs="constant"`, what
    torch writes) or from initializers (`clip_inputs="initializer"`), 10 residual Add, a final
    1x1 conv to 1280 (1280 * max(1, width)), GlobalAveragePool, Flatten, Gemm (transB=1).
    `width` is torchvision's width_mult; input "input" [1, 3, resolution, resolution]."""
    t = _Tracer(seed, resolution, clip_inputs)

    def cna(prefix, x, cout, k, stride=1, group=1):  # Conv2dNormActivation(..., ReLU6)
        x = t.conv(f"{prefix}.0", x, cout, k, stride, group)
        return t.relu6(f"{prefix}.2", t.bn(f"{prefix}.1", x, hot=0.1))

    cin = make_divisible(32 * width)
    last = make_divisible(1280 * max(1.0, width))
    x = cna("features.0", t.input, cin, 3, 2)
    idx = 1
    for expand, c, n, s in _MBV2_SETTINGS:
        cout = make_divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{idx}"
            hidden = int(round(cin * expand))
            h, j = x, 0
            if expand != 1:
                h = cna(f"{p}.conv.{j}", h, hidden, 1)
                j += 1
            h = cna(f"{p}.conv.{j}", h, hidden, 3, stride, group=hidden)
            h = t.conv(f"{p}.conv.{j + 1}", h, cout, 1)
            h = t.bn(f"{p}.conv.{j + 2}", h, gamma_range=(0.2, 0.8) if stride == 1 and cin == cout
                     else (0.5, 1.5))
            x = t.add(t.scope(p), x, h) if stride == 1 and cin == cout else h
            cin = cout
            idx += 1
    x = cna(f"features.{idx}", x, last, 1)
    out = t.head("", "classifier.1", x, num_classes)
    return t.model(f"mobilenet_v2 width={width} resolution={resolution} seed={seed}", out)


# ---------------------------------------------------------------------------------------------

def save(model: onnx.ModelProto, path) -> Path:
    """onnx.save to a temporary file next to `path`, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        onnx.save(model, str(tmp))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("arch", choices=["resnet50", "mobilenet_v2"])
    ap.add_argument("out")
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    build = resnet50 if a.arch == "resnet50" else mobilenet_v2
    out = save(build(a.width, a.resolution, a.seed), a.out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    sys.exit(main())
