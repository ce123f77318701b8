"""`qconvert export-c --scheme q7` and `export-c-header --scheme q7`: the commands' work.

The flow (docs/q7.md): the float TFLite or ONNX model and its calibration data run the C
export route with its int8 `quantize` step replaced by `quantize-q7` (`routes.q7_route`):
conversion to NHWC for ONNX, fusion, int8's calibration, then the power-of-two q7 plan and its
report (`quant.q7_quantize`). The q7 model exists only in memory (no model file has such a
scheme) and goes to `model.q7_source.render_q7` (NAME.c / NAME.h) or
`header.q7_render.render_q7_header`;
every file is written in one all-or-nothing commit (`output_files`).
"""

from __future__ import annotations

from dataclasses import dataclass

from qconvert.errors import QConvertError


@dataclass
class ExportedQ7:
    """What a q7 export wrote: `files` {path: bytes}, the q7 model, its report, the C name."""

    files: dict
    model: object
    report: dict
    c_name: str = ""


def _q7_model(model_path, input_shapes, outputs, target, input_layout, calibration,
              calibration_random, norm, options):
    """(Q7Model, report) of the float model at `model_path` (module docstring)."""
    from .command import run_export_route

    job, _ = run_export_route(model_path, input_shapes, outputs, target, input_layout,
                              calibration, calibration_random, norm, options, scheme="q7")
    return job.q7, job.report


def plan_q7_for(model_path, calibration, options=None, input_layout=None) -> tuple:
    """(Q7Model, report) `export-c --scheme q7` would export for the float model at
    `model_path` and the calibration file `calibration` (default options, no normalization):
    for tests and benchmarks that compare the C with the executor."""
    from qconvert.cli.command_inputs import normalization
    from qconvert.formats.output_files import OutputFiles
    from qconvert.quant.quantize import QuantizeOptions

    return _q7_model(str(model_path), None, OutputFiles([str(model_path)]), "c", input_layout,
                     str(calibration), None, lambda: normalization(None, None, None),
                     options or QuantizeOptions())


def _provenance(model_path, options) -> str:
    from pathlib import Path

    return (f"the float model {Path(model_path).name} quantized by qconvert ({options.method} "
            "calibration)")


def export_c_q7(model, outdir, name, kernels, fc_layout, calibration, calibration_random, norm,
                options, input_layout, input_shapes, report=None, patches=0,
                scheme="q7") -> ExportedQ7:
    """Run `qconvert export-c --scheme q7` (module docstring); `report`: the JSON report's
    path (the q7 report: per layer formats, shifts, SQNR); `scheme` refuses the legacy kernels
    with the int8 scheme."""
    from pathlib import Path

    from qconvert import json_text
    from qconvert.formats.output_files import OutputFiles
    from qconvert.quant.calibration_data import data_files

    from .c_names import check_file_prefix, prefix_from_stem
    from .command import check_not_in_data, check_output_folder
    from .model.q7_source import KERNEL_SETS, render_q7

    if scheme != "q7":
        raise QConvertError("--kernels cmsis-nn-legacy calls the legacy q7 kernels: add "
                            "--scheme q7 (and a float model with --calibration)")
    if kernels not in KERNEL_SETS:
        raise QConvertError(f"--scheme q7 takes --kernels cmsis-nn-legacy or portable, not "
                            f"{kernels} (CMSIS-NN's s8 kernels take (multiplier, shift) pairs)")
    if fc_layout == "rowmajor":
        raise QConvertError("--scheme q7 writes fully connected weights in the 1x4 order of "
                            "arm_fully_connected_q7_opt: drop --fc-layout rowmajor")
    if patches:
        raise QConvertError("--patches applies to the int8 scheme only")
    if calibration is not None and calibration_random is not None:
        raise QConvertError("give at most one of --calibration DATA or --calibration-random N")
    c_name = check_file_prefix(name) if name is not None else prefix_from_stem(Path(model).stem)
    folder = Path(outdir)
    check_output_folder(folder)
    check_not_in_data(folder, data_files(calibration))
    outputs = OutputFiles([model, *data_files(calibration)])
    try:
        q7, q7_report = _q7_model(model, input_shapes, outputs, "c", input_layout, calibration,
                                  calibration_random, norm, options)
        files = render_q7(q7, c_name, kernels, _provenance(model, options))
    except QConvertError as exc:
        raise exc.with_path(model)
    created = not folder.exists()
    folder.mkdir(exist_ok=True)
    try:
        paths = {folder / f: data for f, data in files.items()}
        for path in paths:
            outputs.add(path)
        contents = dict(paths)
        if report is not None:
            outputs.add(report)
            contents[Path(report)] = json_text.dumps(
                {"model": Path(model).name, "name": c_name, "kernels": kernels,
                 **q7_report}).encode()
        outputs.commit(contents)
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        raise
    return ExportedQ7(paths, q7, q7_report, c_name)


def export_header_q7(model, output, name, fc_layout, with_kernels, calibration,
                     calibration_random, norm, options, input_layout,
                     input_shapes) -> ExportedQ7:
    """Run `qconvert export-c-header --scheme q7`: one header of q7 weights, biases, fraction
    bits, shifts and dimensions per layer for the legacy kernels."""
    from pathlib import Path

    from qconvert.formats.output_files import OutputFiles
    from qconvert.quant.calibration_data import data_files

    from .c_names import check_prefix, prefix_from_stem
    from .header.q7_render import render_q7_header

    if with_kernels:
        raise QConvertError("--with-kernels ships the int8 fully connected kernel; with "
                            "--scheme q7 use export-c --kernels portable for q7 kernels")
    if calibration is not None and calibration_random is not None:
        raise QConvertError("give at most one of --calibration DATA or --calibration-random N")
    prefix = check_prefix(name) if name is not None else prefix_from_stem(Path(model).stem)
    out = Path(output) if output is not None else Path(model).with_name(
        f"{Path(model).stem}_weights.h")
    outputs = OutputFiles([model, *data_files(calibration)])
    outputs.add(out)
    try:
        q7, q7_report = _q7_model(model, input_shapes, outputs, "c-header", input_layout,
                                  calibration, calibration_random, norm, options)
        text = render_q7_header(q7, prefix, fc_layout, _provenance(model, options))
    except QConvertError as exc:
        raise exc.with_path(model)
    files = {out: text.encode("ascii")}
    outputs.commit(files)
    return ExportedQ7(files, q7, q7_report, prefix)
