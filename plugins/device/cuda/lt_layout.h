/* How a gearbox matmul (row-major, gearbox/device.h) is asked of cuBLASLt (column-major):
 * a pure function of the arguments, kept apart from the CUDA calls so a CPU test
 * (tests/gpu/test_lt_layout.c) checks it against a naive column-major product.
 *
 * The swap: a row-major (r, c) matrix with row stride ld is, read column-major, its
 * transpose, a (c, r) matrix with leading dimension ld. So gearbox's
 *     C (m, n) = op(A) (m, k) @ op(B) (k, n)        row-major
 * is, read column-major,
 *     C^T (n, m) = op(B)^T (n, k) @ op(A)^T (k, m)   column-major,
 * and cuBLASLt computes it with gearbox's B as its first operand and A as its second,
 * m and n exchanged, C's memory unchanged:
 *   cuBLAS A = gearbox B: stored (k, n) row-major = (n, k) column-major, ld ldb: no op;
 *              with trans_b stored (n, k) row-major = (k, n) column-major: op T.
 *   cuBLAS B = gearbox A: stored (m, k) row-major = (k, m) column-major, ld lda: no op;
 *              with trans_a stored (k, m) row-major = (m, k) column-major: op T.
 *   cuBLAS C = D = gearbox C: (n, m) column-major, ld ldc.
 * A bias of gearbox's (n), added to every row of C, is then cuBLASLt's bias over the rows
 * of D (its length must be D's row count, n), and the batch strides swap like A and B.
 */
#ifndef GB_DEVICE_CUDA_LT_LAYOUT_H
#define GB_DEVICE_CUDA_LT_LAYOUT_H

#include <stdint.h>

#include "gearbox/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One operand as cuBLASLt's matrix layout describes it: stored column-major. */
typedef struct lt_matrix {
    uint64_t rows, cols;   /* as stored, before the op */
    int64_t ld;            /* leading dimension, elements */
    int64_t batch_stride;  /* elements between consecutive matrices of a batch */
} lt_matrix;

typedef struct lt_problem {
    uint64_t m, n, k;      /* cuBLAS's: D (m, n) = op(A) (m, k) @ op(B) (k, n) */
    int trans_a, trans_b;  /* cuBLAS's ops: 1 transposes */
    lt_matrix a, b, d;     /* cuBLAS's A (gearbox's B), B (gearbox's A), C and D */
    int64_t batch;         /* products, at least 1 */
} lt_problem;

/* `args` with its batch (at least 1) and strides (elements) as cuBLASLt sees them. */
void lt_problem_of(const gb_matmul_args *args, int64_t batch, int64_t stride_a,
                   int64_t stride_b, int64_t stride_c, lt_problem *out);

#ifdef __cplusplus
}
#endif
#endif /* GB_DEVICE_CUDA_LT_LAYOUT_H */
