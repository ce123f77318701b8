/* Independent scalar C oracle for qconvert/int8 (fixed_point.py, multipliers.py), written
 * from the TFLite / gemmlowp /
 * CMSIS-NN definitions: QuantizeMultiplier (libm frexp and round, int64), gemmlowp's
 * SaturatingRoundingDoublingHighMul and RoundingDivideByPOT, TFLite's double-rounding
 * MultiplyByQuantizedMultiplier and CMSIS-NN's single-rounding arm_nn_requantize.
 *
 * Where the kernels overflow int32 (x * (1 << left_shift), the narrowing of the single-rounding
 * result), this does the same arithmetic in uint32 so it wraps
 * modulo 2**32 as the device does, without C undefined behaviour. Each entry point loops over
 * n elements of caller-owned buffers (numpy arrays passed through ctypes).
 *
 * Build: gcc -O2 -shared -fPIC quant_oracle.c -o quant_oracle.so -lm
 */
#include <math.h>
#include <stdint.h>

static int32_t to_i32(uint32_t u) { return (int32_t)u; } /* gcc: modulo 2**32 */

static void quantize_multiplier_1(double m, int32_t *mult, int32_t *shift)
{
    if (m == 0.0) {
        *mult = 0;
        *shift = 0;
        return;
    }
    int e = 0;
    const double q = frexp(m, &e);
    int64_t q_fixed = (int64_t)round(q * (double)(1LL << 31));
    if (q_fixed == (1LL << 31)) {
        q_fixed /= 2;
        ++e;
    }
    if (e < -31) {
        e = 0;
        q_fixed = 0;
    }
    *mult = (int32_t)q_fixed;
    *shift = e;
}

static int32_t srdhm(int32_t a, int32_t b)
{
    if (a == b && a == INT32_MIN)
        return INT32_MAX;
    const int64_t ab = (int64_t)a * (int64_t)b;
    const int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
    return (int32_t)((ab + nudge) / (1LL << 31)); /* C division truncates toward zero */
}

static int32_t rdbp(int32_t x, int exponent)
{
    const int32_t mask = (int32_t)((1LL << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

static int32_t mbqm_double(int32_t x, int32_t multiplier, int shift)
{
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    const int32_t shifted = to_i32((uint32_t)x << left); /* x * (1 << left_shift) */
    return rdbp(srdhm(shifted, multiplier), right);
}

static int32_t mbqm_single(int32_t x, int32_t multiplier, int shift)
{
    const int64_t total_shift = 31 - shift;
    const int64_t new_val = (int64_t)x * (int64_t)multiplier;
    int64_t result = new_val >> (total_shift - 1); /* kept in 64 bits, as CMSIS-NN 7 does */
    result = (result + 1) >> 1;
    return to_i32((uint32_t)(uint64_t)result);
}

void oracle_quantize_multiplier(const double *m, int32_t *mult, int32_t *shift, int64_t n)
{
    for (int64_t i = 0; i < n; ++i)
        quantize_multiplier_1(m[i], &mult[i], &shift[i]);
}

void oracle_srdhm(const int32_t *a, const int32_t *b, int32_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; ++i)
        out[i] = srdhm(a[i], b[i]);
}

void oracle_rdbp(const int32_t *x, const int32_t *exponent, int32_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; ++i)
        out[i] = rdbp(x[i], exponent[i]);
}

void oracle_mbqm(const int32_t *x, const int32_t *multiplier, const int32_t *shift, int32_t *out,
                 int64_t n, int single_rounding)
{
    for (int64_t i = 0; i < n; ++i)
        out[i] = single_rounding ? mbqm_single(x[i], multiplier[i], shift[i])
                                 : mbqm_double(x[i], multiplier[i], shift[i]);
}
