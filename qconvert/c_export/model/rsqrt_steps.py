"""Rsqrt (int8) as a C table lookup: a 256-entry table of the integer kernel over the inputs it
is defined for; the C refuses (invoke returns 3) an input below the zero point, where TFLite
Micro stops with an error.
"""

from __future__ import annotations

import numpy as np

from qconvert.executor.int_kernels import INT_KERNELS, IntContext
from qconvert.int8.prepare import layer_params

from .steps import plain_step, tensor_dims


def lower_rsqrt(graph, node, index, options):
    p = layer_params(graph, node)
    zero = int(p["input_zero_point"])
    x = np.arange(zero, 128, dtype=np.int8).reshape(1, -1)
    arrays = []
    tables = {}
    for rounding in ("double", "single"):
        table = np.zeros(256, dtype=np.int8)
        table[zero + 128:] = INT_KERNELS[node.op](node, [x], p, IntContext(rounding=rounding))[0]
        tables[rounding] = table
    if np.array_equal(tables["double"], tables["single"]):
        arrays.append(("table", "int8_t", tables["double"]))
    else:
        arrays += [("table", "int8_t#double", tables["double"]),
                   ("table", "int8_t#single", tables["single"])]
    size = int(np.prod(tensor_dims(graph, node.outputs[0]), dtype=np.int64))
    call = "\n".join([f"if (qconvert_lookup_checked_s8($in0, $out0, {size}, @L_table, "
                      f"{zero}) != 0) {{", "    return 3; /* input below zero: TFLite Micro "
                      "stops with an error */", "}"])
    step = plain_step(graph, node, index, call, arrays, (), {"qconvert_nn_ops.c"})
    return step
