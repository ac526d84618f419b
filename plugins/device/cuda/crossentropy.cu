/* Softmax cross-entropy on the CUDA device, fused with its gradient
 * (kernels/common/crossentropy.h), over rows of V logits `ld` apart (ABI 1.3; a padded
 * vocabulary's columns past V are neither read nor written).
 *
 * One block per row, of a thread per run of the row up to CE_THREADS (a small vocabulary
 * gets a warp or a few, not 1024 threads that would wait), the row read from DRAM once and
 * each exponential computed once. The block copies its V logits into shared memory as f32
 * with 16-byte loads (where the rows are 16-byte aligned, as a padded vocabulary makes
 * them), taking the maximum on the way. The softmax denominator is summed from that copy
 * GB_CE_EXP_BLOCK columns at a time, each block of exponentials in double by a group of 16
 * lanes (lanes.cuh) and the block sums added in column order by one thread, which is the
 * CPU device's order, so the sum has its bits; each exponential replaces its logit in
 * shared memory, so that dlogits, when a gradient is wanted, cost a multiply-add per
 * element, written with 16-byte stores (dlogits may alias the logits). The exponential is
 * the kernel's costliest instruction stream (gb_exp_fast's bits, for the CPU's, by
 * gb_exp_fast_nonpositive: every argument x - max is at most 0, so the clamps above the
 * range go), so it is computed once; at 4 bytes a column, the copy holds about 56k
 * columns on an sm_90 (227 KB a block) and 41k on an sm_80 (163 KB): logits beyond it are
 * read from global memory in both passes and their exponentials computed twice, slower
 * and the same bits. A one-pass (online) maximum and sum would rescale partial sums and
 * lose the CPU's bits. The loss's log is CUDA's, which may differ from
 * libm's by an ulp of a double.
 *
 * Targets live on the GPU and are not checked on the host: a target outside [0, V) gives
 * that row a NaN loss and NaN gradients, which the core's loss check reports.
 *
 * cross_entropy_scaled (ABI 1.4) multiplies dloss by a scale the kernel reads from device
 * memory (the loss scale, which loss_scaler_update moves there), so a loss scale needs no
 * host round trip.
 */
#include <math.h>

#include "act.cuh"
#include "crossentropy.h"
#include "cuda_device.h"
#include "cuda_status.h"
#include "exp.h"
#include "lanes.cuh"
#include "vec16.cuh"

/* Threads per row at most: 32 warps keep enough 16-byte loads in flight to stream a row. */
#define CE_THREADS 1024
/* Bytes set aside for the kernel's static shared memory (warp maxima, the inverse sum). */
#define CE_STATIC 1024

/* A row: its logits in global memory, and the first `staged` of them copied to shared
 * memory as f32, where the sum pass replaces each by its exponential. */
typedef struct ce_row {
    gb_dtype dtype;
    const void *global;     /* the row's logits */
    float *stage;           /* shared memory, 16-byte aligned */
    int64_t staged;         /* a multiple of every run length */
} ce_row;

// The maximum over threads of the block; `scratch` holds a float per warp.
static __device__ float block_max(float m, float *scratch)
{
    for (int width = 16; width > 0; width /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, m, width);
        m = other > m ? other : m;
    }
    if (threadIdx.x % 32 == 0)
        scratch[threadIdx.x / 32] = m;
    __syncthreads();
    float all = scratch[0];
    for (int w = 1; w < (int)blockDim.x / 32; w++)
        all = scratch[w] > all ? scratch[w] : all;
    return all;
}

// The columns [0, vectors) are read a 16-byte vector at a time where `vector` is set (the
// row's whole vectors), none otherwise; the rest one by one.
template <typename Dtype>
static __device__ __forceinline__ int64_t vector_columns(int64_t V, int vector)
{
    constexpr int n = gb_vec16_len<Dtype>::n;
    return vector ? V / n * n : 0;
}

// m and the n values of x: the greatest (NaN never).
template <int n>
static __device__ __forceinline__ float run_max(float m, const float *x)
{
    for (int k = 0; k < n; k++)
        m = x[k] > m ? x[k] : m;
    return m;
}

// Copies the row's first r->staged logits into shared memory as f32 and returns this
// thread's maximum over all V of them. The staged and the unstaged runs loop apart, so
// that each loop converts its logits once.
template <typename Dtype>
static __device__ float stage_row(const ce_row *r, int64_t V, int vector)
{
    constexpr int n = gb_vec16_len<Dtype>::n;
    const int64_t whole = vector_columns<Dtype>(V, vector);
    const int64_t staged = whole < r->staged ? whole : r->staged;   // a multiple of n
    const int64_t step = (int64_t)blockDim.x * n;
    float m = -INFINITY;
    int64_t i = (int64_t)threadIdx.x * n;
    for (; i < staged; i += step) {
        float x[n];
        gb_vec16_load_act<Dtype>(r->global, i, x);
        gb_vec16_store_f32<n>(r->stage + i, x);
        m = run_max<n>(m, x);
    }
    for (; i < whole; i += step) {
        float x[n];
        gb_vec16_load_act<Dtype>(r->global, i, x);
        m = run_max<n>(m, x);
    }
    for (int64_t c = whole + threadIdx.x; c < V; c += blockDim.x) {
        const float x = gb_act_load(r->global, Dtype::dtype, c);
        if (c < r->staged)
            r->stage[c] = x;
        m = x > m ? x : m;
    }
    return m;
}

// The softmax denominator of the row: blocks of GB_CE_EXP_BLOCK columns summed by groups
// of lanes into block_sums, added in column order by thread 0 (only its value is right).
// Each staged logit is replaced by its exponential.
static __device__ double exp_sum(const ce_row *r, int64_t V, float max, double *block_sums)
{
    const int64_t n_blocks = (V + GB_CE_EXP_BLOCK - 1) / GB_CE_EXP_BLOCK;
    const int groups = blockDim.x / GB_ROW_LANES;   // each takes every groups-th block
    for (int64_t blk = threadIdx.x / GB_ROW_LANES; blk < n_blocks; blk += groups) {
        const int64_t c0 = blk * GB_CE_EXP_BLOCK;
        const int len = (int)(V - c0 < GB_CE_EXP_BLOCK ? V - c0 : GB_CE_EXP_BLOCK);
        const int64_t left = r->staged - c0;   // staged columns from c0
        const int in_stage = left <= 0 ? 0 : left < len ? (int)left : len;
        float *stage = r->stage + c0;
        double acc = 0.0;
        int i = gb_lane();
        for (; i < in_stage; i += GB_ROW_LANES) {
            const float e = gb_exp_fast_nonpositive(stage[i] - max);
            stage[i] = e;
            acc += (double)e;
        }
        for (; i < len; i += GB_ROW_LANES)
            acc += (double)gb_exp_fast_nonpositive(gb_act_load(r->global, r->dtype, c0 + i) -
                                                   max);
        acc = gb_lanes_fold_f64(acc);
        if (gb_lane() == 0)
            block_sums[blk] = acc;
    }
    __syncthreads();
    double sum = 0.0;
    if (threadIdx.x == 0)
        for (int64_t blk = 0; blk < n_blocks; blk++)
            sum += block_sums[blk];
    return sum;
}

// exp(x_c - max) of column c: exp_sum's, from shared memory where c is staged.
static __device__ __forceinline__ float exp_at(const ce_row *r, int64_t c, float max)
{
    return c < r->staged ? r->stage[c]
                         : gb_exp_fast_nonpositive(gb_act_load(r->global, r->dtype, c) - max);
}

// What the softmax's gradient asks of each column: 1 / S, the target column, dloss, and
// whether the target is a column at all (else every dlogit is NaN).
typedef struct ce_grad {
    float max, inv, d;
    int32_t target;
    int valid;
} ce_grad;

static __device__ __forceinline__ float dlogit_of(const ce_grad *g, float e, int is_target)
{
    return g->valid ? gb_ce_dlogit(e, g->inv, is_target, g->d) : NAN;
}

// dlogits of the n = gb_vec16_len<Dtype>::n columns from i, from their exponentials e, as
// if none were the target (write_dlogits writes the target's apart).
template <typename Dtype>
static __device__ __forceinline__ void store_dlogits(void *dlogits, int64_t i, float *e,
                                                     const ce_grad *g)
{
    constexpr int n = gb_vec16_len<Dtype>::n;
    for (int k = 0; k < n; k++)
        e[k] = g->valid ? gb_ce_dlogit_other(e[k], g->inv, g->d) : NAN;
    gb_vec16_store_act<Dtype>(dlogits, i, e);
}

// dlogits of the row from the exponentials: whole vectors, staged ones first, then the
// tail one by one. The staged and the unstaged runs loop apart, so that the loop over the
// staged ones (all of them but for a vocabulary past shared memory) holds no exponential;
// neither compares columns with the target: the thread whose run holds the target column
// takes its exponential first (dlogits may alias the logits) and writes its dlogit last.
template <typename Dtype>
static __device__ void write_dlogits(const ce_row *r, void *dlogits, int64_t V, int vector,
                                     const ce_grad *g)
{
    constexpr int n = gb_vec16_len<Dtype>::n;
    const int64_t whole = vector_columns<Dtype>(V, vector);
    const int64_t staged = whole < r->staged ? whole : r->staged;   // a multiple of n
    const int64_t step = (int64_t)blockDim.x * n;
    const bool owns_target = g->valid && g->target < whole &&
                             g->target / n % blockDim.x == threadIdx.x;
    const float target_e = owns_target ? exp_at(r, g->target, g->max) : 0.0f;
    int64_t i = (int64_t)threadIdx.x * n;
    for (; i < staged; i += step) {
        float e[n];
        gb_vec16_load_f32<n>(r->stage + i, e);
        store_dlogits<Dtype>(dlogits, i, e, g);
    }
    for (; i < whole; i += step) {
        float e[n];
        gb_vec16_load_act<Dtype>(r->global, i, e);
        for (int k = 0; k < n; k++)
            e[k] = gb_exp_fast_nonpositive(e[k] - g->max);
        store_dlogits<Dtype>(dlogits, i, e, g);
    }
    if (owns_target)
        gb_act_store(dlogits, Dtype::dtype, g->target, dlogit_of(g, target_e, 1));
    for (int64_t c = whole + threadIdx.x; c < V; c += blockDim.x)
        gb_act_store(dlogits, Dtype::dtype, c, dlogit_of(g, exp_at(r, c, g->max), c == g->target));
}

// losses (N); dlogits (N, ld) act or NULL, may alias logits; logits (N, ld) act, V columns
// used; targets (N); dloss_scale: NULL or one f32. vector: 1 where every row of logits and
// dlogits starts 16-byte aligned, else 0. Dynamic shared memory: one double per block of
// GB_CE_EXP_BLOCK columns (sums_bytes, a multiple of 16), then `staged` f32 logits.
// Instantiated per dtype (act.cuh: gb_act_f32, ...).
template <typename Dtype>
static __global__ void __launch_bounds__(CE_THREADS)
cross_entropy_kernel(float *losses, void *dlogits, const void *logits, int64_t ld,
                     const int32_t *targets, int64_t V, float dloss, const float *dloss_scale,
                     int vector, size_t sums_bytes, int64_t staged)
{
    constexpr gb_dtype dtype = Dtype::dtype;
    extern __shared__ double block_sums[];
    __shared__ float warp_max[CE_THREADS / 32];
    __shared__ float inv_sum;
    const int64_t row = blockIdx.x, base = row * ld;
    const int32_t target = targets[row];
    const int valid = target >= 0 && target < V;
    const int64_t size = dtype == GB_F32 ? 4 : 2;   // bytes of an element
    const ce_row r = {dtype, (const char *)logits + base * size,
                      (float *)((char *)block_sums + sums_bytes), staged};
    // read before any thread may overwrite it with a dlogit (dlogits may alias logits)
    const float target_logit =
        threadIdx.x == 0 && valid ? gb_act_load(r.global, dtype, target) : 0.0f;

    const float max = block_max(stage_row<Dtype>(&r, V, vector), warp_max);   // syncs: staged
    const double sum = exp_sum(&r, V, max, block_sums);
    if (threadIdx.x == 0) {
        losses[row] = valid ? gb_ce_loss(sum, max, target_logit) : NAN;
        inv_sum = gb_ce_inv_sum(sum);
    }
    __syncthreads();   // inv_sum, and every exponential staged
    if (!dlogits)
        return;
    const ce_grad g = {max, inv_sum, dloss_scale ? dloss * *dloss_scale : dloss, target, valid};
    write_dlogits<Dtype>(&r, (char *)dlogits + base * size, V, vector, &g);
}

extern "C" gb_status cuda_cross_entropy(void *self, gb_dtype dtype, float *losses,
                                        void *dlogits, const void *logits,
                                        const int32_t *targets, int64_t N, int64_t V,
                                        float dloss)
{
    return cuda_cross_entropy_ld(self, dtype, losses, dlogits, logits, V, targets, N, V, dloss);
}

/* Elements per vector access where every row of logits (and of dlogits) starts 16-byte
 * aligned, else 1. */
static int run_length(gb_dtype dtype, const void *logits, const void *dlogits, int64_t ld)
{
    const size_t size = gb_dtype_size(dtype);
    const int aligned = (uintptr_t)logits % GB_VEC16_BYTES == 0 &&
                        (uintptr_t)dlogits % GB_VEC16_BYTES == 0 &&
                        (size_t)ld * size % GB_VEC16_BYTES == 0;
    return aligned ? (int)(GB_VEC16_BYTES / size) : 1;
}

/* Threads of a row's block: one per run of `run` columns, whole warps, at most CE_THREADS. */
static unsigned ce_threads(int64_t V, int run)
{
    const int64_t runs = (V + run - 1) / run, warps = (runs + 31) / 32;
    return warps * 32 < CE_THREADS ? (unsigned)(warps * 32) : CE_THREADS;
}

/* One launch of cross_entropy_kernel: its grid, block and dynamic shared memory, and its
 * arguments. */
typedef struct ce_launch {
    cuda_device *dev;
    unsigned rows, threads;
    size_t shared, sums_bytes;
    int64_t ld, V, staged;
    int vector;
    float dloss;
    const float *dloss_scale;
    float *losses;
    void *dlogits;
    const void *logits;
    const int32_t *targets;
} ce_launch;

template <typename Dtype>
static gb_status launch_kernel(const ce_launch *l)
{
    const gb_host *host = l->dev->host;
    GB_CUDA_CHECK(cudaFuncSetAttribute((const void *)cross_entropy_kernel<Dtype>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)(l->shared + CE_STATIC)));
    cross_entropy_kernel<Dtype><<<l->rows, l->threads, l->shared, l->dev->compute>>>(
        l->losses, l->dlogits, l->logits, l->ld, l->targets, l->V, l->dloss, l->dloss_scale,
        l->vector, l->sums_bytes, l->staged);
    GB_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
    return GB_OK;
}

/* The launch behind every entry: dloss_scale NULL but for cross_entropy_scaled. */
static gb_status launch_cross_entropy(cuda_device *dev, gb_dtype dtype, float *losses,
                                      void *dlogits, const void *logits, int64_t ld,
                                      const int32_t *targets, int64_t N, int64_t V, float dloss,
                                      const float *dloss_scale)
{
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, "cross_entropy", dtype, N, V);
    if (st != GB_OK || N == 0)
        return st;
    const size_t n_sums = (size_t)((V + GB_CE_EXP_BLOCK - 1) / GB_CE_EXP_BLOCK);
    const size_t sums_bytes = (n_sums * sizeof(double) + GB_VEC16_BYTES - 1) / GB_VEC16_BYTES *
                              GB_VEC16_BYTES;
    int optin = 0;
    GB_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                         dev->ordinal));
    /* the dynamic shared memory a block may ask for: the opt-in limit less CE_STATIC
     * for the static warp maxima (the attribute below covers both, as the emulator
     * reads it, and stays within the opt-in limit less the static part, as CUDA does) */
    const size_t limit = (size_t)optin - 2 * CE_STATIC;
    if (V == 0 || sums_bytes > limit / 2 || N > INT32_MAX || ld < V) {
        host->set_error(host, "cross_entropy on the cuda device takes 1 to %lld columns, rows "
                        "at least that far apart, and at most 2^31 - 1 rows; this call has "
                        "%lld x %lld, rows %lld apart",
                        (long long)(limit / 2 / sizeof(double) * GB_CE_EXP_BLOCK), (long long)N,
                        (long long)V, (long long)ld);
        return GB_ERR_UNSUPPORTED;
    }
    const int run = run_length(dtype, logits, dlogits ? dlogits : logits, ld);
    /* the f32 copy in whole 8-column runs (every run length divides it), as much of the
     * row as fits */
    const size_t stage_unit = 8 * sizeof(float);
    const size_t row_bytes = ((size_t)V * sizeof(float) + stage_unit - 1) / stage_unit *
                             stage_unit;
    const size_t room = (limit - sums_bytes) / stage_unit * stage_unit;
    const size_t stage_bytes = row_bytes < room ? row_bytes : room;
    const ce_launch l = {dev, (unsigned)N, ce_threads(V, run), sums_bytes + stage_bytes,
                         sums_bytes, ld, V, (int64_t)(stage_bytes / sizeof(float)), run > 1,
                         dloss, dloss_scale, losses, dlogits, logits, targets};
    return GB_ACT_DISPATCH(dtype, launch_kernel, &l);
}

extern "C" gb_status cuda_cross_entropy_ld(void *self, gb_dtype dtype, float *losses,
                                           void *dlogits, const void *logits, int64_t ld,
                                           const int32_t *targets, int64_t N, int64_t V,
                                           float dloss)
{
    return launch_cross_entropy((cuda_device *)self, dtype, losses, dlogits, logits, ld,
                                targets, N, V, dloss, NULL);
}

extern "C" gb_status cuda_cross_entropy_scaled(void *self, gb_dtype dtype, float *losses,
                                               void *dlogits, const void *logits, int64_t ld,
                                               const int32_t *targets, int64_t N, int64_t V,
                                               float dloss, const float *dloss_scale)
{
    cuda_device *dev = (cuda_device *)self;
    if (!dloss_scale) {
        dev->host->set_error(dev->host, "cross_entropy_scaled: dloss_scale is NULL");
        return GB_ERR_INVALID_ARG;
    }
    return launch_cross_entropy(dev, dtype, losses, dlogits, logits, ld, targets, N, V, dloss,
                                dloss_scale);
}
