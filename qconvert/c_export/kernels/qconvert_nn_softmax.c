/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_softmax.c: int8-input softmax of qconvert_nn.h, TFLite Micro's
 * reference_ops::Softmax<int8, int8> and <int8, int16> bit for bit: gemmlowp fixed-point exp
 * of the rescaled differences to the row maximum (Q5.26), a Q12.19 sum, its reciprocal by
 * Newton-Raphson, output q * 256 - 128 (int8) or q * 65536 - 32768 (int16).
 * Shipped with qconvert (Apache-2.0). Arithmetic that wraps in gemmlowp is done on uint32_t.
 */
#include "qconvert_nn_loops.h"

#define SCALED_DIFF_INTEGER_BITS 5
#define ACCUMULATION_INTEGER_BITS 12

static int32_t wrap_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static int32_t wrap_sub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }

/* exp(a) for a in [-1/4, 0), Q0.31 (Taylor expansion around -1/8) */
static int32_t exp_on_interval(int32_t a)
{
    const int32_t constant_term = 1895147668;
    const int32_t constant_1_over_3 = 715827883;
    const int32_t x = wrap_add(a, 1 << 28);
    const int32_t x2 = qconvert_srdhm(x, x);
    const int32_t x3 = qconvert_srdhm(x2, x);
    const int32_t x4 = qconvert_srdhm(x2, x2);
    const int32_t x4_over_4 = qconvert_rdbpot(x4, 2);
    const int32_t poly = qconvert_rdbpot(
        wrap_add(qconvert_srdhm(wrap_add(x4_over_4, x3), constant_1_over_3), x2), 1);
    return wrap_add(constant_term, qconvert_srdhm(constant_term, wrap_add(x, poly)));
}

/* exp(a) for a <= 0 in Q5.26; Q0.31 result */
static int32_t exp_on_negative_values(int32_t a)
{
    static const int32_t multipliers[7] = {1672461947, 1302514674, 790015084, 290630308,
                                           39332535, 720401, 242};
    const int32_t fractional_bits = 31 - SCALED_DIFF_INTEGER_BITS;
    const int32_t one_quarter = 1 << (fractional_bits - 2);
    const int32_t mod_minus_quarter = wrap_sub(a & (one_quarter - 1), one_quarter);
    int32_t result =
        exp_on_interval(qconvert_sat_mul_pot(mod_minus_quarter, SCALED_DIFF_INTEGER_BITS));
    const int32_t remainder = wrap_sub(mod_minus_quarter, a);
    int32_t k;
    for (k = 0; k < 7; ++k) { /* exponents -2 .. 4: every one below integer_bits (5) */
        if ((remainder >> (fractional_bits + k - 2)) & 1) {
            result = qconvert_srdhm(result, multipliers[k]);
        }
    }
    return a == 0 ? INT32_MAX : result;
}

/* gemmlowp 1 / (1 + x) for x in [0, 1), Q0.31 in and out */
static int32_t one_over_one_plus_x(int32_t a)
{
    const int64_t sum = (int64_t)a + INT32_MAX;
    const int64_t t = sum + (sum >= 0 ? 1 : -1);
    const int32_t half_denominator = (int32_t)(t / 2); /* RoundingHalfSum */
    int32_t x = wrap_add(1515870810, qconvert_srdhm(half_denominator, -1010580540));
    int32_t i;
    for (i = 0; i < 3; ++i) {
        const int32_t one_minus = wrap_sub(1 << 29, qconvert_srdhm(half_denominator, x));
        x = wrap_add(x, qconvert_sat_mul_pot(qconvert_srdhm(x, one_minus), 2));
    }
    return qconvert_sat_mul_pot(x, 1);
}

/* The rows of reference_ops::Softmax<int8, OutputT>: OutputT int8 (out_bits 8, output scale
 * 1/256, zero point -128) or int16 (out_bits 16, output scale 1/65536, zero point -32768). */
static void softmax_rows_s8(const int8_t *input, int8_t *output8, int16_t *output16,
                            int32_t rows, int32_t row_size, int32_t input_multiplier,
                            int32_t input_left_shift, int32_t diff_min, int32_t out_bits)
{
    const int32_t out_min = -((int32_t)1 << (out_bits - 1));
    const int32_t out_max = ((int32_t)1 << (out_bits - 1)) - 1;
    int32_t r, c;
    for (r = 0; r < rows; ++r) {
        const int8_t *x = input + (ptrdiff_t)r * row_size;
        int32_t max = -128, total = 0, headroom, bits_over_unit, scale, exponent;
        for (c = 0; c < row_size; ++c) {
            max = x[c] > max ? x[c] : max;
        }
        for (c = 0; c < row_size; ++c) {
            const int32_t diff = x[c] - max;
            if (diff >= diff_min) {
                const int32_t rescaled = qconvert_srdhm(
                    (int32_t)((uint32_t)diff << input_left_shift), input_multiplier);
                total = wrap_add(total, qconvert_rdbpot(exp_on_negative_values(rescaled),
                                               ACCUMULATION_INTEGER_BITS));
            }
        }
        headroom = qconvert_leading_zeros((uint32_t)total);
        bits_over_unit = ACCUMULATION_INTEGER_BITS - headroom;
        scale = one_over_one_plus_x(
            (int32_t)(((uint32_t)total << headroom) - 0x80000000u));
        exponent = bits_over_unit + 31 - out_bits;
        for (c = 0; c < row_size; ++c) {
            const int32_t diff = x[c] - max;
            int32_t out = out_min;
            if (diff >= diff_min) {
                const int32_t rescaled = qconvert_srdhm(
                    (int32_t)((uint32_t)diff << input_left_shift), input_multiplier);
                out = qconvert_rdbpot(qconvert_srdhm(scale, exp_on_negative_values(rescaled)),
                                      exponent) + out_min;
                out = out < out_min ? out_min : (out > out_max ? out_max : out);
            }
            if (out_bits == 8) {
                output8[(ptrdiff_t)r * row_size + c] = (int8_t)out;
            } else {
                output16[(ptrdiff_t)r * row_size + c] = (int16_t)out;
            }
        }
    }
}

void qconvert_softmax_s8(const int8_t *input, int8_t *output, int32_t rows, int32_t row_size,
                         int32_t input_multiplier, int32_t input_left_shift, int32_t diff_min)
{
    softmax_rows_s8(input, output, NULL, rows, row_size, input_multiplier, input_left_shift,
                    diff_min, 8);
}

void qconvert_softmax_s8_s16(const int8_t *input, int16_t *output, int32_t rows,
                             int32_t row_size, int32_t input_multiplier,
                             int32_t input_left_shift, int32_t diff_min)
{
    softmax_rows_s8(input, NULL, output, rows, row_size, input_multiplier, input_left_shift,
                    diff_min, 16);
}
