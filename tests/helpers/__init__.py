"""Helpers shared by the tests, imported as `helpers.NAME` (tests/ is on sys.path through
tests/conftest.py): where the models are and the independent runtimes that judge them
(`oracles`: onnxruntime, LiteRT, TFLite Micro), the C build harness of `export-c`
(`export_c_harness`), the C header oracles (`c_header_oracles`) and the float op checks
(`float_op_checks`)."""
