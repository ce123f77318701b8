"""The `qconvert` command line.

Every command follows one error model: a user-facing failure (`QConvertError`) prints one line,
`qconvert: error: <file>: <cause>`, exits with status 1 and writes nothing. Outputs are written
atomically, after all work succeeded.
"""

from __future__ import annotations

import json
import os
import sys

import click

from . import __version__
from .errors import QConvertError


_PROGRAM = {"exits_after": False}  # True when run as the `qconvert` program (see `run`)


class _Cli(click.Group):
    """Click group that turns QConvertError into one line and exit status 1."""

    def invoke(self, ctx):
        from .errors import one_line
        from .output_files import Terminated, handle_termination

        raw = [*(getattr(ctx, "_protected_args", None) or ()), *ctx.args]  # invoke clears them
        try:
            with handle_termination(_PROGRAM["exits_after"]):
                return super().invoke(ctx)
        except QConvertError as exc:
            click.echo(f"qconvert: error: {exc}", err=True)
            sys.exit(1)
        except click.UsageError as exc:  # a bad option value: the tool's line, not click's usage
            where = f"; see qconvert {exc.ctx.info_name} --help" if exc.ctx else ""
            model = _model_argument(exc.ctx, raw)
            named = f"{model}: " if model else ""
            click.echo(f"qconvert: error: {one_line(named + exc.format_message())}{where}",
                       err=True)
            sys.exit(1)
        except Terminated as exc:
            click.echo(f"qconvert: terminated ({exc.args[0]}); nothing written", err=True)
            sys.exit(128 + exc.signum)
        except KeyboardInterrupt:
            click.echo("qconvert: interrupted; nothing written", err=True)
            sys.exit(130)


def _model_argument(sub_ctx, args: list):
    """The MODEL a usage error's command line names (click has not stored it yet): the first
    argument after the command name that is neither an option nor an option's value."""
    command = getattr(sub_ctx, "command", None)
    if command is None or not any(p.name == "model" for p in command.params):
        return None
    takes_value = {name for p in command.params if isinstance(p, click.Option)
                   and not p.is_flag and not p.count for name in p.opts + p.secondary_opts}
    if not args or args[0] != sub_ctx.info_name:
        return None
    rest, skip = args[1:], False
    for arg in rest:
        if skip:
            skip = False
        elif arg == "--":
            continue
        elif arg.startswith("-") and arg != "-":
            skip = arg in takes_value
        else:
            return arg
    return None


def _names_model(fn):
    """Command decorator: an error that names no file names the command's MODEL; a model too
    deeply nested for the reader, or work that runs out of memory, is an error, not a crash."""
    import functools

    @functools.wraps(fn)
    def wrapper(model, *args, **kwargs):
        import warnings

        try:
            with warnings.catch_warnings():  # numeric warnings would break the one-line promise;
                warnings.simplefilter("ignore", RuntimeWarning)  # the checks report what matters
                return fn(model, *args, **kwargs)
        except QConvertError as exc:
            raise exc.with_path(model)
        except RecursionError:
            raise QConvertError("the model is nested too deeply to process", model) from None
        except MemoryError:
            raise QConvertError("out of memory (see --max-memory where the command has it)",
                                model) from None

    return wrapper


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="qconvert")
def main():
    """qconvert: fuse, quantize and export neural networks for microcontrollers.

    Reads .tflite and ONNX models (the format is recognized from the content).

    \b
    Examples:
      qconvert inspect model.tflite
      qconvert fuse model.onnx -o model_fused.onnx
      qconvert convert model.onnx -o model.tflite
      qconvert quantize model.onnx --calibration calib.npy -o model_int8.tflite
      qconvert export-c-header model_int8.tflite -o model_weights.h --with-kernels
    """


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_names_model
def inspect(model, as_json):
    """Show a per-layer table: op, shapes, weight and activation bytes, MACs, quantization.

    \b
    Example:
      qconvert inspect sample_models/kws_ref_model.tflite
      qconvert inspect model.onnx --json > layers.json
    """
    from .layer_table import render, summary
    from .model_io import load_model

    report = summary(load_model(model), model)
    click.echo(json.dumps(report, indent=2) if as_json else render(report))


_input_layout_option = click.option(
    "--input-layout", type=click.Choice(["nhwc", "nchw"]), default=None,
    help="ONNX -> TFLite: 4-D inputs of the TFLite model NHWC (default) or NCHW (a TRANSPOSE "
    "follows them). Data (calibration, evaluation) is always in the ONNX model's layout.")


_verify_option = click.option(
    "--verify", type=click.IntRange(1), metavar="N",
    help="Run the input and the written model on N inputs in the reference executors and "
    "refuse to write (naming the pass or layer) when they diverge: float outputs within 1e-4 "
    "of each output's largest magnitude, int8 models bit for bit; quantize: N calibration "
    "samples, output SQNR at least 10 dB.")


_input_shape_option = click.option(
    "--input-shape", "input_shapes", multiple=True, metavar="NAME:d0,d1,...",
    help="Fix an input's shape (repeatable), e.g. input:1,3,224,224; every other shape is then "
    "inferred and constant shape arithmetic folded (as onnxsim --overwrite-input-shape).")


def _load(model, input_shapes):
    """Load `model` and apply --input-shape (errors name the file)."""
    from .input_shapes import apply_input_shapes, parse_input_shapes
    from .model_io import load_model

    shapes = parse_input_shapes(input_shapes)
    m = load_model(model)
    try:
        apply_input_shapes(m, shapes)
    except QConvertError as exc:
        raise exc.with_path(model)
    return m


def _onnx_to_tflite(m, input_layout, path):
    """The TFLite model of ONNX model `m` and its inputs' permutations (errors name `path`)."""
    from .passes.layout.layout_nhwc import onnx_to_tflite

    try:
        return onnx_to_tflite(m, input_layout or "nhwc")
    except QConvertError as exc:
        raise exc.with_path(path)


def _echo_conversion(m) -> None:
    from .passes.layout.layout_nhwc import describe_conversion

    for line in describe_conversion(m):
        click.echo(line)


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output file "
              "(default: <model>_converted.<ext> next to the input).")
@_input_layout_option
@_input_shape_option
@_verify_option
@_names_model
def convert(model, output, input_layout, input_shapes, verify):
    """Read a model, verify it and write it out: the same format, or ONNX to TFLite.

    The output format follows the output's extension. ONNX to TFLite runs the NCHW -> NHWC
    layout pass (float models; every op, weight and shape must be convertible, else one error
    lists what is not). Same-format conversion carries ops qconvert does not know through
    unchanged. The input is never overwritten.

    \b
    Example:
      qconvert convert model.tflite -o model_out.tflite
      qconvert convert model.onnx -o model.tflite --input-layout nhwc
    """
    from .model_io import default_output, format_of_output, serialize
    from .output_files import OutputFiles

    outputs = OutputFiles([model])
    if output is not None:
        outputs.add(output)
    m = _load(model, input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    out = output or str(default_output(model, "converted", m.format))
    fmt = format_of_output(out, m.format)
    if output is None:
        outputs.add(out)
    cross = (m.format, fmt) == ("onnx", "tflite")
    if input_layout is not None and not cross:
        raise QConvertError("--input-layout applies to ONNX -> TFLite conversion only", model)
    perms = None
    if cross:
        m, perms = _onnx_to_tflite(m, input_layout, model)
    try:
        data = serialize(m, fmt)
        if verify:
            from .verify import verify_convert

            verify_convert(m, lambda: _load(model, input_shapes), fmt, data, verify, perms)
    except QConvertError as exc:
        raise exc.with_path(model)
    outputs.commit({out: data})
    graph = m.graph
    click.echo(f"wrote {out} ({fmt}, {len(graph.nodes)} nodes, {len(data)} bytes)")
    if cross:
        _echo_conversion(m)


def _echo_passes(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from .passes import all_passes
    from .passes.pipeline import FUSE_PIPELINE

    passes = {p.name: p for p in all_passes()}
    for name in dict.fromkeys(FUSE_PIPELINE):
        click.echo(f"{name:22} {passes[name].summary}")
    ctx.exit()


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output file "
              "(default: <model>_fused.<ext> next to the input).")
@click.option("--passes", "pass_list", metavar="A,B,...",
              help="Run only these passes, in this order (see --list-passes).")
@click.option("--list-passes", is_flag=True, expose_value=False, is_eager=True,
              callback=_echo_passes, help="List the passes of the default pipeline and exit.")
@click.option("--report", type=click.Path(), metavar="FILE.json",
              help='Also write {"passes": {name: count}, "nodes_before": n, "nodes_after": m}.')
@_input_shape_option
@_verify_option
@_names_model
def fuse(model, output, pass_list, report, input_shapes, verify):
    """Fold BatchNorm, per-channel Mul/Div and Add/Sub into the conv or FC layer before them.

    Runs constant folding, dead-node elimination and the fusions (to a fixed point); for a TFLite
    output, Relu / Relu6 also become the layers' fused activations. Prints each pass's count of
    rewrites. Outputs are unchanged up to float rounding.

    \b
    Example:
      qconvert fuse model.onnx
      qconvert fuse model.tflite -o model_fused.tflite --report fuse.json
      qconvert fuse model.onnx --passes fuse-conv-batchnorm,eliminate
    """
    from .ir.graph import GraphError
    from .model_io import default_output, format_of_output, serialize
    from .output_files import OutputFiles
    from .passes import PassContext
    from .passes.pipeline import FUSE_PIPELINE, run_pipeline

    names = FUSE_PIPELINE
    if pass_list is not None:
        names = tuple(n.strip() for n in pass_list.split(",") if n.strip())
        known = {p for p in FUSE_PIPELINE}
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise QConvertError(f"unknown pass {', '.join(map(repr, unknown)) or '(none given)'}; "
                                "see qconvert fuse --list-passes")
    outputs = OutputFiles([model])
    for path in (output, report):
        if path is not None:
            outputs.add(path)
    m = _load(model, input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    out = output or str(default_output(model, "fused", m.format))
    fmt = format_of_output(out, m.format)
    if (m.format, fmt) == ("onnx", "tflite"):
        raise QConvertError("fuse writes the model's own format; for TFLite run qconvert "
                            f"convert (it takes -o {os.path.basename(out)}), then fuse its output", model)
    if output is None:
        outputs.add(out)
    before = sum(len(g.nodes) for g in m.graphs)
    try:
        counts = run_pipeline(m, names, PassContext(fmt))
        data = serialize(m, fmt)
        if verify:
            from .verify import verify_fuse

            verify_fuse(lambda: _load(model, input_shapes), fmt, names, PassContext(fmt), data,
                        verify)
    except GraphError as exc:
        raise QConvertError(f"internal error: {exc}", model) from exc
    except QConvertError as exc:
        raise exc.with_path(model)
    after = sum(len(g.nodes) for g in m.graphs)
    contents = {out: data}
    if report is not None:
        contents[report] = (json.dumps({"passes": counts, "nodes_before": before,
                                        "nodes_after": after}, indent=2) + "\n").encode()
    outputs.commit(contents)
    for name, count in counts.items():
        click.echo(f"{name:22} {count:5d}")
    click.echo(f"nodes: {before} -> {after}")
    click.echo(f"wrote {out} ({fmt}, {len(data)} bytes)")


def _numbers(text):
    """'127.5' or '125,122,113' -> a float or a list of floats (None stays None)."""
    if text is None:
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise QConvertError(f"not a number or comma-separated numbers: {text!r}") from None
    return values[0] if len(values) == 1 else values


_CALIBRATION_OPTIONS = (
    click.option("--calibration", type=click.Path(), metavar="DATA",
                 help="Calibration data: .npy (N, ...input), .npz (one array per input, or "
                 "file.npz:key), a folder of .npy files or of images."),
    click.option("--calibration-random", type=click.IntRange(1), metavar="N",
                 help="N random samples instead (a smoke run: the ranges mean nothing)."),
    click.option("--mean", help="Subtracted from image pixels (one value or one per channel)."),
    click.option("--std", help="Divides image pixels after --mean (one value or per channel)."),
    click.option("--scale", help="Multiplies image pixels (instead of --mean / --std)."),
    click.option("--method", type=click.Choice(["mse", "minmax", "percentile", "entropy"]),
                 default="mse", show_default=True,
                 help="How activation ranges are taken from calibration: mse (the clipping "
                 "range of least int8 error), minmax, percentile, entropy (TensorRT's KL)."),
    click.option("--percentile", type=click.FloatRange(50, 100), default=99.99,
                 show_default=True, help="Kept share of values for --method percentile."),
    click.option("--fc-per-channel", is_flag=True,
                 help="Fully connected weights per channel too (default: per tensor, as every "
                 "TFLite Micro build runs)."),
    click.option("--no-fuse", is_flag=True, help="Skip the fusion passes."),
    click.option("--no-bias-correction", is_flag=True, help="Keep the float biases as they are "
                 "(default: the mean output error weight rounding causes, measured on the "
                 "calibration data, is folded into each layer's bias)."),
    click.option("--equalize/--no-equalize", default=False, show_default=True,
                 help="Cross-layer equalization of conv -> (ReLU) -> conv and depthwise -> "
                 "pointwise pairs before calibration (exact in float)."),
    click.option("--engine", type=click.Choice(["numpy", "onnxruntime"]), default="numpy",
                 show_default=True, help="What runs the float model during calibration: "
                 "qconvert's reference executor, or onnxruntime if installed (ONNX models; "
                 "faster on large networks)."),
    click.option("--batch-size", type=click.IntRange(1), default=16, show_default=True),
    click.option("--max-memory", metavar="SIZE", help="Refuse a plan whose largest layer needs "
                 "more than SIZE per batch (e.g. 4G; default: half the physical memory, at most 8G)."),
)


def calibration_options(fn):
    """The calibration and quantization options shared by `quantize` and `export-c-header`
    (which quantizes a float model first): --calibration / --calibration-random, image
    normalization, --method / --percentile, --fc-per-channel, --no-fuse, --batch-size."""
    for option in reversed(_CALIBRATION_OPTIONS):
        fn = option(fn)
    return fn


def _max_memory(text):
    from .executor.memory_limit import default_limit, parse_size

    return default_limit() if text is None else parse_size(text)


def _calibration_data(specs, calibration, calibration_random, norm: dict,
                      max_memory: int | None = None) -> dict:
    """Calibration samples {input name: array} from --calibration DATA (normalized with `norm`)
    or --calibration-random N (with the warning that it is a smoke run)."""
    from .quant import calibration_data as cd
    from .executor.memory_limit import check_input_memory, default_limit

    limit = max_memory or default_limit()
    if calibration is not None:
        return cd.load_calibration(calibration, specs, **norm, max_bytes=limit)
    check_input_memory(specs, calibration_random, limit)
    click.echo(f"qconvert: warning: {cd.RANDOM_CALIBRATION_WARNING}", err=True)
    return cd.random_calibration(specs, calibration_random)


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output .tflite (int8) or .onnx (QDQ) "
              "(default: <model>_int8.<ext> next to the input).")
@calibration_options
@click.option("--eval", "eval_data", type=click.Path(), metavar="DATA",
              help="Data for the report's SQNR and top-1 (default: the calibration data).")
@click.option("--per-channel", is_flag=True, help="Per-channel conv weights (the default).")
@click.option("--io-type", type=click.Choice(["int8", "float32"]), default="int8",
              show_default=True, help="int8 model inputs/outputs, or float32 with QUANTIZE / "
              "DEQUANTIZE at the edges.")
@click.option("--rounding", type=click.Choice(["double", "single"]), default="double",
              show_default=True, help="Requantization rounding the report's integer run assumes "
              "(single: CMSIS-NN built with CMSIS_NN_USE_SINGLE_ROUNDING).")
@click.option("--activations", type=click.Choice(["int8", "int16"]), default="int8",
              show_default=True, help="int16: 16x8 (int16 activations, int8 weights, int64 "
              "biases) wherever TFLite Micro has the kernels (TFLite output).")
@click.option("--int16-layers", metavar="auto|N|NAME,...", help="Mixed 16x8: these layers "
              "int16, the rest int8, QUANTIZE between (auto: where the SQNR gain is worth the "
              "bytes; N: the N layers costing the most SQNR).")
@click.option("--report", type=click.Path(), metavar="FILE.json", help="Also write the report "
              "as JSON.")
@click.option("--report-html", type=click.Path(), metavar="FILE.html", help="Also write the "
              "report as one self-contained HTML page (per-layer SQNR bars, float vs int8 "
              "output scatter; no JavaScript).")
@_input_layout_option
@_input_shape_option
@_verify_option
@_names_model
def quantize(model, output, calibration, calibration_random, eval_data, mean, std, scale,
             method, percentile, per_channel, fc_per_channel, io_type, rounding, activations,
             int16_layers, no_fuse, no_bias_correction, equalize, engine, batch_size, max_memory,
             report, report_html, input_layout, input_shapes, verify):
    """Quantize a float model to int8: per-channel weights, calibrated activations.

    Fuses first, calibrates with the float reference executor, and writes int8 TFLite (runs in
    LiteRT and TFLite Micro) or ONNX with QuantizeLinear / DequantizeLinear pairs. An ONNX model
    with a .tflite output is converted to NHWC first (data stays in the ONNX layout). Prints per
    layer the scales, zero points and SQNR against the float model (ONNX also the SQNR of the
    error the layer's own quantization adds), and the output SQNR.

    \b
    Example:
      qconvert quantize model.onnx --calibration calib.npy -o model_int8.onnx
      qconvert quantize model.onnx --calibration calib.npy -o model_int8.tflite
      qconvert quantize model.tflite --calibration images/ --mean 127.5 --std 127.5
    """
    from .model_io import default_output, format_of_output, serialize
    from .output_files import OutputFiles
    from .quant import calibration_data as cd
    from .quant.quantize import QuantizeOptions, quantize_model

    if (calibration is None) == (calibration_random is None):
        raise QConvertError("give exactly one of --calibration DATA or --calibration-random N")
    if verify and (activations == "int16" or int16_layers is not None):
        from .quant.quantize import _int_executor_runs_int16

        if not _int_executor_runs_int16():
            raise QConvertError("--verify runs the integer executor, which has no 16x8 kernels "
                                "yet; leave out --verify with int16 activations", model)
    outputs = OutputFiles([model, *cd.data_files(calibration), *cd.data_files(eval_data)])
    for path in (output, report, report_html):
        if path is not None:
            outputs.add(path)
    m = _load(model, input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    out = output or str(default_output(model, "int8", m.format))
    fmt = format_of_output(out, m.format)
    if output is None:
        outputs.add(out)
    cross = (m.format, fmt) == ("onnx", "tflite")
    if fmt != m.format and not cross:
        raise QConvertError(f"quantizing {m.format} to {fmt} is not supported yet", model)
    if input_layout is not None and not cross:
        raise QConvertError("--input-layout applies to ONNX -> int8 TFLite only", model)
    from .quant.ort_engine import check_engine

    check_engine(engine, fmt)  # before loading data (and its warnings)
    specs = cd.input_specs(m.graph, m.format)
    norm = dict(mean=_numbers(mean), std=_numbers(std), scale=_numbers(scale))
    limit = _max_memory(max_memory)
    data = _calibration_data(specs, calibration, calibration_random, norm, limit)
    evaluation = (cd.load_calibration(eval_data, specs, **norm, max_bytes=limit)
                  if eval_data else None)
    source_data, perms = data, None
    if cross:  # data stays in the ONNX layout; it follows the model into the TFLite one
        from .passes.layout.layout_nhwc import data_to_tflite_layout

        m, perms = _onnx_to_tflite(m, input_layout, model)
        data, evaluation = (data_to_tflite_layout(d, perms) for d in (data, evaluation))
    options = QuantizeOptions(method, percentile, fc_per_channel, io_type, rounding,
                              not no_fuse, batch_size, limit,
                              bias_correction=not no_bias_correction, equalize=equalize,
                              engine=engine, activations=activations, int16_layers=int16_layers)
    total = len(next(iter(data.values())))
    with cd.Progress(total, "calibrating") as bar:
        try:
            result = quantize_model(m, data, options, evaluation,
                                    progress=lambda done, _total: bar.update(done - bar.done))
            blob = serialize(m, fmt)
        except QConvertError as exc:
            raise exc.with_path(model)
    if verify:
        from .verify import verify_quantize

        output_perms = m.meta.get("conversion", {}).get("outputs") if cross else None
        try:
            verify_quantize(lambda: _load(model, input_shapes), fmt, blob, verify, source_data,
                            perms, output_perms)
        except QConvertError as exc:
            raise exc.with_path(model)
    pairs = result.pop("_output_pairs", None)
    contents = {out: blob}
    if report is not None:
        contents[report] = (json.dumps(result, indent=2) + "\n").encode()
    if report_html is not None:
        from .quant.report_html import render_html

        contents[report_html] = render_html(result, os.path.basename(model), pairs).encode()
    outputs.commit(contents)
    click.echo(_render_quant_report(result))
    click.echo(f"wrote {out} ({fmt}, {len(blob)} bytes)")
    _warn_low_sqnr(model, result["output_sqnr_db"], method)
    if cross:
        _echo_conversion(m)


def _warn_low_sqnr(model, output_db: dict, method: str) -> None:
    """One warning line (stderr, exit stays 0) when an output's SQNR against the float model is
    below --verify's floor: the int8 model was written but is likely unusable."""
    from .verify import MIN_SQNR_DB

    low = [f"{name!r} {db:.1f} dB" for name, db in output_db.items()
           if db is not None and db < MIN_SQNR_DB]
    if low:
        click.echo(f"qconvert: warning: {model}: output SQNR against the float model below "
                   f"{MIN_SQNR_DB:g} dB ({', '.join(low)}): the int8 model is likely unusable; "
                   f"check it with --verify N, try another --method than {method} or better "
                   "calibration data", err=True)


def _render_quant_report(result: dict) -> str:
    def db(value):
        return "-" if value is None else f"{value:.1f}"

    added = any("added_sqnr_db" in row for row in result["layers"])
    lines = [f"{'layer':32} {'op':16} {'out scale':>10} {'zp':>5} {'SQNR dB':>8}"
             + (f" {'added dB':>8}" if added else "")]
    for row in result["layers"]:
        out = row["output"]
        line = (f"{row['layer'][:32]:32} {row['op']:16} {out['scale']:10.4g} "
                f"{out['zero_point']:5d} {db(row['sqnr_db']):>8}")
        if added:
            line += f" {db(row.get('added_sqnr_db')):>8}"
        lines.append(line)
    for row in result["layers"]:
        if row.get("widened_channels"):
            lines.append(f"widened weight scales (int32 bias guard): {row['layer']} channels "
                         f"{_ranges(row['widened_channels'])}")
    if "layer_sample_fraction" in result:
        lines.append(f"(layer SQNR over the first {100 * result['layer_sample_fraction']:.0f} % "
                     "of each tensor's values in the first sample)")
    elif result.get("layer_samples", result["samples"]) != result["samples"]:
        k = result["layer_samples"]
        lines.append(f"(layer SQNR over the first {k} sample{'s' if k > 1 else ''})")
    for name, value in result["output_sqnr_db"].items():
        lines.append(f"output {name}: SQNR {db(value)} dB over {result['samples']} samples")
    if "top1_agreement" in result:
        lines.append(f"top-1 agreement with float: {100 * result['top1_agreement']:.1f}%")
    if "report_run" in result:
        lines.append(f"(SQNR figures from a {result['report_run']})")
    if "int16" in result:
        from .quant.int16_report import render_int16

        lines += render_int16(result["int16"])
    return "\n".join(lines)


def _ranges(values: list) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    parts, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            parts.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return ", ".join(parts)


@main.command("export-c-header")
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output header "
              "(default: <model>_weights.h next to the input).")
@click.option("--name", help="Prefix of every C identifier, a C identifier (default: the model "
              "file's name, sanitized).")
@click.option("--fc-layout", type=click.Choice(["1x4", "rowmajor"]), default="1x4",
              show_default=True, help="Fully connected weight order. 1x4 interleaved is for "
              "qconvert's kernel (qconvert_fc_1x4_s8) and CMSIS-NN's legacy "
              "arm_fully_connected_q7_opt only; arm_fully_connected_s8 needs rowmajor.")
@click.option("--with-kernels", is_flag=True, help="Also write qconvert's portable C kernel "
              "for the 1x4 order (qconvert_fc_1x4.c / .h) next to the header.")
@click.option("--rounding", type=click.Choice(["double", "single"]), default="double",
              show_default=True, help="Requantization rounding the firmware uses, recorded in "
              "the header (single: CMSIS-NN built with CMSIS_NN_USE_SINGLE_ROUNDING).")
@calibration_options
@_input_layout_option
@_input_shape_option
@_names_model
def export_c_header(model, output, name, fc_layout, with_kernels, rounding, calibration,
                    calibration_random, mean, std, scale, method, percentile, fc_per_channel,
                    no_fuse, no_bias_correction, equalize, engine, batch_size, max_memory,
                    input_layout, input_shapes):
    """Write an int8 model as one C header for firmware (CMSIS-NN style).

    Per layer: int8 weights (conv OHWI, depthwise [1, H, W, C], fully connected 1x4 interleaved
    or row-major), int32 biases, per-channel multipliers and shifts exactly as TFLite Micro
    computes them when it loads the model, input / output offsets, activation clamps,
    dimensions, strides and padding. Takes an int8 TFLite model, or a float TFLite or ONNX
    model with --calibration (an ONNX model is converted to NHWC first, its data staying in the
    ONNX layout; then quantized).

    \b
    Example:
      qconvert export-c-header model_int8.tflite -o model_weights.h --name kws
      qconvert export-c-header model.tflite --calibration calib.npy --with-kernels
      qconvert export-c-header model.onnx --calibration calib.npy -o weights.h
    """
    import hashlib
    from pathlib import Path

    from .c_export.c_names import check_prefix, prefix_from_stem
    from .c_export.header import HeaderOptions, render_header
    from .c_export.shipped_kernels import kernel_sources
    from .c_export.source import int8_tflite_for_export
    from .model_io import read_bytes
    from .output_files import OutputFiles
    from .quant.calibration_data import data_files, input_specs
    from .quant.quantize import QuantizeOptions

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
    m = _load(model, input_shapes)
    outputs.add_inputs(m.meta.get("external_files", ()))
    if input_layout is not None and m.format != "onnx":
        raise QConvertError("--input-layout applies to ONNX models only", model)
    loader, label = None, ""
    if calibration is not None or calibration_random is not None:
        norm = dict(mean=_numbers(mean), std=_numbers(std), scale=_numbers(scale))
        label = (Path(calibration).name if calibration is not None
                 else f"{calibration_random} random samples")

        def loader(model_ir):
            return _calibration_data(input_specs(model_ir), calibration, calibration_random, norm,
                                     limit)

    limit = _max_memory(max_memory)
    options = QuantizeOptions(method, percentile, fc_per_channel, "int8", rounding, not no_fuse,
                              batch_size, limit, bias_correction=not no_bias_correction,
                              equalize=equalize, engine=engine)
    try:
        m, note = int8_tflite_for_export(m, loader, options, label, input_layout or "nhwc")
        text = render_header(m, HeaderOptions(prefix, fc_layout, rounding, Path(model).name,
                                              sha256, note))
    except QConvertError as exc:
        raise exc.with_path(model)
    blob = text.encode("ascii")
    outputs.commit({**dict(zip(kernel_paths, kernels.values())), out: blob})
    layers = len(m.graph.nodes)
    click.echo(f"wrote {out} ({layers} layers, {len(blob)} bytes)")
    for path in kernel_paths:
        click.echo(f"wrote {path}")


@main.command("export-c")
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", "outdir", type=click.Path(), required=True, metavar="DIR",
              help="Directory for NAME.h, NAME.c and the kernel sources (created if missing).")
@click.option("--name", help="Name of the model in C (NAME_invoke, NAME_ARENA_SIZE...), a C "
              "identifier (default: the model file's name, sanitized).")
@click.option("--kernels", type=click.Choice(["portable", "cmsis-nn"]), default="portable",
              show_default=True, help="portable: qconvert's own C99 kernels (written to DIR); "
              "cmsis-nn: calls into CMSIS-NN (conv, depthwise, fully connected, add, mul, "
              "pools, softmax; their s16 kernels for 16x8 layers except softmax), qconvert's "
              "kernels for the rest.")
@click.option("--fc-layout", type=click.Choice(["1x4", "rowmajor"]), default=None,
              help="Fully connected weight order (default: 1x4 for portable, rowmajor for "
              "cmsis-nn). 1x4 is for qconvert's kernel (and CMSIS-NN's legacy "
              "arm_fully_connected_q7_opt); arm_fully_connected_s8 needs rowmajor.")
@calibration_options
@_input_layout_option
@_input_shape_option
@_names_model
def export_c(model, outdir, name, kernels, fc_layout, calibration, calibration_random, mean,
             std, scale, method, percentile, fc_per_channel, no_fuse, no_bias_correction,
             equalize, engine, batch_size, max_memory, input_layout, input_shapes):
    """Write the whole int8 (or 16x8) model as interpreter-free C with a static memory plan.

    DIR/NAME.h declares NAME_invoke(input, output) (0 on success), NAME_ARENA_SIZE,
    NAME_INPUT_SIZE / NAME_OUTPUT_SIZE and the input and output scales and zero points;
    DIR/NAME.c holds the weights (static const, flash), the arena and the layer calls; the
    kernel sources it needs are written beside them. Every .c in DIR compiles together with
    gcc -std=c99 -Wall -Wextra -Werror -pedantic. The arena is planned ahead of time (tensor
    lifetimes, greedy by size, reshapes as aliases, element-wise ops and depthwise
    convolutions in place). Takes an int8 TFLite model, or a float TFLite or ONNX model with
    --calibration (as export-c-header does).

    \b
    Example:
      qconvert export-c model_int8.tflite -o model_c --name kws
      qconvert export-c model_int8.tflite -o model_c --kernels cmsis-nn
      qconvert export-c model.onnx --calibration calib.npy -o model_c
    """
    from .c_export.command import export_c_command
    from .quant.quantize import QuantizeOptions

    limit = _max_memory(max_memory)
    options = QuantizeOptions(method, percentile, fc_per_channel, "int8", "double", not no_fuse,
                              batch_size, limit, bias_correction=not no_bias_correction,
                              equalize=equalize, engine=engine)
    export_c_command(model, outdir, name, kernels, fc_layout, calibration, calibration_random,
                     dict(mean=_numbers(mean), std=_numbers(std), scale=_numbers(scale)),
                     options, input_layout, input_shapes)


def run():
    """The `qconvert` program: `main` in a process that exits when the command ends."""
    _PROGRAM["exits_after"] = True
    main()


if __name__ == "__main__":
    run()
