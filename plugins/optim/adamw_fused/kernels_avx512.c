/* The AVX-512 kernels of optim/adamw_fused, compiled with -mavx512f on every build and
 * selected by cpu.c only when __builtin_cpu_supports("avx512f") says the CPU has it.
 *
 * The update reads p, g, m, v once and writes p, m, v (and the low-precision copy) once:
 * 16 elements per iteration, after a scalar head that brings p to a 64-byte boundary so
 * the loads do not split cache lines (all four buffers share p's alignment when the core
 * allocates them alike), and a scalar tail. The vector code performs adamw_element's
 * operations in its order, each exactly rounded, so it matches the portable kernels bit
 * for bit; bf16 rounding is done on the integer bit patterns (VCVTNEPS2BF16 would flush
 * subnormals) and f16 uses VCVTPS2PH, which is IEEE round-to-nearest-even.
 *
 * Deliberately left out: FMA (it would change the rounding), reciprocal approximations,
 * non-temporal stores (p, m and v are read before they are written, so their lines are
 * in the cache already; streaming stores made the update slower when tried) and
 * software prefetch (no measurable gain over the hardware prefetcher on five sequential
 * streams).
 */
#include <immintrin.h>

#include "kernels.h"

typedef struct vec_coeffs {
    __m512 g_scale, b1, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps, decay;
} vec_coeffs;

/* adamw_element on p, g, m, v [0, 16); returns the new p. */
static inline __m512 update16(float *p, const float *g, float *m, float *v, const vec_coeffs *k)
{
    __m512 gs = _mm512_mul_ps(_mm512_loadu_ps(g), k->g_scale);
    __m512 m1 = _mm512_add_ps(_mm512_mul_ps(k->b1, _mm512_loadu_ps(m)),
                              _mm512_mul_ps(k->one_minus_b1, gs));
    __m512 v1 = _mm512_add_ps(_mm512_mul_ps(k->b2, _mm512_loadu_ps(v)),
                              _mm512_mul_ps(_mm512_mul_ps(k->one_minus_b2, gs), gs));
    __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v1), k->bc2_sqrt), k->eps);
    __m512 p1 = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(p), k->decay),
                              _mm512_div_ps(_mm512_mul_ps(k->step_size, m1), denom));
    _mm512_storeu_ps(m, m1);
    _mm512_storeu_ps(v, v1);
    _mm512_storeu_ps(p, p1);
    return p1;
}

/* gb_bf16_from_f32 on 16 lanes. */
static inline __m256i bf16x16(__m512 x)
{
    __m512i bits = _mm512_castps_si512(x);
    __m512i high = _mm512_srli_epi32(bits, 16);
    __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
    __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
    __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
    __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan));
}

/* gb_f16_from_f32 on 16 lanes. */
static inline __m256i f16x16(__m512 x)
{
    return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

static vec_coeffs broadcast(const adamw_coeffs *c, float decay)
{
    return (vec_coeffs){
        .g_scale = _mm512_set1_ps(c->g_scale),
        .b1 = _mm512_set1_ps(c->b1),
        .one_minus_b1 = _mm512_set1_ps(c->one_minus_b1),
        .b2 = _mm512_set1_ps(c->b2),
        .one_minus_b2 = _mm512_set1_ps(c->one_minus_b2),
        .step_size = _mm512_set1_ps(c->step_size),
        .bc2_sqrt = _mm512_set1_ps(c->bc2_sqrt),
        .eps = _mm512_set1_ps(c->eps),
        .decay = _mm512_set1_ps(decay),
    };
}

/* Elements before p's next 64-byte boundary (all of them when the span is shorter). */
static int64_t head_count(const float *p, int64_t n)
{
    int64_t misaligned = (int64_t)(((uintptr_t)p / sizeof(float)) % FUSED_LANES);
    int64_t head = misaligned ? FUSED_LANES - misaligned : 0;
    return head < n ? head : n;
}

static void update_avx512(const fused_span *s, const adamw_coeffs *c)
{
    if (s->lowp && s->stochastic) { /* per-element random bits: the portable loop */
        fused_kernels_portable.update(s, c);
        return;
    }
    int64_t n = s->count, i = head_count(s->p, n);
    for (int64_t j = 0; j < i; j++)
        fused_element(s, j, c);
    vec_coeffs k = broadcast(c, s->decay);
    if (!s->lowp) {
        for (; i + FUSED_LANES <= n; i += FUSED_LANES)
            update16(s->p + i, s->g + i, s->m + i, s->v + i, &k);
    } else if (s->lowp_dtype == GB_BF16) {
        for (; i + FUSED_LANES <= n; i += FUSED_LANES)
            _mm256_storeu_si256((__m256i *)(s->lowp + i),
                                bf16x16(update16(s->p + i, s->g + i, s->m + i, s->v + i, &k)));
    } else {
        for (; i + FUSED_LANES <= n; i += FUSED_LANES)
            _mm256_storeu_si256((__m256i *)(s->lowp + i),
                                f16x16(update16(s->p + i, s->g + i, s->m + i, s->v + i, &k)));
    }
    for (; i < n; i++)
        fused_element(s, i, c);
}

/* Lanes 0-7 and 8-15 of the portable version live in two double vectors; a float's
 * square is exact in double, so the fused multiply-add rounds exactly as its `+=`. */
// x (n)
static double sum_squares_avx512(const float *x, int64_t n)
{
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + FUSED_LANES <= n; i += FUSED_LANES) {
        __m512d a = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        __m512d b = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
        lo = _mm512_fmadd_pd(a, a, lo);
        hi = _mm512_fmadd_pd(b, b, hi);
    }
    double acc[FUSED_LANES];
    _mm512_storeu_pd(acc, lo);
    _mm512_storeu_pd(acc + 8, hi);
    fused_add_squares(acc, x + i, n - i);
    return fused_fold_lanes(acc);
}

const fused_kernels fused_kernels_avx512 = {
    .isa = "avx512",
    .update = update_avx512,
    .sum_squares = sum_squares_avx512,
};
