"""Float TFLite test graphs: `TfNet` builds a float NHWC IR graph and serializes it for the
TFLite writer (LiteRT is the oracle in the tests that use it); shared by the fusion, quantize
and CLI reliability tests."""

from __future__ import annotations

import numpy as np

from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import serialize

SPATIAL = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0],
           "activation": "NONE"}


class TfNet:
    """Builds an IR graph for the TFLite writer (the runtimes below are the oracle)."""

    def __init__(self, seed=0):
        self.g = Graph("main")
        self.rng = np.random.default_rng(seed)

    def input(self, name, shape):
        self.g.add_tensor(Tensor(name, tuple(shape), "float32"))
        self.g.inputs.append(name)
        return name

    def const(self, name, shape, low=None):
        a = (self.rng.standard_normal(shape) if low is None
             else self.rng.uniform(low, 2.0, shape)).astype(np.float32)
        self.g.add_tensor(Tensor(name, tuple(shape), "float32", a))
        return name

    def node(self, op, ins, out, shape, **attrs):
        self.g.add_tensor(Tensor(out, tuple(shape), "float32"))
        self.g.nodes.append(Node(op, list(ins), [out], attrs, out))
        return out

    def conv(self, x, cout, out, **extra):
        cin = self.g.tensors[x].shape[3]
        n, h, w = self.g.tensors[x].shape[:3]
        wt = self.const(out + "_w", (cout, 3, 3, cin))
        bias = self.const(out + "_b", (cout,))  # LiteRT's CONV_2D requires a bias
        return self.node("Conv2D", [x, wt, bias], out, (n, h - 2, w - 2, cout),
                         **dict(SPATIAL, kernel_shape=[3, 3], group=1, **extra))

    def build(self, outputs) -> bytes:
        self.g.outputs = list(outputs)
        model = Model("tflite", [self.g])
        model.verify()
        return serialize(model)
