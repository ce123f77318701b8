"""ONNX -> TFLite conversion checked against the runtimes: `conversion_of` converts an ONNX
model with the NCHW -> NHWC layout pass and compares onnxruntime (graph optimizations off) on
it with LiteRT (reference kernels) on the written .tflite, the data transposed as the
conversion says; `convert` returns just the TFLite model, `ops` its op sequence, `refusal` the
one-line error of a model that must be refused. Shared by the passes tests of the conversion
(test_layout_nhwc, test_onnx_export_ops)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.float_op_checks import ort_run
from helpers.oracles import assert_close, litert_invoke
from qconvert.errors import QConvertError
from qconvert.formats.model_io import load_model, serialize
from qconvert.passes.onnx_to_tflite.convert import convert_onnx_to_tflite


def convert(tmp_path, data: bytes, input_layout="nhwc", rel=1e-4, seeds=(0, 1)):
    """Convert, write, and compare onnxruntime with LiteRT; return the TFLite model."""
    return conversion_of(tmp_path, data, input_layout, rel, seeds).model


def conversion_of(tmp_path, data: bytes, input_layout="nhwc", rel=1e-4, seeds=(0, 1)):
    """`convert`, returning the whole `TfliteConversion`."""
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    model = load_model(path)
    conversion = convert_onnx_to_tflite(model, input_layout)
    tfl, perms = conversion.model, conversion.input_perms
    blob = serialize(tfl)
    graph = tfl.graph
    for seed in seeds:
        rng = np.random.default_rng(seed)
        feeds = {}
        for name in model.graph.inputs:
            shape = [d if isinstance(d, int) else 1 for d in model.graph.tensors[name].shape]
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
        ref = ort_run(data, feeds)
        got = litert_invoke(blob, [np.transpose(feeds[n], perms[n]) for n in graph.inputs])
        back = [np.transpose(g, np.argsort(conversion.output_perms[name]))
                for g, name in zip(got, graph.outputs)]
        assert_close(ref, back, rel)
    return conversion


def ops(model) -> list:
    """The op of every node of `model`, in graph order."""
    return [n.op for n in model.graph.nodes]


def refusal(tmp_path, data: bytes) -> str:
    """The error converting the ONNX model `data` raises: asserted to be one line starting
    "cannot convert ONNX to TFLite"; returned for the caller to check what it names."""
    path = tmp_path / "bad.onnx"
    path.write_bytes(data)
    with pytest.raises(QConvertError) as info:
        convert_onnx_to_tflite(load_model(path))
    message = str(info.value)
    assert "\n" not in message and message.startswith("cannot convert ONNX to TFLite")
    return message
