/* Softmax cross-entropy on the CUDA device, fused with its gradient
 * (kernels/common/crossentropy.h), over rows of V logits `ld` apart (ABI 1.3; a padded
 * vocabulary's columns past V are neither read nor written).
 *
 * One block per row, of a thread per run of the row up to CE_THREADS (a small vocabulary
 * gets a warp or a few, not 1024 threads that would wait), and the row read from DRAM once: the block copies its
 * V logits into shared memory with 16-byte loads (where the rows are 16-byte aligned, as a
 * padded vocabulary makes them), taking the maximum on the way; every later pass reads the
 * staged copy. The softmax denominator is summed from it GB_CE_EXP_BLOCK columns at a
 * time, each block of exponentials in double by a group of 16 lanes (lanes.cuh) and the
 * block sums added in column order by one thread, which is the CPU device's order, so the
 * sum has its bits; and, when a gradient is wanted, dlogits from the exponentials computed
 * again (the same bits), written with 16-byte stores, so dlogits may alias the logits.
 * Logits beyond what shared memory holds (f32 rows past about 56k columns, 16-bit ones
 * past about 113k) are read from global memory in each pass instead: slower, the same
 * bits. A one-pass (online) maximum and sum would rescale partial sums and lose the CPU's
 * bits; staging the row gives the single DRAM pass without changing a bit. The loss's log
 * is CUDA's, which may differ from libm's by an ulp of a double.
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

/* Threads per row at most: 32 warps keep enough 16-byte loads in flight to stream a row. */
#define CE_THREADS 1024
/* Bytes set aside for the kernel's static shared memory (warp maxima, the inverse sum). */
#define CE_STATIC 1024
/* Bytes of one vector access. */
#define CE_VEC_BYTES 16

/* 16 bytes of a row: 4 f32 or 8 16-bit logits (the CUDA compiler and the emulator's
 * both read a union's other member as the same bytes). */
union alignas(CE_VEC_BYTES) ce_vec {
    float f[4];
    uint16_t h[8];
};

// The `n` logits of p from element i as f32: one element (n = 1) or one 16-byte vector
// (n = 16 / element size; element i then 16-byte aligned).
static __device__ __forceinline__ void load_run(const void *p, gb_dtype dtype, int64_t i,
                                                int n, float *out)
{
    if (n == 1) {
        out[0] = gb_act_load(p, dtype, i);
        return;
    }
    const ce_vec v = ((const ce_vec *)p)[i / n];
    for (int k = 0; k < n; k++)
        out[k] = dtype == GB_F32    ? v.f[k]
                 : dtype == GB_BF16 ? gb_f32_from_bf16(v.h[k])
                                    : gb_f32_from_f16(v.h[k]);
}

// load_run's inverse: the `n` values of in stored at element i of p, rounded to dtype.
static __device__ __forceinline__ void store_run(void *p, gb_dtype dtype, int64_t i, int n,
                                                 const float *in)
{
    if (n == 1) {
        gb_act_store(p, dtype, i, in[0]);
        return;
    }
    ce_vec v = {{0.0f}};   // every element is set below; the compiler cannot see it
    for (int k = 0; k < n; k++) {
        if (dtype == GB_F32)
            v.f[k] = in[k];
        else
            v.h[k] = dtype == GB_BF16 ? gb_bf16_from_f32(in[k]) : gb_f16_from_f32(in[k]);
    }
    ((ce_vec *)p)[i / n] = v;
}

/* Where a row's passes find its logits: the first `staged` in shared memory, the rest in
 * global memory. */
typedef struct ce_row {
    gb_dtype dtype;
    const void *global;     /* the row's logits */
    void *stage;            /* shared memory, 16-byte aligned */
    int64_t staged;         /* a multiple of every run length */
} ce_row;

// The n logits of a run from element i (n = 1, or a vector within the row).
static __device__ __forceinline__ void row_run(const ce_row *r, int64_t i, int n, float *out)
{
    load_run(i < r->staged ? r->stage : r->global, r->dtype, i, n, out);
}

static __device__ __forceinline__ float row_at(const ce_row *r, int64_t i)
{
    float v;
    row_run(r, i, 1, &v);
    return v;
}

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

// Copies the row's first r->staged logits into shared memory in runs of `run` and
// returns this thread's maximum over all V of them.
static __device__ float stage_row(const ce_row *r, int64_t V, int run)
{
    float m = -INFINITY, x[8];
    const int64_t whole = V / run * run;
    for (int64_t i = (int64_t)threadIdx.x * run; i < whole; i += (int64_t)blockDim.x * run) {
        load_run(r->global, r->dtype, i, run, x);
        if (i < r->staged)
            store_run(r->stage, r->dtype, i, run, x);
        for (int k = 0; k < run; k++)
            m = x[k] > m ? x[k] : m;
    }
    for (int64_t c = whole + threadIdx.x; c < V; c += blockDim.x) {
        x[0] = gb_act_load(r->global, r->dtype, c);
        if (c < r->staged)
            gb_act_store(r->stage, r->dtype, c, x[0]);
        m = x[0] > m ? x[0] : m;
    }
    return m;
}

// The softmax denominator of the row: blocks of GB_CE_EXP_BLOCK columns summed by groups
// of lanes into block_sums, added in column order by thread 0 (only its value is right).
static __device__ double exp_sum(const ce_row *r, int64_t V, float max, double *block_sums)
{
    const int64_t n_blocks = (V + GB_CE_EXP_BLOCK - 1) / GB_CE_EXP_BLOCK;
    const int groups = blockDim.x / GB_ROW_LANES;   // each takes every groups-th block
    for (int64_t blk = threadIdx.x / GB_ROW_LANES; blk < n_blocks; blk += groups) {
        const int64_t c0 = blk * GB_CE_EXP_BLOCK;
        const int64_t len = V - c0 < GB_CE_EXP_BLOCK ? V - c0 : GB_CE_EXP_BLOCK;
        double acc = 0.0;
        for (int64_t i = gb_lane(); i < len; i += GB_ROW_LANES)
            acc += (double)gb_exp_fast(row_at(r, c0 + i) - max);
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

// dlogits of the row (n runs of `run`, then the tail one by one) from the staged logits.
static __device__ void write_dlogits(const ce_row *r, void *dlogits, int64_t V, int run,
                                     float max, float inv, int32_t target, int valid, float d)
{
    float x[8];
    const int64_t whole = V / run * run;
    for (int64_t i = (int64_t)threadIdx.x * run; i < whole; i += (int64_t)blockDim.x * run) {
        row_run(r, i, run, x);
        for (int k = 0; k < run; k++)
            x[k] = valid ? gb_ce_dlogit(gb_exp_fast(x[k] - max), inv, i + k == target, d) : NAN;
        store_run(dlogits, r->dtype, i, run, x);
    }
    for (int64_t c = whole + threadIdx.x; c < V; c += blockDim.x) {
        x[0] = row_at(r, c);
        x[0] = valid ? gb_ce_dlogit(gb_exp_fast(x[0] - max), inv, c == target, d) : NAN;
        gb_act_store(dlogits, r->dtype, c, x[0]);
    }
}

// losses (N); dlogits (N, ld) act or NULL, may alias logits; logits (N, ld) act, V columns
// used; targets (N); dloss_scale: NULL or one f32. run: 1, or the elements of 16 bytes
// where every row of logits and dlogits starts 16-byte aligned. Dynamic shared memory:
// one double per block of GB_CE_EXP_BLOCK columns (sums_bytes, a multiple of 16), then
// the staged logits, `staged` of them.
// Instantiated per dtype (act.cuh: gb_act_f32, ...).
template <typename Dtype>
static __global__ void __launch_bounds__(CE_THREADS)
cross_entropy_kernel(float *losses, void *dlogits, const void *logits, int64_t ld,
                     const int32_t *targets, int64_t V, float dloss, const float *dloss_scale,
                     int run, size_t sums_bytes, int64_t staged)
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
                      (char *)block_sums + sums_bytes, staged};

    const float max = block_max(stage_row(&r, V, run), warp_max);   // syncs: staged
    const double sum = exp_sum(&r, V, max, block_sums);
    if (threadIdx.x == 0) {
        losses[row] = valid ? gb_ce_loss(sum, max, row_at(&r, target)) : NAN;
        inv_sum = gb_ce_inv_sum(sum);
    }
    __syncthreads();   // inv_sum, and the target's logit read before dlogits overwrites it
    if (!dlogits)
        return;
    const float d = dloss_scale ? dloss * *dloss_scale : dloss;
    write_dlogits(&r, (char *)dlogits + base * size, V, run, max, inv_sum,
                  target, valid, d);
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
    const int aligned = (uintptr_t)logits % CE_VEC_BYTES == 0 &&
                        (uintptr_t)dlogits % CE_VEC_BYTES == 0 &&
                        (size_t)ld * size % CE_VEC_BYTES == 0;
    return aligned ? (int)(CE_VEC_BYTES / size) : 1;
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
    int run;
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
        l->run, l->sums_bytes, l->staged);
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
    const size_t sums_bytes = (n_sums * sizeof(double) + CE_VEC_BYTES - 1) / CE_VEC_BYTES *
                              CE_VEC_BYTES;
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
    const size_t size = gb_dtype_size(dtype), run_bytes = CE_VEC_BYTES;
    const size_t row_bytes = ((size_t)V * size + run_bytes - 1) / run_bytes * run_bytes;
    const size_t room = (limit - sums_bytes) / run_bytes * run_bytes;
    const size_t stage_bytes = row_bytes < room ? row_bytes : room;
    const ce_launch l = {dev, (unsigned)N, ce_threads(V, run), sums_bytes + stage_bytes,
                         sums_bytes, ld, V, (int64_t)(stage_bytes / size), run, dloss,
                         dloss_scale, losses, dlogits, logits, targets};
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
