/* LayerNorm's per-row statistics and per-element terms (biased variance, as PyTorch and
 * llm.c), shared by the CPU device (plugins/device/cpu/layernorm.c) and the CUDA device.
 *
 * Forward, per row of C:  mean = sum(x) / C, rstd = 1 / sqrt(sum((x - mean)^2) / C + eps),
 *                         out = norm * weight + bias, norm = (x - mean) * rstd.
 * Backward, per row:      dnorm = weight * dout,
 *                         dx += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd,
 *                         dweight += norm * dout, dbias += dout (summed over rows).
 * The row sums are reduce_order.h's (16 lanes, a fixed tree), so the CPU and the CUDA
 * device compute the same statistics; the per-element terms here are plain f32
 * expressions, the same bits on both when nvcc does not contract them into fused
 * multiply-adds (device/cuda compiles with -fmad=false).
 */
#ifndef GEARBOX_KERNELS_COMMON_LAYERNORM_H
#define GEARBOX_KERNELS_COMMON_LAYERNORM_H

#include <math.h>
#include <stdint.h>

#include "hostdevice.h"

/* rstd from the row's sum of squared deviations from the mean. */
GB_HD_FN float gb_ln_rstd(float sum_sq_dev, int64_t C, float eps)
{
    float var = sum_sq_dev / (float)C;
    return 1.0f / sqrtf(var + eps);
}

GB_HD_FN float gb_ln_norm(float x, float mean, float rstd)
{
    return (x - mean) * rstd;
}

/* The term dx gains: dnorm_mean = mean(dnorm), dnorm_norm_mean = mean(dnorm * norm). */
GB_HD_FN float gb_ln_dx(float dnorm, float norm, float dnorm_mean, float dnorm_norm_mean,
                        float rstd)
{
    return (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd;
}

#endif /* GEARBOX_KERNELS_COMMON_LAYERNORM_H */
