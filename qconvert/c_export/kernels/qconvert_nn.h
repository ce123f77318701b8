/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn.h: qconvert's portable int8 kernels for whole-model C (`qconvert export-c`).
 * Shipped with qconvert (Apache-2.0). Plain C99: no allocation, no library calls.
 *
 * Every kernel computes what TFLite Micro's reference kernel computes, bit for bit, from the
 * parameters TFLite Micro derives at Prepare time (qconvert writes them into the model's .c).
 * Requantization is TFLite's double rounding; build with -DQCONVERT_SINGLE_ROUNDING for
 * CMSIS-NN's single rounding (CMSIS_NN_USE_SINGLE_ROUNDING) instead.
 *
 * Loop order matters for the memory plan: every kernel that may run with its output overlapping
 * its input (conv, depthwise, pools, element-wise ops) reads the inputs of output element i and
 * writes it before it reads anything for element i + 1, walking the output in memory order.
 * qconvert's planner relies on that order (and only on it) when it overlaps two tensors.
 */
#ifndef QCONVERT_NN_H
#define QCONVERT_NN_H

#include <stdint.h>

#include "qconvert_fc_1x4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QCONVERT_MAX_RANK 6

/* A convolution-like layer: NHWC input [batches][in_h][in_w][in_c], output
 * [batches][out_h][out_w][out_c]; pads are the top / left padding. */
typedef struct {
    int32_t batches, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
    int32_t depth_multiplier; /* depthwise; a convolution: its group count (1: plain) */
    int32_t input_offset, output_offset, activation_min, activation_max;
    const int32_t *multiplier; /* out_c entries */
    const int32_t *shift;      /* out_c entries; > 0 is a left shift */
} qconvert_conv_params;

/* Conv2D, weights OHWI [out_c][kernel_h][kernel_w][in_c / groups] (groups in
 * depth_multiplier; output channel oc reads the input channels of group oc / (out_c / groups));
 * bias out_c values or NULL. */
void qconvert_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                      int8_t *output, const qconvert_conv_params *p);

/* DepthwiseConv2D, weights [1][kernel_h][kernel_w][out_c], out_c = in_c * depth_multiplier. */
void qconvert_depthwise_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                                int8_t *output, const qconvert_conv_params *p);

/* FullyConnected with row-major weights [output_depth][accum_depth] (the order of CMSIS-NN's
 * arm_fully_connected_s8). Same contract as qconvert_fc_1x4_s8. */
void qconvert_fc_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                    int8_t *output, int32_t batches, int32_t accum_depth, int32_t output_depth,
                    const qconvert_fc_quant *quant);

/* AveragePool / MaxPool: conv geometry (no weights, dilation 1, out_c = in_c), clamps. */
void qconvert_avgpool_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p);
void qconvert_maxpool_s8(const int8_t *input, int8_t *output, const qconvert_conv_params *p);

/* An int8 -> int8 function of one value (Relu, Relu6, Sigmoid, Tanh, HardSwish, int8
 * Quantize): output[i] = table[input[i] + 128]. In place is allowed. */
void qconvert_lookup_s8(const int8_t *input, int8_t *output, int32_t size, const int8_t *table);

/* Element-wise binary ops with broadcasting: the output box `shape` is walked in row-major
 * order; a_strides / b_strides give each input's step along each axis (0 where it broadcasts). */
/* PRELU: input1 >= its zero point -> input1 requantized with output_multiplier / _shift, else
 * (input1 - z1) * (alpha - z2) with input2_multiplier / input2_shift.
 * SQUARED_DIFFERENCE: both inputs rescaled as ADD's, the square of their difference requantized
 * with output_multiplier / _shift. */
typedef enum {
    QCONVERT_ADD, QCONVERT_SUB, QCONVERT_MUL, QCONVERT_MAXIMUM, QCONVERT_MINIMUM, QCONVERT_PRELU,
    QCONVERT_DIV, QCONVERT_SQUARED_DIFFERENCE
} qconvert_binary_op;

typedef struct {
    qconvert_binary_op op;
    int32_t rank;
    int32_t shape[QCONVERT_MAX_RANK];
    int32_t a_strides[QCONVERT_MAX_RANK];
    int32_t b_strides[QCONVERT_MAX_RANK];
    int32_t input1_offset, input2_offset, output_offset, left_shift;
    int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;
    int32_t output_multiplier, output_shift, activation_min, activation_max;
    /* DIV only (else NULL): per raw divisor value (index b + 128), the reciprocal of
     * |b - z2| (gemmlowp's 1 / (1 + x)) and its shift, as TFLite's GetReciprocal gives them */
    const int32_t *div_inverse;
    const int8_t *div_shift;
} qconvert_binary_params;

/* Returns 0, or 1 when a DIV's quotient needs a shift TFLite Micro cannot make (it fails). */
int qconvert_binary_s8(const int8_t *a, const int8_t *b, int8_t *output,
                       const qconvert_binary_params *p);

/* Copy of a box: out[out_base + sum_k i_k * out_strides[k]] = in[in_base + sum_k i_k *
 * in_strides[k]] for every index i of `shape` (Transpose, StridedSlice, Concat, Pad, Gather
 * along contiguous ranges). */
typedef struct {
    int32_t rank;
    int32_t shape[QCONVERT_MAX_RANK];
    int32_t in_strides[QCONVERT_MAX_RANK];
    int32_t out_strides[QCONVERT_MAX_RANK];
    int32_t in_base, out_base;
} qconvert_box;

void qconvert_copy_box_s8(const int8_t *input, int8_t *output, const qconvert_box *box);

/* output[i] = input[index[i]] for i < size (data movement no box describes). */
void qconvert_gather_s8(const int8_t *input, int8_t *output, int32_t size, const int32_t *index);

/* output[i] = value for i < size. */
void qconvert_fill_s8(int8_t *output, int32_t size, int8_t value);

/* Mean over a box of each output element: `outer` is the output box (strides into the input),
 * `inner` the reduced box (strides into the input); count = inner volume. */
typedef struct {
    qconvert_box outer;
    qconvert_box inner;
    int32_t count, multiplier, shift, input_zero_point, output_zero_point;
} qconvert_mean_params;

void qconvert_mean_s8(const int8_t *input, int8_t *output, const qconvert_mean_params *p);

/* Softmax over rows (reference_ops::Softmax<int8, int8>, output scale 1/256, zero point -128). */
void qconvert_softmax_s8(const int8_t *input, int8_t *output, int32_t rows, int32_t row_size,
                         int32_t input_multiplier, int32_t input_left_shift, int32_t diff_min);
/* The same from int8 to int16 (reference_ops::Softmax<int8, int16>, output scale 1/65536, zero
 * point -32768); the output must not overlap the input. */
void qconvert_softmax_s8_s16(const int8_t *input, int16_t *output, int32_t rows,
                             int32_t row_size, int32_t input_multiplier,
                             int32_t input_left_shift, int32_t diff_min);

/* Quantize (float -> int8: round(x / scale) half away from zero, + zero point, clamped) and
 * Dequantize (int8 -> float: (float)(scale * (x - zero point)), in double as TFLite Micro). */
void qconvert_quantize_f32_s8(const float *input, int8_t *output, int32_t size, float scale,
                              int32_t zero_point);
void qconvert_dequantize_s8_f32(const int8_t *input, float *output, int32_t size, double scale,
                                int32_t zero_point);

/* TransposeConv: weights [out_c][kernel_h][kernel_w][in_c]; pad_top / pad_left are TFLite's
 * crop of the full output; dilation 1. */
void qconvert_transpose_conv_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                                int8_t *output, const qconvert_conv_params *p);

/* BatchMatMul: output[n][i][j] = sum_k (a[n][i][k] + lhs_offset) * (b[n][k][j] + rhs_offset),
 * requantized; the batch offsets and strides (elements) express broadcasting and adj_x / adj_y. */
typedef struct {
    int32_t batches, rows, depth, cols;
    const int32_t *a_batch; /* element offset of batch n in a */
    const int32_t *b_batch;
    int32_t a_row, a_depth, b_depth, b_col;
    int32_t lhs_offset, rhs_offset, output_offset, output_multiplier, output_shift;
} qconvert_matmul_params;

void qconvert_batch_matmul_s8(const int8_t *a, const int8_t *b, int8_t *output,
                              const qconvert_matmul_params *p);

/* ResizeBilinear (integer): 10-bit source coordinates per output row and column. */
typedef struct {
    int32_t batches, in_h, in_w, channels, out_h, out_w;
    const int32_t *y_lower, *y_upper, *y_frac; /* out_h entries */
    const int32_t *x_lower, *x_upper, *x_frac; /* out_w entries */
} qconvert_resize_params;

void qconvert_resize_bilinear_s8(const int8_t *input, int8_t *output,
                                 const qconvert_resize_params *p);

/* A one-value function defined only from `min_valid` up (Rsqrt): returns 1, writing nothing
 * more, at the first input below it (TFLite Micro stops with an error there). */
int qconvert_lookup_checked_s8(const int8_t *input, int8_t *output, int32_t size,
                               const int8_t *table, int32_t min_valid);

/* L2_NORMALIZATION along the last axis (`outer` rows of `depth`): each x - input_zero_point
 * scaled by the row's inverse L2 norm (gemmlowp's inverse square root of the sum of squares)
 * times 2^7, clamped: an output of scale 1/128, zero point 0. In place is allowed. */
void qconvert_l2norm_s8(const int8_t *input, int8_t *output, int32_t outer, int32_t depth,
                        int32_t input_zero_point);

/* Copy `size` bytes (input and output may overlap). */
void qconvert_copy_s8(const int8_t *input, int8_t *output, int32_t size);

/* -- 16x8 layers (int16 activations, int8 weights): qconvert_nn_s16.c ------------------------
 * The geometry and parameter structs are the int8 kernels'. Conv, depthwise conv and fully
 * connected take an int64 bias (`bias64`, or NULL for none: 64-bit accumulator and TFLite's
 * 64-bit requantization) or an int32 one (`bias32`: 32-bit accumulator, the requantization
 * above); pass NULL for the other. The fully connected weights are row-major. */

/* TFLite's MultiplyByQuantizedMultiplier of an int64 accumulator: the Q31 multiplier rounded to
 * Q15, one rounding shift by 15 - shift (shift in [-31, 7]), the result truncated to int32. */
int32_t qconvert_requantize64(int64_t acc, int32_t multiplier, int32_t shift);

void qconvert_conv_s16(const int16_t *input, const int8_t *weights, const int64_t *bias64,
                       const int32_t *bias32, int16_t *output, const qconvert_conv_params *p);
void qconvert_depthwise_conv_s16(const int16_t *input, const int8_t *weights,
                                 const int64_t *bias64, const int32_t *bias32, int16_t *output,
                                 const qconvert_conv_params *p);
void qconvert_fc_s16(const int16_t *input, const int8_t *weights, const int64_t *bias64,
                     const int32_t *bias32, int16_t *output, int32_t batches,
                     int32_t accum_depth, int32_t output_depth, const qconvert_fc_quant *quant);
void qconvert_avgpool_s16(const int16_t *input, int16_t *output, const qconvert_conv_params *p);
void qconvert_maxpool_s16(const int16_t *input, int16_t *output, const qconvert_conv_params *p);

/* ADD / SUB (left_shift 15) / MUL / MAXIMUM / MINIMUM on int16 with broadcasting. */
void qconvert_binary_s16(const int16_t *a, const int16_t *b, int16_t *output,
                         const qconvert_binary_params *p);

/* PRELU (int16 input and output, int8 alpha): the PRELU fields of qconvert_binary_params. */
void qconvert_prelu_s16(const int16_t *input, const int8_t *alpha, int16_t *output,
                        const qconvert_binary_params *p);

/* Softmax over rows (reference_ops::SoftmaxInt16): TFLite Micro's 513-entry exp and
 * 1 / (1 + x) tables; output scale 1/32768. */
void qconvert_softmax_s16(const int16_t *input, int16_t *output, int32_t rows, int32_t row_size,
                          int32_t input_multiplier, int32_t input_left_shift,
                          const int16_t *exp_lut, const int16_t *one_over_one_plus_x_lut);

/* Logistic / Tanh (int16): the input scaled by multiplier and left_shift (multiplier 0: a
 * power-of-two scale), read from the 256-entry sigmoid(i / 24) table in unsigned Q0.16. */
void qconvert_logistic_s16(const int16_t *input, int16_t *output, int32_t size,
                           int32_t multiplier, int32_t left_shift, const uint16_t *table);
void qconvert_tanh_s16(const int16_t *input, int16_t *output, int32_t size, int32_t multiplier,
                       int32_t left_shift, const uint16_t *table);

/* v = x - input_zero_point requantized with (multiplier, shift) when v >= 0, else with
 * (|negative_multiplier|, negative_shift) and negated for a negative multiplier; + output zero
 * point, clamped: RELU, LEAKY_RELU and the integer QUANTIZE between int8 and int16
 * (input_bits / output_bits: 8 or 16). */
typedef struct {
    int32_t input_bits, output_bits, input_zero_point, output_zero_point;
    int32_t multiplier, shift, negative_multiplier, negative_shift;
    int32_t activation_min, activation_max;
} qconvert_rescale_params;

void qconvert_rescale_s16(const void *input, void *output, int32_t size,
                          const qconvert_rescale_params *p);

/* RELU6 (int16): the raw values clamped to [lo, hi]. */
void qconvert_clamp_s16(const int16_t *input, int16_t *output, int32_t size, int32_t lo,
                        int32_t hi);

void qconvert_quantize_f32_s16(const float *input, int16_t *output, int32_t size, float scale,
                               int32_t zero_point);
void qconvert_dequantize_s16_f32(const int16_t *input, float *output, int32_t size,
                                 double scale, int32_t zero_point);
void qconvert_mean_s16(const int16_t *input, int16_t *output, const qconvert_mean_params *p);
void qconvert_copy_box_s16(const int16_t *input, int16_t *output, const qconvert_box *box);
void qconvert_gather_s16(const int16_t *input, int16_t *output, int32_t size,
                         const int32_t *index);
void qconvert_fill_s16(int16_t *output, int32_t size, int16_t value);

/* RSQRT (int16, zero points 0: qconvert_nn_s16_math.c): 1 / sqrt(x) by gemmlowp's inverse
 * square root scaled by 2**20, requantized with (multiplier, shift - 20); 0 gives 32767.
 * Returns 1, writing nothing more, at the first negative input (TFLite Micro stops with an
 * error there). In place is allowed. */
int qconvert_rsqrt_s16(const int16_t *input, int16_t *output, int32_t size, int32_t multiplier,
                       int32_t shift);

/* ABS (int16, zero points 0): |x|, requantized with (multiplier, shift) when needs_rescale,
 * clamped. In place is allowed. */
void qconvert_abs_s16(const int16_t *input, int16_t *output, int32_t size, int32_t needs_rescale,
                      int32_t multiplier, int32_t shift);

/* TransposeConv and BatchMatMul (16x8): the int8 kernels' geometry, int64 sums, an int64 bias
 * (TransposeConv; NULL for none) and the 64-bit requantization. */
void qconvert_transpose_conv_s16(const int16_t *input, const int8_t *weights,
                                 const int64_t *bias, int16_t *output,
                                 const qconvert_conv_params *p);
void qconvert_batch_matmul_s16(const int16_t *a, const int16_t *b, int16_t *output,
                               const qconvert_matmul_params *p);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_H */
