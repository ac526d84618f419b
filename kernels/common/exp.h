/* e^x and erfc(x) in f32 without libm, shared by the CPU kernels (kernels/cpu/pointwise.h
 * and the CPU attention plugins) and the CUDA kernels (device/cuda), so both compute the
 * same function.
 *
 * Written with fmaf, rintf and selects: glibc declares its vector expf/erff only under
 * -ffast-math, which we refuse because it lets the compiler reorder reductions, and a
 * loop over these functions vectorises at -O3 with vector and scalar iterations giving
 * the same bits. Accuracy, not bit-exactness with libm, is the promise:
 *   gb_exp_fast   within 2 ulp on [-87, 88.37]; 0 below -87 (where expf is subnormal or
 *                 0), +inf above 88.72 (where expf overflows). gb_exp_fast_nonpositive
 *                 is the same function on x <= 0 with fewer instructions.
 *   gb_erfc_fast  relative error about 1.2e-7 from the fit (Numerical Recipes' Chebyshev
 *                 fit, 6.2), plus f32 rounding that grows with |x|: within 2e-6 on
 *                 [-4, 4] (tests/common/test_formulas.c).
 *
 * CPU and GPU bits: every multiply-add that matters is an explicit fmaf, and rintf,
 * division and the bit conversions are exact on both, so a CUDA build gives the CPU's
 * bits when nvcc does not contract the remaining a * b + c pairs into fused multiply-adds
 * (the CPU build, ISO C11, never does: -ffp-contract=off). device/cuda compiles with
 * -fmad=false for that reason; a CUDA file compiled with nvcc's default -fmad=true may
 * differ from the CPU in the last bit. Half precision types are left out: callers convert
 * to f32 first (gearbox/convert.h).
 */
#ifndef GEARBOX_KERNELS_COMMON_EXP_H
#define GEARBOX_KERNELS_COMMON_EXP_H

#include <math.h>
#include <stdint.h>

#include "gearbox/convert.h"
#include "hostdevice.h"

/* e^xc for xc in [-87, 88.37] by Cody-Waite reduction xc = n ln2 + r and a degree-6
 * polynomial on r (Cephes' expf coefficients). */
GB_HD_FN float gb_exp_core(float xc)
{
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
    return p * gb_f32_from_bits((uint32_t)((int32_t)n + 127) << 23);
}

/* e^x: the core on x clamped to its range, 0 below it and +inf above. */
GB_HD_FN float gb_exp_fast(float x)
{
    float xc = x < -87.0f ? -87.0f : x;
    xc = xc > 88.37f ? 88.37f : xc;
    xc = isnan(xc) ? 0.0f : xc;   // keeps the float-to-int conversion below defined
    float y = gb_exp_core(xc);
    y = x < -87.0f ? 0.0f : y;
    y = x > 88.7228f ? INFINITY : y;
    return isnan(x) ? x : y;
}

/* gb_exp_fast(x) for x <= 0 or NaN, bit for bit, without the clamps above the range: a
 * softmax's exponentials of x - max, where they are a GPU kernel's costliest stream.
 * Undefined for x > 0. */
GB_HD_FN float gb_exp_fast_nonpositive(float x)
{
    const float xc = x >= -87.0f ? x : -87.0f;   // NaN too: the conversion stays defined
    const float y = gb_exp_core(xc);
    return x >= -87.0f ? y : isnan(x) ? x : 0.0f;
}

/* erfc(x) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z = |x|; reflected for x < 0.
 * Relative accuracy holds in the tail, where GELU of a negative input lives. */
GB_HD_FN float gb_erfc_fast(float x)
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
    float r = t * gb_exp_fast(p - z * z);
    return x < 0.0f ? 2.0f - r : r;
}

#endif /* GEARBOX_KERNELS_COMMON_EXP_H */
