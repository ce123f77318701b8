"""Reliability, classes 3 to 6 of the adversarial sweep: malformed structure (huge dimensions,
duplicate outputs, extra inputs, unknown activation codes, nested Loops, string inputs, plans
beyond --max-memory), hostile data files (.npy headers that lie, zip bombs, FIFOs, bool data,
values that overflow) and numerics the int8 writers must refuse. Each case, drawn by a generator,
ends in the tool's one line naming a file, exit 1 and nothing written, or works; valid models
still load in LiteRT after `fuse`.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
import zlib

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings, strategies as st
from onnx import TensorProto as TP, helper as h, numpy_helper as nh

from helpers.oracles import ROOT, TEST_MODELS, run_litert, run_tflm
from qconvert.cli.app import main

EXAMPLES = int(os.environ.get("QCONVERT_SWEEP_EXAMPLES", "10"))  # bench/reliability_sweep.py
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
vi = h.make_tensor_value_info


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def assert_clean(result, path, out_dir, *words):
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = [line for line in result.stderr.strip().splitlines()
             if not line.startswith("qconvert: warning: calibrating on random data")]
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: "), result.stderr
    assert str(path) in lines[0] or os.path.basename(str(path)) in lines[0], lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    assert not [f for f in os.listdir(out_dir) if f.startswith("o")], os.listdir(out_dir)


def onnx_model(nodes, inputs, outputs, inits=(), opset=13) -> bytes:
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def all_commands(model, out_dir):
    """Every command on `model`, each with its outputs in `out_dir`."""
    return [["inspect", model], ["convert", model, "-o", out_dir / "o.tflite"],
            ["fuse", model, "-o", out_dir / "o.onnx"],
            ["quantize", model, "--calibration-random", "2", "-o", out_dir / "o_q.onnx"],
            ["export-c-header", model, "--calibration-random", "2", "-o", out_dir / "o.h"]]


# -- class 3: structure -----------------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _loop_body(depth: int) -> bytes:
    """A Loop body nesting `depth` more Loops, built at the wire level (the protobuf library
    refuses to build more than ~100 levels, a hostile file need not)."""
    ins = [vi(f"i{depth}", TP.INT64, []), vi(f"c{depth}", TP.BOOL, []),
           vi(f"v{depth}", TP.FLOAT, [1, 4])]
    outs = [vi(f"co{depth}", TP.BOOL, []), vi(f"vo{depth}", TP.FLOAT, [1, 4])]
    nodes = [h.make_node("Identity", [f"c{depth}"], [f"co{depth}"])]
    if depth == 0:
        nodes.append(h.make_node("Relu", [f"v{depth}"], [f"vo{depth}"]))
    g = h.make_graph(nodes, f"b{depth}", ins, outs).SerializeToString()
    if depth:
        attr = _field(1, b"body") + _field(6, _loop_body(depth - 1)) + _varint(20 << 3) + b"\x05"
        loop = h.make_node("Loop", ["n", "", f"v{depth}"], [f"vo{depth}"])
        g += _field(1, loop.SerializeToString() + _field(5, attr))
    return g


def _nested_loop_model(depth: int) -> bytes:
    n = nh.from_array(np.array(2, np.int64), "n")
    outer = onnx_model([h.make_node("Relu", ["x"], ["x2"])], [vi("x", TP.FLOAT, [1, 4])],
                       [vi("y", TP.FLOAT, [1, 4])], [n])
    m = onnx.ModelProto.FromString(outer)
    attr = _field(1, b"body") + _field(6, _loop_body(depth - 1)) + _varint(20 << 3) + b"\x05"
    loop = h.make_node("Loop", ["n", "", "x2"], ["y"]).SerializeToString() + _field(5, attr)
    graph = m.graph.SerializeToString() + _field(1, loop)
    m.ClearField("graph")
    return m.SerializeToString() + _field(7, graph)


STRUCTURE = {
    "duplicate output": (lambda: onnx_model(
        [h.make_node("Relu", ["x"], ["y"])], [vi("x", TP.FLOAT, [1, 4])],
        [vi("y", TP.FLOAT, None), vi("y", TP.FLOAT, None)]), "listed more than once"),
    "relu with extra inputs": (lambda: onnx_model(
        [h.make_node("Relu", ["x", "x", "x"], ["y"])], [vi("x", TP.FLOAT, [1, 4])],
        [vi("y", TP.FLOAT, None)]), "takes at most 1"),
    "output nobody produces": (lambda: onnx_model(
        [h.make_node("Relu", ["x"], ["y"])], [vi("x", TP.FLOAT, [1, 4])],
        [vi("y", TP.FLOAT, None), vi("zz", TP.FLOAT, [1, 4])]), "zz"),
}


@pytest.mark.parametrize("case", sorted(STRUCTURE))
def test_malformed_structure_fails_cleanly_in_every_command(tmp_path, case):
    make, words = STRUCTURE[case]
    model = tmp_path / "m.onnx"
    model.write_bytes(make())
    for args in all_commands(model, tmp_path):
        assert_clean(run(args), model, tmp_path, words)


@SETTINGS
@given(exp=st.integers(31, 62), where=st.sampled_from(["input", "initializer"]))
def test_huge_dimensions_fail_cleanly(tmp_path_factory, exp, where):
    tmp = tmp_path_factory.mktemp("dims")
    dim = 2**exp
    if where == "input":
        data = onnx_model([h.make_node("Relu", ["x"], ["y"])], [vi("x", TP.FLOAT, [1, dim])],
                          [vi("y", TP.FLOAT, None)])
    else:
        t = TP()
        t.name, t.data_type = "w", TP.FLOAT
        t.dims.extend([dim, 1])
        t.raw_data = b"\0" * 16
        data = onnx_model([h.make_node("Add", ["x", "w"], ["y"])], [vi("x", TP.FLOAT, [1, 1])],
                          [vi("y", TP.FLOAT, None)], [t])
    model = tmp / "m.onnx"
    model.write_bytes(data)
    for args in all_commands(model, tmp)[1:]:
        if where == "input" and args[0] == "fuse":
            assert run(args).exit_code == 0  # ONNX keeps int64 shapes: nothing to refuse
            os.remove(tmp / "o.onnx")
            continue
        assert_clean(run(args), model, tmp)


@pytest.mark.parametrize("depth", [1, 20, 60, 400])
def test_nested_loops_fail_cleanly(tmp_path, depth):
    model = tmp_path / "m.onnx"
    model.write_bytes(_nested_loop_model(depth))
    result = run(["fuse", model, "-o", tmp_path / "o.onnx"])
    if result.exit_code == 0:  # Loop is carried through as an opaque op
        os.remove(tmp_path / "o.onnx")
    else:
        assert_clean(result, model, tmp_path)
    for args in all_commands(model, tmp_path)[3:]:
        assert_clean(run(args), model, tmp_path)


def test_string_input_names_the_file(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(onnx_model([h.make_node("Identity", ["x"], ["y"])],
                                 [vi("x", TP.STRING, [1, 4])], [vi("y", TP.STRING, None)]))
    for args in all_commands(model, tmp_path)[3:]:
        assert_clean(run(args), model, tmp_path, "string")


@SETTINGS
@given(n=st.integers(50000, 90000))  # n * n * 4 bytes * 2 samples > 8 GiB
def test_outer_product_beyond_max_memory_is_refused(tmp_path_factory, n):
    tmp = tmp_path_factory.mktemp("outer")
    model = tmp / "m.onnx"
    model.write_bytes(onnx_model([h.make_node("MatMul", ["x", "w"], ["y"])],
                                 [vi("x", TP.FLOAT, ["N", n, 1])], [vi("y", TP.FLOAT, None)],
                                 [nh.from_array(np.ones((1, n), np.float32), "w")]))
    for args in all_commands(model, tmp)[3:]:
        assert_clean(run(args), model, tmp, "--max-memory")
    small = run(["quantize", model, "--calibration-random", "1", "--max-memory", "1M",
                 "-o", tmp / "o_q.onnx"])
    assert_clean(small, model, tmp, "--max-memory")


def _tflite_relu_model(signature_tensor: str, activation="NONE") -> bytes:
    from helpers.float_tflite_nets import TfNet

    from qconvert.ir import Model

    net = TfNet(3)
    x = net.input("x", (1, 6, 6, 2))
    conv = net.conv(x, 3, "conv", activation=activation)
    net.node("Relu", [conv], "relu", (1, 4, 4, 3))
    net.g.outputs = ["relu"]
    model = Model("tflite", [net.g], {"signature_defs": [{
        "key": "serving_default", "subgraph": 0, "inputs": [("x", "x")],
        "outputs": [("out", signature_tensor)]}]})
    from qconvert.formats.model_io import serialize

    return serialize(model)


@pytest.mark.parametrize("signature_tensor", ["conv", "relu"])
def test_relu_named_by_a_signature_def_fuses(tmp_path, signature_tensor):
    """A valid TFLite model whose signature names the pre-activation tensor: `fuse` keeps the
    tensor (and LiteRT still runs the result with the same outputs)."""
    model = tmp_path / "m.tflite"
    model.write_bytes(_tflite_relu_model(signature_tensor))
    result = run(["fuse", model, "-o", tmp_path / "f.tflite"])
    assert result.exit_code == 0, result.output
    before, after = run_litert(model.read_bytes()), run_litert((tmp_path / "f.tflite").read_bytes())
    np.testing.assert_allclose(after[0], before[0], rtol=1e-6)


@pytest.mark.parametrize("code", [7, 77, 127])
def test_unknown_fused_activation_code_is_refused(tmp_path, monkeypatch, code):
    from qconvert.formats import tflite_options

    monkeypatch.setitem(tflite_options.ACTIVATION_CODES, f"CODE{code}", code)
    model = tmp_path / "m.tflite"
    model.write_bytes(_tflite_relu_model("relu", activation=f"CODE{code}"))
    monkeypatch.undo()
    for args in all_commands(model, tmp_path)[:4]:
        assert_clean(run(args), model, tmp_path, f"activation code {code}")


# -- class 4 / 5: data files ------------------------------------------------------------------
ONNX = TEST_MODELS / "digits_cnn.onnx"  # input [N, 1, 16, 16] float32


def quantize_with(tmp, data_path, *extra):
    return run(["quantize", ONNX, "--calibration", data_path, "-o", tmp / "o_q.onnx", *extra])


def npy_bytes(header: str, data: bytes) -> bytes:
    head = header.encode("latin1")
    pad = 64 - (10 + len(head) + 1) % 64
    head += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + data


SHAPES = st.one_of(
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=5),
    st.just([10**12, 1, 16, 16]), st.just([-1, 1, 16, 16]))


@SETTINGS
@given(shape=SHAPES, dtype=st.sampled_from(["<f4", "<f8", "|b1", "<i8", "|O"]),
       nbytes=st.integers(0, 4096))
def test_npy_headers_that_lie_fail_cleanly(tmp_path_factory, shape, dtype, nbytes):
    tmp = tmp_path_factory.mktemp("npy")
    path = tmp / "c.npy"
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {tuple(shape)}, }}"
    path.write_bytes(npy_bytes(header, b"\0" * nbytes))
    result = quantize_with(tmp, path)
    honest = (dtype in ("<f4", "<f8") and all(d >= 0 for d in shape)
              and int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize <= nbytes
              and tuple(shape[-3:]) == (1, 16, 16) and shape[0] > 0 and len(shape) == 4)
    if honest:
        assert result.exit_code == 0, result.output
    else:
        assert_clean(result, path, tmp)


@SETTINGS
@given(junk=st.binary(max_size=120))
def test_malformed_npy_headers_fail_cleanly(tmp_path_factory, junk):
    tmp = tmp_path_factory.mktemp("npyh")
    path = tmp / "c.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(junk)) + junk)
    assert_clean(quantize_with(tmp, path), path, tmp)


def _zip_bomb(path, size):
    """A .npz whose one member inflates to `size` bytes of zeros (stored as a real deflate
    stream, written in chunks)."""
    header = npy_bytes(f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({size // 1024}, 1, "
                       "16, 16), }", b"")
    total = len(header) + size
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    body, crc = [comp.compress(header)], zlib.crc32(header)
    chunk = bytes(1 << 20)
    for _ in range(size >> 20):
        body.append(comp.compress(chunk))
        crc = zlib.crc32(chunk, crc)
    body.append(comp.flush())
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("calib.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, b"")  # placeholder replaced below
    data = b"".join(body)
    # hand-built archive: one local header, data, central directory
    name = b"calib.npy"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), total,
                        len(name), 0) + name
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(data),
                          total, len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(data),
                      0)
    path.write_bytes(local + data + central + end)


def test_zip_bomb_is_refused_before_inflating(tmp_path):
    bomb = tmp_path / "c.npz"
    _zip_bomb(bomb, 128 << 20)
    assert bomb.stat().st_size < 1 << 20
    assert_clean(quantize_with(tmp_path, bomb), bomb, tmp_path, "zip bomb")
    assert_clean(quantize_with(tmp_path, f"{bomb}:calib"), bomb, tmp_path)
    assert_clean(quantize_with(tmp_path, bomb, "--max-memory", "64M"), bomb, tmp_path,
                 "memory limit")


@SETTINGS
@given(shape=st.lists(st.integers(0, 40), min_size=1, max_size=4), extra=st.integers(-64, 64),
       deflate=st.booleans())
def test_npz_members_that_lie_fail_cleanly(tmp_path_factory, shape, extra, deflate):
    """A .npz member whose header promises more data than the member holds is refused before
    anything is inflated; an honest one (shape (N, 1, 16, 16)) works."""
    tmp = tmp_path_factory.mktemp("npz")
    shape = [max(shape[0], 1), 1, 16, 16] if extra == 0 and len(shape) == 1 else shape
    nbytes = max(0, int(np.prod(shape)) * 4 + extra)
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple(shape)}, }}"
    path = tmp / "c.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as z:
        z.writestr("calib.npy", npy_bytes(header, b"\0" * nbytes))
    result = quantize_with(tmp, path)
    if extra >= 0 and len(shape) == 4 and shape[1:] == [1, 16, 16] and shape[0] > 0:
        assert result.exit_code == 0, result.output
    else:
        assert_clean(result, path, tmp)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".onnx"])
def test_fifo_inputs_are_refused_without_waiting(tmp_path, suffix):
    fifo = tmp_path / f"c{suffix}"
    os.mkfifo(fifo)
    args = (["inspect", fifo] if suffix == ".onnx" else
            ["quantize", ONNX, "--calibration", fifo, "-o", tmp_path / "o.onnx"])
    p = subprocess.run([sys.executable, "-m", "qconvert.cli", *map(str, args)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "FIFO" in p.stderr and len(p.stderr.splitlines()) == 1


@SETTINGS
@given(kind=st.sampled_from(["bool", "1e38", "-1e38", "nan_free_huge"]))
def test_calibration_values_fail_cleanly(tmp_path_factory, kind):
    tmp = tmp_path_factory.mktemp("vals")
    path = tmp / "c.npy"
    if kind == "bool":
        np.save(path, np.ones((4, 1, 16, 16), bool))
        words = ["bool"]
    else:
        value = {"1e38": 1e38, "-1e38": -1e38, "nan_free_huge": 3e38}[kind]
        np.save(path, np.full((4, 1, 16, 16), value, np.float32))
        words = ["NaN or infinite value during calibration"]
    result = quantize_with(tmp, path)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and words[0] in lines[0], result.stderr


def test_huge_weights_overflow_cleanly(tmp_path):
    w = np.full((4, 1, 3, 3), 1e30, np.float32)
    model = tmp_path / "m.onnx"
    model.write_bytes(onnx_model(
        [h.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3]),
         h.make_node("Conv", ["y", "w2"], ["z"], kernel_shape=[1, 1])],
        [vi("x", TP.FLOAT, [1, 1, 8, 8])], [vi("z", TP.FLOAT, None)],
        [nh.from_array(w, "w"), nh.from_array(np.full((4, 4, 1, 1), 1e30, np.float32), "w2")]))
    calib = tmp_path / "c.npy"
    np.save(calib, np.full((2, 1, 1, 8, 8), 100.0, np.float32))
    for out in ("o.onnx", "o.tflite"):
        result = run(["quantize", model, "--calibration", calib, "-o", tmp_path / out,
                      "--scale", "1"])  # raw whole numbers, as meant (no scale warning)
        assert_clean(result, model, tmp_path, "NaN or infinite value during calibration")


# -- class 6: numerics the writers refuse -------------------------------------------------------
def _conv_model(tmp, w, b):
    model = tmp / "m.onnx"
    model.write_bytes(onnx_model(
        [h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3]),
         h.make_node("Relu", ["y"], ["z"])], [vi("x", TP.FLOAT, [1, 2, 6, 6])],
        [vi("z", TP.FLOAT, None)], [nh.from_array(w, "w"), nh.from_array(b, "b")]))
    return model


@settings(max_examples=max(6, EXAMPLES // 2), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data_exp=st.integers(-44, 0), weight_exp=st.integers(-30, 30), seed=st.integers(0, 99),
       cancel=st.booleans())
@example(data_exp=0, weight_exp=0, seed=1, cancel=False)
@example(data_exp=-3, weight_exp=4, seed=2, cancel=False)
@example(data_exp=-40, weight_exp=0, seed=3, cancel=False)
@example(data_exp=0, weight_exp=30, seed=4, cancel=True)
def test_written_int8_models_hold_the_invariants(tmp_path_factory, data_exp, weight_exp, seed,
                                                 cancel):
    """Whatever the scale of data and weights: the command refuses in one line naming a layer,
    or writes a model whose scales are normal float32, whose multipliers and shifts are in
    range, and which LiteRT loads and runs."""
    from qconvert.formats.model_io import load_model
    from qconvert.quant.invariants import check_int8_tflite

    tmp = tmp_path_factory.mktemp("num")
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((4, 2, 3, 3)) * 10.0**weight_exp).astype(np.float32)
    if cancel:
        w[:, 1] = -w[:, 0]
    model = _conv_model(tmp, w, np.zeros(4, np.float32))
    calib = tmp / "c.npy"
    x = (rng.standard_normal((4, 1, 2, 6, 6)) * 10.0**data_exp).astype(np.float32)
    np.save(calib, x)
    for out, cmd in (("o.tflite", "quantize"), ("o.h", "export-c-header")):
        result = run([cmd, model, "--calibration", calib, "-o", tmp / out])
        if abs(data_exp) <= 6 and abs(weight_exp) <= 6 and not cancel:  # ordinary: must work
            assert result.exit_code == 0, result.output
        if result.exit_code != 0:
            assert_clean(result, model, tmp)
            assert "layer" in result.stderr or "NaN" in result.stderr
            continue
        if out == "o.tflite":
            written = (tmp / out).read_bytes()
            check_int8_tflite(load_model(tmp / out).graph)
            run_litert(written)
            run_tflm(written)
        os.remove(tmp / out)


@pytest.mark.parametrize("weight_exp", [0, 10, 30])
def test_weights_that_cancel_give_a_working_model(tmp_path, weight_exp):
    """Weights that cancel on the data (channel 1 = -channel 0, equal input channels) make an
    output range of ~0 next to huge weight scales: the output range is widened until the
    multiplier fits, and the model runs in TFLite Micro with the output at its zero point."""
    from tflite_micro.python.tflite_micro import runtime

    from qconvert.formats.model_io import load_model
    from qconvert.quant.invariants import check_int8_tflite

    rng = np.random.default_rng(weight_exp)
    w = (rng.standard_normal((4, 2, 3, 3)) * 10.0**weight_exp).astype(np.float32)
    w[:, 1] = -w[:, 0]
    model = _conv_model(tmp_path, w, np.zeros(4, np.float32))
    x = np.repeat(rng.standard_normal((4, 1, 1, 6, 6)).astype(np.float32), 2, axis=2)
    np.save(tmp_path / "c.npy", x)
    out = tmp_path / "o.tflite"
    result = run(["quantize", model, "--calibration", tmp_path / "c.npy", "-o", out])
    assert result.exit_code == 0, result.output
    check_int8_tflite(load_model(out).graph)
    interp = runtime.Interpreter.from_bytes(out.read_bytes())
    detail = interp.get_input_details(0)
    s, z = detail["quantization_parameters"]["scales"][0], detail["quantization_parameters"][
        "zero_points"][0]
    sample = np.clip(np.round(x[0].transpose(0, 2, 3, 1) / s) + z, -128, 127).astype(np.int8)
    interp.set_input(sample, 0)
    interp.invoke()
    got = interp.get_output(0)
    z_out = interp.get_output_details(0)["quantization_parameters"]["zero_points"][0]
    assert np.all(got == z_out)
