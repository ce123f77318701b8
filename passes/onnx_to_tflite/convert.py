"""ONNX (NCHW) to TFLite (NHWC): the conversion, a function that returns its result as a value.

    result = convert_onnx_to_tflite(onnx_model, input_layout="nhwc")
    x_tflite = np.transpose(x_onnx, result.input_perms["input"])   # data in the ONNX layout

`convert_onnx_to_tflite` never changes `onnx_model`. It runs these steps in order (the pass
groups it runs are the tuples `ONNX_PREPARATION`, `ONNX_SPATIAL`, `ONNX_ACTIVATIONS` and
`TFLITE_CLEANUP` below):
1. refuse a quantized (QDQ / QLinear) model: only float models convert;
2. the ONNX fusion pipeline (`FUSE_PIPELINE`: constants folded, BatchNorm into the convs, the
   BatchNorms left as Mul + Add);
3. everything that cannot be converted is collected: dynamic input dimensions other than the
   batch, ops with no mapping, weights or parameters computed at run time, layers TFLite has
   no form for (`ops.conversion_problems`) and, while converting, what a rule
   cannot express; any of it ends the conversion with one `QConvertError` listing all of it,
   nothing returned;
4. `static-batch`: a dynamic batch becomes 1 and every shape static (TFLite Micro allocates from
   the file's shapes), then the shape arithmetic folds away; the passes `lift-1d` (1-D convs and
   pools become 2-D ones with H = 1), `fuse-channel-shuffle` (a ShuffleNet channel shuffle
   becomes one Gather), `fuse-hard-swish` and `fuse-rsqrt`;
5. the layout rewrite (`layout_nhwc.rewrite_to_nhwc`): the graph is rebuilt op by op with the
   rules of `layout_rules` / `ops` over the layout bookkeeping of `layout_state`:
   activations NHWC, weights OIHW -> OHWI / 1HWC, axes remapped, flattens absorbed into the FC
   weights, ONNX transposes absorbed into the layouts; it returns the inputs' and outputs'
   permutations;
6. `merge-reshapes`, the fusion pipeline again for TFLite (Relu / Relu6 / Clip become fused
   activations, Mul / Add folded into the layers), `tflite-legalize` (Clip left over),
   `cancel-transposes`, `eliminate`;
7. the nodes are named as the TFLite reader names them and the model gets its TFLite metadata
   (description, a `serving_default` signature over the graph's inputs and outputs).

Graph inputs of rank 4 are NHWC with `input_layout="nhwc"` (their permutation (0, 2, 3, 1) is
returned; an input the ONNX model already has in NHWC, read only by Transposes to NCHW as tf2onnx
writes it, keeps its order: no TRANSPOSE, permutation the identity, `nhwc_inputs`; a rank-3 input read only by 1-D layers is channels last, (0, 2, 1)), or stay NCHW
with `"nchw"` (a TRANSPOSE follows them). Graph outputs keep their ONNX names; a 4-D output the
network computes in NHWC stays NHWC with `"nhwc"` and is NCHW with `"nchw"`; other outputs are
in ONNX order. The returned `TfliteConversion` holds the model, the inputs' and outputs'
permutations and the TRANSPOSE nodes left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qconvert.errors import QConvertError
from qconvert.ir import Graph, Model
from qconvert.ir.graph import GraphError

from ..registry import PassContext, register_pass, run_passes
from .layout_nhwc import (INPUT_LAYOUTS, NLC, format_problems, nhwc_onnx_inputs,
                          rewrite_to_nhwc)
from .layout_rules import RULES
from .layout_state import NHWC
from .channel_shuffle import CHANNEL_SHUFFLE
from .hard_swish import HARD_SWISH
from .rsqrt import DIV_SQRT, RECIPROCAL_SQRT
from .merge_reshapes import MERGE_RESHAPES
from .ops import conversion_problems
from .ops_spatial import lift_1d
from ..matcher import apply_fusion, register_fusion
from ..pipeline import FUSE_PIPELINE, run_pipeline

QUANTIZED_ONNX_OPS = frozenset({"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger",
                                "DynamicQuantizeLinear", "QLinearAdd", "QLinearMul"})


@dataclass
class TfliteConversion:
    """The result of `convert_onnx_to_tflite`: the float TFLite `model`, its `input_layout`
    ("nhwc" or "nchw"), `input_perms` {input: permutation} (`np.transpose(x, perm)` takes ONNX
    data to the TFLite input), `output_perms` {output: permutation} (the TFLite output is the
    ONNX output transposed by it) and `transposes` (the outputs of the TRANSPOSE nodes left)."""

    model: Model
    input_layout: str
    input_perms: dict
    output_perms: dict
    transposes: list
    nhwc_inputs: tuple = ()  # inputs NHWC in the ONNX model already (tf2onnx), kept as they are


# -- the pass-level pieces of the conversion, each a registered pass ----------------------------
@register_pass("lift-1d")
def lift_1d_pass(graph: Graph, context) -> int:
    """ONNX: 1-D convs and pools become 2-D ones with H = 1 (`ops_spatial.lift_1d`)."""
    return lift_1d(graph)


# fuse-channel-shuffle, fuse-hard-swish and merge-reshapes: the fusions' own passes
for _fusion in (CHANNEL_SHUFFLE, HARD_SWISH, MERGE_RESHAPES):
    register_fusion(_fusion)


@register_pass("fuse-rsqrt")
def fuse_rsqrt_pass(graph: Graph, context) -> int:
    """ONNX: Div(a, Sqrt(v)) becomes Mul(a, Rsqrt(v)), Reciprocal(Sqrt(v)) Rsqrt(v)
    (`rsqrt.py`)."""
    return apply_fusion(graph, DIV_SQRT, context) + apply_fusion(graph, RECIPROCAL_SQRT, context)


ONNX_PREPARATION = ("static-batch", "fold-constants", "eliminate")
ONNX_SPATIAL = ("lift-1d", "fuse-channel-shuffle")
ONNX_ACTIVATIONS = ("fuse-hard-swish", "fuse-rsqrt")
TFLITE_CLEANUP = ("tflite-legalize", "cancel-transposes", "eliminate")


def convert_onnx_to_tflite(model: Model, input_layout: str = "nhwc") -> TfliteConversion:
    """Convert a float ONNX model to a float TFLite model (see the module docstring).

    Raises `QConvertError` (one line listing every problem) for what cannot be converted.
    """
    if model.format != "onnx":
        raise QConvertError(f"ONNX to TFLite conversion needs an ONNX model, not {model.format}")
    if input_layout not in INPUT_LAYOUTS:
        raise QConvertError(f"input layout {input_layout!r}: choose nhwc or nchw")
    if len(model.graphs) != 1:
        raise QConvertError("cannot convert an ONNX model with several graphs")
    _refuse_quantized(model.graph)
    work = Model("onnx", [model.graph.copy()], dict(model.meta))  # constants shared (immutable)
    graph = work.graph
    opset = model.meta.get("opset")
    onnx_context = PassContext("onnx", {"opset": opset})
    try:
        problems = _input_problems(graph)
        run_pipeline(work, FUSE_PIPELINE, onnx_context)
        _check(problems + conversion_problems(graph, RULES, static=False))
        run_passes(work, list(ONNX_PREPARATION), onnx_context)
        run_passes(work, list(ONNX_SPATIAL), onnx_context)
        _check(conversion_problems(graph, RULES, static=True))
        run_passes(work, list(ONNX_ACTIVATIONS), onnx_context)
        kept = tuple(nhwc_onnx_inputs(graph)) if input_layout == "nhwc" else ()
        layouts = rewrite_to_nhwc(graph, opset, input_layout)
        graph.verify()
        work.format = "tflite"
        tflite_context = PassContext("tflite")
        run_passes(work, ["merge-reshapes"], tflite_context)
        run_pipeline(work, FUSE_PIPELINE, tflite_context)
        run_passes(work, list(TFLITE_CLEANUP), tflite_context)
    except GraphError as exc:
        raise QConvertError(f"internal error while converting to TFLite: {exc}") from exc
    _name_nodes(graph)
    work.meta = _tflite_meta(graph, model.meta)
    return TfliteConversion(
        work, input_layout, {name: tuple(layouts.inputs[name]) for name in graph.inputs},
        {name: tuple(perm) for name, perm in layouts.outputs.items()},
        [n.outputs[0] for n in graph.nodes if n.op == "Transpose"], kept)


def _name_nodes(graph: Graph) -> None:
    """TFLite ops have no names: name them as the TFLite reader does (after their first
    output), so the converted model equals itself written and read back."""
    for index, node in enumerate(graph.nodes):
        node.name = node.outputs[0] if node.outputs and node.outputs[0] else f"op_{index}"


def _tflite_meta(graph: Graph, onnx_meta: dict) -> dict:
    """The converted model's metadata: a description naming the ONNX producer and one
    `serving_default` signature over the graph's inputs and outputs."""
    meta = {
        "version": 3,
        "description": f"qconvert: converted from ONNX ({onnx_meta.get('producer_name') or '?'})",
        "metadata": [],
        "signature_defs": [{"key": "serving_default", "subgraph": 0,
                            "inputs": [(n, n) for n in graph.inputs],
                            "outputs": [(n, n) for n in graph.outputs]}],
    }
    if "source_path" in onnx_meta:
        meta["source_path"] = onnx_meta["source_path"]
    return meta


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


def _check(problems: list) -> None:
    if problems:
        raise QConvertError(format_problems(problems))


def data_to_tflite_layout(data: dict | None, perms: dict) -> dict | None:
    """Samples {input name: array (N, ...)} given in the ONNX layout, in the TFLite model's
    input layout (`perms`: `TfliteConversion.input_perms`); None stays None."""
    if data is None:
        return None
    return {name: np.ascontiguousarray(np.transpose(array, perms[name]))
            for name, array in data.items()}


def describe_conversion(conversion: TfliteConversion) -> list:
    """Lines for users: each input's layout and shape, then the TRANSPOSEs left (one line)."""
    graph = conversion.model.graph
    lines = []
    for name, perm in conversion.input_perms.items():
        shape = list(graph.tensors[name].shape)
        layout = {NHWC: "NHWC", NLC: "NLC"}.get(tuple(perm)) or (
            "NCHW" if len(perm) == 4 else "as in ONNX")
        how = f"; transpose ONNX data by {tuple(perm)}" if list(perm) != sorted(perm) else ""
        if name in conversion.nhwc_inputs:
            layout, how = "NHWC", " (NHWC in the ONNX model, kept: its Transpose to NCHW absorbed)"
        lines.append(f"input {name!r}: {layout} {shape}{how}")
    for name, perm in conversion.output_perms.items():
        if tuple(perm) == NHWC:
            lines.append(f"output {name!r}: NHWC {list(graph.tensors[name].shape)}")
    left = []
    for name in conversion.transposes:
        node = graph.producer(name)
        src = node.inputs[0] if node is not None else "?"
        where = f"after input {src!r}" if src in graph.inputs else f"after {src!r}"
        left.append(f"{name} ({where})")
    lines.append(f"transposes left: {len(left)}" + (f" ({'; '.join(left)})" if left else ""))
    return lines
