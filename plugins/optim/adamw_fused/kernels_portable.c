/* The portable kernels of optim/adamw_fused: plain C loops over kernels/common/adamw.h that the
 * compiler may vectorise for whatever -march the build uses. They run where AVX-512 is
 * missing and serve as the reference the AVX-512 kernels are tested against bit for bit.
 *
 * The update loop is written once per low-precision dtype so that no per-element branch
 * stands in the way of vectorisation. Nothing here is parallel; cpu.c splits the work.
 */
#include "kernels.h"

static void update_portable(const fused_span *s, const adamw_coeffs *c)
{
    float *restrict p = s->p, *restrict m = s->m, *restrict v = s->v;
    const float *restrict g = s->g;
    uint16_t *restrict lowp = s->lowp;
    int64_t n = s->count;
    float decay = s->decay;
    if (!lowp) {
        for (int64_t i = 0; i < n; i++)
            adamw_element(&p[i], &m[i], &v[i], g[i], decay, c);
    } else if (s->stochastic) {
        for (int64_t i = 0; i < n; i++)
            fused_element(s, i, c);
    } else if (s->lowp_dtype == GB_BF16) {
        for (int64_t i = 0; i < n; i++) {
            adamw_element(&p[i], &m[i], &v[i], g[i], decay, c);
            lowp[i] = gb_bf16_from_f32(p[i]);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            adamw_element(&p[i], &m[i], &v[i], g[i], decay, c);
            lowp[i] = gb_f16_from_f32(p[i]);
        }
    }
}

// x (n)
static double sum_squares_portable(const float *x, int64_t n)
{
    double acc[FUSED_LANES] = {0};
    int64_t i = 0;
    for (; i + FUSED_LANES <= n; i += FUSED_LANES)
        fused_add_squares(acc, x + i, FUSED_LANES);
    fused_add_squares(acc, x + i, n - i);
    return fused_fold_lanes(acc);
}

const fused_kernels fused_kernels_portable = {
    .isa = "portable",
    .update = update_portable,
    .sum_squares = sum_squares_portable,
};
