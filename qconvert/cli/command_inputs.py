"""What commands read besides their options: the model (with `--input-shape`), calibration data
(`--calibration` / `--calibration-random`, or the API's arrays) and evaluation data (`--eval`).
Errors are `QConvertError`s naming the file; options are parsed in `requests`."""

from __future__ import annotations

import click

from ..errors import QConvertError, one_line
from .requests import is_path as _is_path


def load_with_shapes(model, input_shapes):
    """Load `model` (a path, or a `requests.ModelSource` held in memory) and apply
    `--input-shape` specs (errors name the file)."""
    from .input_shapes import apply_input_shapes, parse_input_shapes
    from ..formats.model_io import load_model, load_model_data

    shapes = parse_input_shapes(input_shapes)
    m = load_model(model) if _is_path(model) else load_model_data(model.data, model.name,
                                                                 model.path)
    try:
        apply_input_shapes(m, shapes)
    except QConvertError as exc:
        raise exc.with_path(model)
    return m


def normalization(mean, std, scale) -> dict:
    """`--mean`, `--std`, `--scale` parsed (as `requests.Calibrate.normalization` does)."""
    from .requests import Calibrate

    return Calibrate(mean=mean, std=std, scale=scale).normalization()


def memory_limit(text) -> int:
    """`--max-memory SIZE` in bytes (as `requests.Calibrate.max_memory_bytes` does)."""
    from .requests import Calibrate

    return Calibrate(max_memory=text).max_memory_bytes()


def evaluation_data(specs, eval_data, norm: dict, max_memory: int) -> dict | None:
    """Evaluation samples {input name: array} from --eval DATA (a path) or the API's arrays;
    None when not given."""
    from ..quant import calibration_data as cd

    if eval_data is None:
        return None
    if not _is_path(eval_data):
        from ..quant.array_data import arrays_for_inputs

        return arrays_for_inputs(eval_data, specs, norm, max_memory, "eval_data")
    return cd.load_calibration(eval_data, specs, **norm, max_bytes=max_memory)


def calibration_data(specs, calibration, calibration_random, norm: dict,
                     max_memory: int | None = None, verify=None) -> dict:
    """Calibration samples {input name: array} from --calibration DATA (normalized with `norm`)
    or --calibration-random N (with the warning, on stderr, that it is a smoke run).

    Data that looks unscaled for a float input (raw pixels or counts without --mean / --std /
    --scale, `calibration_data.scale_warning`) gets a warning on stderr, or is refused when
    `verify` is set: --verify promises a checked model, and an int8 model calibrated at the
    wrong scale is one its SQNR check against the same data would pass."""
    from ..quant import calibration_data as cd
    from ..executor.memory_limit import check_input_memory, default_limit

    limit = max_memory or default_limit()
    if calibration is not None:
        ranges: dict = {}
        if _is_path(calibration):
            data = cd.load_calibration(calibration, specs, **norm, max_bytes=limit,
                                       ranges=ranges)
        else:
            from ..quant.array_data import arrays_for_inputs

            data = arrays_for_inputs(calibration, specs, norm, limit, "calibration", ranges)
        message = cd.scale_warning(ranges)
        where = str(calibration) if _is_path(calibration) else "calibration"
        if message and verify:
            raise QConvertError(f"{message} (--verify refuses data at a doubtful scale)", where)
        if message:
            click.echo(f"qconvert: warning: {one_line(where)}: {message}", err=True)
        return data
    check_input_memory(specs, calibration_random, limit)
    click.echo(f"qconvert: warning: {cd.RANDOM_CALIBRATION_WARNING}", err=True)
    return cd.random_calibration(specs, calibration_random)
