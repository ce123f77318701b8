"""`--input-shape NAME:d0,d1,...`: fix the shapes of a model's inputs, then infer the rest.

Exporters leave axes dynamic (a batch "N", an image "H" x "W", PaddlePaddle's -1); TFLite Micro
and the int8 path need them static. As onnxsim's `--overwrite-input-shape` and onnx2tf's `-ois`
do, the user states each input's shape once; then every tensor's shape is inferred by running
the float reference executor once on zeros (the kernels are the op semantics: nothing is written
twice) and the shape arithmetic that became constant is folded (`fold-constants`, `eliminate`).

    shapes = parse_input_shapes(("x:1,3,64,64",))
    changed = apply_input_shapes(model, shapes)

Errors (one line, naming the valid inputs and their declared shapes): a spec that is not
`NAME:d0,d1,...` with positive integers, a name that is not a graph input, a name given twice,
a rank other than the declared one. A declared static dimension may be overwritten (as onnxsim
does); the inference then checks that the weights still fit.
"""

from __future__ import annotations

import numpy as np

from ..errors import QConvertError
from ..ir import Model


def _describe(graph) -> str:
    parts = []
    for name in graph.inputs:
        shape = graph.tensors[name].shape
        dims = "?" if shape is None else ",".join(
            str(d) if isinstance(d, (int, np.integer)) else (str(d) if d else "?") for d in shape)
        parts.append(f"{name}:{dims}")
    return "; ".join(parts)


MAX_DIM = 2**31 - 1


def parse_input_shapes(specs) -> dict:
    """{input name: tuple of ints} from `NAME:d0,d1,...` strings (the name may contain ':')."""
    shapes: dict = {}
    for spec in specs or ():
        name, sep, dims = spec.rpartition(":")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            shape = None
        if not sep or not name or not shape or any(d < 1 for d in shape):
            raise QConvertError(f"--input-shape {spec!r}: expected NAME:d0,d1,... with positive "
                                "integers, e.g. input:1,3,224,224")
        if max(shape) > MAX_DIM:
            raise QConvertError(f"--input-shape {spec!r}: dimension {max(shape)} exceeds "
                                f"{MAX_DIM} (TFLite shapes are int32)")
        if name in shapes:
            raise QConvertError(f"--input-shape: input {name!r} given twice")
        shapes[name] = shape
    return shapes


def apply_input_shapes(model: Model, shapes: dict) -> int:
    """Set the inputs' shapes, infer every other tensor's, fold the constant shape arithmetic.

    Returns the number of tensors whose shape changed. Raises `QConvertError` (naming the valid
    inputs) for an unknown name or a wrong rank, and when the model cannot run with the shapes.
    """
    if not shapes:
        return 0
    from ..executor.float_executor import UnsupportedOpsError, run_float
    from ..passes import PassContext, run_passes

    graph = model.graph
    valid = _describe(graph)  # the model's declared inputs, before the shapes given
    given = "; ".join(f"{n}:{','.join(map(str, s))}" for n, s in shapes.items())
    for name, shape in shapes.items():
        if name not in graph.inputs:
            raise QConvertError(f"--input-shape: {name!r} is not an input of the model; its "
                                f"inputs: {valid}")
        declared = graph.tensors[name].shape
        if declared is not None and len(declared) != len(shape):
            raise QConvertError(f"--input-shape {given}: {name!r} has rank {len(declared)}, the shape "
                                f"given has {len(shape)} dimensions; the model's inputs: {valid}")
    for name, shape in shapes.items():
        _set_shape(graph.tensors[name], shape)
    missing = [n for n in graph.inputs if not graph.tensors[n].static_shape]
    if missing:  # other inputs dynamic: their shapes stay as declared, nothing to infer yet
        return len(shapes)
    opset = model.meta.get("opset") if model.format == "onnx" else None
    _check_input_bytes(graph, given)
    feeds = {n: np.zeros(graph.tensors[n].shape, np.dtype(graph.tensors[n].dtype))
             for n in graph.inputs}
    seen: dict = {}
    try:
        run_float(graph, feeds, observe=lambda n, a: seen.__setitem__(n, a.shape), opset=opset)
    except (ValueError, MemoryError) as exc:  # numpy: array too big, dimension too large
        raise QConvertError(f"--input-shape {given}: the model cannot run with these shapes "
                            f"(declared: {valid}): {exc}") from None
    except UnsupportedOpsError as exc:
        raise QConvertError(f"--input-shape: cannot infer the other shapes: {exc}") from None
    except QConvertError as exc:
        raise QConvertError(f"--input-shape {given}: the model cannot run with these shapes "
                            f"(declared: {valid}): {exc}") from None
    changed = len(shapes)
    for name, shape in seen.items():
        t = graph.tensors.get(name)
        if t is not None and t.data is None and name not in shapes:
            changed += _set_shape(t, tuple(int(d) for d in shape))
    run_passes(model, ["fold-constants", "eliminate"],
               PassContext(model.format, {"opset": opset}))
    return changed


def _check_input_bytes(graph, given: str) -> None:
    """Refuse shapes whose inputs alone exceed the default memory limit, before the run on
    zeros that infers the other shapes allocates them."""
    from ..executor.memory_limit import default_limit, format_size

    need = sum(int(np.prod([int(d) for d in graph.tensors[n].shape], dtype=object))
               * np.dtype(graph.tensors[n].dtype).itemsize for n in graph.inputs)
    if need > default_limit():
        raise QConvertError(f"--input-shape {given}: the inputs alone take {format_size(need)}, "
                            f"more than the memory limit of {format_size(default_limit())}")


def _set_shape(t, shape: tuple) -> bool:
    if t.shape is not None and tuple(t.shape) == shape and t.static_shape:
        return False
    t.shape = tuple(shape)
    if "shape_signature" in t.extra:
        t.extra["shape_signature"] = list(shape)
    return True


def _is_static(d) -> bool:
    return isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0


def suggest_input_shapes(graph) -> str | None:
    """The `--input-shape` options that would make `graph`'s inputs static beyond the batch,
    e.g. ``--input-shape input:1,1,H,W`` (a dynamic batch as 1, the other dynamic dims by their
    names, or d<i>); None when every input already is. Unknown ranks give ``NAME:d0,d1,...``."""
    options = []
    for name in graph.inputs:
        shape = graph.tensors[name].shape
        if shape is None:
            options.append(f"--input-shape {name}:d0,d1,...")
            continue
        if all(_is_static(d) for d in shape[1:]):
            continue
        dims = ["1" if i == 0 and not _is_static(d) else str(int(d)) if _is_static(d)
                else (d if isinstance(d, str) and d.isidentifier() else f"d{i}")
                for i, d in enumerate(shape)]
        options.append(f"--input-shape {name}:{','.join(dims)}")
    return " ".join(options) or None


def with_shape_hint(exc: QConvertError, graph) -> QConvertError:
    """`exc` (a dynamic-shape refusal) with the `--input-shape` options that fix it appended,
    naming the inputs, unless it already mentions --input-shape."""
    hint = suggest_input_shapes(graph)
    if hint and "--input-shape" not in exc.cause:
        exc.cause = f"{exc.cause}; give the sizes it runs at: {hint}"
        exc.args = (exc.cause,)
    return exc
