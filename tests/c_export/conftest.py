"""Fixtures of the c_export tests (visible to every module of this folder without an import)."""

from __future__ import annotations

import pytest
from helpers.every_op_model import every_op_model
from helpers.export_c_checks import invoke
from helpers.oracles import SAMPLE_MODELS, TEST_MODELS

from qconvert.formats.model_io import serialize


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    """{name: int8 TFLite path}: the shared models, the digits models quantized by qconvert
    (TFLite and ONNX), and a two-input, many-output model with one node of every op
    (`every_op_model`). Built once per module that asks for it."""
    folder = tmp_path_factory.mktemp("models")
    out = {m: TEST_MODELS / f"{m}.tflite" for m in ("kws_ref_model", "ad01_int8",
                                                     "pretrainedResnet_quant")}
    for name, src, calib in (("digits_tflite", "digits_cnn.tflite", "digits_calib_nhwc.npy"),
                             ("digits_onnx", "digits_cnn.onnx", "digits_calib_nchw.npy")):
        target = folder / f"{name}.tflite"
        result = invoke(["quantize", TEST_MODELS / src, "--calibration", SAMPLE_MODELS / calib,
                         "-o", target])
        assert result.exit_code == 0, result.output
        out[name] = target
    out["every_op"] = folder / "every_op.tflite"
    out["every_op"].write_bytes(serialize(every_op_model()))
    return out
