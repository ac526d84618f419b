/* Rows of activations in f32, bf16 or f16, seen as f32 by the CPU kernels (the device's
 * and the attention plugins').
 *
 * Every kernel computes in f32 and has one code path for the three activation types: it
 * reads a row through dtype_read_row(), which hands back the row itself when it is f32
 * and otherwise widens it into a scratch row the caller owns, computes into the row
 * dtype_write_row() hands out (again the row itself for f32), and stores it with
 * dtype_store_row(), which narrows a 16-bit row and does nothing for f32 (dtype_update_row
 * does the same for outputs that accumulate). So the f32
 * path copies nothing and keeps its bits. Conversions are gearbox/convert.h's: widening
 * is exact, narrowing rounds to nearest even. Nothing here allocates or threads.
 */
#ifndef GB_KERNELS_CPU_DTYPE_ROWS_H
#define GB_KERNELS_CPU_DTYPE_ROWS_H

#include <stdint.h>

#include "gearbox/convert.h"
#include "gearbox/tensor.h"

/* 1 for the activation types the CPU kernels compute: f32, bf16 and f16. */
static inline int dtype_is_activation(gb_dtype dtype)
{
    return dtype == GB_F32 || dtype == GB_BF16 || dtype == GB_F16;
}

/* Element `offset` of a buffer of `dtype`. */
static inline void *dtype_at(const void *base, gb_dtype dtype, int64_t offset)
{
    return (char *)base + offset * (int64_t)gb_dtype_size(dtype);
}

/* dst[i] = src[i] widened to f32, for a bf16 or f16 row. */
// dst, src (n)
static inline void dtype_widen(float *dst, const void *src, gb_dtype dtype, int64_t n)
{
    const uint16_t *h = src;
    if (dtype == GB_BF16)
        for (int64_t i = 0; i < n; i++)
            dst[i] = gb_f32_from_bf16(h[i]);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = gb_f32_from_f16(h[i]);
}

/* dst[i] = src[i] rounded to bf16 or f16. */
// dst, src (n)
static inline void dtype_narrow(void *dst, const float *src, gb_dtype dtype, int64_t n)
{
    uint16_t *h = dst;
    if (dtype == GB_BF16)
        for (int64_t i = 0; i < n; i++)
            h[i] = gb_bf16_from_f32(src[i]);
    else
        for (int64_t i = 0; i < n; i++)
            h[i] = gb_f16_from_f32(src[i]);
}

/* Elements offset .. offset+n-1 of `src` as f32: in place for f32, else widened into
 * `scratch` (n floats). */
static inline const float *dtype_read_row(const void *src, gb_dtype dtype, int64_t offset,
                                          int64_t n, float *scratch)
{
    if (dtype == GB_F32)
        return (const float *)src + offset;
    dtype_widen(scratch, dtype_at(src, dtype, offset), dtype, n);
    return scratch;
}

/* Where to compute elements offset.. of the output `dst`: the row itself for f32, else
 * `scratch`; dtype_store_row() puts it in place. */
static inline float *dtype_write_row(void *dst, gb_dtype dtype, int64_t offset, float *scratch)
{
    return dtype == GB_F32 ? (float *)dst + offset : scratch;
}

/* Elements offset .. offset+n-1 of `dst` to accumulate into: the row itself for f32, else
 * widened into `scratch`; dtype_store_row() puts the sums in place. */
static inline float *dtype_update_row(void *dst, gb_dtype dtype, int64_t offset, int64_t n,
                                      float *scratch)
{
    if (dtype == GB_F32)
        return (float *)dst + offset;
    dtype_widen(scratch, dtype_at(dst, dtype, offset), dtype, n);
    return scratch;
}

/* Stores n elements computed in the row dtype_write_row() handed out: nothing to do for
 * f32, else narrowed into dst from element `offset` on. */
static inline void dtype_store_row(void *dst, gb_dtype dtype, int64_t offset, const float *row,
                                   int64_t n)
{
    if (dtype != GB_F32)
        dtype_narrow(dtype_at(dst, dtype, offset), row, dtype, n);
}

#endif /* GB_KERNELS_CPU_DTYPE_ROWS_H */
