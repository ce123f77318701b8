"""The fast ONNX read/write paths are exact: large weights are numpy views of the file's bytes
(`onnx_reader.parse_onnx_lean`) and are spliced into the output without an intermediate protobuf
copy (`onnx_writer.serialized_chunks`).

Oracle: onnxruntime (optimizations off) on a reference model built independently with
`onnx.helper`. Covered: constants a pass replaced, renamed, removed or added; initializers that
are also graph inputs; external data (embedded in the output); repeated writes; the input file
left untouched; the wire layouts the lean parse hands to the full parse.
"""

from __future__ import annotations

import copy
import hashlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.oracles import SAMPLE_MODELS, TEST_MODELS, run_onnx
from qconvert.errors import QConvertError
from qconvert.ir import Node, Tensor
from qconvert.formats.model_io import load_model, serialize, write_atomic
from qconvert.formats.onnx_reader import (SMALL_INITIALIZER, parse_onnx, parse_onnx_lean, read_onnx,
                                          read_onnx_proto)
from qconvert.formats.onnx_wire import encode_varint
from qconvert.formats.onnx_writer import serialized_chunks, to_proto

N = 64  # a 64 x 64 float32 weight is 16 KB: over SMALL_INITIALIZER, so it takes the fast path


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _model(seed=0, extra=(), w_is_input=False) -> onnx.ModelProto:
    """y = ((x @ w) + b) @ c, with w and c large and b small; `extra` adds initializers."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(_f32(rng, N, N), "w"),
             numpy_helper.from_array(_f32(rng, N), "b"),
             numpy_helper.from_array(_f32(rng, N, N), "c"), *extra]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("MatMul", ["a", "c"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, N])]
    if w_is_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [N, N]))
    graph = helper.make_graph(nodes, "speed", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, N])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _write(tmp_path, proto, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(proto.SerializeToString() if isinstance(proto, onnx.ModelProto) else proto)
    return path


def _file_view(array, size: int) -> bool:
    """True when `array` is a view of a bytes object of `size` bytes (the file's), not a copy."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, bytes) and len(base) == size


def _initializers(data: bytes) -> dict:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(data).graph.initializer}


def _same_outputs(reference: bytes, written: bytes):
    for seed in range(2):
        before, after = run_onnx(reference, seed), run_onnx(written, seed)
        assert len(before) == len(after)
        for a, b in zip(before, after):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=0)


def _with_initializer(proto, name, array) -> onnx.ModelProto:
    """Copy of `proto` whose initializer `name` holds `array` (added if missing)."""
    ref = copy.deepcopy(proto)
    new = numpy_helper.from_array(np.ascontiguousarray(array), name)
    for t in ref.graph.initializer:
        if t.name == name:
            t.CopyFrom(new)
            return ref
    ref.graph.initializer.append(new)
    return ref


def _check_write(model, reference: onnx.ModelProto):
    """The written model runs like `reference`, is canonical protobuf and is reproducible."""
    written = serialize(model)
    assert serialize(model) == written
    assert written == to_proto(model).SerializeToString(deterministic=True)
    onnx.checker.check_model(onnx.load_from_string(written), full_check=True)
    _same_outputs(reference.SerializeToString(), written)
    return written


# -- the fast path is taken, and it is the plain parse's result ---------------------------------
def test_large_weights_are_views_of_the_bytes(tmp_path):
    path = _write(tmp_path, _model())
    data = path.read_bytes()
    g = read_onnx(data, path).graph
    assert _file_view(g.tensors["w"].data, len(data)) and _file_view(g.tensors["c"].data, len(data))
    assert not _file_view(g.tensors["b"].data, len(data))  # small: parsed normally
    for name in "wbc":
        assert not g.tensors[name].data.flags.writeable


def test_loaded_weights_are_arrays_of_their_own(tmp_path):
    """load_model maps the file and copies each large weight out of it (the file's bytes are
    never held beside them, and nothing keeps the map alive): each array owns its memory,
    equals the plain parse's and is read-only."""
    path = _write(tmp_path, _model())
    model = load_model(path)
    full = read_onnx_proto(parse_onnx(path.read_bytes()), path)
    for name in "wbc":
        data = model.graph.tensors[name].data
        assert not _file_view(data, path.stat().st_size)
        base = data
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        assert len(memoryview(base).cast("B")) == data.nbytes  # no shared buffer
        assert data.dtype == full.graph.tensors[name].data.dtype
        np.testing.assert_array_equal(data, full.graph.tensors[name].data)
        assert not data.flags.writeable
        with pytest.raises(ValueError):
            data[0] = 1
    assert serialize(model) == serialize(full)


SAMPLES = [TEST_MODELS / "digits_cnn.onnx", SAMPLE_MODELS / "digits_cnn.onnx",
           SAMPLE_MODELS / "opaque_ops.onnx"]


@pytest.mark.parametrize("path", SAMPLES, ids=[f"{p.parent.name}/{p.name}" for p in SAMPLES])
def test_lean_and_full_parse_agree(path):
    data = path.read_bytes()
    lean, full = read_onnx(data, path), read_onnx_proto(parse_onnx(data), path)
    assert list(lean.graph.tensors) == list(full.graph.tensors)
    for name, t in full.graph.tensors.items():
        u = lean.graph.tensors[name]
        assert (t.shape, t.dtype) == (u.shape, u.dtype)
        if t.data is not None:
            assert u.data.dtype == t.data.dtype
            np.testing.assert_array_equal(u.data, t.data)
    assert serialize(lean) == serialize(full)
    assert b"".join(serialized_chunks(lean)) == to_proto(lean).SerializeToString(
        deterministic=True)


# -- what passes do to constants ----------------------------------------------------------------
def test_replaced_constant_is_written_with_its_new_values(tmp_path):
    proto = _model()
    model = load_model(_write(tmp_path, proto))
    w = model.graph.tensors["w"]
    new = (np.asarray(w.data, np.float64) * -0.5).astype(np.float32).T  # new, non-contiguous
    w.data = new
    model.verify()
    written = _check_write(model, _with_initializer(proto, "w", new))
    inits = _initializers(written)
    np.testing.assert_array_equal(inits["w"], new)
    np.testing.assert_array_equal(inits["c"], numpy_helper.to_array(proto.graph.initializer[2]))


def test_renamed_constant(tmp_path):
    proto = _model()
    model = load_model(_write(tmp_path, proto))
    g = model.graph
    t = g.tensors.pop("w")
    t.name = "w_renamed"
    g.tensors[t.name] = t
    for node in g.nodes:
        node.inputs = ["w_renamed" if i == "w" else i for i in node.inputs]
    model.verify()
    written = _check_write(model, proto)
    inits = _initializers(written)
    assert "w" not in inits
    np.testing.assert_array_equal(inits["w_renamed"],
                                  numpy_helper.to_array(proto.graph.initializer[0]))


def test_removed_constant(tmp_path):
    from qconvert.passes import PassContext, run_passes

    rng = np.random.default_rng(1)
    unused = numpy_helper.from_array(_f32(rng, N, N), "unused")
    proto = _model(extra=[unused])
    path = _write(tmp_path, proto)
    model = read_onnx(path.read_bytes(), path)
    assert _file_view(model.graph.tensors["unused"].data, path.stat().st_size)
    run_passes(model, ["eliminate"], PassContext("onnx"))
    assert "unused" not in model.graph.tensors
    written = _check_write(model, proto)
    assert set(_initializers(written)) == {"w", "b", "c"}
    assert len(written) < len(proto.SerializeToString()) - N * N * 4


def test_new_constant(tmp_path):
    proto = _model()
    model = load_model(_write(tmp_path, proto))
    g = model.graph
    rng = np.random.default_rng(2)
    d = _f32(rng, N, N)  # large
    g.add_tensor(Tensor("d", (N, N), "float32", d))
    g.add_tensor(Tensor("y_pre", (2, N), "float32"))
    g.nodes[-1].outputs = ["y_pre"]
    g.nodes.append(Node("MatMul", ["y_pre", "d"], ["y"], name="extra"))
    model.verify()

    ref = _with_initializer(proto, "d", d)
    ref.graph.node[-1].output[0] = "y_pre"
    ref.graph.node.append(helper.make_node("MatMul", ["y_pre", "d"], ["y"]))
    written = _check_write(model, ref)
    np.testing.assert_array_equal(_initializers(written)["d"], d)


def test_initializer_that_is_also_a_graph_input(tmp_path):
    proto = _model(w_is_input=True)
    path = _write(tmp_path, proto)
    model = read_onnx(path.read_bytes(), path)
    assert model.meta["initializer_inputs"] == ["w"]
    assert model.graph.inputs == ["x"]
    assert _file_view(model.graph.tensors["w"].data, path.stat().st_size)
    written = _check_write(model, proto)
    out = onnx.load_from_string(written)
    assert [vi.name for vi in out.graph.input] == ["x", "w"]
    np.testing.assert_array_equal(_initializers(written)["w"],
                                  numpy_helper.to_array(proto.graph.initializer[0]))

    # replaced: still an input, with the new default value
    new = np.ascontiguousarray(model.graph.tensors["w"].data[::-1])
    model.graph.tensors["w"].data = new
    written = _check_write(model, _with_initializer(proto, "w", new))
    assert [vi.name for vi in onnx.load_from_string(written).graph.input] == ["x", "w"]
    np.testing.assert_array_equal(_initializers(written)["w"], new)


# -- external data -------------------------------------------------------------------------------
def _external(tmp_path):
    """`_model()` with b, c and w in one external file after a header: b and c with offset and
    length, w last with an offset only (it runs to the end of the file)."""
    proto = _model()
    external = copy.deepcopy(proto)
    by_name = {t.name: t for t in external.graph.initializer}
    blob = b"header--"
    for name in ("b", "c", "w"):
        t = by_name[name]
        raw = t.raw_data
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value="weights.bin")
        t.external_data.add(key="offset", value=str(len(blob)))
        if name != "w":
            t.external_data.add(key="length", value=str(len(raw)))
        blob += raw
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(blob)
    path = folder / "m.onnx"
    path.write_bytes(external.SerializeToString())
    return proto, path


def test_external_data_is_read_and_embedded(tmp_path):
    proto, path = _external(tmp_path)
    reference = onnx.load(str(path))  # onnx's own external-data loader
    assert _initializers(reference.SerializeToString()).keys() == {"w", "b", "c"}
    model = load_model(path)
    for t in proto.graph.initializer:
        np.testing.assert_array_equal(model.graph.tensors[t.name].data, numpy_helper.to_array(t))
        assert not model.graph.tensors[t.name].data.flags.writeable
    written = _check_write(model, reference)
    for t in onnx.load_from_string(written).graph.initializer:
        assert t.data_location == TensorProto.DEFAULT and not t.external_data
        assert t.raw_data
    _same_outputs(proto.SerializeToString(), written)


# -- determinism and the input file --------------------------------------------------------------
def test_same_model_serialized_twice_is_identical(tmp_path):
    proto = _model(w_is_input=True)
    path = _write(tmp_path, proto)
    model = load_model(path)
    first = serialize(model)
    assert serialize(model) == first
    assert b"".join(serialized_chunks(model)) == first
    again = tmp_path / "again.onnx"
    again.write_bytes(first)
    assert serialize(load_model(again)) == first
    assert serialize(load_model(path)) == first  # a second read of the input, too


def test_input_file_is_not_modified(tmp_path):
    proto, path = _external(tmp_path)
    plain = _write(tmp_path, _model(), "plain.onnx")
    files = [path, path.parent / "weights.bin", plain]
    digests = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    for source in (path, plain):
        model = load_model(source)
        model.graph.tensors["w"].data = np.zeros((N, N), np.float32)
        write_atomic(source.with_name("out.onnx"), serialize(model))
        del model
    assert [hashlib.sha256(f.read_bytes()).hexdigest() for f in files] == digests


# -- wire layouts the lean parse leaves to the full parse -----------------------------------------
def _key(number: int, wire_type: int = 2) -> bytes:
    return encode_varint(number << 3 | wire_type)


def _field(number: int, payload: bytes) -> bytes:
    return _key(number) + encode_varint(len(payload)) + payload


def test_graph_field_twice_merges_like_protobuf(tmp_path):
    """Two `graph` fields merge (initializers concatenate): the lean parse steps aside."""
    proto = _model()
    rng = np.random.default_rng(3)
    extra = onnx.GraphProto()
    extra.initializer.append(numpy_helper.from_array(_f32(rng, N, N), "unused"))
    data = proto.SerializeToString() + _field(7, extra.SerializeToString())
    assert parse_onnx_lean(data).payloads == {}
    model = load_model(_write(tmp_path, data))
    np.testing.assert_array_equal(model.graph.tensors["unused"].data,
                                  numpy_helper.to_array(extra.initializer[0]))
    np.testing.assert_array_equal(model.graph.tensors["w"].data,
                                  numpy_helper.to_array(proto.graph.initializer[0]))


def test_repeated_raw_data_field_last_one_wins(tmp_path):
    """A TensorProto with raw_data twice holds the last one, in protobuf, onnxruntime and here."""
    proto = _model()
    rng = np.random.default_rng(4)
    first, last = _f32(rng, N, N), _f32(rng, N, N)
    header = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[N, N]).SerializeToString()
    tensor = header + _field(9, first.tobytes()) + _field(9, last.tobytes())
    graph = copy.deepcopy(proto.graph)
    del graph.initializer[0]
    shell = copy.deepcopy(proto)
    shell.ClearField("graph")
    data = shell.SerializeToString() + _field(7, graph.SerializeToString() + _field(5, tensor))
    assert parse_onnx_lean(data).payloads  # still the fast path
    path = _write(tmp_path, data)
    model = load_model(path)
    np.testing.assert_array_equal(model.graph.tensors["w"].data, last)
    written = _check_write(model, _with_initializer(proto, "w", last))
    _same_outputs(data, written)


def test_other_storage_and_types(tmp_path):
    """Large float_data (not raw) and float16 / int64 raw weights read and write exactly."""
    rng = np.random.default_rng(5)
    proto = _model()
    w = numpy_helper.to_array(proto.graph.initializer[0])
    proto.graph.initializer[0].CopyFrom(helper.make_tensor("w", TensorProto.FLOAT, [N, N],
                                                           w.reshape(-1).tolist()))
    assert not proto.graph.initializer[0].raw_data
    half = _f32(rng, N, N).astype(np.float16)
    idx = rng.integers(0, N, (N, 16)).astype(np.int64)
    proto.graph.initializer.extend([numpy_helper.from_array(half, "half"),
                                    numpy_helper.from_array(idx, "idx")])
    proto.graph.node[-1].output[0] = "y0"
    proto.graph.node.extend([
        helper.make_node("Cast", ["half"], ["half32"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["y0", "half32"], ["y1"]),
        helper.make_node("Gather", ["y1", "idx"], ["y"], axis=1)])
    proto.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                 [2, N, 16]))
    onnx.checker.check_model(proto, full_check=True)
    payloads = parse_onnx_lean(proto.SerializeToString()).payloads
    assert sorted(payloads) == [2, 3, 4]  # c, half, idx; w (float_data) and b (small) are not
    path = _write(tmp_path, proto)
    model = read_onnx(path.read_bytes(), path)
    for name in ("half", "idx", "c"):
        assert _file_view(model.graph.tensors[name].data, path.stat().st_size)
    np.testing.assert_array_equal(model.graph.tensors["w"].data, w)
    written = _check_write(model, proto)
    inits = _initializers(written)
    np.testing.assert_array_equal(inits["half"], half)
    np.testing.assert_array_equal(inits["idx"], idx)


def test_bfloat16_initializer_is_kept_whole(tmp_path):
    """Dtypes numpy lacks keep their TensorProto; large ones are not left in the file buffer."""
    proto = _model()
    raw = np.random.default_rng(6).integers(0, 2**16, N * N, dtype=np.uint16).tobytes()
    bf = TensorProto(name="bf", data_type=TensorProto.BFLOAT16, dims=[N, N], raw_data=raw)
    proto.graph.initializer.append(bf)
    assert 3 not in parse_onnx_lean(proto.SerializeToString()).payloads
    model = load_model(_write(tmp_path, proto))
    assert model.graph.tensors["bf"].dtype == "bfloat16"
    out = {t.name: t for t in onnx.load_from_string(serialize(model)).graph.initializer}
    assert out["bf"].raw_data == raw and out["bf"].data_type == TensorProto.BFLOAT16


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.9])
def test_truncated_inside_a_weight_is_a_clean_error(tmp_path, cut):
    data = _model().SerializeToString()
    path = _write(tmp_path, data[: int(len(data) * cut)])
    with pytest.raises(QConvertError) as info:
        load_model(path)
    assert str(path) in str(info.value)


def test_size_mismatch_of_a_large_weight_is_refused(tmp_path):
    proto = _model()
    proto.graph.initializer[0].raw_data += b"\0" * 4
    assert len(proto.graph.initializer[0].raw_data) > SMALL_INITIALIZER
    with pytest.raises(QConvertError, match="holds 16388 bytes"):
        load_model(_write(tmp_path, proto))


def test_nan_in_a_large_weight_is_refused(tmp_path):
    proto = _model()
    w = numpy_helper.to_array(proto.graph.initializer[0]).copy()
    w[5, 7] = np.inf
    proto.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "w"))
    with pytest.raises(QConvertError, match="NaN or infinity"):
        load_model(_write(tmp_path, proto))


@pytest.mark.parametrize("cpus", [1, 2, 8])
def test_large_weights_copied_in_parallel_equal_the_file_and_the_first_bad_one_is_named(
        tmp_path, monkeypatch, cpus):
    """The mapped file's weights are copied among the CPUs (`onnx_reader.copy_deferred`):
    every array equals the file's, read-only; with two non-finite weights the error names
    the first in file order, whatever the number of threads."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)))
    proto = _model(seed=3)
    m = load_model(_write(tmp_path, proto))
    for init in proto.graph.initializer:
        data = m.graph.tensors[init.name].data
        assert np.array_equal(data, numpy_helper.to_array(init)) and not data.flags.writeable
    for name in ("w", "c"):
        k = [i.name for i in proto.graph.initializer].index(name)
        bad = numpy_helper.to_array(proto.graph.initializer[k]).copy()
        bad[1, 2] = np.nan
        proto.graph.initializer[k].CopyFrom(numpy_helper.from_array(bad, name))
    with pytest.raises(QConvertError, match="constant 'w' contains NaN"):
        load_model(_write(tmp_path, proto, "bad.onnx"))
