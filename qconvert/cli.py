"""The `qconvert` command line.

Every command follows one error model: a user-facing failure (`QConvertError`) prints one line,
`qconvert: error: <file>: <cause>`, exits with status 1 and writes nothing. Outputs are written
atomically, after all work succeeded.
"""

from __future__ import annotations

import json
import sys

import click

from . import __version__
from .errors import QConvertError


class _Cli(click.Group):
    """Click group that turns QConvertError into one line and exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except QConvertError as exc:
            click.echo(f"qconvert: error: {exc}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("qconvert: interrupted; nothing written", err=True)
            sys.exit(130)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="qconvert")
def main():
    """qconvert: fuse, quantize and export neural networks for microcontrollers.

    Reads .tflite and ONNX models (the format is recognized from the content).

    \b
    Examples:
      qconvert inspect model.tflite
      qconvert convert model.onnx -o model_copy.onnx
      qconvert fuse model.onnx -o model_fused.onnx
    """


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
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


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output file "
              "(default: <model>_converted.<ext> next to the input).")
def convert(model, output):
    """Read a model, verify it and write it back out.

    The output format is the input's (ONNX to TFLite comes in a later release). Ops qconvert does
    not know are carried through unchanged. The input is never overwritten.

    \b
    Example:
      qconvert convert model.tflite -o model_out.tflite
    """
    from .model_io import (check_output_path, default_output, format_of_output, load_model,
                           serialize, write_atomic)

    if output is not None:
        check_output_path(output, [model])
    m = load_model(model)
    out = output or str(default_output(model, "converted", m.format))
    fmt = format_of_output(out, m.format)
    check_output_path(out, [model])
    try:
        data = serialize(m, fmt)
    except QConvertError as exc:
        raise exc.with_path(model)
    write_atomic(out, data)
    graph = m.graph
    click.echo(f"wrote {out} ({fmt}, {len(graph.nodes)} nodes, {len(data)} bytes)")


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
def fuse(model, output, pass_list, report):
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
    from .model_io import (check_output_path, default_output, format_of_output, load_model,
                           serialize, write_atomic)
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
    for path in (output, report):
        if path is not None:
            check_output_path(path, [model])
    m = load_model(model)
    out = output or str(default_output(model, "fused", m.format))
    fmt = format_of_output(out, m.format)
    check_output_path(out, [model])
    before = sum(len(g.nodes) for g in m.graphs)
    try:
        counts = run_pipeline(m, names, PassContext(fmt))
        data = serialize(m, fmt)
    except GraphError as exc:
        raise QConvertError(f"internal error: {exc}", model) from exc
    except QConvertError as exc:
        raise exc.with_path(model)
    after = sum(len(g.nodes) for g in m.graphs)
    if report is not None:
        write_atomic(report, (json.dumps({"passes": counts, "nodes_before": before,
                                          "nodes_after": after}, indent=2) + "\n").encode())
    write_atomic(out, data)
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


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output .tflite (int8) or .onnx (QDQ) "
              "(default: <model>_int8.<ext> next to the input).")
@click.option("--calibration", type=click.Path(), metavar="DATA",
              help="Calibration data: .npy (N, ...input), .npz (one array per input, or "
              "file.npz:key), a folder of .npy files or of images.")
@click.option("--calibration-random", type=click.IntRange(1), metavar="N",
              help="N random samples instead (a smoke run: the ranges mean nothing).")
@click.option("--eval", "eval_data", type=click.Path(), metavar="DATA",
              help="Data for the report's SQNR and top-1 (default: the calibration data).")
@click.option("--mean", help="Subtracted from image pixels (one value or one per channel).")
@click.option("--std", help="Divides image pixels after --mean (one value or per channel).")
@click.option("--scale", help="Multiplies image pixels (instead of --mean / --std).")
@click.option("--method", type=click.Choice(["minmax", "percentile"]), default="minmax",
              show_default=True, help="How activation ranges are taken from calibration.")
@click.option("--percentile", type=click.FloatRange(50, 100), default=99.99, show_default=True,
              help="Kept share of values for --method percentile.")
@click.option("--per-channel", is_flag=True, help="Per-channel conv weights (the default).")
@click.option("--fc-per-channel", is_flag=True,
              help="Fully connected weights per channel too (default: per tensor, as every "
              "TFLite Micro build runs).")
@click.option("--io-type", type=click.Choice(["int8", "float32"]), default="int8",
              show_default=True, help="int8 model inputs/outputs, or float32 with QUANTIZE / "
              "DEQUANTIZE at the edges.")
@click.option("--rounding", type=click.Choice(["double", "single"]), default="double",
              show_default=True, help="Requantization rounding the report's integer run assumes "
              "(single: CMSIS-NN built with CMSIS_NN_USE_SINGLE_ROUNDING).")
@click.option("--no-fuse", is_flag=True, help="Skip the fusion passes.")
@click.option("--batch-size", type=click.IntRange(1), default=16, show_default=True)
@click.option("--report", type=click.Path(), metavar="FILE.json", help="Also write the report "
              "as JSON.")
def quantize(model, output, calibration, calibration_random, eval_data, mean, std, scale,
             method, percentile, per_channel, fc_per_channel, io_type, rounding, no_fuse,
             batch_size, report):
    """Quantize a float model to int8: per-channel weights, calibrated activations.

    Fuses first, calibrates with the float reference executor, and writes int8 TFLite (runs in
    LiteRT and TFLite Micro) or ONNX with QuantizeLinear / DequantizeLinear pairs. Prints per
    layer the scales, zero points and SQNR against float, and the output SQNR.

    \b
    Example:
      qconvert quantize model.onnx --calibration calib.npy -o model_int8.onnx
      qconvert quantize model.tflite --calibration images/ --mean 127.5 --std 127.5
    """
    from .model_io import (check_output_path, default_output, format_of_output, load_model,
                           serialize, write_atomic)
    from .quant import calibration_data as cd
    from .quant.quantize import QuantizeOptions, quantize_model

    if (calibration is None) == (calibration_random is None):
        raise QConvertError("give exactly one of --calibration DATA or --calibration-random N")
    for path in (output, report):
        if path is not None:
            check_output_path(path, [model])
    m = load_model(model)
    out = output or str(default_output(model, "int8", m.format))
    fmt = format_of_output(out, m.format)
    check_output_path(out, [model])
    if fmt != m.format:
        raise QConvertError(f"quantizing {m.format} to {fmt} is not supported yet", model)
    specs = cd.input_specs(m.graph, m.format)
    norm = dict(mean=_numbers(mean), std=_numbers(std), scale=_numbers(scale))
    if calibration is not None:
        data = cd.load_calibration(calibration, specs, **norm)
    else:
        click.echo(f"qconvert: warning: {cd.RANDOM_CALIBRATION_WARNING}", err=True)
        data = cd.random_calibration(specs, calibration_random)
    evaluation = cd.load_calibration(eval_data, specs, **norm) if eval_data else None
    options = QuantizeOptions(method, percentile, fc_per_channel, io_type, rounding,
                              not no_fuse, batch_size)
    total = len(next(iter(data.values())))
    with cd.Progress(total, "calibrating") as bar:
        try:
            result = quantize_model(m, data, options, evaluation,
                                    progress=lambda done, _total: bar.update(done - bar.done))
            blob = serialize(m, fmt)
        except QConvertError as exc:
            raise exc.with_path(model)
    if report is not None:
        write_atomic(report, (json.dumps(result, indent=2) + "\n").encode())
    write_atomic(out, blob)
    click.echo(_render_quant_report(result))
    click.echo(f"wrote {out} ({fmt}, {len(blob)} bytes)")


def _render_quant_report(result: dict) -> str:
    lines = [f"{'layer':32} {'op':16} {'out scale':>10} {'zp':>5} {'SQNR dB':>8}"]
    for row in result["layers"]:
        out = row["output"]
        db = "-" if row["sqnr_db"] is None else f"{row['sqnr_db']:.1f}"
        lines.append(f"{row['layer'][:32]:32} {row['op']:16} {out['scale']:10.4g} "
                     f"{out['zero_point']:5d} {db:>8}")
    for name, db in result["output_sqnr_db"].items():
        lines.append(f"output {name}: SQNR {'-' if db is None else f'{db:.1f}'} dB "
                     f"over {result['samples']} samples")
    if "top1_agreement" in result:
        lines.append(f"top-1 agreement with float: {100 * result['top1_agreement']:.1f}%")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
