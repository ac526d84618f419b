/* The per-element mathematics of the fused AdamW step, and the f32 -> bf16 / f16
 * conversions of the low-precision parameter copy, as small inline functions that every
 * kernel of this plugin (scalar, AVX-512, and a future CUDA one) is written against.
 *
 * The AdamW expression follows optim/adamw's passes term by term and in the same order
 * (decay, g = grad * g_scale, m, v, denominator, update), each operation rounded to f32,
 * so with contraction off (ISO C mode; CUDA needs --fmad=false) the result is
 * bit-identical to the reference plugin. The conversions are gearbox/convert.h's.
 *
 * Deliberately left out: anything about memory layout, threads or vectors (the kernels
 * decide), and any dtype beyond f32 master values.
 */
#ifndef GB_OPTIM_ADAMW_MATH_H
#define GB_OPTIM_ADAMW_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gearbox/convert.h"

#ifndef ADAMW_INLINE
#define ADAMW_INLINE static inline
#endif

/* 16 random bits for stochastic rounding of element `index` at `step`: a SplitMix64
 * finaliser over the three, so the bits depend on nothing else (not on threads or
 * vector width) and a run is reproducible. */
ADAMW_INLINE uint16_t adamw_random16(uint64_t seed, int64_t step, int64_t index)
{
    uint64_t z = seed + (uint64_t)step * 0x9e3779b97f4a7c15u + (uint64_t)index * 0xd1b54a32d192ed03u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return (uint16_t)(z >> 48);
}

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

#endif /* GB_OPTIM_ADAMW_MATH_H */
