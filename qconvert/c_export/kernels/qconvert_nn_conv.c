/* qconvert_nn_conv.c: convolution, depthwise convolution, row-major fully connected and pooling
 * kernels of qconvert_nn.h (TFLite Micro's reference integer kernels, bit for bit).
 * Shipped with qconvert (Apache-2.0).
 *
 * Each kernel walks its output in memory order and reads the taps of output element i before
 * writing it (see qconvert_nn.h: the memory plan relies on this).
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

static int32_t conv_output(int32_t acc, int32_t channel, const int32_t *bias,
                           const qconvert_conv_params *p)
{
    if (bias != NULL) {
        acc += bias[channel];
    }
    acc = qconvert_requantize(acc, p->multiplier[channel], p->shift[channel]);
    return acc + p->output_offset;
}

void qconvert_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                      int8_t *output, const qconvert_conv_params *p)
{
    /* depth_multiplier holds the group count of a grouped convolution (1: a plain one) */
    const int32_t groups = p->depth_multiplier > 0 ? p->depth_multiplier : 1;
    const int32_t filter_c = p->in_c / groups;
    const int32_t per_group = p->out_c / groups;
    int32_t b, oy, ox, oc, ky, kx, ic;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (oc = 0; oc < p->out_c; ++oc) {
                    const int8_t *w_oc = weights + (ptrdiff_t)oc * p->kernel_h * p->kernel_w * filter_c;
                    const int32_t first_c = (oc / per_group) * filter_c;
                    int32_t acc = 0;
                    for (ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t y = y0 + ky * p->dilation_h;
                        if (y < 0 || y >= p->in_h) {
                            continue;
                        }
                        for (kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t x = x0 + kx * p->dilation_w;
                            const int8_t *in_px;
                            const int8_t *w_tap;
                            if (x < 0 || x >= p->in_w) {
                                continue;
                            }
                            in_px = in_b + ((ptrdiff_t)y * p->in_w + x) * p->in_c + first_c;
                            w_tap = w_oc + ((ptrdiff_t)ky * p->kernel_w + kx) * filter_c;
                            for (ic = 0; ic < filter_c; ++ic) {
                                acc += (in_px[ic] + p->input_offset) * w_tap[ic];
                            }
                        }
                    }
                    output[o++] = clamp_s8(conv_output(acc, oc, bias, p), p->activation_min,
                                           p->activation_max);
                }
            }
        }
    }
}

void qconvert_depthwise_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                                int8_t *output, const qconvert_conv_params *p)
{
    int32_t b, oy, ox, ic, m, ky, kx;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (ic = 0; ic < p->in_c; ++ic) {
                    for (m = 0; m < p->depth_multiplier; ++m) {
                        const int32_t oc = ic * p->depth_multiplier + m;
                        int32_t acc = 0;
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
                                acc += (in_b[((ptrdiff_t)y * p->in_w + x) * p->in_c + ic]
                                        + p->input_offset)
                                       * weights[((ptrdiff_t)ky * p->kernel_w + kx) * p->out_c + oc];
                            }
                        }
                        output[o++] = clamp_s8(conv_output(acc, oc, bias, p), p->activation_min,
                                               p->activation_max);
                    }
                }
            }
        }
    }
}

void qconvert_fc_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                    int8_t *output, int32_t batches, int32_t accum_depth, int32_t output_depth,
                    const qconvert_fc_quant *quant)
{
    int32_t b, r, c;
    for (b = 0; b < batches; ++b) {
        const int8_t *x = input + (ptrdiff_t)b * accum_depth;
        int8_t *y = output + (ptrdiff_t)b * output_depth;
        for (r = 0; r < output_depth; ++r) {
            const int8_t *w = weights + (ptrdiff_t)r * accum_depth;
            const int32_t channel = quant->per_channel ? r : 0;
            int32_t acc = 0;
            for (c = 0; c < accum_depth; ++c) {
                acc += (w[c] + quant->weights_offset) * (x[c] + quant->input_offset);
            }
            if (bias != NULL) {
                acc += bias[r];
            }
            acc = qconvert_requantize(acc, quant->multiplier[channel], quant->shift[channel]);
            y[r] = clamp_s8(acc + quant->output_offset, quant->activation_min,
                            quant->activation_max);
        }
    }
}

static void pool(const int8_t *input, int8_t *output, const qconvert_conv_params *p, int average)
{
    int32_t b, oy, ox, c, ky, kx;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (c = 0; c < p->in_c; ++c) {
                    int32_t acc = average ? 0 : -128;
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
                    if (average && count > 0) { /* rounded half away from zero */
                        acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
                    }
                    output[o++] = clamp_s8(acc, p->activation_min, p->activation_max);
                }
            }
        }
    }
}

void qconvert_avgpool_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p)
{
    pool(input, output, p, 1);
}

void qconvert_maxpool_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p)
{
    pool(input, output, p, 0);
}
