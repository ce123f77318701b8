/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_fc_1x4.h: portable int8 fully connected kernel for the 1x4 interleaved weight order.
 *
 * Shipped with qconvert (`qconvert export-c-header --with-kernels`). It reads the weights
 * exactly as `qconvert export-c-header` writes them by default (`--fc-layout 1x4`, the order of
 * CMSIS-NN's legacy arm_fully_connected_q7_opt: four output rows per pass through one pointer)
 * and computes what TFLite Micro's reference FULLY_CONNECTED computes, bit for bit:
 *
 *     acc[b][r] = bias[r] + sum_c (weights[r][c] + weights_offset) * (input[b][c] + input_offset)
 *     out[b][r] = clamp(requantize(acc[b][r], multiplier[r], shift[r]) + output_offset,
 *                       activation_min, activation_max)
 *
 * requantize is TFLite's MultiplyByQuantizedMultiplier (double rounding: a rounding doubling
 * high multiply, then a rounding divide by a power of two). Build with -DQCONVERT_SINGLE_ROUNDING
 * for CMSIS-NN's single rounding (CMSIS_NN_USE_SINGLE_ROUNDING) instead.
 *
 * Plain C99, no allocation, no library calls. Accumulation is in int32_t, as in TFLite Micro:
 * with int8 values and zero offsets it cannot overflow below 2^31 / 2^16 = 32768 columns.
 */
#ifndef QCONVERT_FC_1X4_H
#define QCONVERT_FC_1X4_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Quantization of one fully connected layer, as the generated header gives it:
 * <P>_<LAYER>_INPUT_OFFSET, _WEIGHTS_OFFSET, _OUTPUT_OFFSET, _ACTIVATION_MIN, _ACTIVATION_MAX,
 * the <p>_<layer>_multiplier and _shift arrays and _PER_CHANNEL. */
typedef struct {
    int32_t input_offset;      /* added to every input value: -z_in */
    int32_t weights_offset;    /* added to every weight: -z_w (0 for symmetric int8 weights) */
    int32_t output_offset;     /* added after requantization: +z_out */
    int32_t activation_min;    /* output clamp, in [-128, 127] */
    int32_t activation_max;
    const int32_t *multiplier; /* output_depth entries when per_channel, else 1 */
    const int32_t *shift;      /* same count; > 0 is a left shift */
    int per_channel;           /* nonzero: multiplier[r], shift[r] for row r; else entry 0 */
} qconvert_fc_quant;

/* TFLite's MultiplyByQuantizedMultiplier of one int32 accumulator (shift in [-31, 30]), or
 * CMSIS-NN's single-rounding requantization when built with QCONVERT_SINGLE_ROUNDING. */
int32_t qconvert_requantize(int32_t acc, int32_t multiplier, int32_t shift);

/* output[b * output_depth + r] for b < batches, r < output_depth.
 * input: batches rows of accum_depth int8 values; weights: the output_depth x accum_depth
 * matrix in the 1x4 order; bias: output_depth int32 values, or NULL. */
void qconvert_fc_1x4_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                        int8_t *output, int32_t batches, int32_t accum_depth,
                        int32_t output_depth, const qconvert_fc_quant *quant);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_FC_1X4_H */
