"""Pad's `pads` in the IR spelling: an integer tensor [k, 2], one (begin, end) row per padded
axis (the axes of the node's `axes` input, else every axis: k = rank).

That is TFLite's PAD / PADV2 `paddings` as they are (and numpy's `pad_width`), so the TFLite
reader and writer carry them unchanged. ONNX spells `pads` flat, [begins..., ends...]: the
ONNX reader turns each Pad's constant `pads` into rows (`pads_to_rows`; in place when only Pad
nodes read it, so the initializer keeps its name and place) and the writer flattens them back
(`flat_pads`), byte for byte. `pads` computed in the graph (exporters compute them for
dynamic shapes) get two IR nodes after them, Reshape [2, k] and Transpose [1, 0], marked
`pads_spelling` in their origin; the ONNX writer leaves such a pair out again
(`spelling_nodes`), and fold-constants folds it once the pads are known. A constant also read
by nodes other than Pads gets a converted copy that the writer writes under the original name
(`pads_aliases`). No kernel or pass tells the two spellings apart.
"""

from __future__ import annotations

import numpy as np

from ..errors import QConvertError
from ..ir import Graph, Node, Tensor

PADS_SLOT = 1  # Pad's `pads` input


def _is_pads_read(node, index: int) -> bool:
    return not node.opaque and node.op == "Pad" and index == PADS_SLOT


def pads_to_rows(graph: Graph, keep_flat=()) -> None:
    """Give every ONNX Pad of `graph` its `pads` as rows [k, 2] (see the module docstring).

    A constant read by Pad nodes only (and not a graph output) is converted where it is; one
    also read otherwise gets a converted copy for the Pads; computed `pads` get the marked
    Reshape / Transpose pair. `keep_flat`: names that must keep their flat values (initializers
    that are graph inputs too)."""
    shared = dict.fromkeys(keep_flat, True)
    for node in graph.nodes:
        for i, name in enumerate(node.inputs):
            if name is not None and not _is_pads_read(node, i):
                shared[name] = True
    shared.update((name, True) for name in graph.outputs)
    done: dict = {}
    nodes = []
    for node in graph.nodes:
        nodes.append(node)
        if node.opaque or node.op != "Pad" or len(node.inputs) <= PADS_SLOT:
            continue
        name = node.inputs[PADS_SLOT]
        if name is None:
            continue
        if name in done:
            node.inputs[PADS_SLOT] = done[name]
            continue
        t = graph.tensors[name]
        if t.data is None:
            pair = _rows_nodes(graph, node, t)
            nodes[-1:-1] = pair
            done[name] = node.inputs[PADS_SLOT] = pair[-1].outputs[0]
            continue
        flat = np.asarray(t.data).reshape(-1)
        if flat.size % 2:
            raise QConvertError(f"Pad {node.name!r}: pads {name!r} hold {flat.size} values "
                                "(begins and ends: an even number)")
        rows = np.ascontiguousarray(flat.reshape(2, -1).T)
        rows.flags.writeable = False
        if name in shared:
            target = graph.fresh_name(f"{node.name}@pads")
            graph.add_tensor(Tensor(target, rows.shape, t.dtype, rows,
                                    extra={"onnx_flat_pads_of": name}))
            node.inputs[PADS_SLOT] = target
        else:
            graph.tensors[name] = Tensor(name, rows.shape, t.dtype, rows, t.quant, dict(t.extra))
            target = name
        done[name] = target
    graph.nodes = nodes


def _rows_nodes(graph: Graph, pad, t: Tensor) -> list:
    """Reshape [2, -1] then Transpose [1, 0]: computed flat pads `t` as rows."""
    k = t.shape[0] // 2 if t.shape and len(t.shape) == 1 and isinstance(t.shape[0], int) else None
    names = {}
    for key, values in (("shape", [2, -1]), ("perm", [1, 0])):
        data = np.array(values, np.int64)
        data.flags.writeable = False
        names[key] = graph.fresh_name(f"{pad.name}@pads_{key}")
        graph.add_tensor(Tensor(names[key], data.shape, "int64", data,
                                extra={"from_attribute": True}))
    halves = graph.fresh_name(f"{pad.name}@pads_halves")
    graph.add_tensor(Tensor(halves, None if k is None else (2, k), t.dtype))
    rows = graph.fresh_name(f"{pad.name}@pads")
    graph.add_tensor(Tensor(rows, None if k is None else (k, 2), t.dtype))
    mark = {"pads_spelling": True}
    return [Node("Reshape", [t.name, names["shape"]], [halves], {"allowzero": 0},
                 f"{pad.name}@pads_reshape", origin=dict(mark)),
            Node("Transpose", [halves, names["perm"]], [rows], {}, f"{pad.name}@pads_transpose",
                 origin=dict(mark))]


def spelling_nodes(graph: Graph) -> tuple:
    """(ids of the nodes the ONNX writer leaves out, {tensor: name written in its place}):
    each intact Reshape / Transpose pair `pads_to_rows` added, read by Pads only, and each
    converted copy of a constant whose flat values are still the original's."""
    skip, rename = set(), {}
    for node in graph.nodes:
        if node.opaque or node.op != "Transpose" or not node.origin.get("pads_spelling"):
            continue
        first = graph.producer(node.inputs[0])
        readers = graph.readers(node.outputs[0])
        if (first is None or not first.origin.get("pads_spelling") or first.op != "Reshape"
                or len(graph.readers(first.outputs[0])) != 1 or not readers
                or node.outputs[0] in graph.outputs
                or any(_reads_as_pads(r, node.outputs[0]) is False for r in readers)):
            continue
        skip.update((id(first), id(node)))
        rename[node.outputs[0]] = first.inputs[0]
    for t in graph.tensors.values():
        source = graph.tensors.get(t.extra.get("onnx_flat_pads_of"))
        if (t.data is not None and source is not None and source.data is not None
                and source.dtype == t.dtype
                and np.array_equal(np.asarray(t.data).T.reshape(-1), source.data.reshape(-1))):
            rename[t.name] = source.name
    return skip, rename


def check_written_pads(node, graph: Graph, rename: dict) -> None:
    """Refuse to write Pad `node` to ONNX when its pads are rows computed in the graph that no
    intact Reshape / Transpose pair of `pads_to_rows` came with (ONNX would read them flat)."""
    name = node.inputs[PADS_SLOT] if len(node.inputs) > PADS_SLOT else None
    if name is not None and name not in rename and graph.tensors[name].data is None:
        raise QConvertError(f"Pad {node.name!r}: its pads {name!r} are rows computed in the "
                            "graph, which ONNX's flat pads cannot spell")


def model_nodes(graph: Graph) -> int:
    """The nodes of `graph` the model has: not counting the pairs `pads_to_rows` added."""
    return sum(1 for n in graph.nodes if not n.origin.get("pads_spelling"))


def _reads_as_pads(node, name: str) -> bool:
    return all(_is_pads_read(node, i) for i, n in enumerate(node.inputs) if n == name)


def pads_constants(graph: Graph) -> set:
    """Names of the constants the ONNX writer flattens: those read as Pad's `pads`."""
    return {node.inputs[PADS_SLOT] for node in graph.nodes
            if not node.opaque and node.op == "Pad" and len(node.inputs) > PADS_SLOT
            and node.inputs[PADS_SLOT] is not None
            and graph.tensors[node.inputs[PADS_SLOT]].data is not None}


def flat_pads(t: Tensor) -> Tensor:
    """A copy of pads constant `t` ([k, 2] rows) spelled as ONNX does: [begins..., ends...]."""
    rows = np.asarray(t.data)
    if rows.ndim != 2 or rows.shape[1] != 2:
        raise QConvertError(f"Pad pads {t.name!r} have shape {list(rows.shape)}, not [k, 2]")
    flat = np.ascontiguousarray(rows.T).reshape(-1)
    flat.flags.writeable = False
    return Tensor(t.name, flat.shape, t.dtype, flat, t.quant, dict(t.extra))
