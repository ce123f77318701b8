"""Derive the instruction-per-MAC rates of the resource summary (qconvert/quant/mcu_rates.py)
from bench_mcu's measurements (docs/bench_mcu.json).

For each board (Cortex-M core) and kernel set (export-c portable, export-c cmsis-nn) the rate
is the median, over the benchmark's models, of instructions per inference divided by the
model's multiply-accumulates (`qconvert inspect`'s total), with the lowest and highest rate
seen: the summary multiplies a model's MACs by the median and shows the range. Rerun after
bench_mcu.py rewrote the JSON:

    python bench/mcu_rates.py            # prints the table
    python bench/mcu_rates.py --write    # rewrites qconvert/quant/mcu_rates.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "docs" / "bench_mcu.json"
TABLE = ROOT / "qconvert" / "quant" / "mcu_rates.py"
CORES = {"m4": "Cortex-M4", "m55": "Cortex-M55"}
KERNELS = ("portable", "cmsis-nn")


def macs_of(source: str) -> int:
    from qconvert.formats.layer_table import summary
    from qconvert.formats.model_io import load_model

    return summary(load_model(ROOT / source), source)["totals"]["macs"]


def rates(bench: dict) -> dict:
    """{core: {kernels: (median, lowest, highest, models)}} instructions per MAC."""
    macs: dict = {}
    found: dict = {}
    for r in bench["records"]:
        if r.get("status") != "ok" or r.get("image") not in KERNELS:
            continue
        if r["source"] not in macs:
            macs[r["source"]] = macs_of(r["source"])
        if macs[r["source"]] <= 0:
            continue
        found.setdefault(CORES[r["board"]], {}).setdefault(r["image"], []).append(
            r["instructions"] / macs[r["source"]])
    return {core: {k: (round(statistics.median(kinds[k]), 2), round(min(kinds[k]), 2),
                       round(max(kinds[k]), 2), len(kinds[k])) for k in KERNELS if k in kinds}
            for core, kinds in found.items()}


def render(table: dict, bench: dict) -> str:
    lines = ['"""Instructions per multiply-accumulate of export-c\'s C on Cortex-M cores,',
             "measured by bench/bench_mcu.py (docs/bench_mcu.json) and derived by",
             "bench/mcu_rates.py (generated: do not edit; rerun it after a new benchmark).",
             "",
             *textwrap.wrap(f"Benchmark of {bench['date']}: {bench['command']} ({bench['qemu']}; "
                            f"{bench['gcc']}).", 96),
             "Per core and kernel set: (median, lowest, highest) over the benchmark's models, and",
             'the number of models."""', "", "BENCHMARK = " + repr(
                 f"docs/bench_mcu.json of {bench['date']} "
                 f"(qconvert {bench['qconvert_commit'][:7]})"),
             "", "RATES = {"]
    for core, kinds in table.items():
        lines.append(f"    {core!r}: {{")
        for k, v in kinds.items():
            lines.append(f"        {k!r}: {v!r},")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {TABLE.relative_to(ROOT)}")
    args = parser.parse_args()
    bench = json.loads(BENCH.read_text())
    text = render(rates(bench), bench)
    if args.write:
        TABLE.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
