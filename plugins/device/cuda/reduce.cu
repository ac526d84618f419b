/* Reductions across rows on the CUDA device: bias gradients (bias_backward and the
 * matmul's BIAS_GRAD epilogue), the sum of squares behind the global gradient norm (and
 * the loss scaler's step that reads it, ABI 1.4), and the ordered combine that
 * layernorm.cu shares.
 *
 * No float atomics: every sum has kernels/common/reduce_order.h's order, fixed by the
 * sizes alone. Sums over rows cut the rows into gb_chunk_count() chunks; pass one gives
 * each (chunk, column) a thread that sums the chunk's rows in order into a double partial
 * in scratch, pass two gives 32 neighbouring columns a warp, whose lanes each add their
 * column's partials in chunk order (64 chunks loaded at once, each load of the warp
 * consecutive) and then adds the totals to the f32 output. When the partials of all
 * columns do not fit the scratch, columns are done a slab at a time (the order per column
 * is the same). The sum of squares gives each chunk of GB_CHUNK_ELEMENTS a group of 16
 * lanes (lanes.cuh) and one warp adds the chunk partials in order. These are the CPU
 * device's orders, so f32 results have its bits.
 */
#include "act.cuh"
#include "cuda_device.h"
#include "cuda_status.h"
#include "lanes.cuh"
#include "loss_scale.h"

/* Where row `row` of a column sum starts: rows lie ld apart, `rows_per_batch` rows form
 * one matrix, and matrices lie batch_stride apart (no division for the first matrix, which
 * is all there is but for a batched matmul's bias gradient). */
static __device__ __forceinline__ int64_t row_offset(int64_t row, int64_t ld,
                                                     int64_t rows_per_batch,
                                                     int64_t batch_stride)
{
    return row < rows_per_batch ? row * ld
                                : row / rows_per_batch * batch_stride + row % rows_per_batch * ld;
}

// partials (chunks, slab); src rows x cols act; grid (chunks, ceil(slab_cols / CUDA_BLOCK))
static __global__ void column_partials_kernel(gb_dtype dtype, double *partials, int64_t slab,
                                              const void *src, int64_t rows, int64_t c0,
                                              int64_t slab_cols, int64_t ld,
                                              int64_t rows_per_batch, int64_t batch_stride)
{
    const int64_t chunk = blockIdx.x, chunks = gridDim.x;
    const int64_t j = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= slab_cols)
        return;
    const int64_t end = gb_chunk_begin(rows, chunk + 1, chunks);
    double acc = 0.0;
    for (int64_t r = gb_chunk_begin(rows, chunk, chunks); r < end; r++)
        acc += (double)gb_act_load(src, dtype, row_offset(r, ld, rows_per_batch, batch_stride) +
                                                   c0 + j);
    partials[chunk * slab + j] = acc;
}

/* Chunks a round of warp_ordered_sums adds: a lane loads 2 G of them at once (64 doubles
 * in flight for G = 32), so 256 chunks take four waits for memory. */
#define ROUND_CHUNKS 64

/* total + one round of warp_ordered_sums: the n <= ROUND_CHUNKS chunks from `at` (a lane's
 * first; its next `step` on, each 32 / G chunks on from the one before). */
template <int G>
static __device__ __forceinline__ double add_round(double total, const double *at,
                                                   int64_t step, int n)
{
    constexpr int per = 32 / G, loads = ROUND_CHUNKS / per;   // chunks a load of the warp
    const int lane = (int)(threadIdx.x % 32), g = lane % G;
    double mine[loads];
#pragma unroll
    for (int s = 0; s < loads; s++)
        mine[s] = s * per + lane / G < n ? at[s * step] : 0.0;
#pragma unroll
    for (int s = 0; s < loads; s++)
#pragma unroll
        for (int q = 0; q < per; q++)
            if (s * per + q < n)   // the same for the whole warp
                total += per == 1 ? mine[s] : __shfl_sync(0xffffffffu, mine[s], q * G + g);
    return total;
}

/* The sums of values[p * stride + g] over p < count in increasing p, for the G columns
 * g < G (G divides 32), by one warp, ROUND_CHUNKS chunks a round: lane l loads chunks
 * p0 + s 32 / G + l / G of column l % G, so each load of the warp reads 32 / G chunks of
 * G neighbouring columns; then every lane adds its column's values in chunk order (from
 * the lanes that loaded them, by shuffles, unless it loaded them all itself: G = 32), so
 * the bits are those of a loop over p. Every lane calls it and gets the total of its
 * column, l % G; a lane whose column is past `columns` reads column 0 instead, so that
 * whole rounds load unguarded. */
template <int G>
static __device__ double warp_ordered_sums(const double *values, int64_t count, int64_t stride,
                                           int columns)
{
    const int lane = (int)(threadIdx.x % 32), g = lane % G;
    const int64_t step = (int64_t)(32 / G) * stride;
    const double *at = values + (int64_t)(lane / G) * stride + (g < columns ? g : 0);
    double total = 0.0;
    int64_t p0 = 0;
    for (; p0 + ROUND_CHUNKS <= count; p0 += ROUND_CHUNKS, at += ROUND_CHUNKS * stride)
        total = add_round<G>(total, at, step, ROUND_CHUNKS);
    return p0 < count ? add_round<G>(total, at, step, (int)(count - p0)) : total;
}

/* Warps per block of add_partials_kernel (one: its warps are few, and spread over the
 * SMs), and neighbouring columns a warp: a lane's own, whose chunks of a round it loads
 * at once, each load of the warp 256 consecutive bytes. */
#define WARPS_PER_BLOCK 1
#define COLUMNS_PER_WARP 32

// dst (cols) +=, and dst2 (cols) += from partials + second where dst2 is not NULL;
// partials (chunks, stride >= cols); one warp per COLUMNS_PER_WARP columns of either
static __global__ void add_partials_kernel(float *dst, float *dst2, const double *partials,
                                           int64_t chunks, int64_t stride, int64_t cols,
                                           int64_t second)
{
    const int64_t groups = (cols + COLUMNS_PER_WARP - 1) / COLUMNS_PER_WARP;
    const int64_t w = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    if (w >= (dst2 ? 2 : 1) * groups)
        return;   // the whole warp
    const bool other = w >= groups;
    const int64_t col0 = (other ? w - groups : w) * COLUMNS_PER_WARP;
    const int columns = (int)(cols - col0 < COLUMNS_PER_WARP ? cols - col0 : COLUMNS_PER_WARP);
    const double sum = warp_ordered_sums<COLUMNS_PER_WARP>(
        partials + (other ? second : 0) + col0, chunks, stride, columns);
    const int lane = (int)(threadIdx.x % 32);
    if (lane < columns)
        (other ? dst2 : dst)[col0 + lane] += (float)sum;
}

extern "C" gb_status cuda_add_partials(cuda_device *dev, float *dst, float *dst2,
                                       const double *partials, int64_t chunks, int64_t stride,
                                       int64_t cols, int64_t second)
{
    const gb_host *host = dev->host;
    const int64_t warps = (dst2 ? 2 : 1) * ((cols + COLUMNS_PER_WARP - 1) / COLUMNS_PER_WARP);
    const unsigned blocks = (unsigned)((warps + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
    add_partials_kernel<<<blocks, WARPS_PER_BLOCK * 32, 0, dev->compute>>>(
        dst, dst2, partials, chunks, stride, cols, second);
    GB_CUDA_CHECK_LAUNCH("add_partials_kernel");
    return GB_OK;
}

extern "C" int64_t cuda_slab_columns(cuda_device *dev, int64_t chunks, int64_t per_column,
                                     int64_t cols)
{
    const int64_t fit = (int64_t)(dev->scratch_bytes / sizeof(double)) / (chunks * per_column);
    return fit < cols ? fit : cols;
}

extern "C" gb_status cuda_column_sums(cuda_device *dev, const char *kernel, float *dst,
                                      const void *src, gb_dtype dtype, int64_t rows,
                                      int64_t cols, int64_t ld, int64_t batch,
                                      int64_t batch_stride)
{
    const gb_host *host = dev->host;
    if (rows == 0 || cols == 0)
        return GB_OK;
    const int64_t chunks = gb_chunk_count(rows, GB_CHUNK_ROWS);
    const int64_t slab = cuda_slab_columns(dev, chunks, 1, cols);
    if (slab < 1) {
        host->set_error(host, "%s: %lld rows need more partial sums than the %zu-byte scratch "
                        "holds", kernel, (long long)rows, dev->scratch_bytes);
        return GB_ERR_UNSUPPORTED;
    }
    double *partials = (double *)dev->scratch;   // (chunks, slab)
    for (int64_t c0 = 0; c0 < cols; c0 += slab) {
        const int64_t n = cols - c0 < slab ? cols - c0 : slab;
        dim3 grid((unsigned)chunks, (unsigned)((n + CUDA_BLOCK - 1) / CUDA_BLOCK));
        column_partials_kernel<<<grid, CUDA_BLOCK, 0, dev->compute>>>(
            dtype, partials, slab, src, rows, c0, n, ld, rows / batch, batch_stride);
        GB_CUDA_CHECK_LAUNCH("column_partials_kernel");
        gb_status st = cuda_add_partials(dev, dst + c0, NULL, partials, chunks, slab, n, 0);
        if (st != GB_OK)
            return st;
    }
    return GB_OK;
}

extern "C" gb_status cuda_bias_backward(void *self, gb_dtype dtype, float *dbias,
                                        const void *dout, int64_t N, int64_t C)
{
    cuda_device *dev = (cuda_device *)self;
    gb_status st = cuda_begin(dev, "bias_backward", dtype, N, C);
    if (st != GB_OK)
        return st;
    // dout (N, C) act
    return cuda_column_sums(dev, "bias_backward", dbias, dout, dtype, N, C, C, 1, 0);
}

/* Chunks per block of the sum of squares: one per group of 16 lanes. */
#define SQ_CHUNKS_PER_BLOCK (CUDA_BLOCK / GB_ROW_LANES)

// partials (chunks); x (n)
static __global__ void sum_squares_partials_kernel(double *partials, const float *x, int64_t n,
                                                   int64_t chunks)
{
    const int64_t chunk = (int64_t)blockIdx.x * SQ_CHUNKS_PER_BLOCK + threadIdx.x / GB_ROW_LANES;
    if (chunk >= chunks)
        return;
    const int64_t begin = gb_chunk_begin(n, chunk, chunks);
    const int64_t end = gb_chunk_begin(n, chunk + 1, chunks);
    double acc = 0.0;
    for (int64_t i = begin + gb_lane(); i < end; i += GB_ROW_LANES) {
        const double v = (double)x[i];
        acc = fma(v, v, acc);
    }
    acc = gb_lanes_fold_f64(acc);
    if (gb_lane() == 0)
        partials[chunk] = acc;
}

/* *out = the partials added in order, by one warp. */
// partials (chunks)
static __global__ void sum_partials_kernel(float *out, const double *partials, int64_t chunks)
{
    const double total = warp_ordered_sums<1>(partials, chunks, 1, 1);
    if (threadIdx.x == 0)
        *out = (float)total;
}

extern "C" gb_status cuda_sum_squares(void *self, float *out, const float *x, int64_t n)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, "sum_squares", GB_F32, n, 1);
    if (st != GB_OK)
        return st;
    const int64_t chunks = gb_chunk_count(n, GB_CHUNK_ELEMENTS);
    if ((size_t)chunks * sizeof(double) > dev->scratch_bytes) {
        host->set_error(host, "sum_squares: %lld values need more partial sums than the "
                        "%zu-byte scratch holds", (long long)n, dev->scratch_bytes);
        return GB_ERR_UNSUPPORTED;
    }
    double *partials = (double *)dev->scratch;   // (chunks)
    const unsigned blocks = (unsigned)((chunks + SQ_CHUNKS_PER_BLOCK - 1) / SQ_CHUNKS_PER_BLOCK);
    sum_squares_partials_kernel<<<blocks, CUDA_BLOCK, 0, dev->compute>>>(partials, x, n, chunks);
    GB_CUDA_CHECK_LAUNCH("sum_squares_partials_kernel");
    sum_partials_kernel<<<1, 32, 0, dev->compute>>>(out, partials, chunks);
    GB_CUDA_CHECK_LAUNCH("sum_partials_kernel");
    return GB_OK;
}

/* One step of the loss scaler by one thread (kernels/common/loss_scale.h, the host's rule
 * and bits), reading the squared gradient norm where sum_squares left it. */
static __global__ void loss_scaler_kernel(gb_loss_scaler *scaler, const float *norm_sq)
{
    gb_loss_scaler_step(scaler, gb_loss_scale_found_inf(*norm_sq));
}

extern "C" gb_status cuda_loss_scaler_update(void *self, gb_loss_scaler *scaler,
                                             const float *norm_sq)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    if (!scaler || !norm_sq) {
        host->set_error(host, "loss_scaler_update: scaler and norm_sq must not be NULL");
        return GB_ERR_INVALID_ARG;
    }
    gb_status st = cuda_begin(dev, "loss_scaler_update", GB_F32, 1, 1);
    if (st != GB_OK)
        return st;
    loss_scaler_kernel<<<1, 1, 0, dev->compute>>>(scaler, norm_sq);
    GB_CUDA_CHECK_LAUNCH("loss_scaler_kernel");
    return GB_OK;
}
