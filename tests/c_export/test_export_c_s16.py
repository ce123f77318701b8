"""`qconvert export-c` and `export-c-header` on 16x8 models (int16 activations, int8 weights),
checked against TFLite Micro.

Oracles: the TFLite Micro interpreter (reference kernels) for every output of every 16x8 test
model (tests/models/int16: the TFLite converter's 16x8 models and the mixed int8 / 16x8 model)
on several inputs, from binaries built by gcc on the host (portable kernels and the cmsis-nn
kernel set) and by arm-none-eabi-gcc for an emulated Cortex-M4 (mps2-an386, one firmware
image per kernel set holding every model) under qemu-system-arm; gcc's own symbol sizes for the
flash figure; the graph's shapes and dtypes for the arena's buffer sizes; the integer
executor's layer parameters for the header's arrays.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.export_c_harness import (NEEDS_CMSIS, NEEDS_CROSS, build_cortex_m, build_host,
                                      cmsis_nn_available, harness_source, image_source, io_layout,
                                      parse, run_qemu, split_image_output)
from helpers.export_c_checks import (S16_MODELS, assert_bit_exact, check_host16, expected16, export,
                                     s16_samples)
from helpers.int16_models import (UNARY16, built16_models, full_range16, op_zoo3, prelu16_model,
                                  softmax8_16_model, softmax8_16_rows, squared_difference16_model,
                                  tflm, unary16)

from qconvert.c_export.header.layer_spec import OP_SPECS
from qconvert.cli.app import main
from qconvert.int8.prepare import layer_params
from qconvert.formats.model_io import load_model

MODELS = S16_MODELS
IDS = [p.stem for p in MODELS]


@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_host_portable_bit_exact_with_tflite_micro(path, tmp_path):
    check_host16(path, tmp_path / "c", "portable")


@NEEDS_CMSIS
@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_host_cmsis_nn_bit_exact_with_tflite_micro(path, tmp_path):
    check_host16(path, tmp_path / "c", "cmsis-nn")


@NEEDS_CROSS
@pytest.mark.parametrize("kernels,board", [
    ("portable", "m4"), pytest.param("cmsis-nn", "m4", marks=NEEDS_CMSIS),
    pytest.param("cmsis-nn", "m55", marks=NEEDS_CMSIS)])
def test_cortex_m_firmware_of_every_16x8_model_is_bit_exact(tmp_path, kernels, board):
    """Every 16x8 test model in ONE firmware image per kernel set and board, run once under
    qemu: Cortex-M4 (mps2-an386; CMSIS-NN's DSP paths) and Cortex-M55 (mps3-an547; its
    Helium paths)."""
    folder = tmp_path / "image"
    folder.mkdir()
    entries, expected = [], {}
    built = built16_models(tmp_path / "built")
    for path in MODELS + list(built):
        name = "m_" + path.stem
        files, _ = export(path, tmp_path / name, kernels, name=name)
        for f, data in files.items():  # kernel files are the same for every model
            if (folder / f).exists():
                assert (folder / f).read_bytes() == data, f
            else:
                (folder / f).write_bytes(data)
        graph = load_model(path).graph
        samples = built.get(path) or s16_samples(graph, 2)
        entries.append((name, io_layout(graph), samples))
        expected[name] = (path, graph, samples)
    elf = build_cortex_m(folder, image_source(entries), board, cmsis=kernels == "cmsis-nn")
    blocks = split_image_output(run_qemu(elf, board, timeout=300))
    assert sorted(blocks) == sorted(expected)
    for name, (path, graph, samples) in expected.items():
        got = parse(blocks[name], [np.dtype(graph.tensors[n].dtype) for n in graph.outputs],
                    len(samples))
        assert_bit_exact(got, expected16(path, samples), f"{path.stem} ({kernels}, {board})")


# -- the memory report ----------------------------------------------------------------------
_PLAN_LINE = re.compile(r"^ \*\s+(\d+)\s+(\d+)\s+(\S.*)$", re.MULTILINE)


@pytest.mark.parametrize("name", ["mixed_int8_int16", "conv_16x8_float_io"])
def test_arena_counts_int16_buffers_as_two_bytes_and_flash_is_the_compilers(tmp_path, name):
    path = next(p for p in MODELS if p.stem == name)
    graph = load_model(path).graph
    files, summary = export(path, tmp_path / "c", "portable")
    source = files["net.c"].decode()
    rows = [(int(o), int(b), t.strip()) for o, b, t in _PLAN_LINE.findall(source)
            if not t.startswith("(scratch")]
    assert rows
    seen_int16 = 0
    for _, nbytes, tensor in rows:
        t = graph.tensors[tensor]
        size = int(np.prod([1 if not isinstance(d, int) or d < 0 else d for d in t.shape]))
        assert nbytes == size * np.dtype(t.dtype).itemsize, tensor
        seen_int16 += t.dtype == "int16"
    assert seen_int16 >= 2
    assert summary.arena_size >= max(b + o for o, b, _ in rows)
    # flash: the sizes gcc gives the layers' constant arrays
    obj = tmp_path / "net.o"
    subprocess.run(["gcc", "-std=c99", "-O0", "-c", str(tmp_path / "c" / "net.c"), "-I",
                    str(tmp_path / "c"), "-o", str(obj)], check=True)
    nm = subprocess.run(["nm", "-S", str(obj)], capture_output=True, text=True,
                        check=True).stdout
    symbols = [ln.split()[1:4] for ln in nm.splitlines() if len(ln.split()) == 4]
    arrays = sum(int(size, 16) for size, kind, sym in symbols if kind in "rR"
                 and re.match(r"l\d+_", sym) and not re.search(r"_(params|quant|box\d+_\d+)$", sym))
    assert summary.constant_bytes == arrays


def test_cli_reports_16x8_sizes(tmp_path):
    path = next(p for p in MODELS if p.stem == "mixed_int8_int16")
    result = CliRunner().invoke(main, ["export-c", str(path), "-o", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    files = {p.name for p in (tmp_path / "c").iterdir()}
    assert "qconvert_nn_s16.c" in files
    assert re.search(r"arena \d+ bytes \(RAM\), constant data \d+ bytes \(flash\)", result.output)


# -- export-c-header ------------------------------------------------------------------------
_ARRAY = re.compile(r"static const (int(?:8|16|32|64)_t) (\w+)\[\w+\] = \{([^}]*)\};")
_NP = {"int8_t": np.int8, "int16_t": np.int16, "int32_t": np.int32, "int64_t": np.int64}


def _header_arrays(text: str) -> dict:
    """{array name: values} of the header's arrays, parsed from its text."""
    return {name: np.array([int(v) for v in re.sub(r"-2147483647 - 1", "-2147483648", body)
                            .replace("\n", " ").split(",") if v.strip()], dtype=_NP[ctype])
            for ctype, name, body in _ARRAY.findall(text)}


@pytest.mark.parametrize("path", MODELS, ids=IDS)
def test_header_of_16x8_layers(path, tmp_path):
    out = tmp_path / "w.h"
    result = CliRunner().invoke(main, ["export-c-header", str(path), "-o", str(out),
                                       "--name", "m"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    gcc = shutil.which("gcc")
    (tmp_path / "use.c").write_text('#include "w.h"\nint main(void) { return 0; }\n')
    subprocess.run([gcc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c",
                    str(tmp_path / "use.c"), "-I", str(tmp_path), "-o", str(tmp_path / "u.o")],
                   check=True)
    arrays = _header_arrays(text)
    defines = {n: int(v) for n, v in re.findall(r"#define (\w+)\s+\(?(-?\d+)\)?\s*$", text,
                                               re.MULTILINE)}
    graph = load_model(path).graph
    checked = 0
    for node in graph.nodes:
        if graph.tensors[node.inputs[0]].dtype != "int16" and node.op != "Softmax":
            continue
        p = layer_params(graph, node)
        index = graph.nodes.index(node)
        stem = next(n[:-len("_OP_INDEX")] for n, v in re.findall(
            r"#define (\w+_OP_INDEX)\s+(\d+)", text) if int(v) == index).lower()
        if node.op in ("Rsqrt", "Abs", "SquaredDifference"):  # scalar parameters
            fields = [f for f in OP_SPECS[node.op].fields if f[2] == "int"]
            assert fields
            for key, macro, _ in fields:
                assert defines[f"{stem.upper()}_{macro}"] == int(p[key]), (node.op, key)
            checked += 1
            continue
        if node.op not in ("Conv2D", "DepthwiseConv2D", "FullyConnected", "Softmax") or \
                graph.tensors[node.inputs[0]].dtype != "int16":
            continue
        if node.op == "Softmax":
            np.testing.assert_array_equal(arrays[f"{stem}_exp_lut"], p["exp_lut"])
            np.testing.assert_array_equal(arrays[f"{stem}_one_over_one_plus_x_lut"],
                                          p["one_over_one_plus_x_lut"])
        else:
            bits = p["accumulator_bits"]
            assert re.search(rf"#define {stem.upper()}_ACCUMULATOR_BITS\s+{bits}\b", text)
            if p["bias"] is not None:
                bias = arrays[f"{stem}_bias"]
                assert bias.dtype == (np.int64 if bits == 64 else np.int32)
                np.testing.assert_array_equal(bias, p["bias"])
            np.testing.assert_array_equal(arrays[f"{stem}_multiplier"], p["output_multiplier"])
            np.testing.assert_array_equal(arrays[f"{stem}_shift"], p["output_shift"])
        checked += 1
    assert checked


# -- CMSIS-NN's s16 kernels against TFLite Micro ----------------------------------------------
def _single_layer_model(tmp_path, op, shape, s_in, s_out, **attrs):
    from helpers.int8_models import Q8

    n = Q8()
    x = n.input("x", shape, s_in, 0, dtype="int16")
    n.node(op, [x], "y", shape, s_out, 0, dtype="int16", **attrs)
    path = tmp_path / f"{op.lower()}.tflite"
    path.write_bytes(n.build(["y"]))
    return path


@NEEDS_CMSIS
def test_cmsis_nn_softmax_s16_differs_from_tflite_micro(tmp_path):
    """A row of 8 maxima and one term whose exponential is 47 (s_in = 0.001): the exponentials
    sum to 2**18 - 1, whose normalization overflows int32 in arm_softmax_s16; TFLite Micro (and
    qconvert's executor and portable kernel, which the cmsis-nn export keeps for softmax)
    saturate instead."""
    from helpers.export_c_harness import CMSIS_NN, cmsis_library

    from qconvert.executor.int_executor import run_int8
    from qconvert.formats.tflite_reader import read_tflite

    path = _single_layer_model(tmp_path, "Softmax", (1, 9), 1e-3, 1.0 / 32768, beta=1.0)
    row = np.array([[0] * 8 + [-6534]], np.int16)
    ref = tflm(path.read_bytes(), [row])[0]
    graph = read_tflite(path.read_bytes()).graph
    np.testing.assert_array_equal(run_int8(graph, {"x": row})["y"], ref)
    # the cmsis-nn export (portable softmax) equals TFLite Micro on this row
    folder = tmp_path / "c"
    export(path, folder, "cmsis-nn")
    exe = build_host(folder, harness_source("net", io_layout(graph), [[row]]), cmsis=True)
    got = parse(subprocess.run([exe], capture_output=True, text=True, check=True).stdout,
                [np.dtype(np.int16)], 1)
    np.testing.assert_array_equal(got[0][0], ref.reshape(-1))
    # arm_softmax_s16 itself does not
    p = layer_params(graph, graph.nodes[0])

    def arr(name, values):
        return (f"static const int16_t {name}[{len(values)}] = {{"
                + ", ".join(str(int(v)) for v in values) + "};")

    (tmp_path / "cmsis_softmax.c").write_text("\n".join([
        "#include <stdio.h>", '#include "arm_nnfunctions.h"',
        arr("exp_lut", p["exp_lut"]), arr("recip_lut", p["one_over_one_plus_x_lut"]),
        arr("row", row.reshape(-1)),
        "int main(void) {", "    int16_t out[9]; int i;",
        "    const cmsis_nn_softmax_lut_s16 lut = {exp_lut, recip_lut};",
        f"    arm_softmax_s16(row, 1, 9, {p['input_multiplier']}, {p['input_left_shift']}, "
        "&lut, out);",
        '    for (i = 0; i < 9; ++i) printf("%d\\n", out[i]);', "    return 0;", "}", ""]))
    lib = cmsis_library("gcc", ["-O1"])
    exe = tmp_path / "cmsis_softmax"
    subprocess.run(["gcc", "-std=c99", "-O1", f"-I{CMSIS_NN / 'Include'}",
                    str(tmp_path / "cmsis_softmax.c"), str(lib), "-o", str(exe)], check=True)
    cmsis = np.array(subprocess.run([exe], capture_output=True, text=True, check=True)
                     .stdout.split(), dtype=np.int64)
    assert not np.array_equal(cmsis, ref.reshape(-1).astype(np.int64))


@NEEDS_CMSIS
@pytest.mark.parametrize("with_bias", [True, False])
def test_cmsis_nn_per_tensor_fully_connected_s16(tmp_path, with_bias):
    """arm_fully_connected_s16 (per-tensor weights, int64 bias) on the host: TFLite Micro's
    bits (the converter's models have per-channel FC weights, which keep the portable kernel)."""
    from helpers.int8_models import Q8

    from qconvert.formats.tflite_reader import read_tflite

    n = Q8(3)
    x = n.input("x", (2, 40), 7e-4, 0, dtype="int16")
    w = n.const("w", n.rng.integers(-127, 128, (6, 40)).astype(np.int8), np.float32(0.01), 0)
    ins = [x, w]
    if with_bias:
        ins.append(n.const("b", n.rng.integers(-2**33, 2**33, 6).astype(np.int64),
                           np.float32(7e-6), 0))
    n.node("FullyConnected", ins, "y", (2, 6), 0.03, 0, dtype="int16", activation="RELU",
           keep_num_dims=False)
    path = tmp_path / "fc.tflite"
    path.write_bytes(n.build(["y"]))
    graph = read_tflite(path.read_bytes()).graph
    files, _ = export(path, tmp_path / "c", "cmsis-nn")
    assert "arm_fully_connected_s16(" in files["net.c"].decode()
    check_host16(path, tmp_path / "c2", "cmsis-nn")
    assert layer_params(graph, graph.nodes[0])["per_channel"] is False


@pytest.mark.parametrize("name", ["eltwise_16x8", "misc_16x8", "fc_int32_bias"])
def test_single_rounding_build_matches_the_executor(tmp_path, name):
    """-DQCONVERT_SINGLE_ROUNDING: the 32-bit requantizations of the 16x8 kernels become
    CMSIS-NN's single rounding, as the integer executor computes them with rounding="single"
    (the 64-bit requantization is the same in both)."""
    from qconvert.executor.int_executor import run_int8

    path = next(p for p in MODELS if p.stem == name)
    graph = load_model(path).graph
    samples = s16_samples(graph)
    export(path, tmp_path / "c", "portable")
    exe = build_host(tmp_path / "c", harness_source("net", io_layout(graph), samples),
                     defines=["-DQCONVERT_SINGLE_ROUNDING"])
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    got = parse(out, [np.dtype(graph.tensors[n].dtype) for n in graph.outputs], len(samples))
    differs = False
    for k, sample in enumerate(samples):
        want = list(run_int8(graph, dict(zip(graph.inputs, sample)), rounding="single").values())
        double = list(run_int8(graph, dict(zip(graph.inputs, sample))).values())
        for o, w, d in zip(got[k], want, double):
            np.testing.assert_array_equal(o, np.asarray(w).reshape(-1))
            differs |= not np.array_equal(w, d)
    if name != "fc_int32_bias":
        assert differs  # the two roundings are told apart on these models


@pytest.mark.parametrize("kernels", ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)])
def test_prelu16_export_bit_exact(tmp_path, kernels):
    path = tmp_path / "prelu16.tflite"
    path.write_bytes(prelu16_model())
    check_host16(path, tmp_path / "c", kernels)


@pytest.mark.parametrize("kernels", ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)])
@pytest.mark.parametrize("s_in,beta", [(0.1, 1.0), (0.02, 2.0), (0.5, 0.7)])
def test_softmax_int8_to_int16_export_bit_exact(tmp_path, kernels, s_in, beta):
    """SOFTMAX int8 -> int16: qconvert_softmax_s8_s16 (portable) and arm_softmax_s8_s16
    (cmsis-nn) against TFLite Micro, saturated and full-range rows included."""
    path = tmp_path / "softmax8_16.tflite"
    path.write_bytes(softmax8_16_model(s_in, beta))
    files, _ = export(path, tmp_path / "c0", kernels)
    source = files["net.c"].decode()
    assert ("arm_softmax_s8_s16(" if kernels == "cmsis-nn" else "qconvert_softmax_s8_s16(") \
        in source
    check_host16(path, tmp_path / "c", kernels, [[softmax8_16_rows(seed)] for seed in (2, 3)])


@pytest.mark.parametrize("kernels", ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)])
@pytest.mark.parametrize("op", sorted(UNARY16))
@pytest.mark.parametrize("s_in,s_out", [(1.3e-4, 6.1e-5), (0.05, 1e-4), (3e-4, 3e-4)])
def test_unary16_export_on_every_int16_value(tmp_path, kernels, op, s_in, s_out):
    path = tmp_path / "unary16.tflite"
    path.write_bytes(unary16(op, s_in, s_out, UNARY16[op].shape))
    check_host16(path, tmp_path / "c", kernels, [[UNARY16[op]]])


@pytest.mark.parametrize("kernels", ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)])
@pytest.mark.parametrize("scales", [(3e-4, 7e-4, 0.02), (2e-4, 6e-3, 0.9), (1e-3, 1e-3, 1e-5)])
@pytest.mark.parametrize("b_shape", [(1, 8, 8, 16), (1, 1, 1, 16)])
def test_squared_difference16_export(tmp_path, kernels, scales, b_shape):
    """SQUARED_DIFFERENCE (int16, broadcast or not) on full-range inputs: qconvert_binary_s16
    in both kernel sets (CMSIS-NN has no squared difference)."""
    path = tmp_path / "sd16.tflite"
    path.write_bytes(squared_difference16_model(*scales, b_shape))
    graph = load_model(path).graph
    check_host16(path, tmp_path / "c", kernels,
                [[full_range16(graph, seed)[n] for n in graph.inputs] for seed in range(2)])


def test_rsqrt16_export_stops_at_a_negative_input(tmp_path):
    """TFLite Micro's RSQRT fails at a negative input; the C invoke returns 3 there."""
    path = tmp_path / "rsqrt16.tflite"
    path.write_bytes(unary16("Rsqrt", 1e-3, 1e-3, (1, 4)))
    graph = load_model(path).graph
    export(path, tmp_path / "c", "portable")
    x = np.array([[5, 0, -1, 7]], np.int16)
    exe = build_host(tmp_path / "c", harness_source("net", io_layout(graph), [[x]]))
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "rc 3"


@pytest.mark.parametrize("option", [["--activations", "int16"], ["--int16-layers", "2"]])
def test_quantize_16x8_then_export_c_is_bit_exact(tmp_path, option):
    """`qconvert quantize --activations int16` (all 16x8) and `--int16-layers 2` (mixed), then
    the integer executor and `export-c` (host, both kernel sets) on the result: TFLite Micro's
    bits."""
    from helpers.oracles import SAMPLE_MODELS, TEST_MODELS

    from qconvert.executor.int_executor import run_int8

    out = tmp_path / "q.tflite"
    result = CliRunner().invoke(main, ["quantize", str(TEST_MODELS / "digits_cnn.tflite"),
                                       "--calibration",
                                       str(SAMPLE_MODELS / "digits_calib_nhwc.npy"), *option,
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    dtypes = {graph.tensors[n.outputs[0]].dtype for n in graph.nodes}
    assert "int16" in dtypes and (("int8" in dtypes) == (option[0] == "--int16-layers"))
    samples = s16_samples(graph)
    for sample in samples:
        ref = tflm(out.read_bytes(), sample)
        got = run_int8(graph, dict(zip(graph.inputs, sample)))
        for name, r in zip(graph.outputs, ref):
            np.testing.assert_array_equal(got[name], r)
    for kernels in ("portable", "cmsis-nn") if cmsis_nn_available() else ("portable",):
        check_host16(out, tmp_path / f"c_{kernels}", kernels)


@pytest.mark.parametrize("kernels", ["portable", pytest.param("cmsis-nn", marks=NEEDS_CMSIS)])
def test_quantized_prelu_split_v_padv2_squeeze_export_bit_exact(tmp_path, kernels):
    """`quantize --activations int16` of an ONNX model with PRELU (int8 alpha), SPLIT_V, PADV2,
    MAXIMUM / MINIMUM, RESIZE_NEAREST_NEIGHBOR and SQUEEZE, then export-c: TFLite Micro's bits."""
    src = tmp_path / "zoo3.onnx"
    src.write_bytes(op_zoo3())
    np.save(tmp_path / "calib.npy", np.random.default_rng(0).normal(
        0, 1, (16, 4, 8, 8)).astype(np.float32))
    out = tmp_path / "zoo3.tflite"
    result = CliRunner().invoke(main, ["quantize", str(src), "--calibration",
                                       str(tmp_path / "calib.npy"), "--activations", "int16",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = load_model(out).graph
    assert {"PRelu", "SplitSizes", "PadV2", "Squeeze"} <= {n.op for n in graph.nodes}
    check_host16(out, tmp_path / "c", kernels)


def test_16x8_convolutions_and_pools_run_over_their_input(tmp_path):
    """The int8 kernels' in-place contract holds for the _s16 ones (in bytes of int16
    elements): the plan puts conv / depthwise / pool outputs over their dying inputs, and the
    host build stays bit-exact (test_host_portable_bit_exact_with_tflite_micro)."""
    path = next(p for p in MODELS if p.stem == "conv_16x8")
    files, summary = export(path, tmp_path / "c", "portable")
    assert summary.overlapped >= 2
    check_host16(path, tmp_path / "c2", "portable")
