"""What `qconvert export-c` generated, layer by layer: the figures of `--report FILE.json` and
of the summary table the command prints.

    rows = layer_rows(graph, steps, plans)          # in render.py, while rendering
    text = report_json(summary, meta)               # --report FILE.json
    lines = render_table(summary)                   # printed after the export

One row per layer of NAME.c, in its order: index (NAME.c's `layer N`, the layer hook's index),
name, op, the C functions its code calls (empty for layers that are aliases: no code), MACs
(`qconvert inspect`'s rule), weight and all constant bytes (flash), input and output bytes
(arena), scratch bytes (CMSIS-NN's reservations; Helium builds apart where they differ) and
whether the call runs band by band over its own input. The data goes one way: the renderer
fills `ExportSummary.rows`, the command writes and prints them. Every figure is an integer or a
string, so the JSON is valid (no NaN) and the same model and options give the same bytes.
"""

from __future__ import annotations

import json
import re

import numpy as np

from qconvert.errors import one_line
from qconvert.formats.layer_table import format_count as fmt_count
from qconvert.formats.layer_table import layer_macs, long_names_apart, table_lines

from .steps import tensor_bytes

REPORT_VERSION = 1

# bytes of one element of each array type the steps emit (flash)
CTYPE_BYTES = {"int8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "int64_t": 8}

_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_NOT_CODE = re.compile(r"/\*.*?\*/|^[ \t]*#[^\n]*", re.S | re.M)  # comments, preprocessor lines
_NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof"}


def array_bytes(step, variant: str = "") -> int:
    """Flash bytes of `step`'s constant arrays in the default build (`variant` ""): TFLite's
    double rounding, no Helium (MVE) (its "other" arrays included); or of the arrays only
    `variant` ("single", "helium") builds add."""
    def counted(tag):
        return tag == variant if variant else tag in ("", "double", "other")

    return int(sum(np.asarray(v).size * CTYPE_BYTES[t.partition("#")[0]]
                   for _, t, v in step.arrays if counted(t.partition("#")[2])))


def kernel_functions(c_text: str) -> list:
    """The functions a layer's C calls, in order of first call, without the scratch size
    queries (CMSIS-NN's `*_get_buffer_size`, run once by NAME_check)."""
    names = [m.group(1) for m in _CALL.finditer(_NOT_CODE.sub(" ", c_text))]
    return list(dict.fromkeys(n for n in names if n not in _NOT_FUNCTIONS
                              and not n.endswith("_get_buffer_size")))


def _scratch(step, build) -> int:
    if not step.scratch_builds:
        return int(step.plan.scratch)
    return int(step.scratch_builds[build] if build != "all"
               else max(step.scratch_builds.values()))


def layer_rows(graph, steps, plans) -> list:
    """One dict per step (see the module docstring); `plans` {build: MemoryPlan} as
    `render` plans them ("all", or "helium" and "other")."""
    main = "all" if "all" in plans else "other"
    banded = plans[main].banded  # step positions (the plan's order) run band by band
    rows = []
    for position, step in enumerate(steps):
        runs = bool(step.call.template)
        chosen = step.banded if step.banded is not None and position in banded else step.call
        helium = _scratch(step, "helium") if "helium" in plans else None
        rows.append({
            "index": int(step.index),
            "name": step.node.name,
            "op": step.node.op,
            "kernel": kernel_functions(chosen.template) if runs else [],
            "macs": int(sum(layer_macs(m.node, graph)  # a patched stage: its layers'
                            for m in getattr(step, "members", None) or [step])),
            "weight_bytes": int(sum(np.asarray(v).size * CTYPE_BYTES[t.partition("#")[0]]
                                    for s, t, v in step.arrays if s == "weights")),
            "constant_bytes": array_bytes(step),
            "helium_constant_bytes": array_bytes(step, "helium"),
            "input_bytes": int(sum(tensor_bytes(graph, t) for t in step.plan.inputs)),
            "output_bytes": int(sum(tensor_bytes(graph, t) for t in step.plan.outputs)),
            "scratch_bytes": _scratch(step, main),
            "scratch_bytes_helium": helium,
            "banded": runs and step.banded is not None and position in banded,
        })
    return rows


def report_json(summary, meta: dict) -> str:
    """The --report document: `meta` (model file, SHA-256, C name, kernels, fc layout) then
    "layers" (summary.rows) and "totals"."""
    rows = summary.rows or []
    totals = {
        "layers": len(rows),
        "layers_with_code": sum(1 for r in rows if r["kernel"]),
        "macs": sum(r["macs"] for r in rows),
        "arena_bytes": int(summary.arena_size),
        "arena_bytes_helium": summary.arena_helium,
        "constant_bytes": int(summary.constant_bytes),
        "helium_constant_bytes": int(summary.helium_constant_bytes),
        "weight_bytes": sum(r["weight_bytes"] for r in rows),
        "scratch_bytes_max": max((r["scratch_bytes"] for r in rows), default=0),
        "tensors_over_inputs": int(summary.overlapped),
    }
    doc = {"qconvert_export_report": REPORT_VERSION, **meta, "layers": rows, "totals": totals}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def render_table(summary) -> list:
    """The printed summary: one line per layer (names escaped for the terminal; a name longer
    than 32 characters whole on the line before its row, as `qconvert inspect` prints them)."""
    header = ("#", "layer", "op", "kernel", "MACs", "flash", "in", "out", "scratch")
    lines = []
    for r in summary.rows or []:
        name = one_line(r["name"])
        kernel = "+".join(r["kernel"]) + (" (rows)" if r["banded"] else "") \
            if r["kernel"] else "(alias)"
        lines.append((str(r["index"]), name, one_line(r["op"])[:20], kernel,
                      fmt_count(r["macs"]), fmt_count(r["constant_bytes"]) + "B",
                      fmt_count(r["input_bytes"]) + "B", fmt_count(r["output_bytes"]) + "B",
                      fmt_count(r["scratch_bytes"]) + "B"))
    lines, long = long_names_apart(lines)
    widths = [max([len(h)] + [len(row[c]) for row in lines]) for c, h in enumerate(header)]
    right = {0, 4, 5, 6, 7, 8}
    fmt = "  ".join(f"{{:{'>' if c in right else '<'}{w}}}" for c, w in enumerate(widths))
    out = [fmt.format(*header), "  ".join("-" * w for w in widths)]
    out += table_lines(lines, fmt, long, widths[0] + 2)
    return out
