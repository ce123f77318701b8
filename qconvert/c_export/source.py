"""The int8 TFLite model the C exports read, after the export route (`qconvert.cli.routes`) made it.

Which steps turn what the user gave into an int8 NHWC TFLite model is the route table's
business (an int8 TFLite model as it is; a float TFLite model quantized first; a float ONNX model
converted to NHWC TFLite, then quantized). Here: the provenance note of a model qconvert
quantized (`quantization_note`) and the static shapes TFLite Micro sees (`static_int8_shapes`).
"""

from __future__ import annotations

from qconvert.ir import Model


def quantization_note(options, calibration_label: str = "") -> str:
    """The header's provenance line for a model qconvert quantized from a float one: the
    calibration method and data (`calibration_label`), the fully connected weights' scheme and
    whether fusion ran (`options`: the `QuantizeOptions` used)."""
    label = f" on {calibration_label}" if calibration_label else ""
    weights = ("all weights per tensor" if getattr(options, "per_tensor", False) else
               f"fully connected weights "
               f"{'per channel' if options.fc_per_channel else 'per tensor'}")
    return (f"quantized by qconvert from a float model: {options.method} calibration{label}, "
            f"{weights}{'' if options.fuse else ', no fusion'}")


def static_int8_shapes(model: Model) -> int:
    """Fix the dynamic batch of an int8 TFLite model to 1 and fold the shape arithmetic it
    feeds (the TFLite converter's Shape -> StridedSlice -> Pack -> Reshape flatten), as TFLite
    Micro, which allocates one sample, sees the model. Only the batch (axis 0) is fixed; the
    number of tensors changed is returned."""
    from qconvert.passes.cleanup.static_batch import set_shape
    from qconvert.passes import PassContext
    from qconvert.passes.pipeline import run_pipeline

    changed = 0
    for t in model.graph.tensors.values():
        shape = t.shape
        if t.data is None and shape and not (isinstance(shape[0], int) and shape[0] >= 0):
            changed += set_shape(t, (1,) + tuple(shape[1:]))
    if changed:
        run_pipeline(model, ("fold-constants", "eliminate"), PassContext(model.format))
    return changed
