"""The route table (`qconvert.cli.routes`): every (source, target, intent) the commands can meet has
exactly one row, every step a row names is implemented, each refused combination is refused by
the CLI in one line with nothing written, and the steps that must not run do not (an int8 model
is never quantized again, a float one is quantized and converted exactly once)."""

from __future__ import annotations

import itertools

import pytest
from click.testing import CliRunner

from helpers.oracles import TEST_MODELS
from qconvert.cli.app import main
from qconvert.passes import get_pass
from qconvert.passes.onnx_to_tflite import convert as conversion_module
from qconvert.quant import quantize as quantize_module
from qconvert.cli import route_steps
from qconvert.cli.routes import ANY, C_TARGETS, ROUTES, find_route

FORMATS = ("onnx", "tflite")
DIGITS_ONNX = TEST_MODELS / "digits_cnn.onnx"
DIGITS_TFLITE = TEST_MODELS / "digits_cnn.tflite"
INT8_TFLITE = TEST_MODELS / "kws_ref_model.tflite"


def _rows(source, target, intent, precision):
    return [r for r in ROUTES if (r.source, r.target, r.intent) == (source, target, intent)
            and r.precision in (ANY, precision)]


def test_every_combination_has_exactly_one_route():
    for source, target, precision in itertools.product(FORMATS, FORMATS, ("float", "int8")):
        for intent in ("convert", "fuse", "quantize"):
            assert len(_rows(source, target, intent, precision)) == 1, (source, target, intent)
    for source, target, precision in itertools.product(FORMATS, C_TARGETS, ("float", "int8")):
        rows = _rows(source, target, "export", precision)
        assert len(rows) == 1 and rows[0].precision == precision, (source, target, precision)
    assert not [r for r in ROUTES if r.intent == "export" and r.precision == ANY]


def test_every_step_and_stage_is_implemented():
    # the tables hold the functions themselves: each a step of route_steps / stage of quantize
    steps = {s for r in ROUTES for s in r.steps}
    assert steps and all(getattr(route_steps, s.__name__) is s for s in steps)
    stages = {s for table in (*quantize_module.STAGES.values(), quantize_module.Q7_STAGES)
              for s in table}
    assert set(quantize_module.STAGES) == set(FORMATS)
    assert stages and all(getattr(quantize_module, s.__name__) is s for s in stages)
    for route in ROUTES:
        if route.refusal is not None:  # one line; only {output} is filled in
            assert "\n" not in route.refusal
            assert route.refusal.replace("{output}", "").count("{") == 0
    for name in (*conversion_module.ONNX_PREPARATION, *conversion_module.ONNX_SPATIAL,
                 *conversion_module.ONNX_ACTIVATIONS, "merge-reshapes",
                 *conversion_module.TFLITE_CLEANUP):
        get_pass(name)  # the conversion's pieces are registered passes, verified after each


def test_unknown_combination_is_refused():
    with pytest.raises(Exception, match="no route"):
        find_route("onnx", "c", "convert")


@pytest.mark.parametrize("args,model,message", [
    (["convert", DIGITS_TFLITE, "-o", "x.onnx"], DIGITS_TFLITE,
     "converting tflite to onnx is not supported yet"),
    (["fuse", DIGITS_TFLITE, "-o", "x.onnx"], DIGITS_TFLITE,
     "converting tflite to onnx is not supported yet"),
    (["fuse", DIGITS_ONNX, "-o", "x.tflite"], DIGITS_ONNX,
     "fuse writes the model's own format; for TFLite run qconvert convert (it takes -o "
     "x.tflite), then fuse its output"),
    (["quantize", DIGITS_TFLITE, "--calibration-random", "2", "-o", "x.onnx"], DIGITS_TFLITE,
     "quantizing tflite to onnx is not supported yet"),
    (["quantize", DIGITS_TFLITE, "--calibration-random", "2", "-o", "x.tflite",
      "--input-layout", "nchw"], DIGITS_TFLITE,
     "--input-layout applies to ONNX -> int8 TFLite only"),
    (["convert", DIGITS_ONNX, "-o", "x.onnx", "--input-layout", "nhwc"], DIGITS_ONNX,
     "--input-layout applies to ONNX -> TFLite conversion only"),
    (["export-c", INT8_TFLITE, "-o", "c", "--input-layout", "nhwc"], INT8_TFLITE,
     "--input-layout applies to ONNX models only"),
    (["export-c", DIGITS_TFLITE, "-o", "c"], DIGITS_TFLITE,
     "float model: to export C it must be int8; give --calibration DATA (or "
     "--calibration-random N) to quantize it first"),
])
def test_refused_routes_print_one_line_and_write_nothing(tmp_path, monkeypatch, args, model,
                                                         message):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 1
    assert result.stderr == f"qconvert: error: {model}: {message}\n"
    assert not list(tmp_path.iterdir())


def _counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_int8_model_is_exported_without_quantizing_or_converting(tmp_path, monkeypatch):
    quantized = _counting(monkeypatch, quantize_module, "quantize_model")
    converted = _counting(monkeypatch, conversion_module, "convert_onnx_to_tflite")
    result = CliRunner().invoke(main, ["export-c-header", str(INT8_TFLITE), "-o",
                                       str(tmp_path / "w.h")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "w.h").exists() and not quantized and not converted


@pytest.mark.parametrize("model,conversions", [(DIGITS_TFLITE, 0), (DIGITS_ONNX, 1)])
def test_float_model_is_quantized_once_for_export(tmp_path, monkeypatch, model, conversions):
    quantized = _counting(monkeypatch, quantize_module, "quantize_model")
    converted = _counting(monkeypatch, conversion_module, "convert_onnx_to_tflite")
    result = CliRunner().invoke(main, ["export-c-header", str(model), "-o", str(tmp_path / "w.h"),
                                       "--calibration-random", "4"])
    assert result.exit_code == 0, result.output
    assert len(quantized) == 1 and len(converted) == conversions
    assert quantized[0][0].format == "tflite"  # the converted model, not the ONNX one
