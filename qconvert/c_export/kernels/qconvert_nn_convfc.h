/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_convfc.h: qconvert's fast int8 convolution and fully connected kernels for
 * whole-model C (`qconvert export-c --kernels portable`). Shipped with qconvert (Apache-2.0).
 *
 * The techniques of the CMSIS-NN paper (Lai et al. 2018), written anew in C99: int8 -> int16
 * expansion without reordering (SXTB16 of a word and of the word rotated by 8 bits gives the
 * even and the odd bytes as two int16 pairs; the activations and the weights are expanded
 * alike, so the pairs match and a dual 16-bit multiply-accumulate, SMLAD, sums two products),
 * im2col two output pixels at a time into int16 columns (the input offset added there, padded
 * taps 0), 2x2 output blocking (two pixels x two output channels), and the four-row fully
 * connected kernel over the 1x4 weight order (qconvert_fc_1x4.h; the input offset folded into
 * the bias at export time).
 * With __ARM_FEATURE_DSP (Cortex-M4, M7, M33, M55) the ACLE intrinsics of <arm_acle.h>;
 * elsewhere the same steps in plain C. Every target gives TFLite Micro's reference results,
 * bit for bit (the sums are the same integers, added mod 2^32 in another order).
 *
 * Memory-plan contract: qconvert_conv_fast_s8 builds the columns of output pixels 2j and 2j + 1
 * of an image (into `scratch`, every group's) before it writes any of their outputs, and
 * handles the pairs in
 * memory order; nothing more is promised (qconvert's planner overlaps it band by band).
 */
#ifndef QCONVERT_NN_CONVFC_H
#define QCONVERT_NN_CONVFC_H

#include <stdint.h>

#include "qconvert_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of qconvert_conv_fast_s8's scratch: per convolution group, two int16 columns of depth
 * rounded up to 4, where depth = kernel_h * kernel_w * in_c / groups, and two int32
 * accumulators per output channel of a group (out_c / groups). */
#define QCONVERT_CONV_FAST_SCRATCH(depth, out_c, groups)                                       \
    ((groups) * 4 * (((depth) + 3) / 4 * 4) + 8 * ((out_c) / (groups)))

/* Conv2D, int8, p->depth_multiplier groups (<= 1: one; each group an ordinary convolution of
 * in_c / groups input channels to out_c / groups output channels). Weights, group after group:
 * the group's rows of depth = kernel_h * kernel_w * in_c / groups values
 * in OHWI order, each row padded with zeros to a multiple of 4 values, the rows of each pair of
 * channels interleaved by group of four values (8 bytes per group: 4 of channel 2j, 4 of 2j + 1),
 * the last row of an odd count after them; bias out_c values or NULL; scratch
 * QCONVERT_CONV_FAST_SCRATCH bytes, 4-byte aligned; the multipliers must be >= 0 (TFLite's
 * always are). `small` nonzero promises every shift <= 0 and every accumulator (bias included)
 * below 2^30 in magnitude, for every input: a shorter requantization, the same results. */
void qconvert_conv_fast_s8(const int8_t *input, const int8_t *weights, const int32_t *bias,
                           int8_t *output, void *scratch, const qconvert_conv_params *p,
                           int32_t small);

/* FullyConnected, int8, the 1x4 weight order and the contract of qconvert_fc_1x4_s8, except
 * that the input offset is folded into `sums` (output_depth values, or NULL for zeros):
 * sums[r] = bias[r] + input_offset * sum_k (weights[r][k] + weights_offset), wrapped to int32
 * (the same int32 result: sum_k (x_k + input_offset) * v_k = sum_k x_k * v_k + input_offset *
 * sum_k v_k mod 2^32); multipliers >= 0; `small` as for the convolution (it bounds the
 * accumulator with the offset, TFLite's). quant->input_offset is not read. */
void qconvert_fc_fast_s8(const int8_t *input, const int8_t *weights, const int32_t *sums,
                         int8_t *output, int32_t batches, int32_t accum_depth,
                         int32_t output_depth, const qconvert_fc_quant *quant, int32_t small);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_CONVFC_H */
