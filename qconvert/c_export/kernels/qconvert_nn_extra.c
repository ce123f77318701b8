/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_extra.c: transposed convolution, batch matmul and bilinear resize kernels of
 * qconvert_nn.h (TFLite Micro's reference integer kernels, bit for bit).
 * Shipped with qconvert (Apache-2.0).
 */
#include "qconvert_nn_loops.h"

#define TRANSPOSE_CONV_FINISH(acc, oc)                                                          \
    (int8_t)qconvert_finish_s8(acc, bias, oc, p->multiplier[oc], p->shift[oc],                \
                               p->output_offset, p->activation_min, p->activation_max)

void qconvert_transpose_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                                int8_t *output, const qconvert_conv_params *p)
{
    QCONVERT_TRANSPOSE_CONV_LOOP(int8_t, int32_t, input, weights, output, p,
                                 TRANSPOSE_CONV_FINISH);
}

#define MATMUL_FINISH(acc)                                                                      \
    (int8_t)qconvert_finish_s8(acc, NULL, 0, p->output_multiplier, p->output_shift,           \
                               p->output_offset, -128, 127)

void qconvert_batch_matmul_s8(const int8_t *a, const int8_t *b, int8_t *output,
                              const qconvert_matmul_params *p)
{
    QCONVERT_BATCH_MATMUL_LOOP(int8_t, int32_t, a, b, output, p, MATMUL_FINISH);
}

/* Each output is the four neighbours weighted by (1024 - dy or dy) * (1024 - dx or dx), whose
 * four weights add up to 2^20: |total| <= 128 * 2^20 = 2^27, so int32 holds TFLite's int64 sum
 * exactly, and the weights of a pixel are computed once for all its channels. */
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
                const int32_t w00 = ((1 << 10) - dy) * ((1 << 10) - dx);
                const int32_t w10 = dy * ((1 << 10) - dx);
                const int32_t w01 = ((1 << 10) - dy) * dx;
                const int32_t w11 = dy * dx;
                const int8_t *a0 = r0 + (ptrdiff_t)p->x_lower[x] * p->channels;
                const int8_t *a1 = r1 + (ptrdiff_t)p->x_lower[x] * p->channels;
                const int8_t *b0 = r0 + (ptrdiff_t)p->x_upper[x] * p->channels;
                const int8_t *b1 = r1 + (ptrdiff_t)p->x_upper[x] * p->channels;
                for (c = 0; c < p->channels; ++c) {
                    const int32_t total = a0[c] * w00 + a1[c] * w10 + b0[c] * w01 + b1[c] * w11;
                    const int32_t half = total > 0 ? (1 << 19) : -(1 << 19);
                    output[o++] = (int8_t)((total + half) / (1 << 20));
                }
            }
        }
    }
}
