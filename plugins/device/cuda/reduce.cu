/* Reductions across rows on the CUDA device: bias gradients (bias_backward and the
 * matmul's BIAS_GRAD epilogue), the sum of squares behind the global gradient norm (and
 * the loss scaler's step that reads it, ABI 1.4), and the ordered combine that
 * layernorm.cu shares.
 *
 * No float atomics: every sum has kernels/common/reduce_order.h's order, fixed by the
 * sizes alone. Sums over rows cut the rows into gb_chunk_count() chunks; pass one gives
 * each (chunk, column) a thread that sums the chunk's rows in order into a double partial
 * in scratch, pass two gives each column a warp that adds the partials in chunk order (32
 * loaded at once, added in order by shuffles) and then adds the total to the f32 output. When the partials of all columns do not fit the
 * scratch, columns are done a slab at a time (the order per column is the same). The sum
 * of squares gives each chunk of GB_CHUNK_ELEMENTS a group of 16 lanes (lanes.cuh) and one
 * warp adds the chunk partials in order. These are the CPU device's orders, so f32
 * results have its bits.
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

/* The sum of values[p * stride] for p < count in increasing p, by one warp (every lane
 * calls it and gets the total): lane l loads value p0 + l, 32 in one request, and every
 * lane adds the 32 in index order, so the bits are those of a loop over p. */
static __device__ double warp_ordered_sum(const double *values, int64_t count, int64_t stride)
{
    const int lane = (int)(threadIdx.x % 32);
    double total = 0.0;
    for (int64_t p0 = 0; p0 < count; p0 += 32) {
        const int64_t p = p0 + lane;
        const double mine = p < count ? values[p * stride] : 0.0;
        const int n = (int)(count - p0 < 32 ? count - p0 : 32);
        for (int l = 0; l < n; l++)
            total += __shfl_sync(0xffffffffu, mine, l);
    }
    return total;
}

/* Warps per block of add_partials_kernel, one column each. */
#define COLUMNS_PER_BLOCK (CUDA_BLOCK / 32)

// dst (cols) +=, and dst2 (cols) += from partials + second where dst2 is not NULL;
// partials (chunks, stride >= cols); one warp per column of either
static __global__ void add_partials_kernel(float *dst, float *dst2, const double *partials,
                                           int64_t chunks, int64_t stride, int64_t cols,
                                           int64_t second)
{
    const int64_t c = (int64_t)blockIdx.x * COLUMNS_PER_BLOCK + threadIdx.x / 32;
    if (c >= (dst2 ? 2 : 1) * cols)
        return;   // the whole warp
    const bool other = c >= cols;
    const int64_t col = other ? c - cols : c;
    const double sum = warp_ordered_sum(partials + (other ? second : 0) + col, chunks, stride);
    if (threadIdx.x % 32 == 0)
        (other ? dst2 : dst)[col] += (float)sum;
}

extern "C" gb_status cuda_add_partials(cuda_device *dev, float *dst, float *dst2,
                                       const double *partials, int64_t chunks, int64_t stride,
                                       int64_t cols, int64_t second)
{
    const gb_host *host = dev->host;
    const int64_t warps = (dst2 ? 2 : 1) * cols;
    const unsigned blocks = (unsigned)((warps + COLUMNS_PER_BLOCK - 1) / COLUMNS_PER_BLOCK);
    add_partials_kernel<<<blocks, CUDA_BLOCK, 0, dev->compute>>>(dst, dst2, partials, chunks,
                                                                 stride, cols, second);
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
    const double total = warp_ordered_sum(partials, chunks, 1);
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
