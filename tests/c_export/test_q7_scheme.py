"""`--scheme q7` (issue 26): the CMSIS-NN paper's power-of-two q7 scheme.

Oracles: CMSIS_5's legacy q7 kernels themselves (host gcc: their plain C path; Cortex-M4 under
QEMU: their DSP path), for the executor (`executor.q7_kernels`) and qconvert's portable q7
kernels; the float model and the labelled digits data for accuracy. Random chains exercise
every legacy kernel (RGB / fast / basic convolutions, square and non-square, depthwise, the
1x4 fully connected layer with leftover rows and columns, pools, ReLU, softmax, the sigmoid and
tanh tables at every input format); the real models go through the CLI.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from helpers.export_c_harness import NEEDS_CROSS, ROOT
from helpers.q7_harness import LEGACY, NEEDS_LEGACY, run_host, run_m4
from qconvert.cli.app import main
from qconvert.executor.q7_kernels import Q7Layer, activation_table, run_q7
from qconvert.quant.q7_plan import Q7Model, frac_bits

MODELS = ROOT / "tests" / "models"
SAMPLES = ROOT / "sample_models"


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


PROBE = np.random.default_rng(5).integers(-128, 128, size=(8, 12 * 12 * 3)).astype(np.int8)


def _linear(rng, kind, name, in_shape, out_shape, wshape, in_frac, k, **geom):
    """A random linear layer: its out_shift the smallest that saturates under 5 % of its
    outputs on random chain inputs (`_fit`), so the chains are not degenerate."""
    w = rng.integers(-90, 91, size=wshape).astype(np.int8)
    b = rng.integers(-128, 128, size=out_shape[-1]).astype(np.int8)
    return Q7Layer(kind, name, in_shape, out_shape, in_frac, in_frac, w, b, 7,
                   in_frac + 7 - int(rng.integers(0, 6)), **geom)


def _fit(layers: list, input_shape) -> None:
    """Choose each linear layer's out_shift (via out_frac) in order, as `_linear` says."""
    x = PROBE[:, :int(np.prod(input_shape))].reshape(-1, *input_shape)
    for layer in layers:
        if layer.weights is not None and not layer.extra.get("fixed"):
            for shift in range(0, 24):
                layer.out_frac = layer.in_frac + layer.w_frac - shift
                out = run_q7([layer], x)
                if np.mean(np.abs(out.astype(int)) >= 127) < 0.05:
                    break
        x = run_q7([layer], x)


def square_chain(rng) -> Q7Model:
    """RGB conv -> fast conv -> depthwise -> basic conv -> maxpool -> fc (rows % 4 = 1,
    cols % 4 = 1) -> softmax, on a 12x12x3 input."""
    layers = [
        _linear(rng, "conv", "rgb", (12, 12, 3), (12, 12, 8), (8, 3, 3, 3), 7, 27,
                kernel=(3, 3), stride=(1, 1), pad=(1, 1), relu=True),
    ]
    f = layers[-1].out_frac
    layers.append(_linear(rng, "conv", "fast", (12, 12, 8), (6, 6, 6), (6, 3, 3, 8), f, 72,
                          kernel=(3, 3), stride=(2, 2), pad=(1, 1)))
    f = layers[-1].out_frac
    layers.append(_linear(rng, "depthwise", "dw", (6, 6, 6), (6, 6, 6), (3, 3, 6), f, 9,
                          kernel=(3, 3), stride=(1, 1), pad=(1, 1), relu=True))
    f = layers[-1].out_frac
    layers.append(_linear(rng, "conv", "basic", (6, 6, 6), (6, 6, 5), (5, 1, 1, 6), f, 6))
    f = layers[-1].out_frac
    layers += [Q7Layer("maxpool", "max", (6, 6, 5), (3, 3, 5), f, f, kernel=(2, 2),
                       stride=(2, 2)),
               Q7Layer("reshape", "flat", (3, 3, 5), (45,), f, f)]
    layers.append(_linear(rng, "fc", "fc", (45,), (13,), (13, 45), f, 45))
    f = layers[-1].out_frac
    layers.append(Q7Layer("softmax", "softmax", (13,), (13,), f, 7))
    return _chained(Q7Model(layers, "x", "y", (12, 12, 3), 7))


def _chained(model: Q7Model) -> Q7Model:
    """Fit the shifts (`_fit`); each layer's in_frac is its producer's out_frac (weights
    formats keep the shifts fitted)."""
    _fit(model.layers, model.input_shape)
    frac = model.input_frac
    for layer in model.layers:
        if layer.weights is not None:
            shifts = layer.bias_shift, layer.out_shift
            layer.w_frac += layer.in_frac - frac
            layer.in_frac = frac
            layer.b_frac = layer.in_frac + layer.w_frac - shifts[0]
            layer.out_frac = layer.in_frac + layer.w_frac - shifts[1]
            if "table_frac" in layer.extra:  # relabel the weights so the output reads frac
                layer.w_frac += layer.extra["table_frac"] - layer.out_frac
                layer.b_frac = layer.in_frac + layer.w_frac - shifts[0]
                layer.out_frac = layer.extra["table_frac"]
        elif layer.kind not in ("softmax", "sigmoid", "tanh"):
            layer.in_frac = layer.out_frac = frac
        else:
            layer.in_frac = frac
        frac = layer.out_frac
    return model


def _table_input(layer, frac):
    """`layer` feeding a table activation that reads `frac` fraction bits: its output format
    is `frac` once chained (`_chained` moves w_frac, keeping the fitted shifts)."""
    layer.extra["table_frac"] = frac
    return layer


def nonsquare_chain(rng, table_fracs=(5, 6)) -> Q7Model:
    """fast_nonsquare conv -> depthwise _nonsquare (stride 2 x 1) ->
    basic_nonsquare conv -> avgpool -> fc -> tanh -> fc -> sigmoid, on a 10x7x4 input."""
    layers = [_linear(rng, "conv", "fastns", (10, 7, 4), (10, 7, 6), (6, 3, 1, 4), 7, 12,
                      kernel=(3, 1), stride=(1, 1), pad=(1, 0), relu=True)]
    f = layers[-1].out_frac
    layers.append(_linear(rng, "depthwise", "dwns", (10, 7, 6), (5, 7, 6), (3, 3, 6), f, 9,
                          kernel=(3, 3), stride=(2, 1), pad=(1, 1)))
    f = layers[-1].out_frac
    layers.append(_linear(rng, "conv", "basicns", (5, 7, 6), (4, 4, 3), (3, 2, 3, 6), f, 36,
                          kernel=(2, 3), stride=(1, 2), pad=(0, 1), relu=True))
    f = layers[-1].out_frac
    layers += [Q7Layer("avgpool", "avg", (4, 4, 3), (2, 2, 3), f, f, kernel=(2, 2),
                       stride=(2, 2)),
               Q7Layer("reshape", "flat", (2, 2, 3), (12,), f, f)]
    fc1 = _table_input(_linear(rng, "fc", "fc1", (12,), (9,), (9, 12), f, 12), table_fracs[0])
    layers += [fc1, Q7Layer("tanh", "tanh", (9,), (9,), table_fracs[0], 7)]
    fc2 = _table_input(_linear(rng, "fc", "fc2", (9,), (6,), (6, 9), 7, 9), table_fracs[1])
    layers += [fc2, Q7Layer("sigmoid", "sigmoid", (6,), (6,), table_fracs[1], 7)]
    return _chained(Q7Model(layers, "x", "y", (10, 7, 4), 7))


def _render(model, kernels):
    from qconvert.c_export.model.q7_source import render_q7

    return render_q7(model, "q7net", kernels, "a test chain")


def _chains():
    rng = np.random.default_rng(26)
    return [("square", square_chain(rng)),
            *((f"nonsquare{t}", nonsquare_chain(rng, (t, 11 - t))) for t in (4, 5, 7))]


CHAINS = _chains()


@NEEDS_LEGACY
@pytest.mark.parametrize("label,model", CHAINS, ids=[c[0] for c in CHAINS])
def test_chains_bit_exact_on_host(tmp_path, label, model):
    """Host: the legacy kernels (their plain C build) and the portable kernels equal each other
    and the executor's scalar path (the average pool truncating once)."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, size=(6, *model.input_shape)).astype(np.int8)
    out_size = int(np.prod(model.layers[-1].out_shape))
    legacy = run_host(tmp_path / "legacy", _render(model, "cmsis-nn-legacy"), "q7net", x,
                      out_size, legacy=True)
    portable = run_host(tmp_path / "portable", _render(model, "portable"), "q7net", x,
                        out_size, legacy=False)
    scalar = run_q7(model.layers, x, "scalar").reshape(len(x), -1)
    np.testing.assert_array_equal(legacy, scalar)
    np.testing.assert_array_equal(portable, scalar)
    # the chains are not degenerate: outputs vary across samples
    assert len({bytes(r) for r in legacy}) > 1


@NEEDS_LEGACY
@NEEDS_CROSS
@pytest.mark.parametrize("label,model", CHAINS[:2], ids=[c[0] for c in CHAINS[:2]])
def test_chains_bit_exact_on_cortex_m4(tmp_path, label, model):
    """Cortex-M4 (QEMU mps2-an386): the legacy kernels' DSP path, the portable kernels and the
    executor's DSP semantics agree bit for bit."""
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, size=(4, *model.input_shape)).astype(np.int8)
    out_size = int(np.prod(model.layers[-1].out_shape))
    legacy = run_m4(tmp_path / "legacy", _render(model, "cmsis-nn-legacy"), "q7net", x,
                    out_size, legacy=True)
    portable = run_m4(tmp_path / "portable", _render(model, "portable"), "q7net", x, out_size,
                      legacy=False)
    dsp = run_q7(model.layers, x, "dsp").reshape(len(x), -1)
    np.testing.assert_array_equal(legacy, dsp)
    np.testing.assert_array_equal(portable, dsp)


@NEEDS_LEGACY
@NEEDS_CROSS
def test_avgpool_on_cortex_m3_takes_the_plain_c_path(tmp_path):
    """Cortex-M3 (no DSP extension, QEMU mps2-an385): the legacy average pool's plain C build
    truncates once (the executor's scalar path, as on the host); on Cortex-M4 its DSP build
    truncates per row (the dsp path); the portable kernel follows the build the same way.
    Inputs where the two differ."""
    pool = Q7Layer("avgpool", "avg", (6, 6, 4), (2, 2, 4), 0, 0, kernel=(3, 3), stride=(3, 3))
    model = Q7Model([pool], "x", "y", (6, 6, 4), 0)
    x = np.random.default_rng(9).integers(-128, 128, size=(4, 6, 6, 4)).astype(np.int8)
    scalar = run_q7(model.layers, x, "scalar").reshape(len(x), -1)
    dsp = run_q7(model.layers, x, "dsp").reshape(len(x), -1)
    assert not np.array_equal(scalar, dsp)
    for kernels in ("cmsis-nn-legacy", "portable"):
        files, legacy = _render(model, kernels), kernels == "cmsis-nn-legacy"
        np.testing.assert_array_equal(run_m4(tmp_path / f"m3{kernels}", files, "q7net", x, 16,
                                             legacy=legacy, board="m3"), scalar)
        np.testing.assert_array_equal(run_m4(tmp_path / f"m4{kernels}", files, "q7net", x, 16,
                                             legacy=legacy), dsp)


def test_avgpool_paths_differ_as_documented():
    """The two legacy average pools: along x then y, truncating each time (DSP build) vs once
    over the window (scalar build). Rows 2+2+0, 2+2+0, 2+0+0 -> 4 // 3, 4 // 3, 2 // 3 =
    1, 1, 0 -> 2 // 3 = 0; once: 10 // 9 = 1."""
    layer = Q7Layer("avgpool", "a", (3, 3, 1), (1, 1, 1), 0, 0, kernel=(3, 3), stride=(3, 3))
    x = np.array([2, 2, 0, 2, 2, 0, 2, 0, 0], np.int8).reshape(1, 3, 3, 1)
    assert run_q7([layer], x, "dsp").item() == 0
    assert run_q7([layer], x, "scalar").item() == 1
    # negative sums truncate toward zero (C division), not down
    x = np.array([-2, -2, 0, -2, -2, 0, -2, -2, 0], np.int8).reshape(1, 3, 3, 1)
    assert run_q7([layer], x, "dsp").item() == -1 and run_q7([layer], x, "scalar").item() == -1


@NEEDS_LEGACY
def test_activation_tables_equal_the_legacy_ones():
    """qconvert's sigmoid / tanh tables (round(f(v / 16) * 128), saturated) are the legacy
    sigmoidTable_q7 / tanhTable_q7, computed, not copied."""
    text = (LEGACY / "CMSIS" / "NN" / "Source" / "NNSupportFunctions" / "arm_nntables.c"
            ).read_text()
    for name, kind in (("sigmoidTable_q7", "sigmoid"), ("tanhTable_q7", "tanh")):
        body = re.search(name + r"\[256\] = \{([^}]*)\}", text).group(1)
        table = np.array([int(v, 16) for v in re.findall(r"0x[0-9a-f]+", body)],
                         np.uint8).view(np.int8)
        np.testing.assert_array_equal(activation_table(kind), table)


def test_frac_bits():
    """The most fraction bits whose q7 range holds the magnitude."""
    assert frac_bits(1.0) == 6        # 1.0 * 64 = 64 <= 127.5; * 128 would not fit
    assert frac_bits(0.99) == 7
    assert frac_bits(100.0) == 0
    assert frac_bits(200.0) == -1
    assert frac_bits(0.0) == 7


def _export(tmp_path, model, calib, kernels, *extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / f"c_{kernels}"
    report = tmp_path / f"{kernels}.json"
    result = _cli("export-c", model, "--calibration", calib, "-o", out, "--name", "net",
                  "--scheme", "q7", "--kernels", kernels, "--report", report, *extra)
    assert result.exit_code == 0, result.output
    return out, json.loads(report.read_text()), result.output


def _q7_of(model_path, calib_path):
    """The Q7Model the CLI's route builds (same route, same options)."""
    from qconvert.c_export.q7_command import plan_q7_for

    return plan_q7_for(model_path, calib_path)


DIGITS = [("keras_tflite", SAMPLES / "digits_cnn.tflite", SAMPLES / "digits_calib_nhwc.npy",
           MODELS / "digits_data_nhwc.npz", None),
          ("pytorch_onnx", SAMPLES / "digits_cnn.onnx", SAMPLES / "digits_calib_nchw.npy",
           MODELS / "digits_data_nchw.npz", (0, 2, 3, 1))]


@pytest.mark.parametrize("label,model,calib,data,perm", DIGITS, ids=[d[0] for d in DIGITS])
def test_digits_top1_within_two_points_of_float(label, model, calib, data, perm):
    """A Keras CNN (TFLite) and a PyTorch CNN (ONNX) keep top-1 within 2 points of float on
    the labelled digits test set (497 images)."""
    from qconvert.executor.float_executor import run_float
    from qconvert.formats.model_io import load_model
    from qconvert.quant.q7_plan import quantize_input

    q7, report = _q7_of(str(model), str(calib))
    d = np.load(data)
    x, labels = d["test"], d["labels"]
    x_nhwc = x if perm is None else x.transpose(perm)
    out = run_q7(q7.layers, quantize_input(q7, x_nhwc)).reshape(len(x), -1)
    m = load_model(str(model))
    float_out = run_float(m, {m.graph.inputs[0]: x.astype(np.float32)})[m.graph.outputs[0]]
    float_top1 = np.mean(float_out.reshape(len(x), -1).argmax(1) == labels)
    q7_top1 = np.mean(out.argmax(1) == labels)
    assert float_top1 > 0.9
    assert q7_top1 >= float_top1 - 0.02, (q7_top1, float_top1)
    assert report["scheme"] == "q7" and len(report["layers"]) == len(q7.layers)


@NEEDS_LEGACY
@pytest.mark.parametrize("label,model,calib,data,perm", DIGITS, ids=[d[0] for d in DIGITS])
def test_digits_cli_c_bit_exact_with_executor_on_host(tmp_path, label, model, calib, data,
                                                      perm):
    """export-c --scheme q7 for both kernel sets compiles (strict C99) and equals the executor
    on the host (both the legacy kernels' plain C build: the executor's scalar path)."""
    from qconvert.quant.q7_plan import quantize_input

    q7, _ = _q7_of(str(model), str(calib))
    x = np.load(data)["test"][:12]
    x = x if perm is None else x.transpose(perm)
    xq = quantize_input(q7, x)
    for kernels, path in (("cmsis-nn-legacy", "scalar"), ("portable", "scalar")):
        out, report, text = _export(tmp_path, model, calib, kernels)
        files = {p.name: p.read_bytes() for p in out.iterdir()}
        got = run_host(tmp_path / f"run_{kernels}", files, "net", xq, 10,
                       legacy=kernels == "cmsis-nn-legacy")
        np.testing.assert_array_equal(got, run_q7(q7.layers, xq, path).reshape(len(xq), -1))
        assert "SQNR" in text and report["kernels"] == kernels
    header = (out / "net.h").read_text()
    scale = re.search(r"#define NET_INPUT0_SCALE \(?([-0-9.e]+)f", header).group(1)
    assert float(scale) == 2.0 ** -q7.input_frac
    assert f"#define NET_INPUT0_FRAC {q7.input_frac}" in header
    assert "#define NET_INPUT0_ZERO_POINT 0" in header


@NEEDS_LEGACY
@NEEDS_CROSS
@pytest.mark.parametrize("label,model,calib,data,perm", DIGITS, ids=[d[0] for d in DIGITS])
def test_digits_cli_c_bit_exact_on_cortex_m4(tmp_path, label, model, calib, data, perm):
    """On Cortex-M4 (QEMU, the legacy DSP path): legacy C == portable C == executor."""
    from qconvert.quant.q7_plan import quantize_input

    q7, _ = _q7_of(str(model), str(calib))
    x = np.load(data)["test"][:6]
    x = x if perm is None else x.transpose(perm)
    xq = quantize_input(q7, x)
    want = run_q7(q7.layers, xq, "dsp").reshape(len(xq), -1)
    for kernels in ("cmsis-nn-legacy", "portable"):
        out, _, _ = _export(tmp_path, model, calib, kernels)
        files = {p.name: p.read_bytes() for p in out.iterdir()}
        got = run_m4(tmp_path / f"m4_{kernels}", files, "net", xq, 10,
                     legacy=kernels == "cmsis-nn-legacy")
        np.testing.assert_array_equal(got, want)


def test_legacy_calls_chosen_by_channel_constraints():
    """RGB for a square 3-channel input, _fast when in % 4 == 0 and out even, else _basic;
    the non-square variants for non-square geometry."""
    from qconvert.c_export.model.q7_calls import conv_function

    model = square_chain(np.random.default_rng(1))
    assert [conv_function(l) for l in model.layers if l.kind == "conv"] == [
        "arm_convolve_HWC_q7_RGB", "arm_convolve_HWC_q7_fast", "arm_convolve_HWC_q7_basic"]
    model = nonsquare_chain(np.random.default_rng(1))
    assert [conv_function(l) for l in model.layers if l.kind == "conv"] == [
        "arm_convolve_HWC_q7_fast_nonsquare", "arm_convolve_HWC_q7_basic_nonsquare"]
    # TensorFlow's SAME padding at stride 2 (nothing before, one after): the _fast kernels'
    # DSP build would read past the image (their middle region checks no bounds), so _basic
    same = Q7Layer("conv", "s", (8, 8, 16), (4, 4, 24), 0, 0, kernel=(3, 3), stride=(2, 2),
                   pad=(0, 0))
    assert conv_function(same) == "arm_convolve_HWC_q7_basic"
    same.pad = (1, 1)  # (8 + 2 - 3) // 2 + 1 = 4: symmetric, in bounds
    assert conv_function(same) == "arm_convolve_HWC_q7_fast"
    text = _render(model, "cmsis-nn-legacy")["q7net.c"].decode()
    for fn in ("arm_depthwise_separable_conv_HWC_q7_nonsquare", "arm_fully_connected_q7_opt",
               "arm_avepool_q7_HWC", "arm_relu_q7", "arm_nn_activations_direct_q7"):
        assert fn + "(" in text


def test_export_is_deterministic(tmp_path):
    """Same input -> byte-identical files."""
    model, calib = SAMPLES / "digits_cnn.tflite", SAMPLES / "digits_calib_nhwc.npy"
    a, _, _ = _export(tmp_path / "a", model, calib, "portable")
    b, _, _ = _export(tmp_path / "b", model, calib, "portable")
    assert {p.name: p.read_bytes() for p in a.iterdir()} == \
        {p.name: p.read_bytes() for p in b.iterdir()}


def test_header_scheme_q7(tmp_path):
    """export-c-header --scheme q7: shifts = in + w - bias / out fraction bits, weights and
    biases q7, the fully connected weights in the 1x4 order by default."""
    out = tmp_path / "w.h"
    result = _cli("export-c-header", SAMPLES / "digits_cnn.tflite", "--calibration",
                  SAMPLES / "digits_calib_nhwc.npy", "-o", out, "--name", "dg", "--scheme", "q7")
    assert result.exit_code == 0, result.output
    text = out.read_text()
    defines = dict(re.findall(r"#define (DG_L\d+_\w+) (-?\d+)\n", text))
    layers = sorted({k.split("_")[1] for k in defines if k.endswith("_BIAS_SHIFT")})
    assert layers
    for tag in layers:
        get = lambda key: int(defines[f"DG_{tag}_{key}"])  # noqa: E731
        assert get("BIAS_SHIFT") == get("IN_FRAC") + get("W_FRAC") - get("BIAS_FRAC") >= 0
        assert get("OUT_SHIFT") == get("IN_FRAC") + get("W_FRAC") - get("OUT_FRAC") >= 0
    assert "arm_fully_connected_q7_opt" in text
    # the header compiles as strict C99 and its arrays hold what the defines say
    import subprocess

    from helpers.export_c_harness import STRICT

    main_c = tmp_path / "main.c"
    main_c.write_text('#include "w.h"\nint main(void) { return (int)sizeof dg_l0_weights '
                      '+ DG_L0_BIAS_SHIFT - DG_L0_BIAS_SHIFT - (int)sizeof dg_l0_weights; }\n')
    subprocess.run(["gcc", *STRICT, "-I", str(tmp_path), str(main_c), "-o",
                    str(tmp_path / "a.out")], check=True, capture_output=True)
    assert subprocess.run([str(tmp_path / "a.out")]).returncode == 0


REFUSALS = [
    (["--kernels", "cmsis-nn"], "--scheme q7 takes --kernels cmsis-nn-legacy or portable"),
    (["--fc-layout", "rowmajor"], "1x4 order"),
]


@pytest.mark.parametrize("extra,message", REFUSALS)
def test_refused_options(tmp_path, extra, message):
    """Options the q7 scheme cannot take: one line, exit 1, nothing written."""
    out = tmp_path / "o"
    result = _cli("export-c", SAMPLES / "digits_cnn.tflite", "--calibration",
                  SAMPLES / "digits_calib_nhwc.npy", "-o", out, "--scheme", "q7", *extra)
    assert result.exit_code == 1 and message in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_legacy_kernels_need_the_q7_scheme(tmp_path):
    """--kernels cmsis-nn-legacy alone (int8 scheme) is refused, nothing written."""
    out = tmp_path / "o"
    result = _cli("export-c", SAMPLES / "digits_cnn.tflite", "--calibration",
                  SAMPLES / "digits_calib_nhwc.npy", "-o", out, "--kernels", "cmsis-nn-legacy")
    assert result.exit_code == 1 and "add --scheme q7" in result.output
    assert not out.exists()


def test_int8_model_refused(tmp_path):
    """An int8 model has no power-of-two q7 form: refused in one line."""
    out = tmp_path / "o"
    result = _cli("export-c", MODELS / "ad01_int8.tflite", "-o", out, "--scheme", "q7")
    assert result.exit_code == 1 and "--scheme q7 quantizes a float model" in result.output
    assert "Traceback" not in result.output and not out.exists()


@pytest.mark.parametrize("model,op", [("keras_resnet8", "is Add"),
                                      ("keras_ds_cnn", "arm_avepool_q7_HWC takes square")])
def test_ops_without_legacy_kernel_refused(tmp_path, model, op):
    """A residual Add, a non-square average pool: the legacy API has no kernel; one line naming
    the layer, nothing written."""
    corpus = MODELS / "corpus"
    out = tmp_path / "o"
    result = _cli("export-c", corpus / f"{model}.tflite", "--calibration",
                  corpus / f"{model}_calib.npy", "-o", out, "--scheme", "q7")
    assert result.exit_code == 1 and op in result.output and "layer '" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_shifts_never_negative_by_construction():
    """A layer whose output range would need more fraction bits than in + w gets out_frac
    capped (out_shift 0), its bias likewise (bias_shift 0): never a negative shift."""
    from qconvert.quant import q7_plan

    w = np.full((1, 1, 1, 1), 100.0)   # w_frac -1 (100 needs 7 integer bits)
    b = np.array([0.001])              # wants 16 fraction bits
    layer = q7_plan._linear("conv", _FakeNode(), _FakeGraph(), {"y": (0.0, 0.001)}, 0, w, b)
    assert layer.out_shift == 0 and layer.bias_shift == 0
    assert layer.out_frac == layer.in_frac + layer.w_frac


class _FakeTensor:
    def __init__(self, shape):
        self.shape = shape


class _FakeNode:
    name, op, outputs, inputs, attrs = "c", "Conv2D", ["y"], ["x"], {}


class _FakeGraph:
    tensors = {"x": _FakeTensor((1, 1, 1, 1)), "y": _FakeTensor((1, 1, 1, 1))}


def test_name_of_a_kernel_file_refused(tmp_path):
    """--name qconvert_q7 would overwrite the portable kernel source: refused, nothing written."""
    out = tmp_path / "o"
    result = _cli("export-c", SAMPLES / "digits_cnn.tflite", "--calibration",
                  SAMPLES / "digits_calib_nhwc.npy", "-o", out, "--scheme", "q7",
                  "--name", "qconvert_q7")
    assert result.exit_code == 1 and "kernel file" in result.output and not out.exists()


def test_arena_places_each_layers_input_and_output_apart():
    """A chain's arena: each layer's input and output at opposite ends of one region as large
    as the largest input + output; in-place layers stay; the legacy scratch after it."""
    from qconvert.c_export.model.q7_source import IN_PLACE, plan_arena

    for _, model in CHAINS:
        plan = plan_arena(model, "cmsis-nn-legacy")
        sizes = [int(np.prod(model.input_shape))] + [int(np.prod(l.out_shape))
                                                    for l in model.layers]
        for i, layer in enumerate(model.layers):
            lo_in, lo_out = plan.offsets[i], plan.offsets[i + 1]
            if layer.kind in IN_PLACE:
                assert lo_in == lo_out
            else:
                assert lo_in + sizes[i] <= lo_out or lo_out + sizes[i + 1] <= lo_in
            assert max(lo_in + sizes[i], lo_out + sizes[i + 1]) <= plan.region == plan.scratch
        assert plan.size > plan.region and plan_arena(model, "portable").size == plan.region


def _tables_onnx(path):
    """A float ONNX CNN ending in the paper's table activations: Conv -> Tanh ->
    GlobalAveragePool -> Flatten -> Gemm -> Sigmoid (random weights, fixed seed)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(0, 0.4, (8, 4, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.2, 8).astype(np.float32), "b"),
             numpy_helper.from_array(rng.normal(0, 0.8, (5, 8)).astype(np.float32), "fw"),
             numpy_helper.from_array(rng.normal(0, 0.2, 5).astype(np.float32), "fb")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Tanh", ["c"], ["t"]),
             helper.make_node("GlobalAveragePool", ["t"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["z"], transB=1),
             helper.make_node("Sigmoid", ["z"], ["y"])]
    graph = helper.make_graph(nodes, "tables", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 6, 6])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 5])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


@NEEDS_LEGACY
def test_table_activations_from_a_float_model(tmp_path):
    """Tanh / Sigmoid layers of a float model: their inputs get 4..7 fraction bits (the
    tables' int_width 0..3), the C calls arm_nn_activations_direct_q7, legacy and portable C
    equal the executor on the host, and the q7 output follows the float one (SQNR > 20 dB)."""
    model, calib = tmp_path / "tables.onnx", tmp_path / "calib.npy"
    _tables_onnx(str(model))
    np.save(calib, np.random.default_rng(4).normal(0, 1, (64, 4, 6, 6)).astype(np.float32))
    q7, report = _q7_of(model, calib)
    kinds = [l.kind for l in q7.layers]
    assert "tanh" in kinds and kinds[-1] == "sigmoid"
    for layer in q7.layers:
        if layer.kind in ("tanh", "sigmoid"):
            assert 4 <= layer.in_frac <= 7 and layer.out_frac == 7
    assert report["output_sqnr_db"] > 20
    x = quantize_input_of(q7, np.load(calib)[:8].transpose(0, 2, 3, 1))
    for kernels, path in (("cmsis-nn-legacy", "scalar"), ("portable", "scalar")):
        out, _, _ = _export(tmp_path, model, calib, kernels)
        files = {p.name: p.read_bytes() for p in out.iterdir()}
        if kernels == "cmsis-nn-legacy":
            assert "arm_nn_activations_direct_q7(" in files["net.c"].decode()
        got = run_host(tmp_path / f"run_{kernels}", files, "net", x, 5,
                       legacy=kernels == "cmsis-nn-legacy")
        np.testing.assert_array_equal(got, run_q7(q7.layers, x, path).reshape(len(x), -1))


def quantize_input_of(q7, x):
    from qconvert.quant.q7_plan import quantize_input

    return quantize_input(q7, x)


def test_q7_route_replaces_quantize_only():
    """`--scheme q7` runs the float export route with `quantize` replaced by `quantize-q7`
    (checks, conversion, calibration loading unchanged); an int8 source is refused."""
    from qconvert.cli import route_steps as step
    from qconvert.cli.routes import Q7_REFUSAL, find_route, q7_route

    for source in ("tflite", "onnx"):
        route = find_route(source, "c", "export", "float")
        q7 = q7_route(route)
        assert step.quantize in route.steps
        assert q7.steps == tuple(step.quantize_q7 if s is step.quantize else s
                                 for s in route.steps)
        assert step.quantize not in q7.steps and q7.refusal is None
    assert q7_route(find_route("tflite", "c", "export", "int8")).refusal == Q7_REFUSAL


@pytest.mark.parametrize("command,extra,message", [
    ("export-c", ["--patches", "2"], "--patches applies to the int8 scheme only"),
    ("export-c-header", ["--with-kernels"], "--with-kernels ships the int8"),
])
def test_int8_only_options_refused(tmp_path, command, extra, message):
    """Options of the int8 exports only: one line, nothing written."""
    out = tmp_path / ("o" if command == "export-c" else "o.h")
    result = _cli(command, SAMPLES / "digits_cnn.tflite", "--calibration",
                  SAMPLES / "digits_calib_nhwc.npy", "-o", out, "--scheme", "q7", *extra)
    assert result.exit_code == 1 and message in result.output and not out.exists()


def _conv_onnx(path, weight_shape, **attrs):
    """A float ONNX model of one Conv on a [1, 4, 8, 8] input (random weights)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).normal(0, 0.3, weight_shape).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("weights,attrs,message", [
    ((6, 4, 3, 3), {"dilations": [2, 2]}, "is dilated"),
    ((6, 2, 3, 3), {"group": 2}, "grouped convolution"),
    ((8, 1, 3, 3), {"group": 4}, "depth multiplier 2"),
])
def test_convolutions_without_legacy_kernel_refused(tmp_path, weights, attrs, message):
    """Dilated, grouped, depth-multiplier-2 convolutions: no legacy kernel; one line naming the
    layer, nothing written."""
    model, calib, out = tmp_path / "m.onnx", tmp_path / "c.npy", tmp_path / "o"
    _conv_onnx(str(model), weights, **attrs)
    np.save(calib, np.random.default_rng(1).normal(0, 1, (4, 4, 8, 8)).astype(np.float32))
    result = _cli("export-c", model, "--calibration", calib, "-o", out, "--scheme", "q7")
    assert result.exit_code == 1 and message in result.output and "layer '" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_table_input_format_chosen_through_a_pool(tmp_path):
    """Conv -> MaxPool -> Sigmoid: the pool keeps the convolution's format, so the convolution's
    output gets the table's 4..7 fraction bits (a wide range would give it fewer), and the
    executor's sigmoid follows the float one."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).normal(0, 3.0, (4, 4, 3, 3)).astype(np.float32)  # wide range
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Sigmoid", ["p"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    model, calib = tmp_path / "m.onnx", tmp_path / "c.npy"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    np.save(calib, np.random.default_rng(1).normal(0, 1, (16, 4, 8, 8)).astype(np.float32))
    q7, report = _q7_of(model, calib)
    assert [l.kind for l in q7.layers] == ["conv", "maxpool", "sigmoid"]
    assert q7.layers[0].out_frac == q7.layers[2].in_frac == 4  # range ~ +-30: clamped to 4
    assert report["output_sqnr_db"] > 20


def test_output_folder_inside_the_calibration_folder_refused(tmp_path):
    """As for int8: export-c would write among its inputs; refused, nothing written."""
    data = tmp_path / "calib"
    data.mkdir()
    np.save(data / "a.npy", np.load(SAMPLES / "digits_calib_nhwc.npy"))
    out = data / "c"
    result = _cli("export-c", SAMPLES / "digits_cnn.tflite", "--calibration", data, "-o", out,
                  "--scheme", "q7")
    assert result.exit_code == 1 and "calibration data folder" in result.output
    assert not out.exists()


def test_profiling_hook_around_every_layer_that_runs_code(tmp_path):
    """Built with -DQCONVERT_PROFILE, NAME_invoke calls NAME_layer_hook before and after each
    layer but reshapes (export-c's API); without it, no hook is referenced."""
    import subprocess

    from helpers.export_c_harness import STRICT

    model = CHAINS[0][1]
    files = _render(model, "portable")
    for f, data in files.items():
        (tmp_path / f).write_bytes(data)
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "q7net.h"\n'
        "static int8_t in[Q7NET_INPUT_SIZE], out[Q7NET_OUTPUT_SIZE];\n"
        "#ifdef QCONVERT_PROFILE\n"
        'void q7net_layer_hook(int index, const char *op, int phase)\n'
        '{ printf("%d %s %d\\n", index, op, phase); }\n#endif\n'
        "int main(void) { return q7net_invoke(in, out); }\n")
    sources = [str(p) for p in sorted(tmp_path.glob("*.c"))]
    for defines in (["-DQCONVERT_PROFILE"], []):
        subprocess.run(["gcc", *STRICT, *defines, *sources, "-o", str(tmp_path / "a")],
                       check=True, capture_output=True)
        text = subprocess.run([str(tmp_path / "a")], capture_output=True, text=True,
                              check=True).stdout
        expected = [f"{i} {l.extra.get('op', l.kind)} {phase}"
                    for i, l in enumerate(model.layers) if l.kind != "reshape"
                    for phase in (0, 1)] if defines else []
        assert text.splitlines() == expected


def test_accumulator_bound_refuses_32_bit_overflow():
    """|bias| << bias_shift + rounding + 128 * sum |w| must stay below 2^31: a layer that could
    overflow the kernels' int32 sums is refused naming it; the chains' layers pass."""
    from qconvert.errors import QConvertError
    from qconvert.quant.q7_plan import accumulator_bound, check_accumulators

    model = CHAINS[0][1]
    check_accumulators(model)
    fc = next(l for l in model.layers if l.kind == "fc")
    expected = int(np.max((np.abs(fc.bias.astype(np.int64)) << fc.bias_shift)
                          + ((1 << fc.out_shift) >> 1)
                          + 128 * np.abs(fc.weights.astype(np.int64)).sum(axis=1)))
    assert accumulator_bound(fc) == expected
    big = Q7Layer("fc", "big", (4,), (1,), 7, 0, np.ones((1, 4), np.int8),
                  np.array([127], np.int8), 7, -10)   # bias_shift 24: 127 << 24 > 2^31 / 2
    big.bias = np.array([127], np.int8)
    assert big.bias_shift == 24 and accumulator_bound(big) < 2 ** 31
    big.b_frac = -11                                  # bias_shift 25: 127 << 25 >= 2^31
    with pytest.raises(QConvertError, match="layer 'big'.*32 bits"):
        check_accumulators(Q7Model([big], "x", "y", (4,), 7))


def _sanitizers_available(tmp_path) -> bool:
    import subprocess

    src = tmp_path / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    return subprocess.run(["gcc", "-fsanitize=undefined,address", str(src), "-o",
                           str(tmp_path / "probe")], capture_output=True).returncode == 0


@pytest.mark.parametrize("label,model", CHAINS, ids=[c[0] for c in CHAINS])
def test_portable_kernels_clean_under_sanitizers(tmp_path, label, model):
    """No undefined behaviour, no out-of-bounds access: the portable q7 kernels and NAME.c
    under gcc's UndefinedBehaviorSanitizer and AddressSanitizer (any report aborts), and the
    results still the executor's."""
    import subprocess

    from helpers.export_c_harness import STRICT, parse
    from helpers.q7_harness import write_export

    if not _sanitizers_available(tmp_path):
        pytest.skip("gcc's sanitizer runtimes (libubsan, libasan) are not installed")
    x = np.random.default_rng(11).integers(-128, 128, size=(3, *model.input_shape)).astype(np.int8)
    out_size = int(np.prod(model.layers[-1].out_shape))
    folder = tmp_path / "c"
    main_c = write_export(folder, _render(model, "portable"), "q7net", x, out_size)
    (folder / "main.c").write_text(main_c)
    exe = folder / "model"
    subprocess.run(["gcc", *STRICT, "-O1", "-g", "-fsanitize=undefined,address",
                    "-fno-sanitize-recover=all", *map(str, sorted(folder.glob("*.c"))), "-o",
                    str(exe)], check=True, capture_output=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    got = np.array([o[0] for o in parse(run.stdout, [np.int8], len(x))]).reshape(len(x), -1)
    np.testing.assert_array_equal(got, run_q7(model.layers, x, "scalar").reshape(len(x), -1))
