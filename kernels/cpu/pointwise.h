/* The GELU loops the kernel builds of cpu_kernels.h compile for their own -m flags, over
 * the per-element math of kernels/common: gb_exp_fast and gb_erfc_fast (exp.h), the exact
 * GELU and its derivative (gelu.h), which the CUDA device computes with too.
 *
 * Those functions make no libm calls (see exp.h for why and how accurate), so a loop that
 * calls them vectorises at -O3 -march=native and vector and scalar iterations give the
 * same bits. Half precision types are left out: kernels convert to f32 first.
 */
#ifndef GB_KERNELS_CPU_POINTWISE_H
#define GB_KERNELS_CPU_POINTWISE_H

#include <stdint.h>

#include "exp.h"
#include "gelu.h"

/* The loops behind cpu_kernels' gelu_forward and gelu_backward: plain C, vectorised by
 * the compiler for the flags of the file that includes them. */
// out, x (n)
static inline void gelu_forward_loop(float *out, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = gb_gelu_erf(x[i]);
}

// dx, x, dout (n); dx may alias dout
static inline void gelu_backward_loop(float *dx, const float *x, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dout[i] * gb_gelu_erf_grad(x[i]);
}

/* GELU's tanh form (GPT-2's): plain loops the CPU device calls directly, the same
 * per-element math as device/cuda's kernels. */
// out, x (n)
static inline void gelu_tanh_forward_loop(float *out, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = gb_gelu_tanh(x[i]);
}

// dx, x, dout (n); dx may alias dout
static inline void gelu_tanh_backward_loop(float *dx, const float *x, const float *dout,
                                           int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dout[i] * gb_gelu_tanh_grad(x[i]);
}

#endif /* GB_KERNELS_CPU_POINTWISE_H */
