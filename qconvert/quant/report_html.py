"""`qconvert quantize --report-html FILE`: the quantization report as one self-contained HTML
page, readable in any browser without Python, network or JavaScript.

It holds a summary (model, method, options, output SQNR, top-1 agreement, samples, the
resource summary), a colour legend and a table of every layer (full name, wrapped; op, bits,
output and input scales and zero points) with its SQNR bar (end to end; for ONNX also the SQNR
of the error the layer's own quantization adds, the bar that points at the layer to blame), the
labelled accuracy with both confusion matrices (--labels), and a scatter plot of the float
model's output values against the int8 model's on the report's samples, with the diagonal
y = x. Charts are inline SVG; every name is escaped. The page is XHTML-clean (every element
closed, attributes quoted) so it also parses as XML.

A 16x8 report (`--activations int16`, `--int16-layers`) adds the choice: the int16 layers marked
"16" beside their bars, the sensitivity pass's estimated SQNR gain of each candidate layer with
the bytes it adds (kept ones highlighted), and RAM (activation arena) and flash (weights,
biases, constants) of the int8 model against the chosen mix.
"""

from __future__ import annotations

import html
import math

import numpy as np

SCATTER_POINTS = 2000
_BAR_W, _ROW_H, _LABEL_W = 420, 16, 300
_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: left; }
.good { fill: #3a8f3a; } .fair { fill: #e0a020; } .poor { fill: #c83232; }
.added { fill: #5078c8; } text { font-size: 11px; font-family: monospace; }
.axis { stroke: #444; stroke-width: 1; } .diag { stroke: #999; stroke-dasharray: 4 3; }
.point { fill: #3264c8; fill-opacity: 0.35; }
.kept { fill: #7a3ab8; } .skipped { fill: #bbb; } .int8 { fill: #888; } .mix { fill: #7a3ab8; }
.layers td { vertical-align: top; border-bottom: 1px solid #eee; }
.layers td.name { word-break: break-all; max-width: 28em; font-family: monospace; }
.swatch { display: inline-block; width: 1em; height: 0.8em; margin-left: 0.8em; }
.swatch.good { background: #3a8f3a; } .swatch.fair { background: #e0a020; }
.swatch.poor { background: #c83232; } .swatch.added { background: #5078c8; }
.confusion { margin: 1em 0; } .confusion td { text-align: right; border: 1px solid #ddd; }
.confusion .hit { background: #d8efd8; } .confusion .miss { background: #f6dada; }
"""


def _xml_char(c: str) -> str:
    """A character XML 1.0 forbids (controls other than tab / newline / CR, surrogates, U+FFFE,
    U+FFFF) written as its Python escape, visible text; any other character as it is."""
    o = ord(c)
    if (o >= 0x20 and o < 0xD800) or o in (0x9, 0xA, 0xD) or 0xE000 <= o <= 0xFFFD \
            or o >= 0x10000:
        return c
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def _e(text) -> str:
    """`text` escaped for the page: markup characters as entities, characters XML 1.0 forbids
    (NUL, ESC, lone surrogates of undecodable file names...) as visible escapes, so the page
    stays well-formed XML whatever a model names its layers."""
    text = str(text)
    if not text.isprintable():
        text = "".join(_xml_char(c) for c in text)
    return html.escape(text, quote=True)


def _grade(db: float) -> str:
    return "good" if db >= 30 else ("fair" if db >= 20 else "poor")


def _finite(values) -> list:
    return [v for v in values if v is not None and math.isfinite(v)]


_ROW_BAR_W = 260


def _row_bar(row: dict, key: str, cls: str | None, top: float) -> str:
    """One layer's SQNR (or added-error) bar as a small inline SVG."""
    db = row.get(key)
    if db is None:
        return "-"
    exact = not math.isfinite(db)
    length = _ROW_BAR_W if exact else max(1.0, _ROW_BAR_W * max(db, 0.0) / top)
    klass = cls or _grade(math.inf if exact else db)
    shown = "exact" if exact else f"{db:.1f} dB"
    label = f"{row['layer']} ({row['op']})"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_ROW_BAR_W + 70}" '
            f'height="{_ROW_H}" role="img" aria-label="{_e(shown)}">'
            f'<rect class="bar {klass}" data-layer="{_e(row["layer"])}" data-kind="{key}" '
            f'x="0" y="2" width="{length:.1f}" height="{_ROW_H - 3}"><title>{_e(label)}: '
            f'{shown}</title></rect><text x="{length + 4:.1f}" y="12">{shown}</text></svg>')


def _scale_zp(q) -> str:
    if not q:
        return "-"
    scale = q.get("scale")
    shown = f"{scale:.6g}" if isinstance(scale, (int, float)) else str(scale)
    return f"{shown} / {q.get('zero_point')}"


LEGEND = ('<p class="legend"><span class="swatch good"></span> SQNR at least 30 dB '
          '<span class="swatch fair"></span> 20 to 30 dB <span class="swatch poor"></span> '
          'below 20 dB (end to end: the int8 value against the float model\'s)'
          '{added}{wide}</p>')


def layer_table(layers: list) -> str:
    """Every layer as a table row: its full name (wrapped, never clipped), op, bits, output
    and input scale / zero point, and its SQNR bar(s)."""
    has_added = any(row.get("added_sqnr_db") is not None for row in layers)
    has_wide = any(row.get("bits") == 16 for row in layers)
    values = _finite([row.get("sqnr_db") for row in layers]
                     + [row.get("added_sqnr_db") for row in layers])
    top = max(values + [1.0])
    legend = LEGEND.format(
        added=(' <span class="swatch added"></span> added by the layer\'s own quantization '
               '(ONNX QDQ: the bar that points at the layer to blame)') if has_added else "",
        wide=" 16: the layer runs 16x8 (int16 activations)" if has_wide else "")
    head = ["#", "layer", "op", "bits", "output scale / zero point",
            "input scale / zero point", f"SQNR (0 .. {top:.1f} dB)"]
    if has_added:
        head.append("added by the layer")
    rows = []
    for i, row in enumerate(layers):
        inputs = "<br/>".join(_e(_scale_zp(q)) for q in row.get("input") or []) or "-"
        cells = [str(i), f'<td class="name">{_e(row["layer"])}</td>', _e(row["op"]),
                 "16" if row.get("bits") == 16 else "8", _e(_scale_zp(row.get("output"))),
                 inputs, _row_bar(row, "sqnr_db", None, top)]
        if has_added:
            cells.append(_row_bar(row, "added_sqnr_db", "added", top))
        rows.append("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>"
                                     for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
    return legend + f'\n<table class="layers">{header}\n' + "\n".join(rows) + "</table>"


def scatter(reference: np.ndarray, quantized: np.ndarray, size: int = 420) -> str:
    """An SVG scatter of float (x) against int8 (y) output values, with the diagonal."""
    x = np.asarray(reference, np.float64).reshape(-1)
    y = np.asarray(quantized, np.float64).reshape(-1)
    if x.size > SCATTER_POINTS:
        pick = np.linspace(0, x.size - 1, SCATTER_POINTS).astype(np.int64)
        x, y = x[pick], y[pick]
    lo = float(min(x.min(initial=0.0), y.min(initial=0.0)))
    hi = float(max(x.max(initial=1.0), y.max(initial=1.0)))
    span = hi - lo if hi > lo else 1.0
    pad = 40

    def px(v):
        return pad + (v - lo) / span * (size - 2 * pad)

    def py(v):
        return size - pad - (v - lo) / span * (size - 2 * pad)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
             f'role="img" aria-label="float vs int8 outputs">',
             f'<line class="axis" x1="{pad}" y1="{size - pad}" x2="{size - pad}" '
             f'y2="{size - pad}"/>',
             f'<line class="axis" x1="{pad}" y1="{pad}" x2="{pad}" y2="{size - pad}"/>',
             f'<line class="diag" x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" '
             f'y2="{py(hi):.1f}"/>']
    parts += [f'<circle class="point" cx="{px(a):.1f}" cy="{py(b):.1f}" r="2"/>'
              for a, b in zip(x.tolist(), y.tolist())]
    parts += [f'<text x="{size / 2}" y="{size - 8}" text-anchor="middle">float output</text>',
              f'<text x="12" y="{size / 2}" transform="rotate(-90 12 {size / 2})" '
              f'text-anchor="middle">int8 output (dequantized)</text>',
              f'<text x="{pad}" y="{size - pad + 14}">{lo:.3g}</text>',
              f'<text x="{size - pad}" y="{size - pad + 14}" text-anchor="end">{hi:.3g}</text>',
              "</svg>"]
    return "\n".join(parts)


def int16_section(facts: dict) -> list:
    """The 16x8 choice: a summary, the candidates' estimated gains and the RAM / flash bars."""
    m8, mix = facts["memory"]["int8"], facts["memory"]["chosen"]
    rows = [("16x8 mode", facts["mode"]),
            ("int16 layers", ", ".join(facts["layers"]) or "(none)"),
            ("ops running 16x8", len(facts["nodes_16x8"])),
            ("QUANTIZE ops at int8 / int16 borders", facts["requantize_ops"])]
    est = facts.get("estimated_output_sqnr_db", {})
    if "chosen_db" in est:
        rows.append(("estimated output SQNR (fake-quantized)",
                     f"int8 {est['int8_db']:.2f} dB, chosen {est['chosen_db']:.2f} dB"))
    for key, label in (("arena_bytes", "RAM: activation arena"),
                       ("flash_bytes", "flash: weights + biases + constants")):
        rows.append((label, f"int8 {m8[key]} bytes, chosen {mix[key]} bytes "
                            f"({mix[key] - m8[key]:+d})"))
    table = "\n".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    out = ["<h2>16x8 choice</h2>", f"<table>{table}</table>", memory_bars(m8, mix)]
    if facts.get("sensitivity"):
        out += ["<h3>Sensitivity: estimated output SQNR gain of each layer alone in int16</h3>",
                gain_bars(facts["sensitivity"])]
    return out


def gain_bars(rows: list) -> str:
    """An SVG bar per candidate layer: its estimated gain (dB) and the bytes it adds."""
    top = max(_finite([r["estimated_gain_db"] for r in rows]) + [0.5])
    height = (_ROW_H + 4) * len(rows) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_LABEL_W + _BAR_W + 420}" '
             f'height="{height}" role="img" aria-label="16x8 sensitivity">']
    for i, r in enumerate(rows):
        y = 20 + i * (_ROW_H + 4)
        gain = r["estimated_gain_db"]
        length = max(1.0, _BAR_W * max(gain, 0.0) / top) if math.isfinite(gain) else _BAR_W
        klass = "kept" if r["chosen"] else "skipped"
        label = f"{r['layer']} ({r['op']})"
        parts.append(f'<text x="{_LABEL_W - 6}" y="{y + 12}" text-anchor="end">'
                     f'{_e(label[-48:])}</text>')
        parts.append(f'<rect class="gain {klass}" data-layer="{_e(r["layer"])}" '
                     f'x="{_LABEL_W}" y="{y + 2}" width="{length:.1f}" '
                     f'height="{_ROW_H - 3}"><title>{_e(label)}: {gain:+.2f} dB, '
                     f'+{r["extra_bytes"]} bytes</title></rect>')
        step = (f'; with the layers kept before it {r["step_gain_db"]:+.2f} dB for '
                f'+{r["step_extra_bytes"]} B' if "step_gain_db" in r else "")
        parts.append(f'<text x="{_LABEL_W + length + 4:.1f}" y="{y + 12}">{gain:+.2f} dB, '
                     f'+{r["extra_bytes"]} B{step}{" (kept)" if r["chosen"] else ""}</text>')
    parts.append(f'<text x="{_LABEL_W}" y="12">estimated gain (dB), 0 .. {top:.1f}; purple: '
                 'moved to 16x8</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def memory_bars(m8: dict, mix: dict) -> str:
    """An SVG with int8 and chosen bars for RAM (arena) and flash."""
    keys = (("arena_bytes", "RAM (arena)"), ("flash_bytes", "flash"))
    top = max([m8[k] for k, _ in keys] + [mix[k] for k, _ in keys] + [1])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_LABEL_W + _BAR_W + 160}" '
             f'height="{4 * (_ROW_H + 4) + 30}" role="img" aria-label="RAM and flash">']
    y = 20
    for key, label in keys:
        for klass, name, value in (("int8", "int8", m8[key]), ("mix", "chosen", mix[key])):
            length = max(1.0, _BAR_W * value / top)
            parts.append(f'<text x="{_LABEL_W - 6}" y="{y + 12}" text-anchor="end">'
                         f'{_e(label)}, {name}</text>')
            parts.append(f'<rect class="mem {klass}" data-kind="{key}" x="{_LABEL_W}" '
                         f'y="{y + 2}" width="{length:.1f}" height="{_ROW_H - 3}"/>')
            parts.append(f'<text x="{_LABEL_W + length + 4:.1f}" y="{y + 12}">{value} bytes'
                         '</text>')
            y += _ROW_H + 4
    parts.append(f'<text x="{_LABEL_W}" y="12">bytes, 0 .. {top}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def confusion_table(matrix: list, caption: str) -> str:
    """A confusion matrix as a table: rows the true class, columns the predicted one, the
    diagonal (correct) cells marked."""
    classes = len(matrix)
    head = "".join(f"<th>{j}</th>" for j in range(classes))
    rows = "\n".join(
        f"<tr><th>{i}</th>" + "".join(
            f"<td class=\"{'hit' if i == j else 'miss' if n else ''}\">{n}</td>"
            for j, n in enumerate(row)) + "</tr>" for i, row in enumerate(matrix))
    return (f"<table class=\"confusion\"><caption>{_e(caption)}</caption>"
            f"<tr><th>true \\ predicted</th>{head}</tr>\n{rows}</table>")


def accuracy_section(acc: dict) -> list:
    """Labelled top-1 (float and int8, over every evaluation sample) and both confusion
    matrices."""
    return ["<h2>Labelled accuracy</h2>",
            f"<p>Top-1 over all {acc['samples']} evaluation samples: float "
            f"{100 * acc['float_top1']:.2f} %, int8 {100 * acc['int8_top1']:.2f} %; int8 "
            f"agrees with float on {100 * acc['agreement']:.2f} %.</p>",
            confusion_table(acc["confusion_float"], "float model"),
            confusion_table(acc["confusion_int8"], "int8 model")]


def render_html(result: dict, model_name: str, pairs=None) -> str:
    """The page (module docstring). `pairs`: (float outputs, int8 outputs) for the scatter."""
    rows = [("model", model_name), ("method", result.get("method")),
            ("samples", result.get("samples")), ("layer samples", result.get("layer_samples"))]
    for key in ("bias_correction", "equalize", "rounding"):
        if key in result:
            rows.append((key.replace("_", " "), result[key]))
    for name, db in result.get("output_sqnr_db", {}).items():
        rows.append((f"output {name} SQNR", "-" if db is None else f"{db:.2f} dB"))
    if "top1_agreement" in result:
        rows.append(("top-1 agreement with float", f"{100 * result['top1_agreement']:.1f} %"))
    if "eval_samples" in result:
        rows.append(("evaluation samples", result["eval_samples"]))
    if "resources" in result:
        from .resources import html_rows

        rows += html_rows(result["resources"])
    table = "\n".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    body = [f"<h1>qconvert quantization report: {_e(model_name)}</h1>",
            f"<table>{table}</table>",
            "<h2>Per layer: scales, zero points and SQNR</h2>",
            layer_table(result.get("layers", []))]
    if "int16" in result:
        body += int16_section(result["int16"])
    if "labelled" in result:
        body += accuracy_section(result["labelled"])
    if pairs is not None:
        body += ["<h2>Float vs int8 output</h2>",
                 f"<p>{min(np.asarray(pairs[0]).size, SCATTER_POINTS)} output values of the "
                 "report's samples; the dashed line is y = x.</p>", scatter(*pairs)]
    return ("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n"
            "<head><meta charset=\"utf-8\"/><title>qconvert report: " + _e(model_name)
            + "</title><style>" + _STYLE + "</style></head>\n<body>\n" + "\n".join(body)
            + "\n</body>\n</html>\n")
