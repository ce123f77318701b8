"""The lowering table of qconvert's layer-specialised int8 kernels (kernels/qconvert_nn_fast.h):
which ops `model_steps.LOWERINGS` sends to them. Each lowering falls back to `model_steps`' own
for the layers its kernel does not cover. The modules are imported at the first call (they use
`model_steps`' helpers, and `model_steps` reads this table while it loads)."""

from __future__ import annotations

from importlib import import_module

# op: (module, function)
_TABLE = {"DepthwiseConv2D": ("depthwise_steps", "lower_depthwise"),
          "AveragePool": ("pool_steps", "lower_pool_fast"),
          "MaxPool": ("pool_steps", "lower_pool_fast"),
          "Add": ("add_steps", "lower_add_fast")}


def _deferred(module: str, function: str):
    def lower(graph, node, index, options):
        return getattr(import_module(f"qconvert.c_export.{module}"), function)(
            graph, node, index, options)
    lower.__name__ = function
    return lower


FAST_LOWERINGS = {op: _deferred(*where) for op, where in _TABLE.items()}
