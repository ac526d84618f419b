/* Softmax cross-entropy on the CUDA device, fused with its gradient
 * (kernels/common/crossentropy.h), over rows of V logits `ld` apart (ABI 1.3; a padded
 * vocabulary's columns past V are neither read nor written).
 *
 * One block per row of V logits, three passes over the row: the maximum; the softmax
 * denominator, GB_CE_EXP_BLOCK columns at a time, each block of exponentials summed in
 * double by a group of 16 lanes (lanes.cuh) and the block sums added in column order by one
 * thread, which is the CPU device's order, so the sum has its bits; and, when a gradient is
 * wanted, dlogits from the exponentials computed again (the same bits) rather than kept, so
 * no buffer beyond dlogits is needed and dlogits may alias the logits (every element is
 * read before it is written, by the thread that writes it). The loss's log is CUDA's, which
 * may differ from libm's by an ulp of a double.
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

/* Groups of 16 lanes per block: each takes every GROUPS-th block of columns. */
#define GROUPS (CUDA_BLOCK / GB_ROW_LANES)

// losses (N); dlogits (N, ld) act or NULL, may alias logits; logits (N, ld) act, V columns
// used; targets (N); dloss_scale: NULL or one f32; dynamic shared memory: one double per
// block of GB_CE_EXP_BLOCK columns
static __global__ void cross_entropy_kernel(gb_dtype dtype, float *losses, void *dlogits,
                                            const void *logits, int64_t ld,
                                            const int32_t *targets, int64_t V, float dloss,
                                            const float *dloss_scale)
{
    extern __shared__ double block_sums[];
    __shared__ float warp_max[CUDA_BLOCK / 32];
    __shared__ float row_max, inv_sum;
    const int64_t row = blockIdx.x, base = row * ld;
    const int32_t target = targets[row];
    const int valid = target >= 0 && target < V;

    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
        const float v = gb_act_load(logits, dtype, base + c);
        m = v > m ? v : m;
    }
    for (int width = 16; width > 0; width /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, m, width);
        m = other > m ? other : m;
    }
    if (threadIdx.x % 32 == 0)
        warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float all = warp_max[0];
        for (int w = 1; w < CUDA_BLOCK / 32; w++)
            all = warp_max[w] > all ? warp_max[w] : all;
        row_max = all;
    }
    __syncthreads();
    const float max = row_max;

    const int64_t n_blocks = (V + GB_CE_EXP_BLOCK - 1) / GB_CE_EXP_BLOCK;
    for (int64_t blk = threadIdx.x / GB_ROW_LANES; blk < n_blocks; blk += GROUPS) {
        const int64_t c0 = blk * GB_CE_EXP_BLOCK;
        const int64_t len = V - c0 < GB_CE_EXP_BLOCK ? V - c0 : GB_CE_EXP_BLOCK;
        double acc = 0.0;
        for (int64_t i = gb_lane(); i < len; i += GB_ROW_LANES)
            acc += (double)gb_exp_fast(gb_act_load(logits, dtype, base + c0 + i) - max);
        acc = gb_lanes_fold_f64(acc);
        if (gb_lane() == 0)
            block_sums[blk] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double sum = 0.0;
        for (int64_t blk = 0; blk < n_blocks; blk++)
            sum += block_sums[blk];
        losses[row] = valid ? gb_ce_loss(sum, max, gb_act_load(logits, dtype, base + target))
                            : NAN;
        inv_sum = gb_ce_inv_sum(sum);
    }
    __syncthreads();   // the target's logit is read before dlogits overwrites it
    if (!dlogits)
        return;
    const float inv = inv_sum;
    const float d = dloss_scale ? dloss * *dloss_scale : dloss;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
        const float e = gb_exp_fast(gb_act_load(logits, dtype, base + c) - max);
        gb_act_store(dlogits, dtype, base + c,
                     valid ? gb_ce_dlogit(e, inv, c == target, d) : NAN);
    }
}

extern "C" gb_status cuda_cross_entropy(void *self, gb_dtype dtype, float *losses,
                                        void *dlogits, const void *logits,
                                        const int32_t *targets, int64_t N, int64_t V,
                                        float dloss)
{
    return cuda_cross_entropy_ld(self, dtype, losses, dlogits, logits, V, targets, N, V, dloss);
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
    const size_t shared = (size_t)((V + GB_CE_EXP_BLOCK - 1) / GB_CE_EXP_BLOCK) * sizeof(double);
    if (V == 0 || shared > 32768 || N > INT32_MAX || ld < V) {
        host->set_error(host, "cross_entropy on the cuda device takes 1 to %d columns, rows at "
                        "least that far apart, and at most 2^31 - 1 rows; this call has %lld x "
                        "%lld, rows %lld apart", 4096 * GB_CE_EXP_BLOCK, (long long)N,
                        (long long)V, (long long)ld);
        return GB_ERR_UNSUPPORTED;
    }
    cross_entropy_kernel<<<(unsigned)N, CUDA_BLOCK, shared, dev->compute>>>(
        dtype, losses, dlogits, logits, ld, targets, V, dloss, dloss_scale);
    GB_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
    return GB_OK;
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
