/* qconvert_nn_depthwise.c: DepthwiseConv2D (int8, depth multiplier 1) of qconvert_nn_fast.h,
 * TFLite Micro's reference kernel bit for bit. Shipped with qconvert (Apache-2.0).
 *
 * Four channels at a time along NHWC's contiguous channel axis: one word load of four inputs
 * and one of four weights per tap (the exporter lays the weights out in the order read), the
 * input offset added while the bytes are widened to 16-bit pairs (SXTAB16), two channels'
 * products into separate accumulators (SMLABB / SMLATT). Taps outside the image are skipped
 * (per pixel tap ranges), so the border needs no other path; a full 3x3 window is unrolled.
 */
#include "qconvert_nn_simd.h"

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
    (int8_t)qconvert_clamp_fast((fast ? qconvert_requantize_fast(acc, mult[c], shift[c])       \
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

void qconvert_dw_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                    int8_t *output, const qconvert_dw_params *p)
{
    const int32_t C = p->channels, C4 = C & ~3, kw = p->kernel_w;
    const int32_t taps = p->kernel_h * kw, tail = C - C4;
    const ptrdiff_t row = (ptrdiff_t)p->in_w * C;
    const ptrdiff_t dx = (ptrdiff_t)p->dilation_w * C, dy = (ptrdiff_t)p->dilation_h * row;
    const int8_t *w_tail = weights + (ptrdiff_t)C4 * taps;
    const int32_t off = p->input_offset, out_off = p->output_offset;
    const int32_t lo = p->activation_min, hi = p->activation_max, fast = p->fast_requantize;
    const int32_t *const mult = p->multiplier, *const shift = p->shift;
#if QCONVERT_DSP
    const int32_t off2 = (int32_t)(((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16));
#endif
    int32_t b, oy, ox, c, ky, kx;
    int8_t *out = output;
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
                for (c = 0; c < C4; c += 4) {
                    const int8_t *wg = weights + (ptrdiff_t)c * taps;
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
                            const int8_t *pw = wg + 12 * ky;
                            DW_TAP4(r, pw);
                            DW_TAP4(r + dx, pw + 4);
                            DW_TAP4(r + 2 * dx, pw + 8);
                        }
                    } else {
                        for (ky = ky0; ky < ky1; ++ky) {
                            const int8_t *r = in_px + c + (ky - ky0) * dy;
                            const int8_t *pw = wg + (ky * kw + kx0) * 4;
                            for (kx = 0; kx < kx1 - kx0; ++kx) {
                                DW_TAP4(r + kx * dx, pw + kx * 4);
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
                        const int8_t *pw = w_tail + (ky * kw + kx0) * tail + c;
                        for (kx = 0; kx < kx1 - kx0; ++kx) {
                            acc += (r[kx * dx] + off) * pw[kx * tail];
                        }
                    }
                    *out++ = DW_OUT(acc, C4 + c);
                }
            }
        }
    }
}
