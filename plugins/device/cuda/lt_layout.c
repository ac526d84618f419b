/* The row-major to column-major mapping of lt_layout.h. */
#include "lt_layout.h"

void lt_problem_of(const gb_matmul_args *args, int64_t batch, int64_t stride_a,
                   int64_t stride_b, int64_t stride_c, lt_problem *out)
{
    const uint64_t m = (uint64_t)args->m, n = (uint64_t)args->n, k = (uint64_t)args->k;
    out->m = n;
    out->n = m;
    out->k = k;
    out->batch = batch > 1 ? batch : 1;
    /* gearbox's B: (k, n) row-major is (n, k) column-major; (n, k) when trans_b is (k, n) */
    out->trans_a = args->trans_b != 0;
    out->a = (lt_matrix){out->trans_a ? k : n, out->trans_a ? n : k, args->ldb, stride_b};
    /* gearbox's A: (m, k) row-major is (k, m) column-major; (k, m) when trans_a is (m, k) */
    out->trans_b = args->trans_a != 0;
    out->b = (lt_matrix){out->trans_b ? m : k, out->trans_b ? k : m, args->lda, stride_a};
    out->d = (lt_matrix){n, m, args->ldc, stride_c};
}
