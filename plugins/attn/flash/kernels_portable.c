/* attn/flash's kernels in portable C (see kernels.h for the contract).
 *
 * Written for the auto-vectoriser: fixed-size blocks of GEMM_ROWS x FLASH_VEC
 * accumulators, fmaf and no reassociation, so -O3 keeps each block in vector registers on
 * whatever -march the build targets, and the scalar fallback computes the same bits.
 * Without hardware FMA (a build with -Dnative=false running on a CPU without AVX-512),
 * fmaf is a libm call and this path is slow but still exact.
 */
#include <math.h>

#include "kernels.h"
#include "pointwise.h"
#include "rowreduce.h"

/* Rows of c computed together: 5 x 16 accumulators are 10 AVX2 registers, and with the
 * 5 broadcasts of a they fill the 16 without spilling. */
#define GEMM_ROWS 5

/* One block of `rows` (1 .. GEMM_ROWS) x FLASH_VEC outputs, inlined with a constant
 * `rows` so the compiler unrolls it. One named array per row with the FLASH_VEC loop
 * innermost is the shape GCC keeps in registers (and meson.build turns off unroll-and-jam,
 * which would interleave two k iterations and spill). */
static inline __attribute__((always_inline)) void gemm_block(int rows, int64_t k,
                                                             const float *a, int64_t a_row,
                                                             int64_t a_col, const float *b,
                                                             int64_t ldb, float *c,
                                                             int64_t ldc, int accumulate)
{
    float acc0[FLASH_VEC], acc1[FLASH_VEC], acc2[FLASH_VEC], acc3[FLASH_VEC], acc4[FLASH_VEC];
    float *acc[GEMM_ROWS] = {acc0, acc1, acc2, acc3, acc4};
    for (int r = 0; r < rows; r++)
        for (int x = 0; x < FLASH_VEC; x++)
            acc[r][x] = accumulate ? c[r * ldc + x] : 0.0f;
    for (int64_t kk = 0; kk < k; kk++) {
        const float *b_k = b + kk * ldb, *a_k = a + kk * a_col;
        for (int x = 0; x < FLASH_VEC; x++) {
            acc0[x] = fmaf(a_k[0], b_k[x], acc0[x]);
            if (rows > 1)
                acc1[x] = fmaf(a_k[a_row], b_k[x], acc1[x]);
            if (rows > 2)
                acc2[x] = fmaf(a_k[2 * a_row], b_k[x], acc2[x]);
            if (rows > 3)
                acc3[x] = fmaf(a_k[3 * a_row], b_k[x], acc3[x]);
            if (rows > 4)
                acc4[x] = fmaf(a_k[4 * a_row], b_k[x], acc4[x]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int x = 0; x < FLASH_VEC; x++)
            c[r * ldc + x] = acc[r][x];
}

/* The columns of `rows` rows starting at row i. */
static inline __attribute__((always_inline)) void gemm_rows(int rows, int64_t n, int64_t k,
                                                            const float *a, int64_t a_row,
                                                            int64_t a_col, const float *b,
                                                            int64_t ldb, float *c, int64_t ldc,
                                                            int accumulate)
{
    for (int64_t x = 0; x < n; x += FLASH_VEC)
        gemm_block(rows, k, a, a_row, a_col, b + x, ldb, c + x, ldc, accumulate);
}

// c (m, n); a (m, k); b (k, n)
static void gemm_portable(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_row,
                          int64_t a_col, const float *b, int64_t ldb, float *c, int64_t ldc,
                          int accumulate)
{
    for (int64_t i = 0; i < m; i += GEMM_ROWS) {
        const float *a_i = a + i * a_row;
        float *c_i = c + i * ldc;
        switch (m - i < GEMM_ROWS ? m - i : GEMM_ROWS) {
        case 1: gemm_rows(1, n, k, a_i, a_row, a_col, b, ldb, c_i, ldc, accumulate); break;
        case 2: gemm_rows(2, n, k, a_i, a_row, a_col, b, ldb, c_i, ldc, accumulate); break;
        case 3: gemm_rows(3, n, k, a_i, a_row, a_col, b, ldb, c_i, ldc, accumulate); break;
        case 4: gemm_rows(4, n, k, a_i, a_row, a_col, b, ldb, c_i, ldc, accumulate); break;
        default: gemm_rows(5, n, k, a_i, a_row, a_col, b, ldb, c_i, ldc, accumulate); break;
        }
    }
}

// x (width)
static float exp_row_portable(float *x, int64_t n, int64_t width, float shift)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = exp_fast(x[j] - shift);
    for (int64_t j = n; j < width; j++)
        x[j] = 0.0f;
    return row_sum(x, width);
}

const flash_kernels flash_kernels_portable = {
    .name = "portable",
    .gemm = gemm_portable,
    .exp_row = exp_row_portable,
};
