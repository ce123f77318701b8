/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_s16_math.c: RSQRT, ABS and SQUARED_DIFFERENCE on int16 (16x8 models) of
 * qconvert_nn.h, TFLite Micro's RsqrtEvalQuantized<int16_t>, AbsEvalQuantized<int16_t> and
 * EvalQuantizedSquaredDifference<int16_t> bit for bit (zero points 0).
 * Shipped with qconvert (Apache-2.0). Arithmetic that wraps in gemmlowp is done on uint32_t.
 */
#include "qconvert_nn_loops.h"

#define RSQRT_SHIFT 20 /* RSQRT's inverse square root is scaled by 2**20 before requantizing */

int qconvert_rsqrt_s16(const int16_t *input, int16_t *output, int32_t size, int32_t multiplier,
                       int32_t shift)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = input[i];
        int32_t m, e, data, left, right;
        if (v < 0) {
            return 1;
        }
        if (v == 0) {
            output[i] = 32767;
            continue;
        }
        qconvert_inv_sqrt(v, &m, &e);
        left = e + RSQRT_SHIFT > 0 ? e + RSQRT_SHIFT : 0;
        right = e + RSQRT_SHIFT < 0 ? -(e + RSQRT_SHIFT) : 0;
        data = qconvert_rdbpot(qconvert_srdhm((int32_t)((uint32_t)1 << left), m), right);
        output[i] = (int16_t)qconvert_clamp(
            qconvert_requantize(data, multiplier, shift - RSQRT_SHIFT), INT16_MIN, INT16_MAX);
    }
    return 0;
}

void qconvert_abs_s16(const int16_t *input, int16_t *output, int32_t size, int32_t needs_rescale,
                      int32_t multiplier, int32_t shift)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = input[i] < 0 ? -(int32_t)input[i] : input[i];
        output[i] = (int16_t)qconvert_clamp(
            needs_rescale ? qconvert_requantize(v, multiplier, shift) : v, INT16_MIN, INT16_MAX);
    }
}
