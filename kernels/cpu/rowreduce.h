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

static inline float fold_lanes_f32(float *acc)
{
    for (int width = ROW_LANES / 2; width > 0; width /= 2)
        for (int j = 0; j < width; j++)
            acc[j] += acc[j + width];
    return acc[0];
}

static inline double fold_lanes_f64(double *acc)
{
    for (int width = ROW_LANES / 2; width > 0; width /= 2)
        for (int j = 0; j < width; j++)
            acc[j] += acc[j + width];
    return acc[0];
}

// x (n)
static inline float row_sum(const float *x, int64_t n)
{
    float acc[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++)
            acc[j] += x[i + j];
    for (int j = 0; i + j < n; j++)
        acc[j] += x[i + j];
    return fold_lanes_f32(acc);
}

/* Sum of (x - shift)^2; with shift = mean this is n times the biased variance. */
// x (n)
static inline float row_sum_sq_dev(const float *x, float shift, int64_t n)
{
    float acc[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) {
            float d = x[i + j] - shift;
            acc[j] = fmaf(d, d, acc[j]);
        }
    for (int j = 0; i + j < n; j++) {
        float d = x[i + j] - shift;
        acc[j] = fmaf(d, d, acc[j]);
    }
    return fold_lanes_f32(acc);
}

// a, b (n)
static inline float row_dot(const float *a, const float *b, int64_t n)
{
    float acc[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++)
            acc[j] = fmaf(a[i + j], b[i + j], acc[j]);
    for (int j = 0; i + j < n; j++)
        acc[j] = fmaf(a[i + j], b[i + j], acc[j]);
    return fold_lanes_f32(acc);
}

/* -INFINITY for n == 0. NaN inputs may be skipped; callers that care check the result. */
// x (n)
static inline float row_max(const float *x, int64_t n)
{
    float acc[ROW_LANES];
    for (int j = 0; j < ROW_LANES; j++)
        acc[j] = -INFINITY;
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++)
            acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    for (int j = 0; i + j < n; j++)
        acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    for (int width = ROW_LANES / 2; width > 0; width /= 2)
        for (int j = 0; j < width; j++)
            acc[j] = acc[j + width] > acc[j] ? acc[j + width] : acc[j];
    return acc[0];
}

/* Sum in double of float values: for long sums (softmax denominators over a vocabulary,
 * gradient norms) where float partial sums would lose digits. */
// x (n)
static inline double row_sum_f64(const float *x, int64_t n)
{
    double acc[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++)
            acc[j] += (double)x[i + j];
    for (int j = 0; i + j < n; j++)
        acc[j] += (double)x[i + j];
    return fold_lanes_f64(acc);
}

// x (n)
static inline double row_sum_sq_f64(const float *x, int64_t n)
{
    double acc[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) {
            double v = (double)x[i + j];
            acc[j] = fma(v, v, acc[j]);
        }
    for (int j = 0; i + j < n; j++) {
        double v = (double)x[i + j];
        acc[j] = fma(v, v, acc[j]);
    }
    return fold_lanes_f64(acc);
}

#endif /* GB_KERNELS_CPU_ROWREDUCE_H */
