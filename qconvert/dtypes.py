"""Element types: the IR names (numpy names, plus RAW_DTYPES) and their codes in each format."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

# TFLite TensorType code -> IR dtype name.
TFLITE_TO_IR = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
    7: "int16", 8: "complex64", 9: "int8", 10: "float64", 11: "complex128", 12: "uint64",
    13: "resource", 14: "variant", 15: "uint32", 16: "uint16", 17: "int4", 18: "bfloat16",
}
IR_TO_TFLITE = {v: k for k, v in TFLITE_TO_IR.items()}

# ONNX TensorProto.DataType -> IR dtype name.
ONNX_TO_IR = {
    TensorProto.FLOAT: "float32", TensorProto.UINT8: "uint8", TensorProto.INT8: "int8",
    TensorProto.UINT16: "uint16", TensorProto.INT16: "int16", TensorProto.INT32: "int32",
    TensorProto.INT64: "int64", TensorProto.STRING: "string", TensorProto.BOOL: "bool",
    TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "float64", TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64", TensorProto.COMPLEX64: "complex64",
    TensorProto.COMPLEX128: "complex128", TensorProto.BFLOAT16: "bfloat16",
    TensorProto.FLOAT8E4M3FN: "float8e4m3fn", TensorProto.FLOAT8E5M2: "float8e5m2",
    TensorProto.UINT4: "uint4", TensorProto.INT4: "int4",
}
IR_TO_ONNX = {v: k for k, v in ONNX_TO_IR.items()}


def is_numpy(dtype: str) -> bool:
    """True when numpy holds this IR dtype natively."""
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True
