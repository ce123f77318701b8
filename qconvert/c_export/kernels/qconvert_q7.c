/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_q7.c: the portable power-of-two q7 kernels (qconvert_q7.h). Strict C99: no
 * signed shift of a negative value (floor shifts are spelled out), 32-bit accumulators. Where
 * the Arm DSP extension is there (__ARM_FEATURE_DSP: Cortex-M4, M7, M33, M55) dot products take
 * four bytes per step with the ACLE intrinsics (two dual 16-bit multiply-accumulates);
 * elsewhere plain C computes the same sums. */
#include "qconvert_q7.h"

#include <string.h>

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#define QCONVERT_Q7_DSP 1
#else
#define QCONVERT_Q7_DSP 0
#endif

/* The legacy average pool's result depends on its build: with the DSP extension and without
 * Helium (MVE) it averages along x, truncating, then along y, truncating again; elsewhere (host,
 * Cortex-M0 / M3, Cortex-M55) it truncates once over the window. qconvert_q7_avgpool follows
 * the same rule, so on every build it equals the legacy kernel (-DQCONVERT_Q7_AVGPOOL_ROWS=0
 * or 1 chooses). */
#ifndef QCONVERT_Q7_AVGPOOL_ROWS
#if QCONVERT_Q7_DSP && !(defined(__ARM_FEATURE_MVE) && __ARM_FEATURE_MVE)
#define QCONVERT_Q7_AVGPOOL_ROWS 1
#else
#define QCONVERT_Q7_AVGPOOL_ROWS 0
#endif
#endif

/* acc + sum(a[i] * b[i]) over n bytes */
static int32_t dot(const int8_t *a, const int8_t *b, int n, int32_t acc)
{
    int i = 0;
#if QCONVERT_Q7_DSP
    for (; i + 4 <= n; i += 4) {
        uint32_t x, y;
        memcpy(&x, a + i, 4);
        memcpy(&y, b + i, 4);
        acc = __smlad(__sxtb16(x), __sxtb16(y), acc);
        acc = __smlad(__sxtb16((x >> 8) | (x << 24)), __sxtb16((y >> 8) | (y << 24)), acc);
    }
#endif
    for (; i < n; i++) {
        acc += (int32_t)a[i] * b[i];
    }
    return acc;
}

/* floor(v / 2^s) for s >= 0 without shifting a negative value */
static int32_t floor_shift(int32_t v, int s)
{
    return v >= 0 ? (int32_t)(v >> s) : (int32_t)(-1 - (int32_t)((-1 - v) >> s));
}

static int8_t sat8(int32_t v)
{
    return (int8_t)(v > 127 ? 127 : (v < -128 ? -128 : v));
}

/* the accumulator's start: the bias in the accumulator's format plus the rounding half (in 64
 * bits: shifts up to 31 are defined; the exporter checks the sum fits 32 bits) */
static int32_t start(int8_t bias, int bias_shift, int out_shift)
{
    return (int32_t)((int64_t)bias * ((int64_t)1 << bias_shift)
                     + (((int64_t)1 << out_shift) >> 1));
}

/* two dot products of `a` with rows `b0` and `b1` (two output channels share each input load) */
static void dot2(const int8_t *a, const int8_t *b0, const int8_t *b1, int n, int32_t *acc0,
                 int32_t *acc1)
{
    int32_t s0 = *acc0, s1 = *acc1;
    int i = 0;
#if QCONVERT_Q7_DSP
    for (; i + 4 <= n; i += 4) {
        uint32_t x, y0, y1;
        int32_t xl, xh;
        memcpy(&x, a + i, 4);
        memcpy(&y0, b0 + i, 4);
        memcpy(&y1, b1 + i, 4);
        xl = __sxtb16(x);
        xh = __sxtb16((x >> 8) | (x << 24));
        s0 = __smlad(xl, __sxtb16(y0), s0);
        s0 = __smlad(xh, __sxtb16((y0 >> 8) | (y0 << 24)), s0);
        s1 = __smlad(xl, __sxtb16(y1), s1);
        s1 = __smlad(xh, __sxtb16((y1 >> 8) | (y1 << 24)), s1);
    }
#endif
    for (; i < n; i++) {
        s0 += (int32_t)a[i] * b0[i];
        s1 += (int32_t)a[i] * b1[i];
    }
    *acc0 = s0;
    *acc1 = s1;
}

void qconvert_q7_conv(const int8_t *in, const qconvert_q7_geom *g, const int8_t *weights,
                      const int8_t *bias, int bias_shift, int out_shift, int8_t *out)
{
    const int row = g->k_w * g->in_c; /* one kernel row: contiguous in HWC input and OHWI weights */
    const int taps = g->k_h * row;
    int oy, ox, o, ky, kx;
    for (oy = 0; oy < g->out_h; oy++) {
        const int y0 = oy * g->s_h - g->p_h;
        for (ox = 0; ox < g->out_w; ox++) {
            const int x0 = ox * g->s_w - g->p_w;
            const int inside = y0 >= 0 && x0 >= 0 && y0 + g->k_h <= g->in_h
                               && x0 + g->k_w <= g->in_w;
            o = 0;
            if (inside) { /* output channels in pairs over the window's contiguous rows */
                for (; o + 2 <= g->out_c; o += 2) {
                    const int8_t *w0 = weights + (long)o * taps;
                    int32_t acc0 = start(bias[o], bias_shift, out_shift);
                    int32_t acc1 = start(bias[o + 1], bias_shift, out_shift);
                    for (ky = 0; ky < g->k_h; ky++) {
                        dot2(in + ((long)(y0 + ky) * g->in_w + x0) * g->in_c, w0 + ky * row,
                             w0 + taps + ky * row, row, &acc0, &acc1);
                    }
                    *out++ = sat8(floor_shift(acc0, out_shift));
                    *out++ = sat8(floor_shift(acc1, out_shift));
                }
            }
            for (; o < g->out_c; o++) {
                const int8_t *w = weights + (long)o * taps;
                int32_t acc = start(bias[o], bias_shift, out_shift);
                for (ky = 0; ky < g->k_h; ky++) {
                    const int y = y0 + ky;
                    const int8_t *px = in + ((long)y * g->in_w + x0) * g->in_c;
                    if (inside) {
                        acc = dot(px, w + ky * row, row, acc);
                        continue;
                    }
                    if (y < 0 || y >= g->in_h) {
                        continue;
                    }
                    for (kx = 0; kx < g->k_w; kx++) {
                        const int x = x0 + kx;
                        if (x >= 0 && x < g->in_w) {
                            acc = dot(in + ((long)y * g->in_w + x) * g->in_c,
                                      w + ky * row + kx * g->in_c, g->in_c, acc);
                        }
                    }
                }
                *out++ = sat8(floor_shift(acc, out_shift));
            }
        }
    }
}

#define QCONVERT_Q7_DW_CHUNK 32

/* channels in chunks of QCONVERT_Q7_DW_CHUNK accumulators: bounds checked once per tap, the
 * input pixel and the weights read contiguously */
void qconvert_q7_depthwise(const int8_t *in, const qconvert_q7_geom *g, const int8_t *weights,
                           const int8_t *bias, int bias_shift, int out_shift, int8_t *out)
{
    int oy, ox, c0, c, ky, kx;
    int32_t acc[QCONVERT_Q7_DW_CHUNK];
    for (oy = 0; oy < g->out_h; oy++) {
        for (ox = 0; ox < g->out_w; ox++) {
            for (c0 = 0; c0 < g->out_c; c0 += QCONVERT_Q7_DW_CHUNK) {
                const int n = g->out_c - c0 < QCONVERT_Q7_DW_CHUNK ? g->out_c - c0
                                                                  : QCONVERT_Q7_DW_CHUNK;
                for (c = 0; c < n; c++) {
                    acc[c] = start(bias[c0 + c], bias_shift, out_shift);
                }
                for (ky = 0; ky < g->k_h; ky++) {
                    const int y = oy * g->s_h + ky - g->p_h;
                    if (y < 0 || y >= g->in_h) {
                        continue;
                    }
                    for (kx = 0; kx < g->k_w; kx++) {
                        const int x = ox * g->s_w + kx - g->p_w;
                        const int8_t *px, *wk;
                        if (x < 0 || x >= g->in_w) {
                            continue;
                        }
                        px = in + ((long)y * g->in_w + x) * g->in_c + c0;
                        wk = weights + (ky * g->k_w + kx) * g->out_c + c0;
                        for (c = 0; c < n; c++) {
                            acc[c] += (int32_t)px[c] * wk[c];
                        }
                    }
                }
                for (c = 0; c < n; c++) {
                    *out++ = sat8(floor_shift(acc[c], out_shift));
                }
            }
        }
    }
}

/* 1x4 order: per block of 4 rows, per block of 4 columns 16 values (column pairs (0,2), (1,3);
 * row pairs (0,1), (2,3); within them w[ra][ca], w[rb][ca], w[ra][cb], w[rb][cb]), then each
 * leftover column's 4 rows; leftover rows row-major. */
void qconvert_q7_fc_1x4(const int8_t *in, int cols, const int8_t *weights, int rows,
                        const int8_t *bias, int bias_shift, int out_shift, int8_t *out)
{
    const int8_t *w = weights;
    int r = 0, c, k;
    for (; r + 4 <= rows; r += 4) {
        int32_t acc[4];
        for (k = 0; k < 4; k++) {
            acc[k] = start(bias[r + k], bias_shift, out_shift);
        }
        for (c = 0; c + 4 <= cols; c += 4) {
            int p;
            for (p = 0; p < 2; p++) { /* column pair (c + p, c + p + 2) */
                int32_t xa = in[c + p], xb = in[c + p + 2];
                int q;
                for (q = 0; q < 2; q++) { /* row pair (2q, 2q + 1) */
                    acc[2 * q] += xa * w[0] + xb * w[2];
                    acc[2 * q + 1] += xa * w[1] + xb * w[3];
                    w += 4;
                }
            }
        }
        for (; c < cols; c++) {
            for (k = 0; k < 4; k++) {
                acc[k] += (int32_t)in[c] * *w++;
            }
        }
        for (k = 0; k < 4; k++) {
            out[r + k] = sat8(floor_shift(acc[k], out_shift));
        }
    }
    for (; r < rows; r++) {
        int32_t acc = start(bias[r], bias_shift, out_shift);
        for (c = 0; c < cols; c++) {
            acc += (int32_t)in[c] * *w++;
        }
        out[r] = sat8(floor_shift(acc, out_shift));
    }
}

void qconvert_q7_maxpool(const int8_t *in, const qconvert_q7_geom *g, int8_t *out)
{
    int oy, ox, c, ky, kx;
    for (oy = 0; oy < g->out_h; oy++) {
        for (ox = 0; ox < g->out_w; ox++) {
            for (c = 0; c < g->in_c; c++) {
                int best = -128;
                for (ky = 0; ky < g->k_h; ky++) {
                    for (kx = 0; kx < g->k_w; kx++) {
                        int v = in[((long)(oy * g->s_h + ky) * g->in_w + ox * g->s_w + kx)
                                   * g->in_c + c];
                        best = v > best ? v : best;
                    }
                }
                *out++ = (int8_t)best;
            }
        }
    }
}

/* the average of each window (QCONVERT_Q7_AVGPOOL_ROWS: each row's average, truncated, then
 * their average, truncated again; else the window's sum divided once; C division truncates) */
void qconvert_q7_avgpool(const int8_t *in, const qconvert_q7_geom *g, int8_t *out)
{
    int oy, ox, c, ky, kx;
    for (oy = 0; oy < g->out_h; oy++) {
        for (ox = 0; ox < g->out_w; ox++) {
            for (c = 0; c < g->in_c; c++) {
                int32_t column = 0;
                for (ky = 0; ky < g->k_h; ky++) {
                    int32_t row = 0;
                    for (kx = 0; kx < g->k_w; kx++) {
                        row += in[((long)(oy * g->s_h + ky) * g->in_w + ox * g->s_w + kx)
                                  * g->in_c + c];
                    }
                    column += QCONVERT_Q7_AVGPOOL_ROWS ? row / g->k_w : row;
                }
                *out++ = (int8_t)(QCONVERT_Q7_AVGPOOL_ROWS ? column / g->k_h
                                                            : column / (g->k_h * g->k_w));
            }
        }
    }
}

void qconvert_q7_relu(int8_t *data, int size)
{
    int i;
    for (i = 0; i < size; i++) {
        data[i] = data[i] < 0 ? 0 : data[i];
    }
}

/* base-2 softmax: weights 2^clamp(x - max + 8, 0, 7), out = (2^20 / sum) >> clamp(5 + max - x,
 * 0, 31), saturated */
void qconvert_q7_softmax(const int8_t *in, int size, int8_t *out)
{
    int i, top = -128;
    int32_t sum = 0, base;
    for (i = 0; i < size; i++) {
        top = in[i] > top ? in[i] : top;
    }
    for (i = 0; i < size; i++) {
        int e = in[i] - top + 8;
        sum += (int32_t)1 << (e < 0 ? 0 : (e > 7 ? 7 : e));
    }
    base = ((int32_t)1 << 20) / sum;
    for (i = 0; i < size; i++) {
        int s = 5 + top - in[i];
        s = s < 0 ? 0 : (s > 31 ? 31 : s);
        out[i] = sat8(base >> s);
    }
}

/* table[(uint8)(x >> (in_frac - 4))]: the top 8 bits of a q3.4 view of x */
void qconvert_q7_table(int8_t *data, int size, int in_frac, const int8_t table[256])
{
    int i;
    for (i = 0; i < size; i++) {
        data[i] = table[(uint8_t)floor_shift(data[i], in_frac - 4)];
    }
}
