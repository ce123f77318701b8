"""The int8 TFLite model a C header is exported from.

`int8_tflite_for_export` is the one place that turns what the user gave into an int8 NHWC
TFLite graph: an int8 TFLite model is taken as it is; a float TFLite model is quantized first
(`quant.quantize.quantize_model`, fusion included) when calibration data is given; a float ONNX
model is converted to NHWC TFLite first (`passes.layout.layout_nhwc.onnx_to_tflite`; its calibration
data stays in the ONNX layout and is permuted with the model), then quantized the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from qconvert.errors import QConvertError
from qconvert.ir import Model
from qconvert.model_io import require_known_ops, require_one_graph

ONNX_QDQ_REFUSAL = ("an int8 (QDQ) ONNX model cannot be exported; give the float ONNX model "
                    "with --calibration DATA")


def is_float_model(model: Model) -> bool:
    """True when no activation of the main graph is quantized (weights may be: a hybrid model)."""
    return not any(t.data is None and (t.quant is not None or t.dtype in ("int8", "uint8"))
                   for t in model.graph.tensors.values())


def int8_tflite_for_export(model: Model, calibration: Callable | None = None,
                           options=None, calibration_label: str = "",
                           input_layout: str = "nhwc",
                           purpose: str = "export a C header") -> tuple:
    """`model` made ready for the header: (int8 TFLite model, provenance note or None).

    `calibration(model) -> {input name: samples}` loads calibration data (called only for a
    float model, with the model as given: ONNX data is in the ONNX layout; `calibration_label`
    names it in the note); `options` is the `QuantizeOptions` used then (int8 inputs and
    outputs). A float ONNX model is converted to TFLite with `input_layout` first, before its
    data is read, so a refusal names every op the conversion cannot take (unknown ones with
    the rest). Refuses int8 ONNX, a float model with ops unknown to qconvert (all named at
    once) or without calibration, and calibration for a model that is already int8 (whose
    unknown ops `header.render_header` names with the others it cannot express). A TFLite
    model is quantized in place; an ONNX one is left as it was. `purpose` words the refusals
    ("export a C header", "export C").
    """
    require_one_graph(model, purpose)
    if model.format == "onnx" and not is_float_model(model):
        raise QConvertError(ONNX_QDQ_REFUSAL)
    if not is_float_model(model):  # the header names unknown and unexpressible ops at once
        if calibration is not None:
            raise QConvertError("the model is already int8; --calibration and "
                                "--calibration-random apply to float models only")
        return model, None
    converted = None
    if model.format == "onnx":  # the conversion names every op it cannot take, unknown ones too
        from qconvert.passes.layout.layout_nhwc import data_to_tflite_layout, onnx_to_tflite

        converted, perms = onnx_to_tflite(model, input_layout)
    else:
        require_known_ops(model, purpose)
    if calibration is None:
        raise QConvertError(f"float model: to {purpose} it must be int8; give --calibration "
                            "DATA (or --calibration-random N) to quantize it first")
    from qconvert.quant.quantize import QuantizeOptions, quantize_model

    from qconvert.quant.ort_engine import check_engine

    options = options or QuantizeOptions()
    check_engine(options.engine, "tflite")  # before loading data (and its warnings)
    data = calibration(model)
    if converted is not None:
        model, data = converted, data_to_tflite_layout(data, perms)
    quantize_model(model, data, options)
    label = f" on {calibration_label}" if calibration_label else ""
    note = (f"quantized by qconvert from a float model: {options.method} calibration{label}, "
            f"fully connected weights {'per channel' if options.fc_per_channel else 'per tensor'}"
            f"{'' if options.fuse else ', no fusion'}")
    return model, note


def static_int8_shapes(model: Model) -> int:
    """Fix the dynamic batch of an int8 TFLite model to 1 and fold the shape arithmetic it
    feeds (the TFLite converter's Shape -> StridedSlice -> Pack -> Reshape flatten), as TFLite
    Micro, which allocates one sample, sees the model. Only the batch (axis 0) is fixed; the
    number of tensors changed is returned."""
    from qconvert.passes.cleanup.static_batch import _set_shape
    from qconvert.passes import PassContext
    from qconvert.passes.pipeline import run_pipeline

    changed = 0
    for t in model.graph.tensors.values():
        shape = t.shape
        if t.data is None and shape and not (isinstance(shape[0], int) and shape[0] >= 0):
            changed += _set_shape(t, (1,) + tuple(shape[1:]))
    if changed:
        run_pipeline(model, ("fold-constants", "eliminate"), PassContext(model.format))
    return changed
