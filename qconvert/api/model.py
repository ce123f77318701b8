"""`qconvert.Model`: a model held in memory, loaded from a file, bytes or an `onnx.ModelProto`,
or made by `qconvert.fuse` / `convert` / `quantize`.

A Model is its bytes (`to_bytes()`, exactly what the command line would write) plus a name (the
file name it stands for: default output names and the generated C derive from it). Every
operation reads a fresh copy of it, so a Model never changes. `run(inputs)` runs it in
qconvert's reference executors (float, or integer bit-exact with TFLite Micro), batched. A
quantized Model also carries the quantization `report` (the --report dict) and
`report_html()`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from qconvert.errors import QConvertError
from qconvert.cli.requests import ModelSource


class Model:
    """A TFLite or ONNX model (see the module docstring).

    >>> m = qconvert.load("sample_models/digits_cnn.onnx")
    >>> m.format, m.inputs
    ('onnx', ['input'])
    >>> m.run(np.zeros((2, 1, 28, 28), np.float32))["logits"].shape
    (2, 10)
    """

    def __init__(self, source: ModelSource, input_shapes=(), report: dict | None = None,
                 pairs=None):
        self.source = source
        self.input_shapes = tuple(input_shapes)
        self.report = report
        self._pairs = pairs
        self._ir = None

    # -- what it is -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The file name this model stands for (e.g. "digits_cnn_int8.tflite")."""
        return self.source.name

    @property
    def format(self) -> str:
        """"tflite" or "onnx"."""
        return self.ir().format

    @property
    def inputs(self) -> list:
        """The input tensor names, in order."""
        return list(self.ir().graph.inputs)

    @property
    def outputs(self) -> list:
        """The output tensor names, in order."""
        return list(self.ir().graph.outputs)

    def ir(self):
        """The model read into qconvert's IR (`qconvert.ir.Model`; read once, do not change
        it: operations read their own copy)."""
        if self._ir is None:
            from qconvert.cli.command_inputs import load_with_shapes

            self._ir = load_with_shapes(self.source, self.input_shapes)
        return self._ir

    def inspect(self) -> dict:
        """`qconvert inspect --json`: the per-layer table (op, shapes, bytes, MACs) and the
        resource summary (`resources`: flash, arena, MACs, Cortex-M instruction estimates)."""
        from qconvert.c_export.model.resources import model_resources
        from qconvert.formats.layer_table import summary

        report = summary(self.ir(), self.name)
        report["resources"] = model_resources(self.ir())
        return report

    def __repr__(self) -> str:
        return f"<qconvert.Model {self.name!r} ({len(self.source.data)} bytes)>"

    # -- results --------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The model file's bytes (what `qconvert ... -o FILE` writes)."""
        return self.source.data

    def save(self, path: str | os.PathLike, report: str | os.PathLike | None = None,
             report_html: str | os.PathLike | None = None) -> Path:
        """Write the model to `path` (and the report as JSON / HTML when asked: the CLI's
        --report / --report-html), all or nothing, as the command line writes files."""
        from qconvert.cli.quantizing import report_files
        from qconvert.formats.output_files import write_outputs
        from qconvert.formats.output_names import check_output_name

        check_output_name(path, "model", option="save()")
        suffix = Path(str(path)).suffix.lower()
        if suffix in (".tflite", ".onnx") and suffix != f".{self.format}":
            raise QConvertError(f"save() {suffix}: this model is {self.format}; give a name "
                                f"ending in .{self.format} (qconvert.convert changes the "
                                "format)", str(path))
        contents = {path: self.to_bytes()}
        if report is not None or report_html is not None:
            if self.report is None:
                raise QConvertError("only a quantized model has a report", str(path))
            contents.update(report_files(self.report, self._pairs, self.name, report,
                                         report_html))
        write_outputs(contents)
        return Path(path)

    def report_html(self) -> str:
        """The quantization report as one self-contained HTML page (--report-html)."""
        from qconvert.quant.report_html import render_html

        if self.report is None:
            raise QConvertError("only a quantized model has a report", self.name)
        return render_html(self.report, self.name, self._pairs)

    # -- running --------------------------------------------------------------------------
    def run(self, inputs, batch_size: int = 16) -> dict:
        """Run the model on `inputs`: one array (a single-input model) or {input name:
        array}, samples on axis 0, in the model's own layout and dtype (an int8 model takes
        int8 data). Returns {output name: array}. Float models run in the float reference
        executor, integer models in the integer one (bit-exact with TFLite Micro), in
        batches of `batch_size` samples.

        >>> m.run({"input": x})["logits"].argmax(1)
        """
        from qconvert.cli.verify import is_int8_model
        from qconvert.executor.float_executor import ExecutionError, run_float_batched

        model = self.ir()
        feeds = _feeds(model.graph, inputs)
        try:
            if not is_int8_model(model):
                return _named(run_float_batched(model, feeds, int(batch_size)), model.graph)
            from qconvert.executor.int_executor import run_int8

            total = len(next(iter(feeds.values())))
            params: dict = {}
            parts = [run_int8(model.graph, {k: v[i:i + batch_size] for k, v in feeds.items()},
                              params=params) for i in range(0, total, int(batch_size))]
        except ExecutionError as exc:
            raise QConvertError(str(exc), "inputs") from None
        return _named({k: np.concatenate([p[k] for p in parts]) for k in parts[0]},
                      model.graph)

    def quantize_inputs(self, inputs) -> dict:
        """Float data for a quantized model's int8 (int16) inputs: round(x / scale) + zero
        point, saturated (TFLite's QUANTIZE, as NAME_quantize_input does in C); float inputs
        are left as they are. `inputs` as `run` takes them.

        >>> q.run(q.quantize_inputs(x_float))
        """
        from qconvert.quant.params import quantized_inputs

        model = self.ir()
        return quantized_inputs(model.graph, _feeds(model.graph, inputs))


def _feeds(graph, inputs) -> dict:
    """{input name: array} from one array or a dict; refused in one line when they do not
    match the model's inputs."""
    if not isinstance(inputs, dict):
        if len(graph.inputs) != 1:
            raise QConvertError(f"one array for a model with {len(graph.inputs)} inputs; give "
                                "a {input name: array} dict", "inputs")
        inputs = {graph.inputs[0]: inputs}
    missing = [n for n in graph.inputs if n not in inputs]
    if missing:
        raise QConvertError(f"no array for input {missing[0]!r}", "inputs")
    feeds = {n: np.asarray(inputs[n]) for n in graph.inputs}
    if len({len(a) for a in feeds.values()}) != 1:
        raise QConvertError("the inputs have different numbers of samples", "inputs")
    return feeds


def _named(outputs: dict, graph) -> dict:
    """The outputs in the graph's order."""
    return {n: outputs[n] for n in graph.outputs if n in outputs}


def load(model, name: str | None = None, input_shapes=()) -> Model:
    """Read a model: a path to a .tflite or ONNX file (the format is recognized from the
    content), its bytes, or an `onnx.ModelProto`. `name` is the file name it stands for
    (default: the file's, else "model.tflite" / "model.onnx"); `input_shapes` fixes input
    shapes as --input-shape does ({name: shape} or ["name:1,3,28,28", ...]).

    >>> m = qconvert.load("model.onnx")
    >>> m = qconvert.load(onnx_model_proto, name="digits.onnx")

    Raises `qconvert.QconvertError` (one line naming the file and the cause) for a missing,
    unreadable or invalid model.
    """
    from qconvert.cli.requests import is_path

    if isinstance(model, Model):
        return model
    if is_path(model):
        from qconvert.formats.model_io import read_bytes

        source = ModelSource(read_bytes(model), name or Path(model).name, str(model))
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        source = ModelSource(data, name or _default_name(data))
    elif hasattr(model, "SerializeToString"):
        source = ModelSource(model.SerializeToString(), name or "model.onnx")
    else:
        raise QConvertError(f"expected a path, bytes or an onnx.ModelProto, not "
                            f"{type(model).__name__}", "model")
    m = Model(source, shape_specs(input_shapes))
    m.ir()  # refuse a bad model now, in one line
    return m


def _default_name(data: bytes) -> str:
    return "model.tflite" if data[4:8] == b"TFL3" else "model.onnx"


def shape_specs(input_shapes) -> tuple:
    """--input-shape texts from {name: shape} or texts."""
    if isinstance(input_shapes, dict):
        return tuple(f"{k}:{','.join(str(int(d)) for d in v)}" for k, v in input_shapes.items())
    if isinstance(input_shapes, str):
        return (input_shapes,)
    return tuple(input_shapes or ())
