"""What each command is asked to do, as one dataclass per command: the command line and the
Python API (`qconvert.api`) both fill these, and the commands' work (`commands`,
`c_export.command`) reads only them.

Every field is a command-line option of the same name (`--no-fuse` is `no_fuse`, `-o` is
`output`) with the same default, so `qconvert quantize m.onnx --method minmax` and
`QuantizeRequest(model="m.onnx", method="minmax")` are the same request. Options are resolved
once, here: `Calibrate.options()` gives the `QuantizeOptions` (with `--max-memory` in bytes) and
`Calibrate.normalization()` the parsed `--mean` / `--std` / `--scale`.

`model` is a path, or a `ModelSource` (a model held in memory: the API's `qconvert.load`).
`calibration` / `eval_data` are a path (file or folder) or, from the API, an array, a
{input name: array} dict or an iterable of such batches (`quant.array_data`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass
class ModelSource:
    """A model given as bytes: `data` (TFLite or ONNX), `name` the file name it stands for (it
    names the model in errors, in the generated C's provenance comment and in default C names),
    `path` the file it was read from, if any (ONNX external data is found beside it)."""

    data: bytes
    name: str = "model"
    path: str | None = None

    @property
    def sha256(self) -> str:
        """The SHA-256 of the model's bytes (recorded in the generated C)."""
        return hashlib.sha256(self.data).hexdigest()

    def __str__(self) -> str:
        return self.path or self.name


def model_name(model) -> str:
    """The file name a request's model stands for (`Path(model).name` for a path)."""
    return model.name if isinstance(model, ModelSource) else Path(model).name


def model_stem(model) -> str:
    """The model's file name without its extension (default output and C names)."""
    return Path(model_name(model)).stem


def is_path(value) -> bool:
    """True for a file or folder name (str or os.PathLike), False for data held in memory."""
    import os

    return isinstance(value, (str, os.PathLike))


@dataclass
class Calibrate:
    """The calibration and quantization options `quantize`, `export-c-header` and `export-c`
    share (a float model given to an export is quantized first, with the same report:
    evaluation data, labels, --verify, the progress bar)."""

    calibration: object = None
    calibration_random: int | None = None
    mean: object = None
    std: object = None
    scale: object = None
    method: str = "mse"
    percentile: float = 99.99
    per_channel: bool = True
    fc_per_channel: bool = False
    no_fuse: bool = False
    no_bias_correction: bool = False
    equalize: bool = False
    engine: str = "numpy"
    batch_size: int = 16
    max_memory: object = None
    eval_data: object = None
    labels: object = None
    verify: int | None = None
    progress: bool = True

    def max_memory_bytes(self) -> int:
        """`--max-memory` in bytes (default: `executor.memory_limit.default_limit`), resolved
        here only."""
        from ..executor.memory_limit import default_limit, parse_size

        if self.max_memory is None:
            return default_limit()
        if isinstance(self.max_memory, int):
            return self.max_memory
        return parse_size(self.max_memory)

    def normalization(self) -> dict:
        """`--mean`, `--std`, `--scale` parsed: the keyword arguments of `load_calibration`."""
        return dict(mean=_numbers(self.mean), std=_numbers(self.std),
                    scale=_numbers(self.scale))

    def options(self, io_type: str = "int8", rounding: str = "double",
                activations: str = "int8", int16_layers=None):
        """The `QuantizeOptions` of these options (`max_memory` in bytes)."""
        from ..quant.quantize import QuantizeOptions

        return QuantizeOptions(self.method, self.percentile, self.fc_per_channel, io_type,
                               rounding, not self.no_fuse, self.batch_size,
                               self.max_memory_bytes(),
                               bias_correction=not self.no_bias_correction,
                               equalize=self.equalize, engine=self.engine,
                               activations=activations, int16_layers=int16_layers,
                               per_tensor=not self.per_channel)

    @property
    def data_given(self) -> bool:
        """Whether calibration data (or --calibration-random) was given."""
        return self.calibration is not None or self.calibration_random is not None

    @property
    def label(self) -> str:
        """How the generated C's provenance note names the calibration data."""
        if self.calibration_random is not None:
            return f"{self.calibration_random} random samples"
        if is_path(self.calibration):
            return Path(self.calibration).name
        return "arrays given in Python"


def _numbers(value):
    """'127.5' or '125,122,113' (the command line's text) or numbers (the API's) -> a float or
    a list of floats (None stays None)."""
    if value is None or not isinstance(value, str):
        if isinstance(value, (list, tuple)):
            return [float(v) for v in value]
        return None if value is None else float(value)
    try:
        values = [float(v) for v in value.split(",")]
    except ValueError:
        from ..errors import QConvertError

        raise QConvertError(f"not a number or comma-separated numbers: {value!r}") from None
    return values[0] if len(values) == 1 else values


@dataclass
class ConvertRequest:
    """`qconvert convert` (see its --help)."""

    model: object
    output: str | None = None
    input_layout: str | None = None
    input_shapes: tuple = ()
    verify: int | None = None
    keep_float16: bool = False


@dataclass
class FuseRequest:
    """`qconvert fuse` (see its --help); `passes` is --passes' comma-separated text."""

    model: object
    output: str | None = None
    passes: str | None = None
    report: str | None = None
    input_shapes: tuple = ()
    verify: int | None = None


@dataclass
class QuantizeRequest(Calibrate):
    """`qconvert quantize` (see its --help)."""

    model: object = None
    output: str | None = None
    io_type: str = "int8"
    rounding: str = "double"
    activations: str = "int8"
    int16_layers: str | None = None
    report: str | None = None
    report_html: str | None = None
    input_layout: str | None = None
    input_shapes: tuple = ()

    def quantize_options(self):
        """The `QuantizeOptions` of this request."""
        return self.options(self.io_type, self.rounding, self.activations, self.int16_layers)


@dataclass
class ExportCHeaderRequest(Calibrate):
    """`qconvert export-c-header` (see its --help)."""

    model: object = None
    output: str | None = None
    name: str | None = None
    fc_layout: str = "1x4"
    with_kernels: bool = False
    rounding: str = "double"
    scheme: str = "int8"
    quant_report: str | None = None
    report_html: str | None = None
    input_layout: str | None = None
    input_shapes: tuple = ()


@dataclass
class ExportCRequest(Calibrate):
    """`qconvert export-c` (see its --help); `output` is the folder (-o DIR)."""

    model: object = None
    output: str | None = None
    name: str | None = None
    kernels: str = "portable"
    fc_layout: str | None = None
    patches: int = 0
    report: str | None = None
    scheme: str = "int8"
    example: bool = False
    quant_report: str | None = None
    report_html: str | None = None
    input_layout: str | None = None
    input_shapes: tuple = ()


# The values an option takes (the command line's click.Choice lists, checked equal by
# tests/api/test_api.py) and the ranges of numeric options: `check_request` refuses others.
CHOICES = {
    "method": ("mse", "minmax", "percentile", "entropy"),
    "engine": ("numpy", "onnxruntime"),
    "io_type": ("int8", "float32"),
    "rounding": ("double", "single"),
    "activations": ("int8", "int16"),
    "kernels": ("portable", "cmsis-nn", "cmsis-nn-legacy"),
    "scheme": ("int8", "q7"),
    "fc_layout": ("1x4", "rowmajor", None),
    "input_layout": ("nhwc", "nchw", None),
}
RANGES = {"percentile": (50, 100), "batch_size": (1, None), "calibration_random": (1, None),
          "verify": (1, 1000), "patches": (0, None)}


def check_request(request) -> None:
    """Refuse an option value outside its choices or range, in one line naming the option
    (the command line's click checks these before a request exists; the API's keywords
    reach here)."""
    from ..errors import QConvertError

    for f in fields(request):
        value = getattr(request, f.name)
        if f.name in CHOICES and value not in CHOICES[f.name]:
            allowed = ", ".join(repr(c) for c in CHOICES[f.name] if c is not None)
            raise QConvertError(f"{f.name}={value!r}: give one of {allowed}")
        if f.name in RANGES and value is not None:
            lo, hi = RANGES[f.name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or value != value or value < lo or (hi is not None and value > hi):
                span = f"{lo}..{hi}" if hi is not None else f"at least {lo}"
                raise QConvertError(f"{f.name}={value!r}: give a number {span}")


def check_q7_request(request) -> None:
    """Refuse with --scheme q7 (or --kernels cmsis-nn-legacy) the options its path does not
    take yet (`c_export.q7_command` prints its own q7 report)."""
    from ..errors import QConvertError

    taken = {"eval_data": "--eval", "labels": "--labels", "verify": "--verify",
             "quant_report": "--quant-report", "report_html": "--report-html",
             "example": "--example"}
    given = [flag for name, flag in taken.items() if getattr(request, name, None)]
    if not request.per_channel:
        given.append("--per-tensor")
    if given:
        raise QConvertError(f"{', '.join(given)}: not with --scheme q7 (its own report: "
                            "docs/q7.md)")


def option_names(request_type) -> list:
    """The keyword names a request type takes (the API checks its keywords against these)."""
    return [f.name for f in fields(request_type)]


__all__ = ["ModelSource", "Calibrate", "ConvertRequest", "FuseRequest", "QuantizeRequest",
           "ExportCHeaderRequest", "ExportCRequest", "option_names", "check_request",
           "CHOICES", "RANGES"]
