"""Prepare of int8 pooling and MEAN, as TFLite Micro computes it (PoolingPrepare,
PrepareMeanOrSumHelper): pools require equal input and output quantization and carry the fused
activation's clamps and the window geometry; MEAN requantizes by s_in / s_out with 1 / count
folded into the multiplier (`multipliers.mean_multiplier`); REDUCE_MAX / REDUCE_MIN pick raw
values and require equal input and output quantization too.
"""

from __future__ import annotations

import numpy as np

from ..multipliers import mean_multiplier
from .common import act_range, fail, per_tensor, prepare, quantize_multipliers


def pool_params_with(graph, node, quantization, clamps) -> dict:
    """PoolingPrepare: input and output must share their quantization (read by
    `quantization(graph, node, name) -> (scale, zero_point)`); the fused activation's clamps
    (`clamps(node, scale, zero_point)`) and the window. int8 and 16x8 pass their own readers."""
    s_in, z_in = quantization(graph, node, node.inputs[0])
    s_out, z_out = quantization(graph, node, node.outputs[0])
    if abs(float(s_in) - float(s_out)) > 1e-6 or z_in != z_out:
        fail(node, "input and output quantization differ (TFLite Micro requires them equal)")
    act_min, act_max = clamps(node, s_out, z_out)
    attrs = node.attrs
    return {"activation_min": act_min, "activation_max": act_max,
            "kernel_shape": [int(v) for v in attrs["kernel_shape"]],
            "strides": [int(v) for v in attrs.get("strides") or [1, 1]],
            "dilations": [1, 1],
            "pads": [int(v) for v in attrs.get("pads") or [0, 0, 0, 0]]}


@prepare("AveragePool", "MaxPool")
def pool_params(graph, node) -> dict:
    """PoolingPrepare (int8): input and output must share their quantization; fused
    activation (`pool_params_with`)."""
    return pool_params_with(graph, node, per_tensor, act_range)


def resolve_axes(node, axes, rank) -> list:
    """`axes` as distinct non-negative axes of a rank-`rank` tensor, in order; refuses any
    out of range."""
    resolved = []
    for a in np.asarray(axes).reshape(-1).tolist():
        a = int(a) + rank if int(a) < 0 else int(a)
        if not 0 <= a < rank:
            fail(node, f"axis {a} out of range for rank {rank}")
        if a not in resolved:
            resolved.append(a)
    return resolved


@prepare("Mean", "ReduceSum")
def mean_params(graph, node) -> dict:
    """PrepareMeanOrSumHelper: QuantizeMultiplier(double(s_in) / double(s_out)); MEAN's Eval
    folds 1 / count into it (`mean_multiplier`), SUM's does not (`mean_multiplier` is then the
    multiplier). `count`, `mean_multiplier` and `mean_shift` are given when the reduced
    dimensions are static."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    m, s = quantize_multipliers(node, float(s_in) / float(s_out))
    axes = graph.tensors[node.inputs[1]].data if len(node.inputs) > 1 and node.inputs[1] else None
    if axes is None:
        fail(node, "axes are not a constant")
    out = {"multiplier": int(m), "shift": int(s), "input_zero_point": z_in,
           "output_zero_point": z_out, "axes": [int(a) for a in np.asarray(axes).reshape(-1)],
           "keep_dims": bool(int(node.attrs.get("keepdims", 1)))}
    shape = graph.tensors[node.inputs[0]].shape
    if shape is not None:
        axes_r = resolve_axes(node, out["axes"], len(shape))
        dims = [shape[a] for a in axes_r]
        if all(isinstance(d, (int, np.integer)) for d in dims):
            count = int(np.prod(dims, dtype=np.int64))
            out["count"] = count
            out["mean_multiplier"], out["mean_shift"] = (int(m), int(s)) \
                if node.op == "ReduceSum" else mean_multiplier(m, s, count)
    return out


@prepare("ReduceMax", "ReduceMin")
def reduce_extreme_params(graph, node) -> dict:
    """REDUCE_MAX / REDUCE_MIN (PrepareMinMaxHelper, EvalMax / EvalMinHelper): Eval picks raw
    values, so the output must carry the input's scale and zero point (TFLite Micro refuses
    others); the axes a constant; `keep_dims`."""
    s_in, z_in = per_tensor(graph, node, node.inputs[0])
    s_out, z_out = per_tensor(graph, node, node.outputs[0])
    if (float(s_in), z_in) != (float(s_out), z_out):
        fail(node, f"output quantized ({float(s_out)}, {z_out}), the input ({float(s_in)}, "
                   f"{z_in}): TFLite Micro requires them equal")
    axes = graph.tensors[node.inputs[1]].data if len(node.inputs) > 1 and node.inputs[1] else None
    if axes is None:
        fail(node, "axes are not a constant")
    return {"axes": [int(a) for a in np.asarray(axes).reshape(-1)],
            "keep_dims": bool(int(node.attrs.get("keepdims", 1)))}
