"""What commands read besides their options: the model (with `--input-shape`), calibration data
(`--calibration` / `--calibration-random`, normalized with `--mean` / `--std` / `--scale`), and
the numbers and sizes options carry. Errors are `QConvertError`s naming the file."""

from __future__ import annotations

import click

from ..errors import QConvertError, one_line


def load_with_shapes(model: str, input_shapes):
    """Load `model` and apply `--input-shape` specs (errors name the file)."""
    from .input_shapes import apply_input_shapes, parse_input_shapes
    from ..formats.model_io import load_model

    shapes = parse_input_shapes(input_shapes)
    m = load_model(model)
    try:
        apply_input_shapes(m, shapes)
    except QConvertError as exc:
        raise exc.with_path(model)
    return m


def parse_numbers(text):
    """'127.5' or '125,122,113' -> a float or a list of floats (None stays None)."""
    if text is None:
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise QConvertError(f"not a number or comma-separated numbers: {text!r}") from None
    return values[0] if len(values) == 1 else values


def normalization(mean, std, scale) -> dict:
    """`--mean`, `--std`, `--scale` parsed: the keyword arguments of `load_calibration`."""
    return dict(mean=parse_numbers(mean), std=parse_numbers(std), scale=parse_numbers(scale))


def memory_limit(text) -> int:
    """`--max-memory SIZE` in bytes (default: `executor.memory_limit.default_limit`)."""
    from ..executor.memory_limit import default_limit, parse_size

    return default_limit() if text is None else parse_size(text)


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
        data = cd.load_calibration(calibration, specs, **norm, max_bytes=limit, ranges=ranges)
        message = cd.scale_warning(ranges)
        if message and verify:
            raise QConvertError(f"{message} (--verify refuses data at a doubtful scale)",
                                str(calibration))
        if message:
            click.echo(f"qconvert: warning: {one_line(str(calibration))}: {message}", err=True)
        return data
    check_input_memory(specs, calibration_random, limit)
    click.echo(f"qconvert: warning: {cd.RANDOM_CALIBRATION_WARNING}", err=True)
    return cd.random_calibration(specs, calibration_random)
