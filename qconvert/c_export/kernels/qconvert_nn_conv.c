/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_conv.c: convolution, depthwise convolution, row-major fully connected and pooling
 * kernels of qconvert_nn.h (TFLite Micro's reference integer kernels, bit for bit).
 * Shipped with qconvert (Apache-2.0).
 *
 * The loops are qconvert_nn_loops.h's (shared with the 16x8 kernels); this file gives them the
 * int8 types and output stage: an int32 accumulator, an int32 bias, TFLite's requantization.
 */
#include "qconvert_nn_loops.h"

/* the output stage of a conv / depthwise conv (channel oc) */
#define CONV_FINISH(acc, oc)                                                                   \
    (int8_t)qconvert_finish_s8(acc, bias, oc, p->multiplier[oc], p->shift[oc],                \
                               p->output_offset, p->activation_min, p->activation_max)

void qconvert_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                      int8_t *output, const qconvert_conv_params *p)
{
    QCONVERT_CONV_LOOP(int8_t, int32_t, input, weights, output, p, 0, CONV_FINISH);
}

void qconvert_depthwise_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                                int8_t *output, const qconvert_conv_params *p)
{
    QCONVERT_CONV_LOOP(int8_t, int32_t, input, weights, output, p, 1, CONV_FINISH);
}

/* the output stage of fully connected row r */
#define FC_FINISH(acc, r)                                                                      \
    (int8_t)qconvert_finish_s8(acc, bias, r, quant->multiplier[quant->per_channel ? r : 0],   \
                               quant->shift[quant->per_channel ? r : 0], quant->output_offset, \
                               quant->activation_min, quant->activation_max)

void qconvert_fc_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                    int8_t *output, int32_t batches, int32_t accum_depth, int32_t output_depth,
                    const qconvert_fc_quant *quant)
{
    QCONVERT_FC_LOOP(int8_t, int32_t, input, weights, output, batches, accum_depth,
                     output_depth, quant, FC_FINISH);
}

QCONVERT_DEFINE_POOL(pool_s8, int8_t, -128)

void qconvert_avgpool_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p)
{
    pool_s8(input, output, p, 1);
}

void qconvert_maxpool_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p)
{
    pool_s8(input, output, p, 0);
}
