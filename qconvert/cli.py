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


if __name__ == "__main__":
    main()
