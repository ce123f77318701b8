"""16x8 in `quantize_model`: apply the choice to the graph, plan it, and report what it costs.

`plan_int16` chooses the int16 groups (`int16_choice`), inserts the border QUANTIZE ops
(`int16.apply_widths`), plans the graph again with the int16 activations (a border copy takes
the range of the group it copies, a layer output moved to an int16 temporary keeps its own and
its bias correction) and prices the int8 and the 16x8 model (`footprint`). `add_to_report`
puts the choice in the report: which layers, the estimated SQNR gain of each candidate, and RAM
/ flash of int8 against the chosen mix.
"""

from __future__ import annotations

from .error_energy import float_qdq_errors
from .footprint import footprint
from .int16 import apply_widths
from .int16_choice import choose


def _group_range(name: str, ranges: dict, qplan8) -> tuple:
    """The float range the int8 plan gives `name` (its group's scale and zero point)."""
    scale, zp = qplan8.activations[name]
    return ((-128 - zp) * float(scale), (127 - zp) * float(scale))


def plan_int16(graph, float_graph, qplan8, ranges: dict, extremes: dict, input_means, options,
               feeds: dict, plan_in_range) -> tuple:
    """(the 16x8 plan of `graph`, changed in place, and the facts for the report). int16
    activations take the calibration's min / max (`extremes`): with 65536 levels, clipping
    outliers (what --method mse / percentile / entropy trade rounding for) no longer pays."""
    opset = None
    choice = choose(float_graph, qplan8, extremes, options.activations, options.int16_layers,
                    options.io_type, feeds, options.batch_size, opset)
    widths = apply_widths(graph, choice.groups)
    ranges = dict(ranges)
    ranges.update({k: v for k, v in extremes.items() if k in widths.int16})
    means = None if input_means is None else dict(input_means)
    for copy, source in widths.sources.items():
        ranges[copy] = _group_range(source, ranges, qplan8)
        if means is not None and source in means:
            means[copy] = means[source]  # a layer output moved to an int16 temporary
    qplan = plan_in_range(graph, ranges, "tflite", options.fc_per_channel, means,
                          frozenset(widths.int16))
    cost8 = footprint(float_graph, qplan=qplan8)
    cost = footprint(graph, widths.int16, qplan=qplan)
    facts = {"mode": choice.mode,
             "layers": [g.layer for g in choice.groups],
             "nodes_16x8": widths.nodes16,
             "requantize_ops": widths.borders,
             "memory": {"int8": cost8, "chosen": cost},
             "_sources": widths.sources}
    if choice.sensitivity:
        facts["sensitivity"] = [dict({"layer": r["layer"], "op": r["op"],
                                      "estimated_gain_db": r["gain_db"],
                                      "extra_bytes": int(r["extra_bytes"]),
                                      "chosen": r["chosen"]},
                                     **({"step_gain_db": r["step_gain_db"],
                                         "step_extra_bytes": r["step_extra_bytes"]}
                                        if "step_gain_db" in r else {}))
                                for r in choice.sensitivity]
    if choice.estimate:
        facts["estimated_output_sqnr_db"] = choice.estimate
    return qplan, facts


def simulated_errors(float_graph, qplan, sources: dict, feeds: dict, layer_reference: dict,
                     batch_size: int) -> tuple:
    """The report's per-activation (signal, noise) energies and outputs from a fake-quantized
    float run of the 16x8 plan (`simulate`), for a model the integer executor cannot run."""
    from .plan import QuantPlan
    from .simulate import QdqSimulation

    tensors = float_graph.tensors
    own = QuantPlan({k: v for k, v in qplan.activations.items() if k in tensors},
                    {sources.get(k, k): v for k, v in qplan.layers.items()},
                    {k: v for k, v in qplan.constants.items() if k in tensors}, qplan.int16)
    sim = QdqSimulation(float_graph, own)
    energy, _added, outputs = float_qdq_errors(sim.graph, sim.names, feeds, batch_size,
                                               layer_reference)
    return energy, outputs


def add_to_report(report: dict, facts: dict, qplan) -> None:
    """The 16x8 facts in the report, and each layer's activation width."""
    report["int16"] = facts
    for row in report["layers"]:
        row["bits"] = 16 if row["output"]["tensor"] in qplan.int16 else 8


def render_int16(facts: dict) -> list:
    """Text lines of the 16x8 facts for the terminal report."""
    lines = []
    layers = facts["layers"]
    if facts["mode"] == "int16":
        lines.append(f"16x8: int16 activations in {len(facts['nodes_16x8'])} ops"
                     + (f", {facts['requantize_ops']} QUANTIZE ops where int8 ops remain"
                        if facts["requantize_ops"] else ""))
    else:
        lines.append(f"16x8 ({facts['mode']}): {len(layers)} layer"
                     f"{'' if len(layers) == 1 else 's'} int16"
                     + (f": {', '.join(layers)}" if layers else " (none worth it)")
                     + (f"; {facts['requantize_ops']} QUANTIZE ops at the borders"
                        if facts["requantize_ops"] else ""))
    for row in facts.get("sensitivity", []):
        mark = "*" if row["chosen"] else " "
        step = (f"  step {row['step_gain_db']:+.2f} dB" if "step_gain_db" in row else "")
        lines.append(f"  {mark} {row['layer'][:32]:32} {row['op']:16} "
                     f"alone {row['estimated_gain_db']:+.2f} dB  +{row['extra_bytes']} bytes"
                     + step)
    est = facts.get("estimated_output_sqnr_db")
    if est and "chosen_db" in est:
        lines.append(f"  estimated output SQNR (fake-quantized run): int8 {est['int8_db']:.1f} "
                     f"dB -> chosen {est['chosen_db']:.1f} dB")
    m8, m = facts["memory"]["int8"], facts["memory"]["chosen"]
    lines.append(f"RAM (activation arena): int8 {_kib(m8['arena_bytes'])} -> "
                 f"{_kib(m['arena_bytes'])} ({_delta(m['arena_bytes'] - m8['arena_bytes'])}); "
                 f"flash (weights, biases, constants): {_kib(m8['flash_bytes'])} -> "
                 f"{_kib(m['flash_bytes'])} ({_delta(m['flash_bytes'] - m8['flash_bytes'])})")
    return lines


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def _delta(n: int) -> str:
    return ("+" if n >= 0 else "-") + f"{abs(n)} bytes"
