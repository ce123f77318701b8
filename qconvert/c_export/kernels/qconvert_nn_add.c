/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_add.c: element-wise ADD (int8, same shapes) and MUL (int8, same shapes or one
 * value per channel) of qconvert_nn_fast.h, TFLite Micro's reference kernels bit for bit.
 * Shipped with qconvert (Apache-2.0).
 *
 * ADD: each input's rescale is one table load (the exporter computed it for all 256 values); the
 * sum is requantized once, in the short form when the exporter found it exact for the layer.
 * The int32 sum wraps as the device's (it cannot overflow for TFLite's parameters).
 * MUL: the product of the offset inputs (|.| <= 255 * 255) requantized once, likewise.
 */
#include "qconvert_nn_simd.h"

#include <stddef.h>

#include "qconvert_fc_1x4.h"

void qconvert_add_fast_s8(const int8_t *a, const int8_t *b, int8_t *output,
                          const qconvert_add_params *p)
{
    const int32_t *const t1 = p->table1 + 128, *const t2 = p->table2 + 128;
    const int32_t n = p->size, m = p->output_multiplier, s = p->output_shift;
    const int32_t off = p->output_offset, lo = p->activation_min, hi = p->activation_max;
    int32_t i;
    if (p->fast_requantize) {
        for (i = 0; i < n; ++i) {
            const int32_t sum = (int32_t)((uint32_t)t1[a[i]] + (uint32_t)t2[b[i]]);
            output[i] = (int8_t)qconvert_clamp_fast(qconvert_requantize_fast(sum, m, s) + off,
                                                    lo, hi);
        }
    } else {
        for (i = 0; i < n; ++i) {
            const int32_t sum = (int32_t)((uint32_t)t1[a[i]] + (uint32_t)t2[b[i]]);
            output[i] = (int8_t)qconvert_clamp_fast(qconvert_requantize(sum, m, s) + off, lo, hi);
        }
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
        if (p->fast_requantize) {
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
