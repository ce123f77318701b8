/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_pool.c: AveragePool and MaxPool (int8) of qconvert_nn_fast.h, TFLite Micro's
 * reference kernels bit for bit. Shipped with qconvert (Apache-2.0).
 *
 * Four channels at a time along NHWC's contiguous channel axis, one word load per tap: the
 * average sums them as two pairs of 16-bit lanes (SXTAB16; 256 taps of int8 cannot leave an
 * int16 lane, so the lanes are moved into 32-bit sums every 256 taps), the maximum keeps four
 * bytes with SSUB8 / SEL and clamps them the same way. Plain C elsewhere, the same bits.
 */
#include "qconvert_nn_simd.h"

#include <stddef.h>

/* the window of output (oy, ox) inside the image: rows [*y0, *y1), columns [*x0, *x1) */
static void pool_window(const qconvert_conv_params *p, int32_t oy, int32_t ox, int32_t *y0,
                        int32_t *y1, int32_t *x0, int32_t *x1)
{
    const int32_t ys = oy * p->stride_h - p->pad_top, xs = ox * p->stride_w - p->pad_left;
    const int32_t ye = ys + p->kernel_h, xe = xs + p->kernel_w;
    *y0 = ys < 0 ? 0 : ys;
    *y1 = ye > p->in_h ? p->in_h : ye;
    *x0 = xs < 0 ? 0 : xs;
    *x1 = xe > p->in_w ? p->in_w : xe;
}

/* TFLite's rounded average of `count` values summing to `sum` (half away from zero), clamped */
static inline int8_t pool_average(int32_t sum, int32_t count, int32_t lo, int32_t hi)
{
    if (count > 0) {
        sum = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
    }
    return (int8_t)qconvert_clamp_fast(sum, lo, hi);
}

void qconvert_avgpool_fast_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p)
{
    const int32_t C = p->in_c, C4 = C & ~3, lo = p->activation_min, hi = p->activation_max;
    const ptrdiff_t row = (ptrdiff_t)p->in_w * C;
    int32_t b, oy, ox, c, y, x;
    int8_t *out = output;
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * row;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                int32_t y0, y1, x0, x1, count;
                pool_window(p, oy, ox, &y0, &y1, &x0, &x1);
                count = y1 > y0 && x1 > x0 ? (y1 - y0) * (x1 - x0) : 0;
                for (c = 0; c < C4; c += 4) {
                    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#if QCONVERT_DSP
                    int32_t lanes02 = 0, lanes13 = 0, n = 0;
                    for (y = y0; y < y1; ++y) {
                        const int8_t *px = in_b + (ptrdiff_t)y * row + (ptrdiff_t)x0 * C + c;
                        for (x = 0; x < x1 - x0; ++x) {
                            const uint32_t v = qconvert_load32(px + (ptrdiff_t)x * C);
                            lanes02 = __sxtab16(lanes02, (int32_t)v);
                            lanes13 = qconvert_sxtab16_ror8(lanes13, v);
                            if (++n == 256) { /* before an int16 lane could overflow */
                                s0 += (int16_t)lanes02;
                                s2 += lanes02 >> 16;
                                s1 += (int16_t)lanes13;
                                s3 += lanes13 >> 16;
                                lanes02 = lanes13 = n = 0;
                            }
                        }
                    }
                    s0 += (int16_t)lanes02;
                    s2 += lanes02 >> 16;
                    s1 += (int16_t)lanes13;
                    s3 += lanes13 >> 16;
#else
                    for (y = y0; y < y1; ++y) {
                        const int8_t *px = in_b + (ptrdiff_t)y * row + (ptrdiff_t)x0 * C + c;
                        for (x = 0; x < x1 - x0; ++x) {
                            const int8_t *v = px + (ptrdiff_t)x * C;
                            s0 += v[0];
                            s1 += v[1];
                            s2 += v[2];
                            s3 += v[3];
                        }
                    }
#endif
                    out[0] = pool_average(s0, count, lo, hi);
                    out[1] = pool_average(s1, count, lo, hi);
                    out[2] = pool_average(s2, count, lo, hi);
                    out[3] = pool_average(s3, count, lo, hi);
                    out += 4;
                }
                for (c = C4; c < C; ++c) {
                    int32_t s = 0;
                    for (y = y0; y < y1; ++y) {
                        for (x = x0; x < x1; ++x) {
                            s += in_b[(ptrdiff_t)y * row + (ptrdiff_t)x * C + c];
                        }
                    }
                    *out++ = pool_average(s, count, lo, hi);
                }
            }
        }
    }
}

void qconvert_maxpool_fast_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p)
{
    const int32_t C = p->in_c, C4 = C & ~3, lo = p->activation_min, hi = p->activation_max;
    const ptrdiff_t row = (ptrdiff_t)p->in_w * C;
    int32_t b, oy, ox, c, y, x;
    int8_t *out = output;
#if QCONVERT_DSP
    const uint32_t lo4 = ((uint32_t)lo & 0xFFu) * 0x01010101u;
    const uint32_t hi4 = ((uint32_t)hi & 0xFFu) * 0x01010101u;
#endif
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * row;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                int32_t y0, y1, x0, x1;
                pool_window(p, oy, ox, &y0, &y1, &x0, &x1);
                for (c = 0; c < C4; c += 4) {
#if QCONVERT_DSP
                    uint32_t m = 0x80808080u; /* -128 in each byte */
                    for (y = y0; y < y1; ++y) {
                        const int8_t *px = in_b + (ptrdiff_t)y * row + (ptrdiff_t)x0 * C + c;
                        for (x = 0; x < x1 - x0; ++x) {
                            const uint32_t v = qconvert_load32(px + (ptrdiff_t)x * C);
                            (void)__ssub8((int32_t)v, (int32_t)m); /* GE where v >= m */
                            m = __sel(v, m);
                        }
                    }
                    (void)__ssub8((int32_t)m, (int32_t)lo4);
                    m = __sel(m, lo4);
                    (void)__ssub8((int32_t)m, (int32_t)hi4);
                    m = __sel(hi4, m);
                    memcpy(out, &m, 4);
#else
                    int32_t m0 = -128, m1 = -128, m2 = -128, m3 = -128;
                    for (y = y0; y < y1; ++y) {
                        const int8_t *px = in_b + (ptrdiff_t)y * row + (ptrdiff_t)x0 * C + c;
                        for (x = 0; x < x1 - x0; ++x) {
                            const int8_t *v = px + (ptrdiff_t)x * C;
                            m0 = v[0] > m0 ? v[0] : m0;
                            m1 = v[1] > m1 ? v[1] : m1;
                            m2 = v[2] > m2 ? v[2] : m2;
                            m3 = v[3] > m3 ? v[3] : m3;
                        }
                    }
                    out[0] = (int8_t)qconvert_clamp_fast(m0, lo, hi);
                    out[1] = (int8_t)qconvert_clamp_fast(m1, lo, hi);
                    out[2] = (int8_t)qconvert_clamp_fast(m2, lo, hi);
                    out[3] = (int8_t)qconvert_clamp_fast(m3, lo, hi);
#endif
                    out += 4;
                }
                for (c = C4; c < C; ++c) {
                    int32_t m = -128;
                    for (y = y0; y < y1; ++y) {
                        for (x = x0; x < x1; ++x) {
                            const int32_t v = in_b[(ptrdiff_t)y * row + (ptrdiff_t)x * C + c];
                            m = v > m ? v : m;
                        }
                    }
                    *out++ = (int8_t)qconvert_clamp_fast(m, lo, hi);
                }
            }
        }
    }
}
