"""Build a ResNet-50-shaped ONNX model with unfused BatchNormalization and random weights.

No torch needed: the graph is written with onnx.helper. 53 Conv + 53 BatchNormalization + ReLU,
bottleneck blocks [3, 4, 6, 3], global average pool and a 1000-way Gemm: about 100 MB of float32
weights, like a PyTorch export of torchvision's resnet50 before fusion.

    python bench/resnet50_onnx.py bench/out/resnet50.onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Net:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, base, array):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(self, x, cin, cout, k, stride=1, relu=True):
        w = self.const("w", self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / (cin * k * k)))
        c = self.name("conv")
        self.nodes.append(helper.make_node("Conv", [x, w], [c], kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[k // 2] * 4))
        params = [self.const("gamma", self.rng.uniform(0.5, 1.5, cout)),
                  self.const("beta", self.rng.normal(0, 0.1, cout)),
                  self.const("mean", self.rng.normal(0, 0.1, cout)),
                  self.const("var", self.rng.uniform(0.5, 1.5, cout))]
        y = self.name("bn")
        self.nodes.append(helper.make_node("BatchNormalization", [c] + params, [y], epsilon=1e-5))
        if relu:
            r = self.name("relu")
            self.nodes.append(helper.make_node("Relu", [y], [r]))
            return r
        return y

    def bottleneck(self, x, cin, mid, stride):
        cout = mid * 4
        h = self.conv_bn(x, cin, mid, 1)
        h = self.conv_bn(h, mid, mid, 3, stride)
        h = self.conv_bn(h, mid, cout, 1, relu=False)
        skip = x if (cin == cout and stride == 1) else self.conv_bn(x, cin, cout, 1, stride, relu=False)
        s, r = self.name("add"), self.name("relu")
        self.nodes += [helper.make_node("Add", [h, skip], [s]), helper.make_node("Relu", [s], [r])]
        return r, cout


def build(seed=0) -> onnx.ModelProto:
    net = _Net(seed)
    x = net.conv_bn("input", 3, 64, 7, 2)
    p = net.name("pool")
    net.nodes.append(helper.make_node("MaxPool", [x], [p], kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[1, 1, 1, 1]))
    x, c = p, 64
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            x, c = net.bottleneck(x, c, mid, stride if i == 0 else 1)
    g, f = net.name("gap"), net.name("flat")
    w = net.const("fc_w", net.rng.standard_normal((1000, c)) * 0.01)
    b = net.const("fc_b", np.zeros(1000))
    net.nodes += [helper.make_node("GlobalAveragePool", [x], [g]),
                  helper.make_node("Flatten", [g], [f], axis=1),
                  helper.make_node("Gemm", [f, w, b], ["logits"], transB=1)]
    graph = helper.make_graph(
        net.nodes, "resnet50",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="qconvert-bench")
    model.ir_version = 8
    return model


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out/resnet50.onnx")
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(build(), str(out))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
