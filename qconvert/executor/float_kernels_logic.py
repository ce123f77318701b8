"""Float kernels of the comparisons (Equal, NotEqual, Greater, GreaterEqual, Less, LessEqual:
a bool tensor) and of SelectV2 (ONNX Where, TFLite SELECT_V2), with numpy broadcasting as both
formats have it. Registered into `float_kernels.KERNELS` (same contract: see that module's
docstring); the comparisons take any numeric or bool inputs of one type (shape arithmetic
compares int64 values), so fold-constants evaluates them too.
"""

from __future__ import annotations

import numpy as np

from .float_kernels_base import KERNELS, kernel

COMPARISONS = {"Equal": np.equal, "NotEqual": np.not_equal, "Greater": np.greater,
               "GreaterEqual": np.greater_equal, "Less": np.less, "LessEqual": np.less_equal}


def _compare(fn):
    def run(node, inputs, out_dtypes):
        a, b = inputs[0], inputs[1]
        if a.dtype != b.dtype:
            raise ValueError(f"{node.op} of {a.dtype} and {b.dtype}")
        return [np.asarray(fn(a, b), dtype=np.bool_)]

    run.__doc__ = "a op b elementwise with broadcasting: a bool tensor (NaN compares unequal)."
    return run


for _op, _fn in COMPARISONS.items():
    KERNELS[_op] = _compare(_fn)


@kernel("SelectV2")
def select_v2(node, inputs, out_dtypes):
    """x where `condition` (bool) holds, else y, the three broadcast against each other."""
    condition, x, y = inputs
    if condition.dtype != np.bool_:
        raise ValueError(f"SelectV2 condition is {condition.dtype}, not bool")
    if x.dtype != y.dtype:
        raise ValueError(f"SelectV2 of {x.dtype} and {y.dtype}")
    return [np.where(condition, x, y)]
