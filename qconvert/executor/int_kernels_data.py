"""Integer kernels of the ops that move int8 values without requantizing them: CONCATENATION,
PAD / PADV2, MIRROR_PAD, DEPTH_TO_SPACE, FILL, MAXIMUM / MINIMUM, RESHAPE, SQUEEZE, EXPAND_DIMS,
TRANSPOSE, GATHER, STRIDED_SLICE, SLICE, PACK, UNPACK and REVERSE_V2, bit-exact with TFLite
Micro (parameters: `qconvert.int8.prepare.data`).

TFLite Micro's int8 CONCATENATION requires every input to carry the output's quantization (it
never requantizes); shape ops reuse the float kernels' index arithmetic on the raw values. Ops
that would mix the samples of a batch refuse N > 1 (see `int_executor`).
"""

from __future__ import annotations

import numpy as np

from qconvert.int8.prepare.common import fail

from .float_kernels import KERNELS as FLOAT_KERNELS
from .int_kernel_base import batch_guard, kernel


def concat_as(node, inputs, p, ctx, dtype):
    """CONCATENATION of `dtype` inputs that share the output's parameters (no
    requantization)."""
    rank = inputs[0].ndim
    axis = p["axis"] + rank if p["axis"] < 0 else p["axis"]
    batch_guard(node, ctx, axis != 0, "Concat along axis 0")
    return [np.concatenate(inputs, axis=axis).astype(dtype, copy=False)]


@kernel("Concat")
def concat(node, inputs, p, ctx):
    """CONCATENATION of int8 inputs (`concat_as`)."""
    return concat_as(node, inputs, p, ctx, np.int8)


@kernel("Pad", "PadV2")
def pad(node, inputs, p, ctx):
    """PAD / PADV2: pad with the pad value (the output zero point by default)."""
    x = inputs[0]
    paddings = np.asarray(inputs[1], dtype=np.int64)  # the IR's rows [rank, 2]
    if paddings.shape != (x.ndim, 2) or np.any(paddings < 0):
        raise ValueError(f"Pad paddings {paddings.tolist()} for rank {x.ndim}")
    batch_guard(node, ctx, not paddings[0].any(), "Pad of axis 0")
    return [np.pad(x, [tuple(r) for r in paddings.tolist()], constant_values=p["pad_value"])]


@kernel("Maximum", "Minimum")
def maximum_minimum(node, inputs, p, ctx):
    """MAXIMUM / MINIMUM (int8): compares the raw values, as TFLM does (the operands and the
    output share one quantization; the quantizer gives them the same)."""
    fn = np.maximum if node.op == "Maximum" else np.minimum
    return [np.asarray(fn(inputs[0], inputs[1]), dtype=np.int8)]


def per_sample(node, fn, x, ctx):
    """Run a shape op on one sample; its leading 1 becomes the batch (see int_executor)."""
    if ctx.batch == 1:
        return fn(x)
    y1 = fn(x[:1])
    if y1.ndim == 0 or y1.shape[0] != 1:
        fail(node, f"result {tuple(y1.shape)} of one sample does not start with a batch axis of "
                    f"1: cannot run a batch of {ctx.batch} (run the samples one at a time)")
    return x.reshape((x.shape[0],) + y1.shape[1:])


@kernel("Reshape", "Squeeze", "ExpandDims")
def reshape(node, inputs, p, ctx):
    """Same bytes, new shape (the shape input, else the output tensor's)."""
    float_kernel = FLOAT_KERNELS[node.op]
    rest = list(inputs[1:])
    if node.op == "Reshape" and (not rest or rest[0] is None) \
            and p.get("output_shape") is not None:
        rest = [np.asarray(p["output_shape"], dtype=np.int64)]
    return [per_sample(node, lambda a: float_kernel(node, [a] + rest, [None])[0],
                        inputs[0], ctx)]


@kernel("Transpose")
def transpose(node, inputs, p, ctx):
    """TRANSPOSE: the values moved, parameters kept."""
    y = FLOAT_KERNELS["Transpose"](node, inputs, [None])[0]
    perm = inputs[1] if len(inputs) > 1 else None
    first = int(np.asarray(perm).reshape(-1)[0]) if perm is not None else inputs[0].ndim - 1
    batch_guard(node, ctx, first == 0, "Transpose moving axis 0")
    return [np.ascontiguousarray(y)]


@kernel("Gather")
def gather(node, inputs, p, ctx):
    """GATHER: the values taken, parameters kept."""
    axis = int(node.attrs.get("axis", 0) or 0)
    batch_guard(node, ctx, axis % inputs[0].ndim != 0, "Gather along axis 0")
    return [FLOAT_KERNELS["Gather"](node, inputs, [None])[0]]


@kernel("MirrorPad")
def mirror_pad(node, inputs, p, ctx):
    """MIRROR_PAD: the float kernel's mirrored copy of the raw values (one quantization); a
    padded axis 0 refuses a batch of samples."""
    pads = np.asarray(inputs[1], dtype=np.int64)
    batch_guard(node, ctx, not pads[0].any(), "MirrorPad of axis 0")
    return [np.ascontiguousarray(FLOAT_KERNELS["MirrorPad"](node, inputs, [None])[0])]


@kernel("Fill")
def fill(node, inputs, p, ctx):
    """FILL: the raw value repeated (the value and the output share one quantization); its
    scalar value carries no batch, so a batch of samples is refused."""
    batch_guard(node, ctx, False, "Fill of a scalar")
    return [FLOAT_KERNELS["Fill"](node, inputs, [None])[0]]


@kernel("DepthToSpaceNHWC")
def depth_to_space(node, inputs, p, ctx):
    """DEPTH_TO_SPACE: the float kernel's moves on the raw values (one quantization); each
    sample of a batch moves within itself."""
    return [np.ascontiguousarray(FLOAT_KERNELS[node.op](node, inputs, [None])[0])]


@kernel("Pack", "Unpack", "Reverse")
def pack_unpack_reverse(node, inputs, p, ctx):
    """PACK / UNPACK / REVERSE_V2: the float kernel's index arithmetic on the raw values
    (TFLite Micro copies them: inputs and outputs share one quantization); axis 0, the batch,
    is refused for a batch of samples."""
    x = inputs[0]
    if node.op == "Reverse":
        axes = [int(a) % x.ndim for a in np.asarray(inputs[1]).reshape(-1)]
    else:
        axis = int(node.attrs.get("axis", 0) or 0)
        axes = [axis % (x.ndim + (node.op == "Pack"))]
    batch_guard(node, ctx, 0 not in axes, f"{node.op} along axis 0")
    return [np.ascontiguousarray(y) for y in FLOAT_KERNELS[node.op](node, inputs, [None])]


@kernel("SliceBySize")
def slice_by_size(node, inputs, p, ctx):
    """SLICE: the values taken, per sample for a batch (the slice of axis 0 is one
    sample's)."""
    return strided_slice(node, inputs, p, ctx)


@kernel("StridedSlice")
def strided_slice(node, inputs, p, ctx):
    """STRIDED_SLICE: the values taken (TFLite Micro copies them: input and output share one
    quantization), evaluated per sample for a batch (the slice of axis 0 is one sample's)."""
    def one(a):
        return FLOAT_KERNELS[node.op](node, [a] + list(inputs[1:]), [None])[0]

    if ctx.batch == 1:
        return [np.ascontiguousarray(one(inputs[0]))]
    parts = [one(inputs[0][i:i + 1]) for i in range(ctx.batch)]
    if parts[0].ndim == 0 or parts[0].shape[0] != 1:
        fail(node, f"the slice of one sample has shape {tuple(parts[0].shape)}, not a batch "
                    f"axis of 1: cannot run a batch of {ctx.batch} (run the samples one at a time)")
    return [np.concatenate(parts)]
