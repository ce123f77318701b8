"""`qconvert export-c`: the command's work, from its options to the files it writes.

The CLI (`qconvert.cli.export_c`) declares the options; this checks them, loads and (for a float
model) quantizes the model, renders the C (`model_source`) and writes every file in one
all-or-nothing commit (`output_files`).
"""

from __future__ import annotations

import click

from qconvert.errors import QConvertError


def export_c_command(model, outdir, name, kernels, fc_layout, calibration, calibration_random,
                     norm, options, input_layout, input_shapes) -> None:
    """Run `qconvert export-c` (see its --help) with the `QuantizeOptions` a float model is
    quantized with; raises QConvertError to refuse."""
    import hashlib
    from pathlib import Path

    from qconvert.cli import _calibration_data, _load
    from qconvert.model_io import read_bytes
    from qconvert.output_files import OutputFiles
    from qconvert.quant.calibration_data import data_files, input_specs

    from .c_names import check_prefix, prefix_from_stem
    from .model_source import ModelOptions, render_model
    from .source import int8_tflite_for_export

    if calibration is not None and calibration_random is not None:
        raise QConvertError("give at most one of --calibration DATA or --calibration-random N")
    if fc_layout == "1x4" and kernels == "cmsis-nn":
        raise QConvertError("--kernels cmsis-nn calls arm_fully_connected_s8, which reads "
                            "row-major weights: use --fc-layout rowmajor (the default there)")
    fc_layout = fc_layout or ("rowmajor" if kernels == "cmsis-nn" else "1x4")
    c_name = check_prefix(name) if name is not None else prefix_from_stem(Path(model).stem)
    folder = Path(outdir)
    if folder.exists() and not folder.is_dir():
        raise QConvertError("output path exists and is not a directory", str(folder))
    parent = folder.parent if str(folder.parent) else Path(".")
    if not parent.is_dir():
        raise QConvertError("output directory's parent does not exist", str(folder))
    outputs = OutputFiles([model, *data_files(calibration)])
    sha256 = hashlib.sha256(read_bytes(model)).hexdigest()
    m = _load(model, input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    if input_layout is not None and m.format != "onnx":
        raise QConvertError("--input-layout applies to ONNX models only", model)
    loader, label = None, ""
    if calibration is not None or calibration_random is not None:
        label = (Path(calibration).name if calibration is not None
                 else f"{calibration_random} random samples")

        def loader(model_ir):
            return _calibration_data(input_specs(model_ir), calibration, calibration_random, norm,
                                     options.max_memory)

    m, note = int8_tflite_for_export(m, loader, options, label, input_layout or "nhwc",
                                     purpose="export C")
    files, summary = render_model(m, ModelOptions(c_name, kernels, fc_layout, Path(model).name,
                                                  sha256, note))
    created = not folder.exists()
    folder.mkdir(exist_ok=True)
    try:
        paths = {folder / f: data for f, data in files.items()}
        for path in paths:
            outputs.add(path)
        outputs.commit(paths)
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        raise
    click.echo(f"wrote {len(paths)} files to {folder}: {', '.join(files)}")
    helium = (f"; {summary.arena_helium} bytes for CMSIS-NN's Helium (MVE) builds"
              if summary.arena_helium is not None else "")
    click.echo(f"{c_name}: {summary.layers} layers ({kernels} kernels), arena "
               f"{summary.arena_size} bytes (RAM{helium}), constant data "
               f"{summary.constant_bytes} bytes (flash), {summary.overlapped} tensors placed "
               "over their inputs")
