/* GELU and its derivative, in the exact (erf) form and GPT-2's tanh form, per element in
 * f32, shared by the CPU kernels (kernels/cpu/pointwise.h: both forms) and the CUDA
 * kernels (device/cuda: both forms, also after a matmul).
 *
 *   exact: GELU(x) = x Phi(x) = 0.5 x erfc(-x / sqrt 2), GELU'(x) = Phi(x) + x phi(x)
 *   tanh:  0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written as
 *          x sigmoid(2u) = x / (1 + e^(-2u)), which equals it without the cancellation of
 *          1 + tanh(u) for negative u; its derivative s + 2 x s (1 - s) u', s = sigmoid(2u).
 * Both are built on exp.h, so they make no libm call and tanh's form does not depend on a
 * library's tanhf. CPU and GPU bits: the same as exp.h says (identical where nvcc does
 * not contract a * b + c; device/cuda compiles with -fmad=false). The CPU test of this
 * header (tests/common) checks both forms against double precision.
 */
#ifndef GEARBOX_KERNELS_COMMON_GELU_H
#define GEARBOX_KERNELS_COMMON_GELU_H

#include "exp.h"
#include "hostdevice.h"

#define GB_SQRT1_2 0.707106781186547524f     /* 1 / sqrt 2 */
#define GB_INV_SQRT_2PI 0.398942280401432678f /* 1 / sqrt(2 pi) */
#define GB_SQRT_2_OVER_PI 0.797884560802865356f
#define GB_GELU_TANH_CUBIC 0.044715f

GB_HD_FN float gb_gelu_erf(float x)
{
    return 0.5f * x * gb_erfc_fast(-x * GB_SQRT1_2);
}

GB_HD_FN float gb_gelu_erf_grad(float x)
{
    float cdf = 0.5f * gb_erfc_fast(-x * GB_SQRT1_2);
    return cdf + x * GB_INV_SQRT_2PI * gb_exp_fast(-0.5f * x * x);
}

/* sigmoid(2u) for the tanh form; 0 where e^(-2u) overflows (x below about -9). */
GB_HD_FN float gb_gelu_tanh_sigmoid(float x)
{
    float u = GB_SQRT_2_OVER_PI * (x + GB_GELU_TANH_CUBIC * x * x * x);
    return 1.0f / (1.0f + gb_exp_fast(-2.0f * u));
}

GB_HD_FN float gb_gelu_tanh(float x)
{
    return x * gb_gelu_tanh_sigmoid(x);
}

GB_HD_FN float gb_gelu_tanh_grad(float x)
{
    float s = gb_gelu_tanh_sigmoid(x);
    float du = GB_SQRT_2_OVER_PI * (1.0f + 3.0f * GB_GELU_TANH_CUBIC * x * x);
    return s + 2.0f * x * s * (1.0f - s) * du;
}

#endif /* GEARBOX_KERNELS_COMMON_GELU_H */
