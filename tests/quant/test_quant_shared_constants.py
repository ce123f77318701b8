"""Quantizing asks the Graph API who reads a value (`Graph.reader_count`, `producer`,
`replace_uses`): a weight and a bias read by two layers give each layer its own int8 copy (the
layers' bias scales differ), and with `--io-type float32` the QUANTIZE / DEQUANTIZE at the edges
keep the float names. Oracles: TFLite Micro runs the int8 model bit for bit like our integer
executor, and LiteRT (reference kernels) runs the float model the int8 one must stay close to."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import random_inputs, run_litert, run_tflm
from qconvert.cli.app import main
from qconvert.executor.int_executor import run_int8
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model, serialize

SPATIAL = {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0],
           "activation": "NONE", "group": 1, "kernel_shape": [1, 1]}


def _shared_weights_model() -> bytes:
    """x -> CONV_2D "c1" (w, b) -> RELU "r" -> CONV_2D "y" (the same w, b), NHWC, 4 channels."""
    rng = np.random.default_rng(5)
    g = Graph("main", inputs=["x"], outputs=["y"])
    for name in ("x", "c1", "r", "y"):
        g.add_tensor(Tensor(name, (1, 5, 5, 4), "float32"))
    g.add_tensor(Tensor("w", (4, 1, 1, 4), "float32",
                        rng.standard_normal((4, 1, 1, 4)).astype(np.float32)))
    g.add_tensor(Tensor("b", (4,), "float32", rng.standard_normal(4).astype(np.float32)))
    g.nodes = [Node("Conv2D", ["x", "w", "b"], ["c1"], dict(SPATIAL), "c1"),
               Node("Relu", ["c1"], ["r"], {}, "r"),
               Node("Conv2D", ["r", "w", "b"], ["y"], dict(SPATIAL), "y")]
    model = Model("tflite", [g])
    model.verify()
    return serialize(model)


@pytest.mark.parametrize("io_type", ["int8", "float32"])
def test_shared_weight_and_bias_get_one_int8_copy_per_layer(tmp_path, io_type):
    src, out = tmp_path / "m.tflite", tmp_path / "m_int8.tflite"
    src.write_bytes(_shared_weights_model())
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(6).standard_normal((16, 5, 5, 4)).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--no-fuse",
                                       "--io-type", io_type, "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    graph.verify()
    convs = [n for n in graph.nodes if n.op == "Conv2D"]
    assert len(convs) == 2
    weights = [n.inputs[1] for n in convs]
    biases = [n.inputs[2] for n in convs]
    assert len(set(weights)) == 2 and len(set(biases)) == 2  # one copy per layer
    assert graph.reader_count("w") == graph.reader_count("b") == 0  # the float ones unread
    for w, b in zip(weights, biases):
        assert graph.tensors[w].dtype == "int8" and graph.tensors[b].dtype == "int32"
    assert not np.array_equal(graph.tensors[biases[0]].quant.scale,
                              graph.tensors[biases[1]].quant.scale)
    assert graph.inputs == ["x"] and graph.outputs == ["y"]
    if io_type == "float32":
        assert graph.nodes[0].op == "Quantize" and graph.nodes[-1].op == "Dequantize"
        assert graph.tensors["x"].dtype == graph.tensors["y"].dtype == "float32"
    for seed in (0, 1):
        tflm = run_tflm(out.read_bytes(), seed)[0]
        if io_type == "int8":
            xq = random_inputs([((1, 5, 5, 4), np.int8)], seed)[0]  # what run_tflm feeds
            np.testing.assert_array_equal(tflm, run_int8(graph, {"x": xq})["y"])
        else:
            want = run_litert(src.read_bytes(), seed)[0]  # the same float inputs
            err = np.sum((tflm - want) ** 2) / np.sum(want ** 2)
            assert err < 1e-3, err
