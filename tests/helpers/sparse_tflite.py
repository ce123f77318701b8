"""Write TFLite models with sparse constants, for tests and the corpus generator.

qconvert writes dense models only; this test helper compresses chosen constants into TFLite's
sparsity format (what the TFLite converter's sparsity option writes: `traversal_order`,
`block_map`, `dim_metadata` of DENSE / SPARSE_CSR levels with int32 / uint16 / uint8 index
vectors) on top of qconvert's writer, so the reader's densify can be checked against LiteRT,
which runs the sparse file itself (its DENSIFY op). The encoding here is written from the schema
(tensorflow/lite/schema/schema.fbs), independently of qconvert's decoder.
"""

from __future__ import annotations

import numpy as np
import tflite

from qconvert.ir import Node
from qconvert.formats.tflite_writer import _Writer

_VECTOR = {np.int32: ("Int32Vector", tflite.SparseIndexVector.Int32Vector),
           np.uint16: ("Uint16Vector", tflite.SparseIndexVector.Uint16Vector),
           np.uint8: ("Uint8Vector", tflite.SparseIndexVector.Uint8Vector)}


def encode(dense: np.ndarray, order: list, block: dict, formats: list, index_dtype=np.int32):
    """Compress `dense`: `block` {dimension: block size}, `order` the traversal order of the
    n + k expanded dimensions, `formats` "dense" / "csr" per level. Returns (values, spec) where
    spec is what `SparseWriter` writes. A level is kept (and its children) only where the
    sub-tensor below it has a non-zero; dense levels keep every position."""
    n, block_map = dense.ndim, sorted(block)
    sizes = [block[d] for d in block_map]
    expanded_shape = [dense.shape[d] // block[d] if d in block else dense.shape[d]
                      for d in range(n)] + sizes
    # expanded array: split each blocked dim d into (d_outer, d_inner), inner moved to the end
    split = []
    for d in range(n):
        split += [dense.shape[d] // block[d], block[d]] if d in block else [dense.shape[d]]
    arr = dense.reshape(split)
    axes, at = {}, 0
    for d in range(n):
        axes[d] = at
        if d in block:
            axes[n + block_map.index(d)] = at + 1
            at += 2
        else:
            at += 1
    expanded = arr.transpose([axes[i] for i in range(n + len(block_map))])
    stored = expanded.transpose(order)  # storage order
    assert list(stored.shape) == [expanded_shape[i] for i in order]
    levels = []
    nonzero = stored != 0
    # level by level over the kept positions (prefixes of the storage index)
    prefixes = [()]
    for level, fmt in enumerate(formats):
        size = stored.shape[level]
        if fmt == "dense":
            levels.append(("dense", size, None, None))
            prefixes = [p + (i,) for p in prefixes for i in range(size)]
        else:
            segments, indices, kept = [0], [], []
            for p in prefixes:
                below = nonzero[p]
                for i in range(size):
                    if below[i].any():
                        indices.append(i)
                        kept.append(p + (i,))
                segments.append(len(indices))
            levels.append(("csr", 0, np.array(segments, index_dtype),
                           np.array(indices, index_dtype)))
            prefixes = kept
    values = np.array([stored[p] for p in prefixes], dense.dtype)
    return values, {"traversal_order": order, "block_map": block_map, "levels": levels,
                    "index_dtype": index_dtype}


class SparseWriter(_Writer):
    """qconvert's TFLite writer, plus `SparsityParameters` on tensors whose
    `extra["test_sparsity"]` holds an `encode` spec (their data is the stored values)."""

    def tensor(self, t) -> int:
        spec = t.extra.get("test_sparsity")
        if spec is None:
            return super().tensor(t)
        b = self.b
        sparsity = self.sparsity(spec)
        name = b.CreateString(t.name)
        shape = self.int_vector(t.extra["dense_shape"])
        quant = self.quantization(t.quant) if t.quant is not None else None
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, {"float32": 0, "int8": 9, "float16": 1}[t.dtype])
        tflite.TensorAddBuffer(b, self.buffer_of[id(t.data)])
        tflite.TensorAddName(b, name)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        tflite.TensorAddSparsity(b, sparsity)
        return tflite.TensorEnd(b)

    def index_vector(self, values, dtype) -> int:
        name, _ = _VECTOR[dtype]
        vec = self.b.CreateNumpyVector(np.asarray(values, dtype))
        getattr(tflite, f"{name}Start")(self.b)
        getattr(tflite, f"{name}AddValues")(self.b, vec)
        return getattr(tflite, f"{name}End")(self.b)

    def sparsity(self, spec: dict) -> int:
        b, dtype = self.b, spec["index_dtype"]
        metas = []
        for kind, size, segments, indices in spec["levels"]:
            seg = ind = None
            if kind == "csr":
                seg, ind = self.index_vector(segments, dtype), self.index_vector(indices, dtype)
            tflite.DimensionMetadataStart(b)
            tflite.DimensionMetadataAddFormat(b, 0 if kind == "dense" else 1)
            tflite.DimensionMetadataAddDenseSize(b, size)
            if kind == "csr":
                code = _VECTOR[dtype][1]
                tflite.DimensionMetadataAddArraySegmentsType(b, code)
                tflite.DimensionMetadataAddArraySegments(b, seg)
                tflite.DimensionMetadataAddArrayIndicesType(b, code)
                tflite.DimensionMetadataAddArrayIndices(b, ind)
            metas.append(tflite.DimensionMetadataEnd(b))
        order = self.int_vector(spec["traversal_order"])
        block_map = self.int_vector(spec["block_map"]) if spec["block_map"] else None
        dims = self.offsets_vector(tflite.SparsityParametersStartDimMetadataVector, metas)
        tflite.SparsityParametersStart(b)
        tflite.SparsityParametersAddTraversalOrder(b, order)
        if block_map is not None:
            tflite.SparsityParametersAddBlockMap(b, block_map)
        tflite.SparsityParametersAddDimMetadata(b, dims)
        return tflite.SparsityParametersEnd(b)


def make_sparse(graph, name: str, order, block, formats, index_dtype=np.int32) -> None:
    """Make constant `name` of `graph` sparse (its data becomes the stored values)."""
    t = graph.tensors[name]
    values, spec = encode(np.asarray(t.data), order, block, formats, index_dtype)
    t.extra["dense_shape"] = list(t.shape)
    t.extra["test_sparsity"] = spec
    t.data = values


def densify_node(name: str, src: str, out: str) -> Node:
    """TFLite's DENSIFY (builtin 124) as an opaque IR node: sparse constant `src` -> `out`."""
    return Node("DENSIFY", [src], [out], {}, name, True,
                {"version": 1, "code": 124, "custom_code": None, "options_type": "DensifyOptions",
                 "options": {}, "custom_options": None, "custom_options_format": 0})


def write_sparse(model) -> bytes:
    """The TFLite bytes of `model`, sparse tensors in TFLite's sparsity format."""
    return SparseWriter(model).write()
