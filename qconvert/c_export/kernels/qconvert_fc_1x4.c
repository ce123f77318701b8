/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_fc_1x4.c: portable int8 fully connected kernel for the 1x4 interleaved weight order.
 * See qconvert_fc_1x4.h for the contract; shipped with qconvert (Apache-2.0).
 *
 * The 1x4 order (qconvert design notes; CMSIS-NN paper, Fig. 6). With R4 = R - R % 4 and
 * C4 = C - C % 4, for each block of four rows r < R4 the weights hold, for each block of four
 * columns c < C4, sixteen values: columns (c, c+2) for rows (r, r+1) then (r+2, r+3), then
 * columns (c+1, c+3) likewise, each group as W[ra][ca], W[rb][ca], W[ra][cb], W[rb][cb]; then
 * for each leftover column c >= C4 the four values W[r..r+3][c]. The leftover rows R4..R-1
 * follow, row-major. One pointer walks the weights from start to end.
 *
 * Only implementation-defined behaviour that every two's-complement target shares is relied
 * on (right shift of negative values, narrowing conversions); no signed overflow.
 */
#include "qconvert_fc_1x4.h"

#include <stddef.h>

#ifndef QCONVERT_SINGLE_ROUNDING
/* gemmlowp SaturatingRoundingDoublingHighMul: round(a * b / 2^31), ties toward +inf. */
static int32_t rounding_doubling_high_mul(int32_t a, int32_t b)
{
    int64_t product;
    int64_t nudge;
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    product = (int64_t)a * (int64_t)b;
    nudge = product >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    return (int32_t)((product + nudge) / ((int64_t)1 << 31)); /* division truncates */
}

/* gemmlowp RoundingDivideByPOT: x / 2^exponent, ties away from zero. */
static int32_t rounding_divide_by_pot(int32_t x, int32_t exponent)
{
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}
#endif

int32_t qconvert_requantize(int32_t acc, int32_t multiplier, int32_t shift)
{
#ifdef QCONVERT_SINGLE_ROUNDING
    /* CMSIS-NN arm_nn_requantize with CMSIS_NN_USE_SINGLE_ROUNDING: one rounding, the
     * intermediate kept in 64 bits (truncating it to 32 bits before the final (x + 1) >> 1
     * flips the sign of results near 2^30), then narrowed as CMSIS-NN's return does. */
    const int64_t product = (int64_t)acc * (int64_t)multiplier;
    const int64_t half = product >> (31 - shift - 1);
    return (int32_t)((half + 1) >> 1);
#else
    /* TFLite MultiplyByQuantizedMultiplier: acc * 2^left (in int32), high multiply, then a
     * rounding right shift. The left shift is done on the unsigned bits (wraps like the
     * device, no undefined behaviour). */
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    const int32_t shifted = (int32_t)((uint32_t)acc << left);
    return rounding_divide_by_pot(rounding_doubling_high_mul(shifted, multiplier), right);
#endif
}

static int8_t output_value(int32_t acc, int32_t row, const int32_t *bias,
                           const qconvert_fc_quant *quant)
{
    const int32_t channel = quant->per_channel ? row : 0;
    int32_t out;
    if (bias != NULL) {
        acc += bias[row];
    }
    out = qconvert_requantize(acc, quant->multiplier[channel], quant->shift[channel]);
    out += quant->output_offset;
    if (out < quant->activation_min) {
        out = quant->activation_min;
    }
    if (out > quant->activation_max) {
        out = quant->activation_max;
    }
    return (int8_t)out;
}

void qconvert_fc_1x4_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                        int8_t *output, int32_t batches, int32_t accum_depth,
                        int32_t output_depth, const qconvert_fc_quant *quant)
{
    const int32_t rows4 = output_depth - output_depth % 4;
    const int32_t cols4 = accum_depth - accum_depth % 4;
    const int32_t in_off = quant->input_offset;
    const int32_t w_off = quant->weights_offset;
    int32_t b;
    for (b = 0; b < batches; ++b) {
        const int8_t *x = input + (ptrdiff_t)b * accum_depth;
        int8_t *y = output + (ptrdiff_t)b * output_depth;
        const int8_t *w = weights;
        int32_t r;
        for (r = 0; r < rows4; r += 4) {
            int32_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
            int32_t c;
            for (c = 0; c < cols4; c += 4) {
                const int32_t x0 = x[c] + in_off;
                const int32_t x1 = x[c + 1] + in_off;
                const int32_t x2 = x[c + 2] + in_off;
                const int32_t x3 = x[c + 3] + in_off;
                /* columns c and c + 2: rows r, r + 1, then rows r + 2, r + 3 */
                acc0 += (w[0] + w_off) * x0 + (w[2] + w_off) * x2;
                acc1 += (w[1] + w_off) * x0 + (w[3] + w_off) * x2;
                acc2 += (w[4] + w_off) * x0 + (w[6] + w_off) * x2;
                acc3 += (w[5] + w_off) * x0 + (w[7] + w_off) * x2;
                /* columns c + 1 and c + 3 */
                acc0 += (w[8] + w_off) * x1 + (w[10] + w_off) * x3;
                acc1 += (w[9] + w_off) * x1 + (w[11] + w_off) * x3;
                acc2 += (w[12] + w_off) * x1 + (w[14] + w_off) * x3;
                acc3 += (w[13] + w_off) * x1 + (w[15] + w_off) * x3;
                w += 16;
            }
            for (; c < accum_depth; ++c) { /* leftover columns: four rows each */
                const int32_t xc = x[c] + in_off;
                acc0 += (w[0] + w_off) * xc;
                acc1 += (w[1] + w_off) * xc;
                acc2 += (w[2] + w_off) * xc;
                acc3 += (w[3] + w_off) * xc;
                w += 4;
            }
            y[r] = output_value(acc0, r, bias, quant);
            y[r + 1] = output_value(acc1, r + 1, bias, quant);
            y[r + 2] = output_value(acc2, r + 2, bias, quant);
            y[r + 3] = output_value(acc3, r + 3, bias, quant);
        }
        for (; r < output_depth; ++r) { /* leftover rows, row-major */
            int32_t acc = 0;
            int32_t c;
            for (c = 0; c < accum_depth; ++c) {
                acc += (w[c] + w_off) * (x[c] + in_off);
            }
            w += accum_depth;
            y[r] = output_value(acc, r, bias, quant);
        }
    }
}
