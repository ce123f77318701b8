"""Print the real-model coverage table: every corpus model x every command -> ok / refused.

    python bench/model_coverage.py [--markdown] [--update-docs] [--models a,b] [--timing]

Each cell runs the command in-process on the model of `tests/corpus/manifest.py` and judges it
with the oracle of `tests/corpus/harness.py`: `ok` gives the oracle's figure (the largest
relative output error against onnxruntime / LiteRT, bit-exactness with TFLite Micro and the
output SQNR against the float model, gcc on the header), `refused` the cause the one-line error
gives (quoted names and details dropped), `FAIL` a check that failed (the test suite fails on
it), `-` a command that does not apply (quantizing an int8 model; ONNX output from TFLite).
docs/results/coverage.md shows the table of the first corpus (`README_MODELS`) and
docs/real-models.md the issue-28 models (`REAL_MODELS`): `--update-docs` rewrites the coverage
section of both (between the two `<!-- coverage-table -->` markers; `--update-readme`, the old
name, only the first page's). tests/test_corpus.py compares both with a fresh run.
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
from corpus.manifest import COMMANDS, MODELS_TABLE, README_MODELS, REAL_MODELS  # noqa: E402

COVERAGE_PAGE = ROOT / "docs" / "results" / "coverage.md"
DOCS_PAGE = ROOT / "docs" / "real-models.md"


def render(cells: dict, models: list, markdown: bool) -> str:
    """The table: per model, one line per command (`--markdown`: the coverage pages' table)."""
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
    ap.add_argument("--update-docs", action="store_true",
                    help="write the tables into docs/results/coverage.md and docs/real-models.md")
    ap.add_argument("--update-readme", action="store_true",
                    help="old name: write only docs/results/coverage.md's table")
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
    for wanted, page, group in ((args.update_readme or args.update_docs, COVERAGE_PAGE,
                                 README_MODELS),
                                (args.update_docs, DOCS_PAGE, REAL_MODELS)):
        if not wanted:
            continue
        shown = [m for m in models if m in group]
        head, _, tail = page.read_text().split(MARKER, 2)
        table = render(cells, shown, markdown=True)
        part = {k: v for k, v in cells.items() if k[0] in {m.name for m in shown}}
        ok = {s: sum(c.status == s for c in part.values()) for s in ("ok", "refused", "FAIL")}
        line = (f"{len(shown)} models, {len(part)} cells: {ok['ok']} ok, {ok['refused']} "
                f"refused, {ok['FAIL']} FAIL")
        page.write_text(f"{head}{MARKER}\n{table}\n\n{line}.\n{MARKER}{tail}")
        print(f"updated {page}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
