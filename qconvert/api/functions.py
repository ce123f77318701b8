"""The functions of the Python API: `fuse`, `convert`, `quantize`, `export_c_header` and
`export_c`, each the command of the same name without the files.

Each fills the command's request (`qconvert.cli.requests`) from its keywords (the command line's
options, same names and defaults: `--no-fuse` is `no_fuse=False`) and runs the same work
(`commands.*_work`, `c_export.command.*_work`), so the same input gives the same bytes as the
command line. Files are written only where asked (`.save()`, or the folder / path given to
the exports). Refusals raise `qconvert.QconvertError` with the command line's one-line
message.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Union

import numpy as np

from qconvert.errors import QConvertError
from qconvert.cli.requests import (ConvertRequest, ExportCHeaderRequest, ExportCRequest,
                               FuseRequest, ModelSource, QuantizeRequest)

from .model import Model, load, shape_specs
from .results import CExport, CHeader

# what calibration and evaluation data may be: a path (file or folder), one array, a
# {input name: array} dict, or an iterable of such batches
Data = Union[str, os.PathLike, np.ndarray, Mapping[str, np.ndarray], Iterable, None]
# what a model may be given as: a loaded Model, a path, its bytes, or an onnx.ModelProto
ModelLike = Union[Model, str, os.PathLike, bytes, object]


def _quantization(model: Model, report, pairs):
    """The float model quantized by an export, as a report holder (`report`, `report_html()`;
    None when the model was int8 already)."""
    if report is None:
        return None
    return Model(model.source, model.input_shapes, report=report, pairs=pairs)


def _command_line_only(request) -> None:
    """The q7 scheme (`--scheme q7`, `--kernels cmsis-nn-legacy`) writes its files itself
    (`c_export.q7_command`): on the command line only, so far."""
    from qconvert.cli.requests import check_request

    check_request(request)
    if request.scheme == "q7" or getattr(request, "kernels", "") == "cmsis-nn-legacy":
        raise QConvertError("the q7 scheme (scheme='q7', kernels='cmsis-nn-legacy') is on the "
                            "command line only so far: qconvert export-c --scheme q7 "
                            "(docs/q7.md)")


def _output_name(model: Model, tag: str, fmt: str) -> str:
    """The file name the command line writes by default: <stem>_<tag>.<fmt>."""
    return f"{Path(model.name).stem}_{tag}.{fmt}"


def _run(work, request, model: Model):
    """Run a command's work in the command line's error model: a QConvertError naming the
    model; a model too deep to process or out of memory is an error too."""
    import warnings

    from qconvert.cli.requests import check_request

    try:
        check_request(request)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return work()
    except QConvertError as exc:
        raise exc.with_path(model.name)
    except RecursionError:
        raise QConvertError("the model is nested too deeply to process", model.name) from None
    except MemoryError:
        raise QConvertError("out of memory (see max_memory)", model.name) from None


def _fresh(model: Model, input_shapes):
    """The IR of `model` read again (operations change it) with `input_shapes` applied."""
    from qconvert.cli.command_inputs import load_with_shapes

    return load_with_shapes(model.source, shape_specs(input_shapes) or model.input_shapes)


def _target(model: Model, to: str | None) -> str:
    fmt = to or model.format
    if fmt not in ("tflite", "onnx"):
        raise QConvertError(f"to={fmt!r}: give 'tflite' or 'onnx'", model.name)
    return fmt


def convert(model: ModelLike, to: str = "tflite", *, input_layout: str | None = None,
            input_shapes=(), verify: int | None = None, keep_float16: bool = False) -> Model:
    """Convert a model (`qconvert convert`): ONNX to TFLite (NCHW -> NHWC), or re-write it
    in its own format. Keywords are the command's options.

    >>> tfl = qconvert.convert(qconvert.load("model.onnx"), to="tflite",
    ...                        input_shapes={"input": (1, 3, 224, 224)})
    >>> tfl.save("model.tflite")
    """
    from qconvert.cli.commands import convert_work

    model = load(model)
    fmt = _target(model, to)
    request = ConvertRequest(model.source, None, input_layout, shape_specs(input_shapes),
                             verify, keep_float16)
    written = _run(lambda: convert_work(request, _fresh(model, input_shapes), fmt), request,
                   model)
    return Model(ModelSource(written.data, _output_name(model, "converted", fmt)))


def fuse(model: ModelLike, to: str | None = None, *, passes: str | None = None,
         input_shapes=(), verify: int | None = None) -> Model:
    """Fold BatchNorm, per-channel Mul/Div and Add/Sub into the layers before them
    (`qconvert fuse`). `passes` is the comma-separated list of --passes; the result's `report`
    holds the rewrites per pass and the node counts (the command's --report).

    >>> fused = qconvert.fuse(qconvert.load("model.onnx"))
    >>> fused.report["nodes_before"], fused.report["nodes_after"]
    """
    from qconvert.cli.commands import fuse_work

    model = load(model)
    fmt = _target(model, to)
    request = FuseRequest(model.source, None, passes, None, shape_specs(input_shapes), verify)
    out = _output_name(model, "fused", fmt)
    written = _run(lambda: fuse_work(request, _fresh(model, input_shapes), fmt, out), request,
                   model)
    return Model(ModelSource(written.data, out), report=written.report)


def quantize(model: ModelLike, calibration: Data = None, to: str | None = None, *,
             calibration_random: int | None = None, eval: Data = None,
             labels=None, mean=None, std=None, scale=None, method: str = "mse",
             percentile: float = 99.99, per_channel: bool = True,
             fc_per_channel: bool = False, io_type: str = "int8", rounding: str = "double",
             activations: str = "int8", int16_layers: str | None = None,
             no_fuse: bool = False, no_bias_correction: bool = False, equalize: bool = False,
             engine: str = "numpy", batch_size: int = 16, max_memory=None,
             input_layout: str | None = None, input_shapes=(), verify: int | None = None,
             progress: bool = True) -> Model:
    """Quantize a float model to int8 (`qconvert quantize`): per-channel weights, activations
    calibrated on `calibration`; `to` is the format written ("tflite": int8 TFLite, an ONNX
    model converted to NHWC first; "onnx": QDQ ONNX; default: the model's own).

    `calibration` (and `eval`, the report's data) is a path (.npy, .npz, a folder of .npy or
    images, as on the command line), one array (N, ...input) for a single-input model, a
    {input name: array} dict, or an iterable of such batches (a generator over a dataset,
    streamed: spooled to a temporary file batch by batch, never in memory whole). Data
    is in the source model's layout. `labels` (with `eval`): the class of each eval sample
    (an int array or a .npy path) for float vs int8 top-1 and the confusion matrix. The other
    keywords are the command's options with the same defaults; `mean` / `std` / `scale` take
    numbers or lists. The result's `report` is the --report dict; `report_html()` the page.

    >>> q = qconvert.quantize(m, calibration=x_calib, to="tflite")
    >>> q.report["output_sqnr_db"]
    >>> q.save("model_int8.tflite")
    """
    from qconvert.cli.commands import quantize_work

    model = load(model)
    fmt = _target(model, to)
    request = QuantizeRequest(
        calibration=calibration, calibration_random=calibration_random, mean=mean, std=std,
        scale=scale, method=method, percentile=percentile, per_channel=per_channel,
        fc_per_channel=fc_per_channel,
        no_fuse=no_fuse, no_bias_correction=no_bias_correction, equalize=equalize,
        engine=engine, batch_size=batch_size, max_memory=max_memory, model=model.source,
        eval_data=eval, labels=labels, io_type=io_type,
        rounding=rounding, activations=activations, int16_layers=int16_layers,
        input_layout=input_layout, input_shapes=shape_specs(input_shapes), verify=verify,
        progress=progress)
    written = _run(lambda: quantize_work(request, _fresh(model, input_shapes), fmt), request,
                   model)
    return Model(ModelSource(written.data, _output_name(model, "int8", fmt)),
                 report=written.report, pairs=written.pairs)


def export_c_header(model: ModelLike, path: str | os.PathLike | None = None, *,
                    name: str | None = None,
                    fc_layout: str = "1x4", with_kernels: bool = False,
                    rounding: str = "double", scheme: str = "int8", calibration: Data = None,
                    calibration_random: int | None = None, mean=None, std=None, scale=None,
                    method: str = "mse", percentile: float = 99.99,
                    per_channel: bool = True, fc_per_channel: bool = False,
                    no_fuse: bool = False,
                    no_bias_correction: bool = False, equalize: bool = False,
                    engine: str = "numpy", batch_size: int = 16, max_memory=None,
                    eval: Data = None, labels=None, input_layout: str | None = None,
                    input_shapes=(), verify: int | None = None,
                    progress: bool = True) -> CHeader:
    """The int8 model as one C header of packed weights (`qconvert export-c-header`); written
    to `path` when given (with the kernel sources beside it for `with_kernels`). A float model
    is quantized first with `calibration` (as `quantize` takes it).

    >>> h = qconvert.export_c_header(q, "model_weights.h", name="kws")
    >>> h.text.splitlines()[0]
    """
    from qconvert.c_export.command import export_header_work
    from qconvert.c_export.shipped_kernels import kernel_sources

    model = load(model)
    request = ExportCHeaderRequest(
        calibration=calibration, calibration_random=calibration_random, mean=mean, std=std,
        scale=scale, method=method, percentile=percentile, per_channel=per_channel,
        fc_per_channel=fc_per_channel,
        no_fuse=no_fuse, no_bias_correction=no_bias_correction, equalize=equalize,
        engine=engine, batch_size=batch_size, max_memory=max_memory, model=model.source,
        eval_data=eval, labels=labels, verify=verify, progress=progress,
        output=None, name=name, fc_layout=fc_layout, with_kernels=with_kernels,
        rounding=rounding, scheme=scheme, input_layout=input_layout,
        input_shapes=shape_specs(input_shapes))
    _command_line_only(request)
    if path is not None:
        from qconvert.formats.output_names import check_output_name

        check_output_name(path, "header", option="path")
    text, layers, quantization, pairs = _run(
        lambda: export_header_work(request, _fresh(model, input_shapes)),
                        request, model)
    kernels = kernel_sources() if with_kernels else {}
    header_name = Path(path).name if path is not None else \
        f"{Path(model.name).stem}_weights.h"
    result = CHeader({**kernels, header_name: text.encode("ascii")}, header_name, layers,
                     _quantization(model, quantization, pairs))
    if path is not None:
        result.save(Path(path).parent)
    return result


def export_c(model: ModelLike, dir: str | os.PathLike | None = None, *,
             name: str | None = None,
             kernels: str = "portable", fc_layout: str | None = None, patches: int = 0,
             example: bool = False, scheme: str = "int8",
             calibration: Data = None, calibration_random: int | None = None, mean=None,
             std=None, scale=None, method: str = "mse", percentile: float = 99.99,
             per_channel: bool = True, fc_per_channel: bool = False, no_fuse: bool = False,
             no_bias_correction: bool = False, equalize: bool = False, engine: str = "numpy",
             batch_size: int = 16, max_memory=None, eval: Data = None, labels=None,
             input_layout: str | None = None, input_shapes=(), verify: int | None = None,
             progress: bool = True) -> CExport:
    """The whole int8 model as C (`qconvert export-c`): NAME.h, NAME.c and the kernel
    sources, written to the folder `dir` when given. A float model is quantized first with
    `calibration` (as `quantize` takes it; `eval`, `labels`, `verify` as there). The result's
    `report` is the --report dict (per-layer figures and totals: arena, flash, MACs) and
    `quantization.report` / `quantization.report_html()` the quantization's report.

    >>> c = qconvert.export_c(q, "model_c", name="digits")
    >>> c.report["totals"]["arena_bytes"], sorted(c.files)[:2]
    """
    from qconvert.c_export.command import export_c_work

    model = load(model)
    request = ExportCRequest(
        calibration=calibration, calibration_random=calibration_random, mean=mean, std=std,
        scale=scale, method=method, percentile=percentile, per_channel=per_channel,
        fc_per_channel=fc_per_channel,
        no_fuse=no_fuse, no_bias_correction=no_bias_correction, equalize=equalize,
        engine=engine, batch_size=batch_size, max_memory=max_memory, model=model.source,
        eval_data=eval, labels=labels, verify=verify, progress=progress,
        output=None if dir is None else str(dir), name=name, kernels=kernels,
        fc_layout=fc_layout, patches=patches, example=example, scheme=scheme,
        input_layout=input_layout, input_shapes=shape_specs(input_shapes))
    _command_line_only(request)
    if dir is not None:
        from qconvert.formats.output_names import check_output_folder

        check_output_folder(dir, option="dir")
    c_name, files, summary, report, quantization, pairs = _run(
        lambda: export_c_work(request, _fresh(model, input_shapes)), request, model)
    result = CExport(files, c_name, summary, report, _quantization(model, quantization, pairs))
    if dir is not None:
        result.save(dir)
    return result
