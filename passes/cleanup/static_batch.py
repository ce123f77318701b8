"""static-batch: fix a dynamic batch dimension to 1 and give every tensor its static shape.

TFLite Micro allocates every tensor once, from the shapes written in the flatbuffer, so an int8
model for it must be fully static. Converters leave the batch dynamic (TFLite: `shape_signature`
-1; ONNX: a symbolic "N"), and Keras' flatten then computes its target shape at run time
(Shape -> STRIDED_SLICE -> PACK -> Reshape). This pass

- sets the leading dimension of every graph input that is dynamic to 1; a dynamic dimension
  anywhere else is an error (its size is the user's to choose, not ours), naming every such
  input;
- runs the float reference executor once on zeros and records the shape of every tensor it
  produces, so shapes downstream of the batch become static too (this is the shape inference:
  the kernels are the op semantics, nothing is written twice);
- updates TFLite `shape_signature`s to the static shapes.

`fold-constants` afterwards evaluates the shape arithmetic (Shape of a now static tensor) into
constants. Returns the number of tensors whose shape changed; a static graph is left as it is.
"""

from __future__ import annotations

import numpy as np

from qconvert.errors import QConvertError
from qconvert.executor.float_executor import run_float
from qconvert.executor.memory_limit import check_plan_memory, default_limit
from qconvert.ir import Graph

from ..registry import register_pass


def _dynamic(d) -> bool:
    return not isinstance(d, (int, np.integer))


def _fixed_input_shapes(graph: Graph) -> dict:
    """{input name: static shape} with a dynamic batch set to 1; raises for other dynamic dims."""
    shapes, problems = {}, []
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.shape is None:
            problems.append(f"{name} (unknown rank)")
            continue
        shape = list(t.shape)
        if shape and _dynamic(shape[0]):
            shape[0] = 1
        dynamic = [i for i, d in enumerate(shape) if _dynamic(d)]
        if dynamic:
            problems.append(f"{name} (dimension {', '.join(map(str, dynamic))} of "
                            f"{'x'.join('?' if _dynamic(d) else str(d) for d in t.shape)})")
            continue
        shapes[name] = tuple(int(d) for d in shape)
    if problems:
        raise QConvertError("a static model needs static input shapes; dynamic beyond the batch: "
                            + "; ".join(problems))
    return shapes


def set_shape(t, shape: tuple) -> bool:
    if t.shape is not None and tuple(t.shape) == shape and t.static_shape:
        return False
    t.shape = shape
    if "shape_signature" in t.extra:
        t.extra["shape_signature"] = list(shape)
    return True


@register_pass("static-batch")
def static_batch(graph: Graph, context) -> int:
    """Fix a dynamic batch to 1 and make every tensor's shape static (for TFLite Micro)."""
    if all(t.static_shape for t in graph.tensors.values() if t.data is None):
        return 0
    shapes = _fixed_input_shapes(graph)
    # shapes come from one run on zeros: refuse, from the shapes known, a run beyond the limit
    check_plan_memory(graph, 1, context.options.get("max_memory") or default_limit())
    feeds = {name: np.zeros(shape, np.dtype(graph.tensors[name].dtype))
             for name, shape in shapes.items()}
    seen = {}
    run_float(graph, feeds, observe=lambda name, array: seen.__setitem__(name, array.shape),
              opset=context.options.get("opset"))
    changed = 0
    for name, shape in seen.items():
        t = graph.tensors.get(name)
        if t is not None and t.data is None:
            changed += set_shape(t, tuple(int(d) for d in shape))
    return changed
