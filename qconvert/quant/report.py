"""The quantization report: how far the int8 model is from the float one, layer by layer.

`build_report` measures, on the first samples of the evaluation data (`report_samples`), each
quantized activation's SQNR against the float model's value (ONNX QDQ also the error the
layer's own quantization adds), the output SQNR over every report sample and, for classifiers,
top-1 agreement with float; with each layer's scales, zero points, (multiplier, shift) pairs and
int32 biases. `render_text` is the table `qconvert quantize` prints; `low_sqnr_warning` the line
it warns with when an output falls below `--verify`'s floor.
"""

from __future__ import annotations

import itertools

import numpy as np

from qconvert.errors import one_line
from qconvert.ir import Model

from .calibrate import float_reference, frames
from .error_energy import EndToEnd, float_qdq_errors
from .params import quantized_inputs
from .plan import FC_OPS, clamped_inputs

REPORT_SAMPLES = 64
REPORT_MACS = 8e9  # the report's int8 run stays within this many multiply-accumulates...
REPORT_MIN_SAMPLES = 2  # ...but covers at least this many samples


def report_samples(graph, available: int) -> int:
    """How many samples the report runs: REPORT_SAMPLES, fewer for a large network (the int8
    run of the report stays within REPORT_MACS, at least REPORT_MIN_SAMPLES), never more than
    `available`."""
    from qconvert.formats.layer_table import layer_macs

    macs = sum(layer_macs(node, graph) for node in graph.nodes)
    bound = max(REPORT_MIN_SAMPLES, int(REPORT_MACS // max(macs, 1)))
    return max(1, min(available, REPORT_SAMPLES, bound))


def sqnr(reference: np.ndarray, actual: np.ndarray) -> float:
    """Signal to quantization noise ratio in dB (inf when equal)."""
    noise = float(np.sum((reference.astype(np.float64) - actual) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    if noise == 0:
        return float("inf")
    return 10.0 * np.log10(max(signal, 1e-300) / noise)


def _tflite_errors(model: Model, feeds: dict, options, layer_reference: dict, correct=None):
    """TFLite: per activation the (signal, noise) energies of its int8 value (the integer
    executor, bit-exact with TFLite Micro) against the float model's, end to end, on the samples
    `layer_reference` holds; and the dequantized outputs on every sample. The integer executor
    runs one sample at a time: its float64 matmuls are no faster batched, and memory stays that
    of one sample. `correct` (a `propagated_bias.PropagatedCorrection`): its first
    `correct.samples` samples run as one batch with the correction applied as they go, so every
    figure is the corrected model's."""
    from qconvert.executor.int_executor import run_int8
    from qconvert.executor.streaming import carries_state, run_frames

    graph = model.graph
    tracker = EndToEnd(layer_reference)

    def dequantized(name, array):
        t = graph.tensors.get(name)
        if t is not None and t.quant is not None and array.dtype in (np.int8, np.int16):
            return (array.astype(np.float64) - float(t.quant.zero_point[0])) \
                * float(t.quant.scale[0])
        if array.dtype.kind == "b":  # a comparison's bool: 0 / 1, a flip is its error
            return array.astype(np.float64)
        return array if array.dtype.kind == "f" else None

    def observe(name, array):
        if name in layer_reference:
            value = dequantized(name, array)
            if value is not None:
                tracker.add(name, value)

    inputs = quantized_inputs(graph, feeds)
    got: dict = {}
    if carries_state(model):  # one stream of frames, the int8 state carried
        outs = run_frames(model, frames(inputs), lambda g, f, o, k, c: run_int8(
            g, f, rounding=options.rounding, observe=o, carry=c), observe)
    else:
        head = 0 if correct is None else correct.samples
        params: dict = {}  # the graph no longer changes: one Prepare for every frame
        outs = (run_int8(graph, frame, rounding=options.rounding, observe=observe,
                         params=params)
                for frame in frames({k: v[head:] for k, v in inputs.items()}))
        if head:
            def both(name, array):
                correct.observe(name, array)
                observe(name, array)

            first = run_int8(graph, {k: v[:head] for k, v in inputs.items()},
                             rounding=options.rounding, observe=both)
            outs = itertools.chain([first], outs)
    for out in outs:
        for name in graph.outputs:
            got.setdefault(name, []).append(dequantized(name, out[name]))
    return tracker.energy, {k: np.concatenate(v) for k, v in got.items()}


def int_executor_runs_int16(graph=None) -> bool:
    """True when the integer executor has TFLite Micro's 16x8 kernels (`supported_ops16`) for
    every op of `graph` that touches an int16 activation (any graph when `graph` is None)."""
    from qconvert.executor import int_executor

    supported = getattr(int_executor, "supported_ops16", None)
    if supported is None:
        return False
    ops = set(supported())

    def touches_int16(node):
        names = [n for n in list(node.present_inputs()) + list(node.outputs) if n]
        return any(graph.tensors[n].dtype == "int16" and graph.tensors[n].data is None
                   for n in names)

    return graph is None or all(n.op in ops for n in graph.nodes
                                if not n.opaque and touches_int16(n))


def _opset(model: Model):
    return model.meta.get("opset") if model.format == "onnx" else None


def _db(signal: float, noise: float) -> float:
    return float("inf") if noise == 0 else round(10 * np.log10(max(signal, 1e-300) / noise), 2)


def build_report(float_graph, model: Model, qplan, names: dict, data: dict, options,
                 reference: dict | None = None, layer_reference: dict | None = None,
                 float_model: Model | None = None, samples: int = REPORT_SAMPLES,
                 simulate=None, correct=None) -> dict:
    """The per-layer report over the first `samples` samples of `data` (`report_samples`).

    Per layer, "sqnr_db" is the SQNR of its int8 output against the float model's tensor, end
    to end (TFLite: the integer executor, bit-exact with TFLite Micro, sample by sample, see
    `_tflite_errors`; ONNX QDQ: one batched run of the QDQ model against the float activations
    calibration kept, on the first "layer_samples" samples, see
    `error_energy.float_qdq_errors`); ONNX also gets "added_sqnr_db", the error the layer's own
    quantization adds. "output_sqnr_db" is end to end over all report samples; the float
    outputs are `reference` when calibration kept them.
    `correct` (a `propagated_bias.PropagatedCorrection` whose samples are the first of `data`):
    the report's run applies it on those samples first (`_tflite_errors`), so the empirical
    bias correction costs no run of its own.
    """
    n = min(len(next(iter(data.values()))), samples)
    feeds = {k: v[:n] for k, v in data.items()}
    outputs = float_graph.outputs
    added: dict = {}
    if reference is None or not layer_reference:
        reference, layer_reference = float_reference(
            float_graph, feeds, options.batch_size, _opset(model),
            clamped_inputs(float_graph) if model.format == "onnx" else frozenset(), float_model)
    run = None
    if model.format == "tflite" and simulate is not None and not int_executor_runs_int16(
            model.graph):
        # a 16x8 model the integer executor cannot run yet: a fake-quantized float run
        energy, got_out = simulate(feeds, layer_reference)
        run = "fake-quantized float run (the integer executor has no 16x8 kernels)"
    elif model.format == "tflite":
        energy, got_out = _tflite_errors(model, feeds, options, layer_reference, correct)
    elif getattr(options, "engine", "numpy") == "onnxruntime":
        from .ort_engine import qdq_errors

        energy, added, got_out = qdq_errors(model, names, feeds, layer_reference)
    else:
        energy, added, got_out = float_qdq_errors(model, names, feeds, options.batch_size,
                                             layer_reference, correct)
    ref_out = reference
    layer_samples = min(n, min((len(v) for v in layer_reference.values()), default=n))
    fraction = _kept_fraction(float_graph, layer_reference)

    out_db = {}
    for o in outputs:
        if o in ref_out and o in got_out and ref_out[o].dtype.kind == "f":
            r = ref_out[o].astype(np.float64)
            out_db[o] = _db(float(np.sum(r * r)), float(np.sum((r - got_out[o]) ** 2)))
        else:
            out_db[o] = None
    agree = total = 0
    first = outputs[0]
    if is_classifier(float_graph) and first in ref_out and first in got_out:
        hits = np.argmax(ref_out[first], axis=1) == np.argmax(got_out[first], axis=1)
        agree, total = int(np.sum(hits)), int(hits.size)

    layers = []
    for node in float_graph.nodes:
        out = node.outputs[0] if node.outputs else None
        if out not in qplan.activations:
            continue
        entry = {"layer": node.name, "op": node.op,
                 "input": [_qp(qplan, i) for i in node.present_inputs() if i in qplan.activations],
                 "output": _qp(qplan, out),
                 "sqnr_db": _db(*energy[out]) if out in energy else None}
        if model.format == "onnx":
            entry["added_sqnr_db"] = _db(*added[out]) if out in added else None
        layer = qplan.layers.get(out)
        if layer is not None:
            entry.update(per_channel=layer.per_channel, widened_channels=layer.widened,
                         multiplier=layer.multiplier.tolist(), shift=layer.shift.tolist(),
                         bias=None if layer.bias is None else layer.bias.tolist())
        layers.append(entry)
    report = {"layers": layers, "samples": n, "layer_samples": layer_samples,
              **({"layer_sample_fraction": round(fraction, 3)} if fraction < 1 else {}),
              "method": options.method, "rounding": options.rounding,
              "bias_correction": getattr(options, "bias_correction", False),
              "equalize": getattr(options, "equalize", False), "output_sqnr_db": out_db,
              "inputs": _input_ranges(float_graph, qplan, data)}
    if run is not None:
        report["report_run"] = run
    if first in ref_out and first in got_out and ref_out[first].dtype.kind == "f":
        # for the HTML report's scatter; not part of the JSON report
        report["_output_pairs"] = (ref_out[first], got_out[first])
    if total:
        report["top1_agreement"] = agree / total
    return report


def _input_ranges(graph, qplan, data: dict) -> dict:
    """Per float input the data's range (all samples) and the scale and zero point chosen
    for it: the line that shows raw 0..255 pixels calibrated as they are."""
    ranges = {}
    for name in graph.inputs:
        values = data.get(name)
        if name in qplan.activations and values is not None and values.size \
                and values.dtype.kind == "f":
            ranges[name] = {"min": float(values.min()), "max": float(values.max()),
                            **_qp(qplan, name)}
    return ranges


def _kept_fraction(graph, layer_reference: dict) -> float:
    """The share of each tensor's values of the first sample `first_samples` kept (1.0: whole
    samples), read off the reference arrays against the tensors' static shapes."""
    shares = []
    for name, ref in layer_reference.items():
        t = graph.tensors.get(name)
        if ref.ndim == 2 and t is not None and t.static_shape and len(t.shape) > 2:
            shares.append(ref.shape[1] / max(1, int(np.prod(t.shape[1:]))))
    return max(shares, default=1.0)  # the largest tensor's: the least truncated


def _qp(qplan, name) -> dict:
    scale, zp = qplan.activations[name]
    return {"tensor": name, "scale": float(scale), "zero_point": int(zp)}


def is_classifier(graph) -> bool:
    """A 2-D output made by Softmax, or by a fully connected layer that narrows (logits)."""
    out = graph.tensors[graph.outputs[0]]
    producer = graph.producer(out.name)
    if producer is None or out.shape is None or len(out.shape) != 2:
        return False
    if producer.op == "Softmax":
        return True
    x = graph.tensors[producer.inputs[0]]
    return (producer.op in FC_OPS and x.shape is not None
            and isinstance(out.shape[-1], int) and isinstance(x.shape[-1], int)
            and 1 < out.shape[-1] < x.shape[-1])


def render_text(result: dict) -> str:
    """The report as `qconvert quantize` prints it: one line per layer (scales, zero point,
    SQNR), the widened weight scales, then the output SQNR and the top-1 agreement."""
    def db(value):
        return "-" if value is None else f"{value:.1f}"

    from qconvert.formats.layer_table import NAME_WIDTH

    added = any("added_sqnr_db" in row for row in result["layers"])
    lines = [f"{'layer':32} {'op':16} {'out scale':>10} {'zp':>5} {'SQNR dB':>8}"
             + (f" {'added dB':>8}" if added else "")]
    for row in result["layers"]:
        out = row["output"]
        layer, op = one_line(row["layer"]), one_line(row["op"])
        if len(layer) > NAME_WIDTH:  # whole, on a line of its own: never cut
            lines.append(layer)
            layer = ""
        line = (f"{layer:32} {op:16} {out['scale']:10.4g} "
                f"{out['zero_point']:5d} {db(row['sqnr_db']):>8}")
        if added:
            line += f" {db(row.get('added_sqnr_db')):>8}"
        lines.append(line)
    widened_line = _widened_summary(result["layers"])
    if widened_line:
        lines.append(widened_line)
    if "layer_sample_fraction" in result:
        lines.append(f"(layer SQNR over the first {100 * result['layer_sample_fraction']:.0f} % "
                     "of each tensor's values in the first sample)")
    elif result.get("layer_samples", result["samples"]) != result["samples"]:
        k = result["layer_samples"]
        lines.append(f"(layer SQNR over the first {k} sample{'s' if k > 1 else ''})")
    for name, q in result.get("inputs", {}).items():
        lines.append(f"input {one_line(name)}: data {q['min']:.6g}..{q['max']:.6g}, scale "
                     f"{q['scale']:.6g}, zero point {q['zero_point']}")
    n, given = result["samples"], result.get("eval_samples", result["samples"])
    over = f"the first {n} of {given}" if given > n else f"{n}"
    for name, value in result["output_sqnr_db"].items():
        lines.append(f"output {one_line(name)}: SQNR {db(value)} dB over {over} samples")
    if "top1_agreement" in result:
        lines.append(f"top-1 agreement with float: {100 * result['top1_agreement']:.1f}% "
                     f"(over {over} samples)")
    if "labelled" in result:
        from .accuracy import render_accuracy

        lines += render_accuracy(result["labelled"])
    if "report_run" in result:
        lines.append(f"(SQNR figures from a {result['report_run']})")
    if "resources" in result:
        from .resources import render

        lines += render(result["resources"])
    if "int16" in result:
        from .int16_report import render_int16

        lines += render_int16(result["int16"])
    lines += [one_line(note) for note in result.get("notes", ())]
    return "\n".join(lines)


WIDENED_LINE_MAX = 100  # longer than this, the widened channels line becomes counts


def _widened_summary(rows: list) -> str | None:
    """One line for the weight scales the int32 bias guard widened: the layer and its channels
    when one short line says it, else the counts of channels and layers (each layer's channels
    are in the JSON report, `widened_channels`). VWW printed nine such lines, 262 to 444
    characters each."""
    widened = [(row["layer"], row["widened_channels"]) for row in rows
               if row.get("widened_channels")]
    if not widened:
        return None
    head = "widened weight scales (int32 bias guard): "
    if len(widened) == 1:
        layer, channels = widened[0]
        line = f"{head}{one_line(layer)} channels {channel_ranges(channels)}"
        if len(line) <= WIDENED_LINE_MAX:
            return line
    n = sum(len(channels) for _, channels in widened)
    layers = len(widened)
    return (f"{head}{n} channel{'s' if n != 1 else ''} in {layers} layer"
            f"{'s' if layers != 1 else ''} (listed by --report)")


def channel_ranges(values: list) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    parts, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            parts.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return ", ".join(parts)


def low_sqnr_warning(model: str, output_db: dict, method: str, floor: float) -> str | None:
    """The warning line (without its `qconvert: warning:` prefix) when an output's SQNR against
    the float model is below `floor` (`--verify`'s): the int8 model was written but is likely
    unusable; None when every output reaches it."""
    low = [f"{name!r} {db:.1f} dB" for name, db in output_db.items()
           if db is not None and db < floor]
    if not low:
        return None
    return (f"{model}: output SQNR against the float model below {floor:g} dB "
            f"({', '.join(low)}): the int8 model is likely unusable; check it with --verify N, "
            f"try another --method than {method} or better calibration data")
