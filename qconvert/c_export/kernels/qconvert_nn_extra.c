/* qconvert_nn_extra.c: transposed convolution, batch matmul and bilinear resize kernels of
 * qconvert_nn.h (TFLite Micro's reference integer kernels, bit for bit).
 * Shipped with qconvert (Apache-2.0).
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

void qconvert_transpose_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                                int8_t *output, const qconvert_conv_params *p)
{
    /* gather form of the scatter TFLite computes: output (oy, ox) sums the taps (ky, kx) whose
     * input pixel (oy + top - ky) / stride is whole and inside the image (exact int32 sums) */
    int32_t b, oy, ox, oc, ky, kx, ic;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            for (ox = 0; ox < p->out_w; ++ox) {
                for (oc = 0; oc < p->out_c; ++oc) {
                    int32_t acc = 0;
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
                            const int8_t *in_px;
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
                                acc += (in_px[ic] + p->input_offset) * w_tap[ic];
                            }
                        }
                    }
                    if (bias != NULL) {
                        acc += bias[oc];
                    }
                    acc = qconvert_requantize(acc, p->multiplier[oc], p->shift[oc]);
                    output[o++] = clamp_s8(acc + p->output_offset, p->activation_min,
                                           p->activation_max);
                }
            }
        }
    }
}

void qconvert_batch_matmul_s8(const int8_t *a, const int8_t *b, int8_t *output,
                              const qconvert_matmul_params *p)
{
    int32_t n, i, j, k;
    ptrdiff_t o = 0;
    for (n = 0; n < p->batches; ++n) {
        const int8_t *a_n = a + p->a_batch[n];
        const int8_t *b_n = b + p->b_batch[n];
        for (i = 0; i < p->rows; ++i) {
            for (j = 0; j < p->cols; ++j) {
                int32_t acc = 0;
                for (k = 0; k < p->depth; ++k) {
                    acc += (a_n[(ptrdiff_t)i * p->a_row + (ptrdiff_t)k * p->a_depth] + p->lhs_offset)
                           * (b_n[(ptrdiff_t)k * p->b_depth + (ptrdiff_t)j * p->b_col]
                              + p->rhs_offset);
                }
                acc = qconvert_requantize(acc, p->output_multiplier, p->output_shift);
                output[o++] = clamp_s8(acc + p->output_offset, -128, 127);
            }
        }
    }
}

void qconvert_resize_bilinear_s8(const int8_t *input, int8_t *output, const qconvert_resize_params *p)
{
    int32_t b, y, x, c;
    ptrdiff_t o = 0;
    for (b = 0; b < p->batches; ++b) {
        const int8_t *in_b = input + (ptrdiff_t)b * p->in_h * p->in_w * p->channels;
        for (y = 0; y < p->out_h; ++y) {
            const int32_t dy = p->y_frac[y];
            const int8_t *r0 = in_b + (ptrdiff_t)p->y_lower[y] * p->in_w * p->channels;
            const int8_t *r1 = in_b + (ptrdiff_t)p->y_upper[y] * p->in_w * p->channels;
            for (x = 0; x < p->out_w; ++x) {
                const int32_t dx = p->x_frac[x];
                const ptrdiff_t x0 = (ptrdiff_t)p->x_lower[x] * p->channels;
                const ptrdiff_t x1 = (ptrdiff_t)p->x_upper[x] * p->channels;
                for (c = 0; c < p->channels; ++c) {
                    const int64_t total = (int64_t)r0[x0 + c] * ((1 << 10) - dy) * ((1 << 10) - dx)
                                          + (int64_t)r1[x0 + c] * dy * ((1 << 10) - dx)
                                          + (int64_t)r0[x1 + c] * ((1 << 10) - dy) * dx
                                          + (int64_t)r1[x1 + c] * dy * dx;
                    const int64_t half = total > 0 ? ((int64_t)1 << 19) : -((int64_t)1 << 19);
                    output[o++] = (int8_t)((total + half) / ((int64_t)1 << 20));
                }
            }
        }
    }
}
