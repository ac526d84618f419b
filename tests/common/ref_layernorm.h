/* LayerNorm in double precision, the reference the numeric tests hold the formulas
 * (test_formulas.c) and the CPU device's kernels (tests/kernels) to. */
#ifndef GEARBOX_TESTS_REF_LAYERNORM_H
#define GEARBOX_TESTS_REF_LAYERNORM_H

#include <math.h>
#include <stdint.h>

/* out = (x - mean) / sqrt(var + eps) * w + b per row of C, over N rows, in double; w and
 * b may be NULL (1 and 0), mean and rstd (N) are written when not NULL. */
static inline void ref_layernorm(double *out, double *mean, double *rstd, const double *x,
                                 const double *w, const double *b, int64_t N, int64_t C,
                                 double eps)
{
    for (int64_t n = 0; n < N; n++) {
        const double *xr = x + n * C;
        double m = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++)
            m += xr[c];
        m /= C;
        for (int64_t c = 0; c < C; c++)
            v += (xr[c] - m) * (xr[c] - m);
        double s = 1.0 / sqrt(v / C + eps);
        for (int64_t c = 0; c < C; c++)
            out[n * C + c] = (xr[c] - m) * s * (w ? w[c] : 1.0) + (b ? b[c] : 0.0);
        if (mean)
            mean[n] = m;
        if (rstd)
            rstd[n] = s;
    }
}

#endif
