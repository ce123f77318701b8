/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_fast.h: qconvert's layer-specialised int8 kernels for whole-model C
 * (`qconvert export-c`): depthwise convolution, pools and element-wise add, written for
 * Cortex-M (ACLE DSP intrinsics where __ARM_FEATURE_DSP is defined, plain C elsewhere, the same
 * bits everywhere). Shipped with qconvert (Apache-2.0). Plain C99: no allocation.
 *
 * Every kernel computes what TFLite Micro's reference kernel computes, bit for bit, from numbers
 * the exporter derives ahead of time (re-laid-out weights, per-layer flags and tables).
 *
 * Memory order (the memory plan relies on it, see qconvert_nn.h): the output is walked in memory
 * order; a block of at most four consecutive output elements (four channels of one pixel) is
 * written after every input it needs is read, and before anything of a later element is read.
 */
#ifndef QCONVERT_NN_FAST_H
#define QCONVERT_NN_FAST_H

#include <stdint.h>

#include "qconvert_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DepthwiseConv2D with depth multiplier 1 (channels = in_c = out_c), NHWC. */
typedef struct {
    int32_t batches, in_h, in_w, channels, out_h, out_w;
    int32_t kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
    int32_t input_offset, output_offset, activation_min, activation_max;
    const int32_t *multiplier; /* channels entries */
    const int32_t *shift;      /* channels entries: TFLite's (> 0 is a left shift), or with
                                  fast_requantize -shift - 2 (qconvert_requantize_fast's r) */
    int32_t fast_requantize;   /* 1: every multiplier in [2^30, 2^31) and every shift <= -2 */
} qconvert_dw_params;

/* weights in groups of four channels: for g < channels / 4, tap t (ky * kernel_w + kx), lane j:
 * weights[(g * taps + t) * 4 + j] = W[ky][kx][4 g + j]; then the last channels % 4 channels,
 * tap-major: weights[C4 * taps + t * (channels - C4) + (c - C4)], C4 = channels - channels % 4.
 * bias: channels values or NULL. */
void qconvert_dw_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                    int8_t *output, const qconvert_dw_params *p);

/* The same with TFLite's weights [1][kh][kw][channels] and TFLite's shifts (also with
 * fast_requantize): the arrays CMSIS-NN's depthwise call reads. */
void qconvert_dw_hwc_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                        int8_t *output, const qconvert_dw_params *p);

/* AveragePool / MaxPool (int8) over qconvert_nn.h's conv geometry (dilation 1, out_c = in_c,
 * multiplier and shift unused): taps outside the image are skipped (the average counts only
 * those inside), as TFLite Micro's reference kernels. */
void qconvert_avgpool_fast_s8(const int8_t *input, int8_t *output,
                              const qconvert_conv_params *p);
void qconvert_maxpool_fast_s8(const int8_t *input, int8_t *output,
                              const qconvert_conv_params *p);

/* ADD and SUB (int8): TFLite's rescale of each input, (x + offset) << left_shift requantized to
 * the common scale, is a function of the raw int8 value, so the exporter tabulates it (256 int32
 * entries per input, value v at index v + 128; SUB: input 2's negated);
 * output[o][i] = clamp(requantize(table1[a[o][i]] + table2[b[o * b_outer + i * b_inner]]) +
 * output_offset) for o < outer, i < inner: the same shapes (outer 1, b_outer 0, b_inner 1), b one
 * value per channel (b_outer 0, b_inner 1, inner the trailing size), b one value per row
 * (b_outer 1, b_inner 0) or one value (both 0). In place (over a) is allowed. */
typedef struct {
    int32_t outer, inner, b_outer, b_inner;
    const int32_t *table1, *table2;
    int32_t output_multiplier;
    int32_t output_shift; /* TFLite's, or with fast_requantize -shift - 2 */
    int32_t output_offset, activation_min, activation_max;
    int32_t fast_requantize; /* 1: multiplier in [2^30, 2^31) and shift <= -2 */
} qconvert_add_params;

void qconvert_add_fast_s8(const int8_t *a, const int8_t *b, int8_t *output,
                          const qconvert_add_params *p);

/* MUL (int8): output[o][i] = clamp(requantize((a[o][i] + input1_offset) *
 * (b[o * b_step + i * b_inner] + input2_offset)) + output_offset) for o < outer, i < inner: the
 * same shapes (outer 1), b one value per channel (b_step 0, inner the trailing size), one value
 * per row (b_step 1, b_inner 0) or one value (both 0). In place (over a) is allowed. */
typedef struct {
    int32_t outer, inner, b_step, b_inner;
    int32_t input1_offset, input2_offset;
    int32_t output_multiplier;
    int32_t output_shift; /* TFLite's, or with fast_requantize -shift - 2 */
    int32_t output_offset, activation_min, activation_max;
    int32_t fast_requantize; /* 1: multiplier in [2^30, 2^31) and shift <= -2 */
} qconvert_mul_params;

void qconvert_mul_fast_s8(const int8_t *a, const int8_t *b, int8_t *output,
                          const qconvert_mul_params *p);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_FAST_H */
