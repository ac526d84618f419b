/* The shared CPU kernels in AVX-512F intrinsics (see cpu_kernels.h for the contract).
 *
 * This file alone is compiled with -mavx512f, and callers reach it only through
 * cpu_kernels_best() or an explicit choice checked against the CPU, so the plugins still
 * load and run on CPUs without AVX-512. The product keeps a 6 x 32 block of outputs in
 * zmm registers and broadcasts one element of `a` per row and k. exp512 is gb_exp_fast
 * (kernels/common/exp.h) operation for operation, and GELU is pointwise.h's loop vectorised by the
 * compiler for this file's flags, so every build agrees to the bit. Nothing here needs
 * more than AVX-512F.
 */
#include <immintrin.h>

#include "cpu_kernels.h"
#include "pointwise.h"
#include "rowreduce.h"

/* 6 x 32 outputs are 12 zmm accumulators: more than the 8 that two FMA ports with a
 * four-cycle latency need in flight; a is broadcast from memory by each FMA. */
#define GEMM_ROWS 6

_Static_assert(ROW_LANES == CPU_VEC, "exp_row folds one vector of partial sums");

/* A block of `rows` x (16 * vecs) outputs; inlined with constant arguments. */
static inline __attribute__((always_inline)) void gemm_block(int rows, int vecs, int64_t k,
                                                             const float *a, int64_t a_row,
                                                             int64_t a_col, const float *b,
                                                             int64_t ldb, float *c,
                                                             int64_t ldc, int accumulate)
{
    __m512 acc[GEMM_ROWS][2];
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < vecs; v++)
            acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + v * CPU_VEC)
                                   : _mm512_setzero_ps();
    for (int64_t kk = 0; kk < k; kk++) {
        __m512 b_k[2];
        for (int v = 0; v < vecs; v++)
            b_k[v] = _mm512_loadu_ps(b + kk * ldb + v * CPU_VEC);
        for (int r = 0; r < rows; r++) {
            const __m512 a_rk = _mm512_set1_ps(a[r * a_row + kk * a_col]);
            for (int v = 0; v < vecs; v++)
                acc[r][v] = _mm512_fmadd_ps(a_rk, b_k[v], acc[r][v]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < vecs; v++)
            _mm512_storeu_ps(c + r * ldc + v * CPU_VEC, acc[r][v]);
}

/* The columns of `rows` rows: pairs of vectors, then a last single one. */
static inline __attribute__((always_inline)) void gemm_rows(int rows, int64_t n, int64_t k,
                                                            const float *a, int64_t a_row,
                                                            int64_t a_col, const float *b,
                                                            int64_t ldb, float *c, int64_t ldc,
                                                            int accumulate)
{
    int64_t x = 0;
    for (; x + 2 * CPU_VEC <= n; x += 2 * CPU_VEC)
        gemm_block(rows, 2, k, a, a_row, a_col, b + x, ldb, c + x, ldc, accumulate);
    if (x < n)
        gemm_block(rows, 1, k, a, a_row, a_col, b + x, ldb, c + x, ldc, accumulate);
}

#include "gemm_blocks.h"

/* gb_exp_fast (exp.h) on 16 lanes: the same clamps, reduction and polynomial. */
static inline __m512 exp512(__m512 x)
{
    __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));   // a NaN lane becomes -87
    xc = _mm512_min_ps(xc, _mm512_set1_ps(88.37f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i bits = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
    y = _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ), y);
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.7228f), _CMP_GT_OQ),
                           _mm512_set1_ps(__builtin_inff()));
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/* Lanes j0 .. j0+15 that lie below n. */
static inline __mmask16 live_lanes(int64_t n, int64_t j0)
{
    int64_t live = n - j0;
    return live >= CPU_VEC ? (__mmask16)0xffff
                             : live <= 0 ? (__mmask16)0 : (__mmask16)((1u << live) - 1);
}

// x (width)
static float exp_row_avx512(float *x, int64_t n, int64_t width, float shift)
{
    const __m512 s = _mm512_set1_ps(shift);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < width; j += CPU_VEC) {
        __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
        e = _mm512_maskz_mov_ps(live_lanes(n, j), e);
        _mm512_storeu_ps(x + j, e);
        sum = _mm512_add_ps(sum, e);
    }
    float lanes[ROW_LANES];
    _mm512_storeu_ps(lanes, sum);
    return fold_lanes_f32(lanes);
}

/* The largest of x[0 .. n): masked loads past n read -INFINITY. */
// x (n)
static float max_row_avx512(const float *x, int64_t n)
{
    __m512 m = _mm512_set1_ps(-__builtin_inff());
    for (int64_t j = 0; j < n; j += CPU_VEC)
        m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, live_lanes(n, j), x + j));
    return _mm512_reduce_max_ps(m);
}

const cpu_kernels cpu_kernels_avx512 = {
    .name = "avx512",
    .gemm_rows = GEMM_ROWS,
    .gemm = gemm_row_blocks,
    .exp_row = exp_row_avx512,
    .max_row = max_row_avx512,
    .gelu_forward = gelu_forward_loop,     /* compiled here, for AVX-512 */
    .gelu_backward = gelu_backward_loop,
    .transpose = cpu_transpose_avx2,
};
