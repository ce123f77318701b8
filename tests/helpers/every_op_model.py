"""The every-op int8 model: one node of every op that has TFLite Micro parameters, two inputs
(one float) and many outputs, built in the IR with `Q8`. `export-c-header` reads its layers'
parameters (tests/c_export/test_export_c_header.py), `export-c` runs it bit for bit against
TFLite Micro (the `models` fixture of tests/c_export/conftest.py) and the memory plan's
overlap rules are checked on it (tests/c_export/test_export_c_concat.py)."""

from __future__ import annotations

import numpy as np

from helpers.int8_models import CONV, Q8
from qconvert.formats.tflite_reader import read_tflite
from qconvert.ir import Model, Node, Tensor


def every_op_model(header_only_ops: bool = False) -> Model:
    """An int8 graph with one node of every op that has TFLite Micro parameters; the ops only
    the header expresses (DIV: whole-model C export has no kernel for it) and the LSTM (its
    state carries from one sample to the next in C: tests/executor/test_lstm.py) with
    `header_only_ops`."""
    n = Q8(31)
    x = n.input("x", (1, 6, 6, 4), 0.05, -3)
    f = n.input("f", (1, 8), None, None, dtype="float32")
    c8 = n.const("c8", n.rng.integers(-128, 128, (4,)).astype(np.int8), 0.03, 7)
    a = n.node("Add", [x, x], "add", (1, 6, 6, 4), 0.1, -3, activation="RELU")
    s = n.node("Sub", [a, x], "sub", (1, 6, 6, 4), 0.1, 0, activation="NONE")
    m = n.node("Mul", [s, c8], "mul", (1, 6, 6, 4), 0.02, 1, activation="RELU6")
    wt, _ = n.weights("w", (5, 3, 3, 4), 0)
    cv = n.node("Conv2D", [m, wt, None], "conv", (1, 4, 4, 5), 0.3, 2,
                **dict(CONV, kernel_shape=[3, 3], pads=[0, 0, 0, 0]))
    dw, s_dw = n.weights("dw", (1, 3, 3, 5), 3)
    d = n.node("DepthwiseConv2D", [cv, dw, n.bias("db", 0.3, s_dw, 5)], "dwconv", (1, 4, 4, 5),
               0.2, 0, **dict(CONV, kernel_shape=[3, 3], pads=[1, 1, 1, 1], depth_multiplier=1))
    ap = n.node("AveragePool", [d], "avg", (1, 2, 2, 5), 0.2, 0, layout="NHWC",
                kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], activation="NONE")
    mp = n.node("MaxPool", [d], "max", (1, 2, 2, 5), 0.2, 0, layout="NHWC",
                kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], activation="RELU")
    cat = n.node("Concat", [ap, mp], "cat", (1, 2, 2, 10), 0.2, 0, axis=-1, activation="NONE")
    pads = n.const("paddings", np.asarray([[0, 0], [1, 0], [0, 1], [0, 0]], np.int32))
    p = n.node("Pad", [cat, pads], "pad", (1, 3, 3, 10), 0.2, 0)
    value = n.const("value", np.asarray([5], np.int8), 0.2, 0)
    p2 = n.node("PadV2", [cat, pads, value], "padv2", (1, 3, 3, 10), 0.2, 0)
    hi = n.node("Maximum", [p, p2], "maximum", (1, 3, 3, 10), 0.2, 0)
    lo = n.node("Minimum", [hi, p2], "minimum", (1, 3, 3, 10), 0.2, 0)
    perm = n.const("perm", np.asarray([0, 2, 1, 3], np.int32))
    t = n.node("Transpose", [lo, perm], "transpose", (1, 3, 3, 10), 0.2, 0)
    axes = n.const("axes", np.asarray([1, 2], np.int32))
    mean = n.node("Mean", [t, axes], "mean", (1, 1, 1, 10), 0.1, 0, keepdims=1)
    shape = n.const("shape", np.asarray([1, 1, 10], np.int32))
    r = n.node("Reshape", [mean, shape], "reshape", (1, 1, 10), 0.1, 0)
    squeeze_dims = n.const("squeeze_dims", np.asarray([1], np.int32))
    sq = n.node("Squeeze", [r, squeeze_dims], "squeeze", (1, 10), 0.1, 0)
    idx = n.const("idx", np.asarray([9, 0, 3, 3, 1, 2, 4, 5], np.int32))
    gth = n.node("Gather", [sq, idx], "gather", (1, 8), 0.1, 0, axis=1, batch_dims=0)
    ss = n.node("StridedSlice", [gth, n.const("begin", np.asarray([0, 1], np.int32)),
                                 n.const("end", np.asarray([1, 8], np.int32)),
                                 n.const("strides", np.asarray([1, 3], np.int32))],
                "strided_slice", (1, 3), 0.1, 0, begin_mask=0, end_mask=0, ellipsis_mask=0,
                new_axis_mask=0, shrink_axis_mask=0, offset=False)
    fw, s_fw = n.weights("fw", (6, 8), 0, per_channel=False)
    fc = n.node("FullyConnected", [gth, fw, n.bias("fb", 0.1, s_fw, 6)], "fc", (1, 6), 0.05,
                -5, activation="NONE", keep_num_dims=False)
    sm = n.node("Softmax", [fc], "softmax", (1, 6), 1.0 / 256, -128, beta=1.0)
    sg = n.node("Sigmoid", [fc], "sigmoid", (1, 6), 1.0 / 256, -128)
    th = n.node("Tanh", [fc], "tanh", (1, 6), 1.0 / 128, 0)
    hs = n.node("HardSwish", [fc], "hardswish", (1, 6), 0.05, -60)
    rl = n.node("Relu", [fc], "relu", (1, 6), 0.04, -110)
    r6 = n.node("Relu6", [fc], "relu6", (1, 6), 0.05, -5)
    rq = n.node("Quantize", [fc], "requantize", (1, 6), 0.021, 17)
    fq = n.node("Quantize", [f], "quantize", (1, 8), 0.05, -3)
    dq = n.node("Dequantize", [fq], "dequantize", (1, 8), None, None, dtype="float32")
    # transformer-era ops (passes/onnx_to_tflite/ops_math.py)
    lr = n.node("LeakyRelu", [fc], "leaky_relu", (1, 6), 0.03, -20, alpha=0.1)
    slope = n.const("slope", np.asarray([3, -20, 40, 90, 7, 0], np.int8), 0.01, 2)
    pr = n.node("PRelu", [fc, slope], "prelu", (1, 6), 0.04, -10)
    bm = n.node("BatchMatMul", [fc, lr], "batch_matmul", (6, 6), 0.3, 4, adj_x=True, adj_y=False,
                asymmetric_quantize_inputs=False)
    rs = n.node("Rsqrt", [rl], "rsqrt", (1, 6), 0.05, -128)
    ab = n.node("Abs", [fc], "abs", (1, 6), 0.04, -128)
    sd = n.node("SquaredDifference", [fc, lr], "squared_difference", (1, 6), 0.3, -128)
    su = n.node("ReduceSum", [fc, n.const("sum_axes", np.asarray([1], np.int32))], "sum", (1,),
                0.4, 3, keepdims=0)
    sl = n.node("SliceBySize", [fc, n.const("sl_begin", np.asarray([0, 1], np.int32)),
                                n.const("sl_size", np.asarray([1, -1], np.int32))], "slice",
                (1, 5), 0.05, -5)
    rv = n.node("Reverse", [sl, n.const("rv_axis", np.asarray([1], np.int32))], "reverse",
                (1, 5), 0.05, -5)
    pk = n.node("Pack", [sl, rv], "pack", (1, 2, 5), 0.05, -5, axis=1, values_count=2)
    unpacked = ["unpack_0", "unpack_1"]
    for name in unpacked:
        n.g.add_tensor(Tensor(name, (1, 5), "int8", quant=n._q(0.05, -5)))
    n.g.nodes.append(Node("Unpack", [pk], unpacked, {"axis": 1, "num": 2}, unpacked[0]))
    ed = n.node("ExpandDims", [fc, n.const("ed_axis", np.asarray([1], np.int32))], "expand_dims",
                (1, 1, 6), 0.05, -5)
    compared = []
    for op in ("Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual"):
        name = f"{op.lower()}_cmp"
        n.g.add_tensor(Tensor(name, (1, 6), "bool"))
        n.g.nodes.append(Node(op, [fc, lr], [name], {}, name))
        compared.append(name)
    sel = n.node("SelectV2", ["greater_cmp", fc, n.const("sel_y", np.arange(-3, 3).astype(
        np.int8).reshape(1, 6), 0.05, -5)], "select_v2", (1, 6), 0.05, -5)
    rmax = n.node("ReduceMax", [t, n.const("rmax_axes", np.asarray([1, 2], np.int32))],
                  "reduce_max", (1, 1, 1, 10), 0.2, 0, keepdims=1)
    rmin = n.node("ReduceMin", [t, n.const("rmin_axes", np.asarray([-1], np.int32))],
                  "reduce_min", (1, 3, 3), 0.2, 0, keepdims=0)
    mirror = n.node("MirrorPad", [t, n.const("mirror_pads", np.asarray(
        [[0, 0], [1, 1], [2, 0], [0, 0]], np.int32))], "mirror_pad", (1, 5, 5, 10), 0.2, 0,
        mode=0)
    d2s = n.node("DepthToSpaceNHWC", [x], "depth_to_space", (1, 12, 12, 1), 0.05, -3,
                 block_size=2)
    l2 = n.node("L2Normalization", [fc], "l2_normalization", (1, 6), 1.0 / 128, 0,
                activation="NONE")
    top = n.node("ReduceMax", [t, n.const("top_axes", np.asarray([0, 1, 2, 3], np.int32))],
                 "reduce_all", (), 0.2, 0, keepdims=0)
    fill = n.node("Fill", [n.const("fill_dims", np.asarray([1, 4], np.int32)), top], "fill",
                  (1, 4), 0.2, 0)
    last = [pr, rs, ab, sd, su, pk, *unpacked, ed, *compared, sel, rmax, rmin, mirror, d2s, l2,
            fill]
    if header_only_ops:
        last = [n.node("Div", [pr, rs], "div", (1, 6), 0.2, 3, activation="NONE")]
    extra = _onnx_export_ops(n, m, d)
    if header_only_ops:  # a stateful layer: tests/executor/test_lstm.py's C tests carry its state
        extra.append(_lstm_op(n, pk))
    return read_tflite(n.build([sm, sg, th, hs, rl, r6, rq, dq, ss, bm] + last + extra))


def _lstm_op(n, x) -> str:
    """An integer UNIDIRECTIONAL_SEQUENCE_LSTM of 3 units over `x` [1, 2, 5] for
    `every_op_model` (its two variable state tensors, TFLite Micro's int16 cell)."""
    from qconvert.schemas.lstm import LSTM_SLOTS

    inputs = [x]
    for slot in LSTM_SLOTS[1:]:
        name = f"lstm_{slot.name}"
        if slot.name.startswith(("input_to_", "recurrent_to_")):
            inputs.append(n.weights(name, (3, 5 if slot.name.startswith("input") else 3), 0,
                                    per_channel=False)[0])
        elif slot.name.endswith("_gate_bias"):
            s_w = n.g.tensors[f"lstm_input_to_{slot.name[:-10]}_weights"].quant.scale
            inputs.append(n.bias(name, 0.05, s_w, 3))
        elif slot.name in ("output_state", "cell_state"):
            wide = slot.name == "cell_state"
            n.g.add_tensor(Tensor(name, (1, 3), "int16" if wide else "int8",
                                  quant=n._q(2.0 ** -11, 0) if wide else n._q(1 / 128, 0),
                                  extra={"is_variable": True}))
            inputs.append(name)
        else:
            inputs.append(None)
    return n.node("UnidirectionalSequenceLSTM", inputs, "lstm", (1, 2, 3), 1 / 128, 0,
                  activation="TANH", cell_clip=0.0, proj_clip=0.0, time_major=False,
                  asymmetric_quantize_inputs=False)


def _onnx_export_ops(n, m, d) -> list:
    """Grouped CONV_2D, TRANSPOSE_CONV, RESIZE_*, SPLIT, SPLIT_V nodes for `every_op_model`."""
    gw, _ = n.weights("gw", (4, 1, 1, 2), 0)
    gc = n.node("Conv2D", [m, gw, None], "gconv", (1, 6, 6, 4), 0.3, 2,
                **dict(CONV, kernel_shape=[1, 1], pads=[0, 0, 0, 0], group=2))
    tw, s_tw = n.weights("tw", (3, 2, 2, 5), 0)
    tc = n.node("TransposeConv", [n.const("tshape", np.asarray([1, 8, 8, 3], np.int32)), tw, d,
                                  n.bias("tb", 0.2, s_tw, 3)], "tconv", (1, 8, 8, 3), 0.3, 1,
                strides=[2, 2], padding="VALID", activation="NONE")
    rb = n.node("ResizeBilinear", [d, n.const("rsize", np.asarray([6, 7], np.int32))],
                "bilinear", (1, 6, 7, 5), 0.2, 0, align_corners=False, half_pixel_centers=True)
    rn = n.node("ResizeNearest", [d, n.const("nsize", np.asarray([8, 8], np.int32))],
                "nearest", (1, 8, 8, 5), 0.2, 0, align_corners=False, half_pixel_centers=False)
    outs = []
    for op, ins, shapes in (("SplitEqual", [n.const("sax", np.asarray([1], np.int32)), d],
                             [(1, 2, 4, 5)] * 2),
                            ("SplitSizes", [d, n.const("ssz", np.asarray([2, 3], np.int32)),
                                            n.const("svax", np.asarray([3], np.int32))],
                             [(1, 4, 4, 2), (1, 4, 4, 3)])):
        names = [f"{op.lower()}_{k}" for k in range(2)]
        for name, shape in zip(names, shapes):
            n.g.add_tensor(Tensor(name, shape, "int8", quant=n._q(0.2, 0)))
        n.g.nodes.append(Node(op, ins, names, {"num_splits": 2}, names[0]))
        outs += names
    return [gc, tc, rb, rn] + outs
