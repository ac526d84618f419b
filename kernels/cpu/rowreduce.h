/* Reductions over one contiguous row with a fixed summation order, for the CPU kernels.
 *
 * Without -ffast-math the compiler may not reassociate a float sum, so a plain
 * `s += x[i]` loop runs one add at a time. These helpers keep LANES independent
 * partial results (element i goes to lane i % LANES), which the compiler maps onto one
 * vector register, and fold the lanes in a fixed tree at the end. The order depends on
 * n only, never on threads or alignment, so results are bit-reproducible; it is
 * kernels/common/reduce_order.h's, which the CUDA kernels follow too. Rows split
 * across threads are not handled here: callers give each thread whole rows or chunks
 * and combine the chunks in index order themselves.
 */
#ifndef GB_KERNELS_CPU_ROWREDUCE_H
#define GB_KERNELS_CPU_ROWREDUCE_H

#include <math.h>
#include <stdint.h>

#include "reduce_order.h"

#define ROW_LANES GB_ROW_LANES

/* `step` for every k in [0, n), with j = k % ROW_LANES the lane whose partial result
 * element k goes to: whole groups of ROW_LANES first (one vector step each), then the
 * tail. Every reduction below is this loop around its own step. */
#define ROW_EACH_ELEMENT(n, j, k, step)                                                    \
    do {                                                                                   \
        int64_t group_ = 0;                                                                \
        for (; group_ + ROW_LANES <= (n); group_ += ROW_LANES)                             \
            for (int j = 0; j < ROW_LANES; j++) {                                          \
                const int64_t k = group_ + j;                                              \
                step;                                                                      \
            }                                                                              \
        for (int j = 0; group_ + j < (n); j++) {                                           \
            const int64_t k = group_ + j;                                                  \
            step;                                                                          \
        }                                                                                  \
    } while (0)

/* The fixed tree the lanes fold in: lane j takes in lane j + w, for w = ROW_LANES / 2
 * down to 1; the result is in lane 0. */
#define ROW_FOLD_LANES(j, w, step)                                                         \
    for (int w = ROW_LANES / 2; w > 0; w /= 2)                                             \
        for (int j = 0; j < w; j++)                                                        \
            step

static inline float fold_lanes_f32(float *acc)
{
    ROW_FOLD_LANES(j, w, acc[j] += acc[j + w]);
    return acc[0];
}

static inline double fold_lanes_f64(double *acc)
{
    ROW_FOLD_LANES(j, w, acc[j] += acc[j + w]);
    return acc[0];
}

// x (n)
static inline float row_sum(const float *x, int64_t n)
{
    float acc[ROW_LANES] = {0};
    ROW_EACH_ELEMENT(n, j, k, acc[j] += x[k]);
    return fold_lanes_f32(acc);
}

/* Sum of (x - shift)^2; with shift = mean this is n times the biased variance. */
// x (n)
static inline float row_sum_sq_dev(const float *x, float shift, int64_t n)
{
    float acc[ROW_LANES] = {0};
    ROW_EACH_ELEMENT(n, j, k, {
        const float d = x[k] - shift;
        acc[j] = fmaf(d, d, acc[j]);
    });
    return fold_lanes_f32(acc);
}

// a, b (n)
static inline float row_dot(const float *a, const float *b, int64_t n)
{
    float acc[ROW_LANES] = {0};
    ROW_EACH_ELEMENT(n, j, k, acc[j] = fmaf(a[k], b[k], acc[j]));
    return fold_lanes_f32(acc);
}

/* -INFINITY for n == 0. NaN inputs may be skipped; callers that care check the result. */
// x (n)
static inline float row_max(const float *x, int64_t n)
{
    float acc[ROW_LANES];
    for (int j = 0; j < ROW_LANES; j++)
        acc[j] = -INFINITY;
    ROW_EACH_ELEMENT(n, j, k, acc[j] = x[k] > acc[j] ? x[k] : acc[j]);
    ROW_FOLD_LANES(j, w, acc[j] = acc[j + w] > acc[j] ? acc[j + w] : acc[j]);
    return acc[0];
}

/* Sum in double of float values: for long sums (softmax denominators over a vocabulary,
 * gradient norms) where float partial sums would lose digits. */
// x (n)
static inline double row_sum_f64(const float *x, int64_t n)
{
    double acc[ROW_LANES] = {0};
    ROW_EACH_ELEMENT(n, j, k, acc[j] += (double)x[k]);
    return fold_lanes_f64(acc);
}

// x (n)
static inline double row_sum_sq_f64(const float *x, int64_t n)
{
    double acc[ROW_LANES] = {0};
    ROW_EACH_ELEMENT(n, j, k, acc[j] = fma((double)x[k], (double)x[k], acc[j]));
    return fold_lanes_f64(acc);
}

#endif /* GB_KERNELS_CPU_ROWREDUCE_H */
