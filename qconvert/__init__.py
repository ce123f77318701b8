"""qconvert: fuse, quantize and export neural networks for microcontrollers.

The package reads `.tflite` and ONNX models into one IR (`qconvert.ir`), rewrites it with
graph passes (`qconvert.passes`) driven by the op-schema table (`qconvert.schemas`) and writes
it back out.
"""

__version__ = "0.1.0"
