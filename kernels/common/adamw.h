/* AdamW's formulas (torch.optim.AdamW: decoupled weight decay, bias-corrected moments)
 * for one element and one step, shared by optim/adamw and optim/adamw_fused on the CPU
 * and on CUDA, so that all four compute the same thing in the same order.
 *
 * Bits: every f32 operation is rounded on its own (rounded.h), in the order of
 * optim/adamw's passes (decay, g = grad * g_scale, m, v, denominator, update), and the
 * step's scalars are computed in double on the host and rounded to f32 once. So the
 * CPU and the GPU give bit-identical p, m and v for the same inputs and the same
 * squared gradient norm: no FMA contraction (the device uses the __f*_rn intrinsics, the
 * host compiles with -ffp-contract=off), no reciprocal or rsqrt approximations, and the
 * square root and divisions are IEEE-exact on both. What may differ between CPU and GPU
 * is only the squared norm itself, a reduction whose order is each plugin's own; from
 * the same norm the clip factor is the same too (grad_scale.h).
 *
 * Deliberately left out: memory layout, threads, vectors and launch shapes (the kernels
 * decide), AMSGrad and maximize. Header-only.
 */
#ifndef GEARBOX_KERNELS_ADAMW_H
#define GEARBOX_KERNELS_ADAMW_H

#include <math.h>
#include <stdint.h>

#include "rounded.h"

/* The hyperparameters of an AdamW instance, as its options give them. */
typedef struct adamw_hparams {
    double beta1, beta2, eps, weight_decay;
} adamw_hparams;

/* A step's scalars, rounded to f32 once. */
typedef struct adamw_coeffs {
    float g_scale;                 /* loss-scale removal times the clip factor */
    float b1, one_minus_b1;
    float b2, one_minus_b2;
    float step_size;               /* lr / (1 - beta1^step) */
    float bc2_sqrt;                /* sqrt(1 - beta2^step) */
    float eps;
} adamw_coeffs;

/* The scalars of step `step` (from 1) at learning rate lr, computed in double on the
 * host (pow is the host's libm) as PyTorch does with its Python-float hyperparameters. */
static inline adamw_coeffs adamw_step_coeffs(const adamw_hparams *h, float lr, int64_t step,
                                             float g_scale)
{
    double t = (double)step;
    adamw_coeffs c;
    c.g_scale = g_scale;
    c.b1 = (float)h->beta1;
    c.one_minus_b1 = (float)(1.0 - h->beta1);
    c.b2 = (float)h->beta2;
    c.one_minus_b2 = (float)(1.0 - h->beta2);
    c.step_size = (float)((double)lr / (1.0 - pow(h->beta1, t)));
    c.bc2_sqrt = (float)sqrt(1.0 - pow(h->beta2, t));
    c.eps = (float)h->eps;
    return c;
}

/* The factor p is multiplied by in a group that decays: 1 - lr * weight_decay. A group
 * that does not decay uses exactly 1, which changes no bit. */
static inline float adamw_decay_factor(const adamw_hparams *h, float lr)
{
    return (float)gb_dsub_rn(1.0, gb_dmul_rn((double)lr, h->weight_decay));
}

/* g = grad * g_scale: the raw gradient, loss scale removed and clipped. */
GB_HD_FN float adamw_grad(float grad, const adamw_coeffs *c)
{
    return gb_fmul_rn(grad, c->g_scale);
}

/* m = b1 m + (1 - b1) g */
GB_HD_FN float adamw_moment1(float m, float g, const adamw_coeffs *c)
{
    return gb_fadd_rn(gb_fmul_rn(c->b1, m), gb_fmul_rn(c->one_minus_b1, g));
}

/* v = b2 v + (1 - b2) g g */
GB_HD_FN float adamw_moment2(float v, float g, const adamw_coeffs *c)
{
    return gb_fadd_rn(gb_fmul_rn(c->b2, v), gb_fmul_rn(gb_fmul_rn(c->one_minus_b2, g), g));
}

/* What the update subtracts from p: step_size m / (sqrt(v) / sqrt(bc2) + eps), from the
 * new moments. */
GB_HD_FN float adamw_delta(float m, float v, const adamw_coeffs *c)
{
    float denom = gb_fadd_rn(gb_fdiv_rn(gb_fsqrt_rn(v), c->bc2_sqrt), c->eps);
    return gb_fdiv_rn(gb_fmul_rn(c->step_size, m), denom);
}

/* One parameter's whole update; `decay` is adamw_decay_factor() or 1. *p, *m, *v are
 * read and written. */
GB_HD_FN void adamw_element(float *p, float *m, float *v, float grad, float decay,
                            const adamw_coeffs *c)
{
    float g = adamw_grad(grad, c);
    float m1 = adamw_moment1(*m, g, c);
    float v1 = adamw_moment2(*v, g, c);
    *p = gb_fsub_rn(gb_fmul_rn(*p, decay), adamw_delta(m1, v1, c));
    *m = m1;
    *v = v1;
}

#endif /* GEARBOX_KERNELS_ADAMW_H */
