"""AveragePool / MaxPool (int8) as `qconvert_avgpool_fast_s8` / `qconvert_maxpool_fast_s8`, the
four-channel kernels of kernels/qconvert_nn_pool.c.

    step = lower_pool_fast(graph, node, index, options)   # a steps.Step

The geometry struct is `steps.conv_struct`'s (no multipliers); the output overlaps its
input as the general pool kernel's does (each block of four channels is written after all its
taps are read, so the per-element "reads" bound holds). 16x8 layers keep `steps`' lowering;
with --kernels cmsis-nn, `fast_steps.keep_on_dsp` decides between this step and CMSIS-NN's.
"""

from __future__ import annotations

from qconvert.int8.prepare import layer_params

from .depthwise_steps import FAST_FILES
from .steps import conv_overlap, lower_pool, plain_step, activation_of, conv_struct

POOL_FILES = FAST_FILES | {"qconvert_nn_pool.c"}


def lower_pool_fast(graph, node, index, options):
    """The step of an AveragePool or MaxPool node (see the module docstring)."""
    act = activation_of(graph, node)
    if act.bits != 8:
        return lower_pool(graph, node, index, options)
    p = layer_params(graph, node)
    kernel_hw = tuple(p["kernel_shape"])
    decls = [f"static const qconvert_conv_params @L_params = "
             f"{conv_struct(graph, node, p, kernel_hw, quant=False)};"]
    fn = "qconvert_avgpool_fast_s8" if node.op == "AveragePool" else "qconvert_maxpool_fast_s8"
    return plain_step(graph, node, index, f"{fn}($in0, $out0, &@L_params);", (), decls, POOL_FILES,
                      conv_overlap(graph, node, p, kernel_hw, lambda oc: oc, act))
