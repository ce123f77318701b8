"""ONNX (NCHW) to TFLite (NHWC): the `layout-nhwc` pass and `onnx_to_tflite`, which runs it.

    tflite_model, input_perms = onnx_to_tflite(onnx_model, input_layout="nhwc")
    x_tflite = np.transpose(x_onnx, input_perms["input"])   # data given in the ONNX layout

`onnx_to_tflite` never changes `onnx_model`. Its steps:
1. refuse a quantized (QDQ / QLinear) model: only float models convert;
2. the ONNX fusion pipeline (`FUSE_PIPELINE`: constants folded, BatchNorm into the convs, the
   BatchNorms left as Mul + Add);
3. everything that cannot be converted is collected: dynamic input dimensions other than the
   batch, ops with no mapping, weights or parameters computed at run time, layers TFLite has
   no form for (`onnx_to_tflite_ops.conversion_problems`) and, while converting, what a rule
   cannot express; any of it ends the conversion with one `QConvertError` listing all of it,
   nothing returned;
4. `static-batch`: a dynamic batch becomes 1 and every shape static (TFLite Micro allocates from
   the file's shapes), then the shape arithmetic folds away; 1-D convs and pools become 2-D
   ones with H = 1 and a ShuffleNet channel shuffle one Gather (`onnx_to_tflite_spatial`:
   `lift_1d`, `fuse_channel_shuffle`);
5. `layout-nhwc` (this module's pass): the graph is rebuilt op by op with the rules of
   `layout_rules` / `onnx_to_tflite_ops` over the layout bookkeeping of `layout_state`:
   activations NHWC, weights OIHW -> OHWI / 1HWC, axes remapped, flattens absorbed into the FC
   weights, ONNX transposes absorbed into the layouts;
6. RESHAPE pairs merged (`merge_reshapes`), the fusion pipeline again for TFLite (Relu /
   Relu6 / Clip become fused activations, Mul / Add folded into the layers), `tflite-legalize`
   (Clip left over), `cancel-transposes`, `eliminate`.

Graph inputs of rank 4 are NHWC with `input_layout="nhwc"` (their permutation (0, 2, 3, 1) is
returned; a rank-3 input read only by 1-D layers is channels last, (0, 2, 1)), or stay NCHW with `"nchw"` (a TRANSPOSE follows them). Graph outputs keep their ONNX
names; a 4-D output the network computes in NHWC stays NHWC with `"nhwc"` and is NCHW with
`"nchw"`; other outputs are in ONNX order. `tflite_model.meta["conversion"]` records the inputs'
and outputs' permutations and the TRANSPOSE nodes left (`transposes`).
"""

from __future__ import annotations


import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Graph, Model
from qconvert.ir.graph import GraphError

from .. import PassContext, register_pass, run_passes
from .layout_rules import RULES
from .layout_state import NHWC, Converter, Layout, Unmappable, identity
from ..fusion.channel_shuffle import fuse_channel_shuffle
from ..fusion.hard_swish import fuse_hard_swish
from ..fusion.rsqrt import fuse_rsqrt
from .merge_reshapes import merge_reshapes
from .onnx_to_tflite_ops import UNMAPPED, conversion_problems
from .onnx_to_tflite_spatial import lift_1d

INPUT_LAYOUTS = ("nhwc", "nchw")
QUANTIZED_ONNX_OPS = frozenset({"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger",
                                "DynamicQuantizeLinear", "QLinearAdd", "QLinearMul"})


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


def _input_perm(cv: Converter, name: str, rank: int) -> tuple:
    """NHWC for 4-D inputs; channels last (N, L, C) for a 3-D input read only by 1-D layers
    (the Unsqueezes of `lift_1d`), as TF's Conv1D takes it; else the ONNX order."""
    if cv.input_layout != "nhwc":
        return identity(rank)
    if rank == 4:
        return NHWC
    readers = cv.src.readers(name)
    if rank == 3 and readers and all(n.op == "Unsqueeze" and n.name.endswith("/h1_in")
                                     for n in readers):
        return NLC
    return identity(rank)


@register_pass("layout-nhwc")
def layout_nhwc(graph: Graph, context) -> int:
    """Rewrite a static ONNX (NCHW) graph as a TFLite (NHWC) graph; returns its node count.

    `context.options`: `opset` (the ONNX opset), `input_layout` ("nhwc" or "nchw"). Sets
    `context.options["conversion"]` (see the module docstring). Raises `QConvertError` listing
    every node no rule could convert.
    """
    options = context.options
    cv = Converter(graph, options.get("opset"), options.get("input_layout", "nhwc"))
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
    options["conversion"] = {"input_layout": cv.input_layout, "inputs": inputs,
                             "outputs": outputs}
    return len(graph.nodes)


def _refuse_quantized(graph: Graph) -> None:
    quantized = sorted({n.op for n in graph.nodes
                        if (not n.opaque and n.op in ("Quantize", "Dequantize"))
                        or (n.opaque and n.op in QUANTIZED_ONNX_OPS)})
    if quantized or any(t.data is None and t.dtype in ("int8", "uint8")
                        for t in graph.tensors.values()):
        ops = f" ({', '.join(quantized)})" if quantized else ""
        raise QConvertError(f"the ONNX model is quantized{ops}; only float models convert to "
                            "TFLite: convert the float model and quantize it with qconvert "
                            "quantize model.onnx --calibration DATA -o model_int8.tflite")


def _input_problems(graph: Graph) -> list:
    problems = []
    for name in graph.inputs:
        shape = graph.tensors[name].shape
        if shape is None:
            problems.append(("dynamic shapes", f"input {name!r} (unknown rank)"))
            continue
        dynamic = [i for i, d in enumerate(shape) if i > 0 and not isinstance(d, int)]
        if dynamic:
            dims = "x".join(str(d) if isinstance(d, int) else str(d or "?") for d in shape)
            # an unnamed dim is undeclared or declared 0 / -1 (the reader takes those as dynamic)
            what = "" if all(shape[i] for i in dynamic) else " dynamic or zero-size"
            problems.append(("dynamic shapes", f"input {name!r} {dims} (dimension "
                             f"{', '.join(map(str, dynamic))}{what}; only the batch may be "
                             "dynamic)"))
    return problems


def _clone(graph: Graph) -> Graph:
    """A copy to rewrite: new tensor and node objects, constant arrays shared (immutable)."""
    return graph.copy()


def _check(problems: list) -> None:
    if problems:
        raise QConvertError(format_problems(problems))


def onnx_to_tflite(model: Model, input_layout: str = "nhwc") -> tuple:
    """Convert a float ONNX model to a float TFLite model (see the module docstring).

    Returns `(tflite_model, {input name: permutation})`: `np.transpose(x, perm)` turns an input
    array in the ONNX layout (batch first, e.g. N, C, H, W) into the TFLite model's layout.
    Raises `QConvertError` (one line listing every problem) for what cannot be converted.
    """
    from ..pipeline import FUSE_PIPELINE, run_pipeline

    if model.format != "onnx":
        raise QConvertError(f"ONNX to TFLite conversion needs an ONNX model, not {model.format}")
    if input_layout not in INPUT_LAYOUTS:
        raise QConvertError(f"input layout {input_layout!r}: choose nhwc or nchw")
    if len(model.graphs) != 1:
        raise QConvertError("cannot convert an ONNX model with several graphs")
    _refuse_quantized(model.graph)
    work = Model("onnx", [_clone(model.graph)], dict(model.meta))
    graph = work.graph
    opset = model.meta.get("opset")
    onnx_context = PassContext("onnx", {"opset": opset})
    try:
        problems = _input_problems(graph)
        run_pipeline(work, FUSE_PIPELINE, onnx_context)
        _check(problems + conversion_problems(graph, RULES, static=False))
        run_passes(work, ["static-batch", "fold-constants", "eliminate"], onnx_context)
        lift_1d(graph)
        fuse_channel_shuffle(graph)
        _check(conversion_problems(graph, RULES, static=True))
        fuse_hard_swish(graph)
        fuse_rsqrt(graph)
        context = PassContext("tflite", {"opset": opset, "input_layout": input_layout})
        run_passes(work, ["layout-nhwc"], context)
        merge_reshapes(graph)
        work.format = "tflite"
        run_pipeline(work, FUSE_PIPELINE, PassContext("tflite"))
        run_passes(work, ["tflite-legalize", "cancel-transposes", "eliminate"],
                   PassContext("tflite"))
    except GraphError as exc:
        raise QConvertError(f"internal error while converting to TFLite: {exc}") from exc
    for index, node in enumerate(graph.nodes):
        # TFLite ops have no names: name them as the TFLite reader does (after their first
        # output), so the converted model equals itself written and read back
        node.name = node.outputs[0] if node.outputs and node.outputs[0] else f"op_{index}"
    conversion = context.options["conversion"]
    conversion["transposes"] = [n.outputs[0] for n in graph.nodes if n.op == "Transpose"]
    work.meta = {
        "version": 3,
        "description": f"qconvert: converted from ONNX ({model.meta.get('producer_name') or '?'})",
        "metadata": [],
        "signature_defs": [{"key": "serving_default", "subgraph": 0,
                            "inputs": [(n, n) for n in graph.inputs],
                            "outputs": [(n, n) for n in graph.outputs]}],
        "conversion": conversion,
    }
    if "source_path" in model.meta:
        work.meta["source_path"] = model.meta["source_path"]
    perms = {name: tuple(conversion["inputs"][name]) for name in graph.inputs}
    return work, perms


def data_to_tflite_layout(data: dict | None, perms: dict) -> dict | None:
    """Samples {input name: array (N, ...)} given in the ONNX layout, in the TFLite model's
    input layout (`perms` from `onnx_to_tflite`); None stays None."""
    if data is None:
        return None
    return {name: np.ascontiguousarray(np.transpose(array, perms[name]))
            for name, array in data.items()}


def describe_conversion(model: Model) -> list:
    """Lines for users: each input's layout and shape, then the TRANSPOSEs left (one line)."""
    conversion = model.meta.get("conversion", {})
    graph = model.graph
    lines = []
    for name, perm in conversion.get("inputs", {}).items():
        shape = list(graph.tensors[name].shape)
        layout = {NHWC: "NHWC", NLC: "NLC"}.get(tuple(perm)) or (
            "NCHW" if len(perm) == 4 else "as in ONNX")
        how = f"; transpose ONNX data by {tuple(perm)}" if perm != sorted(perm) else ""
        lines.append(f"input {name!r}: {layout} {shape}{how}")
    for name, perm in conversion.get("outputs", {}).items():
        if tuple(perm) == NHWC:
            lines.append(f"output {name!r}: NHWC {list(graph.tensors[name].shape)}")
    left = []
    for name in conversion.get("transposes", []):
        node = graph.producer(name)
        src = node.inputs[0] if node is not None else "?"
        where = f"after input {src!r}" if src in graph.inputs else f"after {src!r}"
        left.append(f"{name} ({where})")
    lines.append(f"transposes left: {len(left)}" + (f" ({'; '.join(left)})" if left else ""))
    return lines
