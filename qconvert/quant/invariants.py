"""Invariants every written int8 model must hold, checked by the writers before they write.

A model that breaks one of these loads badly or not at all in LiteRT / TFLite Micro, or computes
garbage while the command exits 0: refusing it, naming the layer, is the safe failure.

- every scale is a normal, positive, finite float32 (no 0, subnormal, inf or NaN);
- every requantization multiplier of a conv / depthwise / fully connected layer, computed as
  TFLite Micro computes it at load time, is in [2^30, 2^31) with a shift in [-31, 30], or is 0
  with shift 0 (a multiplier that underflows);
- every int32 bias lies in [-(2^31 - 1), 2^31 - 1] (INT32_MIN means a clipped value).
"""

from __future__ import annotations

import numpy as np

from ..errors import QConvertError
from qconvert.int8.multipliers import effective_multipliers, quantize_multiplier

_TINY = float(np.finfo(np.float32).tiny)
_MAX = float(np.finfo(np.float32).max)
_LAYERS = ("Conv2D", "DepthwiseConv2D", "FullyConnected")


def _bad_scales(scale) -> np.ndarray:
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    return s[~(np.isfinite(s) & (s >= _TINY) & (s <= _MAX))]


def _refuse(layer: str, what: str) -> None:
    raise QConvertError(f"layer {layer!r}: {what}; refusing to write a model that breaks the "
                        "int8 invariants")


def check_scales(graph, layer_of: dict | None = None) -> None:
    """Every quantized tensor's scale is a normal positive float32 (`layer_of` maps a tensor to
    the layer named in the error; default: the node that produces or reads it)."""
    owner = layer_of or _owners(graph)
    for name, t in graph.tensors.items():
        q = t.quant
        if q is None or q.scale is None or np.size(q.scale) == 0:
            continue
        bad = _bad_scales(q.scale)
        if bad.size:
            _refuse(owner.get(name, name), f"tensor {name!r} has scale {bad[0]:.6g}, not a "
                    "normal positive float32")


def _owners(graph) -> dict:
    owner: dict = {}
    for node in graph.nodes:
        label = node.name or node.op
        for name in node.outputs:
            if name:
                owner[name] = label
        for name in node.present_inputs():
            owner.setdefault(name, label)
    return owner


def check_int8_tflite(graph) -> None:
    """All invariants of the module docstring on an int8 TFLite graph (IR)."""
    check_scales(graph)
    for t in graph.tensors.values():  # TFLite's 16x8 kernels take symmetric int16 only
        if t.dtype == "int16" and t.quant is not None and np.any(t.quant.zero_point != 0):
            raise QConvertError(f"int16 tensor {t.name!r} has a non-zero zero point; "
                                "cannot write it")
    for node in graph.nodes:
        if node.op not in _LAYERS or node.opaque:
            continue
        ins = node.inputs
        x, w = graph.tensors[ins[0]], graph.tensors[ins[1]]
        out = graph.tensors[node.outputs[0]]
        if any(t.quant is None or t.dtype not in ("int8", "uint8", "int16") for t in (x, w, out)):
            continue
        label = node.name or node.op
        s_in, s_w, s_out = x.quant.scale, w.quant.scale, out.quant.scale
        per_tensor_fc = node.op == "FullyConnected" and np.size(s_w) == 1
        try:
            real = effective_multipliers(np.reshape(s_in, -1)[:1], np.reshape(s_w, -1),
                                         np.reshape(s_out, -1)[:1], per_tensor_fc)
        except ValueError as exc:
            _refuse(label, f"requantization multiplier not computable ({exc})")
        multiplier, shift = quantize_multiplier(real)
        multiplier = multiplier.astype(np.int64)
        zero = (multiplier == 0) & (shift == 0)
        ok = zero | ((multiplier >= 2**30) & (multiplier < 2**31) & (shift >= -31) & (shift <= 30))
        if not np.all(ok):
            i = int(np.flatnonzero(~ok)[0])
            _refuse(label, f"requantization multiplier {float(np.reshape(real, -1)[i]):.6g} "
                    f"(shift {int(np.reshape(shift, -1)[i])}) is outside what int8 kernels "
                    "take (shift in [-31, 30])")
        if len(ins) > 2 and ins[2]:
            b = graph.tensors[ins[2]]
            if b.data is not None and b.dtype == "int32":
                if np.any(np.asarray(b.data) == np.iinfo(np.int32).min):
                    _refuse(label, f"bias {b.name!r} saturates at INT32_MIN")
                if b.quant is not None and _bad_scales(b.quant.scale).size:
                    _refuse(label, f"bias {b.name!r} has a scale that is not a normal positive "
                            "float32")


_QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


def check_qdq_scales(graph) -> None:
    """Every QuantizeLinear / DequantizeLinear scale of a QDQ ONNX graph is a normal positive
    float32 (the layer named is the Q / DQ node's)."""
    for node in graph.nodes:
        if node.op not in _QDQ_OPS and node.origin.get("op_type") not in _QDQ_OPS:
            continue
        if len(node.inputs) < 2 or not node.inputs[1]:
            continue
        scale = graph.tensors[node.inputs[1]].data
        if scale is None:
            continue
        bad = _bad_scales(scale)
        if bad.size:
            _refuse(node.name or node.op, f"scale {bad[0]:.6g} is not a normal positive float32")
