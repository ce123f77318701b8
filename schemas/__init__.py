"""The op-schema registry: one declarative entry per IR op.

Readers look ops up by their format's name (`by_tflite_code`, `by_onnx_op`), writers by IR name
(`get`), and later the quantizer, executor and docs read the same entries. An op absent from the
table is carried through as an opaque node. Supporting a new op is one entry in `ops.py` plus
its kernels (docs/dev/adding-an-op.md); what must stay beside code (kernels, rewrite rules, C
emitters) is kept in tables keyed by these names, cross-checked by tests/test_op_tables.py.
"""

from .registry import (  # noqa: F401  (the package's API)
    Input, OnnxSpec, OpSchema, TfliteSpec, all_schemas, by_onnx_op, by_tflite_code, get, register)
from . import ops as _ops  # noqa: F401  (fills the registry)
from . import lstm as _lstm  # noqa: F401  (the LSTM ops)
