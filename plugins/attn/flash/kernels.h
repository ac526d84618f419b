/* The inner kernels of attn/flash: a small matrix product on packed tiles and the masked
 * exponential of a row of scores, in two builds picked at run time.
 *
 * kernels_portable.c is plain C that the compiler vectorises for whatever -march the
 * project is built with; kernels_avx512.c uses AVX-512F intrinsics and is compiled with
 * its own -mavx512f, so a build for a generic x86-64 still has it for the machines that
 * can run it. Both perform the same float operations in the same order (each output of
 * the product is one fma chain over k; sums fold 16 lanes in rowreduce.h's tree; the
 * exponential is pointwise.h's exp_fast), so they give identical bits: the choice
 * changes speed, never results. Tiling, masks and the softmax bookkeeping live in cpu.c.
 */
#ifndef GB_ATTN_FLASH_KERNELS_H
#define GB_ATTN_FLASH_KERNELS_H

#include <stdint.h>

/* Tile widths (block_k, padded head_dim) are multiples of this many floats. */
#define FLASH_VEC 16

typedef struct flash_kernels {
    const char *name;
    /* c = a b, or c += a b when `accumulate`. b and c are row-major with leading
     * dimensions and n is a multiple of FLASH_VEC; element (i, kk) of a is
     * a[i * a_row + kk * a_col], so a may be read transposed (a_row 1, a_col its leading
     * dimension) and never needs a copy. c[i][x] is the fma chain over kk = 0 .. k-1 of
     * a(i, kk) b[kk][x], starting from c[i][x] or 0. */
    // c (m, n); a (m, k); b (k, n)
    void (*gemm)(int64_t m, int64_t n, int64_t k, const float *a, int64_t a_row, int64_t a_col,
                 const float *b, int64_t ldb, float *c, int64_t ldc, int accumulate);
    /* x[j] = exp(x[j] - shift) for j < n and 0 for n <= j < width (a multiple of
     * FLASH_VEC); returns the sum of the width results. */
    // x (width)
    float (*exp_row)(float *x, int64_t n, int64_t width, float shift);
} flash_kernels;

extern const flash_kernels flash_kernels_portable;
#ifdef FLASH_HAVE_AVX512
extern const flash_kernels flash_kernels_avx512;
#endif

#endif /* GB_ATTN_FLASH_KERNELS_H */
