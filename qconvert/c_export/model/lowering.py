"""export-c's one lowering dispatch: op -> the function that lowers it to a C kernel call.

`LOWERINGS` (int8) and `LOWERINGS16` (16x8 layers) are the only per-op tables; each family of
ops lowers in its own module, all written over the helpers of `steps` (`Step`, `plain_step`,
`activation_of`, ...), which also holds the portable int8 family (conv, fully connected,
pools, lookups, quantize, element-wise, softmax, mean, data movement):

- `depthwise_steps`, `pool_steps`, `add_steps`: qconvert's layer-specialised int8 kernels
  (`fast_steps` says which `--kernels cmsis-nn` keeps);
- `concat_steps`: Concat as row copies the plan may overlap;
- `resize_steps`: ResizeNearest (row/column picks) and ResizeBilinear;
- `transpose_conv_steps`, `matmul_steps`, `rsqrt_steps`: TransposeConv, BatchMatMul, Rsqrt;
- `logic_steps`: comparisons, SelectV2, ReduceMax / ReduceMin, Fill, L2Normalization;
- `steps_lstm`: UNIDIRECTIONAL_SEQUENCE_LSTM (int8 and its 16-bit cell state);
- `steps_s16`: the 16x8 lowerings of their own; the others 16x8 shares with int8
  (`SHARED_WITH_INT8`).

`--kernels cmsis-nn` then replaces the calls CMSIS-NN has kernels for (`cmsis_lowering`).
"""

from __future__ import annotations

from qconvert.errors import QConvertError
from qconvert.int8.prepare import is_int16_node
from qconvert.int8.prepare.logic import COMPARISON_OPS
from qconvert.ir.graph import list_ops

from .add_steps import lower_add_fast, lower_mul_fast
from .concat_steps import lower_concat
from .depthwise_steps import lower_depthwise
from .logic_steps import (lower_comparison, lower_fill, lower_l2_normalization,
                          lower_reduce_extreme, lower_select)
from .matmul_steps import lower_batch_matmul
from .pool_steps import lower_pool_fast
from .resize_steps import lower_resize_bilinear, lower_resize_nearest
from .rsqrt_steps import lower_rsqrt
from .steps import DTYPES, PORTABLE_FILES, PORTABLE_LOWERINGS, KernelOptions
from .steps_lstm import LSTM_LOWERINGS
from .steps_s16 import S16_LOWERINGS, SHARED_WITH_INT8
from .transpose_conv_steps import lower_transpose_conv

LOWERINGS = {
    **PORTABLE_LOWERINGS,
    "TransposeConv": lower_transpose_conv, "BatchMatMul": lower_batch_matmul,
    "ResizeBilinear": lower_resize_bilinear, "Rsqrt": lower_rsqrt,
    # layer-specialised int8 kernels (each falls back to the portable lowering it does not cover)
    "DepthwiseConv2D": lower_depthwise, "AveragePool": lower_pool_fast,
    "MaxPool": lower_pool_fast, "Add": lower_add_fast, "Sub": lower_add_fast,
    "Mul": lower_mul_fast,
    "Concat": lower_concat,  # row copies the plan may overlap
    "ResizeNearest": lower_resize_nearest,  # row/column picks
    # comparisons, SelectV2, reductions, Fill, L2Normalization
    "Fill": lower_fill, "L2Normalization": lower_l2_normalization,
    **{op: lower_comparison for op in COMPARISON_OPS}, "SelectV2": lower_select,
    "ReduceMax": lower_reduce_extreme, "ReduceMin": lower_reduce_extreme,
    **LSTM_LOWERINGS,  # UNIDIRECTIONAL_SEQUENCE_LSTM
}

# 16x8 layers; an LSTM's int16 cell state makes it a "16x8" node (is_int16_node)
LOWERINGS16 = {**{op: LOWERINGS[op] for op in SHARED_WITH_INT8}, **S16_LOWERINGS,
               **LSTM_LOWERINGS}


def unsupported_ops(graph) -> dict:
    """{op label: count} of the nodes export-c cannot emit (and why, folded into the label)."""
    def bad(node):
        if node.opaque or node.op not in lowerings_of(graph, node):
            return True
        names = [n for n in node.inputs + node.outputs if n is not None]
        return any(graph.tensors[n].data is None and graph.tensors[n].dtype not in DTYPES
                   for n in names)
    return graph.op_counts(bad)


def lower_graph(graph, options: KernelOptions) -> list:
    """The steps of `graph` in execution order; refuses, in one line, every op it cannot emit."""
    counts = unsupported_ops(graph)
    if counts:
        raise QConvertError(f"cannot export C: ops it cannot emit: {list_ops(counts)}")
    steps = []
    for index, node in enumerate(graph.nodes):
        step = lowerings_of(graph, node)[node.op](graph, node, index, options)
        step.files |= set(PORTABLE_FILES)
        steps.append(step)
    return steps


def lowerings_of(graph, node) -> dict:
    """The lowering table of `node`: the 16x8 one (`steps_s16`) when it touches int16."""
    return LOWERINGS16 if is_int16_node(graph, node) else LOWERINGS
