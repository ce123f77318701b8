/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_loops.h: what qconvert's int8 (_s8) and 16x8 (_s16) kernels share, written once.
 * Private to the kernel sources of qconvert_nn.h (not an API). Shipped with qconvert (Apache-2.0).
 *
 * - static inline helpers: clamping, the broadcasting odometer, gemmlowp's fixed-point steps
 *   (doubling high multiply, rounding divide and saturating multiply by a power of two, leading
 *   zeros), and each layer family's output stage (bias, requantization, offset, clamp): the
 *   int8 one on an int32 accumulator, the 16x8 one on an int64 accumulator with an int64 bias
 *   and TFLite's 64-bit requantization, or a wrapping int32 accumulator with an int32 bias;
 * - QCONVERT_*_LOOP: the whole body of a weighted kernel (convolution and depthwise convolution,
 *   fully connected, transposed convolution, batch matmul) over an element type and an accumulator
 *   type; the kernel passes its output stage as FINISH(acc, channel), an expression;
 * - QCONVERT_DEFINE_*: a whole kernel whose only difference between int8 and int16 is the
 *   element type (pools, mean, box copy, gather, fill, quantize, dequantize).
 *
 * Every loop walks its output in memory order and reads the inputs of output element i before it
 * writes element i (qconvert_nn.h: the memory plan relies on this).
 */
#ifndef QCONVERT_NN_LOOPS_H
#define QCONVERT_NN_LOOPS_H

#include <stddef.h>
#include <stdint.h>

#include "qconvert_nn.h"

static inline int32_t qconvert_clamp(int32_t value, int32_t lo, int32_t hi)
{
    if (value < lo) {
        value = lo;
    }
    if (value > hi) {
        value = hi;
    }
    return value;
}

/* The int8 layers' output: the int32 accumulator + bias[row] (bias NULL: none), TFLite's
 * requantization, + output offset, clamped. */
static inline int32_t qconvert_finish_s8(int32_t acc, const int32_t *bias, int32_t row,
                                         int32_t multiplier, int32_t shift, int32_t offset,
                                         int32_t lo, int32_t hi)
{
    if (bias != NULL) {
        acc += bias[row];
    }
    return qconvert_clamp(qconvert_requantize(acc, multiplier, shift) + offset, lo, hi);
}

/* The 16x8 layers' output: with an int32 bias (bias32) the accumulator is int32 (it wraps as
 * the device's int32_t does) and requantized as int8's; else the int64 accumulator + bias64[row]
 * (NULL: none) with TFLite's 64-bit requantization. + output offset, clamped. */
static inline int32_t qconvert_finish_s16(int64_t acc, const int64_t *bias64,
                                          const int32_t *bias32, int32_t row,
                                          int32_t multiplier, int32_t shift, int32_t offset,
                                          int32_t lo, int32_t hi)
{
    int32_t out;
    if (bias32 != NULL) {
        const int32_t acc32 = (int32_t)((uint32_t)(int32_t)acc + (uint32_t)bias32[row]);
        out = qconvert_requantize(acc32, multiplier, shift);
    } else {
        if (bias64 != NULL) {
            acc += bias64[row];
        }
        out = qconvert_requantize64(acc, multiplier, shift);
    }
    return qconvert_clamp(out + offset, lo, hi);
}

/* Advance the row-major odometer `index` over `shape`; the two positions follow `s1` / `s2`. */
static inline void qconvert_step(int32_t rank, const int32_t *shape, int32_t *index,
                                 const int32_t *s1, ptrdiff_t *p1, const int32_t *s2,
                                 ptrdiff_t *p2)
{
    int32_t k;
    for (k = rank - 1; k >= 0; --k) {
        *p1 += s1[k];
        *p2 += s2[k];
        if (++index[k] < shape[k]) {
            return;
        }
        *p1 -= (ptrdiff_t)s1[k] * shape[k];
        *p2 -= (ptrdiff_t)s2[k] * shape[k];
        index[k] = 0;
    }
}

static inline int32_t qconvert_volume(int32_t rank, const int32_t *shape)
{
    int32_t k, n = 1;
    for (k = 0; k < rank; ++k) {
        n *= shape[k];
    }
    return n;
}

/* gemmlowp SaturatingRoundingDoublingHighMul */
static inline int32_t qconvert_srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

/* gemmlowp RoundingDivideByPOT: ties away from zero */
static inline int32_t qconvert_rdbpot(int32_t x, int32_t exponent)
{
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<exponent> (exponent < 0: a rounding right
 * shift) */
static inline int32_t qconvert_sat_mul_pot(int32_t x, int32_t exponent)
{
    int32_t threshold;
    if (exponent == 0) {
        return x;
    }
    if (exponent < 0) {
        return qconvert_rdbpot(x, -exponent);
    }
    threshold = (int32_t)(((int64_t)1 << (31 - exponent)) - 1);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return (int32_t)((uint32_t)x << exponent);
}

static inline int32_t qconvert_leading_zeros(uint32_t u)
{
    int32_t n = 0;
    if (u == 0) {
        return 32;
    }
    while (!(u & 0x80000000u)) {
        u <<= 1;
        ++n;
    }
    return n;
}

/* TFLite's GetInvSqrtQuantizedMultiplierExp(v, reverse_shift -1) for v >= 0: 1 / sqrt(v) as
 * multiplier * 2**(shift - 31), by gemmlowp's Newton-Raphson iteration on a Q3.28 value. */
static inline void qconvert_inv_sqrt(int32_t v, int32_t *multiplier, int32_t *shift)
{
    const int32_t half_three = (1 << 28) + (1 << 27); /* 1.5 in Q3.28 */
    int32_t x_in = v, right = 11, pairs, half, x = 1 << 28, k;
    if (v <= 1) {
        *multiplier = INT32_MAX;
        *shift = 0;
        return;
    }
    while (x_in >= (1 << 29)) {
        x_in /= 4;
        ++right;
    }
    pairs = (qconvert_leading_zeros((uint32_t)x_in) - 1) / 2 - 1;
    right -= pairs;
    x_in <<= 2 * pairs;
    half = qconvert_rdbpot(x_in >> 1, 1);
    for (k = 0; k < 5; ++k) {
        const int32_t x3 = qconvert_sat_mul_pot(qconvert_srdhm(qconvert_srdhm(x, x), x), 6);
        x = qconvert_sat_mul_pot((int32_t)((uint32_t)qconvert_srdhm(half_three, x)
                                           - (uint32_t)qconvert_srdhm(half, x3)),
                                 3);
    }
    x = qconvert_srdhm(x, 1518500250); /* * sqrt(2) / 2 */
    if (right < 0) {
        x = (int32_t)((uint32_t)x << -right);
        right = 0;
    }
    *multiplier = x;
    *shift = -right;
}

/* MAXIMUM, MINIMUM, MUL, ADD, SUB and SQUARED_DIFFERENCE of two raw values (int8 and int16
 * alike: ADD / SUB / SQUARED_DIFFERENCE rescale both inputs to a common scale << left_shift),
 * clamped. */
static inline int32_t qconvert_binary_value(int32_t a, int32_t b, const qconvert_binary_params *p)
{
    int32_t raw;
    switch (p->op) {
    case QCONVERT_MAXIMUM:
        return a > b ? a : b;
    case QCONVERT_MINIMUM:
        return a < b ? a : b;
    case QCONVERT_MUL:
        raw = qconvert_requantize((a + p->input1_offset) * (b + p->input2_offset),
                                  p->output_multiplier, p->output_shift);
        return qconvert_clamp(raw + p->output_offset, p->activation_min, p->activation_max);
    case QCONVERT_SQUARED_DIFFERENCE: { /* the rescaled difference squared (wrapping) */
        const int32_t d =
            qconvert_requantize((a + p->input1_offset) * (1 << p->left_shift),
                                p->input1_multiplier, p->input1_shift) -
            qconvert_requantize((b + p->input2_offset) * (1 << p->left_shift),
                                p->input2_multiplier, p->input2_shift);
        raw = qconvert_requantize((int32_t)((uint32_t)d * (uint32_t)d), p->output_multiplier,
                                  p->output_shift);
        return qconvert_clamp(raw + p->output_offset, p->activation_min, p->activation_max);
    }
    default: { /* ADD, SUB */
        const int32_t sa = qconvert_requantize((a + p->input1_offset) * (1 << p->left_shift),
                                               p->input1_multiplier, p->input1_shift);
        const int32_t sb = qconvert_requantize((b + p->input2_offset) * (1 << p->left_shift),
                                               p->input2_multiplier, p->input2_shift);
        raw = qconvert_requantize(p->op == QCONVERT_ADD ? sa + sb : sa - sb,
                                  p->output_multiplier, p->output_shift);
        return qconvert_clamp(raw + p->output_offset, p->activation_min, p->activation_max);
    }
    }
}

/* PRELU of one value x with slope value alpha (the PRELU fields of qconvert_binary_params),
 * clamped to [lo, hi], the output type's range. */
static inline int32_t qconvert_prelu_value(int32_t x, int32_t alpha,
                                           const qconvert_binary_params *p, int32_t lo,
                                           int32_t hi)
{
    const int32_t v = x + p->input1_offset;
    const int32_t raw = v >= 0
        ? qconvert_requantize(v, p->output_multiplier, p->output_shift)
        : qconvert_requantize(v * (alpha + p->input2_offset), p->input2_multiplier,
                              p->input2_shift);
    return qconvert_clamp(raw + p->output_offset, lo, hi);
}

/* acc += sum over k < n of (ACC_T)(x[k] + offset) * w[k]: one tap of a convolution. */
#define QCONVERT_TAP_DOT(ACC_T, acc, x, w, n, offset)                                             \
    do {                                                                                         \
        int32_t k_;                                                                              \
        for (k_ = 0; k_ < (n); ++k_) {                                                           \
            acc += (ACC_T)((x)[k_] + (offset)) * (w)[k_];                                        \
        }                                                                                        \
    } while (0)

/* Walk the broadcast box of a binary op: BODY runs once per output element i (int32_t), with
 * `pa` / `pb` (ptrdiff_t) the positions of its two inputs. */
#define QCONVERT_BROADCAST_LOOP(p, i, pa, pb, BODY)                                              \
    do {                                                                                         \
        int32_t index_[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};                                  \
        const int32_t n_ = qconvert_volume((p)->rank, (p)->shape);                               \
        ptrdiff_t pa = 0, pb = 0;                                                                \
        int32_t i;                                                                               \
        for (i = 0; i < n_; ++i) {                                                               \
            BODY;                                                                                \
            qconvert_step((p)->rank, (p)->shape, index_, (p)->a_strides, &pa, (p)->b_strides,   \
                          &pb);                                                                  \
        }                                                                                        \
    } while (0)

/* Conv2D (depthwise 0), weights OHWI [out_c][kernel_h][kernel_w][in_c / groups] with the group
 * count in depth_multiplier, or DepthwiseConv2D (depthwise 1), weights [1][kernel_h][kernel_w]
 * [out_c], out_c = in_c * depth_multiplier: the grouped convolution with in_c groups of one input
 * channel. ACC_T acc = sum over the taps inside the image of (input + input_offset) * weight;
 * output[o] = FINISH(acc, oc). */
#define QCONVERT_CONV_LOOP(IN_T, ACC_T, input, weights, output, p, depthwise, FINISH)            \
    do {                                                                                         \
        const int32_t groups_ = (depthwise) ? (p)->in_c                                          \
                                : (p)->depth_multiplier > 0 ? (p)->depth_multiplier : 1;         \
        const int32_t filter_c_ = (p)->in_c / groups_;                                           \
        const int32_t per_group_ = (p)->out_c / groups_;                                         \
        /* weight steps from one output channel and from one tap to the next */                  \
        const ptrdiff_t w_step_oc_ = (depthwise) ? 1                                             \
                                     : (ptrdiff_t)(p)->kernel_h * (p)->kernel_w * filter_c_;     \
        const ptrdiff_t w_step_tap_ = (depthwise) ? (p)->out_c : filter_c_;                      \
        int32_t b_, oy_, ox_, oc, ky_, kx_;                                                 \
        ptrdiff_t o_ = 0;                                                                        \
        for (b_ = 0; b_ < (p)->batches; ++b_) {                                                  \
            const IN_T *in_b_ = (input) + (ptrdiff_t)b_ * (p)->in_h * (p)->in_w * (p)->in_c;     \
            for (oy_ = 0; oy_ < (p)->out_h; ++oy_) {                                             \
                const int32_t y0_ = oy_ * (p)->stride_h - (p)->pad_top;                          \
                for (ox_ = 0; ox_ < (p)->out_w; ++ox_) {                                         \
                    const int32_t x0_ = ox_ * (p)->stride_w - (p)->pad_left;                     \
                    for (oc = 0; oc < (p)->out_c; ++oc) {                                        \
                        const int8_t *w_oc_ = (weights) + oc * w_step_oc_;                       \
                        const int32_t first_c_ = (oc / per_group_) * filter_c_;                  \
                        ACC_T acc = 0;                                                           \
                        for (ky_ = 0; ky_ < (p)->kernel_h; ++ky_) {                              \
                            const int32_t y_ = y0_ + ky_ * (p)->dilation_h;                      \
                            if (y_ < 0 || y_ >= (p)->in_h) {                                     \
                                continue;                                                        \
                            }                                                                    \
                            for (kx_ = 0; kx_ < (p)->kernel_w; ++kx_) {                          \
                                const int32_t x_ = x0_ + kx_ * (p)->dilation_w;                  \
                                const IN_T *in_px_;                                              \
                                const int8_t *w_tap_;                                            \
                                if (x_ < 0 || x_ >= (p)->in_w) {                                 \
                                    continue;                                                    \
                                }                                                                \
                                in_px_ = in_b_ + ((ptrdiff_t)y_ * (p)->in_w + x_) * (p)->in_c    \
                                         + first_c_;                                             \
                                w_tap_ = w_oc_ + ((ptrdiff_t)ky_ * (p)->kernel_w + kx_)          \
                                                     * w_step_tap_;                              \
                                QCONVERT_TAP_DOT(ACC_T, acc, in_px_, w_tap_, filter_c_,          \
                                                 (p)->input_offset);                             \
                            }                                                                    \
                        }                                                                        \
                        (output)[o_++] = FINISH(acc, oc);                                        \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* FullyConnected, row-major weights [output_depth][accum_depth], quant a qconvert_fc_quant:
 * ACC_T acc = sum (weight + weights_offset) * (input + input_offset); output row r of batch b
 * is FINISH(acc, r). */
#define QCONVERT_FC_LOOP(IN_T, ACC_T, input, weights, output, batches, accum_depth,             \
                         output_depth, quant, FINISH)                                            \
    do {                                                                                         \
        int32_t b_, r, c_;                                                                       \
        for (b_ = 0; b_ < (batches); ++b_) {                                                     \
            const IN_T *x_ = (input) + (ptrdiff_t)b_ * (accum_depth);                            \
            IN_T *y_ = (output) + (ptrdiff_t)b_ * (output_depth);                                \
            for (r = 0; r < (output_depth); ++r) {                                               \
                const int8_t *w_ = (weights) + (ptrdiff_t)r * (accum_depth);                     \
                ACC_T acc = 0;                                                                   \
                for (c_ = 0; c_ < (accum_depth); ++c_) {                                         \
                    acc += (ACC_T)(w_[c_] + (quant)->weights_offset)                             \
                           * (x_[c_] + (quant)->input_offset);                                   \
                }                                                                                \
                y_[r] = FINISH(acc, r);                                                          \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* TransposeConv, weights [out_c][kernel_h][kernel_w][in_c], the gather form of the scatter
 * TFLite computes: output (oy, ox) sums the taps (ky, kx) whose input pixel (oy + top - ky) /
 * stride is whole and inside the image (exact ACC_T sums); output[o] = FINISH(acc, oc). */
#define QCONVERT_TRANSPOSE_CONV_LOOP(IN_T, ACC_T, input, weights, output, p, FINISH)             \
    do {                                                                                         \
        int32_t b_, oy_, ox_, oc, ky_, kx_;                                                 \
        ptrdiff_t o_ = 0;                                                                        \
        for (b_ = 0; b_ < (p)->batches; ++b_) {                                                  \
            const IN_T *in_b_ = (input) + (ptrdiff_t)b_ * (p)->in_h * (p)->in_w * (p)->in_c;     \
            for (oy_ = 0; oy_ < (p)->out_h; ++oy_) {                                             \
                for (ox_ = 0; ox_ < (p)->out_w; ++ox_) {                                         \
                    for (oc = 0; oc < (p)->out_c; ++oc) {                                        \
                        ACC_T acc = 0;                                                           \
                        for (ky_ = 0; ky_ < (p)->kernel_h; ++ky_) {                              \
                            const int32_t ty_ = oy_ + (p)->pad_top - ky_;                        \
                            int32_t iy_;                                                         \
                            if (ty_ < 0 || ty_ % (p)->stride_h != 0) {                           \
                                continue;                                                        \
                            }                                                                    \
                            iy_ = ty_ / (p)->stride_h;                                           \
                            if (iy_ >= (p)->in_h) {                                              \
                                continue;                                                        \
                            }                                                                    \
                            for (kx_ = 0; kx_ < (p)->kernel_w; ++kx_) {                          \
                                const int32_t tx_ = ox_ + (p)->pad_left - kx_;                   \
                                const IN_T *in_px_;                                              \
                                const int8_t *w_tap_;                                            \
                                int32_t ix_;                                                     \
                                if (tx_ < 0 || tx_ % (p)->stride_w != 0) {                       \
                                    continue;                                                    \
                                }                                                                \
                                ix_ = tx_ / (p)->stride_w;                                       \
                                if (ix_ >= (p)->in_w) {                                          \
                                    continue;                                                    \
                                }                                                                \
                                in_px_ = in_b_ + ((ptrdiff_t)iy_ * (p)->in_w + ix_) * (p)->in_c; \
                                w_tap_ = (weights) + (((ptrdiff_t)oc * (p)->kernel_h + ky_)      \
                                                          * (p)->kernel_w + kx_) * (p)->in_c;    \
                                QCONVERT_TAP_DOT(ACC_T, acc, in_px_, w_tap_, (p)->in_c,          \
                                                 (p)->input_offset);                             \
                            }                                                                    \
                        }                                                                        \
                        (output)[o_++] = FINISH(acc, oc);                                        \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* BatchMatMul (qconvert_matmul_params): ACC_T acc = sum_k (a + lhs_offset) * (b + rhs_offset);
 * output[o] = FINISH(acc), in [batch][row][col] order. */
#define QCONVERT_BATCH_MATMUL_LOOP(IN_T, ACC_T, a, b, output, p, FINISH)                         \
    do {                                                                                         \
        int32_t n_, i_, j_, k_;                                                                  \
        ptrdiff_t o_ = 0;                                                                        \
        for (n_ = 0; n_ < (p)->batches; ++n_) {                                                  \
            const IN_T *a_n_ = (a) + (p)->a_batch[n_];                                           \
            const IN_T *b_n_ = (b) + (p)->b_batch[n_];                                           \
            for (i_ = 0; i_ < (p)->rows; ++i_) {                                                 \
                for (j_ = 0; j_ < (p)->cols; ++j_) {                                             \
                    ACC_T acc = 0;                                                               \
                    for (k_ = 0; k_ < (p)->depth; ++k_) {                                        \
                        acc += (ACC_T)(a_n_[(ptrdiff_t)i_ * (p)->a_row                           \
                                            + (ptrdiff_t)k_ * (p)->a_depth] + (p)->lhs_offset)   \
                               * (b_n_[(ptrdiff_t)k_ * (p)->b_depth + (ptrdiff_t)j_ * (p)->b_col] \
                                  + (p)->rhs_offset);                                            \
                    }                                                                            \
                    (output)[o_++] = FINISH(acc);                                                \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* AveragePool (average nonzero) / MaxPool over T: conv geometry, dilation 1, out_c = in_c; the
 * average rounded half away from zero (C division), clamped to the activation range. */
#define QCONVERT_DEFINE_POOL(NAME, T, LOWEST)                                                    \
    static void NAME(const T *input, T *output, const qconvert_conv_params *p, int average)     \
    {                                                                                            \
        int32_t b, oy, ox, c, ky, kx;                                                            \
        ptrdiff_t o = 0;                                                                         \
        for (b = 0; b < p->batches; ++b) {                                                       \
            const T *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;                  \
            for (oy = 0; oy < p->out_h; ++oy) {                                                  \
                const int32_t y0 = oy * p->stride_h - p->pad_top;                                \
                for (ox = 0; ox < p->out_w; ++ox) {                                              \
                    const int32_t x0 = ox * p->stride_w - p->pad_left;                           \
                    for (c = 0; c < p->in_c; ++c) {                                              \
                        int32_t acc = average ? 0 : (LOWEST);                                    \
                        int32_t count = 0;                                                       \
                        for (ky = 0; ky < p->kernel_h; ++ky) {                                   \
                            const int32_t y = y0 + ky;                                           \
                            if (y < 0 || y >= p->in_h) {                                         \
                                continue;                                                        \
                            }                                                                    \
                            for (kx = 0; kx < p->kernel_w; ++kx) {                               \
                                const int32_t x = x0 + kx;                                       \
                                int32_t v;                                                       \
                                if (x < 0 || x >= p->in_w) {                                     \
                                    continue;                                                    \
                                }                                                                \
                                v = in_b[((ptrdiff_t)y * p->in_w + x) * p->in_c + c];            \
                                if (average) {                                                   \
                                    acc += v;                                                    \
                                } else if (v > acc) {                                            \
                                    acc = v;                                                     \
                                }                                                                \
                                ++count;                                                         \
                            }                                                                    \
                        }                                                                        \
                        if (average && count > 0) {                                              \
                            acc = acc > 0 ? (acc + count / 2) / count                            \
                                          : (acc - count / 2) / count;                           \
                        }                                                                        \
                        output[o++] = (T)qconvert_clamp(acc, p->activation_min,                  \
                                                        p->activation_max);                      \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }

/* Mean over a box of each output element (qconvert_mean_params), clamped to [LO, HI]. */
#define QCONVERT_DEFINE_MEAN(NAME, T, LO, HI)                                                    \
    void NAME(const T *input, T *output, const qconvert_mean_params *p)                          \
    {                                                                                            \
        int32_t outer[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};                                   \
        const int32_t n = qconvert_volume(p->outer.rank, p->outer.shape);                        \
        const int32_t m = qconvert_volume(p->inner.rank, p->inner.shape);                        \
        ptrdiff_t base = p->outer.in_base, po = p->outer.out_base;                               \
        int32_t i, j;                                                                            \
        for (i = 0; i < n; ++i) {                                                                \
            int32_t inner[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};                               \
            ptrdiff_t pi = base, unused = 0;                                                     \
            int32_t sum = 0;                                                                     \
            for (j = 0; j < m; ++j) {                                                            \
                sum += input[pi];                                                                \
                qconvert_step(p->inner.rank, p->inner.shape, inner, p->inner.in_strides, &pi,   \
                              p->inner.out_strides, &unused);                                    \
            }                                                                                    \
            sum = qconvert_requantize(sum - p->input_zero_point * p->count, p->multiplier,      \
                                      p->shift);                                                 \
            output[po] = (T)qconvert_clamp(sum + p->output_zero_point, LO, HI);                  \
            qconvert_step(p->outer.rank, p->outer.shape, outer, p->outer.in_strides, &base,     \
                          p->outer.out_strides, &po);                                            \
        }                                                                                        \
    }

/* Copy of a box (qconvert_box), gather by an index array, fill with one value. */
#define QCONVERT_DEFINE_MOVEMENT(COPY_BOX, GATHER, FILL, T)                                      \
    void COPY_BOX(const T *input, T *output, const qconvert_box *box)                            \
    {                                                                                            \
        int32_t index[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};                                   \
        const int32_t n = qconvert_volume(box->rank, box->shape);                                \
        const int32_t last = box->rank > 0 ? box->rank - 1 : 0;                                  \
        const int32_t inner = box->rank > 0 ? box->shape[last] : 1;                              \
        const ptrdiff_t si = box->rank > 0 ? box->in_strides[last] : 0;                          \
        const ptrdiff_t so = box->rank > 0 ? box->out_strides[last] : 0;                         \
        ptrdiff_t pi = box->in_base, po = box->out_base;                                         \
        int32_t i, j;                                                                            \
        if (inner <= 0) {                                                                        \
            return;                                                                              \
        }                                                                                        \
        /* the same element order as an odometer over every axis: the last axis in a tight */   \
        /* loop, the others stepped once per run */                                              \
        for (i = 0; i < n; i += inner) {                                                         \
            for (j = 0; j < inner; ++j) {                                                        \
                output[po + j * so] = input[pi + j * si];                                        \
            }                                                                                    \
            qconvert_step(last, box->shape, index, box->in_strides, &pi, box->out_strides, &po); \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    void GATHER(const T *input, T *output, int32_t size, const int32_t *index)                   \
    {                                                                                            \
        int32_t i;                                                                               \
        for (i = 0; i < size; ++i) {                                                             \
            output[i] = input[index[i]];                                                         \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    void FILL(T *output, int32_t size, T value)                                                  \
    {                                                                                            \
        int32_t i;                                                                               \
        for (i = 0; i < size; ++i) {                                                             \
            output[i] = value;                                                                   \
        }                                                                                        \
    }

/* Quantize (float -> T: round(x / scale) half away from zero, + zero point, clamped to [LO,
 * HI]; out of range or NaN: INT32_MIN + zero point, what x86 hosts compute, as TFLite Micro) and
 * Dequantize (T -> float: (float)(scale * (x - zero point)), in double as TFLite Micro). */
#define QCONVERT_DEFINE_QUANTIZE(QUANTIZE, DEQUANTIZE, T, LO, HI)                                \
    void QUANTIZE(const float *input, T *output, int32_t size, float scale, int32_t zero_point)  \
    {                                                                                            \
        int32_t i;                                                                               \
        for (i = 0; i < size; ++i) {                                                             \
            const float v = input[i] / scale;                                                    \
            int32_t q;                                                                           \
            if (v > -2147483648.0f && v < 2147483648.0f) {                                       \
                const float frac = v - (float)(int32_t)v; /* exact: |v| < 2^24 or v whole */     \
                q = (int32_t)v;                                                                  \
                if (frac >= 0.5f) {                                                              \
                    ++q;                                                                         \
                } else if (frac <= -0.5f) {                                                      \
                    --q;                                                                         \
                }                                                                                \
            } else {                                                                             \
                q = INT32_MIN;                                                                   \
            }                                                                                    \
            q = (int32_t)((uint32_t)q + (uint32_t)zero_point);                                   \
            output[i] = (T)qconvert_clamp(q, LO, HI);                                            \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    void DEQUANTIZE(const T *input, float *output, int32_t size, double scale,                   \
                    int32_t zero_point)                                                          \
    {                                                                                            \
        int32_t i;                                                                               \
        for (i = 0; i < size; ++i) {                                                             \
            output[i] = (float)(scale * (double)(input[i] - zero_point));                        \
        }                                                                                        \
    }

#endif /* QCONVERT_NN_LOOPS_H */
