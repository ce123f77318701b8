"""Float kernels of the linear layers: Conv2D (ONNX Conv and TFLite CONV_2D), DepthwiseConv2D,
ConvTranspose, FullyConnected, Gemm and MatMul. Registered into `float_kernels.KERNELS` (same
contract: see that module's docstring); int8 weights with a float input go to the hybrid
kernels of `float_kernels_hybrid`.

The float layers compute in the input's float type (float32 for every model the readers
produce), like the runtimes: convolutions are an im2col (a strided view of the padded input,
copied once) times the weights with BLAS, one matmul per group; depthwise convolutions and
pools are sums / maxima over the kernel taps of strided views. Accumulation order differs from
the runtimes' loops, so results agree to float32 rounding (about 1e-6 relative), not bitwise.
"""

from __future__ import annotations

import itertools

import numpy as np

from .float_kernels_base import (aligned, float_input, float_operand, _fused, _ints, _layout,
                                 optional_input, clamp, fused_bounds, kernel)
from .float_kernels_hybrid import hybrid_conv, hybrid_fc
from .float_kernels_window import (out_sizes, pad_spatial, padded_scratch, sample_chunks,
                                   spatial_attrs, spatial_axes, window_taps, window_view)
from .float_kernels_winograd import winograd_applies, winograd_conv
from .parallel import matmul as shared_matmul
from .parallel import on_workers, one_blas_thread, scratch


def _add_bias(node, y, b, axis: int) -> None:
    if b is None:
        return
    b = float_operand(node, b, y.dtype, "bias").reshape(-1)
    if b.size != y.shape[axis]:
        raise ValueError(f"{node.op}: bias of {b.size} values for {y.shape[axis]} channels")
    shape = [1] * y.ndim
    shape[axis] = b.size
    y += b.reshape(shape)


@kernel("Conv2D", context=True)
def conv2d(node, inputs, out_dtypes, ctx=None):
    """ONNX Conv (NCHW input, OIHW weights, any spatial rank, `group`) and TFLite CONV_2D (NHWC,
    OHWI, fused `activation`): explicit `pads`, `strides`, `dilations`, optional bias. Int8
    weights with a float input are TFLite's hybrid kernel (see `hybrid_conv`)."""
    x, w, b = inputs[0], inputs[1], optional_input(inputs, 2)
    float_input(node, x)
    nhwc = _layout(node) == "NHWC"
    rank = x.ndim - 2
    if rank < 1 or w.ndim != x.ndim:
        raise ValueError(f"Conv2D of a {x.ndim}-D input with {w.ndim}-D weights")
    kernel = list(w.shape[1:-1] if nhwc else w.shape[2:])
    cin_g = w.shape[-1] if nhwc else w.shape[1]
    channels = x.shape[-1] if nhwc else x.shape[1]
    cout = w.shape[0]
    group = int(node.attrs.get("group", 1) or 1)
    if cin_g * group != channels or cout % group:
        raise ValueError(f"Conv2D: {channels} input channels, weights {w.shape}, group {group}")
    axes = spatial_axes(x.ndim, nhwc)
    spatial = [x.shape[a] for a in axes]
    strides, dilations, pads = spatial_attrs(node, spatial, kernel)
    out = out_sizes(spatial, kernel, strides, dilations, pads)
    bounds = None if ctx is None else ctx.clamp  # the reader's clamp (applied in cache)
    if w.dtype.kind in "iu":
        return [_clamped(_fused(node, hybrid_conv(node, x, w, b, ctx, kernel, strides,
                                                  dilations, pads, out, group), own=True),
                         bounds)]
    w = float_operand(node, w, x.dtype, "weights")
    n, k = x.shape[0], int(np.prod(kernel))
    if group == 1 and not nhwc and winograd_applies(x, w, kernel, strides, dilations, out):
        bias = None if b is None else _channel_bias(node, b, x.dtype, cout).reshape(cout, 1, 1)
        return [_fused(node, winograd_conv(x, w, bias, pads, out,
                                           _sample_groups(n, int(np.prod(out))),
                                           _row_blocks(cout), bounds), own=True)]
    if group == 1 and not nhwc:
        return [_fused(node, _dense_nchw(node, x, w.reshape(cout, channels * k), b, kernel,
                                         strides, dilations, pads, out, bounds), own=True)]
    if group == 1:  # NHWC (TFLite): its fused clamp, then the reader's, on each piece
        fused = fused_bounds(node)
        plain = node.attrs.get("activation", "NONE") in (None, "NONE")
        pieces = [fused, bounds] if fused is not None or plain else []  # TANH: after
        y = _dense_nhwc(node, x, w.reshape(cout, k * channels), b, kernel, strides, dilations,
                        pads, out, pieces)
        return [y if pieces else _clamped(_fused(node, y, own=True), bounds)]
    return [_clamped(_grouped_or_nhwc(node, x, w, b, nhwc, axes, kernel, strides, dilations,
                                      pads, out, group, cin_g, k), bounds)]


def _clamped(y: np.ndarray, bounds) -> np.ndarray:
    """`y` clamped in place to `bounds` (lower, upper) when given."""
    return y if bounds is None else clamp(y, *bounds, out=y)


def _grouped_or_nhwc(node, x, w, b, nhwc, axes, kernel, strides, dilations, pads, out, group,
                     cin_g, k) -> np.ndarray:
    """The convolutions other than a one-group NCHW one: depthwise, grouped, NHWC."""
    n, rank, cout = x.shape[0], len(axes), w.shape[0]
    channels = x.shape[-1] if nhwc else x.shape[1]
    depthwise = group == channels and cin_g == 1 and group > 1
    if depthwise and not nhwc and rank == 2:
        per_tap = np.moveaxis(w.reshape(channels, cout // channels, k), 2, 0)  # [k, C, M]
        return _fused(node, _depthwise_nchw(node, x, per_tap, b, kernel, strides, dilations,
                                            pads, out), own=True)
    if depthwise:  # sum over taps, with the bias and a fused clamp on each chunk
        per_tap = (np.moveaxis(w.reshape(channels, cout // channels, k), 2, 0))  # [k, C, M]
        bias = None if b is None else _channel_bias(node, b, x.dtype, cout)
        bounds = fused_bounds(node)
        y = _depthwise_sum(x, axes, pads, per_tap, nhwc, kernel, strides, dilations, out, bias,
                           bounds)
        return y if bounds is not None else _fused(node, y, own=True)
    xp = pad_spatial(x, axes, pads[:rank], pads[rank:], 0)
    if nhwc:  # grouped (one group is `_dense_nhwc`)
        p = n * int(np.prod(out))
        cols = window_view(xp, True, kernel, strides, dilations, out)
        cols = cols.reshape(p, k, group, cin_g).transpose(2, 0, 1, 3).reshape(group, p, -1)
        wg = w.reshape(group, cout // group, k * cin_g).transpose(0, 2, 1)
        y = np.matmul(cols, wg).transpose(1, 0, 2).reshape(n, *out, cout)
    else:
        cols = window_view(xp, False, kernel, strides, dilations, out)
        cols = cols.reshape(n, group, cin_g * k, int(np.prod(out)))
        y = np.matmul(w.reshape(group, cout // group, cin_g * k), cols).reshape(n, cout, *out)
    _add_bias(node, y, b, -1 if nhwc else 1)
    return _fused(node, y, own=True)


def _channel_bias(node, b, dtype, cout: int) -> np.ndarray:
    """The bias operand as `cout` values of `dtype`."""
    bias = float_operand(node, b, dtype, "bias").reshape(-1)
    if bias.size != cout:
        raise ValueError(f"{node.op}: bias of {bias.size} values for {cout} channels")
    return bias


_GEMM_COLUMNS = 1024  # output positions per matmul below which samples are multiplied together
_ROW_ALIGN = 16  # a product split among the CPUs is split at multiples of this many rows
_COPY_SPAN = 1 << 18  # elements per piece of a parallel im2col copy


def _sample_groups(n: int, positions: int) -> list:
    """[(start, stop)]: the contiguous groups of samples multiplied together, each about
    _GEMM_COLUMNS output positions wide (one sample when it has that many), sizes differing by
    at most one, and an even number of groups when there are several (two CPUs then finish
    together). Depends on the shapes only."""
    count = min(n, max(1, round(n * positions / _GEMM_COLUMNS)))
    if 1 < count < n and count % 2:
        count += 1
    base, extra = divmod(n, count)
    bounds, start = [], 0
    for g in range(count):
        stop = start + base + (g < extra)
        bounds.append((start, stop))
        start = stop
    return bounds


def _row_blocks(rows: int) -> list:
    """[slice]: the output rows of one product split in two (at a multiple of _ROW_ALIGN), one
    per CPU; one block when there are too few rows. Depends on the shape only."""
    half = -(-rows // (2 * _ROW_ALIGN)) * _ROW_ALIGN
    if rows < 2 * _ROW_ALIGN or half >= rows:
        return [slice(0, rows)]
    return [slice(0, half), slice(half, rows)]


def _dense_nchw(node, x, w2, b, kernel, strides, dilations, pads, out,
                bounds=None) -> np.ndarray:
    """A group-1 NCHW convolution of `x` with weights w2 [Cout, C * k]: [N, Cout, *out].

    W @ im2col(x_i) per sample, written straight into the output, its bias added while the
    rows are in cache; a 1x1, stride-1, unpadded conv needs no im2col copy at all. When the
    output has few positions (late layers), samples are multiplied together,
    W @ [im2col(x_i) ...], so BLAS gets wide enough matrices (`_sample_groups`). Padding and
    im2col are done one group of samples at a time, into buffers reused across the batch:
    memory stays bounded whatever the batch size, and no padded copy of the whole input is
    made. The groups are shared among the CPUs (`on_workers`), each product on one BLAS thread
    (`one_blas_thread`); a batch that makes one group only has its product split by output
    rows instead (`_row_blocks`), its im2col copied once, by every CPU. The split depends on
    the shapes only, so the result does not depend on the number of CPUs. The im2col buffers
    belong to the call and are freed with it, so the next activations reuse that memory (a
    thread's work array would keep a ResNet stem's 7 MB per CPU through the network's
    memory peak); the padded input stays a work array of each thread."""
    n, channels = x.shape[:2]
    cout, depth = w2.shape
    rank = len(kernel)
    positions = int(np.prod(out))
    result = np.empty((n, cout, *out), dtype=np.result_type(x.dtype, w2.dtype))
    y = result.reshape(n, cout, positions)
    bias = None if b is None else _channel_bias(node, b, y.dtype, cout).reshape(cout, 1)
    order = (1, *range(2, 2 + rank), 0, *range(2 + rank, 2 + 2 * rank))
    size = [x.shape[2 + i] + pads[i] + pads[rank + i] for i in range(rank)]
    inner = (slice(None), slice(None),
             *(slice(pads[i], pads[i] + x.shape[2 + i]) for i in range(rank)))
    pointwise = not any(pads) and all(v == 1 for v in (*kernel, *strides))
    groups = _sample_groups(n, positions)

    def product(start, stop, matrix, rows=slice(None)):
        """y[start:stop, rows] = w2[rows] @ matrix (+ bias, clamped to `bounds`): one product,
        one pass after it."""
        if stop - start == 1:
            dst = y[start, rows]
            np.matmul(w2[rows], matrix, out=dst)
            if bias is not None:
                dst += bias[rows]
            _clamped(dst, bounds)
            return
        prod = w2[rows] @ matrix  # [rows, m * P]
        if bias is not None:
            prod += bias[rows]
        _clamped(prod, bounds)
        y[start:stop, rows] = prod.reshape(-1, stop - start, positions).transpose(1, 0, 2)

    def padded_work_array(m):
        """This thread's padded input buffer for m samples (`parallel.scratch`), the padding
        zeroed."""
        padded = scratch("conv padded", (m, channels, *size), x.dtype)
        for i in range(rank):
            lead = (slice(None),) * (2 + i)
            padded[(*lead, slice(0, pads[i]))] = 0
            padded[(*lead, slice(pads[i] + x.shape[2 + i], None))] = 0
        return padded

    def run(items):
        widest = max(b - a for a, b in groups)
        padded = padded_work_array(widest) if any(pads) else None
        columns = None  # this call's im2col buffer, freed with it (docstring)
        for start, stop in items:
            xp = x[start:stop]
            if padded is not None:
                xp, src = padded[:stop - start], xp
                xp[inner] = src
            if stop - start == 1 and pointwise:  # the input itself, no copy when contiguous
                product(start, stop, xp[0].reshape(depth, positions))
                continue
            view = window_view(xp, False, kernel, strides, dilations, out).transpose(order)
            if columns is None:
                columns = np.empty(depth * widest * positions, y.dtype)
            part = columns[:view.size].reshape(view.shape)  # [C, *k, m, *out]
            np.copyto(part, view)
            product(start, stop, part.reshape(depth, (stop - start) * positions))

    with one_blas_thread():
        if len(groups) > 1:  # the groups of samples shared among the CPUs
            on_workers(run, groups)
            return result
        blocks = _row_blocks(cout)
        if len(blocks) == 1:
            run(groups)
            return result
        if pointwise and n == 1:
            matrix = x[0].reshape(depth, positions)
        else:  # im2col of the whole batch, copied by every CPU
            xp = x
            if any(pads):
                xp = padded_work_array(n)
                xp[inner] = x
            view = window_view(xp, False, kernel, strides, dilations, out).transpose(order)
            part = np.empty(view.shape, y.dtype)  # freed with the call (docstring)
            step = max(1, _COPY_SPAN // max(1, part[0].size))

            def copy(items):
                for c in items:
                    np.copyto(part[c:c + step], view[c:c + step])

            on_workers(copy, range(0, channels, step))
            matrix = part.reshape(depth, n * positions)
        on_workers(lambda items: [product(0, n, matrix, rows) for rows in items], blocks)
    return result


def _dense_nhwc(node, x, w2, b, kernel, strides, dilations, pads, out, clamps) -> np.ndarray:
    """A group-1 NHWC convolution (TFLite CONV_2D) of `x` with weights w2 [Cout, k * C] (OHWI
    flattened): [N, *out, Cout], each of `clamps` (None, or (lower, upper)) applied in turn.

    In row-major NHWC the output of a group of samples is one matrix, [m * P, Cout] =
    im2col [m * P, k * C] @ w2^T, written straight into its rows of the output; its bias is
    added and its clamps applied while those rows are in cache. A 1x1, stride-1, unpadded
    convolution multiplies the input itself (no im2col). Padding and im2col are done one group
    of samples at a time into work arrays of each thread (`parallel.scratch`), the groups
    shared among the CPUs (`_sample_groups`, BLAS on one thread each); a batch that makes one
    group has the rows of its product split between the CPUs instead (`_row_blocks`). Every
    output element is the same dot product whatever the split, so the result does not depend
    on the number of CPUs."""
    n, channels = x.shape[0], x.shape[-1]
    cout, depth = w2.shape
    rank = len(kernel)
    positions = int(np.prod(out))
    y = np.empty((n, *out, cout), dtype=np.result_type(x.dtype, w2.dtype))
    rows_of = y.reshape(n * positions, cout)
    wt = w2.T  # [k * C, Cout], read transposed by BLAS (no copy)
    bias = None if b is None else _channel_bias(node, b, y.dtype, cout)
    pointwise = not any(pads) and all(v == 1 for v in (*kernel, *strides))
    groups = _sample_groups(n, positions)
    axes = list(range(1, 1 + rank))

    def matrix_of(start, stop):
        """The im2col rows [m * P, k * C] of samples start..stop (a work array of this thread,
        or the input itself for a pointwise convolution)."""
        m = stop - start
        xp = x[start:stop]
        if pointwise and xp.flags.c_contiguous:
            return xp.reshape(m * positions, channels)
        xp = padded_scratch(xp, axes, pads[:rank], pads[rank:], 0, "conv padded nhwc")
        view = window_view(xp, True, kernel, strides, dilations, out)  # [m, *out, *k, C]
        part = scratch("conv columns nhwc", view.shape, y.dtype)
        np.copyto(part, view)
        return part.reshape(m * positions, depth)

    def product(matrix, rows):
        """rows_of[rows] = matrix[rows - first] @ wt, + bias, clamped (one pass after it)."""
        dst = rows_of[rows]
        np.matmul(matrix, wt, out=dst)
        if bias is not None:
            dst += bias
        for bounds in clamps:
            _clamped(dst, bounds)

    def run(items):
        for start, stop in items:
            product(matrix_of(start, stop), slice(start * positions, stop * positions))

    with one_blas_thread():
        if len(groups) > 1:
            on_workers(run, groups)
            return y
        matrix = matrix_of(0, n)  # one group: its rows split between the CPUs
        on_workers(lambda items: [product(matrix[r], r) for r in items],
                   _row_blocks(n * positions))
    return y


def _zero_outside(image: np.ndarray, top: int, height: int, left: int, width: int) -> None:
    """Zero image[:, r, c] outside rows [top, top + height) and columns [left, left + width)."""
    image[:, :top] = 0
    image[:, top + height:] = 0
    image[:, :, :left] = 0
    image[:, :, left + width:] = 0


def _depthwise_nchw(node, x, per_tap, b, kernel, strides, dilations, pads, out) -> np.ndarray:
    """A 2-D NCHW depthwise convolution, per_tap [k, C, M] (output channel c * M + m reads input
    channel c): [N, C * M, *out], the taps accumulated in row-major order, sample by sample
    (samples shared among the CPUs, see `parallel`).

    Each sample is padded into a buffer reused across the batch and split into its stride
    phases (phase (a, b) holds the pixels at rows a + sh * r, columns b + sw * c; with stride 1
    it is the padded image itself). Tap (i, j) reads one phase shifted by (i dh // sh,
    j dw // sw); read as one flat row per channel (width wq), output (r, c) sits at flat
    r * wq + c, so every tap is one contiguous slice and every multiply-add runs over long rows
    (the wq - wo columns computed past each output row are dropped)."""
    n, channels, height, width = x.shape
    taps, _, mult = per_tap.shape
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, strides, dilations, out
    dtype = np.result_type(x.dtype, per_tap.dtype)
    hp, wp = height + pads[0] + pads[2], width + pads[1] + pads[3]
    hq, wq = -(-hp // sh), -(-wp // sw)  # phase size
    bias = None if b is None else float_operand(node, b, dtype, "bias").reshape(-1)
    if bias is not None and bias.size != channels * mult:
        raise ValueError(f"{node.op}: bias of {bias.size} values for {channels * mult} channels")
    bias = None if bias is None else bias.reshape(channels, mult, 1)
    y = np.empty((n, channels * mult, ho, wo), dtype)
    length = (ho - 1) * wq + wo
    weights = [per_tap[t][:, :, None] for t in range(taps)]  # [C, M, 1]
    reads = [((i * dh) % sh, (j * dw) % sw, (i * dh) // sh * wq + (j * dw) // sw)
             for i in range(kh) for j in range(kw)]  # (phase row, phase column, offset)

    def run(samples):
        # work arrays of this thread (`parallel.scratch`); only what samples do not overwrite
        # is zeroed: the padding of the image, the tail rows and columns of each phase
        buf = scratch("depthwise image", (channels, hp * wp), dtype)
        image = buf.reshape(channels, hp, wp)
        _zero_outside(image, pads[0], height, pads[1], width)
        inner = image[:, pads[0]:pads[0] + height, pads[1]:pads[1] + width]
        phases = {(0, 0): buf}
        if (sh, sw) != (1, 1):
            phases = {}
            for a, c, _ in reads:
                phase = scratch(f"depthwise phase {a} {c}", (channels, hq * wq), dtype)
                _zero_outside(phase.reshape(channels, hq, wq), 0, len(range(a, hp, sh)),
                              0, len(range(c, wp, sw)))
                phases[a, c] = phase
        acc = scratch("depthwise sum", (channels, mult, ho * wq), dtype)
        part = acc[:, :, :length]
        tmp = scratch("depthwise product", (channels, mult, length), dtype)
        for s in samples:
            inner[...] = x[s]
            if (sh, sw) != (1, 1):
                for (a, c), phase in phases.items():
                    src = image[:, a::sh, c::sw]
                    phase.reshape(channels, hq, wq)[:, :src.shape[1], :src.shape[2]] = src
            for t, (a, c, offset) in enumerate(reads):
                src = phases[a, c][:, None, offset:offset + length]
                np.multiply(src, weights[t], out=part if t == 0 else tmp)
                if t:
                    part += tmp
            if bias is not None:
                part += bias
            y[s] = acc.reshape(channels * mult, ho, wq)[:, :, :wo]

    on_workers(run, range(n))
    return y


def _depthwise_sum(x, axes, pads, per_tap, nhwc, kernel, strides, dilations, out, bias=None,
                   bounds=None) -> np.ndarray:
    """sum over taps t of input_tap[..., c] * per_tap[t, c, m] -> channels c * M + m, the taps
    accumulated in row-major order (as TFLite's reference kernel), then `bias` (Cout values)
    added and the clamp to `bounds` applied. Chunk by chunk of samples (`sample_chunks`,
    shared among the CPUs): each chunk padded (`pads`) into a work array of its thread and
    summed in place in its own slice of the output, the bias and clamp while it is in cache;
    the same operations, in the same order, on every element as over the whole batch."""
    _, channels, mult = per_tap.shape
    rank = len(kernel)
    n = x.shape[0]
    shape = (n, *out, channels * mult) if nhwc else (n, channels * mult, *out)
    y = np.empty(shape, dtype=np.result_type(x.dtype, per_tap.dtype))
    if nhwc:
        weights = [per_tap[t] if mult > 1 else per_tap[t, :, 0] for t in range(len(per_tap))]
    else:
        weights = [per_tap[t].reshape(channels, mult, *[1] * rank) if mult > 1
                   else per_tap[t, :, 0].reshape(channels, *[1] * rank)
                   for t in range(len(per_tap))]
    if bias is not None:
        bias = bias.reshape(-1) if nhwc else bias.reshape(-1, *[1] * rank)

    def run(parts):
        for part in parts:
            xp = padded_scratch(x[part], axes, pads[:rank], pads[rank:], 0,
                                "depthwise padded")
            dst = y[part]
            m = len(dst)
            acc = dst
            if mult > 1:
                acc = dst.reshape(m, *out, channels, mult) if nhwc else \
                    dst.reshape(m, channels, mult, *out)
            tmp = scratch("depthwise tap", acc.shape, y.dtype)
            for t, view in enumerate(window_taps(xp, nhwc, kernel, strides, dilations, out)):
                if mult > 1:
                    view = view[..., None] if nhwc else view[:, :, None]
                if t == 0:
                    np.multiply(view, weights[t], out=acc)
                else:
                    np.multiply(view, weights[t], out=tmp)
                    acc += tmp
            if bias is not None:
                dst += bias
            _clamped(dst, bounds)

    on_workers(run, sample_chunks(n, int(np.prod(shape[1:]))))
    return y


@kernel("DepthwiseConv2D", context=True)
def depthwise_conv2d(node, inputs, out_dtypes, ctx=None):
    """TFLite DEPTHWISE_CONV_2D: NHWC input, weights [1, kH, kW, C * depth_multiplier], output
    channel c * M + m reads input channel c; a sum over the kH * kW taps."""
    x, w, b = inputs[0], inputs[1], optional_input(inputs, 2)
    float_input(node, x)
    if w.dtype.kind in "iu":
        raise NotImplementedError("hybrid DepthwiseConv2D (int8 weights, float input)")
    w = float_operand(node, w, x.dtype, "weights")
    nhwc = _layout(node) == "NHWC"
    if x.ndim != 4 or w.ndim != 4 or w.shape[0] != 1:
        raise ValueError(f"DepthwiseConv2D of {x.shape} with weights {w.shape}")
    channels = x.shape[-1] if nhwc else x.shape[1]
    mult = w.shape[3] // channels if channels else 0
    declared = int(node.attrs.get("depth_multiplier", mult) or mult)
    if mult < 1 or channels * mult != w.shape[3] or declared not in (mult, 0):
        raise ValueError(f"DepthwiseConv2D: {channels} channels, weights {w.shape}")
    kernel = list(w.shape[1:3])
    axes = spatial_axes(x.ndim, nhwc)
    spatial = [x.shape[a] for a in axes]
    strides, dilations, pads = spatial_attrs(node, spatial, kernel)
    out = out_sizes(spatial, kernel, strides, dilations, pads)
    per_tap = w.reshape(kernel[0] * kernel[1], channels, mult)
    bias = None if b is None else _channel_bias(node, b, x.dtype, channels * mult)
    bounds = fused_bounds(node)  # applied on each chunk; TANH after
    y = _depthwise_sum(x, axes, pads, per_tap, nhwc, kernel, strides, dilations, out, bias,
                       bounds)
    return [y if bounds is not None else _fused(node, y, own=True)]


@kernel("ConvTranspose")
def conv_transpose(node, inputs, out_dtypes):
    """ONNX ConvTranspose (NCHW, weights [C_in, C_out / group, *k]): per group one matmul
    W^T x, then each kernel tap is added into the strided output (col2im), the result cropped by
    `pads`. Output size (in - 1) * stride + output_padding + (k - 1) * dilation + 1 - pads;
    `output_shape` (or auto_pad SAME: in * stride) sets the total padding instead, split as the
    ONNX spec and onnxruntime do: the odd pixel at the end for SAME_UPPER, else at the start."""
    x, w, b = inputs[0], inputs[1], optional_input(inputs, 2)
    float_input(node, x)
    w = float_operand(node, w, x.dtype, "weights")
    if _layout(node) != "NCHW":
        raise NotImplementedError("ConvTranspose in NHWC")
    rank = x.ndim - 2
    if rank < 1 or w.ndim != x.ndim:
        raise ValueError(f"ConvTranspose of {x.shape} with weights {w.shape}")
    n, cin = x.shape[:2]
    spatial = list(x.shape[2:])
    kernel = list(w.shape[2:])
    group = int(node.attrs.get("group", 1) or 1)
    if w.shape[0] != cin or cin % group:
        raise ValueError(f"ConvTranspose: {cin} input channels, weights {w.shape}, group {group}")
    cout_g = w.shape[1]
    strides = _ints(node.attrs.get("strides") or [1] * rank)
    dilations = _ints(node.attrs.get("dilations") or [1] * rank)
    adj = _ints(node.attrs.get("output_padding") or [0] * rank)
    auto = node.attrs.get("auto_pad") or "NOTSET"
    full = [(spatial[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 + adj[i]
            for i in range(rank)]
    target = node.attrs.get("output_shape")
    if target is not None:
        target = _ints(target)[-rank:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [spatial[i] * strides[i] for i in range(rank)]
    if target is not None:
        begins, ends = [], []
        for i in range(rank):
            total = max(full[i] - target[i], 0)
            small, large = total // 2, total - total // 2
            begins.append(small if auto == "SAME_UPPER" else large)
            ends.append(large if auto == "SAME_UPPER" else small)
        pads = begins + ends
    elif auto in ("NOTSET", "VALID"):
        pads = _ints(node.attrs.get("pads") or [0] * (2 * rank)) if auto == "NOTSET" else [0] * (2 * rank)
    else:
        raise NotImplementedError(f"auto_pad {auto}")
    if len(pads) != 2 * rank or len(strides) != rank or len(dilations) != rank or len(adj) != rank:
        raise ValueError("ConvTranspose attributes do not match the kernel rank")
    k = int(np.prod(kernel))
    p_in = int(np.prod(spatial))
    xg = x.reshape(n, group, cin // group, p_in)
    wg = w.reshape(group, cin // group, cout_g * k).transpose(0, 2, 1)  # [G, Og * k, Cg]
    cols = np.matmul(wg, xg).reshape(n, group * cout_g, *kernel, *spatial)
    y = np.zeros((n, group * cout_g, *full), dtype=x.dtype)
    for tap in itertools.product(*(range(kk) for kk in kernel)):
        index = [slice(None), slice(None)]
        for i in range(rank):
            start = tap[i] * dilations[i]
            index.append(slice(start, start + (spatial[i] - 1) * strides[i] + 1, strides[i]))
        y[tuple(index)] += cols[(slice(None), slice(None), *tap)]
    crop = [slice(None), slice(None)]
    for i in range(rank):
        size = full[i] - pads[i] - pads[rank + i]
        if size < 1:
            raise ValueError(f"ConvTranspose output of size {size}")
        crop.append(slice(pads[i], pads[i] + size))
    y = np.ascontiguousarray(y[tuple(crop)])
    _add_bias(node, y, b, 1)
    return [y]


@kernel("FullyConnected", context=True)
def fully_connected(node, inputs, out_dtypes, ctx=None):
    """TFLite FULLY_CONNECTED: x reshaped to [-1, in], y = x W^T + b with W [out, in]; the output
    keeps x's leading dims when `keep_num_dims`, else is [rows, out]; fused activation. Int8
    weights with a float input are the hybrid kernel (see `hybrid_fc`)."""
    x, w, b = inputs[0], inputs[1], optional_input(inputs, 2)
    float_input(node, x)
    if w.ndim != 2 or not w.shape[1] or x.size % w.shape[1]:
        raise ValueError(f"FullyConnected of {x.shape} with weights {w.shape}")
    if int(node.attrs.get("weights_format", 0) or 0) != 0:
        raise NotImplementedError("FullyConnected with shuffled weights")
    x2 = x.reshape(-1, w.shape[1])
    if w.dtype.kind in "iu":
        y = hybrid_fc(node, x2, w, b, ctx)
    else:
        y = shared_matmul(x2, float_operand(node, w, x.dtype, "weights").T)
        _add_bias(node, y, b, 1)
    if node.attrs.get("keep_num_dims"):
        y = y.reshape(*x.shape[:-1], w.shape[0])
    return [_fused(node, y, own=True)]


@kernel("Gemm")
def gemm(node, inputs, out_dtypes):
    """ONNX Gemm: alpha * A' B' + beta * C, A' / B' transposed by transA / transB, C
    broadcast (unidirectionally) to [M, N]."""
    a, b, c = inputs[0], inputs[1], optional_input(inputs, 2)
    float_input(node, a)
    a = aligned(a)
    b = float_operand(node, b, a.dtype, "B")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"Gemm of {a.shape} and {b.shape}")
    if int(node.attrs.get("transA", 0) or 0):
        a = a.T
    if int(node.attrs.get("transB", 0) or 0):
        b = b.T
    alpha = a.dtype.type(node.attrs.get("alpha", 1.0))
    beta = a.dtype.type(node.attrs.get("beta", 1.0))
    y = shared_matmul(a, b)
    if alpha != 1:
        y *= alpha
    if c is not None and beta != 0:
        c = float_operand(node, c, a.dtype, "C")
        y += c * beta if beta != 1 else c
    return [y]


@kernel("MatMul")
def matmul(node, inputs, out_dtypes):
    """ONNX MatMul: numpy matmul semantics (1-D operands promoted, batch dims broadcast)."""
    a, b = inputs[0], inputs[1]
    if a.dtype != b.dtype:
        raise ValueError(f"MatMul of {a.dtype} and {b.dtype}")
    if a.dtype.kind != "f":
        raise NotImplementedError(f"MatMul of {a.dtype}")
    a, b = aligned(a), aligned(b)
    return [shared_matmul(a, b) if a.ndim == b.ndim == 2 else np.asarray(np.matmul(a, b))]
