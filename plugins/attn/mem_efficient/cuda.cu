/* attn/mem_efficient on CUDA: attention in memory linear in T, for every shape and dtype
 * (the fallback when the tiled plugins refuse a problem). The (T, T) scores never exist:
 * one warp per row walks the keys 32 at a time (one key per lane) with the online softmax
 * of Milakov and Gimelshein, and keeps only the row's log-sum-exp for backward (Rabe and
 * Staats' scheme, as the CPU object computes it by query blocks).
 *
 * Forward: warp per query row t; lane l scores key j0 + l against q_t (q_t in shared
 * memory), the warp takes the chunk's maximum, rescales its running sum and its output
 * accumulator (lane l holds elements l, l + 32, ... of the row) and adds the chunk's
 * p_j v_j in key order. Saved: lse_t = m + log(l), B*H*T f32.
 * Backward: D_t = dO_t . O_t (workspace, B*H*T f32), then two kernels that each own what
 * they write, so nothing is accumulated with atomics: a warp per query row sums
 * dQ_t = scale sum_j dS_tj k_j, a warp per key row sums dK_j = scale sum_t dS_tj q_t and
 * dV_j = sum_t P_tj dO_t, with P_tj = exp(scale q_t . k_j - lse_t) recomputed and
 * dS_tj = P_tj (dO_t . v_j - D_t). Every sum runs in a fixed order (warp sums by a fixed
 * butterfly), so results are bit-identical run after run.
 *
 * Dtypes: f32, bf16, f16 views, widened on load and rounded once on store
 * (kernels/cuda/act.cuh); all arithmetic in f32. head_dim up to 256 (8 elements a lane),
 * any T, any strides with head_dim contiguous. Speed is not the point: each lane reads a
 * whole key row, and the products run on CUDA cores, not tensor cores; attn/flash is the
 * fast one. Everything is queued on ctx->stream. No options. Not yet run on a GPU: its
 * conformance test (suite gpu) needs one.
 */
#include <math.h>
#include <stdint.h>

#include "act.cuh"
#include "attn_checks.h"
#include "cuda_status.h"
#include "warp.cuh"
#include "gearbox/attn.h"

#define PLUGIN "attn/mem_efficient"
#define WARP GB_WARP
#define WARPS_PER_BLOCK 4
#define MAX_PER_LANE 8                        /* elements of a row each lane holds */
#define MAX_HEAD_DIM (WARP * MAX_PER_LANE)

typedef struct attn_mem_efficient_cuda {
    const gb_host *host;
    gb_device_ctx device;   /* the device given to create(): its stream */
} attn_mem_efficient_cuda;

/* A (B, H, T, D) view as kernels take it: element (b, h, t, d) is at
 * b * batch + h * head + t * row + d. */
typedef struct rows_view {
    void *data;
    int64_t batch, head, row;
} rows_view;

/* ---- device helpers ------------------------------------------------------------------ */

/* Offset of element (bh, t, 0) of `v`, bh = b * H + h. */
static __device__ int64_t row_start(const rows_view &v, int64_t bh, int64_t H, int64_t t)
{
    return (bh / H) * v.batch + (bh % H) * v.head + t * v.row;
}

/* Row t of head bh of `v` into shared memory `dst` (D floats), by the whole warp. */
static __device__ void stage_row(float *dst, const rows_view &v, gb_dtype dtype, int64_t bh,
                                 int64_t H, int64_t t, int D, int lane)
{
    const int64_t start = row_start(v, bh, H, t);
    for (int d = lane; d < D; d += WARP)
        dst[d] = gb_act_load(v.data, dtype, start + d);
    __syncwarp();
}

/* x (shared, D floats) . row t of head bh of `v`, by one lane, in element order. */
static __device__ float dot_row(const float *x, const rows_view &v, gb_dtype dtype, int64_t bh,
                                int64_t H, int64_t t, int D)
{
    const int64_t start = row_start(v, bh, H, t);
    float sum = 0.0f;
    for (int d = 0; d < D; d++)
        sum += x[d] * gb_act_load(v.data, dtype, start + d);
    return sum;
}

/* acc[i] += sum over the chunk's lanes k (in lane order) of w_k * row (j0 + k)[lane + 32 i];
 * w is each lane's own weight, 0 beyond the chunk. */
static __device__ void add_weighted_rows(float *acc, float w, const rows_view &v,
                                         gb_dtype dtype, int64_t bh, int64_t H, int64_t j0,
                                         int64_t n, int D, int lane)
{
    for (int k = 0; k < WARP && j0 + k < n; k++) {
        const float wk = __shfl_sync(0xffffffffu, w, k);
        const int64_t start = row_start(v, bh, H, j0 + k);
        for (int i = 0; i < MAX_PER_LANE; i++) {
            const int d = lane + WARP * i;
            if (d < D)
                acc[i] += wk * gb_act_load(v.data, dtype, start + d);
        }
    }
}

/* Row t of head bh of `v` = scale * acc (lane's elements), rounded to the dtype. */
static __device__ void store_row(const rows_view &v, gb_dtype dtype, int64_t bh, int64_t H,
                                 int64_t t, const float *acc, float scale, int D, int lane)
{
    const int64_t start = row_start(v, bh, H, t);
    for (int i = 0; i < MAX_PER_LANE; i++) {
        const int d = lane + WARP * i;
        if (d < D)
            gb_act_store(v.data, dtype, start + d, acc[i] * scale);
    }
}

/* The warp's row among the B*H*T rows (b, h, t in that order); -1 past the last. */
static __device__ int64_t warp_row(int64_t rows)
{
    const int64_t row = blockIdx.x * (int64_t)WARPS_PER_BLOCK + threadIdx.x / WARP;
    return row < rows ? row : -1;
}

/* ---- kernels ------------------------------------------------------------------------- */

/* Keys a query at position t sees. */
static __device__ int64_t keys_seen(int64_t t, int64_t T, int causal)
{
    return causal ? t + 1 : T;
}

static __global__ void forward_kernel(rows_view out, rows_view q, rows_view k, rows_view v,
                                      float *lse, gb_dtype dtype, int64_t H, int64_t T, int D,
                                      int causal, float scale, int64_t rows)
{
    extern __shared__ float shared[];
    const int64_t r = warp_row(rows);
    if (r < 0)
        return;
    const int lane = threadIdx.x % WARP;
    const int64_t bh = r / T, t = r % T, n = keys_seen(t, T, causal);
    float *qs = shared + (threadIdx.x / WARP) * D;
    stage_row(qs, q, dtype, bh, H, t, D, lane);
    float m = -INFINITY, l = 0.0f, acc[MAX_PER_LANE] = {0};
    for (int64_t j0 = 0; j0 < n; j0 += WARP) {
        const int64_t j = j0 + lane;
        const float s = j < n ? scale * dot_row(qs, k, dtype, bh, H, j, D) : -INFINITY;
        const float m_new = fmaxf(m, gb_warp_max(s));
        const float rescale = expf(m - m_new);   /* 0 on the first chunk: m is -inf */
        const float p = j < n ? expf(s - m_new) : 0.0f;
        l = l * rescale + gb_warp_sum(p);
        for (int i = 0; i < MAX_PER_LANE; i++)
            acc[i] *= rescale;
        add_weighted_rows(acc, p, v, dtype, bh, H, j0, n, D, lane);
        m = m_new;
    }
    store_row(out, dtype, bh, H, t, acc, 1.0f / l, D, lane);
    if (lane == 0)
        lse[r] = m + logf(l);
}

/* D_t = dO_t . O_t per row, in element order per lane and a fixed butterfly. */
static __global__ void delta_kernel(float *delta, rows_view dout, rows_view out, gb_dtype dtype,
                                    int64_t H, int64_t T, int D, int64_t rows)
{
    const int64_t r = warp_row(rows);
    if (r < 0)
        return;
    const int lane = threadIdx.x % WARP;
    const int64_t bh = r / T, t = r % T;
    const int64_t o = row_start(out, bh, H, t), g = row_start(dout, bh, H, t);
    float sum = 0.0f;
    for (int d = lane; d < D; d += WARP)
        sum += gb_act_load(dout.data, dtype, g + d) * gb_act_load(out.data, dtype, o + d);
    sum = gb_warp_sum(sum);
    if (lane == 0)
        delta[r] = sum;
}

/* dQ_t, a warp per query row: keys 32 at a time, one per lane. */
static __global__ void dq_kernel(rows_view dq, rows_view q, rows_view k, rows_view v,
                                 rows_view dout, const float *lse, const float *delta,
                                 gb_dtype dtype, int64_t H, int64_t T, int D, int causal,
                                 float scale, int64_t rows)
{
    extern __shared__ float shared[];
    const int64_t r = warp_row(rows);
    if (r < 0)
        return;
    const int lane = threadIdx.x % WARP;
    const int64_t bh = r / T, t = r % T, n = keys_seen(t, T, causal);
    float *qs = shared + (threadIdx.x / WARP) * 2 * D, *dos = qs + D;
    stage_row(qs, q, dtype, bh, H, t, D, lane);
    stage_row(dos, dout, dtype, bh, H, t, D, lane);
    float acc[MAX_PER_LANE] = {0};
    for (int64_t j0 = 0; j0 < n; j0 += WARP) {
        const int64_t j = j0 + lane;
        float ds = 0.0f;
        if (j < n) {
            const float p = expf(scale * dot_row(qs, k, dtype, bh, H, j, D) - lse[r]);
            ds = p * (dot_row(dos, v, dtype, bh, H, j, D) - delta[r]);
        }
        add_weighted_rows(acc, ds, k, dtype, bh, H, j0, n, D, lane);
    }
    store_row(dq, dtype, bh, H, t, acc, scale, D, lane);
}

/* dK_j and dV_j, a warp per key row: the queries that see key j, 32 at a time. */
static __global__ void dkv_kernel(rows_view dk, rows_view dv, rows_view q, rows_view k,
                                  rows_view v, rows_view dout, const float *lse,
                                  const float *delta, gb_dtype dtype, int64_t H, int64_t T,
                                  int D, int causal, float scale, int64_t rows)
{
    extern __shared__ float shared[];
    const int64_t r = warp_row(rows);
    if (r < 0)
        return;
    const int lane = threadIdx.x % WARP;
    const int64_t bh = r / T, j = r % T, first = causal ? j : 0;
    float *ks = shared + (threadIdx.x / WARP) * 2 * D, *vs = ks + D;
    stage_row(ks, k, dtype, bh, H, j, D, lane);
    stage_row(vs, v, dtype, bh, H, j, D, lane);
    float dk_acc[MAX_PER_LANE] = {0}, dv_acc[MAX_PER_LANE] = {0};
    for (int64_t t0 = first; t0 < T; t0 += WARP) {
        const int64_t t = t0 + lane, row = bh * T + t;
        float p = 0.0f, ds = 0.0f;
        if (t < T) {
            p = expf(scale * dot_row(ks, q, dtype, bh, H, t, D) - lse[row]);
            ds = p * (dot_row(vs, dout, dtype, bh, H, t, D) - delta[row]);
        }
        add_weighted_rows(dv_acc, p, dout, dtype, bh, H, t0, T, D, lane);
        add_weighted_rows(dk_acc, ds, q, dtype, bh, H, t0, T, D, lane);
    }
    store_row(dk, dtype, bh, H, j, dk_acc, scale, D, lane);
    store_row(dv, dtype, bh, H, j, dv_acc, 1.0f, D, lane);
}

/* ---- the plugin ---------------------------------------------------------------------- */

static rows_view rows_of(const gb_tensor *t)
{
    rows_view v = {t->data, t->stride[0], t->stride[1], t->stride[2]};
    return v;
}

static gb_status mem_efficient_create(const gb_host *host, const gb_value *options,
                                      const gb_device_ctx *device, void **self)
{
    (void)options;
    gb_status st = attn_require_cuda(host, PLUGIN, device);
    if (st != GB_OK)
        return st;
    attn_mem_efficient_cuda *attn =
        (attn_mem_efficient_cuda *)host->alloc(host, sizeof *attn);
    if (!attn) {
        host->set_error(host, "cannot allocate the " PLUGIN " instance");
        return GB_ERR_NO_MEMORY;
    }
    attn->host = host;
    attn_keep_device(&attn->device, device);
    *self = attn;
    return GB_OK;
}

static void mem_efficient_destroy(void *self)
{
    attn_mem_efficient_cuda *attn = (attn_mem_efficient_cuda *)self;
    if (attn)
        attn->host->free(attn->host, attn);
}

static int mem_efficient_eligible(void *self, const gb_attn_problem *p, char *reason,
                                  size_t reason_cap)
{
    (void)self;
    if (!attn_problem_ok_on(PLUGIN, "cuda", p, reason, reason_cap))
        return 0;
    if (p->head_dim > MAX_HEAD_DIM) {
        snprintf(reason, reason_cap, PLUGIN " on cuda holds a row in registers: head_dim up "
                 "to %d; this run asks for %lld (use attn/math)", MAX_HEAD_DIM,
                 (long long)p->head_dim);
        return 0;
    }
    return 1;
}

/* One f32 per row of B*H*T: the log-sum-exps (saved), D = dO . O (workspace). */
static size_t row_floats(const gb_attn_problem *p)
{
    return (size_t)p->batch * (size_t)p->heads * (size_t)p->seq_len * sizeof(float);
}

static gb_status mem_efficient_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                                      size_t *workspace_bytes)
{
    (void)self;
    *saved_bytes = row_floats(p);
    *workspace_bytes = row_floats(p);
    return GB_OK;
}

static gb_status check_call(const attn_mem_efficient_cuda *attn, const char *call,
                            const gb_attn_problem *p, const char *const *names,
                            const gb_tensor *const *views, int n)
{
    char reason[256];
    int ok = mem_efficient_eligible((void *)attn, p, reason, sizeof reason);
    return attn_check_call(attn->host, PLUGIN, call, ok, reason, p, names, views, n);
}

/* Blocks of WARPS_PER_BLOCK warps, a warp a row, and the shared memory of `per_warp` rows
 * of head_dim floats each. */
typedef struct launch {
    unsigned blocks, threads;
    size_t shared_bytes;
} launch;

static launch row_launch(const gb_attn_problem *p, int per_warp)
{
    const int64_t rows = p->batch * p->heads * p->seq_len;
    launch l = {(unsigned)((rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK),
                WARPS_PER_BLOCK * WARP,
                (size_t)(WARPS_PER_BLOCK * per_warp) * (size_t)p->head_dim * sizeof(float)};
    return l;
}

static gb_status mem_efficient_forward(void *self, const gb_attn_problem *p, gb_tensor out,
                                       gb_tensor q, gb_tensor k, gb_tensor v, void *saved,
                                       void *workspace)
{
    (void)workspace;
    const attn_mem_efficient_cuda *attn = (const attn_mem_efficient_cuda *)self;
    const gb_host *host = attn->host;
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    gb_status st = check_call(attn, "forward", p, names, views, 4);
    if (st != GB_OK)
        return st;
    const int64_t rows = p->batch * p->heads * p->seq_len;
    const launch l = row_launch(p, 1);
    forward_kernel<<<l.blocks, l.threads, l.shared_bytes, (cudaStream_t)attn->device.stream>>>(
        rows_of(&out), rows_of(&q), rows_of(&k), rows_of(&v), (float *)saved, p->dtype,
        p->heads, p->seq_len, (int)p->head_dim, p->causal, 1.0f / sqrtf((float)p->head_dim),
        rows);
    GB_CUDA_CHECK_LAUNCH("forward_kernel (a warp per query row)");
    return GB_OK;
}

static gb_status mem_efficient_backward(void *self, const gb_attn_problem *p, gb_tensor dq,
                                        gb_tensor dk, gb_tensor dv, gb_tensor dout, gb_tensor q,
                                        gb_tensor k, gb_tensor v, gb_tensor out,
                                        const void *saved, void *workspace)
{
    const attn_mem_efficient_cuda *attn = (const attn_mem_efficient_cuda *)self;
    const gb_host *host = attn->host;
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v, &out};
    gb_status st = check_call(attn, "backward", p, names, views, 8);
    if (st != GB_OK)
        return st;
    cudaStream_t stream = (cudaStream_t)attn->device.stream;
    const int64_t H = p->heads, T = p->seq_len, rows = p->batch * H * T;
    const int D = (int)p->head_dim;
    const float scale = 1.0f / sqrtf((float)D);
    const float *lse = (const float *)saved;
    float *delta = (float *)workspace;
    const launch plain = row_launch(p, 0), two_rows = row_launch(p, 2);
    delta_kernel<<<plain.blocks, plain.threads, 0, stream>>>(delta, rows_of(&dout),
                                                             rows_of(&out), p->dtype, H, T, D,
                                                             rows);
    GB_CUDA_CHECK_LAUNCH("delta_kernel (dO . O per row)");
    dq_kernel<<<two_rows.blocks, two_rows.threads, two_rows.shared_bytes, stream>>>(
        rows_of(&dq), rows_of(&q), rows_of(&k), rows_of(&v), rows_of(&dout), lse, delta,
        p->dtype, H, T, D, p->causal, scale, rows);
    GB_CUDA_CHECK_LAUNCH("dq_kernel (a warp per query row)");
    dkv_kernel<<<two_rows.blocks, two_rows.threads, two_rows.shared_bytes, stream>>>(
        rows_of(&dk), rows_of(&dv), rows_of(&q), rows_of(&k), rows_of(&v), rows_of(&dout),
        lse, delta, p->dtype, H, T, D, p->causal, scale, rows);
    GB_CUDA_CHECK_LAUNCH("dkv_kernel (a warp per key row)");
    return GB_OK;
}

static const gb_attn_ops mem_efficient_ops = {
    /* .struct_size = */ sizeof(gb_attn_ops),
    /* .create = */ mem_efficient_create,
    /* .destroy = */ mem_efficient_destroy,
    /* .eligible = */ mem_efficient_eligible,
    /* .memory = */ mem_efficient_memory,
    /* .forward = */ mem_efficient_forward,
    /* .backward = */ mem_efficient_backward,
};

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
GB_PLUGIN_DEFINE_CAPS(GB_KIND_ATTN, "mem_efficient", "1.0.0",
                      "memory linear in T: a warp per row, online softmax, log-sum-exps "
                      "saved; any T, head_dim up to 256; f32, bf16, f16",
                      GB_DEVICE_CUDA,
                      GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
                      GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY, GB_NO_OPTIONS,
                      mem_efficient_ops)
}
