/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_logic.c: see qconvert_nn_logic.h. Shipped with qconvert (Apache-2.0). */
#include "qconvert_nn_logic.h"

#include <stddef.h>
#include <string.h>

#include "qconvert_nn_loops.h"

/* One int8 operand in the comparison's common unit: MultiplyByQuantizedMultiplierSmallerThanOneExp
 * (shift <= 0), TFLite's double rounding in every build (no CMSIS-NN kernel replaces it). */
static int32_t compare_unit(int32_t v, int32_t offset, int32_t left_shift, int32_t multiplier,
                            int32_t shift)
{
    return qconvert_rdbpot(qconvert_srdhm((v + offset) * (1 << left_shift), multiplier), -shift);
}

static uint8_t compare_value(int32_t a, int32_t b, qconvert_compare_op op)
{
    switch (op) {
    case QCONVERT_EQUAL:
        return (uint8_t)(a == b);
    case QCONVERT_NOT_EQUAL:
        return (uint8_t)(a != b);
    case QCONVERT_GREATER:
        return (uint8_t)(a > b);
    case QCONVERT_GREATER_EQUAL:
        return (uint8_t)(a >= b);
    case QCONVERT_LESS:
        return (uint8_t)(a < b);
    default:
        return (uint8_t)(a <= b);
    }
}

void qconvert_compare_s8(const int8_t *a, const int8_t *b, uint8_t *output,
                         const qconvert_compare_params *p)
{
    QCONVERT_BROADCAST_LOOP(
        p, i, pa, pb,
        output[i] = compare_value(compare_unit(a[pa], p->input1_offset, p->left_shift,
                                               p->input1_multiplier, p->input1_shift),
                                  compare_unit(b[pb], p->input2_offset, p->left_shift,
                                               p->input2_multiplier, p->input2_shift),
                                  p->op));
}

void qconvert_select(const uint8_t *condition, const void *x, const void *y, void *output,
                     const qconvert_select_params *p)
{
    const unsigned char *xs = (const unsigned char *)x;
    const unsigned char *ys = (const unsigned char *)y;
    unsigned char *out = (unsigned char *)output;
    const size_t size = (size_t)p->element_bytes;
    int32_t index[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};
    const int32_t n = qconvert_volume(p->rank, p->shape);
    ptrdiff_t pc = 0, px = 0, py = 0;
    int32_t i, k;
    for (i = 0; i < n; ++i) {
        const unsigned char *from = condition[pc] ? xs + (size_t)px * size : ys + (size_t)py * size;
        memmove(out + (size_t)i * size, from, size);
        for (k = p->rank - 1; k >= 0; --k) {
            pc += p->condition_strides[k];
            px += p->x_strides[k];
            py += p->y_strides[k];
            if (++index[k] < p->shape[k]) {
                break;
            }
            pc -= (ptrdiff_t)p->condition_strides[k] * p->shape[k];
            px -= (ptrdiff_t)p->x_strides[k] * p->shape[k];
            py -= (ptrdiff_t)p->y_strides[k] * p->shape[k];
            index[k] = 0;
        }
    }
}

/* The reduction kernel of element type T (see qconvert_nn_logic.h). */
#define QCONVERT_DEFINE_REDUCE_EXTREME(NAME, T)                                                 \
    void NAME(const T *input, T *output, const qconvert_reduce_params *p)                       \
    {                                                                                           \
        int32_t outer[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};                                  \
        const int32_t n = qconvert_volume(p->outer.rank, p->outer.shape);                       \
        const int32_t m = qconvert_volume(p->inner.rank, p->inner.shape);                       \
        ptrdiff_t base = p->outer.in_base, po = p->outer.out_base;                              \
        int32_t i, j;                                                                           \
        for (i = 0; i < n; ++i) {                                                               \
            int32_t inner[QCONVERT_MAX_RANK] = {0, 0, 0, 0, 0, 0};                              \
            ptrdiff_t pi = base, unused = 0;                                                    \
            T best = input[pi];                                                                 \
            for (j = 0; j < m; ++j) {                                                           \
                const T v = input[pi];                                                          \
                if (p->minimum ? v < best : v > best) {                                         \
                    best = v;                                                                   \
                }                                                                               \
                qconvert_step(p->inner.rank, p->inner.shape, inner, p->inner.in_strides, &pi,  \
                              p->inner.out_strides, &unused);                                   \
            }                                                                                   \
            output[po] = best;                                                                  \
            qconvert_step(p->outer.rank, p->outer.shape, outer, p->outer.in_strides, &base,    \
                          p->outer.out_strides, &po);                                           \
        }                                                                                       \
    }

QCONVERT_DEFINE_REDUCE_EXTREME(qconvert_reduce_extreme_s8, int8_t)
