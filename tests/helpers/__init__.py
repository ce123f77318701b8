"""Helpers shared by the tests, imported as `helpers.NAME` (tests/ is on sys.path through
tests/conftest.py; no test module imports another): where the models are and the independent
runtimes that judge them (`oracles`: onnxruntime, LiteRT, TFLite Micro), the int8 and 16x8
model builders with their TFLite Micro oracles (`int8_models`, `int16_models`), the every-op
int8 model (`every_op_model`), the C build harness of `export-c` (`export_c_harness`) and the
checks built on it (`export_c_checks`, `export_c_images`), the C header oracles
(`c_header_oracles`), the float op checks (`float_op_checks`, `float_tflite_nets`) and the
ONNX -> TFLite conversion checks (`onnx_layout_checks`) and the name checks every written model
is held to (`written_names`)."""
