/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_depthwise.c: DepthwiseConv2D (int8, depth multiplier 1) of qconvert_nn_fast.h,
 * TFLite Micro's reference kernel bit for bit. Shipped with qconvert (Apache-2.0).
 *
 * Four channels at a time along NHWC's contiguous channel axis: one word load of four inputs
 * and one of four weights per tap (the exporter lays the weights out in the order read), the
 * input offset added while the bytes are widened to 16-bit pairs (SXTAB16), two channels'
 * products into separate accumulators (SMLABB / SMLATT). Taps outside the image are skipped
 * (per pixel tap ranges); a full 3x3 window is unrolled, other windows go through a per-pixel
 * list of their taps; both requantize in the short form and clamp four outputs at once.
 *
 * The same source compiles a second kernel, qconvert_dw_hwc_s8, when QCONVERT_DW_HWC is defined
 * (qconvert_nn_depthwise_hwc.c): the weights in TFLite's [kh][kw][C] order and TFLite's shifts,
 * the arrays CMSIS-NN's depthwise call reads (--kernels cmsis-nn shares them).
 */
#include "qconvert_nn_simd.h"

#ifndef QCONVERT_DW_HWC
#define DW_NAME qconvert_dw_s8
#define DW_WBASE(c, taps) ((ptrdiff_t)(c) * (taps))  /* group of channel c from the weights */
#define DW_WT(t, C) ((t) * 4)                          /* tap t from its group */
#define DW_WGROUP(taps) ((taps) * 4)                   /* one group to the next */
#define DW_WTAIL(t, c, C4, taps, tail, C) /* tap t of channel C4 + c (the last C % 4) */       \
    ((ptrdiff_t)(C4) * (taps) + (ptrdiff_t)(t) * (tail) + (c))
#define DW_WTAIL_STEP(tail, C) (tail)                  /* one tap to the next, last channels */
#define DW_FAST_R(s) (s)                               /* the exporter stored -shift - 2 */
#else
#define DW_NAME qconvert_dw_hwc_s8
#define DW_WBASE(c, taps) ((ptrdiff_t)(c))
#define DW_WT(t, C) ((ptrdiff_t)(t) * (C))
#define DW_WGROUP(taps) 4
#define DW_WTAIL(t, c, C4, taps, tail, C) ((ptrdiff_t)(t) * (C) + (C4) + (c))
#define DW_WTAIL_STEP(tail, C) (C)
#define DW_FAST_R(s) (-(s) - 2)                        /* TFLite's shift */
#endif

#include <stddef.h>

#include "qconvert_fc_1x4.h"

#if QCONVERT_DSP
/* acc0..3 += (x_j + offset) * w_j for the four channels of one tap */
#define DW_TAP4(px, pw)                                                                        \
    do {                                                                                       \
        const uint32_t x_ = qconvert_load32(px), w_ = qconvert_load32(pw);                     \
        const int32_t xa_ = __sxtab16(off2, (int32_t)x_);                                      \
        const int32_t xb_ = qconvert_sxtab16_ror8(off2, x_);                                   \
        const int32_t wa_ = __sxtb16((int32_t)w_);                                             \
        const int32_t wb_ = qconvert_sxtb16_ror8(w_);                                          \
        acc0 = __smlabb(xa_, wa_, acc0);                                                       \
        acc2 = __smlatt(xa_, wa_, acc2);                                                       \
        acc1 = __smlabb(xb_, wb_, acc1);                                                       \
        acc3 = __smlatt(xb_, wb_, acc3);                                                       \
    } while (0)
#else
#define DW_TAP4(px, pw)                                                                        \
    do {                                                                                       \
        const int8_t *x_ = (px), *w_ = (pw);                                                   \
        acc0 += (x_[0] + off) * w_[0];                                                         \
        acc1 += (x_[1] + off) * w_[1];                                                         \
        acc2 += (x_[2] + off) * w_[2];                                                         \
        acc3 += (x_[3] + off) * w_[3];                                                         \
    } while (0)
#endif

/* the output stage of channel c (locals of qconvert_dw_s8: fast, mult, shift, out_off, lo, hi) */
#define DW_OUT(acc, c)                                                                         \
    (int8_t)qconvert_clamp_fast((fast ? qconvert_requantize_fast(acc, mult[c],                 \
                                                                 DW_FAST_R(shift[c]))          \
                                      : qconvert_requantize(acc, mult[c], shift[c]))           \
                                    + out_off, lo, hi)

/* first tap index k >= 0 with start + k * step >= 0, and the end with start + k * step < size */
static int32_t first_tap(int32_t start, int32_t step)
{
    return start >= 0 ? 0 : (-start + step - 1) / step;
}

static int32_t end_tap(int32_t start, int32_t step, int32_t size, int32_t taps)
{
    const int32_t end = start >= size ? 0 : (size - start + step - 1) / step;
    return end < taps ? end : taps;
}

/* what the 3x3 interior path reads besides its pointers */
typedef struct {
    ptrdiff_t dx, dy, channels, sx; /* sx: from one output pixel's window to the next */
    int32_t off2, out_off;
    uint32_t lo4, hi4; /* the clamps in each byte */
    const int32_t *bias, *mult, *shift;
} dw_ctx;

#if QCONVERT_DSP
#if defined(__GNUC__)
#define DW_NOINLINE __attribute__((noinline)) /* its own registers: no spills in the taps */
#else
#define DW_NOINLINE
#endif
/* the four requantized outputs of a group, packed into one word and clamped to [lo, hi]
 * per byte (SSUB8 / SEL): the 8-bit saturation first changes nothing the clamp keeps */
#define DW_PACK4(v0, v1, v2, v3)                                                               \
    (((uint32_t)__ssat(v0, 8) & 0xFFu) | (((uint32_t)__ssat(v1, 8) & 0xFFu) << 8) |             \
     (((uint32_t)__ssat(v2, 8) & 0xFFu) << 16) | ((uint32_t)__ssat(v3, 8) << 24))

/* channel j of the group, short requantization, + the output offset */
#define DW_REQ(acc, j) (qconvert_requantize_fast(acc, mult[j], DW_FAST_R(shift[j])) + k->out_off)

/* the four outputs of a group (locals acc0..3, mult, shift, out, packed; k): short
 * requantization, packed, clamped, stored; the per-channel pointers move on */
#define DW_FINISH4()                                                                           \
    do {                                                                                       \
        packed = DW_PACK4(DW_REQ(acc0, 0), DW_REQ(acc1, 1), DW_REQ(acc2, 2), DW_REQ(acc3, 3)); \
        (void)__ssub8((int32_t)packed, (int32_t)k->lo4);                                       \
        packed = __sel(packed, k->lo4);                                                        \
        (void)__ssub8((int32_t)packed, (int32_t)k->hi4);                                       \
        packed = __sel(k->hi4, packed);                                                        \
        memcpy(out, &packed, 4);                                                               \
        mult += 4;                                                                             \
        shift += 4;                                                                            \
        out += 4;                                                                              \
    } while (0)

#define DW_LIST_MAX 25 /* taps of the windows the list path takes (5x5) */

/* every group of four channels of one output pixel (short requantization) over a list of its
 * n taps inside the image: tap j reads input in[taps[2 j]] and weights w[taps[2 j + 1]] (then
 * both move on by four channels per group, the weights by `w_group`) */
static DW_NOINLINE void dw_list_pixel(const int8_t *in, const int8_t *w, int8_t *out,
                                      int32_t groups, const int32_t *taps, int32_t n,
                                      int32_t w_group, const dw_ctx *k)
{
    const int32_t off2 = k->off2;
    const int32_t *bias = k->bias, *mult = k->mult, *shift = k->shift;
    const int32_t *const end = taps + 2 * n;
    int32_t g;
    for (g = 0; g < groups; ++g) {
        int32_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
        const int32_t *t;
        uint32_t packed;
        if (bias != NULL) {
            acc0 = bias[0];
            acc1 = bias[1];
            acc2 = bias[2];
            acc3 = bias[3];
            bias += 4;
        }
        for (t = taps; t < end; t += 2) {
            DW_TAP4(in + t[0], w + t[1]);
        }
        DW_FINISH4();
        in += 4;
        w += w_group;
    }
}

/* every group of four channels of `npix` consecutive output pixels whose 3x3 windows lie inside
 * the image (short requantization): in is the first window's top-left tap, channel 0; the
 * windows are k->sx bytes apart; the pixels have no channels past the groups */
static DW_NOINLINE void dw3x3_pixels(const int8_t *in, const int8_t *weights, int8_t *out,
                                     int32_t groups, int32_t npix, const dw_ctx *k)
{
    const ptrdiff_t dx = k->dx, dy = k->dy, C = k->channels;
    const int32_t off2 = k->off2;
    int32_t g, px;
    (void)C;
    for (px = 0; px < npix; ++px) {
        const int32_t *bias = k->bias, *mult = k->mult, *shift = k->shift;
        const int8_t *w = weights;
        const int8_t *in_g = in + (ptrdiff_t)px * k->sx;
        for (g = 0; g < groups; ++g) {
            int32_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
            uint32_t packed;
            if (bias != NULL) {
                acc0 = bias[0];
                acc1 = bias[1];
                acc2 = bias[2];
                acc3 = bias[3];
                bias += 4;
            }
            DW_TAP4(in_g, w);
            DW_TAP4(in_g + dx, w + DW_WT(1, C));
            DW_TAP4(in_g + 2 * dx, w + DW_WT(2, C));
            DW_TAP4(in_g + dy, w + DW_WT(3, C));
            DW_TAP4(in_g + dy + dx, w + DW_WT(4, C));
            DW_TAP4(in_g + dy + 2 * dx, w + DW_WT(5, C));
            DW_TAP4(in_g + 2 * dy, w + DW_WT(6, C));
            DW_TAP4(in_g + 2 * dy + dx, w + DW_WT(7, C));
            DW_TAP4(in_g + 2 * dy + 2 * dx, w + DW_WT(8, C));
            w += DW_WGROUP(9);
            DW_FINISH4();
            in_g += 4;
        }
    }
}
#endif

void DW_NAME(const int8_t *input, const int8_t *weights, const int32_t *bias, int8_t *output,
             const qconvert_dw_params *p)
{
    const int32_t C = p->channels, C4 = C & ~3, kw = p->kernel_w;
    const int32_t taps = p->kernel_h * kw, tail = C - C4;
    const ptrdiff_t row = (ptrdiff_t)p->in_w * C;
    const ptrdiff_t dx = (ptrdiff_t)p->dilation_w * C, dy = (ptrdiff_t)p->dilation_h * row;
    const int32_t off = p->input_offset, out_off = p->output_offset;
    const int32_t lo = p->activation_min, hi = p->activation_max, fast = p->fast_requantize;
    const int32_t *const mult = p->multiplier, *const shift = p->shift;
#if QCONVERT_DSP
    const int32_t off2 = (int32_t)(((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16));
    dw_ctx k;
    k.dx = dx;
    k.channels = C;
    k.sx = (ptrdiff_t)p->stride_w * C;
    k.dy = dy;
    k.off2 = off2;
    k.out_off = out_off;
    k.lo4 = ((uint32_t)lo & 0xFFu) * 0x01010101u;
    k.hi4 = ((uint32_t)hi & 0xFFu) * 0x01010101u;
    k.bias = bias;
    k.mult = mult;
    k.shift = shift;
#endif
    int32_t b, oy, ox, c, ky, kx;
    int8_t *out = output;
#if QCONVERT_DSP
    /* the end of the output columns whose 3-wide windows lie inside the image (those from
     * the first full one on) */
    const int32_t last_x0 = p->in_w - 1 - 2 * p->dilation_w + p->pad_left;
    const int32_t ox_end = last_x0 < 0 ? 0
                           : (last_x0 / p->stride_w + 1 < p->out_w ? last_x0 / p->stride_w + 1
                                                                   : p->out_w);
#endif
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * row;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t ky0 = first_tap(y0, p->dilation_h);
            const int32_t ky1 = end_tap(y0, p->dilation_h, p->in_h, p->kernel_h);
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t kx0 = first_tap(x0, p->dilation_w);
                const int32_t kx1 = end_tap(x0, p->dilation_w, p->in_w, kw);
                const int full3 = taps == 9 && kw == 3 && ky0 == 0 && ky1 == 3 && kx0 == 0 &&
                                  kx1 == 3;
                /* the first tap inside the image, channel 0 */
                const int8_t *in_px = ky0 < ky1 && kx0 < kx1
                    ? in_b + (ptrdiff_t)(y0 + ky0 * p->dilation_h) * row
                          + (ptrdiff_t)(x0 + kx0 * p->dilation_w) * C
                    : in_b;
                c = 0;
#if QCONVERT_DSP
                if (full3 && fast && tail == 0) {
                    /* this pixel and the next ones up to the right border, at once */
                    const int32_t n = ox_end - ox;
                    dw3x3_pixels(in_px, weights, out, C4 / 4, n, &k);
                    out += (ptrdiff_t)n * C;
                    ox += n - 1;
                    continue;
                }
                if (full3 && fast) {
                    dw3x3_pixels(in_px, weights, out, C4 / 4, 1, &k);
                    out += C4;
                    c = C4;
                } else if (fast && C4 > 0 && taps <= DW_LIST_MAX) {
                    int32_t list[2 * DW_LIST_MAX], n = 0;
                    for (ky = ky0; ky < ky1; ++ky) {
                        for (kx = kx0; kx < kx1; ++kx) {
                            list[n++] = (int32_t)((ky - ky0) * dy + (kx - kx0) * dx);
                            list[n++] = (int32_t)DW_WT(ky * kw + kx, C);
                        }
                    }
                    dw_list_pixel(in_px, weights, out, C4 / 4, list, n / 2, DW_WGROUP(taps),
                                  &k);
                    out += C4;
                    c = C4;
                }
#endif
                for (; c < C4; c += 4) {
                    const int8_t *wg = weights + DW_WBASE(c, taps);
                    int32_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
                    if (bias != NULL) {
                        acc0 = bias[c];
                        acc1 = bias[c + 1];
                        acc2 = bias[c + 2];
                        acc3 = bias[c + 3];
                    }
                    if (full3) {
                        for (ky = 0; ky < 3; ++ky) {
                            const int8_t *r = in_px + c + ky * dy;
                            const int8_t *pw = wg + DW_WT(3 * ky, C);
                            DW_TAP4(r, pw);
                            DW_TAP4(r + dx, pw + DW_WT(1, C));
                            DW_TAP4(r + 2 * dx, pw + DW_WT(2, C));
                        }
                    } else {
                        for (ky = ky0; ky < ky1; ++ky) {
                            const int8_t *r = in_px + c + (ky - ky0) * dy;
                            const int8_t *pw = wg + DW_WT(ky * kw + kx0, C);
                            for (kx = 0; kx < kx1 - kx0; ++kx) {
                                DW_TAP4(r + kx * dx, pw + DW_WT(kx, C));
                            }
                        }
                    }
                    out[0] = DW_OUT(acc0, c);
                    out[1] = DW_OUT(acc1, c + 1);
                    out[2] = DW_OUT(acc2, c + 2);
                    out[3] = DW_OUT(acc3, c + 3);
                    out += 4;
                }
                for (c = 0; c < tail; ++c) {
                    int32_t acc = bias != NULL ? bias[C4 + c] : 0;
                    for (ky = ky0; ky < ky1; ++ky) {
                        const int8_t *r = in_px + C4 + c + (ky - ky0) * dy;
                        const int8_t *pw =
                            weights + DW_WTAIL(ky * kw + kx0, c, C4, taps, tail, C);
                        for (kx = 0; kx < kx1 - kx0; ++kx) {
                            acc += (r[kx * dx] + off) * pw[kx * DW_WTAIL_STEP(tail, C)];
                        }
                    }
                    *out++ = DW_OUT(acc, C4 + c);
                }
            }
        }
    }
}
