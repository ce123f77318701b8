"""TransposeConv as a C kernel call (qconvert_transpose_conv_s8 / _s16; see `steps`).

The numbers are TFLite Micro's Prepare-time values from `qconvert.int8.prepare.layer_params`.
"""

from __future__ import annotations

from qconvert.errors import QConvertError
from qconvert.int8.prepare import layer_params

from .steps import plain_step, c_struct, activation_of, tensor_dims


def lower_transpose_conv(graph, node, index, options):
    """TRANSPOSE_CONV (16x8: the `_s16` kernel, int64 bias, sums and requantization)."""
    act = activation_of(graph, node)
    p = layer_params(graph, node)
    w = graph.tensors[node.inputs[1]].data
    n, h, wd, c = tensor_dims(graph, node.inputs[2])
    _, oh, ow, oc = tensor_dims(graph, node.outputs[0])
    cout, kh, kw, cin = w.shape
    if cin != c or cout != oc:
        raise QConvertError(f"{node.op} {node.name!r}: weights {w.shape} for input channels "
                            f"{c} and output channels {oc}")
    arrays = [("weights", "int8_t", w), ("multiplier", "int32_t", p["output_multiplier"]),
              ("shift", "int32_t", p["output_shift"])]
    bias = "NULL"
    if p["bias"] is not None:
        arrays.append(("bias", "int32_t" if act.bits == 8 else "int64_t", p["bias"]))
        bias = "@L_bias"
    (sh, sw), (top, left) = p["strides"], p["pads"]
    values = [n, h, wd, c, oh, ow, oc, kh, kw, sh, sw, 1, 1, top, left, 1, p["input_offset"],
              p["output_offset"], p["activation_min"], p["activation_max"], "@L_multiplier",
              "@L_shift"]
    decls = [f"static const qconvert_conv_params @L_params = {c_struct(values)};"]
    return plain_step(graph, node, index,
                      f"qconvert_transpose_conv_{act.suffix}($in0, @L_weights, {bias}, $out0, "
                      "&@L_params);", arrays, decls, act.extra_files)
