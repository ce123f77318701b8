/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_ops.c: element-wise, data movement and reduction kernels of qconvert_nn.h
 * (TFLite Micro's reference integer kernels, bit for bit). Shipped with qconvert (Apache-2.0).
 */
#include "qconvert_nn_loops.h"

void qconvert_lookup_s8(const int8_t *input, int8_t *output, int32_t size, const int8_t *table)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = table[input[i] + 128];
    }
}

int qconvert_lookup_checked_s8(const int8_t *input, int8_t *output, int32_t size,
                               const int8_t *table, int32_t min_valid)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        if (input[i] < min_valid) {
            return 1;
        }
        output[i] = table[input[i] + 128];
    }
    return 0;
}

/* One output element of qconvert_binary_s8 (DIV apart). */
static int32_t binary_value(int32_t a, int32_t b, const qconvert_binary_params *p)
{
    if (p->op == QCONVERT_PRELU) {
        return qconvert_prelu_value(a, b, p, -128, 127);
    }
    return qconvert_binary_value(a, b, p);
}

/* RoundingDivideByPOT; exponents 32..63 as TFLite Micro's x86 build computes them (the mask
 * is -1 and the shift is taken mod 32) */
static int32_t rdbpot_wide(int32_t x, int32_t exponent)
{
    if (exponent > 31) {
        return (x >> (exponent & 31)) + (x > (x < 0 ? 0 : -1) ? 1 : 0);
    } else {
        const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
        const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
        return (x >> exponent) + ((x & mask) > threshold ? 1 : 0);
    }
}

static int32_t leading_sign_bits(int32_t x)
{
    return qconvert_leading_zeros((uint32_t)(x < 0 ? ~x : x)) - 1;
}

/* DIV (reference_ops::DivElementwise, int8): -1 when the shift is out of TFLM's range */
static int32_t div_value(int32_t a, int32_t b, const qconvert_binary_params *p, int *bad)
{
    int32_t x = a + p->input1_offset;
    const int32_t d = b + p->input2_offset;
    const int32_t inverse = p->div_inverse[b + 128];
    const int32_t headroom = (d < 0 ? (x = -x, leading_sign_bits(x)) : leading_sign_bits(x));
    const int32_t quotient = qconvert_srdhm((int32_t)((uint32_t)x << headroom), inverse);
    const int32_t total_shift = p->output_shift - p->div_shift[b + 128] - headroom;
    if (total_shift > 0) {
        *bad = 1;
        return 0;
    }
    return qconvert_clamp(rdbpot_wide(qconvert_srdhm(quotient, p->output_multiplier),
                                      -total_shift) + p->output_offset,
                          p->activation_min, p->activation_max);
}

int qconvert_binary_s8(const int8_t *a, const int8_t *b, int8_t *output,
                       const qconvert_binary_params *p)
{
    int bad = 0;
    QCONVERT_BROADCAST_LOOP(p, i, pa, pb,
                            output[i] = (int8_t)(p->op == QCONVERT_DIV
                                                     ? div_value(a[pa], b[pb], p, &bad)
                                                     : binary_value(a[pa], b[pb], p)));
    return bad;
}

QCONVERT_DEFINE_MOVEMENT(qconvert_copy_box_s8, qconvert_gather_s8, qconvert_fill_s8, int8_t)

void qconvert_l2norm_s8(const int8_t *input, int8_t *output, int32_t outer, int32_t depth,
                        int32_t input_zero_point)
{
    int32_t i, c;
    for (i = 0; i < outer; ++i) {
        const int8_t *row = input + (ptrdiff_t)i * depth;
        int8_t *out = output + (ptrdiff_t)i * depth;
        uint32_t square = 0; /* an int32 sum in TFLite: wraps as it does */
        int32_t multiplier, shift;
        for (c = 0; c < depth; ++c) {
            const int32_t d = row[c] - input_zero_point;
            square += (uint32_t)(d * d);
        }
        qconvert_inv_sqrt((int32_t)square, &multiplier, &shift);
        shift += 7; /* MultiplyByQuantizedMultiplier(d, multiplier, shift + 7), double rounding */
        for (c = 0; c < depth; ++c) {
            const int32_t d = row[c] - input_zero_point;
            out[c] = (int8_t)qconvert_clamp(
                qconvert_rdbpot(qconvert_srdhm(d * (1 << (shift > 0 ? shift : 0)), multiplier),
                                shift > 0 ? 0 : -shift),
                -128, 127);
        }
    }
}

void qconvert_copy_s8(const int8_t *input, int8_t *output, int32_t size)
{
    int32_t i;
    if (output < input) {
        for (i = 0; i < size; ++i) {
            output[i] = input[i];
        }
    } else if (output > input) {
        for (i = size - 1; i >= 0; --i) {
            output[i] = input[i];
        }
    }
}

QCONVERT_DEFINE_MEAN(qconvert_mean_s8, int8_t, -128, 127)

QCONVERT_DEFINE_QUANTIZE(qconvert_quantize_f32_s8, qconvert_dequantize_s8_f32, int8_t, -128, 127)
