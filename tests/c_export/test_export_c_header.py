"""`qconvert export-c-header` against independent oracles.

- The header (and the shipped kernel) compile with gcc -std=c99 -Wall -Wextra -Werror
  -pedantic. Every value is read back from the *compiled* header: a generated C file takes the
  address of every array and the value of every macro, and Python reads them through ctypes.
- Fully connected layers: qconvert's C kernel `qconvert_fc_1x4_s8`, run on the header's own
  arrays, matches the integer reference executor (`run_int8`, observed per layer) and TFLite
  Micro (every intermediate tensor made an output) bit for bit on every FC layer of the int8
  models in tests/models, of qconvert's own per-channel-FC quantization of ad01, and of a
  synthetic model whose FC layers have leftover rows and columns; also with single rounding.
- Multipliers, shifts, biases, weights, offsets, clamps and geometry of every conv, depthwise
  and FC layer of kws_ref_model.tflite and pretrainedResnet_quant.tflite equal an independent
  derivation from the raw flatbuffer (the `tflite` package) with the C QuantizeMultiplier of
  tests/c/quant_oracle.c (per-tensor FC with the double product, as the installed TFLite Micro
  computes it: see test_int_executor's probe layers); and behaviourally: scalar C references
  (tests/c/layer_reference.c) using only the header's numbers reproduce TFLite Micro's output
  of each such layer from its input.
- The 1x4 reorder is checked as a permutation against a loop transcription of design.md.
- Bad input fails with one line and writes nothing.

The oracles and readers are in `c_header_oracles`.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import subprocess
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package
    import tomli as tomllib
from pathlib import Path

import numpy as np
import pytest
from helpers.c_header_oracles import (C_TESTS, CFLAGS, INT8_MODELS, KERNEL_DIR, LAYER_OPS, CHeader,
                                      Flatbuffer, c_pointer, compile_header, design_md_1x4,
                                      expected_clamps, export_header, invoke_header_cli, observed,
                                      random_feeds, run_fc_kernel, run_gcc, run_reference,
                                      tflite_same_pads, tflm_every_tensor)
from click.testing import CliRunner
from helpers.oracles import ROOT, SAMPLE_MODELS, TEST_MODELS
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.every_op_model import every_op_model
from helpers.int8_models import Q8, int8_feeds, tflm

from qconvert.c_export.fc_layout import from_1x4, permutation_1x4, to_1x4
from qconvert.c_export.header.layer_spec import OP_SPECS
from qconvert.c_export.shipped_kernels import (KERNEL_FILES, MODEL_KERNEL_FILES, Q7_KERNEL_FILES,
                                               kernel_sources)
from qconvert.cli.app import main
from qconvert.int8.prepare import LAYER_PARAMS, layer_params
from qconvert.formats.model_io import load_model, serialize


@pytest.fixture(scope="module")
def quant_oracle(tmp_path_factory):
    """QuantizeMultiplier of tests/c/quant_oracle.c (libm frexp and round)."""
    lib_path = tmp_path_factory.mktemp("oracle") / "quant_oracle.so"
    run_gcc(["-O2", "-shared", "-fPIC", str(C_TESTS / "quant_oracle.c"), "-o", str(lib_path), "-lm"])
    lib = ctypes.CDLL(str(lib_path))

    def quantize(real):
        real = np.ascontiguousarray(np.asarray(real, np.float64).reshape(-1))
        mult, shift = np.empty(real.size, np.int32), np.empty(real.size, np.int32)
        lib.oracle_quantize_multiplier(c_pointer(real), c_pointer(mult), c_pointer(shift),
                                       ctypes.c_int64(real.size))
        return mult, shift

    return quantize


# -- the 1x4 order --------------------------------------------------------------------------
@settings(max_examples=120, deadline=None)
@given(st.integers(0, 14), st.integers(0, 14))
def test_reorder_is_design_md_permutation(rows, cols):
    w = np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)
    perm = permutation_1x4(rows, cols)
    np.testing.assert_array_equal(np.sort(perm), np.arange(rows * cols))  # a permutation
    np.testing.assert_array_equal(to_1x4(w), design_md_1x4(w))
    np.testing.assert_array_equal(from_1x4(to_1x4(w), rows, cols), w)
    if rows < 4 or cols == 1:
        np.testing.assert_array_equal(perm, np.arange(rows * cols))  # identity


@pytest.mark.parametrize("rows,cols", [(4, 4), (5, 4), (4, 6), (7, 10), (8, 3), (13, 17)])
def test_reorder_leftover_rows_and_columns(rows, cols):
    w = np.arange(rows * cols).reshape(rows, cols)
    packed = to_1x4(w)
    r4, c4 = rows - rows % 4, cols - cols % 4
    # leftover rows: the tail, row-major and unchanged
    np.testing.assert_array_equal(packed[r4 * cols:], w[r4:].reshape(-1))
    # each block of four rows holds exactly those rows; its leftover columns come last,
    # column by column, four rows each
    for rb in range(0, r4, 4):
        block = packed[rb * cols:(rb + 4) * cols]
        assert sorted(block) == sorted(w[rb:rb + 4].reshape(-1))
        tail = block[4 * c4:].reshape(cols - c4, 4)
        np.testing.assert_array_equal(tail, w[rb:rb + 4, c4:].T)
    if r4 and c4:  # the first 16 values: design.md's interleave of the first 4x4 block
        np.testing.assert_array_equal(packed[:16], [w[0, 0], w[1, 0], w[0, 2], w[1, 2],
                                                    w[2, 0], w[3, 0], w[2, 2], w[3, 2],
                                                    w[0, 1], w[1, 1], w[0, 3], w[1, 3],
                                                    w[2, 1], w[3, 1], w[2, 3], w[3, 3]])


# -- compiling ------------------------------------------------------------------------------
@pytest.mark.parametrize("rounding", [[], ["-DQCONVERT_SINGLE_ROUNDING"]])
def test_kernel_compiles_cleanly_with_strict_warnings(tmp_path, rounding):
    run_gcc([*CFLAGS, "-Wconversion", "-Wsign-conversion", "-Wshadow", "-Wstrict-prototypes",
          "-Wmissing-prototypes", *rounding, "-c", str(KERNEL_DIR / "qconvert_fc_1x4.c"),
          "-o", str(tmp_path / "k.o")])


def test_header_compiles_alone_and_arrays_are_const_and_aligned(tmp_path):
    out = export_header(tmp_path, TEST_MODELS / "kws_ref_model.tflite", "--with-kernels")
    (tmp_path / "use.c").write_text(f'#include "{out.name}"\n#include "qconvert_fc_1x4.h"\n'
                                    "int main(void) { return 0; }\n")
    # a file that includes the header and uses none of its arrays: no warning
    run_gcc([*CFLAGS, "-c", "use.c", "-o", "use.o"], cwd=tmp_path)
    run_gcc([*CFLAGS, "-c", "qconvert_fc_1x4.c", "-o", "k.o"], cwd=tmp_path)
    # writing to an array does not compile: they are const
    stem = "kws_ref_model_functional_1_dense_biasadd"
    (tmp_path / "write.c").write_text(f'#include "{out.name}"\n'
                                      f"void f(void) {{ {stem}_weights[0] = 1; }}\n")
    gcc = subprocess.run(["gcc", *CFLAGS, "-c", "write.c", "-o", "w.o"], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert gcc.returncode != 0 and "read-only" in gcc.stderr
    h = compile_header(out, tmp_path)
    assert len(h.arrays) >= 40
    assert all(h.align[n] >= 4 and h.address[n] % 4 == 0 for n in h.arrays)
    assert re.search(r"QCONVERT_ARRAY_ATTR static const int8_t \w+_weights\[", h.text)


# -- fully connected: qconvert's kernel against run_int8 and TFLite Micro --------------------
def _fc_layers(graph):
    return [(i, n) for i, n in enumerate(graph.nodes) if n.op == "FullyConnected"]


def check_fc_layers(model_path: Path, header: CHeader, rounding="double") -> int:
    """Every FC layer: the kernel on the header equals run_int8's output (3 samples) and, for
    double rounding, TFLite Micro's (2 samples). Returns the layers checked."""
    graph = load_model(model_path).graph
    seen = [observed(graph, feeds, rounding) for feeds in random_feeds(graph, 3, 5)]
    runs = tflm_every_tensor(model_path) if rounding == "double" else []
    layers = _fc_layers(graph)
    for index, node in layers:
        stem = header.layers[index]
        x = np.concatenate([v[node.inputs[0]] for v in seen])
        y = np.concatenate([v[node.outputs[0]] for v in seen])
        got = run_fc_kernel(header, stem, x)
        np.testing.assert_array_equal(got.reshape(-1), y.reshape(-1), err_msg=stem)
        assert len(np.unique(y)) > 1, stem  # not a degenerate comparison
        for values in runs:
            got = run_fc_kernel(header, stem, values[node.inputs[0]])
            np.testing.assert_array_equal(got.reshape(-1), values[node.outputs[0]].reshape(-1),
                                          err_msg=f"TFLM {stem}")
    return len(layers)


@pytest.mark.parametrize("name", INT8_MODELS)
def test_fc_kernel_matches_executor_and_tflm_on_int8_models(tmp_path, name):
    model = TEST_MODELS / name
    header = compile_header(export_header(tmp_path, model), tmp_path)
    assert check_fc_layers(model, header) == {"ad01_int8.tflite": 10}.get(name, 1)


def _body(path: Path) -> str:
    """A header after the comment block that names its source."""
    text = path.read_text()
    return text[text.index("#ifndef"):]


def test_fc_kernel_on_qconverts_own_per_channel_quantization(tmp_path):
    """ad01_fp32 quantized by qconvert with per-channel FC weights: the same bytes as
    `qconvert quantize`, then every FC layer through the kernel."""
    args = ["--calibration-random", 8, "--fc-per-channel", "--name", "ad01"]
    direct = export_header(tmp_path, TEST_MODELS / "ad01_fp32.tflite", *args)
    q = tmp_path / "ad01_q.tflite"
    result = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / "ad01_fp32.tflite"),
                                       "-o", str(q)] + [str(a) for a in args[:3]])
    assert result.exit_code == 0, result.output
    via_file = export_header(tmp_path, q, "--name", "ad01", name="via_file.h")

    assert _body(direct) == _body(via_file)
    assert "quantized by qconvert from a float model" in direct.read_text()
    header = compile_header(direct, tmp_path)
    graph = load_model(q).graph
    assert all(layer_params(graph, n)["per_channel"] for _, n in _fc_layers(graph))
    assert all(header.int(header.layers[i], "MULTIPLIER_LEN") > 1 for i, _ in _fc_layers(graph))
    assert check_fc_layers(q, header) == 10


def test_fc_kernel_single_rounding_matches_executor(tmp_path):
    model = TEST_MODELS / "ad01_int8.tflite"
    out = export_header(tmp_path, model, "--rounding", "single")
    assert re.search(r"^#define AD01_INT8_SINGLE_ROUNDING +1$", out.read_text(), re.MULTILINE)
    header = compile_header(out, tmp_path, ["-DQCONVERT_SINGLE_ROUNDING"])
    assert check_fc_layers(model, header, rounding="single") == 10
    double = compile_header(out, tmp_path)  # the two roundings really differ here
    graph = load_model(model).graph
    x = random_feeds(graph, 4, 2)
    feeds = {graph.inputs[0]: np.concatenate([f[graph.inputs[0]] for f in x])}
    seen = observed(graph, feeds, "single")
    differ = 0
    for index, node in _fc_layers(graph):
        stem = header.layers[index]
        a = run_fc_kernel(header, stem, seen[node.inputs[0]])
        b = run_fc_kernel(double, stem, seen[node.inputs[0]])
        assert np.abs(a.astype(int) - b).max() <= 1
        differ += int(np.count_nonzero(a != b))
    assert differ > 0


FC_SHAPES = [  # (rows R, columns C, per-channel, bias, activation)
    (7, 10, True, True, "RELU"), (3, 5, False, True, "NONE"), (1, 1, True, True, "NONE"),
    (5, 1, False, False, "RELU6"), (13, 18, True, False, "NONE"), (8, 3, False, True, "RELU"),
    (4, 4, True, True, "RELU6"), (12, 33, False, True, "NONE")]


def _fc_model(seed=21) -> bytes:
    """One FC layer per FC_SHAPES entry, each on its own input x<i> [2, C] (two batch rows)."""
    n = Q8(seed)
    outs = []
    for i, (rows, cols, per_channel, with_bias, act) in enumerate(FC_SHAPES):
        s_in = 0.02 + 0.01 * i
        x = n.input(f"x{i}", (2, cols), s_in, [-128, 5, 127, -3][i % 4])
        wt, s_w = n.weights(f"w{i}", (rows, cols), 0, per_channel)
        b = n.bias(f"b{i}", s_in, s_w, rows) if with_bias else None
        coarse = s_in * float(s_w.max()) * 255 * 128 * cols / 40
        outs.append(n.node("FullyConnected", [x, wt, b], f"fc{i}", (2, rows), coarse, 0,
                           activation="NONE", keep_num_dims=False))
        if per_channel:
            n.g.nodes[-1].origin["version"] = 12
    feeds = int8_feeds(n.g, 3, seed=seed)
    for i, name in enumerate(outs):
        n.fit(name, feeds)
        n.g.nodes[i].attrs["activation"] = FC_SHAPES[i][4]
    return n.build(outs)


def test_fc_kernel_with_leftover_rows_and_columns_matches_tflm(tmp_path):
    model = tmp_path / "fc_shapes.tflite"
    model.write_bytes(_fc_model())
    header = compile_header(export_header(tmp_path, model), tmp_path)
    assert check_fc_layers(model, header) == len(FC_SHAPES)
    graph = load_model(model).graph
    for index, node in _fc_layers(graph):
        stem = header.layers[index]
        w = graph.tensors[node.inputs[1]].data
        np.testing.assert_array_equal(header.array(stem, "weights"), design_md_1x4(w))
        assert header.int(stem, "HAS_BIAS") == (node.inputs[2] is not None)


# -- multipliers, shifts and biases: the raw flatbuffer and TFLite Micro ---------------------
def check_against_flatbuffer(model_path, h1x4: CHeader, hrow: CHeader, quant_oracle) -> int:
    fb = Flatbuffer(model_path)
    checked = 0
    for index, op, raw in fb.ops():
        x, w, b = (fb.tensor(raw, k) for k in range(3))
        y = fb.tensor(raw, 0, output=True)
        opt = fb.options(raw, op)
        for h in (h1x4, hrow):
            stem = h.layers[index]
            channels = w["shape"][3 if op == "DepthwiseConv2D" else 0]
            s_w = w["scale"] if w["scale"].size > 1 else w["scale"][:1]
            if op != "FullyConnected" or w["scale"].size > 1:
                s_w = np.broadcast_to(w["scale"], (channels,))
            real = (float(x["scale"][0]) * s_w.astype(np.float64)) / float(y["scale"][0])
            mult, shift = quant_oracle(real)
            np.testing.assert_array_equal(h.array(stem, "multiplier"), mult, err_msg=stem)
            np.testing.assert_array_equal(h.array(stem, "shift"), shift, err_msg=stem)
            np.testing.assert_array_equal(h.array(stem, "bias"), b["bytes"].view("<i4"))
            raw_w = w["bytes"].view(np.int8)
            if op == "FullyConnected" and h.int(stem, "WEIGHTS_1X4"):
                raw_w = design_md_1x4(raw_w.reshape(w["shape"]))
            np.testing.assert_array_equal(h.array(stem, "weights"), raw_w, err_msg=stem)
            assert h.int(stem, "INPUT_OFFSET") == -int(x["zero_point"][0])
            assert h.int(stem, "OUTPUT_OFFSET") == int(y["zero_point"][0])
            lo, hi = expected_clamps(opt.FusedActivationFunction(), y["scale"][0],
                                     int(y["zero_point"][0]))
            assert (h.int(stem, "ACTIVATION_MIN"), h.int(stem, "ACTIVATION_MAX")) == (lo, hi)
            assert h.int(stem, "PER_CHANNEL") == int(w["scale"].size > 1)
            assert h.shapes[f"{stem}_OUTPUT_SHAPE"] == y["shape"]
            if op == "FullyConnected":
                assert (h.int(stem, "OUTPUT_DEPTH"), h.int(stem, "ACCUM_DEPTH")) == w["shape"]
                continue
            _, in_h, in_w, in_c = x["shape"]
            kh, kw = w["shape"][1:3]
            assert (h.int(stem, "INPUT_H"), h.int(stem, "INPUT_W"), h.int(stem, "INPUT_C"),
                    h.int(stem, "KERNEL_H"), h.int(stem, "KERNEL_W")) == (in_h, in_w, in_c, kh, kw)
            strides = (opt.StrideH(), opt.StrideW())
            dil = (opt.DilationHFactor(), opt.DilationWFactor())
            assert (h.int(stem, "STRIDE_H"), h.int(stem, "STRIDE_W")) == strides
            assert (h.int(stem, "DILATION_H"), h.int(stem, "DILATION_W")) == dil
            if opt.Padding() == fb.tflite.Padding.SAME:
                top, bottom = tflite_same_pads(in_h, kh, strides[0], dil[0])
                left, right = tflite_same_pads(in_w, kw, strides[1], dil[1])
            else:
                top = bottom = left = right = 0
            assert tuple(h.int(stem, f"PAD_{s}") for s in ("TOP", "LEFT", "BOTTOM", "RIGHT")) \
                == (top, left, bottom, right)
            if op == "DepthwiseConv2D":
                assert h.int(stem, "DEPTH_MULTIPLIER") == opt.DepthMultiplier()
        checked += 1
    return checked


@pytest.mark.parametrize("name,layers", [("kws_ref_model.tflite", 10),
                                         ("pretrainedResnet_quant.tflite", 10)])
def test_header_numbers_equal_tflite_micros(tmp_path, quant_oracle, name, layers):
    model = TEST_MODELS / name
    h1x4 = compile_header(export_header(tmp_path, model), tmp_path)
    hrow = compile_header(export_header(tmp_path, model, "--fc-layout", "rowmajor", name="row.h"),
                           tmp_path)
    assert check_against_flatbuffer(model, h1x4, hrow, quant_oracle) == layers
    # behaviourally: the C references, fed TFLite Micro's input of each layer and given only
    # the header's numbers, reproduce TFLite Micro's output of that layer
    graph = load_model(model).graph
    runs = tflm_every_tensor(model)
    compared = 0
    for index, node in enumerate(graph.nodes):
        if node.op not in LAYER_OPS:
            continue
        stem = hrow.layers[index]
        for values in runs:
            got = run_reference(hrow, stem, node.op, values[node.inputs[0]])
            want = values[node.outputs[0]].reshape(-1)
            np.testing.assert_array_equal(got, want, err_msg=f"{node.op} {stem}")
            compared += 1
    assert compared == 2 * layers


def test_model_io_quantization_and_shapes(tmp_path):
    model = TEST_MODELS / "kws_ref_model.tflite"
    h = compile_header(export_header(tmp_path, model, "--name", "kws"), tmp_path)
    fb = Flatbuffer(model)
    x = fb.sub.Tensors(fb.sub.Inputs(0))
    y = fb.sub.Tensors(fb.sub.Outputs(0))
    assert h.floats["KWS_INPUT0_SCALE"] == float(x.Quantization().ScaleAsNumpy()[0])
    assert h.ints["KWS_INPUT0_ZERO_POINT"] == int(x.Quantization().ZeroPointAsNumpy()[0])
    assert h.floats["KWS_OUTPUT0_SCALE"] == float(y.Quantization().ScaleAsNumpy()[0])
    assert h.ints["KWS_OUTPUT0_ZERO_POINT"] == int(y.Quantization().ZeroPointAsNumpy()[0])
    assert h.shapes["KWS_INPUT0_SHAPE"] == tuple(x.ShapeAsNumpy().tolist())
    assert h.ints["KWS_INPUT0_LEN"] == int(np.prod(x.ShapeAsNumpy()))
    assert h.ints["KWS_NUM_LAYERS"] == fb.sub.OperatorsLength()
    assert h.ints["KWS_SINGLE_ROUNDING"] == 0 and h.ints["KWS_FC_LAYOUT_1X4"] == 1
    assert all(n.startswith("KWS_") for n in h.ints)
    assert all(n.startswith("kws_") for n in h.arrays)
    assert sorted(h.layers) == list(range(fb.sub.OperatorsLength()))


# -- every op the integer executor knows ----------------------------------------------------

def test_every_op_gets_its_tflite_micro_parameters(tmp_path):
    """Each op with TFLite Micro parameters (the executor's table, checked against TFLM in
    test_int_executor) appears with all of them; the model runs in TFLite Micro."""
    model = every_op_model(header_only_ops=True)
    graph = model.graph
    assert {node.op for node in graph.nodes} == set(LAYER_PARAMS)
    path = tmp_path / "every_op.tflite"
    path.write_bytes(serialize(model))
    feeds = random_feeds(graph, 1, 0)[0]
    feeds["f"] = np.linspace(-3, 3, 8, dtype=np.float32)[None]
    tflm(path.read_bytes(), [feeds[n] for n in graph.inputs])  # TFLM accepts every layer
    h = compile_header(export_header(tmp_path, path, "--name", "e"), tmp_path)
    scalars = {"float": h.floats, "int": h.ints, "bool": h.ints}
    for index, node in enumerate(graph.nodes):
        stem = h.layers[index]
        assert stem == f"E_{node.name.upper()}"
        params = layer_params(graph, node)
        spec = OP_SPECS[node.op]
        assert set(params) <= {k for k, _, _ in spec.fields} | spec.skipped
        for key, suffix, kind in spec.fields:
            if key not in params:
                continue
            value = params[key]
            if kind in scalars:
                got = scalars[kind][f"{stem}_{suffix}"]
                assert got == (np.float32(value) if kind == "float" else int(value)), (stem, key)
            elif kind == "hw":
                assert [h.int(stem, f"{suffix}_H"), h.int(stem, f"{suffix}_W")] == list(value)
            elif kind == "pads":
                assert [h.int(stem, f"{suffix}_{s}") for s in ("TOP", "LEFT", "BOTTOM", "RIGHT")] \
                    == list(value)
            elif value is None:
                assert h.int(stem, f"HAS_{suffix}") == 0
            else:
                np.testing.assert_array_equal(h.array(stem, suffix), value, err_msg=stem)
        for slot, suffix in spec.constants:
            np.testing.assert_array_equal(h.array(stem, suffix),
                                          graph.tensors[node.inputs[slot]].data.reshape(-1))
    np.testing.assert_array_equal(h.array("E_MUL", "input2"), graph.tensors["c8"].data)
    assert h.shapes["E_MUL_INPUT2_SHAPE"] == (4,)
    assert h.int("E_GATHER", "AXIS") == 1  # an attribute
    assert h.shapes["E_SQUEEZE_OUTPUT_SHAPE"] == (1, 10)
    assert h.int("E_CONV", "HAS_BIAS") == 0
    assert h.int("E_PADV2", "PAD_VALUE") == 5
    np.testing.assert_array_equal(h.array("E_PADV2", "input3"), [5])


# -- names, determinism, packaging ----------------------------------------------------------
def test_layer_names_become_unique_c_identifiers(tmp_path):
    n = Q8(41)
    x = n.input("x", (1, 4), 0.05, 0)
    y = n.node("Relu", [x], "a/b;tail", (1, 4), 0.05, 0)
    z = n.node("Relu", [y], "A-B", (1, 4), 0.05, 0)
    w = n.node("Relu", [z], "", (1, 4), 0.05, 0)
    n.g.nodes[-1].name = ""
    v = n.node("Relu", [w], "9 lives \u00e9*/", (1, 4), 0.05, 0)
    path = tmp_path / "2names.tflite"
    path.write_bytes(n.build([v]))
    out = export_header(tmp_path, path)
    h = compile_header(out, tmp_path)
    names = [h.layers[i] for i in range(4)]
    assert names[0] == "M_2NAMES_A_B" and names[1] == "M_2NAMES_A_B_2"
    assert len(set(names)) == 4 and all(re.fullmatch(r"[A-Z][A-Z0-9_]*", s) for s in names)
    assert "*/" not in out.read_text().split("*/", 1)[1].replace(" */", "")


def test_same_input_gives_byte_identical_header(tmp_path):
    model = TEST_MODELS / "pretrainedResnet_quant.tflite"
    (tmp_path / "sub").mkdir()
    a = export_header(tmp_path, model, "--name", "r", name="a.h")
    b = export_header(tmp_path, model, "--name", "r", name="sub/b.h")
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text()
    assert hashlib.sha256(model.read_bytes()).hexdigest() in text
    assert "Source model:   pretrainedResnet_quant.tflite" in text
    assert str(TEST_MODELS) not in text


def test_default_output_and_kernels_written_beside_the_header(tmp_copy, tmp_path):
    model = tmp_copy(TEST_MODELS / "kws_ref_model.tflite", "my-model.tflite")
    result = invoke_header_cli([model, "--with-kernels"])
    assert result.exit_code == 0, result.output
    header = tmp_path / "my-model_weights.h"
    assert "#ifndef MY_MODEL_WEIGHTS_H" in header.read_text()
    for name, data in kernel_sources().items():
        assert (tmp_path / name).read_bytes() == data == (KERNEL_DIR / name).read_bytes()


def test_kernel_sources_are_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config["package-data"]["qconvert.c_export"]
    shipped = {p.name for p in KERNEL_DIR.iterdir() if p.suffix in (".c", ".h")}
    assert shipped == set(KERNEL_FILES) | set(MODEL_KERNEL_FILES) | set(Q7_KERNEL_FILES)
    for name in shipped:
        assert any(Path("kernels", name).match(p) for p in patterns), name


# -- bad input ------------------------------------------------------------------------------
def _assert_fails(tmp_path, args, message, path=None):
    before = sorted(p.name for p in tmp_path.iterdir())
    result = invoke_header_cli(args)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qconvert: error: "), result.stderr
    assert message in lines[0], lines[0]
    if path is not None:
        assert str(path) in lines[0]
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    return lines[0]


def test_float_model_without_calibration_is_refused(tmp_path):
    model = TEST_MODELS / "ad01_fp32.tflite"
    _assert_fails(tmp_path, [model, "-o", tmp_path / "x.h"], "float model", model)


def test_ops_the_header_cannot_express_are_all_named(tmp_path):
    line = _assert_fails(tmp_path, [SAMPLE_MODELS / "unknown_builtin.tflite", "-o",
                                    tmp_path / "x.h"], "cannot export a C header")
    assert "COS" in line and "FLOOR" in line
    n = Q8(51)  # int8 ops qconvert knows but without int8 parameters
    x = n.input("x", (1, 4), 0.05, 0)
    c = n.node("Cast", [x], "cast", (1, 4), 0.05, 0)
    d = n.node("Cast", [c], "cast2", (1, 4), 0.05, 0)
    p = n.node("Sqrt", [d], "sqrt", (1, 4), 0.05, 0)
    q = n.node("Neg", [p], "negate", (1, 4), 0.05, 0)  # known, float only in TFLite Micro
    n.node("FLOOR", [q], "neg", (1, 4), 0.05, 0)  # a builtin qconvert lacks
    n.g.nodes[-1].opaque = True
    n.g.nodes[-1].origin = {"version": 1, "code": 8, "custom_code": None, "options_type": "NONE",
                            "options": {}, "custom_options": None, "custom_options_format": 0}
    path = tmp_path / "cast.tflite"
    path.write_bytes(n.build(["neg"]))
    line = _assert_fails(tmp_path, [path, "-o", tmp_path / "y.h"], "cannot express", path)
    assert "Cast (x2)" in line and "Sqrt" in line and "Neg" in line and "FLOOR (unknown)" in line


def test_layers_tflite_micro_refuses_are_all_named(tmp_path):
    n = Q8(52)
    a = n.input("a", (1, 4, 2), 0.05, 3)
    b = n.input("b", (1, 4, 2), 0.2, -100)
    n.node("Concat", [a, b], "c1", (1, 4, 4), 0.05, 3, axis=-1, activation="NONE")
    n.node("Concat", [b, a], "c2", (1, 4, 4), 0.05, 3, axis=-1, activation="NONE")
    path = tmp_path / "concat.tflite"
    path.write_bytes(n.build(["c1", "c2"]))
    line = _assert_fails(tmp_path, [path, "-o", tmp_path / "y.h"], "requires them equal")
    assert "'c1'" in line and "'c2'" in line


def test_onnx_model_is_converted_to_nhwc_then_quantized(tmp_path):
    """A float ONNX model with calibration data in its own NCHW layout: the header equals the
    one exported from `qconvert quantize model.onnx -o int8.tflite`, compiles, and its FC layer
    run by the C kernel equals TFLite Micro on that int8 model."""
    model = TEST_MODELS / "digits_cnn.onnx"
    calib = f"{TEST_MODELS / 'digits_data_nchw.npz'}:calib"
    direct = export_header(tmp_path, model, "--calibration", calib, "--name", "digits")
    q = tmp_path / "digits_int8.tflite"
    result = CliRunner().invoke(main, ["quantize", str(model), "--calibration", calib,
                                       "-o", str(q)])
    assert result.exit_code == 0, result.output
    via_file = export_header(tmp_path, q, "--name", "digits", name="via_file.h")

    assert _body(direct) == _body(via_file)
    assert "DIGITS_INPUT0_SHAPE       {1, 16, 16, 1}" in direct.read_text()
    header = compile_header(direct, tmp_path)
    assert check_fc_layers(q, header) == 1


def test_onnx_without_calibration_or_already_int8_is_refused(tmp_path):
    model = TEST_MODELS / "digits_cnn.onnx"
    _assert_fails(tmp_path, [model, "-o", tmp_path / "x.h"], "must be int8; give --calibration",
                  model)
    qdq = tmp_path / "qdq.onnx"
    result = CliRunner().invoke(main, ["quantize", str(model), "--calibration-random", 2,
                                       "-o", str(qdq)])
    assert result.exit_code == 0, result.output
    _assert_fails(tmp_path, [qdq, "-o", tmp_path / "x.h"], "int8 (QDQ) ONNX model", qdq)
    _assert_fails(tmp_path, [TEST_MODELS / "kws_ref_model.tflite", "-o", tmp_path / "x.h",
                             "--input-layout", "nchw"], "--input-layout applies to ONNX")


def test_unwritable_outputs_are_refused(tmp_path):
    model = TEST_MODELS / "kws_ref_model.tflite"
    _assert_fails(tmp_path, [model, "-o", tmp_path / "missing" / "x.h"],
                  "output directory does not exist")
    (tmp_path / "adir").mkdir()
    _assert_fails(tmp_path, [model, "-o", tmp_path / "adir"], "is a directory")
    _assert_fails(tmp_path, [model, "-o", tmp_path / "qconvert_fc_1x4.h", "--with-kernels"],
                  "overwrite the kernel file")
    assert not any((tmp_path / "adir").iterdir())


def test_bad_options_are_refused(tmp_path):
    model = TEST_MODELS / "kws_ref_model.tflite"
    _assert_fails(tmp_path, [model, "-o", tmp_path / "x.h", "--name", "2x"],
                  "not a C identifier")
    _assert_fails(tmp_path, [model, "-o", tmp_path / "x.h", "--name", "a-b"],
                  "not a C identifier")
    _assert_fails(tmp_path, [model, "-o", tmp_path / "x.h", "--calibration-random", 2],
                  "already int8", model)
    _assert_fails(tmp_path, [TEST_MODELS / "ad01_fp32.tflite", "-o", tmp_path / "x.h",
                             "--calibration", tmp_path / "none.npy", "--calibration-random", 2],
                  "at most one")
    _assert_fails(tmp_path, [TEST_MODELS / "ad01_fp32.tflite", "-o", tmp_path / "x.h",
                             "--calibration", tmp_path / "none.npy"], "no such file")
