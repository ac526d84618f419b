/* Attention of new query rows over a KV cache on the CPU (ABI 1.7's forward_cached), the
 * compute every CPU attention plugin shares: sampling asks for one new row per sequence at
 * a time, where the tiles of a training forward would be all padding.
 *
 * First the new rows' keys and values are copied into the caches at rows past ..
 * past+T-1; then each query row (b, h, i) runs the online softmax over the keys it sees,
 * 0 .. past+i, 64 keys at a time: their scores, the running maximum and sum, the
 * accumulator rescaled when the maximum grows. Everything is f32 whatever the views'
 * dtype (16-bit rows are widened 64 elements at a time) and lives on the stack: head_dim
 * is taken 64 output columns at a time (the scores are recomputed per 64 columns, once
 * for GPT-2's head_dim of 64), so the call needs no workspace for any head_dim. Rows are
 * independent, so the result does not depend on the thread count. Header-only.
 */
#ifndef GB_ATTN_CACHED_CPU_H
#define GB_ATTN_CACHED_CPU_H

#include <math.h>
#include <string.h>

#include "dtype_rows.h"
#include "gearbox/attn.h"
#include "omp_team.h"

/* Keys scored, and head_dim elements widened or accumulated, at a time. */
#define ATTN_CACHED_CHUNK 64

/* What forward_cached queues: the problem and every view by value. */
typedef struct attn_cached_call {
    gb_attn_problem p;
    int64_t past;
    gb_tensor out, q, k, v, k_cache, v_cache;
    int threads;
} attn_cached_call;

/* The element offset of row (b, h, s) of a view. */
static inline int64_t attn_cached_at(const gb_tensor *t, int64_t b, int64_t h, int64_t s)
{
    return b * t->stride[0] + h * t->stride[1] + s * t->stride[2];
}

/* Copies rows 0 .. T-1 of `rows` (B, H, T, D) into rows past .. past+T-1 of `cache`. */
static inline void attn_cached_append(const gb_tensor *cache, const gb_tensor *rows,
                                      int64_t past)
{
    const size_t bytes = (size_t)rows->shape[3] * gb_dtype_size(rows->dtype);
    for (int64_t b = 0; b < rows->shape[0]; b++)
        for (int64_t h = 0; h < rows->shape[1]; h++)
            for (int64_t t = 0; t < rows->shape[2]; t++)
                memcpy(dtype_at(cache->data, cache->dtype, attn_cached_at(cache, b, h, past + t)),
                       dtype_at(rows->data, rows->dtype, attn_cached_at(rows, b, h, t)), bytes);
}

/* q . k over head_dim D, widening both 64 elements at a time. */
static inline float attn_cached_dot(const gb_tensor *q, int64_t q_at, const gb_tensor *k,
                                    int64_t k_at, int64_t D)
{
    float qs[ATTN_CACHED_CHUNK], ks[ATTN_CACHED_CHUNK], sum = 0.0f;
    for (int64_t d0 = 0; d0 < D; d0 += ATTN_CACHED_CHUNK) {
        const int64_t n = D - d0 < ATTN_CACHED_CHUNK ? D - d0 : ATTN_CACHED_CHUNK;
        const float *qr = dtype_read_row(q->data, q->dtype, q_at + d0, n, qs);
        const float *kr = dtype_read_row(k->data, k->dtype, k_at + d0, n, ks);
        for (int64_t d = 0; d < n; d++)
            sum += qr[d] * kr[d];
    }
    return sum;
}

/* Columns d0 .. d0+n-1 of output row (b, h, i): the online softmax over the `seen` keys. */
static inline void attn_cached_columns(const attn_cached_call *c, int64_t b, int64_t h, int64_t i,
                                       int64_t seen, int64_t d0, int64_t n)
{
    const int64_t D = c->p.head_dim, q_at = attn_cached_at(&c->q, b, h, i);
    const float scale = 1.0f / sqrtf((float)D);
    float acc[ATTN_CACHED_CHUNK] = {0}, scores[ATTN_CACHED_CHUNK], vs[ATTN_CACHED_CHUNK];
    float max = -INFINITY, sum = 0.0f;
    for (int64_t j0 = 0; j0 < seen; j0 += ATTN_CACHED_CHUNK) {
        const int64_t nj = seen - j0 < ATTN_CACHED_CHUNK ? seen - j0 : ATTN_CACHED_CHUNK;
        float block_max = -INFINITY;
        for (int64_t j = 0; j < nj; j++) {
            scores[j] = scale * attn_cached_dot(&c->q, q_at, &c->k_cache,
                                                attn_cached_at(&c->k_cache, b, h, j0 + j), D);
            block_max = fmaxf(block_max, scores[j]);
        }
        const float grown = fmaxf(max, block_max), rescale = expf(max - grown);
        sum *= rescale;
        for (int64_t d = 0; d < n; d++)
            acc[d] *= rescale;
        max = grown;
        for (int64_t j = 0; j < nj; j++) {
            const float p = expf(scores[j] - max);
            const int64_t v_at = attn_cached_at(&c->v_cache, b, h, j0 + j) + d0;
            const float *vr = dtype_read_row(c->v_cache.data, c->v_cache.dtype, v_at, n, vs);
            sum += p;
            for (int64_t d = 0; d < n; d++)
                acc[d] += p * vr[d];
        }
    }
    for (int64_t d = 0; d < n; d++)
        acc[d] /= sum;
    float *row = dtype_write_row(c->out.data, c->out.dtype, attn_cached_at(&c->out, b, h, i) + d0,
                                 vs);
    memcpy(row, acc, (size_t)n * sizeof *row);
    dtype_store_row(c->out.data, c->out.dtype, attn_cached_at(&c->out, b, h, i) + d0, row, n);
}

/* forward_cached's compute, run in stream order (gb_device_run_host): the append, then
 * every new row. */
static inline gb_status attn_cached_compute(void *arg)
{
    const attn_cached_call *c = arg;
    attn_cached_append(&c->k_cache, &c->k, c->past);
    attn_cached_append(&c->v_cache, &c->v, c->past);
    const int64_t H = c->p.heads, T = c->p.seq_len, D = c->p.head_dim;
    const int64_t rows = c->p.batch * H * T, keys = c->past + T;
    #pragma omp parallel for schedule(static) num_threads(gb_omp_team(c->threads)) \
        if (rows * keys * D >= 65536)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t b = r / (H * T), h = r / T % H, i = r % T;
        const int64_t seen = c->p.causal ? c->past + i + 1 : keys;
        for (int64_t d0 = 0; d0 < D; d0 += ATTN_CACHED_CHUNK)
            attn_cached_columns(c, b, h, i, seen, d0,
                                D - d0 < ATTN_CACHED_CHUNK ? D - d0 : ATTN_CACHED_CHUNK);
    }
    return GB_OK;
}

#endif /* GB_ATTN_CACHED_CPU_H */
