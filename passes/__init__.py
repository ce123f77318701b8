"""Graph passes, installed as `qconvert.passes`.

A pass is a registered function `(graph, context) -> int` (the number of rewrites it made) whose
docstring states its pattern, conditions and math. `run_passes` runs an ordered list of them and
verifies the graph after each one that rewrote something, naming the pass that broke an
invariant (a pass reporting no rewrite has left the graph as the last verification saw it; at
200,000 nodes a verification costs about what a pass does, and a fixed-point round ends with
every pass of the group reporting none).

Passes find producers and readers through the graph's use index (`Graph.producer`,
`Graph.readers`, `Graph.sole_reader`) and edit through the Graph API (`qconvert.ir.graph`:
`add_constant`, `set_constant`, `replace_uses`, `set_inputs`, `remove_nodes`...), which keeps
it current: every pass is linear in the graph's size. A fusion declares its pattern, its
conditions and its rewrite for the one pattern matcher (`matcher`), which finds the matches in
topological order, says why a near miss did not fire and counts the rewrites.

The passes live in subpackages by family: `cleanup/` (eliminate, fold-constants, static-batch),
`fusion/` (one file per fusion into a layer: conv_batchnorm, conv_mul, conv_add, matmul_add,
batchnorm_to_affine, fuse_activation, equalize), `onnx_to_tflite/` (the ONNX -> TFLite
conversion: the pre-conversion hard_swish, rsqrt, channel_shuffle, layout-nhwc and its rules,
tflite-legalize, cancel-transposes, merge_reshapes). `pipeline` lists the default order.
"""

from .registry import (  # noqa: F401  (the package's API)
    Pass, PassContext, all_passes, check_side_effects_kept, get_pass, register_pass, run_passes, side_effect_nodes)

# the passes register themselves when imported; this order is the order of `all_passes()`
from .cleanup import eliminate as _eliminate  # noqa: F401  (registers the pass)
from .cleanup import fold_constants as _fold_constants  # noqa: F401
from .fusion import conv_batchnorm as _conv_batchnorm  # noqa: F401
from .fusion import conv_mul as _conv_mul  # noqa: F401
from .fusion import conv_add as _conv_add  # noqa: F401
from .fusion import matmul_add as _matmul_add  # noqa: F401
from .fusion import batchnorm_to_affine as _batchnorm_to_affine  # noqa: F401
from .fusion import fuse_activation as _fuse_activation  # noqa: F401
from .cleanup import static_batch as _static_batch  # noqa: F401
from .onnx_to_tflite import cancel_transposes as _cancel_transposes  # noqa: F401
from .onnx_to_tflite import tflite_legalize as _tflite_legalize  # noqa: F401
from .onnx_to_tflite import convert as _onnx_to_tflite  # noqa: F401  (lift-1d, ..., tflite-legalize)
from .fusion import equalize as _equalize  # noqa: F401
