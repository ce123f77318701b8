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
