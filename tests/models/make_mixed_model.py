"""One-time generator (not a test): `tests/models/int16/mixed_int8_int16.tflite`, a model with
int8 layers and 16x8 layers joined by QUANTIZE int8 <-> int16, the shape of model
`qconvert quantize --int16-layers` writes.

The TFLite converter cannot make such a model, so `make_int16_models.py` (TensorFlow) converts
three parts and this script (qconvert's own reader and writer, no TensorFlow) joins them:

    int8 input -> [mixed_head_int8: CONV_2D] -> QUANTIZE int8->int16
        -> [mixed_body_16x8: DEPTHWISE_CONV_2D, CONV_2D, ADD, AVERAGE_POOL_2D]
        -> QUANTIZE int16->int8 -> [mixed_tail_int8: RESHAPE, FULLY_CONNECTED, SOFTMAX]
        -> int8 output

Each QUANTIZE writes the quantization the next part's input expects, so each part computes
what it computed alone, on requantized values.

    /work/venvs/<venv with qconvert>/bin/python tests/models/make_mixed_model.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from qconvert.ir import Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize

HERE = Path(__file__).resolve().parent / "int16"
PARTS = ("mixed_head_int8", "mixed_body_16x8", "mixed_tail_int8")


def main() -> int:
    graphs = []
    for k, part in enumerate(PARTS):
        g = load_model(HERE / f"{part}.tflite").graph
        renamed = {name: f"p{k}/{name}" for name in g.tensors}
        for node in g.nodes:
            node.inputs = [None if n is None else renamed[n] for n in node.inputs]
            node.outputs = [None if n is None else renamed[n] for n in node.outputs]
            node.name = f"p{k}/{node.name}" if node.name else node.name
        g.tensors = {renamed[n]: t for n, t in g.tensors.items()}
        for name, t in g.tensors.items():
            t.name = name
        g.inputs = [renamed[n] for n in g.inputs]
        g.outputs = [renamed[n] for n in g.outputs]
        graphs.append(g)
    main_graph = graphs[0]
    for g in graphs[1:]:
        for t in g.tensors.values():
            main_graph.add_tensor(t)
    nodes = list(graphs[0].nodes)
    for prev, nxt in zip(graphs, graphs[1:]):
        src, dst = prev.outputs[0], nxt.inputs[0]
        nodes.append(Node("Quantize", [src], [dst], {}, name=f"requantize {src} -> {dst}"))
        nodes.extend(nxt.nodes)
    main_graph.nodes = nodes
    main_graph.inputs = graphs[0].inputs
    main_graph.outputs = graphs[-1].outputs
    model = load_model(HERE / f"{PARTS[0]}.tflite")
    model = Model(model.format, [main_graph], {k: v for k, v in model.meta.items()
                                               if k != "signature_defs"})
    model.verify()
    out = HERE / "mixed_int8_int16.tflite"
    data = serialize(model)
    out.write_bytes(data)
    print(f"{out.name}: {len(data)} bytes: {' '.join(n.op for n in nodes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
