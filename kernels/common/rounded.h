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

/* One operation in `type`: the device's round-to-nearest intrinsic, or the host's operator
 * (or sqrtf/sqrt). Every function below is one of these two shapes. */
#ifdef __CUDA_ARCH__
#define GB_RN_BINARY(type, name, intrinsic, op) \
    GB_HD_FN type name(type a, type b) { return intrinsic(a, b); }
#define GB_RN_SQRT(type, name, intrinsic, host_sqrt) \
    GB_HD_FN type name(type a) { return intrinsic(a); }
#else
#define GB_RN_BINARY(type, name, intrinsic, op) \
    GB_HD_FN type name(type a, type b) { return a op b; }
#define GB_RN_SQRT(type, name, intrinsic, host_sqrt) \
    GB_HD_FN type name(type a) { return host_sqrt(a); }
#endif

GB_RN_BINARY(float, gb_fmul_rn, __fmul_rn, *)
GB_RN_BINARY(float, gb_fadd_rn, __fadd_rn, +)
GB_RN_BINARY(float, gb_fsub_rn, __fsub_rn, -)
GB_RN_BINARY(float, gb_fdiv_rn, __fdiv_rn, /)
GB_RN_SQRT(float, gb_fsqrt_rn, __fsqrt_rn, sqrtf)

GB_RN_BINARY(double, gb_dmul_rn, __dmul_rn, *)
GB_RN_BINARY(double, gb_dadd_rn, __dadd_rn, +)
GB_RN_BINARY(double, gb_dsub_rn, __dsub_rn, -)
GB_RN_BINARY(double, gb_ddiv_rn, __ddiv_rn, /)
GB_RN_SQRT(double, gb_dsqrt_rn, __dsqrt_rn, sqrt)

#undef GB_RN_BINARY
#undef GB_RN_SQRT

#endif /* GEARBOX_KERNELS_ROUNDED_H */
