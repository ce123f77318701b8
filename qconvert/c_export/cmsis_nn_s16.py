"""`export-c --kernels cmsis-nn` for 16x8 layers: CMSIS-NN's s16 kernels where they are
bit-exact with TFLite Micro's reference kernels, else qconvert's portable `_s16` kernel."""

from __future__ import annotations


def lower_cmsis_s16(graph, step, options):
    """`step` (a 16x8 layer) as a CMSIS-NN s16 call, or unchanged."""
    return step
