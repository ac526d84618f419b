/* Arithmetic rounded once per operation, to nearest even, with the same bits on the host
 * and on a CUDA device: what formulas that must agree bit for bit between the CPU and
 * the GPU are written in (adamw.h, grad_scale.h).
 *
 * Why not the plain operators everywhere: nvcc contracts a * b + c into one fused
 * multiply-add by default (--fmad=true), which rounds once where the host rounds twice.
 * The intrinsics used on the device (__fmul_rn, __dadd_rn, ...) are never contracted,
 * and division and square root through them are IEEE-exact whatever -prec-div,
 * -prec-sqrt or --use_fast_math say. On the host these are the plain operators and
 * sqrtf/sqrt (exact in IEEE arithmetic), so the host side must not contract either:
 * code that includes this header compiles with -ffp-contract=off (gcc's default in its
 * ISO C modes, and passed explicitly to every plugin that uses these formulas).
 *
 * Only the operations the shared formulas use are here. Header-only.
 */
#ifndef GEARBOX_KERNELS_ROUNDED_H
#define GEARBOX_KERNELS_ROUNDED_H

#include <math.h>

#include "hostdevice.h"

GB_HD_FN float gb_fmul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

GB_HD_FN float gb_fadd_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

GB_HD_FN float gb_fsub_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

GB_HD_FN float gb_fdiv_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

GB_HD_FN float gb_fsqrt_rn(float a)
{
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}

GB_HD_FN double gb_dmul_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

GB_HD_FN double gb_dadd_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

GB_HD_FN double gb_dsub_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

GB_HD_FN double gb_ddiv_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}

GB_HD_FN double gb_dsqrt_rn(double a)
{
#ifdef __CUDA_ARCH__
    return __dsqrt_rn(a);
#else
    return sqrt(a);
#endif
}

#endif /* GEARBOX_KERNELS_ROUNDED_H */
