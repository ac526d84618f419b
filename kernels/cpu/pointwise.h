/* Per-element math of the GPT kernels: exp, erfc and the exact (erf) GELU with its
 * derivative, as small static inline functions that other device plugins can share, and
 * the GELU loops the kernel builds of cpu_kernels.h compile for their own -m flags.
 *
 * The functions make no libm calls: glibc declares its vector expf/erff only under
 * -ffast-math, which we refuse because it lets the compiler reorder reductions and so
 * breaks bit-reproducibility. Written with fmaf, rintf and selects instead, a loop that
 * calls them vectorises at -O3 -march=native, and vector and scalar iterations give the
 * same bits. Accuracy, not bit-exactness with libm, is the promise:
 *   exp_fast   within 2 ulp on [-87, 88.37]; 0 below -87 (where expf is subnormal or 0),
 *              +inf above 88.72 (where expf overflows).
 *   erfc_fast  relative error about 1.2e-7 (Numerical Recipes' Chebyshev fit, 6.2).
 * Half precision types are left out: kernels convert to f32 before calling these.
 */
#ifndef GB_KERNELS_CPU_POINTWISE_H
#define GB_KERNELS_CPU_POINTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float float_from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* e^x by Cody-Waite reduction x = n ln2 + r and a degree-6 polynomial on r
 * (Cephes' expf coefficients). */
static inline float exp_fast(float x)
{
    float xc = x < -87.0f ? -87.0f : x;
    xc = xc > 88.37f ? 88.37f : xc;
    xc = isnan(xc) ? 0.0f : xc;   // keeps the float-to-int conversion below defined
    float n = rintf(xc * 1.44269504088896341f);
    float r = fmaf(n, -0.693359375f, xc);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r + 1.0f);
    float y = p * float_from_bits((uint32_t)((int32_t)n + 127) << 23);
    y = x < -87.0f ? 0.0f : y;
    y = x > 88.7228f ? INFINITY : y;
    return isnan(x) ? x : y;
}

/* erfc(x) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z = |x|; reflected for x < 0.
 * Relative accuracy holds in the tail, where GELU of a negative input lives. */
static inline float erfc_fast(float x)
{
    float z = fabsf(x);
    float t = 1.0f / fmaf(0.5f, z, 1.0f);
    float p = 0.17087277f;
    p = fmaf(p, t, -0.82215223f);
    p = fmaf(p, t, 1.48851587f);
    p = fmaf(p, t, -1.13520398f);
    p = fmaf(p, t, 0.27886807f);
    p = fmaf(p, t, -0.18628806f);
    p = fmaf(p, t, 0.09678418f);
    p = fmaf(p, t, 0.37409196f);
    p = fmaf(p, t, 1.00002368f);
    p = fmaf(p, t, -1.26551223f);
    float r = t * exp_fast(p - z * z);
    return x < 0.0f ? 2.0f - r : r;
}

/* GELU(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2). */
static inline float gelu_erf(float x)
{
    return 0.5f * x * erfc_fast(-x * (float)M_SQRT1_2);
}

/* GELU'(x) = Phi(x) + x phi(x), phi the standard normal density. */
static inline float gelu_erf_grad(float x)
{
    const float inv_sqrt_2pi = 0.398942280401432678f;
    float cdf = 0.5f * erfc_fast(-x * (float)M_SQRT1_2);
    return cdf + x * inv_sqrt_2pi * exp_fast(-0.5f * x * x);
}

/* The loops behind cpu_kernels' gelu_forward and gelu_backward: plain C, vectorised by
 * the compiler for the flags of the file that includes them. */
// out, x (n)
static inline void gelu_forward_loop(float *out, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = gelu_erf(x[i]);
}

// dx, x, dout (n); dx may alias dout
static inline void gelu_backward_loop(float *dx, const float *x, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dout[i] * gelu_erf_grad(x[i]);
}

#endif /* GB_KERNELS_CPU_POINTWISE_H */
