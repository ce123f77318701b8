"""One resource summary for a model on a microcontroller, the same in `inspect`, `quantize`,
`export-c` and the HTML report: constant data (flash), peak arena (RAM), multiply-accumulates,
and an instruction estimate per Cortex-M core and kernel set.

The estimate is the model's MACs times the instructions per MAC bench_mcu measured for
export-c's C on that core (`mcu_rates.RATES`: the median over its models, with the lowest and
highest rate as the range: element-wise-heavy models sit high, convolution-heavy ones low). The
flash and arena figures are export-c's own plan (portable kernels), computed by
`c_export.model.resources`; a float model has neither until it is quantized.
"""

from __future__ import annotations

from .mcu_rates import BENCHMARK, RATES


def summarize(macs: int, flash: int | None = None, arena: int | None = None) -> dict:
    """The summary as JSON-ready data (`flash` / `arena` None: not known for this model)."""
    estimates = {core: {kernels: {"instructions": round(macs * rate[0]),
                                  "low": round(macs * rate[1]), "high": round(macs * rate[2])}
                        for kernels, rate in kinds.items()}
                 for core, kinds in RATES.items()}
    return {"macs": int(macs), "flash_bytes": flash, "arena_bytes": arena,
            "instructions": estimates, "rates": BENCHMARK}


def count(n) -> str:
    """1234 -> 1.23k, 4.5e6 -> 4.50M (as the export-c table counts)."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return str(int(n))


def render(res: dict) -> list:
    """The summary's printed lines (the ranges are in the JSON and the HTML)."""
    flash = "-" if res["flash_bytes"] is None else f"{res['flash_bytes']} bytes"
    arena = ("- (quantize first)" if res["arena_bytes"] is None
             else f"{res['arena_bytes']} bytes")
    lines = [f"resources: flash (constants) {flash}, peak arena (RAM) {arena}, "
             f"{count(res['macs'])} MACs"]
    for core, kinds in res["instructions"].items():
        parts = [f"{k} ~{count(v['instructions'])}" for k, v in kinds.items()]
        lines.append(f"  {core} instructions per inference: {', '.join(parts)}")
    lines.append("  (estimate: MACs x the median instructions per MAC bench_mcu measured)")
    return lines


def html_rows(res: dict) -> list:
    """(label, value) rows for the HTML report's summary table."""
    rows = [("constant data (flash)", "-" if res["flash_bytes"] is None
             else f"{res['flash_bytes']} bytes"),
            ("peak arena (RAM)", "- (quantize first)" if res["arena_bytes"] is None
             else f"{res['arena_bytes']} bytes"),
            ("MACs", count(res["macs"]))]
    for core, kinds in res["instructions"].items():
        for k, v in kinds.items():
            rows.append((f"instructions, {core} {k} (estimate)",
                         f"~{count(v['instructions'])} ({count(v['low'])}..{count(v['high'])})"))
    return rows
