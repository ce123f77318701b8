/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_convfc.c: the fast int8 convolution and fully connected kernels of
 * qconvert_nn_convfc.h. Shipped with qconvert (Apache-2.0).
 *
 * int16 pairs. A 32-bit word holds two int16 values, the low half first. SXTB16(w) gives the
 * int8 bytes 0 and 2 of w sign-extended to int16, SXTB16(w rotated right by 8) bytes 1 and 3.
 * An im2col column is int16: depth values (the input offset added, padded taps 0) padded with
 * zeros to a multiple of 4 and stored per group of four as (x0, x2), (x1, x3): exactly the two
 * SXTB16 results of the group's four bytes. The weights stay int8 (each group of four in its
 * natural order) and are expanded the same way inside the loop, so SMLAD(weight pair, column
 * pair) adds w0 * x0 + w2 * x2, then w1 * x1 + w3 * x3. The fully connected kernel expands its
 * input the same way inside the loop (its input offset is in the bias it starts from).
 *
 * Without __ARM_FEATURE_DSP (or on a big-endian core) the four intrinsics are plain C on the
 * same words; the accumulators wrap mod 2^32 as the device's int32 does, without signed
 * overflow in C. Only implementation-defined behaviour every two's-complement target shares is
 * relied on (right shift of negative values, narrowing conversions).
 */
#include "qconvert_nn_convfc.h"

#include <stddef.h>
#include <string.h>

#if defined(__ARM_FEATURE_DSP) && !defined(__ARM_BIG_ENDIAN)
#include <arm_acle.h>
#define QC_DSP 1
#else
#define QC_DSP 0
#endif

#if defined(__GNUC__)
#define QC_ALIGNED(p) __builtin_assume_aligned((p), 4)
#else
#define QC_ALIGNED(p) (p)
#endif

/* the pair kernels and qc_append inlined into every caller (measured on Cortex-M4: calls cost
 * the one-group loop 2 %, once the grouped loop is a second caller) */
#if defined(__GNUC__)
#define QC_INLINE static inline __attribute__((always_inline))
#else
#define QC_INLINE static inline
#endif

#if QC_DSP
static inline uint32_t qc_load32(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t qc_sxtb16(uint32_t x)
{
    return (uint32_t)__sxtb16((int32_t)x);
}

static inline uint32_t qc_sxtb16_ror8(uint32_t x)
{
#if defined(__GNUC__)
    uint32_t r; /* one instruction: gcc does not fold the rotation into SXTB16 */
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
#else
    return (uint32_t)__sxtb16((int32_t)__ror(x, 8));
#endif
}

static inline uint32_t qc_sadd16(uint32_t a, uint32_t b)
{
    return (uint32_t)__sadd16((int32_t)a, (int32_t)b);
}

static inline int32_t qc_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlad((int32_t)a, (int32_t)b, acc);
}
#else
/* the bytes of p as a little-endian word, whatever the host's byte order */
static inline uint32_t qc_load32(const int8_t *p)
{
    const uint8_t *u = (const uint8_t *)p;
    return (uint32_t)u[0] | ((uint32_t)u[1] << 8) | ((uint32_t)u[2] << 16)
           | ((uint32_t)u[3] << 24);
}

/* the low byte of b sign-extended, as the bits of a uint32_t */
static inline uint32_t qc_sext8(uint32_t b)
{
    return ((b & 0xffu) ^ 0x80u) - 0x80u;
}

static inline uint32_t qc_sxtb16(uint32_t x)
{
    return (qc_sext8(x) & 0xffffu) | (qc_sext8(x >> 16) << 16);
}

static inline uint32_t qc_sxtb16_ror8(uint32_t x)
{
    return (qc_sext8(x >> 8) & 0xffffu) | (qc_sext8(x >> 24) << 16);
}

static inline uint32_t qc_sadd16(uint32_t a, uint32_t b)
{
    return ((a + b) & 0xffffu) | (((a >> 16) + (b >> 16)) << 16);
}

static inline int32_t qc_half(uint32_t h)
{
    return (int32_t)((h & 0xffffu) ^ 0x8000u) - 0x8000;
}

static inline int32_t qc_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    const uint32_t lo = (uint32_t)(qc_half(a) * qc_half(b));
    const uint32_t hi = (uint32_t)(qc_half(a >> 16) * qc_half(b >> 16));
    return (int32_t)((uint32_t)acc + lo + hi);
}
#endif

/* acc + x (mod 2^32, no signed overflow) */
static inline int32_t qc_add(int32_t acc, int32_t x)
{
    return (int32_t)((uint32_t)acc + (uint32_t)x);
}

/* two int16 copies of v (|v| < 2^15) in one word */
static inline uint32_t qc_pair(int32_t v)
{
    return ((uint32_t)v & 0xffffu) | ((uint32_t)v << 16);
}

/* TFLite's MultiplyByQuantizedMultiplier (multiplier >= 0, so the doubling high multiply never
 * saturates), or CMSIS-NN's single rounding with QCONVERT_SINGLE_ROUNDING; then the output
 * offset and the clamp. */
static inline int8_t qc_output(int32_t acc, int32_t multiplier, int32_t shift, int32_t offset,
                               int32_t lo, int32_t hi)
{
    int32_t v;
#ifdef QCONVERT_SINGLE_ROUNDING
    const int64_t product = (int64_t)acc * multiplier;
    v = (int32_t)(((product >> (30 - shift)) + 1) >> 1);
#else
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    const int32_t x = (int32_t)((uint32_t)acc << left);
    const int32_t high = (int32_t)(((int64_t)x * multiplier + ((int64_t)1 << 30)) >> 31);
    const int32_t mask = (int32_t)(((uint32_t)1 << right) - 1u);
    const int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
    v = (high >> right) + ((high & mask) > threshold ? 1 : 0);
#endif
    v = qc_add(v, offset);
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (int8_t)v;
}

/* round(2 * x * m / 2^32): TFLite's doubling high multiply when |x| < 2^30 (one SMMULR) */
static inline int32_t qc_high_mul(int32_t x, int32_t m)
{
#if QC_DSP && defined(__GNUC__)
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(x * 2), "r"(m));
    return r;
#else
    return (int32_t)(((int64_t)x * m + ((int64_t)1 << 30)) >> 31);
#endif
}

/* out[c] for c < count from the accumulators acc[c] with channel c's multiplier[c * step],
 * shift[c * step] (step 0: one for all). `small`: every shift is <= 0 and |acc| < 2^30 (the
 * code generator proves it from the weights and bias), so the doubling high multiply is one
 * SMMULR and TFLite's rounding divide by 2^r is (x + 2^(r-1) - (x < 0)) >> r without overflow
 * (r > 0; r = 0 leaves x). Double rounding only: a QCONVERT_SINGLE_ROUNDING build takes
 * qc_output. */
static void qc_requantize_row(const int32_t *acc, int8_t *out, int32_t count,
                              const int32_t *multiplier, const int32_t *shift, int32_t step,
                              int32_t offset, int32_t lo, int32_t hi, int small)
{
    int32_t c;
#ifndef QCONVERT_SINGLE_ROUNDING
    if (small) {
        for (c = 0; c < count; ++c) {
            const int32_t r = -shift[c * step];
            const int32_t x = qc_high_mul(acc[c], multiplier[c * step]);
            int32_t v = r > 0 ? (x + ((int32_t)1 << (r - 1)) + (x >> 31)) >> r : x;
            v += offset;
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
            out[c] = (int8_t)v;
        }
        return;
    }
#else
    (void)small;
#endif
    for (c = 0; c < count; ++c) {
        out[c] = qc_output(acc[c], multiplier[c * step], shift[c * step], offset, lo, hi);
    }
}

/* qc_requantize_row for two pixels of the same channels (out0 and out1 may be the same pixel,
 * then acc0 and acc1 hold the same values): the per-channel work is done once for both. */
QC_INLINE void qc_requantize_pair(const int32_t *acc0, const int32_t *acc1, int8_t *out0,
                                  int8_t *out1, int32_t count, const int32_t *multiplier,
                                  const int32_t *shift, int32_t offset, int32_t lo, int32_t hi,
                                  int small)
{
#ifndef QCONVERT_SINGLE_ROUNDING
    if (small) {
        int32_t c;
        for (c = 0; c < count; ++c) {
            const int32_t r = -shift[c], m = multiplier[c];
            const int32_t x0 = qc_high_mul(acc0[c], m), x1 = qc_high_mul(acc1[c], m);
            int32_t v0 = x0, v1 = x1;
            if (r > 0) {
                const int32_t nudge = (int32_t)1 << (r - 1);
                v0 = (x0 + nudge + (x0 >> 31)) >> r;
                v1 = (x1 + nudge + (x1 >> 31)) >> r;
            }
            v0 += offset;
            v1 += offset;
            v0 = v0 < lo ? lo : v0;
            v1 = v1 < lo ? lo : v1;
            out0[c] = (int8_t)(v0 > hi ? hi : v0);
            out1[c] = (int8_t)(v1 > hi ? hi : v1);
        }
        return;
    }
#endif
    qc_requantize_row(acc0, out0, count, multiplier, shift, 1, offset, lo, hi, small);
    qc_requantize_row(acc1, out1, count, multiplier, shift, 1, offset, lo, hi, small);
}

/* -- convolution ----------------------------------------------------------------------------- */

/* Column position k (of the file comment's order) set to v: group k / 4 at words step * g
 * (x0, x2) and step * g + 1 (x1, x3). */
static inline void qc_put16(uint32_t *col, int32_t step, int32_t k, int32_t v)
{
    uint32_t *word = col + step * (k >> 2) + (k & 1);
    const int32_t shift = (k & 2) ? 16 : 0;
    *word = (*word & ~(0xffffu << shift)) | (((uint32_t)v & 0xffffu) << shift);
}

/* Column positions k .. k + n - 1 set to src[0 .. n - 1] + offset (both halves of off2), or to
 * 0 when src is NULL (padding); whole groups of four one word pair at a time. Returns k + n. */
QC_INLINE int32_t qc_append(uint32_t *col, int32_t step, int32_t k, const int8_t *src, int32_t n,
                            int32_t offset, uint32_t off2)
{
    for (; n > 0 && (k & 3) != 0; --n, ++k) {
        qc_put16(col, step, k, src != NULL ? *src++ + offset : 0);
    }
    if (n >= 4) {
        const int32_t groups = n >> 2;
        uint32_t *word = col + step * (k >> 2);
        int32_t g;
        if (src != NULL) {
            for (g = 0; g < groups; ++g) {
                const uint32_t w = qc_load32(src);
                word[0] = qc_sadd16(qc_sxtb16(w), off2);
                word[1] = qc_sadd16(qc_sxtb16_ror8(w), off2);
                word += step;
                src += 4;
            }
        } else {
            for (g = 0; g < groups; ++g) {
                word[0] = 0;
                word[1] = 0;
                word += step;
            }
        }
        k += 4 * groups;
        n -= 4 * groups;
    }
    for (; n > 0; --n, ++k) {
        qc_put16(col, step, k, src != NULL ? *src++ + offset : 0);
    }
    return k;
}

/* The column of output pixel (oy, ox) of image `in` (see the file comment): group g at words
 * step * g and step * g + 1. Each kernel row is appended as runs: padding, the taps inside
 * the image (one run when the dilation is 1: they are contiguous in NHWC), padding. */
static void qc_column(uint32_t *col, const int8_t *in, int32_t oy, int32_t ox, int32_t step,
                      const qconvert_conv_params *p)
{
    const int32_t y0 = oy * p->stride_h - p->pad_top;
    const int32_t x0 = ox * p->stride_w - p->pad_left;
    const int32_t in_c = p->in_c, kw = p->kernel_w, off = p->input_offset;
    const uint32_t off2 = qc_pair(off);
    int32_t ky, kx, k = 0;
    for (ky = 0; ky < p->kernel_h; ++ky) {
        const int32_t y = y0 + ky * p->dilation_h;
        if (y < 0 || y >= p->in_h) {
            k = qc_append(col, step, k, NULL, kw * in_c, off, off2);
        } else if (p->dilation_w == 1) {
            const int32_t lo = x0 > 0 ? x0 : 0;
            const int32_t hi = x0 + kw < p->in_w ? x0 + kw : p->in_w;
            if (hi <= lo) {
                k = qc_append(col, step, k, NULL, kw * in_c, off, off2);
            } else {
                k = qc_append(col, step, k, NULL, (lo - x0) * in_c, off, off2);
                k = qc_append(col, step, k, in + ((ptrdiff_t)y * p->in_w + lo) * in_c,
                              (hi - lo) * in_c, off, off2);
                k = qc_append(col, step, k, NULL, (x0 + kw - hi) * in_c, off, off2);
            }
        } else {
            for (kx = 0; kx < kw; ++kx) {
                const int32_t x = x0 + kx * p->dilation_w;
                const int inside = x >= 0 && x < p->in_w;
                k = qc_append(col, step, k,
                              inside ? in + ((ptrdiff_t)y * p->in_w + x) * in_c : NULL, in_c,
                              off, off2);
            }
        }
    }
    qc_append(col, step, k, NULL, (4 - (k & 3)) & 3, off, off2); /* the last group's zeros */
}

/* qc_column of one convolution group: the `cin` channels from `in` (the group's first channel;
 * pixels p->in_c apart in NHWC), one run per kernel tap. */
static void qc_column_part(uint32_t *col, const int8_t *in, int32_t oy, int32_t ox, int32_t step,
                           int32_t cin, const qconvert_conv_params *p)
{
    const int32_t y0 = oy * p->stride_h - p->pad_top;
    const int32_t x0 = ox * p->stride_w - p->pad_left;
    const int32_t in_c = p->in_c, kw = p->kernel_w, off = p->input_offset;
    const uint32_t off2 = qc_pair(off);
    int32_t ky, kx, k = 0;
    for (ky = 0; ky < p->kernel_h; ++ky) {
        const int32_t y = y0 + ky * p->dilation_h;
        if (y < 0 || y >= p->in_h) {
            k = qc_append(col, step, k, NULL, kw * cin, off, off2);
            continue;
        }
        for (kx = 0; kx < kw; ++kx) {
            const int32_t x = x0 + kx * p->dilation_w;
            const int inside = x >= 0 && x < p->in_w;
            k = qc_append(col, step, k,
                          inside ? in + ((ptrdiff_t)y * p->in_w + x) * in_c : NULL, cin,
                          off, off2);
        }
    }
    qc_append(col, step, k, NULL, (4 - (k & 3)) & 3, off, off2); /* the last group's zeros */
}

/* One group of four values (weights at w + WO, columns at c + CO) into the 2x2 block. */
#define QC_GROUP_2X2(WO, CO)                                                                    \
    do {                                                                                        \
        const uint32_t va = qc_load32(w + (WO)), vb = qc_load32(w + (WO) + 4);                  \
        const uint32_t ae = qc_sxtb16(va), ao = qc_sxtb16_ror8(va);                             \
        const uint32_t be = qc_sxtb16(vb), bo = qc_sxtb16_ror8(vb);                             \
        a0 = qc_smlad(ae, c[(CO)], a0);                                                         \
        a0 = qc_smlad(ao, c[(CO) + 1], a0);                                                     \
        b0 = qc_smlad(be, c[(CO)], b0);                                                         \
        b0 = qc_smlad(bo, c[(CO) + 1], b0);                                                     \
        a1 = qc_smlad(ae, c[(CO) + 2], a1);                                                     \
        a1 = qc_smlad(ao, c[(CO) + 3], a1);                                                     \
        b1 = qc_smlad(be, c[(CO) + 2], b1);                                                     \
        b1 = qc_smlad(bo, c[(CO) + 3], b1);                                                     \
    } while (0)

/* The accumulators of two pixels for every output channel into acc0[], acc1[]. `cols`: their
 * columns interleaved by group (four words per group: pixel 0's pair, pixel 1's pair).
 * Weights: the rows of each pair of channels interleaved by group of four values (eight bytes
 * per group), then the last row of an odd count. */
QC_INLINE void qc_conv_pair(const int8_t *weights, const int32_t *bias, const uint32_t *cols,
                            int32_t *acc0, int32_t *acc1, int32_t groups, int32_t out_c)
{
    const uint32_t *const end = cols + 4 * groups;
    const int8_t *w = QC_ALIGNED(weights);
    int32_t oc;
    for (oc = 0; oc + 1 < out_c; oc += 2) {
        const uint32_t *c = cols;
        int32_t a0 = bias != NULL ? bias[oc] : 0;
        int32_t b0 = bias != NULL ? bias[oc + 1] : 0;
        int32_t a1 = a0, b1 = b0;
        if (groups & 1) {
            QC_GROUP_2X2(0, 0);
            w += 8;
            c += 4;
        }
        while (c < end) { /* two groups per pass */
            QC_GROUP_2X2(0, 0);
            QC_GROUP_2X2(8, 4);
            w += 16;
            c += 8;
        }
        acc0[oc] = a0;
        acc0[oc + 1] = b0;
        acc1[oc] = a1;
        acc1[oc + 1] = b1;
    }
    if (oc < out_c) { /* the last channel of an odd count */
        const uint32_t *c = cols;
        int32_t a0 = bias != NULL ? bias[oc] : 0;
        int32_t a1 = a0;
        do {
            const uint32_t va = qc_load32(w);
            const uint32_t ae = qc_sxtb16(va), ao = qc_sxtb16_ror8(va);
            a0 = qc_smlad(ae, c[0], a0);
            a0 = qc_smlad(ao, c[1], a0);
            a1 = qc_smlad(ae, c[2], a1);
            a1 = qc_smlad(ao, c[3], a1);
            w += 4;
            c += 4;
        } while (c < end);
        acc0[oc] = a0;
        acc1[oc] = a1;
    }
}

void qconvert_conv_fast_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                           int8_t *output, void *scratch, const qconvert_conv_params *p,
                           int32_t small)
{
    const int32_t parts = p->depth_multiplier > 1 ? p->depth_multiplier : 1; /* groups */
    const int32_t cin = p->in_c / parts, cout = p->out_c / parts;
    const int32_t depth = p->kernel_h * p->kernel_w * cin;
    const int32_t groups = (depth + 3) / 4;
    const ptrdiff_t part_weights = (ptrdiff_t)4 * groups * cout;
    const int32_t pixels = p->out_h * p->out_w, out_c = p->out_c;
    const ptrdiff_t in_image = (ptrdiff_t)p->in_h * p->in_w * p->in_c;
    const ptrdiff_t out_image = (ptrdiff_t)pixels * out_c;
    uint32_t *const cols = (uint32_t *)scratch;
    int32_t *const acc0 = (int32_t *)(void *)(cols + 4 * groups * parts);
    int32_t *const acc1 = acc0 + cout;
    int32_t n, i, g;
    for (n = 0; n < p->batches; ++n) {
        const int8_t *in = input + n * in_image;
        int8_t *out = output + n * out_image;
        for (i = 0; i < pixels && parts == 1; i += 2) { /* one group: the shorter loop */
            const int32_t second = i + 1 < pixels ? i + 1 : i; /* odd count: the last twice */
            qc_column(cols, in, i / p->out_w, i % p->out_w, 4, p);
            qc_column(cols + 2, in, second / p->out_w, second % p->out_w, 4, p);
            qc_conv_pair(weights, bias, cols, acc0, acc1, groups, out_c);
            qc_requantize_pair(acc0, acc1, out + (ptrdiff_t)i * out_c,
                               out + (ptrdiff_t)second * out_c, out_c, p->multiplier, p->shift,
                               p->output_offset, p->activation_min, p->activation_max, small);
        }
        for (i = 0; i < pixels && parts > 1; i += 2) {
            const int32_t second = i + 1 < pixels ? i + 1 : i; /* odd count: the last twice */
            for (g = 0; g < parts; ++g) { /* every column of the pair before any output */
                uint32_t *const c = cols + 4 * groups * g;
                qc_column_part(c, in + g * cin, i / p->out_w, i % p->out_w, 4, cin, p);
                qc_column_part(c + 2, in + g * cin, second / p->out_w, second % p->out_w, 4, cin,
                               p);
            }
            for (g = 0; g < parts; ++g) {
                const int32_t oc = g * cout;
                qc_conv_pair(weights + g * part_weights, bias != NULL ? bias + oc : NULL,
                             cols + 4 * groups * g, acc0, acc1, groups, cout);
                qc_requantize_pair(acc0, acc1, out + (ptrdiff_t)i * out_c + oc,
                                   out + (ptrdiff_t)second * out_c + oc, cout,
                                   p->multiplier + oc, p->shift + oc, p->output_offset,
                                   p->activation_min, p->activation_max, small);
            }
        }
    }
}

/* -- fully connected ------------------------------------------------------------------------- */

void qconvert_fc_fast_s8(const int8_t *input, const int8_t *weights, const int32_t *sums,
                         int8_t *output, int32_t batches, int32_t accum_depth,
                         int32_t output_depth, const qconvert_fc_quant *quant, int32_t small)
{
    const int32_t rows4 = output_depth - output_depth % 4;
    const int32_t groups = accum_depth / 4;
    const int32_t w_off = quant->weights_offset;
    const uint32_t woff2 = qc_pair(w_off);
    const int32_t step = quant->per_channel ? 1 : 0;
    int32_t b;
    for (b = 0; b < batches; ++b) {
        const int8_t *x = input + (ptrdiff_t)b * accum_depth;
        const int8_t *const end = x + 4 * groups;
        int8_t *y = output + (ptrdiff_t)b * output_depth;
        const int8_t *w = QC_ALIGNED(weights);
        int32_t r;
        for (r = 0; r < rows4; r += 4) {
            int32_t acc[4];
            int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            int32_t c, k;
            const int8_t *xp = x;
            if (w_off == 0) {
                while (xp < end) {
                    const uint32_t xw = qc_load32(xp);
                    const uint32_t xe = qc_sxtb16(xw), xo = qc_sxtb16_ror8(xw);
                    const uint32_t w0 = qc_load32(w), w1 = qc_load32(w + 4);
                    const uint32_t w2 = qc_load32(w + 8), w3 = qc_load32(w + 12);
                    a0 = qc_smlad(qc_sxtb16(w0), xe, a0);
                    a1 = qc_smlad(qc_sxtb16_ror8(w0), xe, a1);
                    a2 = qc_smlad(qc_sxtb16(w1), xe, a2);
                    a3 = qc_smlad(qc_sxtb16_ror8(w1), xe, a3);
                    a0 = qc_smlad(qc_sxtb16(w2), xo, a0);
                    a1 = qc_smlad(qc_sxtb16_ror8(w2), xo, a1);
                    a2 = qc_smlad(qc_sxtb16(w3), xo, a2);
                    a3 = qc_smlad(qc_sxtb16_ror8(w3), xo, a3);
                    w += 16;
                    xp += 4;
                }
            } else {
                while (xp < end) {
                    const uint32_t xw = qc_load32(xp);
                    const uint32_t xe = qc_sxtb16(xw), xo = qc_sxtb16_ror8(xw);
                    const uint32_t w0 = qc_load32(w), w1 = qc_load32(w + 4);
                    const uint32_t w2 = qc_load32(w + 8), w3 = qc_load32(w + 12);
                    a0 = qc_smlad(qc_sadd16(qc_sxtb16(w0), woff2), xe, a0);
                    a1 = qc_smlad(qc_sadd16(qc_sxtb16_ror8(w0), woff2), xe, a1);
                    a2 = qc_smlad(qc_sadd16(qc_sxtb16(w1), woff2), xe, a2);
                    a3 = qc_smlad(qc_sadd16(qc_sxtb16_ror8(w1), woff2), xe, a3);
                    a0 = qc_smlad(qc_sadd16(qc_sxtb16(w2), woff2), xo, a0);
                    a1 = qc_smlad(qc_sadd16(qc_sxtb16_ror8(w2), woff2), xo, a1);
                    a2 = qc_smlad(qc_sadd16(qc_sxtb16(w3), woff2), xo, a2);
                    a3 = qc_smlad(qc_sadd16(qc_sxtb16_ror8(w3), woff2), xo, a3);
                    w += 16;
                    xp += 4;
                }
            }
            acc[0] = a0;
            acc[1] = a1;
            acc[2] = a2;
            acc[3] = a3;
            for (c = 4 * groups; c < accum_depth; ++c) { /* leftover columns: four rows each */
                for (k = 0; k < 4; ++k) {
                    acc[k] = qc_add(acc[k], (w[k] + w_off) * x[c]);
                }
                w += 4;
            }
            if (sums != NULL) {
                for (k = 0; k < 4; ++k) {
                    acc[k] = qc_add(acc[k], sums[r + k]);
                }
            }
            qc_requantize_row(acc, y + r, 4, quant->multiplier + step * r,
                              quant->shift + step * r, step, quant->output_offset,
                              quant->activation_min, quant->activation_max, small);
        }
        for (; r < output_depth; ++r) { /* leftover rows, row-major: four columns a pass */
            int32_t acc = sums != NULL ? sums[r] : 0;
            int32_t c;
            for (c = 0; c + 4 <= accum_depth; c += 4) {
                const uint32_t xw = qc_load32(x + c), ww = qc_load32(w + c);
                uint32_t we = qc_sxtb16(ww), wo = qc_sxtb16_ror8(ww);
                if (w_off != 0) {
                    we = qc_sadd16(we, woff2);
                    wo = qc_sadd16(wo, woff2);
                }
                acc = qc_smlad(we, qc_sxtb16(xw), acc);
                acc = qc_smlad(wo, qc_sxtb16_ror8(xw), acc);
            }
            for (; c < accum_depth; ++c) {
                acc = qc_add(acc, (w[c] + w_off) * x[c]);
            }
            w += accum_depth;
            qc_requantize_row(&acc, y + r, 1, quant->multiplier + step * r,
                              quant->shift + step * r, step, quant->output_offset,
                              quant->activation_min, quant->activation_max, small);
        }
    }
}
