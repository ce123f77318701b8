"""The resource summary (`quant.resources`) of an int8 TFLite model, from export-c's own plan:
the model rendered in memory with the portable kernels gives its constant bytes (flash), arena
(RAM) and MACs, exactly what `export-c` would write and print."""

from __future__ import annotations

from qconvert.errors import QConvertError


def from_summary(summary) -> dict:
    """The resource summary of an `render.ExportSummary`."""
    from qconvert.quant.resources import summarize

    macs = sum(r["macs"] for r in summary.rows or [])
    return summarize(macs, int(summary.constant_bytes), int(summary.arena_size))


def int8_resources(model) -> dict | None:
    """The summary of the int8 TFLite model `model` (its bytes, or the IR, read again from its
    bytes: rendering changes the graph), or None when export-c cannot take it (its refusal is
    export-c's to print)."""
    from qconvert.formats.model_io import serialize
    from qconvert.formats.tflite_reader import read_tflite

    from .prepare import prepare_model
    from .render import ModelOptions, render_model

    try:
        blob = model if isinstance(model, bytes) else serialize(model, "tflite")
        copy = read_tflite(blob)
        _, summary = render_model(prepare_model(copy),
                                  ModelOptions("m", "portable", "1x4", "model", "", None))
    except QConvertError:
        return None
    return from_summary(summary)


def model_resources(model) -> dict:
    """The summary of any model: an int8 TFLite one as export-c plans it, any other with its
    MACs only (flash and arena known once it is quantized)."""
    from qconvert.formats.layer_table import layer_macs
    from qconvert.quant.resources import summarize
    from qconvert.cli.routes import precision_of

    if model.format == "tflite" and precision_of(model) == "int8":
        found = int8_resources(model)
        if found is not None:
            return found
    return summarize(sum(layer_macs(n, model.graph) for n in model.graph.nodes))
