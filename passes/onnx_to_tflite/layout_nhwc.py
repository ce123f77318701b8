"""ONNX (NCHW) to TFLite (NHWC): the layout rewrite at the heart of the conversion.

`rewrite_to_nhwc(graph, opset, input_layout)` rebuilds a static ONNX graph op by op as a TFLite
graph with the rules of `layout_rules` / `ops` over the layout bookkeeping of
`layout_state`: activations NHWC, weights OIHW -> OHWI / 1HWC, axes remapped, flattens absorbed
into the FC weights, ONNX transposes absorbed into the layouts. It returns the inputs' and
outputs' permutations (`NhwcLayouts`). The whole conversion (fusion before and after,
refusals, names, metadata) is `convert.convert_onnx_to_tflite`.

Graph inputs of rank 4 are NHWC with `input_layout="nhwc"` (permutation (0, 2, 3, 1); a rank-3
input read only by 1-D layers is channels last, (0, 2, 1)), or stay NCHW with `"nchw"` (a
TRANSPOSE follows them). A 4-D output the network computes in NHWC stays NHWC with `"nhwc"`
and is NCHW with `"nchw"`; other outputs are in ONNX order.
"""

from __future__ import annotations


from dataclasses import dataclass

from qconvert.errors import QConvertError
from qconvert.ir import Graph

from .layout_rules import RULES
from .layout_state import NHWC, Converter, Layout, Unmappable, identity
from .ops import UNMAPPED

INPUT_LAYOUTS = ("nhwc", "nchw")


@dataclass
class NhwcLayouts:
    """What `rewrite_to_nhwc` decided: {input: permutation} and {output: permutation}, each
    taking the ONNX tensor to the TFLite one (lists)."""

    inputs: dict
    outputs: dict


def format_problems(problems: list) -> str:
    """One line: problems grouped by category (first-seen order), details sorted, repeats
    counted."""
    groups: dict = {}
    for category, detail in problems:
        groups.setdefault(category, {}).setdefault(detail, 0)
        groups[category][detail] += 1
    parts = []
    for category, details in groups.items():
        items = [f"{d} (x{n})" if n > 1 else d for d, n in sorted(details.items())]
        parts.append(f"{category}: {', '.join(items)}")
    return "cannot convert ONNX to TFLite: " + "; ".join(parts)


NLC = (0, 2, 1)


TO_NCHW = (0, 3, 1, 2)


def nhwc_onnx_inputs(graph: Graph) -> list:
    """The 4-D graph inputs that already are NHWC: every reader is a Transpose to NCHW (perm
    (0, 3, 1, 2)), as tf2onnx writes a TensorFlow model's image input. The TFLite input keeps
    them as they are (no TRANSPOSE after it, the ONNX data unpermuted)."""
    out = []
    for name in graph.inputs:
        t = graph.tensors[name]
        readers = [n for n in graph.nodes if name in n.inputs]
        if t.shape is None or len(t.shape) != 4 or not readers:
            continue
        if all(n.op == "Transpose" and not n.opaque and n.inputs[0] == name
               and tuple(int(v) for v in _perm(n, graph)) == TO_NCHW for n in readers):
            out.append(name)
    return out


def _perm(node, graph: Graph) -> tuple:
    """A Transpose's permutation (its attribute, or its constant `perm` input), () if unknown."""
    perm = node.attrs.get("perm")
    if perm is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        perm = graph.constant(node.inputs[1])
    return () if perm is None else tuple(int(v) for v in list(perm))


def _input_perm(cv: Converter, name: str, rank: int) -> tuple:
    """NHWC for 4-D inputs (an input already NHWC, `nhwc_onnx_inputs`, stays as it is);
    channels last (N, L, C) for a 3-D input read only by 1-D layers (the Unsqueezes of
    `lift_1d`), as TF's Conv1D takes it; else the ONNX order."""
    if cv.input_layout != "nhwc":
        return identity(rank)
    if rank == 4:
        return identity(4) if name in cv.nhwc_inputs else NHWC
    readers = [n for n in cv.src.nodes if name in n.inputs]
    if rank == 3 and readers and all(n.op == "Unsqueeze" and n.name.endswith("/h1_in")
                                     for n in readers):
        return NLC
    return identity(rank)


def rewrite_to_nhwc(graph: Graph, opset, input_layout: str = "nhwc") -> NhwcLayouts:
    """Rewrite the static ONNX (NCHW) `graph` in place as a TFLite (NHWC) graph (see the module
    docstring); `opset` is the ONNX opset, `input_layout` "nhwc" or "nchw". Raises
    `QConvertError` listing every node no rule could convert, the graph left as it was.
    """
    cv = Converter(graph, opset, input_layout)
    cv.nhwc_inputs = set(nhwc_onnx_inputs(graph)) if input_layout == "nhwc" else set()
    problems = []
    inputs = {}
    for name in graph.inputs:
        try:
            v = cv.define(name, Layout(_input_perm(cv, name, len(cv.shape(name)))))
        except Unmappable as exc:
            problems.append((exc.category, f"input {exc.detail}"))
            continue
        cv.dst.inputs.append(v.name)
        inputs[name] = list(v.layout.perm)
    for node in graph.nodes:
        rule = None if node.opaque else RULES.get(node.op)
        try:
            if rule is None:
                raise Unmappable(node.op, UNMAPPED)
            rule(cv, node)
        except Unmappable as exc:
            problems.append((exc.category, exc.detail))
            for out in node.outputs:  # carry on, to find every problem
                if out is not None and out not in cv.values and graph.tensors[out].static_shape:
                    cv.define(out, Layout(identity(len(graph.tensors[out].shape))))
    outputs = {}
    for name in graph.outputs:
        try:
            v = cv.value(name)
            perm = v.layout.perm if cv.input_layout == "nhwc" and v.layout.perm == NHWC \
                and v.layout.flat is None else identity(len(v.shape))
            cv.graph_output(name, perm)
            outputs[name] = list(perm)
        except Unmappable as exc:
            problems.append((exc.category, exc.detail))
    if problems:
        raise QConvertError(format_problems(problems))
    dst = cv.dst
    graph.tensors, graph.nodes = dst.tensors, dst.nodes
    graph.inputs, graph.outputs = dst.inputs, dst.outputs
    graph.invalidate_uses()  # every node and tensor is new
    return NhwcLayouts(inputs, outputs)
