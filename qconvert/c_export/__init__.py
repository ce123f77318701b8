"""C export: `qconvert export-c-header` (`header/`) writes an int8 model as one C header for
firmware, `qconvert export-c` (`model/`) the whole model as C.

    text = render_header(model, HeaderOptions(prefix="kws"))     # header/render.py

Modules, one job each: `source` (the int8 TFLite model to export: quantizes a float model, the
one place where ONNX input gets its NHWC layout pass), `fc_layout` (the 1x4 interleaved
fully-connected weight order), `c_names` (layer names made into unique C identifiers),
`header.layer_spec` (the per-op table of what the header emits), `c_text` (C literals and
arrays), `header.render` (the rendering), `command` (both commands' work), `shipped_kernels` (the
portable C kernel in `kernels/`, package data).
"""
