"""The `qconvert` command line.

Every command follows one error model: a user-facing failure (`QConvertError`) prints one line,
`qconvert: error: <file>: <cause>`, exits with status 1 and writes nothing. Outputs are written
atomically, after all work succeeded.
"""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from .options import (calibration_options, export_report_options, input_layout_option,
                      input_shape_option, scheme_option, verify_option)
from ..errors import QConvertError


_PROGRAM = {"exits_after": False}  # True when run as the `qconvert` program (see `run`)


class _Cli(click.Group):
    """Click group that turns QConvertError into one line and exit status 1."""

    def invoke(self, ctx):
        from ..errors import one_line
        from ..formats.output_files import Terminated, handle_termination

        raw = [*(getattr(ctx, "_protected_args", None) or ()), *ctx.args]  # invoke clears them
        try:
            with handle_termination(_PROGRAM["exits_after"]):
                _import_heavy_modules()
                return super().invoke(ctx)
        except QConvertError as exc:
            click.echo(f"qconvert: error: {exc}", err=True)
            sys.exit(1)
        except click.UsageError as exc:  # a bad option value: the tool's line, not click's usage
            where = f"; see qconvert {exc.ctx.info_name} --help" if exc.ctx else ""
            model = _model_argument(exc.ctx, raw)
            named = f"{model}: " if model else ""
            message = one_line(named + exc.format_message())
            if where and message.endswith("."):  # "Missing option '-o'.; see" -> "...'-o'; see"
                message = message[:-1]
            click.echo(f"qconvert: error: {message}{where}", err=True)
            sys.exit(1)
        except Terminated as exc:
            click.echo(f"qconvert: terminated ({exc.args[0]}); nothing written", err=True)
            sys.exit(128 + exc.signum)
        except KeyboardInterrupt:
            click.echo("qconvert: interrupted; nothing written", err=True)
            sys.exit(130)


def _import_heavy_modules() -> None:
    """Import onnx (with protobuf and numpy) with signals deferred: a SIGINT or SIGTERM that
    interrupted their C++ initialization aborted the process (SIGABRT / SIGSEGV) instead of
    ending it with the one line; deferred, it ends the command as soon as they are loaded.
    Every command loads them anyway (the model readers and writers)."""
    from ..formats.output_files import deferred_signals

    with deferred_signals():
        import onnx  # noqa: F401


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
    from ..c_export.model.resources import model_resources
    from ..formats.layer_table import render, summary
    from ..formats.model_io import load_model
    from ..quant.resources import render as render_resources

    from ..json_text import dumps

    m = load_model(model)
    report = summary(m, model)
    report["resources"] = model_resources(m)
    if as_json:
        click.echo(dumps(report))
    else:
        _echo_text(render(report))
        _echo_text("\n".join(render_resources(report["resources"])))


def _echo_text(text: str, err: bool = False) -> None:
    """Print `text` line by line with control characters escaped (`errors.one_line`): layer,
    tensor and file names are the model's, and an ESC, BEL, BS or CR in one must reach the
    terminal as text, never as a command."""
    from ..errors import one_line

    click.echo("\n".join(one_line(line) for line in text.split("\n")), err=err)


def _echo_conversion(conversion) -> None:
    """The ONNX -> TFLite conversion's lines (inputs' layouts, transposes left), if one ran."""
    if conversion is None:
        return
    from ..passes.onnx_to_tflite.convert import describe_conversion

    for line in describe_conversion(conversion):
        _echo_text(line)


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output file "
              "(default: <model>_converted.<ext> next to the input).")
@input_layout_option
@input_shape_option
@verify_option
@click.option("--keep-float16", is_flag=True,
              help="Keep the model's float16 weights (TFLite output: float16 constants behind "
              "DEQUANTIZE, as the TFLite converter's float16 option writes them); without it, "
              "they are widened to float32 wherever the conversion folds them.")
@_names_model
def convert(model, output, input_layout, input_shapes, verify, keep_float16):
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
    from .commands import convert_command
    from ..formats.output_names import check_output_name
    from .requests import ConvertRequest

    check_output_name(output, "model", [model])
    written = convert_command(ConvertRequest(model, output, input_layout, input_shapes, verify,
                                             keep_float16))
    _echo_text(f"wrote {written.path} ({written.fmt}, {written.nodes} nodes, {written.size} "
               "bytes)")
    _echo_conversion(written.conversion)


def _echo_passes(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from ..passes import all_passes
    from ..passes.pipeline import FUSE_PIPELINE

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
@input_shape_option
@verify_option
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
    from .commands import fuse_command
    from ..formats.output_names import check_output_name
    from .requests import FuseRequest

    check_output_name(output, "model", [model])
    written = fuse_command(FuseRequest(model, output, pass_list, report, input_shapes, verify))
    for name, count in written.counts.items():
        click.echo(f"{name:22} {count:5d}")
    click.echo(f"nodes: {written.nodes_before} -> {written.nodes}")
    _echo_text(f"wrote {written.path} ({written.fmt}, {written.size} bytes)")


@main.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), help="Output .tflite (int8) or .onnx (QDQ) "
              "(default: <model>_int8.<ext> next to the input).")
@calibration_options
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
@input_layout_option
@input_shape_option
@verify_option
@_names_model
def quantize(model, **options):
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
    from .commands import quantize_command
    from ..formats.output_names import check_output_name
    from ..quant.report import low_sqnr_warning, render_text
    from .requests import QuantizeRequest
    from .verify import MIN_SQNR_DB

    request = QuantizeRequest(model=model, **options)
    check_output_name(request.output, "model", [model, request.calibration, request.eval_data,
                                                request.labels])
    written = quantize_command(request)
    _echo_text(render_text(written.report))
    if written.report.get("opset_upgraded"):
        old, new = written.report["opset_upgraded"]
        _echo_text(f"ONNX opset raised {old} -> {new} (QDQ needs per-axis DequantizeLinear)")
    _echo_text(f"wrote {written.path} ({written.fmt}, {written.size} bytes)")
    warning = low_sqnr_warning(model, written.report["output_sqnr_db"], request.method,
                               MIN_SQNR_DB)
    if warning:
        _echo_text(f"qconvert: warning: {warning}", err=True)
    _echo_conversion(written.conversion)


def _echo_quantization(model, report, request) -> None:
    """The quantization report's table (and the low-SQNR warning) when a command quantized a
    float model; the written report files."""
    if report is None:
        return
    from ..quant.report import low_sqnr_warning, render_text
    from .verify import MIN_SQNR_DB

    _echo_text(render_text(report))
    warning = low_sqnr_warning(model, report["output_sqnr_db"], request.method, MIN_SQNR_DB)
    if warning:
        _echo_text(f"qconvert: warning: {warning}", err=True)
    for path in (getattr(request, "quant_report", None), getattr(request, "report_html", None)):
        if path is not None:
            _echo_text(f"wrote {path}")


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
@scheme_option
@calibration_options
@export_report_options
@input_layout_option
@input_shape_option
@verify_option
@_names_model
def export_c_header(model, **options):
    """Write an int8 model as one C header for firmware (CMSIS-NN style).

    Per layer: int8 weights (conv OHWI, depthwise [1, H, W, C], fully connected 1x4 interleaved
    or row-major), int32 biases, per-channel multipliers and shifts exactly as TFLite Micro
    computes them when it loads the model, input / output offsets, activation clamps,
    dimensions, strides and padding. Takes an int8 TFLite model, or a float TFLite or ONNX
    model with --calibration (an ONNX model is converted to NHWC first, its data staying in the
    ONNX layout; then quantized). --scheme q7: the q7 weights, biases, fraction bits and
    bias_shift / out_shift of the legacy q7 kernels instead (docs/q7.md).

    \b
    Example:
      qconvert export-c-header model_int8.tflite -o model_weights.h --name kws
      qconvert export-c-header model.tflite --calibration calib.npy --with-kernels
      qconvert export-c-header model.onnx --calibration calib.npy -o weights.h
    """
    from ..c_export.command import export_header_command
    from ..formats.output_names import check_output_name
    from .requests import ExportCHeaderRequest

    request = ExportCHeaderRequest(model=model, **options)
    check_output_name(request.output, "header", [model, request.calibration])
    if request.scheme == "q7":
        from qconvert.c_export.q7_command import export_header_q7
        from .requests import check_q7_request

        check_q7_request(request)
        exported = export_header_q7(
            model, request.output, request.name, request.fc_layout, request.with_kernels,
            request.calibration, request.calibration_random, request.normalization,
            request.options(rounding=request.rounding), request.input_layout,
            request.input_shapes)
        (out, data), = exported.files.items()
        _echo_text(f"wrote {out} ({len(exported.model.layers)} q7 layers, {len(data)} bytes)")
        return
    exported = export_header_command(request)
    _echo_quantization(model, exported.quantization, request)
    *kernel_paths, out = exported.files
    _echo_text(f"wrote {out} ({exported.layers} layers, {len(exported.files[out])} bytes)")
    for path in kernel_paths:
        _echo_text(f"wrote {path}")


@main.command("export-c")
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("-o", "--output", type=click.Path(), required=True, metavar="DIR",
              help="Directory for NAME.h, NAME.c and the kernel sources (created if missing).")
@click.option("--name", help="Name of the model in C (NAME_invoke, NAME_ARENA_SIZE...), a C "
              "identifier (default: the model file's name, sanitized).")
@click.option("--kernels", type=click.Choice(["portable", "cmsis-nn", "cmsis-nn-legacy"]),
              default="portable",
              show_default=True, help="portable: qconvert's own C99 kernels (written to DIR); "
              "cmsis-nn: calls into CMSIS-NN (conv, depthwise, fully connected, add, mul, "
              "pools, softmax; their s16 kernels for 16x8 layers except softmax), qconvert's "
              "kernels for the rest; cmsis-nn-legacy (with --scheme q7): CMSIS_5's legacy q7 "
              "kernels (arm_convolve_HWC_q7_*, arm_fully_connected_q7_opt...).")
@click.option("--fc-layout", type=click.Choice(["1x4", "rowmajor"]), default=None,
              help="Fully connected weight order (default: 1x4 for portable, rowmajor for "
              "cmsis-nn). 1x4 is for qconvert's kernel (and CMSIS-NN's legacy "
              "arm_fully_connected_q7_opt); arm_fully_connected_s8 needs rowmajor.")
@click.option("--patches", type=click.IntRange(min=0), default=0, metavar="N",
              help="Run the first high-resolution stage (the chain of convolutions, depthwise "
              "convolutions and pools from the input) in N x N spatial tiles with their halo "
              "recomputed (MCUNetV2's patch-based inference): its large activations never "
              "exist whole, bit-exact, some recomputation. Not used (with a note) when the "
              "model has no such chain or patching does not lower the arena. Default 0: off.")
@click.option("--example", is_flag=True, help="Also write an example application: main.c "
              "(a float input quantized with NAME_quantize_input, NAME_invoke, the output "
              "dequantized and printed), CMakeLists.txt and a Makefile fragment NAME.mk.")
@click.option("--report", type=click.Path(), metavar="FILE.json",
              help="Also write the per-layer figures as JSON: index, name, op, the C functions "
              "called, MACs, weight and constant bytes (flash), input, output and scratch "
              "bytes, and the totals (arena, flash constants).")
@scheme_option
@calibration_options
@export_report_options
@input_layout_option
@input_shape_option
@verify_option
@_names_model
def export_c(model, **options):
    """Write the whole int8 (or 16x8) model as interpreter-free C with a static memory plan.

    DIR/NAME.h declares NAME_invoke(input, output) (0 on success), NAME_ARENA_SIZE,
    NAME_INPUT_SIZE / NAME_OUTPUT_SIZE, the input and output scales, zero points and layouts
    (NAME_INPUT_DIMS...), and NAME_quantize_input / NAME_dequantize_output (float <-> int8);
    DIR/NAME.c holds the weights (static const, flash), the arena and the layer calls; the
    kernel sources it needs are written beside them. Every .c in DIR compiles together with
    gcc -std=c99 -Wall -Wextra -Werror -pedantic. The arena is planned ahead of time (tensor
    lifetimes, best fit, the execution order chosen where branches allow, reshapes as
    aliases, element-wise ops and convolutions in place where their read order allows). Takes
    an int8 TFLite model, or a float TFLite or ONNX model with
    --calibration (as export-c-header does). Prints one line per layer (the C function
    called, MACs, flash, activation and scratch bytes); --report writes them as JSON. Built
    with -DQCONVERT_PROFILE, NAME_invoke calls the application's NAME_layer_hook(index, op,
    phase) before and after each layer (see NAME.h). With --scheme q7 (a float model and
    --calibration): the CMSIS-NN paper's power-of-two q7 scheme, calling CMSIS_5's legacy q7
    kernels (--kernels cmsis-nn-legacy) or qconvert's portable q7 ones; prints per layer the
    fraction bits, shifts and SQNR (docs/q7.md).

    \b
    Example:
      qconvert export-c model_int8.tflite -o model_c --name kws
      qconvert export-c model_int8.tflite -o model_c --kernels cmsis-nn --report layers.json
      qconvert export-c model.onnx --calibration calib.npy -o model_c
      qconvert export-c model_int8.tflite -o model_c --name kws --example
    """
    from ..c_export.command import export_c_command
    from ..formats.output_names import check_output_folder
    from .requests import ExportCRequest

    request = ExportCRequest(model=model, **options)
    name, kernels, report = request.name, request.kernels, request.report
    check_output_folder(request.output)
    if request.scheme == "q7" or kernels == "cmsis-nn-legacy":
        _export_c_q7(model, request)
        return
    exported = export_c_command(request)
    _echo_quantization(model, exported.quantization, request)
    summary = exported.summary
    from ..c_export.c_names import shadowed

    if name is None and exported.c_name.startswith("m_") and shadowed(exported.c_name[2:]):
        click.echo(f"{exported.c_name}: named {exported.c_name}, not {exported.c_name[2:]} "
                   f"after the model file, which would shadow {shadowed(exported.c_name[2:])} "
                   "(--name chooses another)")
    _echo_text(f"wrote {len(exported.files)} files to {exported.folder}: "
               f"{', '.join(exported.names)}")
    from ..c_export.model.export_report import render_table

    for line in render_table(summary):
        click.echo(line)
    helium = (f"; {summary.arena_helium} bytes for CMSIS-NN's Helium (MVE) builds"
              if summary.arena_helium is not None else "")
    helium_flash = (f"; {summary.helium_constant_bytes} more in Helium builds"
                    if summary.helium_constant_bytes else "")
    click.echo(f"{exported.c_name}: {summary.layers} layers ({kernels} kernels), arena "
               f"{summary.arena_size} bytes (RAM{helium}), constant data "
               f"{summary.constant_bytes} bytes (flash{helium_flash}), {summary.overlapped} "
               "tensors placed over their inputs" + (
                   f" ({summary.banded} CMSIS-NN layers called band by band)"
                   if summary.banded else ""))
    from ..quant.resources import render as render_resources

    _echo_text("\n".join(render_resources(exported.resources)))
    if summary.patches:
        click.echo(summary.patches)
    if summary.state_size:
        click.echo(f"{exported.c_name}: a streaming model: {summary.state_size} bytes of state "
                   f"(its resource variables, static RAM outside the arena; "
                   f"{exported.c_name}_init / _reset)")
    if report is not None:
        _echo_text(f"wrote {report}")


def _export_c_q7(model, request) -> None:
    """`export-c --scheme q7`: write the C and print the q7 report."""
    from qconvert.c_export.q7_command import export_c_q7
    from qconvert.quant.q7_quantize import render_q7_report

    from .requests import check_q7_request

    check_q7_request(request)
    outdir, kernels, report = request.output, request.kernels, request.report
    exported = export_c_q7(model, outdir, request.name, kernels, request.fc_layout,
                           request.calibration, request.calibration_random,
                           request.normalization, request.options(), request.input_layout,
                           request.input_shapes, report, request.patches, request.scheme)
    _echo_text(f"wrote {len(exported.files)} files to {outdir}: "
               f"{', '.join(p.name for p in exported.files)}")
    for line in render_q7_report(exported.report):
        click.echo(line)
    click.echo(f"{exported.c_name}: {len(exported.model.layers)} q7 layers ({kernels} kernels)")
    if report is not None:
        _echo_text(f"wrote {report}")


def as_program() -> None:
    """Make this process the `qconvert` program: it exits when the command ends, so signals
    after a commit are ignored (`output_files.handle_termination`), the allocator keeps freed
    arrays for reuse (`allocator`) and OpenBLAS's idle threads sleep instead of polling, when
    numpy is not loaded yet (`blas_idle`)."""
    from ..allocator import tune_for_program
    from ..blas_idle import sleep_idle_threads

    _PROGRAM["exits_after"] = True
    sleep_idle_threads()
    tune_for_program()


def run():
    """The `qconvert` program: `main` in a process that exits when the command ends, without
    the interpreter's teardown (`_leave`)."""
    as_program()
    try:
        main()
    except SystemExit as exc:  # click's standalone mode always ends here
        _leave(exc.code)
    _leave(0)


def _leave(code) -> None:
    """End the program with `code` (a SystemExit code: None, a status or a message) once
    stdout and stderr are flushed, without tearing down every module and array one by one:
    the outputs are committed by then and the kernel frees the process in one go (on the
    ResNet-50-shaped quantize the teardown took 30 ms of its 1.3 s). When a stream cannot be
    flushed (a reader that closed the pipe), the ordinary exit reports it as before."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status & 0xFF)


if __name__ == "__main__":
    run()
