/* The CPU kernels of optim/adamw_fused: single-threaded loops over one contiguous span,
 * in a portable version and an AVX-512 version (kernels_avx512.c, compiled with
 * -mavx512f whatever the build's -march, and called only when the CPU has it).
 *
 * Both versions give bit-identical results for any span and any alignment: the update is
 * exactly rounded per element (kernels/common/adamw.h), and the sum of squares sends element i of
 * the span to partial sum i % FUSED_LANES whichever version runs, then folds the lanes in
 * one fixed tree. Threads, groups and argument checks belong to cpu.c.
 */
#ifndef GB_OPTIM_ADAMW_FUSED_KERNELS_H
#define GB_OPTIM_ADAMW_FUSED_KERNELS_H

#include <stdint.h>

#include "adamw.h"
#include "gearbox/convert.h"
#include "gearbox/tensor.h"
#include "stochastic_round.h"

#define FUSED_LANES 16

/* One span of the flat buffers, all pointers already at the span's first element. */
typedef struct fused_span {
    float *p;            // (count)
    const float *g;      // (count)
    float *m, *v;        // (count)
    uint16_t *lowp;      // (count) bf16 or f16 bit patterns, or NULL
    gb_dtype lowp_dtype; // GB_BF16 or GB_F16 when lowp is set
    int stochastic;      // 1: bf16 lowp rounded stochastically (stochastic_round.h)
    uint64_t seed;       // of that rounding
    int64_t step;
    int64_t first;       // the flat-buffer index of the span's first element
    int64_t count;
    float decay;         // 1 - lr * weight_decay, or 1 for a group that does not decay
} fused_span;

typedef struct fused_kernels {
    const char *isa;     /* shown in logs and benchmarks */
    /* Applies adamw_element to every element of the span and writes the lowp copy. */
    void (*update)(const fused_span *span, const adamw_coeffs *c);
    /* Sum of x[i]^2 in double, in the lane order above. */
    double (*sum_squares)(const float *x, int64_t n);   // x (n)
} fused_kernels;

extern const fused_kernels fused_kernels_portable;
extern const fused_kernels fused_kernels_avx512;

/* Adds x[j]^2 into lane j for the `count` (at most FUSED_LANES) elements of x: exact, a
 * float's square fits in a double. A whole vector in the portable loop, and both
 * versions' remainder. */
static inline void fused_add_squares(double acc[FUSED_LANES], const float *x, int64_t count)
{
    for (int64_t j = 0; j < count; j++) {
        double xj = x[j];
        acc[j] += xj * xj;
    }
}

/* The lanes' fixed folding tree, shared so both versions add in the same order. */
static inline double fused_fold_lanes(double acc[FUSED_LANES])
{
    for (int width = FUSED_LANES / 2; width > 0; width /= 2)
        for (int j = 0; j < width; j++)
            acc[j] += acc[j + width];
    return acc[0];
}

/* Element i of a span with its low-precision copy, for loops and vector-loop remainders. */
static inline void fused_element(const fused_span *s, int64_t i, const adamw_coeffs *c)
{
    adamw_element(&s->p[i], &s->m[i], &s->v[i], s->g[i], s->decay, c);
    if (!s->lowp)
        return;
    if (s->stochastic)
        s->lowp[i] = gb_bf16_stochastic_at(s->p[i], s->seed, s->step, s->first + i);
    else
        s->lowp[i] = s->lowp_dtype == GB_BF16 ? gb_bf16_from_f32(s->p[i]) : gb_f16_from_f32(s->p[i]);
}

#endif /* GB_OPTIM_ADAMW_FUSED_KERNELS_H */
