/* The shared CPU kernels in AVX2 and FMA intrinsics (see cpu_kernels.h for the contract).
 *
 * This file alone is compiled with -mavx2 -mfma, and callers reach it only through
 * cpu_kernels_best() or an explicit choice checked against the CPU, so the plugins still
 * load and run on CPUs without AVX2. The product keeps a 6 x 16 block of outputs in 12
 * ymm registers and broadcasts one element of `a` per row and k. exp256 and erfc256 are
 * gb_exp_fast and gb_erfc_fast (kernels/common/exp.h) operation for operation, and
 * element tails use pointwise.h itself, so every result has the bits of the portable build.
 */
#include <immintrin.h>

#include "cpu_kernels.h"
#include "pointwise.h"
#include "rowreduce.h"

/* 6 x 16 outputs are 12 ymm accumulators; with two vectors of b and one broadcast of a
 * that is 15 of the 16 registers. Two FMA ports with a four-cycle latency need 8 chains
 * in flight, which 12 cover. */
#define GEMM_ROWS 6

_Static_assert(ROW_LANES == 2 * 8, "exp_row keeps the 16 lanes as two ymm registers");

/* A block of `rows` x 16 outputs; inlined with a constant `rows`. */
static inline __attribute__((always_inline)) void gemm_block(int rows, int64_t k,
                                                             const float *a, int64_t a_row,
                                                             int64_t a_col, const float *b,
                                                             int64_t ldb, float *c,
                                                             int64_t ldc, int accumulate)
{
    __m256 acc[GEMM_ROWS][2];
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < 2; v++)
            acc[r][v] = accumulate ? _mm256_loadu_ps(c + r * ldc + 8 * v) : _mm256_setzero_ps();
    for (int64_t kk = 0; kk < k; kk++) {
        const __m256 b0 = _mm256_loadu_ps(b + kk * ldb);
        const __m256 b1 = _mm256_loadu_ps(b + kk * ldb + 8);
        const float *a_k = a + kk * a_col;
        for (int r = 0; r < rows; r++) {
            const __m256 a_rk = _mm256_broadcast_ss(a_k + r * a_row);
            acc[r][0] = _mm256_fmadd_ps(a_rk, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a_rk, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < 2; v++)
            _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);
}

#define GEMM_BLOCK_COLS CPU_VEC
#include "gemm_blocks.h"

static inline __m256 splat(float f)
{
    return _mm256_set1_ps(f);
}

/* The element-wise math below works on g (at most MAX_GROUP) vectors at once, each step
 * applied to all of them before the next: the steps of one vector form a chain some
 * hundred cycles long, and interleaving independent chains is what keeps the FMA ports
 * busy. GELU takes 8 at a time (its backward runs 1.4x faster than with 4); a row of
 * exponentials, usually 16 to 256 wide, takes 4. */
#define MAX_GROUP 8
#define GELU_GROUP 8
#define EXP_GROUP 4

/* gb_exp_fast (exp.h) on g x 8 lanes: the same clamps, reduction and polynomial. */
static inline __attribute__((always_inline)) void exp256(__m256 *y, const __m256 *x, int g)
{
    __m256 n[MAX_GROUP], r[MAX_GROUP], p[MAX_GROUP];
    for (int u = 0; u < g; u++) {
        __m256 xc = _mm256_max_ps(x[u], splat(-87.0f));   // a NaN lane becomes -87
        xc = _mm256_min_ps(xc, splat(88.37f));
        n[u] = _mm256_round_ps(_mm256_mul_ps(xc, splat(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r[u] = _mm256_fmadd_ps(n[u], splat(-0.693359375f), xc);
    }
    for (int u = 0; u < g; u++)
        r[u] = _mm256_fmadd_ps(n[u], splat(2.12194440e-4f), r[u]);
    static const float poly[] = {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                                 1.6666665459e-1f, 5.0000001201e-1f};
    for (int u = 0; u < g; u++)
        p[u] = _mm256_fmadd_ps(splat(1.9875691500e-4f), r[u], splat(poly[0]));
    for (int c = 1; c < 5; c++)
        for (int u = 0; u < g; u++)
            p[u] = _mm256_fmadd_ps(p[u], r[u], splat(poly[c]));
    for (int u = 0; u < g; u++) {
        p[u] = _mm256_fmadd_ps(p[u], _mm256_mul_ps(r[u], r[u]),
                               _mm256_add_ps(r[u], splat(1.0f)));
        __m256i bits = _mm256_slli_epi32(
            _mm256_add_epi32(_mm256_cvttps_epi32(n[u]), _mm256_set1_epi32(127)), 23);
        __m256 e = _mm256_mul_ps(p[u], _mm256_castsi256_ps(bits));
        e = _mm256_andnot_ps(_mm256_cmp_ps(x[u], splat(-87.0f), _CMP_LT_OQ), e);
        e = _mm256_blendv_ps(e, splat(INFINITY),
                             _mm256_cmp_ps(x[u], splat(88.7228f), _CMP_GT_OQ));
        y[u] = _mm256_blendv_ps(e, x[u], _mm256_cmp_ps(x[u], x[u], _CMP_UNORD_Q));
    }
}

/* gb_erfc_fast (exp.h) on g x 8 lanes. */
static inline __attribute__((always_inline)) void erfc256(__m256 *y, const __m256 *x, int g)
{
    static const float poly[] = {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                 -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f,
                                 -1.26551223f};
    __m256 z[MAX_GROUP], t[MAX_GROUP], p[MAX_GROUP];
    for (int u = 0; u < g; u++) {
        z[u] = _mm256_andnot_ps(splat(-0.0f), x[u]);
        t[u] = _mm256_div_ps(splat(1.0f), _mm256_fmadd_ps(splat(0.5f), z[u], splat(1.0f)));
        p[u] = _mm256_fmadd_ps(splat(0.17087277f), t[u], splat(poly[0]));
    }
    for (int c = 1; c < 9; c++)
        for (int u = 0; u < g; u++)
            p[u] = _mm256_fmadd_ps(p[u], t[u], splat(poly[c]));
    for (int u = 0; u < g; u++)
        p[u] = _mm256_sub_ps(p[u], _mm256_mul_ps(z[u], z[u]));
    exp256(p, p, g);
    for (int u = 0; u < g; u++) {
        const __m256 r = _mm256_mul_ps(t[u], p[u]);
        y[u] = _mm256_blendv_ps(r, _mm256_sub_ps(splat(2.0f), r),
                                _mm256_cmp_ps(x[u], _mm256_setzero_ps(), _CMP_LT_OQ));
    }
}

/* erfc(-x / sqrt 2), the heart of GELU: gelu.h's gb_erfc_fast(-x * (float)M_SQRT1_2). */
static inline __attribute__((always_inline)) void gelu_erfc256(__m256 *y, const __m256 *x,
                                                               int g)
{
    __m256 arg[MAX_GROUP];
    for (int u = 0; u < g; u++)
        arg[u] = _mm256_mul_ps(_mm256_xor_ps(x[u], splat(-0.0f)), splat((float)M_SQRT1_2));
    erfc256(y, arg, g);
}

/* Lanes j0 .. j0+7 that lie below n, as a mask of all-ones lanes. */
static inline __m256 live_lanes(int64_t n, int64_t j0)
{
    const int64_t live = n - j0 < 0 ? 0 : n - j0 > 8 ? 8 : n - j0;
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)live),
                                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

_Static_assert(EXP_GROUP * 8 % CPU_VEC == 0, "exp_row steps are whole rows of CPU_VEC");

// x (width)
static float exp_row_avx2(float *x, int64_t n, int64_t width, float shift)
{
    const __m256 s = splat(shift);
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t j = 0;
    for (; j + 8 * EXP_GROUP <= width; j += 8 * EXP_GROUP) {
        __m256 e[EXP_GROUP];
        for (int u = 0; u < EXP_GROUP; u++)
            e[u] = _mm256_sub_ps(_mm256_loadu_ps(x + j + 8 * u), s);
        exp256(e, e, EXP_GROUP);
        for (int u = 0; u < EXP_GROUP; u++) {
            e[u] = _mm256_and_ps(e[u], live_lanes(n, j + 8 * u));
            _mm256_storeu_ps(x + j + 8 * u, e[u]);
            sum[u % 2] = _mm256_add_ps(sum[u % 2], e[u]);
        }
    }
    for (; j < width; j += 8) {   // a last CPU_VEC, one vector at a time
        __m256 e[1] = {_mm256_sub_ps(_mm256_loadu_ps(x + j), s)};
        exp256(e, e, 1);
        e[0] = _mm256_and_ps(e[0], live_lanes(n, j));
        _mm256_storeu_ps(x + j, e[0]);
        sum[j / 8 % 2] = _mm256_add_ps(sum[j / 8 % 2], e[0]);
    }
    float lanes[ROW_LANES];
    _mm256_storeu_ps(lanes, sum[0]);
    _mm256_storeu_ps(lanes + 8, sum[1]);
    return fold_lanes_f32(lanes);
}

/* The largest of x[0 .. n): lanes past n count as -INFINITY. */
// x (n)
static float max_row_avx2(const float *x, int64_t n)
{
    const __m256 lowest = splat(-INFINITY);
    __m256 m[2] = {lowest, lowest};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int v = 0; v < 2; v++)
            m[v] = _mm256_max_ps(m[v], _mm256_loadu_ps(x + j + 8 * v));
    for (; j < n; j += 8) {
        const __m256 keep = live_lanes(n, j);
        const __m256 tail = _mm256_maskload_ps(x + j, _mm256_castps_si256(keep));
        m[0] = _mm256_max_ps(m[0], _mm256_blendv_ps(lowest, tail, keep));
    }
    __m256 all = _mm256_max_ps(m[0], m[1]);
    __m128 half = _mm_max_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1));
    half = _mm_max_ps(half, _mm_movehl_ps(half, half));
    half = _mm_max_ss(half, _mm_shuffle_ps(half, half, 1));
    return _mm_cvtss_f32(half);
}

// out, x (n)
static void gelu_forward_avx2(float *out, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 * GELU_GROUP <= n; i += 8 * GELU_GROUP) {
        __m256 v[GELU_GROUP], e[GELU_GROUP];
        for (int u = 0; u < GELU_GROUP; u++)
            v[u] = _mm256_loadu_ps(x + i + 8 * u);
        gelu_erfc256(e, v, GELU_GROUP);
        for (int u = 0; u < GELU_GROUP; u++)
            _mm256_storeu_ps(out + i + 8 * u,
                             _mm256_mul_ps(_mm256_mul_ps(splat(0.5f), v[u]), e[u]));
    }
    gelu_forward_loop(out + i, x + i, n - i);
}

// dx, x, dout (n); dx may alias dout
static void gelu_backward_avx2(float *dx, const float *x, const float *dout, int64_t n)
{
    const float inv_sqrt_2pi = 0.398942280401432678f;
    int64_t i = 0;
    for (; i + 8 * GELU_GROUP <= n; i += 8 * GELU_GROUP) {
        __m256 v[GELU_GROUP], e[GELU_GROUP], pdf[GELU_GROUP];
        for (int u = 0; u < GELU_GROUP; u++) {
            v[u] = _mm256_loadu_ps(x + i + 8 * u);
            pdf[u] = _mm256_mul_ps(_mm256_mul_ps(splat(-0.5f), v[u]), v[u]);
        }
        gelu_erfc256(e, v, GELU_GROUP);
        exp256(pdf, pdf, GELU_GROUP);
        for (int u = 0; u < GELU_GROUP; u++) {
            const __m256 cdf = _mm256_mul_ps(splat(0.5f), e[u]);
            const __m256 grad = _mm256_add_ps(
                cdf, _mm256_mul_ps(_mm256_mul_ps(v[u], splat(inv_sqrt_2pi)), pdf[u]));
            _mm256_storeu_ps(dx + i + 8 * u,
                             _mm256_mul_ps(_mm256_loadu_ps(dout + i + 8 * u), grad));
        }
    }
    gelu_backward_loop(dx + i, x + i, dout + i, n - i);
}

/* dst rows r0 .. r0+7, columns c0 .. c0+7 from the transposed 8 x 8 block of src:
 * eight loads, three rounds of shuffles, eight stores. */
static inline void transpose_8x8(float *dst, int64_t ldd, const float *src, int64_t lds)
{
    __m256 a[8], b[8];
    for (int i = 0; i < 8; i++)
        a[i] = _mm256_loadu_ps(src + i * lds);
    for (int i = 0; i < 8; i += 2) {
        b[i] = _mm256_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm256_unpackhi_ps(a[i], a[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        a[i] = _mm256_shuffle_ps(b[i], b[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        a[i + 1] = _mm256_shuffle_ps(b[i], b[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        a[i + 2] = _mm256_shuffle_ps(b[i + 1], b[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        a[i + 3] = _mm256_shuffle_ps(b[i + 1], b[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(a[i], a[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(a[i], a[i + 4], 0x31));
    }
}

/* Blocks of 8 x 8 in registers; the edges that do not fill one, element by element. */
// dst (rows, cols); src (cols, rows)
void cpu_transpose_avx2(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                        int64_t cols)
{
    const int64_t rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
    for (int64_t r0 = 0; r0 < rows8; r0 += 8)
        for (int64_t c0 = 0; c0 < cols8; c0 += 8)
            transpose_8x8(dst + r0 * ldd + c0, ldd, src + c0 * lds + r0, lds);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = r < rows8 ? cols8 : 0; c < cols; c++)
            dst[r * ldd + c] = src[c * lds + r];
}

const cpu_kernels cpu_kernels_avx2 = {
    .name = "avx2",
    .gemm_rows = GEMM_ROWS,
    .gemm = gemm_row_blocks,
    .exp_row = exp_row_avx2,
    .max_row = max_row_avx2,
    .gelu_forward = gelu_forward_avx2,
    .gelu_backward = gelu_backward_avx2,
    .transpose = cpu_transpose_avx2,
};
