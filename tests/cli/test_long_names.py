"""Layer names longer than the table's 32 columns (Keras names all start `functional_1/...`):
`inspect`, `quantize` and `export-c` print them whole on a line of their own, never cut
(issue 27, item 4)."""

from __future__ import annotations

import numpy as np
import onnx
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from qconvert.cli.app import main

LONG = "functional_1/" + "inverted_residual_block/" * 3 + "conv2d_17/Conv2D"


def _model(path):
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 1, 3, 3))
                                .astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], [LONG + "/c"], name=LONG, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", [LONG + "/c"], [LONG + "/Relu"], name=LONG + "/relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, 8, 8])], [helper.make_tensor_value_info(
            LONG + "/Relu", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_long_names_printed_whole(tmp_path):
    model = _model(tmp_path / "m.onnx")
    runner = CliRunner()
    outputs = [runner.invoke(main, ["inspect", str(model)]).stdout]
    q = runner.invoke(main, ["quantize", str(model), "--calibration-random", "8", "-o",
                             str(tmp_path / "q.tflite")])
    assert q.exit_code == 0, q.output
    outputs.append(q.stdout)
    e = runner.invoke(main, ["export-c", str(tmp_path / "q.tflite"), "-o", str(tmp_path / "c")])
    assert e.exit_code == 0, e.output
    outputs.append(e.stdout)
    for text in outputs:
        names = [line.strip() for line in text.splitlines()
                 if line.strip().startswith("functional_1/")]
        assert names and all(n.startswith(LONG) for n in names), text  # whole, never cut
        assert not any(line.startswith("functional_1/inverted_residual_b ")
                       for line in text.splitlines())
