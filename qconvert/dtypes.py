"""Element types: the IR names (numpy names, plus RAW_DTYPES) and their codes in each format."""

from __future__ import annotations

import numpy as np

# TFLite TensorType code -> IR dtype name.
TFLITE_TO_IR = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
    7: "int16", 8: "complex64", 9: "int8", 10: "float64", 11: "complex128", 12: "uint64",
    13: "resource", 14: "variant", 15: "uint32", 16: "uint16", 17: "int4", 18: "bfloat16",
}
IR_TO_TFLITE = {v: k for k, v in TFLITE_TO_IR.items()}

# ONNX TensorProto.DataType code -> IR dtype name. The codes are fixed by onnx.proto (a test
# checks them against the onnx package), so this module, and every pass or kernel that needs a
# dtype table, does not import onnx.
ONNX_TO_IR = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 19: "float8e5m2",
    21: "uint4", 22: "int4",
}
IR_TO_ONNX = {v: k for k, v in ONNX_TO_IR.items()}


def is_numpy(dtype: str) -> bool:
    """True when numpy holds this IR dtype natively."""
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True
