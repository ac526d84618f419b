/* gearbox element conversions between f32 and the 16-bit float types, for the core and
 * for plugins (header-only; nothing to link).
 *
 * Every function works on bit patterns, so results do not depend on the FPU's rounding
 * mode or flush-to-zero setting, and are the same on the host and, compiled by nvcc, on
 * a CUDA device (GB_CONVERT_FN marks them __host__ __device__ there). Narrowing rounds
 * to nearest, ties to even; NaN stays NaN the way the x86 conversion instructions keep
 * it (sign and top payload bits kept, made quiet). Widening is exact.
 *
 * bf16 is the top half of a binary32. f16 is IEEE binary16: exponent bias 15, 10
 * mantissa bits, normal from 2^-14, subnormal steps of 2^-24, largest finite 65504.
 */
#ifndef GEARBOX_CONVERT_H
#define GEARBOX_CONVERT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GB_CONVERT_FN static inline __host__ __device__
#else
#define GB_CONVERT_FN static inline
#endif

GB_CONVERT_FN uint32_t gb_f32_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

GB_CONVERT_FN float gb_f32_from_bits(uint32_t bits)
{
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* Adds just under half an ulp of the result plus the kept lowest bit, so exact halves
 * round to even, then truncates. Finite values beyond bf16's largest become infinity; a
 * NaN is not rounded (a payload in the low bits only would otherwise carry into inf). */
GB_CONVERT_FN uint16_t gb_bf16_from_f32(float x)
{
    uint32_t bits = gb_f32_bits(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* Stochastic rounding to bf16: rounds away from zero with probability (the 16 dropped
 * bits / 2^16), given 16 uniformly random bits, so the result is unbiased on average.
 * Infinities and NaN convert as gb_bf16_from_f32; a finite value within the last step
 * below bf16's largest may round to infinity. */
GB_CONVERT_FN uint16_t gb_bf16_from_f32_stochastic(float x, uint16_t random)
{
    uint32_t bits = gb_f32_bits(x);
    if ((bits & 0x7fffffffu) >= 0x7f800000u)
        return gb_bf16_from_f32(x);
    return (uint16_t)((bits + random) >> 16);
}

GB_CONVERT_FN float gb_f32_from_bf16(uint16_t h)
{
    return gb_f32_from_bits((uint32_t)h << 16);
}

/* 65520 and beyond round to infinity. */
GB_CONVERT_FN uint16_t gb_f16_from_f32(float x)
{
    uint32_t bits = gb_f32_bits(x);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t mag = bits & 0x7fffffffu;
    if (mag > 0x7f800000u)                      /* NaN: quiet, top payload bits kept */
        return sign | 0x7e00u | (uint16_t)((mag >> 13) & 0x3ffu);
    if (mag >= 0x47800000u)                     /* >= 2^16, infinity included */
        return sign | 0x7c00u;
    if (mag >= 0x38800000u) {                   /* a normal binary16 (or it rounds up to inf) */
        mag -= (127u - 15u) << 23;              /* rebias the exponent */
        mag += 0x0fffu + ((mag >> 13) & 1u);    /* ties to even at the 13 dropped bits */
        return sign | (uint16_t)(mag >> 13);
    }
    /* subnormal result: the value in units of 2^-24 is mant * 2^(exp - 126) */
    uint32_t exp = mag >> 23, shift = 126u - exp;
    if (shift > 24u)                            /* below 2^-25: rounds to zero */
        return sign;
    uint32_t mant = (mag & 0x7fffffu) | 0x800000u;
    uint32_t kept = mant >> shift, rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    kept += rest > half || (rest == half && (kept & 1u));
    return sign | (uint16_t)kept;
}

GB_CONVERT_FN float gb_f32_from_f16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1fu)                           /* infinity or NaN */
        return gb_f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp != 0)                               /* normal */
        return gb_f32_from_bits(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
    /* zero or subnormal: mant * 2^-24, exact in f32 */
    float v = (float)mant * 0x1p-24f;
    return sign ? -v : v;
}

#endif /* GEARBOX_CONVERT_H */
