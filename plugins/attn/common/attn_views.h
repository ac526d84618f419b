/* What the CPU attention plugins (attn/math, attn/mem_efficient, attn/flash) share: the
 * problem and view checks of the toolkit's gearbox/toolkit/attn_checks.h (which the CUDA
 * plugins share too), row addressing of a (B, H, T, D) view, and the copies between a
 * view's rows and the packed tiles the kernels of cpu_kernels.h multiply
 * (kernels/cpu/). Header-only, in plugins/attn/common/ like the other kinds' shared code.
 *
 * Views may have any strides as long as head_dim is contiguous (stride[3] == 1), which
 * covers the core's packed (B, T, 3, H, D) projection. The kernels compute in f32: for a
 * bf16 or f16 problem, attn_read_f32() widens each view they read into a contiguous f32
 * copy in the workspace, attn_write_f32() gives each output an f32 copy there, and
 * attn_store_f32() rounds it into the view (dtype_rows.h); for f32 all three hand the
 * view through untouched. Nothing here allocates or prints.
 */
#ifndef GB_ATTN_VIEWS_H
#define GB_ATTN_VIEWS_H

#include <string.h>

#include "gearbox/toolkit/attn_checks.h"
#include "dtype_rows.h"
#include "gearbox/attn.h"
#include "omp_team.h"

/* 1 when `p` is a problem the CPU plugins can compute; else 0 with a reason that names
 * `plugin` and what to change. */
static inline int attn_problem_ok(const char *plugin, const gb_attn_problem *p, char *reason,
                                  size_t reason_cap)
{
    return gb_attn_problem_ok_on(plugin, "cpu", p, reason, reason_cap);
}

/* n rounded up to a multiple of `to`. */
static inline int64_t attn_round_up(int64_t n, int64_t to)
{
    return (n + to - 1) / to * to;
}

/* One tile of a thread's scratch: its size, and where its start goes. */
typedef struct attn_tile {
    int64_t floats;
    float **start;
} attn_tile;

/* Lays n tiles out from `base`, each rounded up to 16 floats so that every tile starts on
 * a 64-byte boundary (NULL starts when base is NULL, which only counts); returns the
 * floats they take. */
static inline int64_t attn_lay_out(const attn_tile *tiles, size_t n, float *base)
{
    int64_t used = 0;
    for (size_t i = 0; i < n; i++) {
        *tiles[i].start = base ? base + used : NULL;
        used += attn_round_up(tiles[i].floats, 16);
    }
    return used;
}

static inline int64_t attn_min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Row (b, h, s) of a (B, H, T, D) f32 view: D contiguous floats. */
static inline float *attn_row(const gb_tensor *t, int64_t b, int64_t h, int64_t s)
{
    return (float *)t->data + b * t->stride[0] + h * t->stride[1] + s * t->stride[2];
}

/* Keys a query at position `t` sees among keys k0 .. k0+nk-1 (a prefix of them). */
static inline int64_t attn_visible_keys(int causal, int64_t t, int64_t k0, int64_t nk)
{
    if (!causal)
        return nk;
    int64_t n = t - k0 + 1;
    return n < 0 ? 0 : n > nk ? nk : n;
}

/* Rows s0 .. s0+n-1 of head (b, h) into dst (n, ld), columns D .. ld-1 zeroed so that
 * products over the padded width add nothing. */
// dst (n, ld)
static inline void attn_pack_rows(float *dst, int64_t ld, const gb_tensor *t, int64_t b,
                                  int64_t h, int64_t s0, int64_t n, int64_t D)
{
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst + i * ld, attn_row(t, b, h, s0 + i), (size_t)D * sizeof(float));
        memset(dst + i * ld + D, 0, (size_t)(ld - D) * sizeof(float));
    }
}

/* The same rows transposed and times `scale`: dst[d][j] = scale * row j's element d;
 * columns n .. ld-1 zeroed. Sixteen rows at a time, so that each store of the inner loop
 * lands in the cache line the previous one filled. */
// dst (D, ld)
static inline void attn_pack_columns(float *dst, int64_t ld, const gb_tensor *t, int64_t b,
                                     int64_t h, int64_t s0, int64_t n, int64_t D, float scale)
{
    const int64_t stride = t->stride[2];
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        const int64_t rows = n - j0 < 16 ? n - j0 : 16;
        const float *src = attn_row(t, b, h, s0 + j0);
        for (int64_t d = 0; d < D; d++)
            for (int64_t j = 0; j < rows; j++)
                dst[d * ld + j0 + j] = src[j * stride + d] * scale;
    }
    for (int64_t d = 0; d < D; d++)
        memset(dst + d * ld + n, 0, (size_t)(ld - n) * sizeof(float));
}

/* Rows s0 .. s0+n-1 of head (b, h) = the first D columns of src times `scale`. */
// src (n, ld)
static inline void attn_unpack_rows(const gb_tensor *t, int64_t b, int64_t h, int64_t s0,
                                    int64_t n, const float *src, int64_t ld, int64_t D,
                                    float scale)
{
    for (int64_t i = 0; i < n; i++) {
        float *row = attn_row(t, b, h, s0 + i);
        for (int64_t d = 0; d < D; d++)
            row[d] = src[i * ld + d] * scale;
    }
}

/* ---- 16-bit problems ------------------------------------------------------------------ */

/* Workspace floats for `count` f32 copies of (B, H, T, D) views, each rounded up to a
 * 64-byte line: 0 for an f32 problem, whose views are used in place. */
static inline int64_t attn_wide_floats(const gb_attn_problem *p, int count)
{
    if (p->dtype == GB_F32)
        return 0;
    return count * attn_round_up(p->batch * p->heads * p->seq_len * p->head_dim, 16);
}

/* A contiguous f32 (B, H, T, D) view of the problem's shape at *cursor, which moves past
 * it. */
static inline gb_tensor attn_take_f32(const gb_attn_problem *p, float **cursor)
{
    const int64_t B = p->batch, H = p->heads, T = p->seq_len, D = p->head_dim;
    gb_tensor t = {.data = *cursor, .dtype = GB_F32, .ndim = 4,
                   .shape = {B, H, T, D}, .stride = {H * T * D, T * D, D, 1}};
    *cursor += attn_wide_floats(p, 1);
    return t;
}

/* The f32 view the kernels read for input `t`: t itself for f32, else t widened into a
 * copy taken from *cursor. */
static inline gb_tensor attn_read_f32(const gb_tensor *t, const gb_attn_problem *p,
                                      float **cursor, int threads)
{
    if (t->dtype == GB_F32)
        return *t;
    const gb_tensor wide = attn_take_f32(p, cursor);
    const int64_t H = p->heads, T = p->seq_len, D = p->head_dim;
    const int64_t rows = p->batch * H * T;
    #pragma omp parallel for schedule(static) num_threads(gb_omp_team(threads)) if (rows * D >= 16384)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t b = r / (H * T), h = r / T % H, s = r % T;
        const int64_t at = b * t->stride[0] + h * t->stride[1] + s * t->stride[2];
        dtype_widen(attn_row(&wide, b, h, s), dtype_at(t->data, t->dtype, at), t->dtype, D);
    }
    return wide;
}

/* The f32 view the kernels write for output `t`: t itself for f32, else a copy taken
 * from *cursor, for attn_store_f32() to round into t. */
static inline gb_tensor attn_write_f32(const gb_tensor *t, const gb_attn_problem *p,
                                       float **cursor)
{
    return t->dtype == GB_F32 ? *t : attn_take_f32(p, cursor);
}

/* Output `t` = its f32 copy `wide` rounded; nothing to do for f32. */
static inline void attn_store_f32(const gb_tensor *t, const gb_tensor *wide, int threads)
{
    if (t->dtype == GB_F32)
        return;
    const int64_t H = t->shape[1], T = t->shape[2], D = t->shape[3];
    const int64_t rows = t->shape[0] * H * T;
    #pragma omp parallel for schedule(static) num_threads(gb_omp_team(threads)) if (rows * D >= 16384)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t b = r / (H * T), h = r / T % H, s = r % T;
        const int64_t at = b * t->stride[0] + h * t->stride[1] + s * t->stride[2];
        dtype_narrow(dtype_at(t->data, t->dtype, at), attn_row(wide, b, h, s), t->dtype, D);
    }
}

#endif /* GB_ATTN_VIEWS_H */
