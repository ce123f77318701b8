"""The lowering table of qconvert's layer-specialised int8 kernels (kernels/qconvert_nn_fast.h):
which ops `model_steps.LOWERINGS` sends to them. Each lowering falls back to `model_steps`' own
for the layers its kernel does not cover."""

from __future__ import annotations

from .depthwise_steps import lower_depthwise

FAST_LOWERINGS = {"DepthwiseConv2D": lower_depthwise}
