/* device/cuda's row-major to column-major mapping (plugins/device/cuda/lt_layout.h), on
 * the CPU: for every transpose, padding and batch, a naive column-major product that reads
 * memory the way cuBLASLt is told to must equal gearbox's row-major product, and each
 * layout must be one cuBLASLt accepts (leading dimension at least its row count, operand
 * shapes that agree).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "lt_layout.h"

static int failures;

/* Element (r, c) of a column-major operand of the problem, after its op. */
static float op_at(const float *base, const lt_matrix *mat, int trans, int64_t batch,
                   uint64_t r, uint64_t c)
{
    const float *x = base + batch * mat->batch_stride;
    return trans ? x[c + r * mat->ld] : x[r + c * mat->ld];
}

static void check_case(int64_t m, int64_t n, int64_t k, int ta, int tb, int64_t pad,
                       int64_t batch, unsigned *seed)
{
    const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
    gb_matmul_args args = {.struct_size = sizeof args, .m = m, .n = n, .k = k,
                           .lda = a_cols + pad, .trans_a = ta, .ldb = b_cols + pad,
                           .trans_b = tb, .ldc = n + pad};
    const int64_t sa = a_rows * args.lda + 3, sb = b_rows * args.ldb + 5, sc = m * args.ldc + 7;
    float *A = malloc(sizeof(float) * (size_t)(sa * batch));
    float *B = malloc(sizeof(float) * (size_t)(sb * batch));
    float *C = calloc((size_t)(sc * batch), sizeof(float));
    for (int64_t i = 0; i < sa * batch; i++)
        A[i] = (float)(rand_r(seed) % 17) - 8.0f;
    for (int64_t i = 0; i < sb * batch; i++)
        B[i] = (float)(rand_r(seed) % 13) - 6.0f;

    lt_problem p;
    lt_problem_of(&args, batch, sa, sb, sc, &p);
    int bad = p.m != (uint64_t)n || p.n != (uint64_t)m || p.k != (uint64_t)k || p.batch != batch;
    /* what cuBLASLt requires of the layouts */
    bad |= p.a.ld < (int64_t)p.a.rows || p.b.ld < (int64_t)p.b.rows || p.d.ld < (int64_t)p.d.rows;
    bad |= (p.trans_a ? p.a.cols : p.a.rows) != p.m || (p.trans_a ? p.a.rows : p.a.cols) != p.k;
    bad |= (p.trans_b ? p.b.cols : p.b.rows) != p.k || (p.trans_b ? p.b.rows : p.b.cols) != p.n;
    bad |= p.d.rows != p.m || p.d.cols != p.n;
    /* D = op(A) op(B), column-major, as cuBLASLt would compute it */
    for (int64_t b = 0; b < batch; b++)
        for (uint64_t j = 0; j < p.n; j++)
            for (uint64_t i = 0; i < p.m; i++) {
                float acc = 0.0f;
                for (uint64_t q = 0; q < p.k; q++)
                    acc += op_at(B, &p.a, p.trans_a, b, i, q) * op_at(A, &p.b, p.trans_b, b, q, j);
                C[b * p.d.batch_stride + i + j * p.d.ld] = acc;
            }
    /* gearbox's meaning: C[i][j] = sum op(A)[i][q] op(B)[q][j], row-major */
    for (int64_t b = 0; b < batch && !bad; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float acc = 0.0f;
                for (int64_t q = 0; q < k; q++) {
                    float a = ta ? A[b * sa + q * args.lda + i] : A[b * sa + i * args.lda + q];
                    float bv = tb ? B[b * sb + j * args.ldb + q] : B[b * sb + q * args.ldb + j];
                    acc += a * bv;
                }
                bad |= C[b * sc + i * args.ldc + j] != acc;
            }
    if (bad) {
        printf("FAIL: m=%lld n=%lld k=%lld trans_a=%d trans_b=%d pad=%lld batch=%lld\n",
               (long long)m, (long long)n, (long long)k, ta, tb, (long long)pad,
               (long long)batch);
        failures++;
    }
    free(A);
    free(B);
    free(C);
}

int main(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {8, 1, 4}, {1, 9, 2}, {6, 6, 6},
                                        {13, 4, 1}};
    unsigned seed = 7;
    int cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int64_t pad = 0; pad <= 2; pad += 2)
                for (int64_t batch = 1; batch <= 3; batch += 2) {
                    check_case(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1, pad,
                               batch, &seed);
                    cases++;
                }
    printf("%d cases, %d failed\n", cases, failures);
    return failures ? 1 : 0;
}
