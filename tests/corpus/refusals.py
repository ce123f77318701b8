"""How the corpus harness judges a refusal (it must name ops or tensors of the model) and how
the coverage table of docs/results/coverage.md is written and read back (`coverage_markdown`,
`parse_coverage_markdown`, refusals shortened by `summarize_refusal`).
"""

from __future__ import annotations

import re

from .manifest import CorpusModel
from .oracles import _Fail, model_ops, op_vocabulary


# -- refusal checks -------------------------------------------------------------------------------
def _norm(op: str) -> str:
    """An op name compared across spellings: `DepthwiseConv2D`, `DEPTHWISE_CONV_2D` and
    `depthwise_conv_2d` are one op."""
    return op.replace("_", "").lower()


def _matches(word: str, have: set) -> str | None:
    """The model op (normalized) `word` names: the same op in any spelling, or an abbreviation
    of it of at least 4 letters as qconvert's own op names are (LayerNorm: LayerNormalization)."""
    w = _norm(word)
    if w in have:
        return w
    longer = [h for h in have if len(w) >= 4 and h.startswith(w)]
    return longer[0] if len(longer) == 1 else None


def named_ops(model: CorpusModel, cause: str) -> set:
    """The model's op types a message names (normalized spelling), quoted names left out."""
    have = {_norm(o) for o in model_ops(model)[0]}
    bare = re.sub(r"'[^']*'", "", cause)
    found = (_matches(w, have) for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", bare)
             if w != w.lower())
    return {f for f in found if f is not None}


def check_refusal_names(model: CorpusModel, cause: str) -> None:
    """A refusal must name things of the model: every quoted name is one of its nodes, tensors
    or op types; every op-like word (one with a capital letter) that is an op of the model's
    format is one the model has; and it names at least one op or tensor of the model."""
    ops, names, _ = model_ops(model)
    quoted = re.findall(r"'([^']*)'", cause)
    stray = [q for q in quoted if q not in names and q not in ops]
    if stray:
        raise _Fail(f"refusal names {stray[:3]}, not in the model: {cause[:200]}")
    bare = re.sub(r"'[^']*'", "", cause)
    words = {w for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", bare)
             if len(w) > 2 and w != w.lower()}
    vocab = {_norm(v) for v in op_vocabulary(model.format)}
    have = {_norm(o) for o in ops}
    foreign = sorted(w for w in words if _norm(w) in vocab and _norm(w) not in have)
    if foreign:
        raise _Fail(f"refusal names ops {foreign} the model does not have: {cause[:200]}")
    if not quoted and not named_ops(model, cause):
        raise _Fail(f"refusal names no op or tensor of the model: {cause[:200]}")


def summarize_refusal(cause: str) -> str:
    """A refusal's cause, shortened for the table: quoted names and parenthesised details
    dropped, repeated ops counted (`Conv x4`)."""
    def split(text, sep):
        parts, depth, cur = [], 0, ""
        i = 0
        while i < len(text):
            ch = text[i]
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and text.startswith(sep, i):
                parts.append(cur)
                cur = ""
                i += len(sep)
                continue
            cur += ch
            i += 1
        return parts + [cur]

    def strip(text):
        text = re.sub(r"'[^']*'", "", text)
        while re.search(r"\([^()]*\)", text):
            text = re.sub(r"\s*\((x\d+)\)", r" \1", text)
            text = re.sub(r"\s*\([^()]*\)", "", text)
        return " ".join(text.split())

    head = re.match(r"^(cannot [^:]*: )", cause)
    prefix = head.group(1) if head else ""
    clauses = []
    for clause in split(cause[len(prefix):], "; "):
        if ": " not in clause:
            clauses.append(strip(clause))
            continue
        label, _, items = clause.partition(": ")
        counts: dict = {}
        for item in split(items, ", "):
            name = strip(item)
            m = re.match(r"^(.*?) x(\d+)$", name)
            name, n = (m.group(1), int(m.group(2))) if m else (name, 1)
            counts[name] = counts.get(name, 0) + n
        body = ", ".join(k if v == 1 else f"{k} x{v}" for k, v in counts.items())
        clauses.append(f"{strip(label)}: {body}")
    return prefix + "; ".join(clauses)


# -- the coverage table (docs/results/coverage.md) --------------------------------------------------------------------------
def coverage_markdown(cells: dict, models: list, commands: tuple) -> str:
    """The coverage table in Markdown: `ok` (with the SQNR for quantize), `refused (n)`,
    `FAIL (n)` or `-` per cell, and below it the numbered causes, each listed once."""
    notes: dict = {}

    def text(cell):
        if cell is None:
            return "-"
        if cell.status == "ok":
            db = re.search(r"SQNR ([-\d.]+ dB)", cell.detail)
            return f"ok, {db.group(1)}" if db else "ok"
        why = summarize_refusal(cell.detail) if cell.status == "refused" else cell.detail
        n = notes.setdefault(f"{cell.status}: {why}" if cell.status == "FAIL" else why,
                             len(notes) + 1)
        return f"{cell.status} ({n})"

    lines = ["| model | " + " | ".join(commands) + " |", "|---" * (len(commands) + 1) + "|"]
    for m in models:
        lines.append(f"| {m.name} | " + " | ".join(text(cells.get((m.name, c)))
                                                 for c in commands) + " |")
    lines.append("")
    lines += [f"({n}) {why}  " for why, n in notes.items()]
    return "\n".join(lines)


def parse_coverage_markdown(text: str, commands: tuple) -> dict:
    """{model: {command: (status, cause or None)}} from `coverage_markdown`'s text."""
    notes = dict(re.findall(r"^\((\d+)\) (.*?)\s*$", text, re.MULTILINE))
    rows = {}
    for line in [ln for ln in text.splitlines() if ln.startswith("|")][2:]:
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        row = {}
        for c, v in zip(commands, cols[1:]):
            m = re.match(r"^(ok|refused|FAIL)(?: \((\d+)\))?", v)
            row[c] = ((m.group(1), notes.get(m.group(2)) if m.group(2) else None) if m
                      else (v, None))
        rows[cols[0]] = row
    return rows
