"""Which data movement steps may write their output over their dying input, and how far.

A data movement lowered to one `qconvert_gather_*` (a table of input indices) or to one
`qconvert_copy_box_*` whose box walks the output in memory order (row-major output strides,
from offset 0) writes output element i after reading its one input element and never goes
back: the memory plan's `("reads", slot, minread)` rule, `minread` being the input element
each output element copies. An upsampling (ResizeNearest x2: four times the bytes) then needs
about its output's bytes instead of input + output (U-Net's last upsampling before its 1x1
head). Not offered with padding fills (written before the copies), several boxes (not in
memory order) or several sources (Concat has its own kernel, `concat_steps`).
"""

from __future__ import annotations

import numpy as np

from .index_maps import SOURCE_BITS, contiguous_strides


def movement_overlap(graph, node, index_map, boxes, fill, act, acts) -> list | None:
    """The `PlanStep.overlap` of a one-output movement step with `index_map` lowered to
    `boxes` (None: a gather), or None when its kernel calls may not overlap their input."""
    flat = np.asarray(index_map, dtype=np.int64).reshape(-1)
    if fill or flat.size == 0 or np.any(flat < 0):
        return None
    sources = np.unique(flat >> SOURCE_BITS)
    if sources.size != 1:
        return None
    name = node.inputs[int(sources[0])]
    if name not in acts or node.inputs.count(name) != 1:
        return None
    if boxes is not None:
        if len(boxes) != 1:
            return None
        box = boxes[0][1]
        shape = list(box["shape"])
        if box["out_base"] != 0 or list(box["out_strides"]) != contiguous_strides(shape) or \
                int(np.prod(shape, dtype=np.int64)) != flat.size:
            return None
    minread = flat & ((1 << SOURCE_BITS) - 1)
    return [("reads", acts.index(name), act.overlap_reads(minread))]
