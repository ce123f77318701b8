/* qconvert_nn_ops.c: element-wise, data movement and reduction kernels of qconvert_nn.h
 * (TFLite Micro's reference integer kernels, bit for bit). Shipped with qconvert (Apache-2.0).
 */
#include "qconvert_nn.h"

#include <stddef.h>

static int8_t clamp_s8(int32_t value, int32_t lo, int32_t hi)
{
    if (value < lo) {
        value = lo;
    }
    if (value > hi) {
        value = hi;
    }
    return (int8_t)value;
}

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

static int32_t binary_value(int32_t a, int32_t b, const qconvert_binary_params *p)
{
    int32_t raw;
    switch (p->op) {
    case QCONVERT_MAXIMUM:
        return a > b ? a : b;
    case QCONVERT_MINIMUM:
        return a < b ? a : b;
    case QCONVERT_PRELU: {
        const int32_t v = a + p->input1_offset;
        raw = v >= 0 ? qconvert_requantize(v, p->output_multiplier, p->output_shift)
                     : qconvert_requantize(v * (b + p->input2_offset), p->input2_multiplier,
                                           p->input2_shift);
        return clamp_s8(raw + p->output_offset, -128, 127);
    }
    case QCONVERT_SQUARED_DIFFERENCE: {
        const int32_t d =
            qconvert_requantize((a + p->input1_offset) * (1 << p->left_shift),
                                p->input1_multiplier, p->input1_shift) -
            qconvert_requantize((b + p->input2_offset) * (1 << p->left_shift),
                                p->input2_multiplier, p->input2_shift);
        raw = qconvert_requantize((int32_t)((uint32_t)d * (uint32_t)d), p->output_multiplier,
                                  p->output_shift);
        return clamp_s8(raw + p->output_offset, p->activation_min, p->activation_max);
    }
    case QCONVERT_MUL:
        raw = qconvert_requantize((a + p->input1_offset) * (b + p->input2_offset),
                                  p->output_multiplier, p->output_shift);
        return clamp_s8(raw + p->output_offset, p->activation_min, p->activation_max);
    default: { /* ADD, SUB: both inputs rescaled to a common scale << left_shift */
        const int32_t sa = qconvert_requantize((a + p->input1_offset) * (1 << p->left_shift),
                                               p->input1_multiplier, p->input1_shift);
        const int32_t sb = qconvert_requantize((b + p->input2_offset) * (1 << p->left_shift),
                                               p->input2_multiplier, p->input2_shift);
        raw = qconvert_requantize(p->op == QCONVERT_ADD ? sa + sb : sa - sb,
                                  p->output_multiplier, p->output_shift);
        return clamp_s8(raw + p->output_offset, p->activation_min, p->activation_max);
    }
    }
}

/* Advance the row-major odometer `index` over `shape`; the two positions follow `s1` / `s2`. */
static void step(int32_t rank, const int32_t *shape, int32_t *index, const int32_t *s1,
                 ptrdiff_t *p1, const int32_t *s2, ptrdiff_t *p2)
{
    int32_t k;
    for (k = rank - 1; k >= 0; --k) {
        *p1 += s1[k];
        *p2 += s2[k];
        if (++index[k] < shape[k]) {
            return;
        }
        *p1 -= (ptrdiff_t)s1[k] * shape[k];
        *p2 -= (ptrdiff_t)s2[k] * shape[k];
        index[k] = 0;
    }
}

static int32_t volume(int32_t rank, const int32_t *shape)
{
    int32_t k, n = 1;
    for (k = 0; k < rank; ++k) {
        n *= shape[k];
    }
    return n;
}

static int32_t srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
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
    uint32_t u = (uint32_t)(x < 0 ? ~x : x);
    int32_t n = 0;
    if (u == 0) {
        return 31;
    }
    while (!(u & 0x80000000u)) {
        u <<= 1;
        ++n;
    }
    return n - 1;
}

/* DIV (reference_ops::DivElementwise, int8): -1 when the shift is out of TFLM's range */
static int32_t div_value(int32_t a, int32_t b, const qconvert_binary_params *p, int *bad)
{
    int32_t x = a + p->input1_offset;
    const int32_t d = b + p->input2_offset;
    const int32_t inverse = p->div_inverse[b + 128];
    const int32_t headroom = (d < 0 ? (x = -x, leading_sign_bits(x)) : leading_sign_bits(x));
    const int32_t quotient = srdhm((int32_t)((uint32_t)x << headroom), inverse);
    const int32_t total_shift = p->output_shift - p->div_shift[b + 128] - headroom;
    if (total_shift > 0) {
        *bad = 1;
        return 0;
    }
    return clamp_s8(rdbpot_wide(srdhm(quotient, p->output_multiplier), -total_shift)
                        + p->output_offset,
                    p->activation_min, p->activation_max);
}

int qconvert_binary_s8(const int8_t *a, const int8_t *b, int8_t *output,
                       const qconvert_binary_params *p)
{
    int32_t index[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = volume(p->rank, p->shape);
    ptrdiff_t pa = 0, pb = 0;
    int32_t i;
    int bad = 0;
    for (i = 0; i < n; ++i) {
        output[i] = (int8_t)(p->op == QCONVERT_DIV ? div_value(a[pa], b[pb], p, &bad)
                                                   : binary_value(a[pa], b[pb], p));
        step(p->rank, p->shape, index, p->a_strides, &pa, p->b_strides, &pb);
    }
    return bad;
}

void qconvert_copy_box_s8(const int8_t *input, int8_t *output, const qconvert_box *box)
{
    int32_t index[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = volume(box->rank, box->shape);
    ptrdiff_t pi = box->in_base, po = box->out_base;
    int32_t i;
    for (i = 0; i < n; ++i) {
        output[po] = input[pi];
        step(box->rank, box->shape, index, box->in_strides, &pi, box->out_strides, &po);
    }
}

void qconvert_gather_s8(const int8_t *input, int8_t *output, int32_t size, const int32_t *index)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = input[index[i]];
    }
}

void qconvert_fill_s8(int8_t *output, int32_t size, int8_t value)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = value;
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

void qconvert_mean_s8(const int8_t *input, int8_t *output, const qconvert_mean_params *p)
{
    int32_t outer[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = volume(p->outer.rank, p->outer.shape);
    const int32_t m = volume(p->inner.rank, p->inner.shape);
    ptrdiff_t base = p->outer.in_base, po = p->outer.out_base;
    int32_t i, j;
    for (i = 0; i < n; ++i) {
        int32_t inner[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
        ptrdiff_t pi = base, unused = 0;
        int32_t sum = 0;
        for (j = 0; j < m; ++j) {
            sum += input[pi];
            step(p->inner.rank, p->inner.shape, inner, p->inner.in_strides, &pi,
                 p->inner.out_strides, &unused);
        }
        sum = qconvert_requantize(sum - p->input_zero_point * p->count, p->multiplier, p->shift);
        output[po] = clamp_s8(sum + p->output_zero_point, -128, 127);
        step(p->outer.rank, p->outer.shape, outer, p->outer.in_strides, &base,
             p->outer.out_strides, &po);
    }
}

void qconvert_quantize_f32_s8(const float *input, int8_t *output, int32_t size, float scale,
                              int32_t zero_point)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const float v = input[i] / scale;
        int32_t q;
        if (v > -2147483648.0f && v < 2147483648.0f) {
            const float frac = v - (float)(int32_t)v; /* exact: |v| < 2^24 or v is whole */
            q = (int32_t)v;
            if (frac >= 0.5f) {
                ++q; /* round half away from zero */
            } else if (frac <= -0.5f) {
                --q;
            }
        } else {
            q = INT32_MIN; /* out of range or NaN: what x86 hosts compute (TFLite Micro) */
        }
        q = (int32_t)((uint32_t)q + (uint32_t)zero_point);
        output[i] = clamp_s8(q, -128, 127);
    }
}

void qconvert_dequantize_s8_f32(const int8_t *input, float *output, int32_t size, double scale,
                                int32_t zero_point)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = (float)(scale * (double)(input[i] - zero_point));
    }
}
