/* qconvert_nn_s16.c: the 16x8 kernels of qconvert_nn.h (int16 activations, int8 weights),
 * TFLite Micro's reference integer kernels bit for bit. Shipped with qconvert (Apache-2.0).
 *
 * Conv, depthwise conv and fully connected accumulate in 64 bits and requantize with TFLite's
 * 64-bit MultiplyByQuantizedMultiplier (the Q31 multiplier rounded to Q15) when given an int64
 * bias or none (`bias64`), or in 32 bits with the ordinary requantization when given an int32
 * bias (`bias32`, TFLite Micro's int32-bias 16x8 path). Every kernel walks its output in memory
 * order; the element-wise ones read element i before writing it.
 */
#include "qconvert_nn.h"

#include <stddef.h>

static int32_t clamp32(int32_t value, int32_t lo, int32_t hi)
{
    if (value < lo) {
        value = lo;
    }
    if (value > hi) {
        value = hi;
    }
    return value;
}

int32_t qconvert_requantize64(int64_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t reduced = multiplier < 0x7FFF0000 ? (multiplier + (1 << 15)) >> 16 : 0x7FFF;
    const int32_t total = 15 - shift;
    const int64_t x = acc * reduced + ((int64_t)1 << (total - 1));
    return (int32_t)(x >> total);
}

/* The accumulator + bias requantized as the layer's bias type says, + output offset. */
static int32_t s16_output(int64_t acc, int32_t channel, const int64_t *bias64,
                          const int32_t *bias32, const int32_t *multiplier,
                          const int32_t *shift, int32_t output_offset)
{
    int32_t out;
    if (bias32 != NULL) { /* int32 accumulator: wraps as the device's int32_t does */
        const int32_t acc32 = (int32_t)((uint32_t)(int32_t)acc + (uint32_t)bias32[channel]);
        out = qconvert_requantize(acc32, multiplier[channel], shift[channel]);
    } else {
        if (bias64 != NULL) {
            acc += bias64[channel];
        }
        out = qconvert_requantize64(acc, multiplier[channel], shift[channel]);
    }
    return out + output_offset;
}

void qconvert_conv_s16(const int16_t *input, const int8_t *weights, const int64_t *bias64,
                       const int32_t *bias32, int16_t *output, const qconvert_conv_params *p)
{
    const int32_t groups = p->depth_multiplier > 0 ? p->depth_multiplier : 1;
    const int32_t filter_c = p->in_c / groups;
    const int32_t per_group = p->out_c / groups;
    int32_t b, oy, ox, oc, ky, kx, ic;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int16_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (oc = 0; oc < p->out_c; ++oc) {
                    const int8_t *w_oc = weights + (ptrdiff_t)oc * p->kernel_h * p->kernel_w * filter_c;
                    const int32_t first_c = (oc / per_group) * filter_c;
                    int64_t acc = 0;
                    for (ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t y = y0 + ky * p->dilation_h;
                        if (y < 0 || y >= p->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t x = x0 + kx * p->dilation_w;
                            const int16_t *in_px;
                            const int8_t *w_tap;
                            if (x < 0 || x >= p->in_w) {
                                continue;
                            }
                            in_px = in_b + ((ptrdiff_t)y * p->in_w + x) * p->in_c + first_c;
                            w_tap = w_oc + ((ptrdiff_t)ky * p->kernel_w + kx) * filter_c;
                            for (ic = 0; ic < filter_c; ++ic) {
                                acc += (int32_t)in_px[ic] * w_tap[ic];
                            }
                        }
                    }
                    output[o++] = (int16_t)clamp32(
                        s16_output(acc, oc, bias64, bias32, p->multiplier, p->shift,
                                   p->output_offset),
                        p->activation_min, p->activation_max);
                }
            }
        }
    }
}

void qconvert_depthwise_conv_s16(const int16_t *input, const int8_t *weights,
                                 const int64_t *bias64, const int32_t *bias32, int16_t *output,
                                 const qconvert_conv_params *p)
{
    int32_t b, oy, ox, oc, ky, kx;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int16_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (oc = 0; oc < p->out_c; ++oc) {
                    const int32_t ic = oc / p->depth_multiplier;
                    int64_t acc = 0;
                    for (ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t y = y0 + ky * p->dilation_h;
                        if (y < 0 || y >= p->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t x = x0 + kx * p->dilation_w;
                            if (x < 0 || x >= p->in_w) {
                                continue;
                            }
                            acc += (int32_t)in_b[((ptrdiff_t)y * p->in_w + x) * p->in_c + ic]
                                   * weights[((ptrdiff_t)ky * p->kernel_w + kx) * p->out_c + oc];
                        }
                    }
                    output[o++] = (int16_t)clamp32(
                        s16_output(acc, oc, bias64, bias32, p->multiplier, p->shift,
                                   p->output_offset),
                        p->activation_min, p->activation_max);
                }
            }
        }
    }
}

void qconvert_fc_s16(const int16_t *input, const int8_t *weights, const int64_t *bias64,
                     const int32_t *bias32, int16_t *output, int32_t batches,
                     int32_t accum_depth, int32_t output_depth, const qconvert_fc_quant *quant)
{
    int32_t b, r, k;
    for (b = 0; b < batches; ++b) {
        const int16_t *x = input + (ptrdiff_t)b * accum_depth;
        int16_t *y = output + (ptrdiff_t)b * output_depth;
        for (r = 0; r < output_depth; ++r) {
            const int8_t *w = weights + (ptrdiff_t)r * accum_depth;
            const int32_t channel = quant->per_channel ? r : 0;
            int64_t acc = 0;
            for (k = 0; k < accum_depth; ++k) {
                acc += (int64_t)((int32_t)w[k] + quant->weights_offset)
                       * ((int32_t)x[k] + quant->input_offset);
            }
            if (bias32 != NULL) {
                const int32_t acc32 = (int32_t)((uint32_t)(int32_t)acc + (uint32_t)bias32[r]);
                y[r] = (int16_t)clamp32(
                    qconvert_requantize(acc32, quant->multiplier[channel], quant->shift[channel])
                        + quant->output_offset,
                    quant->activation_min, quant->activation_max);
            } else {
                if (bias64 != NULL) {
                    acc += bias64[r];
                }
                y[r] = (int16_t)clamp32(
                    qconvert_requantize64(acc, quant->multiplier[channel], quant->shift[channel])
                        + quant->output_offset,
                    quant->activation_min, quant->activation_max);
            }
        }
    }
}

static void pool_s16(const int16_t *input, int16_t *output, const qconvert_conv_params *p,
                     int average)
{
    int32_t b, oy, ox, c, ky, kx;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int16_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (c = 0; c < p->out_c; ++c) {
                    int32_t acc = average ? 0 : INT16_MIN;
                    int32_t count = 0;
                    for (ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t y = y0 + ky;
                        if (y < 0 || y >= p->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t x = x0 + kx;
                            int32_t v;
                            if (x < 0 || x >= p->in_w) {
                                continue;
                            }
                            v = in_b[((ptrdiff_t)y * p->in_w + x) * p->in_c + c];
                            if (average) {
                                acc += v;
                            } else if (v > acc) {
                                acc = v;
                            }
                            ++count;
                        }
                    }
                    if (average) { /* rounded half away from zero, C division */
                        acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
                    }
                    output[o++] = (int16_t)clamp32(acc, p->activation_min, p->activation_max);
                }
            }
        }
    }
}

void qconvert_avgpool_s16(const int16_t *input, int16_t *output, const qconvert_conv_params *p)
{
    pool_s16(input, output, p, 1);
}

void qconvert_maxpool_s16(const int16_t *input, int16_t *output, const qconvert_conv_params *p)
{
    pool_s16(input, output, p, 0);
}

/* Advance the row-major odometer `index` over `shape`; the two positions follow `s1` / `s2`. */
static void step16(int32_t rank, const int32_t *shape, int32_t *index, const int32_t *s1,
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

static int32_t volume16(int32_t rank, const int32_t *shape)
{
    int32_t k, n = 1;
    for (k = 0; k < rank; ++k) {
        n *= shape[k];
    }
    return n;
}

static int32_t binary_value16(int32_t a, int32_t b, const qconvert_binary_params *p)
{
    int32_t raw;
    switch (p->op) {
    case QCONVERT_MAXIMUM:
        return a > b ? a : b;
    case QCONVERT_MINIMUM:
        return a < b ? a : b;
    case QCONVERT_SQUARED_DIFFERENCE: {
        const int32_t d =
            qconvert_requantize((a + p->input1_offset) * (1 << p->left_shift),
                                p->input1_multiplier, p->input1_shift) -
            qconvert_requantize((b + p->input2_offset) * (1 << p->left_shift),
                                p->input2_multiplier, p->input2_shift);
        raw = qconvert_requantize((int32_t)((uint32_t)d * (uint32_t)d), p->output_multiplier,
                                  p->output_shift);
        return clamp32(raw + p->output_offset, p->activation_min, p->activation_max);
    }
    case QCONVERT_MUL:
        raw = qconvert_requantize((a + p->input1_offset) * (b + p->input2_offset),
                                  p->output_multiplier, p->output_shift);
        return clamp32(raw + p->output_offset, p->activation_min, p->activation_max);
    default: { /* ADD, SUB: both inputs << left_shift (15), rescaled, summed, requantized */
        const int32_t sa = qconvert_requantize((a + p->input1_offset) * (1 << p->left_shift),
                                               p->input1_multiplier, p->input1_shift);
        const int32_t sb = qconvert_requantize((b + p->input2_offset) * (1 << p->left_shift),
                                               p->input2_multiplier, p->input2_shift);
        raw = qconvert_requantize(p->op == QCONVERT_ADD ? sa + sb : sa - sb,
                                  p->output_multiplier, p->output_shift);
        return clamp32(raw + p->output_offset, p->activation_min, p->activation_max);
    }
    }
}

void qconvert_prelu_s16(const int16_t *input, const int8_t *alpha, int16_t *output,
                        const qconvert_binary_params *p)
{
    int32_t index[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = volume16(p->rank, p->shape);
    ptrdiff_t pa = 0, pb = 0;
    int32_t i;
    for (i = 0; i < n; ++i) {
        const int32_t v = input[pa] + p->input1_offset;
        const int32_t raw = v >= 0
            ? qconvert_requantize(v, p->output_multiplier, p->output_shift)
            : qconvert_requantize(v * (alpha[pb] + p->input2_offset), p->input2_multiplier,
                                  p->input2_shift);
        output[i] = (int16_t)clamp32(raw + p->output_offset, INT16_MIN, INT16_MAX);
        step16(p->rank, p->shape, index, p->a_strides, &pa, p->b_strides, &pb);
    }
}

void qconvert_binary_s16(const int16_t *a, const int16_t *b, int16_t *output,
                         const qconvert_binary_params *p)
{
    int32_t index[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = volume16(p->rank, p->shape);
    ptrdiff_t pa = 0, pb = 0;
    int32_t i;
    for (i = 0; i < n; ++i) {
        output[i] = (int16_t)binary_value16(a[pa], b[pb], p);
        step16(p->rank, p->shape, index, p->a_strides, &pa, p->b_strides, &pb);
    }
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

static int32_t leading_zeros32(uint32_t u)
{
    int32_t n = 0;
    if (u == 0) {
        return 32;
    }
    while (!(u & 0x80000000u)) {
        u <<= 1;
        ++n;
    }
    return n;
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
            y[c] = lut_lookup(clamp32(scaled + 32767, INT16_MIN, INT16_MAX), exp_lut);
            sum += y[c];
        }
        headroom = leading_zeros32((uint32_t)sum);
        shifted = (int32_t)((((int64_t)sum << (headroom - 1)) + (1 << 13)) >> 14);
        sym = clamp32(shifted - (1 << 15) - (1 << 16), INT16_MIN, INT16_MAX);
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

void qconvert_logistic_s16(const int16_t *input, int16_t *output, int32_t size,
                           int32_t multiplier, int32_t left_shift, const uint16_t *table)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = scaled_input16(input[i], multiplier, left_shift);
        const uint32_t a = (uint32_t)(v < 0 ? -v : v);
        const uint32_t uh = a >> 9;
        uint32_t result;
        if (uh >= 255) {
            result = 0x7FFFu << 10;
        } else {
            const uint32_t ua = table[uh], ub = table[uh + 1];
            result = (ua << 9) + (a & 0x1FFu) * (ub - ua);
        }
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
        const uint32_t a = (uint32_t)(v < 0 ? -v : v);
        const uint32_t uh = a >> 8;
        int32_t result;
        if (uh >= 255) {
            result = (int32_t)(0xFFFFu << 8);
        } else {
            const uint32_t ua = table[uh], ub = table[uh + 1];
            result = (int32_t)((ua << 8) + (a & 0xFFu) * (ub - ua));
        }
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
        out = clamp32(out + p->output_zero_point, p->activation_min, p->activation_max);
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
        output[i] = (int16_t)clamp32(input[i], lo, hi);
    }
}

void qconvert_quantize_f32_s16(const float *input, int16_t *output, int32_t size, float scale,
                               int32_t zero_point)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const float v = input[i] / scale;
        int32_t q;
        if (v > -2147483648.0f && v < 2147483648.0f) {
            const float frac = v - (float)(int32_t)v;
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
        output[i] = (int16_t)clamp32(q, INT16_MIN, INT16_MAX);
    }
}

void qconvert_dequantize_s16_f32(const int16_t *input, float *output, int32_t size,
                                 double scale, int32_t zero_point)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = (float)(scale * (double)(input[i] - zero_point));
    }
}

void qconvert_mean_s16(const int16_t *input, int16_t *output, const qconvert_mean_params *p)
{
    int32_t outer[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = volume16(p->outer.rank, p->outer.shape);
    const int32_t m = volume16(p->inner.rank, p->inner.shape);
    ptrdiff_t base = p->outer.in_base, po = p->outer.out_base;
    int32_t i, j;
    for (i = 0; i < n; ++i) {
        int32_t inner[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
        ptrdiff_t pi = base, unused = 0;
        int32_t sum = 0;
        for (j = 0; j < m; ++j) {
            sum += input[pi];
            step16(p->inner.rank, p->inner.shape, inner, p->inner.in_strides, &pi,
                   p->inner.out_strides, &unused);
        }
        sum = qconvert_requantize(sum - p->input_zero_point * p->count, p->multiplier, p->shift);
        output[po] = (int16_t)clamp32(sum + p->output_zero_point, INT16_MIN, INT16_MAX);
        step16(p->outer.rank, p->outer.shape, outer, p->outer.in_strides, &base,
               p->outer.out_strides, &po);
    }
}

void qconvert_copy_box_s16(const int16_t *input, int16_t *output, const qconvert_box *box)
{
    int32_t index[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = volume16(box->rank, box->shape);
    ptrdiff_t pi = box->in_base, po = box->out_base;
    int32_t i;
    for (i = 0; i < n; ++i) {
        output[po] = input[pi];
        step16(box->rank, box->shape, index, box->in_strides, &pi, box->out_strides, &po);
    }
}

void qconvert_gather_s16(const int16_t *input, int16_t *output, int32_t size,
                         const int32_t *index)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = input[index[i]];
    }
}

void qconvert_fill_s16(int16_t *output, int32_t size, int16_t value)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        output[i] = value;
    }
}

void qconvert_transpose_conv_s16(const int16_t *input, const int8_t *weights,
                                 const int64_t *bias, int16_t *output,
                                 const qconvert_conv_params *p)
{
    /* gather form of TFLite's scatter: output (oy, ox) sums the taps (ky, kx) whose input pixel
     * (oy + top - ky) / stride is whole and inside the image (exact int64 sums) */
    int32_t b, oy, ox, oc, ky, kx, ic;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int16_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                for (oc = 0; oc < p->out_c; ++oc) {
                    int64_t acc = 0;
                    for (ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t ty = oy + p->pad_top - ky;
                        int32_t iy;
                        if (ty < 0 || ty % p->stride_h != 0) {
                            continue;
                        }
                        iy = ty / p->stride_h;
                        if (iy >= p->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t tx = ox + p->pad_left - kx;
                            const int16_t *in_px;
                            const int8_t *w_tap;
                            int32_t ix;
                            if (tx < 0 || tx % p->stride_w != 0) {
                                continue;
                            }
                            ix = tx / p->stride_w;
                            if (ix >= p->in_w) {
                                continue;
                            }
                            in_px = in_b + ((ptrdiff_t)iy * p->in_w + ix) * p->in_c;
                            w_tap = weights + (((ptrdiff_t)oc * p->kernel_h + ky) * p->kernel_w + kx)
                                                  * p->in_c;
                            for (ic = 0; ic < p->in_c; ++ic) {
                                acc += (int32_t)in_px[ic] * w_tap[ic];
                            }
                        }
                    }
                    if (bias != NULL) {
                        acc += bias[oc];
                    }
                    output[o++] = (int16_t)clamp32(
                        qconvert_requantize64(acc, p->multiplier[oc], p->shift[oc])
                            + p->output_offset,
                        p->activation_min, p->activation_max);
                }
            }
        }
    }
}

void qconvert_batch_matmul_s16(const int16_t *a, const int16_t *b, int16_t *output,
                               const qconvert_matmul_params *p)
{
    int32_t n, i, j, k;
    ptrdiff_t o = 0;
    for (n = 0; n < p->batches; ++n) {
        const int16_t *a_n = a + p->a_batch[n];
        const int16_t *b_n = b + p->b_batch[n];
        for (i = 0; i < p->rows; ++i) {
            for (j = 0; j < p->cols; ++j) {
                int64_t acc = 0;
                for (k = 0; k < p->depth; ++k) {
                    acc += (int64_t)((int32_t)a_n[(ptrdiff_t)i * p->a_row
                                                  + (ptrdiff_t)k * p->a_depth] + p->lhs_offset)
                           * ((int32_t)b_n[(ptrdiff_t)k * p->b_depth + (ptrdiff_t)j * p->b_col]
                              + p->rhs_offset);
                }
                output[o++] = (int16_t)clamp32(
                    qconvert_requantize64(acc, p->output_multiplier, p->output_shift)
                        + p->output_offset, INT16_MIN, INT16_MAX);
            }
        }
    }
}
