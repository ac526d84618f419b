/* LayerNorm on the CUDA device, forward (alone, or after the residual add it follows) and
 * backward (biased variance, as PyTorch and llm.c; the formulas of kernels/common/layernorm.h).
 *
 * Each row gets a group of 16 lanes (half a warp, lanes.cuh): lane j reads columns j,
 * j + 16, ... and the row's sums fold as kernels/common/reduce_order.h says, so the mean,
 * rstd, outputs and dx have the CPU device's bits. dweight and dbias sum over rows in
 * reduce.cu's two passes (chunks of GB_CHUNK_ROWS rows into double partials, then the
 * partials in chunk order), again the CPU's order. The rows are read once per statistic
 * (from L1/L2 after the first): a row of GPT widths does not fit the 16 lanes' registers.
 */
#include "act.cuh"
#include "cuda_device.h"
#include "cuda_status.h"
#include "lanes.cuh"
#include "layernorm.h"

/* Rows per block: one per group of 16 lanes. */
#define ROWS_PER_BLOCK (CUDA_BLOCK / GB_ROW_LANES)

/* LayerNorm of one row given its sum (each lane's share, before the fold): the lanes of
 * the row's group finish the mean, then rstd and the outputs. */
// out, x (N, C) act; weight (C); bias (C) or NULL; mean, rstd (N)
static __device__ void layernorm_row(gb_dtype dtype, void *out, float *mean, float *rstd,
                                     const void *x, const float *weight, const float *bias,
                                     int64_t row, int64_t C, float eps, float lane_sum)
{
    const int64_t base = row * C;
    const float m = gb_lanes_fold_f32(lane_sum) / (float)C;
    float sq = 0.0f;
    for (int64_t c = gb_lane(); c < C; c += GB_ROW_LANES) {
        const float d = gb_act_load(x, dtype, base + c) - m;
        sq = fmaf(d, d, sq);
    }
    const float s = gb_ln_rstd(gb_lanes_fold_f32(sq), C, eps);
    for (int64_t c = gb_lane(); c < C; c += GB_ROW_LANES) {
        const float v = gb_ln_norm(gb_act_load(x, dtype, base + c), m, s) * weight[c];
        gb_act_store(out, dtype, base + c, bias ? v + bias[c] : v);
    }
    if (gb_lane() == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

// out, x (N, C) act; weight (C); bias (C) or NULL; mean, rstd (N)
static __global__ void layernorm_forward_kernel(gb_dtype dtype, void *out, float *mean,
                                                float *rstd, const void *x,
                                                const float *weight, const float *bias,
                                                int64_t N, int64_t C, float eps)
{
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / GB_ROW_LANES;
    if (row >= N)
        return;
    float sum = 0.0f;
    for (int64_t c = gb_lane(); c < C; c += GB_ROW_LANES)
        sum += gb_act_load(x, dtype, row * C + c);
    layernorm_row(dtype, out, mean, rstd, x, weight, bias, row, C, eps, sum);
}

/* The residual add and the LayerNorm after it: each lane adds its columns, stores the sum
 * rounded to dtype and adds that rounded value to the row's sum, so the statistics and
 * outputs are layernorm_forward_kernel's of the stored sum. The later passes read the sum
 * back from the columns the same thread wrote. */
// sum, a, b, out (N, C) act (sum may alias a or b); weight (C); bias (C) or NULL; mean, rstd (N)
static __global__ void add_layernorm_forward_kernel(gb_dtype dtype, void *sum, void *out,
                                                    float *mean, float *rstd, const void *a,
                                                    const void *b, const float *weight,
                                                    const float *bias, int64_t N, int64_t C,
                                                    float eps)
{
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / GB_ROW_LANES;
    if (row >= N)
        return;
    float lane_sum = 0.0f;
    for (int64_t c = gb_lane(); c < C; c += GB_ROW_LANES) {
        const int64_t i = row * C + c;
        const float v = gb_act_round(dtype, gb_act_load(a, dtype, i) + gb_act_load(b, dtype, i));
        gb_act_store(sum, dtype, i, v);
        lane_sum += v;
    }
    layernorm_row(dtype, out, mean, rstd, sum, weight, bias, row, C, eps, lane_sum);
}

// dx (N, C) act +=; dout, x (N, C) act; weight (C); mean, rstd (N)
static __global__ void layernorm_backward_dx_kernel(gb_dtype dtype, void *dx, const void *dout,
                                                    const void *x, const float *weight,
                                                    const float *mean, const float *rstd,
                                                    int64_t N, int64_t C)
{
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / GB_ROW_LANES;
    if (row >= N)
        return;
    const int64_t base = row * C;
    const float m = mean[row], s = rstd[row];
    /* sum of weight * dout, and of weight * dout * (x - mean): the means of dnorm and of
     * dnorm * norm, up to the factors applied below */
    float dot = 0.0f, centred = 0.0f;
    for (int64_t c = gb_lane(); c < C; c += GB_ROW_LANES) {
        const float w = weight[c], d = gb_act_load(dout, dtype, base + c);
        dot = fmaf(w, d, dot);
        centred = fmaf(w * d, gb_act_load(x, dtype, base + c) - m, centred);
    }
    const float dnorm_mean = gb_lanes_fold_f32(dot) / (float)C;
    const float dnorm_norm_mean = gb_lanes_fold_f32(centred) * s / (float)C;
    for (int64_t c = gb_lane(); c < C; c += GB_ROW_LANES) {
        const float d = gb_act_load(dout, dtype, base + c);
        const float norm = gb_ln_norm(gb_act_load(x, dtype, base + c), m, s);
        const float v = gb_act_load(dx, dtype, base + c) +
                        gb_ln_dx(weight[c] * d, norm, dnorm_mean, dnorm_norm_mean, s);
        gb_act_store(dx, dtype, base + c, v);
    }
}

/* Pass one of dweight and dbias: partials (chunks, 2 slab), each chunk's dweight terms
 * then its dbias terms, for columns c0 .. c0 + slab_cols. */
// dout, x (N, C) act; mean, rstd (N); grid (chunks, ceil(slab_cols / CUDA_BLOCK))
static __global__ void layernorm_partials_kernel(gb_dtype dtype, double *partials, int64_t slab,
                                                 const void *dout, const void *x,
                                                 const float *mean, const float *rstd,
                                                 int64_t N, int64_t C, int64_t c0,
                                                 int64_t slab_cols)
{
    const int64_t chunk = blockIdx.x, chunks = gridDim.x;
    const int64_t j = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= slab_cols)
        return;
    const int64_t end = gb_chunk_begin(N, chunk + 1, chunks);
    double pw = 0.0, pb = 0.0;
    for (int64_t row = gb_chunk_begin(N, chunk, chunks); row < end; row++) {
        const int64_t i = row * C + c0 + j;
        const float d = gb_act_load(dout, dtype, i);
        pw += (double)(gb_ln_norm(gb_act_load(x, dtype, i), mean[row], rstd[row]) * d);
        pb += (double)d;
    }
    partials[chunk * 2 * slab + j] = pw;
    partials[chunk * 2 * slab + slab + j] = pb;
}

extern "C" gb_status cuda_layernorm_forward(void *self, gb_dtype dtype, void *out, float *mean,
                                            float *rstd, const void *x, const float *weight,
                                            const float *bias, int64_t N, int64_t C, float eps)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, "layernorm_forward", dtype, N, C);
    if (st != GB_OK || N == 0 || C == 0)
        return st;
    const unsigned blocks = (unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    layernorm_forward_kernel<<<blocks, CUDA_BLOCK, 0, dev->compute>>>(dtype, out, mean, rstd, x,
                                                                     weight, bias, N, C, eps);
    GB_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
    return GB_OK;
}

extern "C" gb_status cuda_add_layernorm_forward(void *self, gb_dtype dtype, void *sum,
                                                void *out, float *mean, float *rstd,
                                                const void *a, const void *b,
                                                const float *weight, const float *bias,
                                                int64_t N, int64_t C, float eps)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, "add_layernorm_forward", dtype, N, C);
    if (st != GB_OK || N == 0 || C == 0)
        return st;
    const unsigned blocks = (unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    add_layernorm_forward_kernel<<<blocks, CUDA_BLOCK, 0, dev->compute>>>(
        dtype, sum, out, mean, rstd, a, b, weight, bias, N, C, eps);
    GB_CUDA_CHECK_LAUNCH("add_layernorm_forward_kernel");
    return GB_OK;
}

extern "C" gb_status cuda_layernorm_backward(void *self, gb_dtype dtype, void *dx,
                                             float *dweight, float *dbias, const void *dout,
                                             const void *x, const float *weight,
                                             const float *mean, const float *rstd, int64_t N,
                                             int64_t C)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, "layernorm_backward", dtype, N, C);
    if (st != GB_OK || N == 0 || C == 0)
        return st;
    const unsigned blocks = (unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    layernorm_backward_dx_kernel<<<blocks, CUDA_BLOCK, 0, dev->compute>>>(
        dtype, dx, dout, x, weight, mean, rstd, N, C);
    GB_CUDA_CHECK_LAUNCH("layernorm_backward_dx_kernel");

    const int64_t chunks = gb_chunk_count(N, GB_CHUNK_ROWS);
    const int64_t slab = cuda_slab_columns(dev, chunks, 2, C);
    if (slab < 1) {
        host->set_error(host, "layernorm_backward: %lld rows need more partial sums than the "
                        "%zu-byte scratch holds", (long long)N, dev->scratch_bytes);
        return GB_ERR_UNSUPPORTED;
    }
    double *partials = (double *)dev->scratch;   // (chunks, 2 slab)
    for (int64_t c0 = 0; c0 < C; c0 += slab) {
        const int64_t n = C - c0 < slab ? C - c0 : slab;
        dim3 grid((unsigned)chunks, (unsigned)((n + CUDA_BLOCK - 1) / CUDA_BLOCK));
        layernorm_partials_kernel<<<grid, CUDA_BLOCK, 0, dev->compute>>>(
            dtype, partials, slab, dout, x, mean, rstd, N, C, c0, n);
        GB_CUDA_CHECK_LAUNCH("layernorm_partials_kernel");
        if ((st = cuda_add_partials(dev, dweight + c0, partials, chunks, 2 * slab, n)) != GB_OK)
            return st;
        if (dbias && (st = cuda_add_partials(dev, dbias + c0, partials + slab, chunks, 2 * slab,
                                             n)) != GB_OK)
            return st;
    }
    return GB_OK;
}
