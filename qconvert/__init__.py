"""qconvert: fuse, quantize and export neural networks for microcontrollers.

The package reads `.tflite` and ONNX models into one IR (`qconvert.ir`), rewrites it with
graph passes (`qconvert.passes`) driven by the op-schema table (`qconvert.schemas`) and writes
it back out. Its Python API (`qconvert.api`, docs/python-api.md) is reachable from here:

    import qconvert
    q = qconvert.quantize(qconvert.load("model.onnx"), calibration=x, to="tflite")

The API is imported on first use (PEP 562), so `import qconvert` stays cheap (the command line
imports the package on every run).
"""

__version__ = "0.1.0"

_API = ("load", "Model", "fuse", "convert", "quantize", "export_c", "export_c_header",
        "CExport", "CHeader", "QconvertError", "QConvertError")

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    """`qconvert.load`, `qconvert.quantize`, ...: the API, imported when first used."""
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'qconvert' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
