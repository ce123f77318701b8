/* qconvert_nn_s16_math.c: RSQRT, ABS and SQUARED_DIFFERENCE on int16 (16x8 models) of
 * qconvert_nn.h, TFLite Micro's RsqrtEvalQuantized<int16_t>, AbsEvalQuantized<int16_t> and
 * EvalQuantizedSquaredDifference<int16_t> bit for bit (zero points 0).
 * Shipped with qconvert (Apache-2.0). Arithmetic that wraps in gemmlowp is done on uint32_t.
 */
#include "qconvert_nn.h"

#include <stddef.h>

#define RSQRT_SHIFT 20 /* RSQRT's inverse square root is scaled by 2**20 before requantizing */

static int32_t clamp16(int32_t value)
{
    return value < -32768 ? -32768 : (value > 32767 ? 32767 : value);
}

/* gemmlowp SaturatingRoundingDoublingHighMul */
static int32_t srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

/* gemmlowp RoundingDivideByPOT: ties away from zero */
static int32_t rdbpot(int32_t x, int32_t exponent)
{
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for exponent > 0 */
static int32_t sat_shift_left(int32_t x, int32_t exponent)
{
    const int32_t threshold = (int32_t)(((int64_t)1 << (31 - exponent)) - 1);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return (int32_t)((uint32_t)x << exponent);
}

static int32_t leading_zeros(uint32_t x)
{
    int32_t n = 0;
    if (x == 0) {
        return 32;
    }
    while (!(x & 0x80000000u)) {
        x <<= 1;
        ++n;
    }
    return n;
}

/* TFLite's GetInvSqrtQuantizedMultiplierExp(v, reverse_shift -1) for v >= 0: 1 / sqrt(v) as
 * multiplier * 2**(shift - 31), by gemmlowp's Newton-Raphson iteration on a Q3.28 value. */
static void inv_sqrt(int32_t v, int32_t *multiplier, int32_t *shift)
{
    const int32_t half_three = (1 << 28) + (1 << 27); /* 1.5 in Q3.28 */
    int32_t x_in = v, right = 11, pairs, half, x = 1 << 28, k;
    if (v <= 1) {
        *multiplier = INT32_MAX;
        *shift = 0;
        return;
    }
    while (x_in >= (1 << 29)) {
        x_in /= 4;
        ++right;
    }
    pairs = (leading_zeros((uint32_t)x_in) - 1) / 2 - 1;
    right -= pairs;
    x_in <<= 2 * pairs;
    half = rdbpot(x_in >> 1, 1);
    for (k = 0; k < 5; ++k) {
        const int32_t x3 = sat_shift_left(srdhm(srdhm(x, x), x), 6);
        x = sat_shift_left((int32_t)((uint32_t)srdhm(half_three, x) - (uint32_t)srdhm(half, x3)),
                           3);
    }
    x = srdhm(x, 1518500250); /* * sqrt(2) / 2 */
    if (right < 0) {
        x = (int32_t)((uint32_t)x << -right);
        right = 0;
    }
    *multiplier = x;
    *shift = -right;
}

int qconvert_rsqrt_s16(const int16_t *input, int16_t *output, int32_t size, int32_t multiplier,
                       int32_t shift)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = input[i];
        int32_t m, e, data, left, right;
        if (v < 0) {
            return 1;
        }
        if (v == 0) {
            output[i] = 32767;
            continue;
        }
        inv_sqrt(v, &m, &e);
        left = e + RSQRT_SHIFT > 0 ? e + RSQRT_SHIFT : 0;
        right = e + RSQRT_SHIFT < 0 ? -(e + RSQRT_SHIFT) : 0;
        data = rdbpot(srdhm((int32_t)((uint32_t)1 << left), m), right);
        output[i] = (int16_t)clamp16(qconvert_requantize(data, multiplier, shift - RSQRT_SHIFT));
    }
    return 0;
}

void qconvert_abs_s16(const int16_t *input, int16_t *output, int32_t size, int32_t needs_rescale,
                      int32_t multiplier, int32_t shift)
{
    int32_t i;
    for (i = 0; i < size; ++i) {
        const int32_t v = input[i] < 0 ? -(int32_t)input[i] : input[i];
        output[i] = (int16_t)clamp16(needs_rescale ? qconvert_requantize(v, multiplier, shift) : v);
    }
}
