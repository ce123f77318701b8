"""Print the real-model coverage table: every corpus model x every command -> ok / refused.

    python bench/model_coverage.py [--markdown] [--update-docs] [--models a,b] [--timing]

Each cell runs the command in-process on the model of `tests/corpus/manifest.py` and judges it
with the oracle of `tests/corpus/harness.py`: `ok` gives the oracle's figure (the largest
relative output error against onnxruntime / LiteRT, bit-exactness with TFLite Micro and the
output SQNR against the float model, gcc on the header), `refused` the cause the one-line error
gives (quoted names and details dropped), `FAIL` a check that failed (the test suite fails on
it), `-` a command that does not apply (quantizing an int8 model; ONNX output from TFLite).
docs/results/coverage.md shows this table: `--update-docs` rewrites its coverage section (between
the two `<!-- coverage-table -->` markers), which tests/test_corpus.py compares with a fresh run
(`--update-readme` is the flag's old name, kept).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
MARKER = "<!-- coverage-table -->"

from corpus.harness import CorpusRunner, coverage_markdown, summarize_refusal  # noqa: E402
from corpus.manifest import COMMANDS, MODELS_TABLE  # noqa: E402


def render(cells: dict, models: list, markdown: bool) -> str:
    """The table: per model, one line per command (`--markdown`: the coverage page's table)."""
    def text(cell):
        if cell is None:
            return "-"
        if cell.status == "ok":
            return f"ok: {cell.detail}"
        if cell.status == "refused":
            return f"refused: {summarize_refusal(cell.detail)}"
        return f"FAIL: {cell.detail}"

    if markdown:
        return coverage_markdown(cells, models, COMMANDS)
    rows = [[m.name] + [text(cells.get((m.name, c))) for c in COMMANDS] for m in models]
    lines = []
    for r in rows:
        lines.append(r[0])
        lines += [f"    {c:16} {v}" for c, v in zip(COMMANDS, r[1:])]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--models", help="comma-separated model names (default: all)")
    ap.add_argument("--timing", action="store_true", help="print each cell's seconds")
    ap.add_argument("--update-docs", "--update-readme", dest="update_docs", action="store_true",
                    help="write the Markdown table into docs/results/coverage.md's coverage section")
    args = ap.parse_args(argv)
    models = list(MODELS_TABLE)
    if args.models:
        wanted = set(args.models.split(","))
        models = [m for m in models if m.name in wanted]
    start = time.perf_counter()
    cells = {}
    with tempfile.TemporaryDirectory() as tmp:
        runner = CorpusRunner(Path(tmp))
        for m in models:
            for c in m.commands:
                cells[(m.name, c)] = cell = runner.cell(m.name, c)
                if args.timing:
                    print(f"{cell.seconds:6.2f} s  {m.name} {c}: {cell.status}", file=sys.stderr)
    print(render(cells, models, args.markdown))
    counts = {s: sum(c.status == s for c in cells.values()) for s in ("ok", "refused", "FAIL")}
    total = (f"{len(models)} models, {len(cells)} cells: {counts['ok']} ok, "
             f"{counts['refused']} refused, {counts['FAIL']} FAIL")
    print(f"\n{total} ({time.perf_counter() - start:.0f} s)")
    if args.update_docs:
        page = ROOT / "docs" / "results" / "coverage.md"
        head, _, tail = page.read_text().split(MARKER, 2)
        table = render(cells, models, markdown=True)
        page.write_text(f"{head}{MARKER}\n{table}\n\n{total}.\n{MARKER}{tail}")
        print(f"updated {page}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
