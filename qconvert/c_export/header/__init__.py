"""`qconvert export-c-header`: an int8 model's weights as one C header.

`layer_spec` is the per-op table of what the header emits, `render` the rendering.
"""
