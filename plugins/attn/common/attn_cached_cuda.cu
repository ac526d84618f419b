/* The kernels of forward_cached on CUDA (attn_cached_cuda.cuh), built into attn/flash and
 * attn/math alike.
 *
 * Two kernels on the device's stream: one thread per element copies the new rows' keys
 * and values into the caches at rows past .. past+T-1; then a warp per query row (b, h, i)
 * runs the online softmax over the keys it sees, 0 .. past+i, one key at a time: each lane
 * sums its columns of q . k (lane, lane + 32, ...), the warp's fixed butterfly
 * (warp.cuh) adds the lanes, and every lane rescales and accumulates its own output
 * columns in registers, ATTN_CACHED_COLUMNS of them per pass (head_dim beyond 256 takes
 * more passes, the scores recomputed). f32 throughout, the views' dtype through act.cuh's
 * loads and stores; no shared memory and no workspace; the same bits run after run.
 */
#include <math.h>

#include "act.cuh"
#include "attn_cached_cuda.cuh"
#include "cuda_status.h"
#include "warp.cuh"

/* Output columns each lane accumulates per pass: 8 of them, so 256 per warp. */
#define ATTN_CACHED_LANE_COLUMNS 8
#define ATTN_CACHED_COLUMNS (GB_WARP * ATTN_CACHED_LANE_COLUMNS)

/* A (B, H, T, D) view as the kernels take it: element (b, h, t, d) is at
 * b * batch + h * head + t * row + d. */
struct attn_cached_view {
    void *data;
    int64_t batch, head, row;
};

static inline attn_cached_view attn_cached_view_of(const gb_tensor *t)
{
    return attn_cached_view{t->data, t->stride[0], t->stride[1], t->stride[2]};
}

static __device__ __forceinline__ int64_t attn_cached_at(const attn_cached_view &v, int64_t b,
                                                         int64_t h, int64_t t)
{
    return b * v.batch + h * v.head + t * v.row;
}

/* cache rows past .. past+T-1 = rows (B, H, T, D), one thread per element (n of them). */
static __global__ void attn_cached_append_kernel(attn_cached_view cache,
                                                 attn_cached_view rows, gb_dtype dtype, int64_t H, int64_t T, int64_t D,
                                                 int64_t past, int64_t n)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const int64_t d = i % D, t = i / D % T, h = i / D / T % H, b = i / D / T / H;
    gb_act_store(cache.data, dtype, attn_cached_at(cache, b, h, past + t) + d,
                 gb_act_load(rows.data, dtype, attn_cached_at(rows, b, h, t) + d));
}

/* One warp per new row r = (b, h, i) of out = softmax(q k^T * scale) v over the keys the
 * row sees. */
static __global__ void attn_cached_kernel(attn_cached_view out, attn_cached_view q,
                                          attn_cached_view k, attn_cached_view v, gb_dtype dtype, int64_t H, int64_t T,
                                   int64_t D, int64_t past, int causal, float scale)
{
    const int64_t r = blockIdx.x, b = r / (H * T), h = r / T % H, i = r % T;
    const int lane = threadIdx.x;
    const int64_t seen = causal ? past + i + 1 : past + T;
    const int64_t q_at = attn_cached_at(q, b, h, i);
    for (int64_t c0 = 0; c0 < D; c0 += ATTN_CACHED_COLUMNS) {
        float acc[ATTN_CACHED_LANE_COLUMNS] = {0.0f};
        float max = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < seen; j++) {
            const int64_t k_at = attn_cached_at(k, b, h, j), v_at = attn_cached_at(v, b, h, j);
            float part = 0.0f;
            for (int64_t d = lane; d < D; d += GB_WARP)
                part += gb_act_load(q.data, dtype, q_at + d) *
                        gb_act_load(k.data, dtype, k_at + d);
            const float score = gb_warp_sum(part) * scale;
            const float grown = fmaxf(max, score), rescale = expf(max - grown);
            const float p = expf(score - grown);
            sum = sum * rescale + p;
            for (int c = 0; c < ATTN_CACHED_LANE_COLUMNS; c++) {
                const int64_t d = c0 + lane + (int64_t)c * GB_WARP;
                const float value = d < D ? gb_act_load(v.data, dtype, v_at + d) : 0.0f;
                acc[c] = acc[c] * rescale + p * value;
            }
            max = grown;
        }
        for (int c = 0; c < ATTN_CACHED_LANE_COLUMNS; c++) {
            const int64_t d = c0 + lane + (int64_t)c * GB_WARP;
            if (d < D)
                gb_act_store(out.data, dtype, attn_cached_at(out, b, h, i) + d, acc[c] / sum);
        }
    }
}

gb_status attn_cuda_forward_cached(const gb_plugin_instance *a, const char *plugin,
                                   gb_attn_eligible_fn eligible, const gb_attn_problem *p,
                                   int64_t past, gb_tensor out, gb_tensor q, gb_tensor k,
                                   gb_tensor v, gb_tensor k_cache, gb_tensor v_cache)
{
    const gb_tensor *views[] = {&out, &q, &k, &v, &k_cache, &v_cache};
    gb_status st = gb_attn_check_cached_call(a, plugin, eligible, p, past, views);
    if (st != GB_OK)
        return st;
    const gb_host *host = a->host; /* GB_CUDA_CHECK_LAUNCH reports through it */
    cudaStream_t stream = (cudaStream_t)a->device.stream;
    const int64_t B = p->batch, H = p->heads, T = p->seq_len, D = p->head_dim;
    const int64_t n = B * H * T * D;
    const unsigned blocks = (unsigned)((n + 255) / 256);
    attn_cached_append_kernel<<<blocks, 256, 0, stream>>>(attn_cached_view_of(&k_cache),
                                                          attn_cached_view_of(&k), p->dtype, H,
                                                          T, D, past, n);
    GB_CUDA_CHECK_LAUNCH("attn_cached_append_kernel (keys)");
    attn_cached_append_kernel<<<blocks, 256, 0, stream>>>(attn_cached_view_of(&v_cache),
                                                          attn_cached_view_of(&v), p->dtype, H,
                                                          T, D, past, n);
    GB_CUDA_CHECK_LAUNCH("attn_cached_append_kernel (values)");
    attn_cached_kernel<<<(unsigned)(B * H * T), GB_WARP, 0, stream>>>(
        attn_cached_view_of(&out), attn_cached_view_of(&q), attn_cached_view_of(&k_cache),
        attn_cached_view_of(&v_cache), p->dtype, H, T, D, past, (int)p->causal,
        1.0f / sqrtf((float)D));
    GB_CUDA_CHECK_LAUNCH("attn_cached_kernel (a warp per new row)");
    return GB_OK;
}
