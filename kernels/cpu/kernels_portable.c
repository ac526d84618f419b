/* The shared CPU kernels in portable C (see cpu_kernels.h for the contract), and the
 * run-time choice between the builds.
 *
 * Written for the auto-vectoriser: fixed-size blocks of GEMM_ROWS x CPU_VEC
 * accumulators, fmaf and no reassociation, so -O3 keeps each block in vector registers on
 * whatever -march the build targets, and the scalar fallback computes the same bits.
 * Without hardware FMA (a build with -Dnative=false running on a CPU without AVX2),
 * fmaf is a libm call and this path is slow but still exact.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "pointwise.h"
#include "rowreduce.h"

/* Rows of c computed together: 5 x 16 accumulators are 10 AVX2 registers, and with the
 * 5 broadcasts of a they fill the 16 without spilling. */
#define GEMM_ROWS 5

/* One block of `rows` (1 .. GEMM_ROWS) x CPU_VEC outputs, inlined with a constant
 * `rows` so the compiler unrolls it. One named array per row with the CPU_VEC loop
 * innermost is the shape GCC keeps in registers (and meson.build turns off unroll-and-jam,
 * which would interleave two k iterations and spill). */
static inline __attribute__((always_inline)) void gemm_block(int rows, int64_t k,
                                                             const float *a, int64_t a_row,
                                                             int64_t a_col, const float *b,
                                                             int64_t ldb, float *c,
                                                             int64_t ldc, int accumulate)
{
    float acc0[CPU_VEC], acc1[CPU_VEC], acc2[CPU_VEC], acc3[CPU_VEC], acc4[CPU_VEC];
    float *acc[GEMM_ROWS] = {acc0, acc1, acc2, acc3, acc4};
    for (int r = 0; r < rows; r++)
        for (int x = 0; x < CPU_VEC; x++)
            acc[r][x] = accumulate ? c[r * ldc + x] : 0.0f;
    for (int64_t kk = 0; kk < k; kk++) {
        const float *b_k = b + kk * ldb, *a_k = a + kk * a_col;
        for (int x = 0; x < CPU_VEC; x++) {
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
        for (int x = 0; x < CPU_VEC; x++)
            c[r * ldc + x] = acc[r][x];
}

#define GEMM_BLOCK_COLS CPU_VEC
#include "gemm_blocks.h"

// x (width)
static float exp_row_portable(float *x, int64_t n, int64_t width, float shift)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = gb_exp_fast(x[j] - shift);
    for (int64_t j = n; j < width; j++)
        x[j] = 0.0f;
    return row_sum(x, width);
}

/* Square blocks of 16: each row of a block is one cache line of dst, and the 16 lines of
 * src it reads stay in L1 while the block is written. */
// dst (rows, cols); src (cols, rows)
static void transpose_portable(float *dst, int64_t ldd, const float *src, int64_t lds,
                               int64_t rows, int64_t cols)
{
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        const int64_t r1 = r0 + 16 < rows ? r0 + 16 : rows;
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            const int64_t c1 = c0 + 16 < cols ? c0 + 16 : cols;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++)
                    dst[r * ldd + c] = src[c * lds + r];
        }
    }
}

const cpu_kernels cpu_kernels_portable = {
    .name = "portable",
    .gemm_rows = GEMM_ROWS,
    .gemm = gemm_row_blocks,
    .exp_row = exp_row_portable,
    .max_row = row_max,
    .gelu_forward = gelu_forward_loop,
    .gelu_backward = gelu_backward_loop,
    .transpose = transpose_portable,
};

const cpu_kernels *cpu_kernels_find(const char *name)
{
    if (strcmp(name, cpu_kernels_portable.name) == 0)
        return &cpu_kernels_portable;
#ifdef CPU_KERNELS_X86
    __builtin_cpu_init();
    if (strcmp(name, cpu_kernels_avx512.name) == 0)
        return __builtin_cpu_supports("avx512f") ? &cpu_kernels_avx512 : NULL;
    if (strcmp(name, cpu_kernels_avx2.name) == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                   ? &cpu_kernels_avx2 : NULL;
#endif
    return NULL;
}

int cpu_feature_injected(const char *feature)
{
    const char *list = getenv("GEARBOX_CPU_FEATURES");
    if (!list || !*list)
        return -1;
    size_t n = strlen(feature);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, feature, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* Whether this CPU (or GEARBOX_CPU_FEATURES) runs 512-bit operations as two halves. */
static int avx512_split(void)
{
    const int injected = cpu_feature_injected("avx512_split");
    if (injected >= 0)
        return injected;
#ifdef CPU_KERNELS_X86
    __builtin_cpu_init();
    return __builtin_cpu_is("amdfam19h");
#else
    return 0;
#endif
}

/* Whether cpu_kernels_best may take the set `name` (cpu_kernels_find then asks the CPU). */
static int wanted(const char *name)
{
    if (strcmp(name, "avx512") == 0)
        return cpu_feature_injected("avx512f") != 0 && !avx512_split();
    return cpu_feature_injected("avx2") != 0 && cpu_feature_injected("fma") != 0;
}

const cpu_kernels *cpu_kernels_best(void)
{
    static const char *const fastest_first[] = {"avx512", "avx2"};
    for (size_t i = 0; i < sizeof fastest_first / sizeof fastest_first[0]; i++) {
        const cpu_kernels *k = wanted(fastest_first[i]) ? cpu_kernels_find(fastest_first[i]) : NULL;
        if (k)
            return k;
    }
    return &cpu_kernels_portable;
}
