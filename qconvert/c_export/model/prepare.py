"""Shape preparation before export-c renders: the step between the int8 model and `render`.

`prepare_model(model)` fixes a single-graph model's dynamic batch to 1 and folds the shape
arithmetic it feeds (`c_export.source.static_int8_shapes`, the passes fold-constants and
eliminate: TFLite Micro allocates one sample) and splits a streaming model's state out of its
graph (`resource_state.split_state`). The renderer (`render.render_model`) takes what this
returns and only lowers, plans and writes: no pass runs while rendering.
"""

from __future__ import annotations

from dataclasses import dataclass

from qconvert.executor.streaming import is_streaming_model
from qconvert.ir import Graph

from ..source import static_int8_shapes
from .resource_state import StateProgram, split_state


@dataclass
class PreparedModel:
    """An int8 model ready to render: its main graph (static shapes) and, for a streaming model,
    its state (`resource_state.StateProgram`; None otherwise)."""

    graph: Graph
    state: StateProgram | None = None


def prepare_model(model) -> PreparedModel:
    """`model` (an int8 TFLite Model, changed in place) prepared for `render.render_model`."""
    if len(model.graphs) == 1:
        static_int8_shapes(model)
    if is_streaming_model(model):
        return PreparedModel(*split_state(model))
    return PreparedModel(model.graph)
