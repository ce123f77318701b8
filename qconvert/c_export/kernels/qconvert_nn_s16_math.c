/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_s16_math.c: RSQRT, ABS and SQUARED_DIFFERENCE on int16 (16x8 models) of
 * qconvert_nn.h, TFLite Micro's RsqrtEvalQuantized<int16_t>, AbsEvalQuantized<int16_t> and
 * EvalQuantizedSquaredDifference<int16_t> bit for bit (zero points 0).
 * Shipped with qconvert (Apache-2.0). Arithmetic that wraps in gemmlowp is done on uint32_t.
 */
#include "qconvert_nn_loops.h"

#define RSQRT_SHIFT 20 /* RSQRT's inverse square root is scaled by 2**20 before requantizing */

/* TFLite's GetInvSqrtQuantizedMultiplierExp(v, reverse_shift -1) for v >= 0: 1 / sqrt(v) as
 * multiplier * 2**(shift - 31), by gemmlowp's Newton-Raphson iteration on a Q3.28 value. */
static void inv_sqrt(int32_t v, int32_t *multiplier, int32_t *shift)
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
        inv_sqrt(v, &m, &e);
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
