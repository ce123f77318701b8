"""`export-c --kernels cmsis-nn`: which CMSIS-NN call (or qconvert kernel) each layer gets.

`lower_cmsis(graph, portable_step, options)` takes the portable lowering of a layer and returns
the CMSIS-NN call when CMSIS-NN has the kernel: the int8 ones (`cmsis_nn`), the s16 ones for
16x8 layers (`cmsis_nn_s16`), with qconvert's fast kernels kept where they were measured faster
(`cmsis_fast.on_dsp_builds`, `fast_steps.keep_on_dsp`). The kernel modules build calls; this
one only chooses, so they do not import each other.
"""

from __future__ import annotations

from qconvert.int8.prepare import is_int16_node

from .cmsis_fast import on_dsp_builds
from .cmsis_nn import S8_CONV, conv_step, elementwise_step, fc_step, pool_step, softmax_step
from .cmsis_nn_s16 import lower_cmsis_s16
from .fast_steps import keep_on_dsp  # qconvert kernels measured faster on cores without MVE
from .steps import Step, fast_conv_step, fast_fc_step, fc_geometry
from .transpose_conv_cmsis import transpose_conv_step


def lower_cmsis(graph, step: Step, options) -> Step:
    """`step` as a CMSIS-NN call when CMSIS-NN has the kernel, else unchanged."""
    node = step.node
    if is_int16_node(graph, node):  # 16x8 layers: CMSIS-NN's s16 kernels (cmsis_nn_s16)
        return lower_cmsis_s16(graph, step, options)
    if node.op == "DepthwiseConv2D":
        return keep_on_dsp(step, conv_step(graph, node, step, S8_CONV))
    if node.op == "Conv2D":  # grouped too: arm_convolve_s8 runs group after group
        made = conv_step(graph, node, step, S8_CONV)
        fast = fast_conv_step(graph, node, step.index)
        return made if fast is None else on_dsp_builds(made, fast)  # cmsis_fast: measured
    if node.op == "FullyConnected":
        made = fc_step(graph, node, step, options)
        rows = fc_geometry(graph, node)[2]  # leftover rows: CMSIS-NN measured faster
        fast = fast_fc_step(graph, node, step.index, "@L_kernel_sums") if rows % 4 == 0 else None
        return made if fast is None else on_dsp_builds(made, fast)
    if node.op in ("AveragePool", "MaxPool"):
        return keep_on_dsp(step, pool_step(graph, node, step))
    if node.op in ("Add", "Mul"):
        return keep_on_dsp(step, elementwise_step(graph, node, step))
    if node.op == "Softmax":
        return softmax_step(graph, node, step)
    if node.op == "TransposeConv":  # kernel == stride: fully connected calls, else portable
        return transpose_conv_step(graph, node, step)
    return step
