/* SPDX-License-Identifier: Apache-2.0 */
/* qconvert_nn_simd.h: what qconvert's layer-specialised int8 kernels (qconvert_nn_fast.h) share.
 * Private to their sources (not an API). Shipped with qconvert (Apache-2.0).
 *
 * - QCONVERT_DSP: 1 where the Arm DSP extension is there (__ARM_FEATURE_DSP: Cortex-M4, M7,
 *   M33, M55); the kernels then use the ACLE intrinsics of <arm_acle.h> (SXTB16 / SXTAB16, dual
 *   16-bit multiply-accumulates, SIMD byte compares); elsewhere (host, Cortex-M3) plain C that
 *   computes the same bits.
 * - qconvert_load32: four bytes as one word (memcpy: one LDR on Cortex-M, no misaligned typed
 *   access in C).
 * - qconvert_requantize_fast: TFLite's requantization for the common case the exporter checks
 *   (multiplier in [2^30, 2^31), shift <= -2) in one 64-bit multiply-accumulate and three steps.
 */
#ifndef QCONVERT_NN_SIMD_H
#define QCONVERT_NN_SIMD_H

#include <stdint.h>
#include <string.h>

#include "qconvert_nn_fast.h"

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#define QCONVERT_DSP 1
#include <arm_acle.h>
#else
#define QCONVERT_DSP 0
#endif

static inline uint32_t qconvert_load32(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint32_t qconvert_ror8(uint32_t x)
{
    return (x >> 8) | (x << 24);
}

#if QCONVERT_DSP
/* (a.lo + sign-extended byte 1 of x, a.hi + byte 3) and (byte 1, byte 3): the rotation folded
 * into the instruction (gcc emits a separate one for __sxtab16(a, ror(x, 8))) */
#if defined(__GNUC__)
static inline int32_t qconvert_sxtab16_ror8(int32_t a, uint32_t x)
{
    int32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}

static inline int32_t qconvert_sxtb16_ror8(uint32_t x)
{
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
#else
static inline int32_t qconvert_sxtab16_ror8(int32_t a, uint32_t x)
{
    return __sxtab16(a, (int32_t)qconvert_ror8(x));
}

static inline int32_t qconvert_sxtb16_ror8(uint32_t x)
{
    return __sxtb16((int32_t)qconvert_ror8(x));
}
#endif
#endif

static inline int32_t qconvert_clamp_fast(int32_t v, int32_t lo, int32_t hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* TFLite's MultiplyByQuantizedMultiplier (or, with QCONVERT_SINGLE_ROUNDING, CMSIS-NN's single
 * rounding) for multiplier m in [2^30, 2^31) and shift -n with n >= 2, given r = n - 2, bit for
 * bit. Double rounding is y = floor((acc * m + 2^30) / 2^31), then y / 2^n with ties away from
 * zero = floor((y + 2^(n-1) - [y < 0]) / 2^n); the two floors merge into one,
 * floor((acc * m + 2^30 - [acc < 0] * 2^31 + 2^(30+n)) / 2^(31+n)) ([y < 0] may be replaced by
 * [acc < 0]: they differ only when y = 0, where both give 0). Single rounding is
 * floor((acc * m + 2^(30+n)) / 2^(31+n)). With P the 64-bit sum before 2^(30+n) is added, both
 * are ((P >> 32 >> r) + 1) >> 1: one 64-bit multiply-accumulate and three shifts or adds.
 * No overflow: |acc * m| < 2^62. */
static inline int32_t qconvert_requantize_fast(int32_t acc, int32_t m, int32_t r)
{
#ifdef QCONVERT_SINGLE_ROUNDING
    const int64_t p = (int64_t)acc * m;
#else
    /* 2^30 - [acc < 0] * 2^31 as a 64-bit value: low word 0x40000000 or 0xC0000000, high word
     * the sign of acc */
    const uint32_t sign = (uint32_t)(acc >> 31);
    const int64_t k = (int64_t)(((uint64_t)sign << 32) | (0x40000000u | (sign & 0x80000000u)));
    const int64_t p = (int64_t)acc * m + k;
#endif
    return (((int32_t)(p >> 32) >> r) + 1) >> 1;
}

#endif /* QCONVERT_NN_SIMD_H */
