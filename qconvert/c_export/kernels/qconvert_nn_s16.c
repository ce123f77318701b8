/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_s16.c: the 16x8 kernels of qconvert_nn.h (int16 activations, int8 weights),
 * TFLite Micro's reference integer kernels bit for bit. Shipped with qconvert (Apache-2.0).
 *
 * Conv, depthwise conv and fully connected accumulate in 64 bits and requantize with TFLite's
 * 64-bit MultiplyByQuantizedMultiplier (the Q31 multiplier rounded to Q15) when given an int64
 * bias or none (`bias64`), or in 32 bits with the ordinary requantization when given an int32
 * bias (`bias32`, TFLite Micro's int32-bias 16x8 path). Every kernel walks its output in memory
 * order; the element-wise ones read element i before writing it. The loops the int8 kernels
 * share are qconvert_nn_loops.h's; this file gives them int16 elements and the 16x8 output stage.
 */
#include "qconvert_nn_loops.h"

int32_t qconvert_requantize64(int64_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t reduced = multiplier < 0x7FFF0000 ? (multiplier + (1 << 15)) >> 16 : 0x7FFF;
    const int32_t total = 15 - shift;
    const int64_t x = acc * reduced + ((int64_t)1 << (total - 1));
    return (int32_t)(x >> total);
}

/* the output stage of a conv / depthwise conv (channel oc) */
#define CONV_FINISH(acc, oc)                                                                   \
    (int16_t)qconvert_finish_s16(acc, bias64, bias32, oc, p->multiplier[oc], p->shift[oc],    \
                                 p->output_offset, p->activation_min, p->activation_max)

void qconvert_conv_s16(const int16_t *input, const int8_t *weights, const int64_t *bias64,
                       const int32_t *bias32, int16_t *output, const qconvert_conv_params *p)
{
    QCONVERT_CONV_LOOP(int16_t, int64_t, input, weights, output, p, 0, CONV_FINISH);
}

void qconvert_depthwise_conv_s16(const int16_t *input, const int8_t *weights,
                                 const int64_t *bias64, const int32_t *bias32, int16_t *output,
                                 const qconvert_conv_params *p)
{
    QCONVERT_CONV_LOOP(int16_t, int64_t, input, weights, output, p, 1, CONV_FINISH);
}

/* the output stage of fully connected row r */
#define FC_FINISH(acc, r)                                                                      \
    (int16_t)qconvert_finish_s16(acc, bias64, bias32, r,                                       \
                                 quant->multiplier[quant->per_channel ? r : 0],                \
                                 quant->shift[quant->per_channel ? r : 0], quant->output_offset, \
                                 quant->activation_min, quant->activation_max)

void qconvert_fc_s16(const int16_t *input, const int8_t *weights, const int64_t *bias64,
                     const int32_t *bias32, int16_t *output, int32_t batches,
                     int32_t accum_depth, int32_t output_depth, const qconvert_fc_quant *quant)
{
    QCONVERT_FC_LOOP(int16_t, int64_t, input, weights, output, batches, accum_depth,
                     output_depth, quant, FC_FINISH);
}

#define TRANSPOSE_CONV_FINISH(acc, oc)                                                          \
    (int16_t)qconvert_finish_s16(acc, bias, NULL, oc, p->multiplier[oc], p->shift[oc],         \
                                 p->output_offset, p->activation_min, p->activation_max)

void qconvert_transpose_conv_s16(const int16_t *input, const int8_t *weights,
                                 const int64_t *bias, int16_t *output,
                                 const qconvert_conv_params *p)
{
    QCONVERT_TRANSPOSE_CONV_LOOP(int16_t, int64_t, input, weights, output, p,
                                 TRANSPOSE_CONV_FINISH);
}

#define MATMUL_FINISH(acc)                                                                      \
    (int16_t)qconvert_finish_s16(acc, NULL, NULL, 0, p->output_multiplier, p->output_shift,    \
                                 p->output_offset, INT16_MIN, INT16_MAX)

void qconvert_batch_matmul_s16(const int16_t *a, const int16_t *b, int16_t *output,
                               const qconvert_matmul_params *p)
{
    QCONVERT_BATCH_MATMUL_LOOP(int16_t, int64_t, a, b, output, p, MATMUL_FINISH);
}

QCONVERT_DEFINE_POOL(pool_s16, int16_t, INT16_MIN)

void qconvert_avgpool_s16(const int16_t *input, int16_t *output, const qconvert_conv_params *p)
{
    pool_s16(input, output, p, 1);
}

void qconvert_maxpool_s16(const int16_t *input, int16_t *output, const qconvert_conv_params *p)
{
    pool_s16(input, output, p, 0);
}

void qconvert_binary_s16(const int16_t *a, const int16_t *b, int16_t *output,
                         const qconvert_binary_params *p)
{
    QCONVERT_BROADCAST_LOOP(p, i, pa, pb,
                            output[i] = (int16_t)qconvert_binary_value(a[pa], b[pb], p));
}

void qconvert_prelu_s16(const int16_t *input, const int8_t *alpha, int16_t *output,
                        const qconvert_binary_params *p)
{
    QCONVERT_BROADCAST_LOOP(p, i, pa, pb,
                            output[i] = (int16_t)qconvert_prelu_value(input[pa], alpha[pb], p,
                                                                      INT16_MIN, INT16_MAX));
}

/* TFLite's LUTLookup: base at the high 9 bits, slope over the low 7 bits, rounded. */
static int16_t lut_lookup(int32_t value, const int16_t *lut)
{
    const int32_t index = 256 + (value >> 7);
    const int32_t offset = value & 0x7f;
    const int32_t base = lut[index];
    const int32_t slope = lut[index + 1] - lut[index];
    return (int16_t)(base + ((slope * offset + 64) >> 7));
}

void qconvert_softmax_s16(const int16_t *input, int16_t *output, int32_t rows, int32_t row_size,
                          int32_t input_multiplier, int32_t input_left_shift,
                          const int16_t *exp_lut, const int16_t *one_over_one_plus_x_lut)
{
    int32_t r, c;
    for (r = 0; r < rows; ++r) {
        const int16_t *x = input + (ptrdiff_t)r * row_size;
        int16_t *y = output + (ptrdiff_t)r * row_size;
        int32_t max = INT16_MIN, sum = 0, headroom, shifted, sym, right;
        int16_t reciprocal;
        for (c = 0; c < row_size; ++c) {
            if (x[c] > max) {
                max = x[c];
            }
        }
        for (c = 0; c < row_size; ++c) { /* exp of the rescaled difference, kept in y */
            const int32_t scaled = qconvert_requantize(x[c] - max, input_multiplier,
                                                       input_left_shift);
            y[c] = lut_lookup(qconvert_clamp(scaled + 32767, INT16_MIN, INT16_MAX), exp_lut);
            sum += y[c];
        }
        headroom = qconvert_leading_zeros((uint32_t)sum);
        shifted = (int32_t)((((int64_t)sum << (headroom - 1)) + (1 << 13)) >> 14);
        sym = qconvert_clamp(shifted - (1 << 15) - (1 << 16), INT16_MIN, INT16_MAX);
        reciprocal = lut_lookup(sym, one_over_one_plus_x_lut);
        right = 31 - headroom;
        for (c = 0; c < row_size; ++c) {
            const int64_t v = ((int64_t)y[c] * reciprocal + ((int64_t)1 << (right - 1))) >> right;
            y[c] = (int16_t)(v < 0 ? 0 : v > 32767 ? 32767 : v);
        }
    }
}

static int32_t scaled_input16(int32_t x, int32_t multiplier, int32_t left_shift)
{
    int32_t rounding;
    if (multiplier == 0) { /* a power-of-two input scale */
        multiplier = 3 << left_shift;
        left_shift = 0;
    }
    rounding = left_shift > 0 ? 1 << (left_shift - 1) : 0;
    return (x * multiplier + rounding) >> left_shift;
}

/* The sigmoid table at |v| (a), interpolated over its low `bits` bits (9: logistic, 8: tanh);
 * `saturated` past the table's end. */
static uint32_t sigmoid_interpolated(const uint16_t *table, uint32_t a, int32_t bits,
                                     uint32_t saturated)
{
    const uint32_t uh = a >> bits;
    uint32_t ua, ub;
    if (uh >= 255) {
        return saturated;
    }
    ua = table[uh];
    ub = table[uh + 1];
    return (ua << bits) + (a & ((1u << bits) - 1u)) * (ub - ua);
}

void qconvert_logistic_s16(const int16_t *input, int16_t *output, int32_t size,
                           int32_t multiplier, int32_t left_shift, const uint16_t *table)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = scaled_input16(input[i], multiplier, left_shift);
        uint32_t result = sigmoid_interpolated(table, (uint32_t)(v < 0 ? -v : v), 9,
                                               0x7FFFu << 10);
        result = v >= 0 ? result + (1u << 9) : (1u << 25) - result + (1u << 9) - 1u;
        output[i] = (int16_t)(result >> 10);
    }
}

void qconvert_tanh_s16(const int16_t *input, int16_t *output, int32_t size, int32_t multiplier,
                       int32_t left_shift, const uint16_t *table)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = scaled_input16(input[i], multiplier, left_shift);
        int32_t result = (int32_t)sigmoid_interpolated(table, (uint32_t)(v < 0 ? -v : v), 8,
                                                       0xFFFFu << 8);
        result = v >= 0 ? result - (1 << 23) + (1 << 7) : -result + (1 << 23) + (1 << 7) - 1;
        output[i] = (int16_t)(result >> 8);
    }
}

static int32_t load_value(const void *data, int32_t bits, int32_t i)
{
    return bits == 16 ? (int32_t)((const int16_t *)data)[i] : (int32_t)((const int8_t *)data)[i];
}

void qconvert_rescale_s16(const void *input, void *output, int32_t size,
                          const qconvert_rescale_params *p)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = load_value(input, p->input_bits, i) - p->input_zero_point;
        int32_t out;
        if (v >= 0) {
            out = qconvert_requantize(v, p->multiplier, p->shift);
        } else {
            const int32_t m = p->negative_multiplier < 0 ? -p->negative_multiplier
                                                         : p->negative_multiplier;
            out = qconvert_requantize(v, m, p->negative_shift);
            out = p->negative_multiplier < 0 ? -out : out;
        }
        out = qconvert_clamp(out + p->output_zero_point, p->activation_min, p->activation_max);
        if (p->output_bits == 16) {
            ((int16_t *)output)[i] = (int16_t)out;
        } else {
            ((int8_t *)output)[i] = (int8_t)out;
        }
    }
}

void qconvert_clamp_s16(const int16_t *input, int16_t *output, int32_t size, int32_t lo,
                        int32_t hi)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = (int16_t)qconvert_clamp(input[i], lo, hi);
    }
}

QCONVERT_DEFINE_QUANTIZE(qconvert_quantize_f32_s16, qconvert_dequantize_s16_f32, int16_t,
                         INT16_MIN, INT16_MAX)

QCONVERT_DEFINE_MEAN(qconvert_mean_s16, int16_t, INT16_MIN, INT16_MAX)

QCONVERT_DEFINE_MOVEMENT(qconvert_copy_box_s16, qconvert_gather_s16, qconvert_fill_s16, int16_t)
