"""The per-layer summary behind `qconvert inspect` (in the spirit of Table 1 of the CMSIS-NN
paper): op, input and output shapes, weight and activation bytes, multiply-accumulates and the
quantization of each layer, with totals. MACs follow the op schema's `macs` rule; a dynamic
dimension counts as 1. An LSTM counts its gate matrices (input-to-gate, recurrent, projection)
and peepholes once per step and sequence; its element-wise gate arithmetic is not counted.
"""

from __future__ import annotations

import numpy as np

from .. import schemas
from ..errors import one_line
from ..ir import Graph, Model


def _dims(shape) -> list:
    return [int(d) if isinstance(d, (int, np.integer)) else 1 for d in (shape or ())]


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n


def _matrix_values(node, graph: Graph, slots) -> int:
    return sum(_prod(_dims(graph.tensors[node.inputs[k]].shape)) for k in slots
               if k < len(node.inputs) and node.inputs[k])


def _lstm_macs(node, graph: Graph) -> int:
    """TFLite UNIDIRECTIONAL_SEQUENCE_LSTM (schemas/lstm.py's slots): per step and sequence,
    every value of the 8 gate matrices (slots 1-8), the 3 peepholes (9-11) and the projection
    (16), so batch x time of them ([B, T, I] or time-major [T, B, I] alike)."""
    steps = _prod(_dims(graph.tensors[node.inputs[0]].shape)[:-1])
    return steps * _matrix_values(node, graph, (*range(1, 12), 16))


def _onnx_lstm_macs(node, graph: Graph) -> int:
    """ONNX LSTM: W [D, 4H, I], R [D, 4H, H] and the peepholes P [D, 3H], once per step and
    sequence (X is [T, B, I], or [B, T, I] with layout 1)."""
    steps = _prod(_dims(graph.tensors[node.inputs[0]].shape)[:-1])
    return steps * _matrix_values(node, graph, (1, 2, 7))


SEQUENCE_RULES = {"lstm": _lstm_macs, "onnx_lstm": _onnx_lstm_macs}


def layer_macs(node, graph: Graph) -> int:
    """Multiply-accumulates of one node (0 for ops without a `macs` rule)."""
    schema = None if node.opaque else schemas.get(node.op)
    rule = schema.macs if schema else None
    if rule is None or len(node.present_inputs()) < 2:
        return 0
    if rule in SEQUENCE_RULES:
        return SEQUENCE_RULES[rule](node, graph)
    x = graph.tensors[node.inputs[0]]
    w = graph.tensors[node.inputs[1]]
    out = graph.tensors[node.outputs[0]]
    wd, od = _dims(w.shape), _dims(out.shape)
    if not wd or not od:
        return 0
    out_elems = _prod(od)
    if rule == "conv":
        return out_elems * _prod(wd) // max(wd[0], 1)
    if rule == "depthwise":
        return out_elems * _prod(wd) // max(wd[-1], 1)
    if rule == "conv_transpose":
        return _prod(_dims(x.shape)) * _prod(wd) // max(wd[0], 1)
    if rule == "transpose_conv":  # TFLite: inputs output_shape, weights OHWI, x
        return _prod(_dims(graph.tensors[node.inputs[2]].shape)) * _prod(wd) // max(wd[-1], 1)
    if rule == "fc":
        return out_elems * wd[-1]
    if rule == "gemm":
        k = wd[1] if node.attrs.get("transB", 0) else wd[0]
        return out_elems * k
    if rule == "matmul":
        return out_elems * _dims(x.shape)[-1]
    if rule == "batch_matmul":  # the accumulation depth: a's last axis, its first with adj_x
        xd = _dims(x.shape)
        return out_elems * (xd[-2] if node.attrs.get("adj_x") else xd[-1]) if xd else 0
    raise ValueError(f"unknown MAC rule {rule!r}")


def _quant_summary(tensor) -> dict:
    q = tensor.quant if tensor is not None else None
    if q is None or q.scale.size == 0:
        return {"kind": "none"}
    kind = "per-channel" if q.per_channel else "per-tensor"
    return {"kind": kind, "scale_min": float(q.scale.min()), "scale_max": float(q.scale.max()),
            "axis": q.axis}


def layers(model: Model) -> list:
    """One dict per node of every graph, in execution order."""
    rows = []
    shapes: dict = {}  # shape -> its JSON form: a long model has few distinct shapes

    def shape(t):
        try:
            found = shapes.get(t.shape)
            if found is None:
                found = shapes[t.shape] = _shape(t.shape)
            return list(found) if found is not None else None
        except TypeError:  # a shape held as a list
            return _shape(t.shape)

    for gi, graph in enumerate(model.graphs):
        for node in graph.nodes:
            if node.origin.get("pads_spelling"):  # the reader's, not the model's (pads_spelling)
                continue
            ins = [graph.tensors[n] for n in node.present_inputs()]
            outs = [graph.tensors[n] for n in node.outputs if n is not None]
            consts = [t for t in ins if t.is_constant and not t.extra.get("from_attribute")]
            schema = None if node.opaque else schemas.get(node.op)
            widx = schema.input_index("weights") if schema else None
            weight = graph.tensors.get(node.inputs[widx]) if (
                widx is not None and widx < len(node.inputs) and node.inputs[widx]) else None
            quant_of = weight if weight is not None and weight.is_constant else (outs[0] if outs else None)
            rows.append({
                "subgraph": gi,
                "name": node.name,
                "op": node.op,
                "activation": node.attrs.get("activation", "NONE"),
                "known": not node.opaque,
                "inputs": [shape(t) for t in ins if not t.is_constant],
                "outputs": [shape(t) for t in outs],
                "weight_bytes": sum(t.nbytes() for t in consts),
                "activation_bytes": sum(t.nbytes() for t in outs),
                "macs": layer_macs(node, graph),
                "quantization": _quant_summary(quant_of),
            })
    return rows


def _shape(shape):
    return None if shape is None else [d if isinstance(d, (int, str)) else (
        int(d) if isinstance(d, np.integer) else "?") for d in shape]


def summary(model: Model, path: str) -> dict:
    """The whole inspect report as JSON-ready data."""
    rows = layers(model)
    unique_weights = {id(t.data): t.nbytes() for g in model.graphs for t in g.tensors.values()
                      if t.is_constant and not t.extra.get("from_attribute")}
    return {
        "model": str(path),
        "format": model.format,
        "layers": rows,
        "unknown_ops": sorted({r["op"] for r in rows if not r["known"]}),
        "totals": {
            "layers": len(rows),
            "macs": sum(r["macs"] for r in rows),
            "weight_bytes": sum(unique_weights.values()),
            "activation_bytes": sum(r["activation_bytes"] for r in rows),
            "peak_activation_bytes": max((r["activation_bytes"] for r in rows), default=0),
        },
    }


def _fmt_shapes(shapes) -> str:
    return " ".join("x".join(str(d) for d in s) if s is not None else "?" for s in shapes) or "-"


def _fmt_quant(q: dict) -> str:
    if q["kind"] == "none":
        return "none"
    if q["scale_min"] == q["scale_max"]:
        return f"{q['kind']} {q['scale_min']:.3g}"
    return f"{q['kind']} {q['scale_min']:.3g}..{q['scale_max']:.3g}"


def format_count(n: int) -> str:
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


NAME_WIDTH = 32  # a longer layer name gets a line of its own above its row


def long_names_apart(rows: list, name_col: int = 1) -> tuple:
    """(rows with every name longer than NAME_WIDTH emptied, {row index: full name}): the
    tables print such a name whole on a line of its own (`table_lines`) instead of cutting it
    (Keras names all start with the same `functional_1/...`)."""
    long = {i: row[name_col] for i, row in enumerate(rows) if len(row[name_col]) > NAME_WIDTH}
    kept = [tuple("" if c == name_col and i in long else cell for c, cell in enumerate(row))
            for i, row in enumerate(rows)]
    return kept, long


def table_lines(rows: list, fmt: str, long: dict, indent: int = 0) -> list:
    """The formatted rows, each long name (`long_names_apart`) on the line before its row."""
    out = []
    for i, row in enumerate(rows):
        if i in long:
            out.append(" " * indent + long[i])
        out.append(fmt.format(*row).rstrip())
    return out


def render(report: dict) -> str:
    """Human-readable table of `summary(...)`."""
    header = ("#", "layer", "op", "input", "output", "weights", "activ.", "MACs", "quantization")
    lines = []
    for i, r in enumerate(report["layers"]):
        op = r["op"] if r["known"] else f"{r['op']} (unknown)"
        if r["activation"] != "NONE":
            op += f"+{r['activation']}"
        lines.append((str(i), one_line(r["name"]), one_line(op),
                      one_line(_fmt_shapes(r["inputs"])), one_line(_fmt_shapes(r["outputs"])),
                      format_count(r["weight_bytes"]) + "B",
                      format_count(r["activation_bytes"]) + "B", format_count(r["macs"]),
                      _fmt_quant(r["quantization"])))
    lines, long = long_names_apart(lines)
    widths = [max(len(h), *(len(row[c]) for row in lines)) if lines else len(h)
              for c, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'>' if c in (0, 5, 6, 7) else '<'}{w}}}" for c, w in enumerate(widths))
    out = [one_line(f"{report['model']} ({report['format']})"), fmt.format(*header),
           "  ".join("-" * w for w in widths)]
    out += table_lines(lines, fmt, long, widths[0] + 2)
    t = report["totals"]
    out.append("")
    out.append(f"total: {t['layers']} layers, {format_count(t['macs'])} MACs ({t['macs']}), "
               f"weights {t['weight_bytes']} bytes, activations {t['activation_bytes']} bytes "
               f"(largest {t['peak_activation_bytes']})")
    if report["unknown_ops"]:
        out.append("unknown ops (carried through unchanged): "
                   + one_line(", ".join(report["unknown_ops"])))
    return "\n".join(out)
