"""TFLite sparse constants (the converter's sparsity format) are densified on read, with a
one-line notice, and written dense. Models are built here: qconvert's IR, the weights compressed
by `sparse_tflite` (block-sparse and plain CSR; int32, uint16 and uint8 index vectors) behind
TFLite's DENSIFY op, or read directly by an int8 FULLY_CONNECTED. Oracle: LiteRT runs the sparse
file (its own DENSIFY) and the dense file qconvert writes; TFLite Micro runs the int8 result."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.oracles import run_litert, run_tflm
from qconvert.cli import main
from qconvert.errors import QConvertError
from qconvert.ir import Graph, Model, Node, Tensor
from qconvert.formats.model_io import load_model
from qconvert.formats.tflite_reader import read_tflite
from helpers.sparse_tflite import densify_node, make_sparse, write_sparse


def _pruned(rng, shape, block=None, keep=0.3):
    """Weights with most entries (or most blocks, `block` = (rows, cols)) zero."""
    w = rng.standard_normal(shape).astype(np.float32)
    if block is None:
        return w * (rng.random(shape) < keep)
    r, c = block
    mask = rng.random((shape[0] // r, shape[1] // c)) < keep
    return w * np.kron(mask, np.ones((r, c))).astype(np.float32)


def _fc_model(order, block, formats, index_dtype=np.int32, w_block=None, seed=3):
    """x [1, 32] -> FULLY_CONNECTED(W [16, 32] sparse -> DENSIFY, b) -> RELU -> y [1, 16]."""
    rng = np.random.default_rng(seed)
    w = _pruned(rng, (16, 32), w_block)
    g = Graph("main", inputs=["x"], outputs=["y"])
    for name, shape, data in (("x", (1, 32), None), ("ws", (16, 32), w), ("w", (16, 32), None),
                              ("b", (16,), (0.1 * rng.standard_normal(16)).astype(np.float32)),
                              ("fc", (1, 16), None), ("y", (1, 16), None)):
        g.add_tensor(Tensor(name, shape, "float32", data))
    g.nodes = [densify_node("w", "ws", "w"),
               Node("FullyConnected", ["x", "w", "b"], ["fc"],
                    {"activation": "NONE", "keep_num_dims": False}, "fc"),
               Node("Relu", ["fc"], ["y"], {}, "y")]
    make_sparse(g, "ws", order, block, formats, index_dtype)
    return write_sparse(Model("tflite", [g])), w


CASES = {
    "csr": ([0, 1], {}, ["dense", "csr"], np.int32, None),
    "csr_uint8": ([0, 1], {}, ["dense", "csr"], np.uint8, None),
    "csr_columns_first": ([1, 0], {}, ["dense", "csr"], np.int32, None),
    "both_sparse_uint16": ([0, 1], {}, ["csr", "csr"], np.uint16, None),
    "block_1x4": ([0, 1, 2], {1: 4}, ["dense", "csr", "dense"], np.uint8, (1, 4)),
    "block_4x4": ([0, 1, 2, 3], {0: 4, 1: 4}, ["dense", "csr", "dense", "dense"], np.int32,
                  (4, 4)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sparse_weights_are_densified_as_litert_reads_them(case, tmp_path):
    order, block, formats, index_dtype, w_block = CASES[case]
    data, w = _fc_model(order, block, formats, index_dtype, w_block)
    model = read_tflite(data)
    assert [n.op for n in model.graph.nodes] == ["FullyConnected", "Relu"]  # DENSIFY folded
    np.testing.assert_array_equal(model.graph.tensors["w"].data, w)
    assert "densified" in model.meta["read_notices"][0]
    src, out = tmp_path / "sparse.tflite", tmp_path / "dense.tflite"
    src.write_bytes(data)
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.count("densified on read") == 1
    for seed in (0, 1):  # LiteRT on its own sparse file == LiteRT on qconvert's dense one
        np.testing.assert_array_equal(run_litert(out.read_bytes(), seed)[0],
                                      run_litert(data, seed)[0])
    import tflite as tfl
    fb = tfl.Model.GetRootAs(out.read_bytes(), 0).Subgraphs(0)
    assert all(fb.Tensors(i).Sparsity() is None for i in range(fb.TensorsLength()))


def test_quantize_and_export_of_a_sparse_model(tmp_path):
    """quantize works on the densified weights; TFLite Micro runs the int8 result close to
    LiteRT's float run of the sparse file."""
    data, _ = _fc_model([0, 1, 2], {1: 4}, ["dense", "csr", "dense"], np.int32, (1, 4))
    src, out = tmp_path / "sparse.tflite", tmp_path / "int8.tflite"
    src.write_bytes(data)
    np.save(tmp_path / "calib.npy",
            np.random.default_rng(2).standard_normal((64, 32)).astype(np.float32))
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--io-type", "float32",
                                       "--verify", "4", "-o", str(out)])
    assert result.exit_code == 0, result.output
    for seed in (0, 1):
        want = run_litert(data, seed)[0].astype(np.float64)
        got = run_tflm(out.read_bytes(), seed)[0]
        sqnr = 10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2))
        assert sqnr > 30, sqnr


def test_malformed_sparsity_is_one_error_naming_the_tensor(tmp_path):
    """must not: indices past the dimension, or too few stored values, read as garbage."""
    data, _ = _fc_model([0, 1], {}, ["dense", "csr"])
    model = read_tflite(data)  # the good one reads
    assert model.graph.tensors["w"].data.shape == (16, 32)
    rng = np.random.default_rng(3)
    g = Graph("main", inputs=["x"], outputs=["y"])
    w = _pruned(rng, (4, 8))
    for name, shape, d in (("x", (1, 8), None), ("ws", (4, 8), w), ("w", (4, 8), None),
                           ("y", (1, 4), None)):
        g.add_tensor(Tensor(name, shape, "float32", d))
    g.nodes = [densify_node("w", "ws", "w"),
               Node("FullyConnected", ["x", "w"], ["y"],
                    {"activation": "NONE", "keep_num_dims": False}, "fc")]
    make_sparse(g, "ws", [0, 1], {}, ["dense", "csr"])
    spec = g.tensors["ws"].extra["test_sparsity"]
    kind, size, seg, ind = spec["levels"][1]
    bad = ind.copy()
    bad[-1] = 8  # column 8 of an 8-column matrix
    spec["levels"][1] = (kind, size, seg, bad)
    with pytest.raises(QConvertError, match="'ws'.*indexes past dimension 1"):
        read_tflite(write_sparse(Model("tflite", [g])))
    spec["levels"][1] = (kind, size, seg, ind)
    g.tensors["ws"].data = g.tensors["ws"].data[:-1]
    with pytest.raises(QConvertError, match="'ws'.*stored values"):
        read_tflite(write_sparse(Model("tflite", [g])))
    src = tmp_path / "bad.tflite"
    src.write_bytes(write_sparse(Model("tflite", [g])))
    out = tmp_path / "o.tflite"
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_dense_model_has_no_notice(tmp_path):
    """must not: a model without sparse tensors gets the densify notice."""
    from qconvert.formats.model_io import serialize

    g = Graph("main", inputs=["x"], outputs=["y"])
    g.add_tensor(Tensor("x", (1, 4), "float32"))
    g.add_tensor(Tensor("y", (1, 4), "float32"))
    g.nodes = [Node("Relu", ["x"], ["y"], {}, "y")]
    src = tmp_path / "m.tflite"
    src.write_bytes(serialize(Model("tflite", [g])))
    assert "read_notices" not in load_model(src).meta
    result = CliRunner().invoke(main, ["inspect", str(src)])
    assert result.exit_code == 0 and "densified" not in result.output
