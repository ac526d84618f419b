/* The part of cpu_kernels' gemm that every build shares: c walked in blocks of GEMM_ROWS
 * rows, each block's row count a constant so that the build's gemm_rows() is inlined and
 * unrolled for it. Included by each kernels_*.c once it has defined GEMM_ROWS (5 or 6)
 * and
 *   gemm_rows(rows, n, k, a, a_row, a_col, b, ldb, c, ldc, accumulate)
 * (all n columns of `rows` rows), or, where one block of outputs is GEMM_BLOCK_COLS
 * columns wide, gemm_block() with the same arguments but k first in place of n, from
 * which gemm_rows() is defined here. Defines gemm_row_blocks, the build's .gemm.
 */
#ifndef GB_KERNELS_GEMM_BLOCKS_H
#define GB_KERNELS_GEMM_BLOCKS_H

#include <stdint.h>

#if GEMM_ROWS != 5 && GEMM_ROWS != 6
#error "gemm_row_blocks unrolls blocks of 5 or 6 rows"
#endif

#ifdef GEMM_BLOCK_COLS
/* The columns of `rows` rows, one block at a time. */
static inline __attribute__((always_inline)) void gemm_rows(int rows, int64_t n, int64_t k,
                                                            const float *a, int64_t a_row,
                                                            int64_t a_col, const float *b,
                                                            int64_t ldb, float *c, int64_t ldc,
                                                            int accumulate)
{
    for (int64_t x = 0; x < n; x += GEMM_BLOCK_COLS)
        gemm_block(rows, k, a, a_row, a_col, b + x, ldb, c + x, ldc, accumulate);
}
#endif

// c (m, n); a (m, k); b (k, n)
static void gemm_row_blocks(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_row,
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
#if GEMM_ROWS == 6
        case 5: gemm_rows(5, n, k, a_i, a_row, a_col, b, ldb, c_i, ldc, accumulate); break;
#endif
        default:
            gemm_rows(GEMM_ROWS, n, k, a_i, a_row, a_col, b, ldb, c_i, ldc, accumulate);
            break;
        }
    }
}

#endif /* GB_KERNELS_GEMM_BLOCKS_H */
