"""Which nodes have side effects: the table dead-code elimination consults.

A node is *pure* when its only effect is its outputs: removing it when nobody reads them changes
nothing. Ops of the schema table say so themselves (`OpSchema.pure`, true unless the entry says
otherwise). An opaque op is impure unless its kind is listed here as known to be pure:

- TFLite: the builtins below compute their outputs from their inputs only. Everything else is
  impure: ASSIGN_VARIABLE writes a resource variable, CALL_ONCE / CALL / IF / WHILE run other
  subgraphs (which may assign variables), the stateful sequence ops (LSTM / RNN with variable
  tensors), hash tables, random ops and every custom op.
- ONNX: standard-domain ops ("", "ai.onnx", "ai.onnx.ml") have no side effects by the standard,
  control flow included, but a control-flow node is pure only if every node of its bodies is
  (a custom-domain op inside a Loop body keeps the Loop); the ONNX reader walks the bodies once
  and records the answer (`origin["body_pure"]`). Custom-domain ops are impure.

A TFLite READ_VARIABLE or VAR_HANDLE nobody reads is pure (it only reads or names the state);
the ASSIGN_VARIABLE that writes a variable keeps its VAR_HANDLE alive through its input.
"""

from __future__ import annotations

from . import get

PURE_TFLITE_BUILTINS = frozenset("""
    ABS ADD_N ARG_MAX ARG_MIN BATCH_MATMUL BATCH_TO_SPACE_ND BROADCAST_ARGS BROADCAST_TO CEIL
    COS CUMSUM DEPTH_TO_SPACE DILATE DIV ELU EMBEDDING_LOOKUP EQUAL EXP EXPAND_DIMS FILL FLOOR
    FLOOR_DIV FLOOR_MOD GATHER_ND GELU GREATER GREATER_EQUAL L2_NORMALIZATION LEAKY_RELU LESS
    LESS_EQUAL LOCAL_RESPONSE_NORMALIZATION LOG LOGICAL_AND LOGICAL_NOT LOGICAL_OR LOG_SOFTMAX
    MATRIX_DIAG MATRIX_SET_DIAG MIRROR_PAD NEG NOT_EQUAL ONE_HOT PACK POW PRELU RANGE RANK
    READ_VARIABLE REDUCE_ANY REDUCE_ALL REDUCE_MIN REDUCE_PROD RELU_N1_TO_1 RELU_0_TO_1
    RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR REVERSE_SEQUENCE REVERSE_V2 ROUND RSQRT SCATTER_ND
    SEGMENT_SUM SELECT SELECT_V2 SHAPE SIGN SIN SLICE SPACE_TO_BATCH_ND SPACE_TO_DEPTH SPLIT
    SPLIT_V SQRT SQUARE SQUARED_DIFFERENCE TILE TOPK_V2 TRANSPOSE_CONV UNIQUE UNPACK
    UNSORTED_SEGMENT_MAX UNSORTED_SEGMENT_MIN UNSORTED_SEGMENT_PROD UNSORTED_SEGMENT_SUM
    VAR_HANDLE WHERE ZEROS_LIKE
""".split())

ONNX_STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


def is_pure(node) -> bool:
    """True when removing `node` (an IR node) changes nothing once its outputs are unread."""
    if not node.opaque:
        schema = get(node.op)
        return schema is not None and schema.pure
    origin = node.origin
    if "code" in origin:  # TFLite: a builtin known to be pure, never a custom op
        return origin.get("custom_code") is None and node.op in PURE_TFLITE_BUILTINS
    if origin.get("domain", "") not in ONNX_STANDARD_DOMAINS:
        return False
    return origin.get("body_pure", True)  # found once by the ONNX reader
