"""`qconvert export-c-header` and `qconvert export-c`: the commands' work, from their options to
the files they write.

The CLI (`qconvert.cli`) declares the options and prints; these check them, load the model, run
the export route (`routes`: an int8 TFLite model as it is; a float TFLite or ONNX model
converted and quantized first), render the C (`header.render`, `model.render`) and write every file in
one all-or-nothing commit (`output_files`).
"""

from __future__ import annotations

from dataclasses import dataclass

from qconvert.errors import QConvertError


@dataclass
class Exported:
    """What an export wrote: `files` {path: bytes} in writing order, the int8 model's layer
    count, the files' `names` and, for `export-c`, the C name, the folder and the `ExportSummary`."""

    files: dict
    layers: int = 0
    names: list = None
    c_name: str = ""
    folder: object = None
    summary: object = None
    quantization: dict | None = None
    resources: dict | None = None


def check_output_folder(folder: Path) -> None:
    """Refuse, in one line, an export-c output folder that cannot be written: a dangling
    symbolic link, an existing file, or a missing parent directory."""
    if folder.is_symlink() and not folder.exists():
        raise QConvertError("output path is a symbolic link to nothing (dangling, or a loop)",
                            str(folder))
    if folder.exists() and not folder.is_dir():
        raise QConvertError("output path exists and is not a directory", str(folder))
    parent = folder.parent if str(folder.parent) else Path(".")
    if not parent.is_dir():
        raise QConvertError("output directory's parent does not exist", str(folder))


def int8_model(request, m, target: str):
    """(the int8 TFLite model to export, its provenance note, the quantization report, the
    float / int8 output pairs): the export route for `target` ("c-header" or "c") run over the
    loaded model `m`; a float one is quantized with the request's calibration options and
    gets `quantize`'s report (evaluation data, labels, --verify); an int8 one has no note and
    no report."""
    from qconvert.cli.quantizing import (check_quantize_request, finish_quantization,
                                         quantizing_job)
    from qconvert.cli.routes import find_route, precision_of

    from .source import quantization_note

    options = request.options(rounding=getattr(request, "rounding", "double"))
    route = find_route(m.format, target, "export", precision_of(m))
    if request.data_given:
        check_quantize_request(request)
    elif request.eval_data is not None or request.labels is not None or request.verify:
        raise QConvertError("--eval, --labels and --verify check a quantization: they apply "
                            "to a float model given with --calibration")
    job, evaluation = quantizing_job(request, m, route, options)
    if job.report is None:
        return job.model, None, None, None
    blob = b""
    if request.verify:
        from qconvert.formats.model_io import serialize

        blob = serialize(job.model, "tflite")
    report, pairs = finish_quantization(request, job, blob, "tflite", evaluation, options)
    return job.model, quantization_note(options, request.label), report, pairs


def run_export_route(model_path, input_shapes, outputs, target, input_layout, calibration,
                     calibration_random, norm, options, scheme="int8") -> tuple:
    """(the route's Job, the calibration data's label): the export route for `target`
    ("c-header" or "c") run over the model read from `model_path`; `scheme` "q7" runs it with
    `quantize-q7` in place of `quantize` (`routes.q7_route`)."""
    from pathlib import Path

    from qconvert.cli.command_inputs import calibration_data, load_with_shapes
    from qconvert.quant.calibration_data import input_specs
    from qconvert.cli.route_steps import Job, run_route
    from qconvert.cli.routes import find_route, precision_of, q7_route

    m = load_with_shapes(model_path, input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    load_data, label = None, ""
    if calibration is not None or calibration_random is not None:
        norm = norm()
        label = (Path(calibration).name if calibration is not None
                 else f"{calibration_random} random samples")

        def load_data(source):
            return calibration_data(input_specs(source), calibration, calibration_random, norm,
                                    options.max_memory), None

    route = find_route(m.format, target, "export", precision_of(m))
    if scheme == "q7":
        route = q7_route(route)
    job = run_route(route, Job(m, input_layout=input_layout, options=options,
                               load_data=load_data))
    return job, label


def _source(request):
    """(file name, SHA-256) of the request's model, recorded in the generated C."""
    import hashlib

    from qconvert.formats.model_io import read_bytes
    from qconvert.cli.requests import ModelSource, model_name

    model = request.model
    if isinstance(model, ModelSource):
        return model.name, model.sha256
    return model_name(model), hashlib.sha256(read_bytes(model)).hexdigest()


# The tensor types a layer's activations may have in a model LiteRT and TFLite Micro load;
# a STRING (or complex, resource...) tensor feeding CONV_2D is refused by both.
_ACTIVATION_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "float32", "bool"})


def _check_tensor_types(graph) -> None:
    """Refuse a model whose layers read or write a tensor of a type no runtime takes there."""
    for node in graph.nodes:
        for name in [*node.present_inputs(), *node.outputs]:
            t = graph.tensors.get(name)
            if t is not None and t.data is None and t.dtype not in _ACTIVATION_TYPES:
                raise QConvertError(f"tensor {name!r} of {node.op} {node.name!r} is {t.dtype}, "
                                    "which neither LiteRT nor TFLite Micro accepts there")


def _stem(request) -> str:
    """The model file's stem the default C names come from: without a float tag
    (`c_names.int8_stem`) when the export quantizes the model (calibration given)."""
    from qconvert.cli.requests import model_stem

    from .c_names import int8_stem

    stem = model_stem(request.model)
    return int8_stem(stem) if request.data_given else stem


def check_header_request(request) -> None:
    """Refusals that need no model."""
    if request.calibration is not None and request.calibration_random is not None:
        raise QConvertError("give at most one of --calibration DATA or --calibration-random N")


def header_prefix(request) -> str:
    """The C prefix: --name (checked) or the model file's stem, sanitized."""
    from .c_names import check_prefix, prefix_from_stem

    name = request.name
    return check_prefix(name) if name is not None else prefix_from_stem(_stem(request))


def export_header_work(request, m) -> tuple:
    """The work of `qconvert export-c-header` on the loaded model `m`: (header text, layer
    count, quantization report or None, its output pairs); writes nothing."""
    from .header.render import HeaderOptions, render_header

    check_header_request(request)
    prefix = header_prefix(request)
    name, sha256 = _source(request)
    try:
        m, note, report, pairs = int8_model(request, m, "c-header")
        _check_tensor_types(m.graph)
        if report is not None:
            from .model.resources import int8_resources

            resources = int8_resources(m)
            if resources is not None:
                report["resources"] = resources
        text = render_header(m, HeaderOptions(prefix, request.fc_layout, request.rounding, name,
                                              sha256, note))
    except QConvertError as exc:
        raise exc.with_path(str(request.model))
    return text, len(m.graph.nodes), report, pairs


def export_header_command(request) -> Exported:
    """Run `qconvert export-c-header` (see its --help): `request` is a
    `requests.ExportCHeaderRequest`."""
    from pathlib import Path

    from qconvert.cli.command_inputs import load_with_shapes
    from qconvert.formats.output_files import OutputFiles

    from .shipped_kernels import kernel_sources

    check_header_request(request)
    header_prefix(request)
    model = request.model
    out = Path(request.output) if request.output is not None else Path(model).with_name(
        f"{Path(model).stem}_weights.h")
    outputs = OutputFiles([model, *_data_inputs(request)])
    kernels = kernel_sources() if request.with_kernels else {}
    kernel_paths = [out.parent / k for k in kernels]
    if any(out.name == path.name for path in kernel_paths):
        raise QConvertError(f"the header would overwrite the kernel file {out.name}; "
                            "choose another -o", str(out))
    for path in kernel_paths:
        outputs.add(path)
    outputs.add(out)
    for path in (request.quant_report, request.report_html):
        if path is not None:
            outputs.add(path)
    _source(request)
    m = load_with_shapes(model, request.input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    text, layers, quantization, pairs = export_header_work(request, m)
    files = {**dict(zip(kernel_paths, kernels.values())), out: text.encode("ascii")}
    outputs.commit({**files, **quant_report_files(request, quantization, pairs)})
    return Exported(files, layers, quantization=quantization)


def _data_inputs(request) -> list:
    """The data files a request reads (calibration, evaluation, labels): inputs no output
    may replace."""
    from qconvert.quant.calibration_data import data_files
    from qconvert.cli.requests import is_path

    return [f for p in (request.calibration, request.eval_data, request.labels)
            if p is not None and is_path(p) for f in data_files(p)]


def check_not_in_data(folder, data: list) -> None:
    """Refuse an output folder that is a calibration data folder or inside one: export-c would
    write its files among the inputs."""
    import os

    out = os.path.realpath(folder)
    for path in data:
        if os.path.isdir(path):
            src = os.path.realpath(path)
            if out == src or out.startswith(src.rstrip(os.sep) + os.sep):
                raise QConvertError(f"is the calibration data folder {path} or inside it: "
                                    "export-c would write among its inputs; choose another "
                                    "-o", str(folder))


def check_c_request(request) -> str:
    """Refusals that need no model; the fully connected layout the request resolves to."""
    if request.calibration is not None and request.calibration_random is not None:
        raise QConvertError("give at most one of --calibration DATA or --calibration-random N")
    patches = request.patches
    if patches == 1 or patches < 0:
        raise QConvertError(f"--patches {patches}: give N >= 2 tiles per side (0: off)")
    if request.fc_layout == "1x4" and request.kernels == "cmsis-nn":
        raise QConvertError("--kernels cmsis-nn calls arm_fully_connected_s8, which reads "
                            "row-major weights: use --fc-layout rowmajor (the default there)")
    return request.fc_layout or ("rowmajor" if request.kernels == "cmsis-nn" else "1x4")


def c_name_of(request) -> str:
    """The model's C name: --name (checked) or the model file's stem, sanitized."""
    from .c_names import check_file_prefix, prefix_from_stem

    name = request.name
    return (check_file_prefix(name) if name is not None
            else prefix_from_stem(_stem(request)))


def export_c_work(request, m) -> tuple:
    """The work of `qconvert export-c` on the loaded model `m`: (C name, {file name: bytes},
    `ExportSummary`, the --report JSON text, the quantization report or None, its output
    pairs); writes nothing."""
    from .model.prepare import prepare_model
    from .model.render import ModelOptions, render_model

    fc_layout = check_c_request(request)
    c_name = c_name_of(request)
    name, sha256 = _source(request)
    m, note, quantization, pairs = int8_model(request, m, "c")
    prepared = prepare_model(m)  # static shapes, a streaming model's state split out
    files, summary = render_model(prepared, ModelOptions(c_name, request.kernels, fc_layout,
                                                         name, sha256, note,
                                                         patches=request.patches,
                                                         example=request.example))
    from .model.export_report import report_json
    from .model.resources import from_summary

    resources = from_summary(summary)
    if quantization is not None:
        quantization["resources"] = resources
    report = report_json(summary, {"model": name, "model_sha256": sha256, "name": c_name,
                                   "kernels": request.kernels, "fc_layout": fc_layout,
                                   "resources": resources})
    return c_name, files, summary, report, quantization, pairs


def quant_report_files(request, quantization, pairs) -> dict:
    """{path: bytes} of the quantization report (--quant-report JSON, --report-html) of a
    float model quantized for export; refused when the model was int8 already."""
    from qconvert.cli.quantizing import report_files
    from qconvert.cli.requests import model_name

    if quantization is None:
        if request.quant_report is not None or request.report_html is not None:
            raise QConvertError("--quant-report and --report-html describe a quantization: "
                                "they apply to a float model given with --calibration",
                                str(request.model))
        return {}
    return report_files(quantization, pairs, model_name(request.model), request.quant_report,
                        request.report_html)


def export_c_command(request) -> Exported:
    """Run `qconvert export-c` (see its --help): `request` is a `requests.ExportCRequest`;
    the JSON report (`export_report`) is written with the C files or not at all; raises
    QConvertError to refuse."""
    from pathlib import Path

    from qconvert.cli.command_inputs import load_with_shapes
    from qconvert.formats.output_files import OutputFiles
    from qconvert.quant.calibration_data import data_files
    from qconvert.cli.requests import is_path

    check_c_request(request)
    c_name_of(request)
    model, report = request.model, request.report
    calibration = request.calibration if is_path(request.calibration) else None
    folder = Path(request.output)
    check_output_folder(folder)
    check_not_in_data(folder, data_files(calibration))
    outputs = OutputFiles([model, *_data_inputs(request)])
    for path in (request.quant_report, request.report_html):
        if path is not None:
            outputs.add(path)
    # a report inside the output folder is checked once the folder exists, any other now
    report_in_folder = report is not None and Path(report).parent.resolve() == folder.resolve()
    if report is not None and not report_in_folder:
        outputs.add(report)
    _source(request)
    m = load_with_shapes(model, request.input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    c_name, files, summary, report_text, quantization, pairs = export_c_work(request, m)
    extra = quant_report_files(request, quantization, pairs)
    created = not folder.exists()
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise QConvertError(f"cannot create the output folder: {exc.strerror}",
                            str(folder)) from None
    try:
        paths = {folder / f: data for f, data in files.items()}
        for path in paths:
            outputs.add(path)
        contents = dict(paths)
        if report is not None:
            if report_in_folder:
                outputs.add(report)
            contents[report] = report_text.encode()
        outputs.commit({**contents, **extra})
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        raise
    from .model.resources import from_summary

    return Exported(paths, summary.layers, list(files), c_name, folder, summary, quantization,
                    from_summary(summary))
