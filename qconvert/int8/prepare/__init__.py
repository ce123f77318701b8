"""The parameters TFLite Micro computes at Prepare time for each int8 layer, one table for all.

    p = layer_params(graph, node)     # {'output_multiplier': ..., 'output_shift': ..., ...}

`LAYER_PARAMS[op](graph, node) -> dict`, keyed by IR op, holds what TFLite Micro derives once
from the tensors' quantization: multipliers and shifts, offsets, activation clamps, bias,
geometry. The integer executor runs its kernels with these, the C exporter writes them into the
header and the generated source, and the quantization report shows them, so all three use
exactly TFLite Micro's values. Checks TFLite Micro makes at Prepare (softmax output scale,
pooling with equal input/output quantization, FC bias scale...) raise `QConvertError` naming the
node. One module per family: `conv` (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
TRANSPOSE_CONV), `arithmetic`, `activations`, `pooling` (pools, MEAN), `data` (QUANTIZE,
DEQUANTIZE and the ops that move values), `logic` (comparisons, SELECT_V2).
"""

from __future__ import annotations

from qconvert.errors import QConvertError

from . import (activations, arithmetic, conv, data, logic, lstm,  # noqa: F401  (they register)
               pooling)
from .common import LAYER_PARAMS
from .int16 import LAYER_PARAMS16, is_int16_node

__all__ = ["LAYER_PARAMS", "LAYER_PARAMS16", "is_int16_node", "layer_params"]


def layer_params(graph, node) -> dict:
    """The parameters TFLite Micro derives for `node` of an int8 TFLite IR graph at Prepare time.

    Conv2D / DepthwiseConv2D / FullyConnected / TransposeConv: `output_multiplier` and
    `output_shift` (int32 arrays, one per output channel; one entry for a per-tensor
    FullyConnected), the real `effective_scale` they encode, `input_offset` (= -z_in),
    `weights_offset` (FC: -z_w), `output_offset` (= z_out), `activation_min` /
    `activation_max`, `bias` (int64 copy of the int32 bias, or None), `per_channel`, and the
    geometry (`strides`, `dilations`, `pads`). Add / Sub: the three (multiplier, shift) pairs and
    `left_shift` (20); Mul: one pair; Softmax: `input_multiplier`, `input_left_shift`,
    `diff_min`; Sigmoid / Tanh: `input_multiplier`, `input_left_shift`, `input_range_radius`;
    the others: see their family module. A node that reads or writes an int16 activation gets
    its 16x8 parameters (`int16`: `accumulator_bits`, int64 bias...). `graph` may also be a
    Model (its main graph). Raises QConvertError where TFLite Micro would refuse the node, and
    for an op with no integer kernel.
    """
    graph = graph.graph if hasattr(graph, "graphs") else graph
    if is_int16_node(graph, node):
        fn = LAYER_PARAMS16.get(node.op)
        if fn is None or node.opaque:
            raise QConvertError(f"the integer executor does not support op {node.label} with "
                                "int16 activations")
        return fn(graph, node)
    fn = LAYER_PARAMS.get(node.op)
    if fn is None or node.opaque:
        raise QConvertError(f"the integer executor does not support op {node.label}")
    return fn(graph, node)
