"""Model files in and out: the ONNX and TFLite readers and writers (`onnx_reader`, `onnx_wire`,
`onnx_writer`, `tflite_reader`, `tflite_writer`, `tflite_options`, `pads_spelling`), loading and
serializing by format (`model_io`), output files written atomically (`output_files`,
`output_names`) and the layer table of `qconvert inspect` (`layer_table`).
"""
