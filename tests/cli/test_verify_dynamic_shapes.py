"""`--verify` on a model whose height and width are dynamic: the random inputs take them as 1,
where a 3x3 VALID convolution cannot run; the command asks for `--input-shape` in one line
(it failed with "kernel [3, 3] larger than the padded input [1, 1]"), and with the shape it
verifies and writes. Oracle for the written model: LiteRT."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from helpers.oracles import litert_invoke
from qconvert.cli import main
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import serialize


def _dynamic_hw_model() -> bytes:
    rng = np.random.default_rng(2)
    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, None, None, 3), "float32"))
    g.add_tensor(Tensor("w", (4, 3, 3, 3), "float32",
                        rng.standard_normal((4, 3, 3, 3)).astype(np.float32)))
    g.add_tensor(Tensor("b", (4,), "float32", np.zeros(4, np.float32)))
    g.add_tensor(Tensor("y", (1, None, None, 4), "float32"))
    g.nodes = [Node("Conv2D", ["x", "w", "b"], ["y"],
                    {"layout": "NHWC", "strides": [1, 1], "dilations": [1, 1],
                     "pads": [0, 0, 0, 0], "activation": "NONE", "group": 1,
                     "kernel_shape": [3, 3]}, "y")]
    return serialize(Model("tflite", [g]))


def test_verify_with_dynamic_hw_asks_for_input_shape(tmp_path):
    src = tmp_path / "dyn.tflite"
    src.write_bytes(_dynamic_hw_model())
    for command in ("convert", "fuse"):
        out = tmp_path / f"{command}.tflite"
        result = CliRunner().invoke(main, [command, str(src), "-o", str(out), "--verify", "2"])
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "--input-shape x:1,d1,d2,3" in lines[0], lines
        assert not out.exists()
    out = tmp_path / "fixed.tflite"
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--verify", "2",
                                       "--input-shape", "x:1,8,8,3"])
    assert result.exit_code == 0, result.output
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 3)).astype(np.float32)
    assert litert_invoke(out.read_bytes(), [x])[0].shape == (1, 6, 6, 4)


def test_verify_of_a_static_model_keeps_its_own_errors(tmp_path):
    """must not: a model with static shapes gets the --input-shape hint."""
    from qconvert.cli.verify import _AskForShapes
    from qconvert.errors import QConvertError
    from qconvert.formats.model_io import load_model
    import pytest

    src = tmp_path / "dyn.tflite"
    src.write_bytes(_dynamic_hw_model())
    model = load_model(src)
    from qconvert.cli.input_shapes import apply_input_shapes, parse_input_shapes

    apply_input_shapes(model, parse_input_shapes(["x:1,8,8,3"]))
    with pytest.raises(QConvertError, match="^boom$"):
        with _AskForShapes(model):
            raise QConvertError("boom")
