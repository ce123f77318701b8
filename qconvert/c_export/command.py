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


def _int8_model(model_path, input_shapes, outputs, target, input_layout, calibration,
                calibration_random, norm, options):
    """The int8 TFLite model to export and its provenance note (None for an int8 input): the
    export route for `target` ("c-header" or "c") run over the model read from `model_path`."""
    from .source import quantization_note

    job, label = run_export_route(model_path, input_shapes, outputs, target, input_layout,
                                  calibration, calibration_random, norm, options)
    note = quantization_note(options, label) if job.report is not None else None
    return job.model, note


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


def export_header_command(model, output, name, fc_layout, with_kernels, rounding, calibration,
                          calibration_random, norm, options, input_layout,
                          input_shapes) -> Exported:
    """Run `qconvert export-c-header` (see its --help); `norm()` parses the normalization
    options, `options` are the `QuantizeOptions` a float model is quantized with."""
    import hashlib
    from pathlib import Path

    from qconvert.formats.model_io import read_bytes
    from qconvert.formats.output_files import OutputFiles
    from qconvert.quant.calibration_data import data_files

    from .c_names import check_prefix, prefix_from_stem
    from .header.render import HeaderOptions, render_header
    from .shipped_kernels import kernel_sources

    if calibration is not None and calibration_random is not None:
        raise QConvertError("give at most one of --calibration DATA or --calibration-random N")
    prefix = check_prefix(name) if name is not None else prefix_from_stem(Path(model).stem)
    out = Path(output) if output is not None else Path(model).with_name(
        f"{Path(model).stem}_weights.h")
    outputs = OutputFiles([model, *data_files(calibration)])
    kernels = kernel_sources() if with_kernels else {}
    kernel_paths = [out.parent / k for k in kernels]
    if any(out.name == path.name for path in kernel_paths):
        raise QConvertError(f"the header would overwrite the kernel file {out.name}; "
                            "choose another -o", str(out))
    for path in kernel_paths:
        outputs.add(path)
    outputs.add(out)
    sha256 = hashlib.sha256(read_bytes(model)).hexdigest()
    try:
        m, note = _int8_model(model, input_shapes, outputs, "c-header", input_layout,
                              calibration, calibration_random, norm, options)
        _check_tensor_types(m.graph)
        text = render_header(m, HeaderOptions(prefix, fc_layout, rounding, Path(model).name,
                                              sha256, note))
    except QConvertError as exc:
        raise exc.with_path(model)
    files = {**dict(zip(kernel_paths, kernels.values())), out: text.encode("ascii")}
    outputs.commit(files)
    return Exported(files, len(m.graph.nodes))


def _check_not_in_data(folder, data: list) -> None:
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


def export_c_command(model, outdir, name, kernels, fc_layout, calibration, calibration_random,
                     norm, options, input_layout, input_shapes, report=None,
                     patches=0) -> Exported:
    """Run `qconvert export-c` (see its --help); `norm()` parses the normalization options,
    `options` are the `QuantizeOptions` a float model is quantized with; `report` the path of
    the JSON report (`export_report`), written with the C files or not at all; raises
    QConvertError to refuse."""
    import hashlib
    from pathlib import Path

    from qconvert.formats.model_io import read_bytes
    from qconvert.formats.output_files import OutputFiles
    from qconvert.quant.calibration_data import data_files

    from .c_names import check_file_prefix, prefix_from_stem
    from .model.render import ModelOptions, render_model

    if calibration is not None and calibration_random is not None:
        raise QConvertError("give at most one of --calibration DATA or --calibration-random N")
    if patches == 1 or patches < 0:
        raise QConvertError(f"--patches {patches}: give N >= 2 tiles per side (0: off)")
    if fc_layout == "1x4" and kernels == "cmsis-nn":
        raise QConvertError("--kernels cmsis-nn calls arm_fully_connected_s8, which reads "
                            "row-major weights: use --fc-layout rowmajor (the default there)")
    fc_layout = fc_layout or ("rowmajor" if kernels == "cmsis-nn" else "1x4")
    c_name = check_file_prefix(name) if name is not None else prefix_from_stem(Path(model).stem)
    folder = Path(outdir)
    if folder.is_symlink() and not folder.exists():
        raise QConvertError("output path is a symbolic link to nothing (dangling, or a loop)",
                            str(folder))
    if folder.exists() and not folder.is_dir():
        raise QConvertError("output path exists and is not a directory", str(folder))
    parent = folder.parent if str(folder.parent) else Path(".")
    if not parent.is_dir():
        raise QConvertError("output directory's parent does not exist", str(folder))
    _check_not_in_data(folder, data_files(calibration))
    outputs = OutputFiles([model, *data_files(calibration)])
    # a report inside the output folder is checked once the folder exists, any other now
    report_in_folder = report is not None and Path(report).parent.resolve() == folder.resolve()
    if report is not None and not report_in_folder:
        outputs.add(report)
    sha256 = hashlib.sha256(read_bytes(model)).hexdigest()
    m, note = _int8_model(model, input_shapes, outputs, "c", input_layout, calibration,
                          calibration_random, norm, options)
    files, summary = render_model(m, ModelOptions(c_name, kernels, fc_layout, Path(model).name,
                                                  sha256, note, patches=patches))
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
            from .model.export_report import report_json

            if report_in_folder:
                outputs.add(report)
            contents[report] = report_json(summary, {
                "model": Path(model).name, "model_sha256": sha256, "name": c_name,
                "kernels": kernels, "fc_layout": fc_layout}).encode()
        outputs.commit(contents)
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        raise
    return Exported(paths, summary.layers, list(files), c_name, folder, summary)
