/* kernels/cpu: the vectorised inner loops the CPU plugins share (device/cpu and the CPU
 * attention plugins link this folder's library): a small matrix product on packed
 * tiles, the masked exponential of a row of scores (the attention plugins), and the
 * exact GELU forward and backward (the device), in one build per instruction set.
 *
 * kernels_portable.c is plain C that the compiler vectorises for whatever -march the
 * project is built with; kernels_avx2.c (AVX2 and FMA intrinsics) and kernels_avx512.c
 * (AVX-512F) are compiled with their own -m flags, so a build for a generic x86-64 still
 * has them, and cpu_kernels_best() picks one from what the CPU says at run time. All
 * three perform the same float operations in the same order (each output of the product
 * is one fma chain over k; sums fold 16 lanes in rowreduce.h's tree; the exponential and
 * GELU are pointwise.h's, operation for operation), so they give identical bits: the
 * choice changes speed, never results. Tiling, masks and softmax bookkeeping are the
 * callers'; nothing here allocates or threads.
 */
#ifndef GB_KERNELS_CPU_KERNELS_H
#define GB_KERNELS_CPU_KERNELS_H

#include <stdint.h>

/* Tile widths (the n of a product, the width of an exponential row) are multiples of
 * this many floats. */
#define CPU_VEC 16

typedef struct cpu_kernels {
    const char *name;   /* "avx512", "avx2" or "portable" */
    /* Rows of c one block of gemm computes: products of this many rows waste nothing. */
    int gemm_rows;
    /* c = a b, or c += a b when `accumulate`. b and c are row-major with leading
     * dimensions and n is a multiple of CPU_VEC; element (i, kk) of a is
     * a[i * a_row + kk * a_col], so a may be read transposed (a_row 1, a_col its leading
     * dimension) and never needs a copy. c[i][x] is the fma chain over kk = 0 .. k-1 of
     * a(i, kk) b[kk][x], starting from c[i][x] or 0. */
    // c (m, n); a (m, k); b (k, n)
    void (*gemm)(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_row, int64_t a_col,
                 const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate);
    /* x[j] = exp(x[j] - shift) for j < n and 0 for n <= j < width (a multiple of
     * CPU_VEC); returns the sum of the width results. */
    // x (width)
    float (*exp_row)(float *x, int64_t n, int64_t width, float shift);
    /* The largest of x[0 .. n), -INFINITY for n == 0 (rowreduce.h's row_max, which the
     * compiler does not vectorise); NaN inputs may be skipped. */
    // x (n)
    float (*max_row)(const float *x, int64_t n);
    /* out[i] = GELU(x[i]), the exact erf form (pointwise.h's gelu_erf). */
    // out, x (n)
    void (*gelu_forward)(float *out, const float *x, int64_t n);
    /* dx[i] = dout[i] * GELU'(x[i]); dx may alias dout. */
    // dx, x, dout (n)
    void (*gelu_backward)(float *dx, const float *x, const float *dout, int64_t n);
    /* dst[r][c] = src[c][r]: dst (rows, cols) with row stride ldd from src (cols, rows)
     * with row stride lds. */
    // dst (rows, cols); src (cols, rows)
    void (*transpose)(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                      int64_t cols);
} cpu_kernels;

extern const cpu_kernels cpu_kernels_portable;
#ifdef CPU_KERNELS_X86
extern const cpu_kernels cpu_kernels_avx2;     /* needs AVX2 and FMA */
extern const cpu_kernels cpu_kernels_avx512;   /* needs AVX-512F */
/* The AVX2 transpose, which the AVX-512 set uses too (every AVX-512F CPU has AVX2). */
void cpu_transpose_avx2(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                        int64_t cols);
#endif

/* The set called `name` ("avx512", "avx2", "portable") when this build has it and this
 * CPU runs it; NULL otherwise. */
const cpu_kernels *cpu_kernels_find(const char *name);
/* The fastest set this CPU runs: avx512, else avx2, else portable; but avx2 where
 * 512-bit operations run as two 256-bit halves (AMD's family 25, Zen 4: the 256-bit
 * blocking then does the same work in fewer cycles of its own, with registers to spare).
 * GEARBOX_CPU_FEATURES, when set, stands for the CPU's features: a set is taken only
 * where the list names what it needs, and the list's avx512_split says whether 512-bit
 * operations are split (so either width can be forced on any AVX-512 CPU). */
const cpu_kernels *cpu_kernels_best(void);
/* Whether GEARBOX_CPU_FEATURES, the feature list tests and benchmarks inject in place
 * of the CPU's own, names `feature`; -1 where it is unset. */
int cpu_feature_injected(const char *feature);

#endif /* GB_KERNELS_CPU_KERNELS_H */
