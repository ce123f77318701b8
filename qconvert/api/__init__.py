"""The Python API of qconvert: the commands as functions, models as objects.

    import qconvert
    m = qconvert.load("model.onnx")                  # path, bytes or onnx.ModelProto
    m.run(x)                                         # reference executors, batched
    q = qconvert.quantize(m, calibration=x_calib, to="tflite")
    q.report["output_sqnr_db"]; q.save("model_int8.tflite")
    qconvert.export_c(q, "model_c", name="digits")

Each function takes the command line's options as keywords (same names and defaults) and gives
the same bytes as the command; errors raise `QconvertError` with its one-line message. See
docs/python-api.md.
"""

from qconvert.errors import QConvertError

from .functions import convert, export_c, export_c_header, fuse, quantize
from .model import Model, load
from .results import CExport, CHeader

QconvertError = QConvertError

__all__ = ["load", "Model", "fuse", "convert", "quantize", "export_c", "export_c_header",
           "CExport", "CHeader", "QconvertError", "QConvertError"]
