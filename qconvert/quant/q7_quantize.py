"""`--scheme q7`'s quantization: a float model and calibration data -> a q7 model and its report.

Calibration is int8's (`quantize.calibrate_float`: the fused float model, ranges as `--method`
chooses them); then `q7_plan.plan_q7` gives every tensor power-of-two fraction bits,
`q7_search.search_formats` refines the linear layers' output formats for the least output error
on the calibration samples (a layer whose 32-bit accumulator could overflow is refused), and the
report runs the q7 executor and the float model on the
report's samples: per layer its formats, shifts and SQNR against the float activation, and the
output SQNR (`report_q7`, printed by `render_q7_report`).
"""

from __future__ import annotations

import numpy as np

from qconvert.executor.float_executor import run_float
from qconvert.executor.q7_kernels import run_q7

from .q7_plan import Q7Model, check_accumulators, dequantize, plan_q7, quantize_input
from .q7_search import search_formats
from .report import is_classifier, report_samples, sqnr

SEARCH_SAMPLES = 256  # calibration samples the format search runs (the first ones)


def quantize_q7_model(model, calibration: dict, options, progress=None) -> tuple:
    """(Q7Model, report dict) of the float `model` (fused in place) calibrated on
    `calibration` {input: array (N, ...)} with the `QuantizeOptions` `options`."""
    from .quantize import calibrate_float

    measured = calibrate_float(model, calibration, options, progress)
    q7 = plan_q7(model.graph, measured.ranges)
    x = np.asarray(calibration[q7.input_name])
    head = x[:SEARCH_SAMPLES].astype(np.float32)
    reference = run_float(model, {q7.input_name: head})[q7.output_name]
    changes = search_formats(q7, head, reference)
    check_accumulators(q7)
    report = report_q7(model, q7, x[:report_samples(model.graph, len(x))].astype(np.float32))
    report["searched"] = {name: list(pair) for name, pair in changes.items()}
    return q7, report


def report_q7(model, q7: Q7Model, x: np.ndarray) -> dict:
    """Per layer: kind, formats, shifts and SQNR (dB) of its output against the float model's
    on the float inputs `x`; the output SQNR and, for a classifier, the top-1 agreement with
    the float model (None otherwise)."""
    tensors = [layer.extra["tensor"] for layer in q7.layers]
    ref = run_float(model, {q7.input_name: x}, keep=tensors)
    rows = []

    def observe(layer, out):
        float_out = ref[layer.extra["tensor"]].reshape(out.shape)
        row = {"name": layer.name, "kind": layer.kind, "in_frac": layer.in_frac,
               "out_frac": layer.out_frac,
               "sqnr_db": round(sqnr(float_out, dequantize(out, layer.out_frac)), 2)}
        if layer.weights is not None:
            row.update({"w_frac": layer.w_frac, "b_frac": layer.b_frac,
                        "bias_shift": layer.bias_shift, "out_shift": layer.out_shift})
        rows.append(row)

    out = run_q7(q7.layers, quantize_input(q7, x), observe=observe)
    float_out = ref[q7.output_name].reshape(out.shape)
    n = len(x)
    agree = None
    if is_classifier(model.graph):
        agree = round(float(np.mean(out.reshape(n, -1).argmax(1)
                                    == float_out.reshape(n, -1).argmax(1))), 4)
    return {"scheme": "q7", "samples": n, "input_frac": q7.input_frac,
            "output_frac": q7.output_frac, "layers": rows,
            "output_sqnr_db": round(sqnr(float_out, dequantize(out, q7.output_frac)), 2),
            "top1_agreement": agree}


def render_q7_report(report: dict) -> list:
    """The report as text lines: one per layer, then the output's."""
    lines = [f"{'layer':<4} {'kind':<9} {'in':>3} {'w':>3} {'b':>3} {'out':>3} {'bias<<':>6} "
             f"{'>>out':>5} {'SQNR dB':>8}  name"]
    for i, row in enumerate(report["layers"]):
        lines.append(f"{i:<4} {row['kind']:<9} {row['in_frac']:>3} {row.get('w_frac', ''):>3} "
                     f"{row.get('b_frac', ''):>3} {row['out_frac']:>3} "
                     f"{row.get('bias_shift', ''):>6} {row.get('out_shift', ''):>5} "
                     f"{row['sqnr_db']:>8.2f}  {row['name'][:48]}")
    agree = report["top1_agreement"]
    top1 = "" if agree is None else f", top-1 agreement with float {100 * agree:.1f}%"
    lines.append(f"q7 output: SQNR {report['output_sqnr_db']:.2f} dB{top1} "
                 f"({report['samples']} samples; fraction bits n: scale 2^-n)")
    return lines
