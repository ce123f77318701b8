/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_logic.h: comparisons (TFLite EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS,
 * LESS_EQUAL of int8 inputs: a bool output, one byte 0 / 1 per element, as TFLite Micro's bool),
 * SELECT_V2 (int8 or int16 values, a bool condition) and the reductions that pick a value
 * (REDUCE_MAX, REDUCE_MIN) for whole-model C (`qconvert export-c`). Shipped with qconvert
 * (Apache-2.0). Plain C99: no allocation.
 *
 * Broadcasting as the binary kernels of qconvert_nn.h: the output box `shape` is walked in
 * row-major (memory) order; each operand's strides give its step along each axis (0 where it
 * broadcasts). Each output element is written after the operands it reads, so an operand of the
 * output's shape and element size may be the output itself.
 */
#ifndef QCONVERT_NN_LOGIC_H
#define QCONVERT_NN_LOGIC_H

#include <stdint.h>

#include "qconvert_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    QCONVERT_EQUAL, QCONVERT_NOT_EQUAL, QCONVERT_GREATER, QCONVERT_GREATER_EQUAL, QCONVERT_LESS,
    QCONVERT_LESS_EQUAL
} qconvert_compare_op;

/* Each int8 input v is compared as requantize((v + offset) * 2^left_shift, multiplier, shift)
 * (its own scale as a multiplier below 1: TFLite Micro's ComparisonWithScaling). */
typedef struct {
    qconvert_compare_op op;
    int32_t rank;
    int32_t shape[QCONVERT_MAX_RANK];
    int32_t a_strides[QCONVERT_MAX_RANK];
    int32_t b_strides[QCONVERT_MAX_RANK];
    int32_t left_shift;
    int32_t input1_offset, input1_multiplier, input1_shift;
    int32_t input2_offset, input2_multiplier, input2_shift;
} qconvert_compare_params;

void qconvert_compare_s8(const int8_t *a, const int8_t *b, uint8_t *output,
                         const qconvert_compare_params *p);

/* output = condition ? x : y per element; `element_bytes` 1 (int8) or 2 (int16). */
typedef struct {
    int32_t rank;
    int32_t shape[QCONVERT_MAX_RANK];
    int32_t condition_strides[QCONVERT_MAX_RANK];
    int32_t x_strides[QCONVERT_MAX_RANK];
    int32_t y_strides[QCONVERT_MAX_RANK];
    int32_t element_bytes;
} qconvert_select_params;

void qconvert_select(const uint8_t *condition, const void *x, const void *y, void *output,
                     const qconvert_select_params *p);

/* REDUCE_MAX / REDUCE_MIN: each output element (the `outer` box: strides into the input and the
 * output) is the largest (`minimum` 0) or smallest (1) input over the `inner` box (strides into
 * the input) of at least one element; raw values (the input and output share one
 * quantization; int8 only: this TFLite Micro has no int16 REDUCE_MAX / REDUCE_MIN). */
typedef struct {
    qconvert_box outer;
    qconvert_box inner;
    int32_t minimum;
} qconvert_reduce_params;

void qconvert_reduce_extreme_s8(const int8_t *input, int8_t *output,
                                const qconvert_reduce_params *p);

#ifdef __cplusplus
}
#endif

#endif /* QCONVERT_NN_LOGIC_H */
