/* Softmax cross-entropy's per-row pieces, shared by the CPU device
 * (plugins/device/cpu/crossentropy.c) and the CUDA device.
 *
 * For a row of V logits x with target t, m = max(x) and S = sum_j exp(x_j - m) (in double,
 * as V may be 50k; the exponentials are gb_exp_fast's, exp.h):
 *   loss = log(S) + m - x_t            dlogit_j = (exp(x_j - m) / S - [j == t]) * dloss.
 * The sum is taken GB_CE_EXP_BLOCK columns at a time: each block's exponentials are summed
 * in reduce_order.h's 16 lanes, and the block sums are added in column order from 0.0, so
 * the CPU and the CUDA device compute the same S. The loss's log is libm's on the CPU and
 * CUDA's on the GPU (both double, within an ulp of each other), which can move the f32
 * loss by an ulp; everything else is the same bits on both (device/cuda compiles with
 * -fmad=false).
 */
#ifndef GEARBOX_KERNELS_COMMON_CROSSENTROPY_H
#define GEARBOX_KERNELS_COMMON_CROSSENTROPY_H

#include <math.h>

#include "hostdevice.h"

/* Columns per block of the softmax denominator (part of the summation order). */
#define GB_CE_EXP_BLOCK 512

GB_HD_FN float gb_ce_loss(double sum, float max, float target_logit)
{
    return (float)(log(sum) + (double)max - (double)target_logit);
}

/* 1 / S, the factor every exponential of the row is scaled by. */
GB_HD_FN float gb_ce_inv_sum(double sum)
{
    return (float)(1.0 / sum);
}

/* dlogit_j from exp(x_j - m); is_target is 1 for j == t, else 0. */
GB_HD_FN float gb_ce_dlogit(float e, float inv_sum, int is_target, float dloss)
{
    return (e * inv_sum - (float)is_target) * dloss;
}

/* gb_ce_dlogit(e, inv_sum, 0, dloss), bit for bit (y - 0.0f is y, NaN and -0 included),
 * for a kernel that writes the target's column apart. */
GB_HD_FN float gb_ce_dlogit_other(float e, float inv_sum, float dloss)
{
    return e * inv_sum * dloss;
}

#endif /* GEARBOX_KERNELS_COMMON_CROSSENTROPY_H */
