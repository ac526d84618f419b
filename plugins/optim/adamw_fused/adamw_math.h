/* The per-element mathematics of the fused AdamW step, and the f32 -> bf16 / f16
 * conversions of the low-precision parameter copy, as small inline functions that every
 * kernel of this plugin (scalar, AVX-512, and a future CUDA one) is written against.
 *
 * The AdamW expression follows optim/adamw's passes term by term and in the same order
 * (decay, g = grad * g_scale, m, v, denominator, update), each operation rounded to f32,
 * so with contraction off (ISO C mode; CUDA needs --fmad=false) the result is
 * bit-identical to the reference plugin. The conversions round to nearest, ties to even,
 * on the bit patterns, so they do not depend on the FPU's rounding mode or on
 * flush-to-zero, and they treat NaN the way the x86 conversion instructions do: the sign
 * and the top payload bits are kept and the result is made quiet.
 *
 * Deliberately left out: anything about memory layout, threads or vectors (the kernels
 * decide), and any dtype beyond f32 master values.
 */
#ifndef GB_OPTIM_ADAMW_MATH_H
#define GB_OPTIM_ADAMW_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef ADAMW_INLINE
#define ADAMW_INLINE static inline
#endif

/* The step's scalars, rounded to f32 once on the host exactly as optim/adamw rounds them. */
typedef struct adamw_coeffs {
    float g_scale;                 /* loss-scale removal times the clip factor */
    float b1, one_minus_b1;
    float b2, one_minus_b2;
    float step_size;               /* lr / (1 - beta1^step) */
    float bc2_sqrt;                /* sqrt(1 - beta2^step) */
    float eps;
} adamw_coeffs;

/* One parameter's update; `decay` is 1 - lr * weight_decay, or exactly 1 for groups that
 * do not decay (multiplying by 1 changes no bit). *p, *m, *v are read and written. */
ADAMW_INLINE void adamw_element(float *p, float *m, float *v, float grad, float decay,
                                const adamw_coeffs *c)
{
    float g = grad * c->g_scale;
    float m1 = c->b1 * *m + c->one_minus_b1 * g;
    float v1 = c->b2 * *v + c->one_minus_b2 * g * g;
    float denom = sqrtf(v1) / c->bc2_sqrt + c->eps;
    *p = *p * decay - c->step_size * m1 / denom;
    *m = m1;
    *v = v1;
}

ADAMW_INLINE uint32_t f32_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

/* bfloat16 is the top half of a binary32: add just under half an ulp of the result plus
 * the kept lowest bit, so exact halves round to even, then truncate. Finite values
 * beyond bf16's largest round to infinity; a NaN is not rounded (a payload in the low
 * bits only would otherwise carry into infinity). */
ADAMW_INLINE uint16_t bf16_from_f32(float x)
{
    uint32_t bits = f32_bits(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* IEEE binary16: exponent bias 15, 10 mantissa bits, normal from 2^-14, subnormal steps
 * of 2^-24, largest finite 65504; 65520 and beyond round to infinity. */
ADAMW_INLINE uint16_t f16_from_f32(float x)
{
    uint32_t bits = f32_bits(x);
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

#endif /* GB_OPTIM_ADAMW_MATH_H */
