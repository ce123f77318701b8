"""TFLite sparse tensors, densified on read.

TFLite's sparsity format (the converter's sparsity option, TF Model Optimization's pruning)
stores a constant as its non-zero values plus `SparsityParameters`: the dense dimensions split
into blocks (`block_map` names the blocked dimensions; their block sizes are the `dense_size` of
the trailing levels), a `traversal_order` of the n + k expanded dimensions (storage order), and
per level a `DimensionMetadata`: DENSE (all `dense_size` positions present) or SPARSE_CSR
(`array_segments[p]..array_segments[p+1]` are the positions under parent position `p`,
`array_indices` their coordinates; int32, uint16 or uint8 vectors). The values buffer holds one
value (or one dense block) per leaf position, in traversal order.

qconvert densifies such a constant when it reads it (TFLite's own DENSIFY semantics, one array
level by level, no Python loop over elements), so every command sees an ordinary constant; a
DENSIFY op of a densified constant becomes that constant. The written model is dense: TFLite
Micro has no sparse kernels. `read_tflite` records the densified names for the one-line notice.
"""

from __future__ import annotations

import numpy as np
import tflite

from ..errors import QConvertError

_INDEX_TYPES = {tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
                tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
                tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector}


def _index_vector(kind: int, table, what: str) -> np.ndarray:
    """A SparseIndexVector union member as an int64 array."""
    cls = _INDEX_TYPES.get(kind)
    if cls is None or table is None:
        raise QConvertError(f"sparse tensor: {what} is missing or of unknown type {kind}")
    vec = cls()
    vec.Init(table.Bytes, table.Pos)
    if vec.ValuesIsNone():
        return np.zeros(0, np.int64)
    return np.asarray(vec.ValuesAsNumpy(), np.int64).reshape(-1)


def read_sparsity(sp) -> dict:
    """The fields of a `tflite.SparsityParameters` as plain arrays and lists."""
    levels = []
    for i in range(sp.DimMetadataLength()):
        dm = sp.DimMetadata(i)
        if dm.Format() == tflite.DimensionType.DENSE:
            levels.append(("dense", int(dm.DenseSize()), None, None))
        elif dm.Format() == tflite.DimensionType.SPARSE_CSR:
            levels.append(("csr", 0,
                           _index_vector(dm.ArraySegmentsType(), dm.ArraySegments(),
                                         f"level {i}'s array_segments"),
                           _index_vector(dm.ArrayIndicesType(), dm.ArrayIndices(),
                                         f"level {i}'s array_indices")))
        else:
            raise QConvertError(f"sparse tensor: level {i} has unknown format {dm.Format()}")
    order = [] if sp.TraversalOrderIsNone() else [int(v) for v in sp.TraversalOrderAsNumpy()]
    blocks = [] if sp.BlockMapIsNone() else [int(v) for v in sp.BlockMapAsNumpy()]
    return {"traversal_order": order, "block_map": blocks, "levels": levels}


def densify(values: np.ndarray, shape: tuple, sparsity: dict) -> np.ndarray:
    """The dense array of `shape` whose non-zero structure `sparsity` describes (see the module
    docstring); `values` are the stored elements (1-D, the tensor's dtype). Malformed metadata
    (orders, sizes or indices that do not fit the shape) is a QConvertError."""
    shape = tuple(int(d) for d in shape)
    n, order, block_map, levels = (len(shape), sparsity["traversal_order"],
                                   sparsity["block_map"], sparsity["levels"])
    k = len(block_map)
    if sorted(order) != list(range(n + k)) or len(levels) != n + k:
        raise QConvertError(f"sparse tensor: traversal order {order} and {len(levels)} levels "
                            f"do not fit a rank-{n} tensor with {k} block dimensions")
    block_size = [levels[order.index(n + i)][1] for i in range(k)]
    expanded = list(shape) + block_size
    for i, d in enumerate(block_map):
        if not 0 <= d < n or block_size[i] <= 0 or shape[d] % block_size[i]:
            raise QConvertError(f"sparse tensor: block {block_size[i]} does not divide "
                                f"dimension {d} of shape {list(shape)}")
        expanded[d] = shape[d] // block_size[i]
    position = np.zeros(1, np.int64)  # one entry per path through the levels so far
    coords = np.zeros((n + k, 1), np.int64)
    for level, (kind, size, segments, indices) in enumerate(levels):
        dim = order[level]
        if kind == "dense":
            if size != expanded[dim]:
                raise QConvertError(f"sparse tensor: level {level} has dense size {size}, "
                                    f"dimension {dim} is {expanded[dim]}")
            here = np.tile(np.arange(size, dtype=np.int64), position.size)
            parent = np.repeat(np.arange(position.size), size)
            position = position[parent] * size + here
        else:
            if segments.size < position.max(initial=-1) + 2 or np.any(np.diff(segments) < 0):
                raise QConvertError(f"sparse tensor: level {level}'s array_segments are "
                                    "too short or decreasing")
            starts, stops = segments[position], segments[position + 1]
            counts = stops - starts
            parent = np.repeat(np.arange(position.size), counts)
            position = np.arange(counts.sum(), dtype=np.int64) + np.repeat(
                starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
            if position.size and (position.max() >= indices.size):
                raise QConvertError(f"sparse tensor: level {level}'s array_indices are too short")
            here = indices[position]
            if here.size and (here.min() < 0 or here.max() >= expanded[dim]):
                raise QConvertError(f"sparse tensor: level {level} indexes past dimension "
                                    f"{dim} ({expanded[dim]})")
        coords = coords[:, parent]
        coords[dim] = here
    if position.size != values.size or (position.size and position.max() >= values.size):
        raise QConvertError(f"sparse tensor: {values.size} stored values for "
                            f"{position.size} positions")
    dense_coords = coords[:n].copy()
    for i, d in enumerate(block_map):
        dense_coords[d] = coords[d] * block_size[i] + coords[n + i]
    out = np.zeros(shape, values.dtype)
    out[tuple(dense_coords)] = values[position]
    return out


def fold_densify(graph) -> list:
    """Replace each DENSIFY of a densified constant by that constant (its output tensor takes
    the data; the node goes). Returns the names of the graph's densified constants."""
    names = [n for n, t in graph.tensors.items() if t.extra.get("densified")]
    kept, folded = [], set()
    for node in graph.nodes:
        src = graph.tensors.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
        if node.op == "DENSIFY" and src is not None and src.data is not None \
                and len(node.outputs) == 1:
            out = graph.tensors[node.outputs[0]]
            out.data = src.data
            out.quant = out.quant or src.quant
            folded.add(node.inputs[0])
            continue
        kept.append(node)
    graph.nodes[:] = kept
    # the sparse constants a folded DENSIFY read are dead now: not written (a read of the
    # written file then writes the same bytes)
    read = {i for node in kept for i in node.inputs} | set(graph.outputs)
    for name in folded - read:
        del graph.tensors[name]
    graph.invalidate_uses()
    return names


def densified_notice(names: list) -> str:
    """The one line that says the model's sparse constants were made dense."""
    shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more"
                                                     if len(names) > 3 else "")
    return (f"{len(names)} sparse constant{'s' if len(names) > 1 else ''} ({shown}) densified "
            "on read; written dense (TFLite Micro has no sparse kernels)")
