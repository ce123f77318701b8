"""The option groups several `qconvert` commands share: `--input-layout`, `--verify`,
`--input-shape`, and the calibration and quantization options (`calibration_options`) of
`quantize`, `export-c-header` and `export-c` (resolved by `requests.Calibrate`)."""

from __future__ import annotations

import click

input_layout_option = click.option(
    "--input-layout", type=click.Choice(["nhwc", "nchw"]), default=None,
    help="ONNX -> TFLite: 4-D inputs of the TFLite model NHWC (default) or NCHW (a TRANSPOSE "
    "follows them). Data (calibration, evaluation) is always in the ONNX model's layout.")


MAX_VERIFY_SAMPLES = 1000  # --verify N runs each model N times, one sample a call


verify_option = click.option(
    "--verify", type=click.IntRange(1, MAX_VERIFY_SAMPLES), metavar="N",
    help=f"Run the input and the written model on N inputs (1..{MAX_VERIFY_SAMPLES}) in the "
    "reference executors and "
    "refuse to write (naming the pass or layer) when they diverge: float outputs within 1e-4 "
    "of each output's largest magnitude, int8 models bit for bit; quantize: N calibration "
    "samples, output SQNR at least 10 dB.")


scheme_option = click.option(
    "--scheme", type=click.Choice(["int8", "q7"]), default="int8", show_default=True,
    help="int8: TFLite Micro's scheme (scales, zero points, multipliers); q7: the CMSIS-NN "
    "paper's power-of-two q7 (fraction bits, bias_shift / out_shift) for the legacy q7 kernels, "
    "from a float model with --calibration (docs/q7.md).")

input_shape_option = click.option(
    "--input-shape", "input_shapes", multiple=True, metavar="NAME:d0,d1,...",
    help="Fix an input's shape (repeatable), e.g. input:1,3,224,224; every other shape is then "
    "inferred and constant shape arithmetic folded (as onnxsim --overwrite-input-shape).")


def _a_number(param, value):
    """Refuse NaN, which passes click's FloatRange (every comparison with it is false)."""
    if value is not None and value != value:
        raise click.BadParameter("nan is not a number in the range", param=param)
    return value


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
                 show_default=True, callback=lambda ctx, param, value: _a_number(param, value),
                 help="Kept share of values for --method percentile."),
    click.option("--per-channel/--per-tensor", "per_channel", default=True,
                 show_default=True, help="Conv and depthwise weights per output channel (the "
                 "default: TFLite Micro's int8 scheme), or every layer's weights with one scale "
                 "(--per-tensor: the older scheme some int8 runtimes and accelerators need; "
                 "bit-exact with TFLite Micro too, usually a lower SQNR)."),
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
                 "slower than numpy on fixed-batch models, which it runs one sample at a "
                 "time: see docs/results/speed-and-memory.md)."),
    click.option("--batch-size", type=click.IntRange(1), default=16, show_default=True,
                 metavar="N", help="Calibration samples run through the float model at once: "
                 "more is faster and takes more memory (see --max-memory); histogram ranges "
                 "(mse, percentile, entropy) can move slightly with it."),
    click.option("--max-memory", metavar="SIZE", help="Refuse a plan whose largest layer needs "
                 "more than SIZE per batch (e.g. 4G; default: half the physical memory, at most 8G)."),
    click.option("--eval", "eval_data", type=click.Path(), metavar="DATA",
                 help="Data for the quantization report's SQNR and top-1 (default: the "
                 "calibration data)."),
    click.option("--labels", type=click.Path(), metavar="FILE", help="The class of each --eval "
                 "sample (.npy of integers, or one-hot rows; file.npz:key): the report adds "
                 "float and int8 top-1 over every --eval sample and both confusion matrices."),
)

# the quantization report of a float model quantized by export-c / export-c-header
EXPORT_REPORT_OPTIONS = (
    click.option("--quant-report", type=click.Path(), metavar="FILE.json", help="A float "
                 "model quantized first: also write its quantization report as JSON (as "
                 "quantize --report)."),
    click.option("--report-html", type=click.Path(), metavar="FILE.html", help="A float model "
                 "quantized first: also write its quantization report as HTML (as quantize "
                 "--report-html)."),
)


def export_report_options(fn):
    """--quant-report / --report-html of the C exports (the quantization a float model gets)."""
    for option in reversed(EXPORT_REPORT_OPTIONS):
        fn = option(fn)
    return fn


def calibration_options(fn):
    """The calibration and quantization options shared by `quantize`, `export-c-header` and
    `export-c` (which quantize a float model first): --calibration / --calibration-random, image
    normalization, --method / --percentile, --fc-per-channel, --no-fuse, --no-bias-correction,
    --equalize, --engine, --batch-size, --max-memory (docs/commands/quantize.md)."""
    for option in reversed(_CALIBRATION_OPTIONS):
        fn = option(fn)
    return fn
