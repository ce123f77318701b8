"""The internal representation every reader builds and every writer serializes.

`Model` holds one or more `Graph`s (TFLite subgraphs; ONNX has one), each an ordered,
topologically sorted list of `Node`s over named `Tensor`s.
"""

from .tensor import QuantParams, Tensor
from .node import Node
from .graph import Graph, Model, fresh_name

__all__ = ["QuantParams", "Tensor", "Node", "Graph", "Model", "fresh_name"]
