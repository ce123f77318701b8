"""Nodes of the IR: one operation, its input and output tensor names, and its attributes.

A node whose `op` is in the schema registry has normalized attributes (explicit pads, strides,
dilations, group, fused activation, layout). A node from outside the table is *opaque*: `op` is
the source format's own name and `origin` holds everything needed to write it back unchanged.
Missing optional inputs are `None`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .tensor import copy_value


@dataclass
class Node:
    """One operation. `origin` keeps source-format details with no IR meaning (op version,
    node name, unknown attributes) so a same-format round trip loses nothing."""

    op: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)
    name: str = ""
    opaque: bool = False
    origin: dict = field(default_factory=dict)

    def copy(self) -> "Node":
        """A copy with its own lists and attribute dicts (deep: attributes may be edited)."""
        return Node(self.op, list(self.inputs), list(self.outputs), copy_value(self.attrs),
                    self.name, self.opaque, copy_value(self.origin))

    @property
    def label(self) -> str:
        """Name shown to users: the op, flagged when qconvert does not know its meaning."""
        return f"{self.op} (unknown)" if self.opaque else self.op

    def present_inputs(self) -> list:
        """Input names, without the omitted optional ones."""
        return [i for i in self.inputs if i is not None]
