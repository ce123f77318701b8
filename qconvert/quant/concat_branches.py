"""Concatenations whose inputs' ranges differ too much for one int8 scale (detector heads).

TFLite's CONCATENATION needs one scale for its inputs and output: the output's range covers the
widest input, and every narrower input is requantized into it. A YOLO-style head joins box
coordinates in pixels (0..300) with objectness and class scores (0..1): at the boxes' int8 scale
the scores keep two or three steps (14-16 dB) while the output's SQNR, dominated by the boxes,
still looks fine (44 dB). `swamped_concats` finds every Concat / Pack one of whose inputs spans
less than 1 / `MAX_RANGE_RATIO` (16) of its output's calibrated range: there the int8 error of the
output swamps that input. `quantize` (TFLite) then quantizes the branches before the concat on
their own scales and keeps the concat, and whatever shares its scale after it, in int16 (16x8:
each branch requantized int8 -> int16, 256x finer; an int16 graph output where the concat is
one), and names it in the report (`--int16-layers NAMES` chosen for the user; an explicit
`--activations` / `--int16-layers` choice is the user's and wins; a concat whose scale group holds
an op without a 16x8 kernel stays int8 and the report says which op). QDQ ONNX output keeps the
concat's output in float (no QuantizeLinear pair on it).
"""

from __future__ import annotations

from qconvert.ir import Graph

from .plan import CONCATS

MAX_RANGE_RATIO = 16.0


def _span(ranges: dict, name: str) -> float | None:
    r = ranges.get(name)
    if r is None:
        return None
    lo, hi = float(r[0]), float(r[1])
    return max(hi, 0.0) - min(lo, 0.0)  # int8 ranges always hold 0


def swamped_concats(graph: Graph, ranges: dict) -> list:
    """[{"layer", "input", "ratio"}] for each Concat / Pack whose narrowest input (its range
    holding 0, as an int8 range does) spans less than 1 / MAX_RANGE_RATIO of the output's: that
    input, its span ratio (rounded to 0.1)."""
    found = []
    for node in graph.nodes:
        if node.op not in CONCATS or node.opaque or not node.outputs:
            continue
        out = _span(ranges, node.outputs[0])
        if not out:
            continue
        spans = [(s, name) for name in node.present_inputs()
                 if graph.tensors[name].data is None
                 and (s := _span(ranges, name)) is not None and s > 0]
        if not spans:
            continue
        small, name = min(spans)
        if out / small > MAX_RANGE_RATIO:
            found.append({"layer": node.name or node.outputs[0], "output": node.outputs[0],
                          "input": name, "ratio": round(out / small, 1)})
    if found:
        _blockers(graph, found)
    return found


def _blockers(graph: Graph, found: list) -> None:
    """Mark (`blocker`) each concat whose scale group has an op without a 16x8 kernel in
    TFLite Micro: it cannot go int16 (TFLite keeps it int8 and the report says why)."""
    from .int16 import scale_groups

    groups = scale_groups(graph)
    for f in found:
        group = next((g for g in groups if f["output"] in g.members), None)
        if group is not None and group.blocker is not None:
            f["blocker"] = group.blocker


def describe(found: list, how: str) -> str:
    """One report line naming the concats and what was done (`how`)."""
    items = ", ".join(f"{f['layer']!r} ({f['input']!r} spans 1/{f['ratio']:g} of it)"
                      for f in found)
    return (f"per-branch concat: {items}: one int8 scale would leave the narrow branch a few "
            f"steps; {how}")


def float_tails(graph: Graph, found: list, activations: dict, layers) -> list:
    """The activations to leave float in QDQ output for the swamped concats `found`: each
    concat's output and what carries its values on unchanged after it (same-scale ops:
    Reshape, Transpose...), so no QuantizeLinear pair at the concat's int8 scale swamps the
    narrow branch again. Their readers then run on float values (onnxruntime's float kernels
    between the DequantizeLinear of each branch and the output). A concat whose tail is read by
    a layer (`layers`: the first outputs of the plan's conv / FC layers, which need an int8
    input) cannot stay float: it keeps one int8 scale and gets a `blocker` saying so."""
    from qconvert import schemas

    floats = []
    for f in found:
        f.pop("blocker", None)  # a 16x8 blocker means nothing in QDQ output
        tail = {f["output"]}
        feeds_layer = False
        for node in graph.nodes:  # topological: a tail grows forward
            if node.opaque or not any(n in tail for n in node.present_inputs()):
                continue
            if node.outputs and node.outputs[0] in layers:
                feeds_layer = True
                break
            schema = schemas.get(node.op)
            if schema is not None and schema.int8 == "same_scale":
                tail.update(o for o in node.outputs if o)
        if feeds_layer:
            f["blocker"] = "a layer reads its output"
        else:
            floats += [n for n in tail if n in activations]
    return sorted(set(floats))
