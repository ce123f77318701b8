/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_add.c: element-wise ADD, SUB and MUL (int8; the same shapes, or the second operand
 * one value per channel, per row or in all) of qconvert_nn_fast.h, TFLite Micro's reference
 * kernels bit for bit.
 * Shipped with qconvert (Apache-2.0).
 *
 * ADD / SUB: each input's rescale is one table load (the exporter computed it for all 256
 * values; SUB's second table negated); the sum is requantized once, in the short form when the exporter found it exact for the layer.
 * The int32 sum wraps as the device's (it cannot overflow for TFLite's parameters).
 * MUL: the product of the offset inputs (|.| <= 255 * 255) requantized once, likewise.
 */
#include "qconvert_nn_simd.h"

#include <stddef.h>

#include "qconvert_fc_1x4.h"

/* one ADD output from the sum of the two rescaled inputs; FAST: the short requantization */
#define ADD_VALUE(sum, FAST)                                                                    \
    (int8_t)qconvert_clamp_fast(((FAST) ? qconvert_requantize_fast((sum), m, s)                 \
                                        : qconvert_requantize((sum), m, s)) + off, lo, hi)
#define ADD_SUM(u, v) ((int32_t)((uint32_t)(u) + (uint32_t)(v)))

/* the rows of ADD / SUB (see qconvert_nn_fast.h), FAST a constant in each loop */
#define ADD_ROWS(FAST)                                                                          \
    for (o = 0; o < p->outer; ++o) {                                                            \
        const int8_t *x = a + (ptrdiff_t)o * inner, *y = b + (ptrdiff_t)o * p->b_outer;         \
        int8_t *out = output + (ptrdiff_t)o * inner;                                            \
        if (p->b_inner) {                                                                       \
            for (i = 0; i < inner; ++i) {                                                       \
                out[i] = ADD_VALUE(ADD_SUM(t1[x[i]], t2[y[i]]), FAST);                          \
            }                                                                                   \
        } else {                                                                                \
            const int32_t yv = t2[y[0]];                                                        \
            for (i = 0; i < inner; ++i) {                                                       \
                out[i] = ADD_VALUE(ADD_SUM(t1[x[i]], yv), FAST);                                \
            }                                                                                   \
        }                                                                                       \
    }

void qconvert_add_fast_s8(const int8_t *a, const int8_t *b, int8_t *output,
                          const qconvert_add_params *p)
{
    const int32_t *const t1 = p->table1 + 128, *const t2 = p->table2 + 128;
    const int32_t m = p->output_multiplier, s = p->output_shift, inner = p->inner;
    const int32_t off = p->output_offset, lo = p->activation_min, hi = p->activation_max;
    int32_t o, i;
    if (p->fast_requantize) {
        ADD_ROWS(1)
    } else {
        ADD_ROWS(0)
    }
}

/* one MUL output; FAST: the short requantization (a constant in each loop below) */
#define MUL_VALUE(x, y, FAST)                                                                  \
    (int8_t)qconvert_clamp_fast(                                                               \
        ((FAST) ? qconvert_requantize_fast(((x) + o1) * ((y) + o2), m, s)                      \
                : qconvert_requantize(((x) + o1) * ((y) + o2), m, s)) + off, lo, hi)

void qconvert_mul_fast_s8(const int8_t *a, const int8_t *b, int8_t *output,
                          const qconvert_mul_params *p)
{
    const int32_t o1 = p->input1_offset, o2 = p->input2_offset;
    const int32_t m = p->output_multiplier, s = p->output_shift, off = p->output_offset;
    const int32_t lo = p->activation_min, hi = p->activation_max, inner = p->inner;
    int32_t o, i;
    for (o = 0; o < p->outer; ++o) {
        const int8_t *x = a + (ptrdiff_t)o * inner, *y = b + (ptrdiff_t)o * p->b_step;
        int8_t *out = output + (ptrdiff_t)o * inner;
        if (!p->b_inner) {
            const int32_t yv = y[0];
            if (p->fast_requantize) {
                for (i = 0; i < inner; ++i) {
                    out[i] = MUL_VALUE(x[i], yv, 1);
                }
            } else {
                for (i = 0; i < inner; ++i) {
                    out[i] = MUL_VALUE(x[i], yv, 0);
                }
            }
        } else if (p->fast_requantize) {
            for (i = 0; i < inner; ++i) {
                out[i] = MUL_VALUE(x[i], y[i], 1);
            }
        } else {
            for (i = 0; i < inner; ++i) {
                out[i] = MUL_VALUE(x[i], y[i], 0);
            }
        }
    }
}
