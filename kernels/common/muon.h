/* Muon's per-element formulas (Keller Jordan's Muon: momentum orthogonalised by a quintic
 * Newton-Schulz iteration), shared by optim/muon on the CPU and on CUDA, so that both
 * compute the same expression for every element; the matrix products between them are
 * the device's matmul.
 *
 * One matrix's step, with g = grad * g_scale (optim.h):
 *   momentum  mom = mom + (1 - beta) (g - mom)           (torch's mom.lerp_(g, 1 - beta))
 *   update    u = mom - (1 - beta) (mom - g) (Nesterov: g.lerp_(mom, beta)), else u = mom
 *   X0        = u / (||u||_F + 1e-7), in the dtype the iteration runs in
 *   5 times   A = X X^T, B = b A + c A A, X = a X + B X   (X^T X and X B^T for a tall X,
 *             the iteration on the transpose without moving it)
 *   apply     p = p (1 - lr wd) - lr max(1, rows/cols)^0.5 X
 * with (a, b, c) = (3.4445, -4.7750, 2.0315), the published coefficients. The scalars
 * (decay factor, step) are computed in double on the host and rounded to f32 once; every
 * f32 operation here is rounded on its own (rounded.h), as adamw.h's are. Header-only.
 */
#ifndef GEARBOX_KERNELS_MUON_H
#define GEARBOX_KERNELS_MUON_H

#include <math.h>
#include <stdint.h>

#include "rounded.h"

/* The quintic Newton-Schulz coefficients, chosen by Muon's author to maximise the slope
 * at zero (X's singular values end up in about [0.7, 1.2], not at exactly 1). */
#define MUON_NS_A 3.4445f
#define MUON_NS_B (-4.7750f)
#define MUON_NS_C 2.0315f
/* Added to the Frobenius norm before dividing by it: a zero update stays zero. */
#define MUON_NORM_EPS 1e-7f

/* One step's momentum scalars. */
typedef struct muon_coeffs {
    float g_scale;          /* loss-scale removal times the clip factor */
    float one_minus_beta;   /* 1 - momentum */
    int32_t nesterov;
} muon_coeffs;

/* One matrix's scalars for the update it applies. */
typedef struct muon_apply_coeffs {
    float decay;            /* 1 - lr * weight_decay, or exactly 1 */
    float step;             /* lr * max(1, rows/cols)^0.5 */
} muon_apply_coeffs;

/* The momentum buffer's new value from the raw gradient. */
GB_HD_FN float muon_momentum(float mom, float grad, const muon_coeffs *c)
{
    float g = gb_fmul_rn(grad, c->g_scale);
    return gb_fadd_rn(mom, gb_fmul_rn(c->one_minus_beta, gb_fsub_rn(g, mom)));
}

/* What is orthogonalised, from the raw gradient and the new momentum. */
GB_HD_FN float muon_update(float mom, float grad, const muon_coeffs *c)
{
    if (!c->nesterov)
        return mom;
    float g = gb_fmul_rn(grad, c->g_scale);
    return gb_fsub_rn(mom, gb_fmul_rn(c->one_minus_beta, gb_fsub_rn(mom, g)));
}

/* X0's element: u over the norm (norm_sq, the sum of u's squares) plus MUON_NORM_EPS. */
GB_HD_FN float muon_normalized(float u, float norm_sq)
{
    return gb_fdiv_rn(u, gb_fadd_rn(gb_fsqrt_rn(norm_sq), MUON_NORM_EPS));
}

/* The parameter after the update x, the orthogonalised element. */
GB_HD_FN float muon_apply(float p, float x, const muon_apply_coeffs *c)
{
    return gb_fsub_rn(gb_fmul_rn(p, c->decay), gb_fmul_rn(c->step, x));
}

/* The scalars of a (rows, cols) matrix at learning rate lr with weight decay wd (applied
 * where `decays`), computed in double and rounded once. */
static inline muon_apply_coeffs muon_apply_coeffs_of(double lr, double wd, int decays,
                                                     int64_t rows, int64_t cols)
{
    double ratio = (double)rows / (double)cols;
    muon_apply_coeffs c;
    c.decay = decays ? (float)(1.0 - lr * wd) : 1.0f;
    c.step = (float)(lr * sqrt(ratio > 1.0 ? ratio : 1.0));
    return c;
}

#endif /* GEARBOX_KERNELS_MUON_H */
