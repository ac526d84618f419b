/* LayerNorm on the CUDA device, forward (alone, or after the residual add it follows) and
 * backward (biased variance, as PyTorch and llm.c; the formulas of kernels/common/layernorm.h).
 *
 * Every kernel reads its rows from DRAM once: a block copies a tile of whole rows into
 * shared memory in 16-byte units (rows.cuh), works on the tile there, and writes its
 * results back the same way (dx, which the backward adds to, is read and written in
 * place, 16 bytes at a time, once the row sums are known). Within the tile each row gets
 * a group of 16 lanes (half a warp, lanes.cuh): lane j reads columns j, j + 16, ... and
 * the row's sums fold as kernels/common/reduce_order.h says, so the mean, rstd, outputs
 * and dx have the CPU device's bits. The weight and bias are copied to shared memory
 * once per block, and the blocks loop over the tiles (no more blocks than the GPU holds
 * at once; the one-pass backward below has a block per chunk of rows instead).
 *
 * dweight and dbias sum over rows in reduce.cu's order: chunks of GB_CHUNK_ROWS rows into
 * double partials, then the partials in chunk order (cuda_add_partials), again the CPU's
 * order. The backward takes its tiles a chunk a block (layernorm_backward_kernel) and adds
 * each tile's rows to the chunk's partials while they are in shared memory, so dout and x
 * are read from DRAM once. Where every column's partials do not fit the scratch (about
 * 170k rows at C = 768) or the chunk's sums and a tile the shared memory (C past 8.3k in
 * f32, 9.6k in 16 bits), dx is a pass of its own and the partials another (a block per
 * chunk and 256 columns, the chunk's rows copied to shared memory a slice at a time, a
 * slab of columns at a time), which reads them again.
 */
#include <string.h>

#include "act.cuh"
#include "cuda_device.h"
#include "cuda_status.h"
#include "lanes.cuh"
#include "layernorm.h"
#include "rows.cuh"
#include "vec16.cuh"

/* Rows per tile at most (one group of 16 lanes each: 256 threads). */
#define TILE_ROWS_MAX (CUDA_BLOCK / GB_ROW_LANES)
/* Shared memory a block takes without opting in to more. */
#define SMEM_DEFAULT (48u << 10)
/* Bytes set aside for a kernel's static shared memory (the backward's row terms). */
#define LN_STATIC 1024u
/* Rows per slice of a chunk in the dweight/dbias partials: two slices of this many rows
 * and CUDA_BLOCK f32 columns take 16 KiB, so 8 blocks of 256 threads fit an SM and the
 * grid of GPT-2's shapes runs in one wave. */
#define PARTIAL_ROWS 8
/* Blocks of the partials kernel an SM must hold (its registers bounded to fit): 6 x 132
 * SMs take GPT-2's 256 chunks x 3 column tiles in one wave. */
#define PARTIAL_BLOCKS_PER_SM 6

/* Where a block keeps its rows: `tiles` tiles of rows_per_tile rows, `stride` bytes apart
 * (gb_lane_tile_stride), after the f32 weight (and bias) of `vectors` rows of C. */
typedef struct ln_layout {
    int64_t C, stride, row_bytes, vector_bytes;
    int rows_per_tile, tiles, vectors;
} ln_layout;

static __host__ __device__ size_t ln_shared_bytes(const ln_layout *l)
{
    return (size_t)(l->vectors * l->vector_bytes + l->tiles * l->rows_per_tile * l->stride);
}

/* Tile t's rows (t < l->tiles) in the block's shared memory. */
static __device__ unsigned char *ln_tile(unsigned char *shared, const ln_layout *l, int t)
{
    return shared + l->vectors * l->vector_bytes + (int64_t)t * l->rows_per_tile * l->stride;
}

/* The block's copy of vector v (weight 0, bias 1), f32. */
static __device__ float *ln_vector(unsigned char *shared, const ln_layout *l, int v)
{
    return (float *)(shared + v * l->vector_bytes);
}

/* Copies the f32 vectors (NULL ones skipped) into shared memory once per block. */
static __device__ void ln_load_vectors(unsigned char *shared, const ln_layout *l,
                                       const float *weight, const float *bias)
{
    gb_block_copy_rows(ln_vector(shared, l, 0), 0, weight, 0, 1, l->C * 4);
    if (bias)
        gb_block_copy_rows(ln_vector(shared, l, 1), 0, bias, 0, 1, l->C * 4);
}

/* Rows [row0, row0 + rows) of src into tile t, or back from it into dst. */
static __device__ void ln_load_rows(unsigned char *shared, const ln_layout *l, int t,
                                    const void *src, int64_t row0, int rows)
{
    gb_block_copy_rows(ln_tile(shared, l, t), l->stride,
                       (const char *)src + row0 * l->row_bytes, l->row_bytes, rows,
                       l->row_bytes);
}

static __device__ void ln_store_rows(void *dst, unsigned char *shared, const ln_layout *l,
                                     int t, int64_t row0, int rows)
{
    gb_block_copy_rows((char *)dst + row0 * l->row_bytes, l->row_bytes, ln_tile(shared, l, t),
                       l->stride, rows, l->row_bytes);
}

/* LayerNorm of one row given its sum (each lane's share, before the fold): the lanes of
 * the row's group finish the mean, then rstd and the outputs. x and out are the row in
 * shared memory (out may be x: each element is read before the same lane writes it). */
// out, x (C) act; weight (C); bias (C) or NULL; mean, rstd: the row's
static __device__ void layernorm_row(gb_dtype dtype, void *out, float *mean, float *rstd,
                                     const void *x, const float *weight, const float *bias,
                                     int C, float eps, float lane_sum)
{
    const float m = gb_lanes_fold_f32(lane_sum) / (float)C;
    float sq = 0.0f;
    for (int c = gb_lane(); c < C; c += GB_ROW_LANES) {
        const float d = gb_act_load(x, dtype, c) - m;
        sq = fmaf(d, d, sq);
    }
    const float s = gb_ln_rstd(gb_lanes_fold_f32(sq), C, eps);
    for (int c = gb_lane(); c < C; c += GB_ROW_LANES) {
        const float v = gb_ln_norm(gb_act_load(x, dtype, c), m, s) * weight[c];
        gb_act_store(out, dtype, c, bias ? v + bias[c] : v);
    }
    if (gb_lane() == 0) {
        *mean = m;
        *rstd = s;
    }
}

/* LayerNorm forward, or (b set) the residual add and the LayerNorm after it: each lane
 * adds its columns, keeps the sum rounded to dtype (tile 0, later written to `sum`) and
 * adds that rounded value to the row's sum, so the statistics and outputs are those of
 * the stored sum. The outputs go to tile 1 after an add (tile 0 holds the sum), else over
 * the inputs in tile 0. */
// out, a (N, C) act; b, sum (N, C) act or NULL (sum may alias a or b); weight (C);
// bias (C) or NULL; mean, rstd (N). Instantiated per dtype (act.cuh: gb_act_f32, ...).
template <typename Dtype>
static __global__ void layernorm_forward_kernel(ln_layout l, void *out, void *sum, float *mean,
                                                float *rstd, const void *a, const void *b,
                                                const float *weight, const float *bias,
                                                int64_t N, float eps)
{
    constexpr gb_dtype dtype = Dtype::dtype;
    extern __shared__ __align__(16) unsigned char ln_shared[];
    ln_load_vectors(ln_shared, &l, weight, bias);
    const int group = (int)threadIdx.x / GB_ROW_LANES;
    const int C = (int)l.C;   // a row fits in shared memory: 32-bit indices within it
    for (int64_t row0 = (int64_t)blockIdx.x * l.rows_per_tile; row0 < N;
         row0 += (int64_t)gridDim.x * l.rows_per_tile) {
        const int rows = (int)(N - row0 < l.rows_per_tile ? N - row0 : l.rows_per_tile);
        __syncthreads();   // the previous tile is written out, the vectors are in
        ln_load_rows(ln_shared, &l, 0, a, row0, rows);
        if (b)
            ln_load_rows(ln_shared, &l, 1, b, row0, rows);
        __syncthreads();
        if (group < rows) {
            unsigned char *x = ln_tile(ln_shared, &l, 0) + group * l.stride;
            unsigned char *y = b ? ln_tile(ln_shared, &l, 1) + group * l.stride : x;
            float lane_sum = 0.0f;
            for (int c = gb_lane(); c < C; c += GB_ROW_LANES) {
                float v = gb_act_load(x, dtype, c);
                if (b) {
                    v = gb_act_round(dtype, v + gb_act_load(y, dtype, c));
                    gb_act_store(x, dtype, c, v);
                }
                lane_sum += v;
            }
            const int64_t row = row0 + group;
            layernorm_row(dtype, y, mean + row, rstd + row, x, ln_vector(ln_shared, &l, 0),
                          bias ? ln_vector(ln_shared, &l, 1) : NULL, C, eps, lane_sum);
        }
        __syncthreads();
        if (b)
            ln_store_rows(sum, ln_shared, &l, 0, row0, rows);
        ln_store_rows(out, ln_shared, &l, b ? 1 : 0, row0, rows);
    }
}

/* A row's terms of dx: its mean and rstd, and the means of dnorm and of dnorm * norm. */
typedef struct ln_dx_terms {
    float mean, rstd, dnorm_mean, dnorm_norm_mean;
} ln_dx_terms;
static_assert(sizeof(ln_dx_terms) * GB_CHUNK_ROWS <= LN_STATIC, "a chunk's row terms fit");

/* The elements of a unit: gb_vec16 (vec16.cuh, which says why a unit is copied to it)
 * for a 16-byte one, else the lone element itself. */
template <typename Unit>
struct ln_elements_of {
    typedef Unit type;
};
template <>
struct ln_elements_of<uint4> {
    typedef gb_vec16 type;
};

/* Where gb_act_load and gb_act_store find them: the member of the dtype's type. */
static __device__ __forceinline__ void *ln_elements(gb_vec16 *v, gb_dtype dtype)
{
    return dtype == GB_F32 ? (void *)v->f : (void *)v->h;
}
static __device__ __forceinline__ void *ln_elements(float *v, gb_dtype) { return v; }
static __device__ __forceinline__ void *ln_elements(uint16_t *v, gb_dtype) { return v; }

/* dx += the input gradient of the tile's rows, Per elements (one Unit) at a time read from
 * and written to DRAM; dout and x from the tile's rows in shared memory (16-byte units
 * there too when Per > 1). Per > 1 needs 16-byte aligned rows on both sides. */
template <typename Unit, int Per>
static __device__ void ln_dx_update(const ln_layout *l, unsigned char *shared, gb_dtype dtype,
                                    void *dx, int64_t row0, int rows,
                                    const ln_dx_terms *terms)
{
    typedef typename ln_elements_of<Unit>::type elements;
    const int64_t per_row = l->C / Per, size = gb_act_size(dtype);
    const float *w = ln_vector(shared, l, 0);
    for (int64_t u = threadIdx.x; u < rows * per_row; u += blockDim.x) {
        const int r = (int)(u / per_row);
        const int64_t c0 = u % per_row * Per;
        const ln_dx_terms t = terms[r];
        const Unit dy_unit = *(const Unit *)(ln_tile(shared, l, 0) + r * l->stride + c0 * size);
        const Unit xs_unit = *(const Unit *)(ln_tile(shared, l, 1) + r * l->stride + c0 * size);
        Unit *at = (Unit *)((char *)dx + ((row0 + r) * l->C + c0) * size);
        Unit g_unit = *at;
        elements dy, xs, g;
        memcpy(&dy, &dy_unit, sizeof dy);
        memcpy(&xs, &xs_unit, sizeof xs);
        memcpy(&g, &g_unit, sizeof g);
#pragma unroll
        for (int e = 0; e < Per; e++) {
            const float norm = gb_ln_norm(gb_act_load(ln_elements(&xs, dtype), dtype, e), t.mean,
                                          t.rstd);
            const float v = gb_act_load(ln_elements(&g, dtype), dtype, e) +
                            gb_ln_dx(w[c0 + e] * gb_act_load(ln_elements(&dy, dtype), dtype, e),
                                     norm, t.dnorm_mean, t.dnorm_norm_mean, t.rstd);
            gb_act_store(ln_elements(&g, dtype), dtype, e, v);
        }
        memcpy(&g_unit, &g, sizeof g);
        *at = g_unit;
    }
}

/* One tile of the backward: rows [row0, row0 + rows) of dout and x into tiles 0 and 1,
 * each row's sums by its 16 lanes in the CPU's order (its terms, into `terms`), then dx
 * += the input gradient, updated in place in DRAM, 16 bytes at a time where its rows are
 * aligned (`wide`). Starts with a barrier (the previous tile used up, the weight in) and
 * leaves the tiles and terms for the caller to read. */
// dx (N, C) act +=; dout, x (N, C) act; mean, rstd (N). Per dtype, as above.
template <typename Dtype>
static __device__ void ln_backward_tile(const ln_layout *l, unsigned char *shared,
                                        ln_dx_terms *terms, void *dx, const void *dout,
                                        const void *x, const float *mean, const float *rstd,
                                        int64_t row0, int rows, bool wide)
{
    constexpr gb_dtype dtype = Dtype::dtype;
    const float *w = ln_vector(shared, l, 0);
    const int group = (int)threadIdx.x / GB_ROW_LANES;
    __syncthreads();   // the previous tile is used up, the weight is in
    ln_load_rows(shared, l, 0, dout, row0, rows);
    ln_load_rows(shared, l, 1, x, row0, rows);
    __syncthreads();
    if (group < rows) {
        const unsigned char *dy = ln_tile(shared, l, 0) + group * l->stride;
        const unsigned char *xs = ln_tile(shared, l, 1) + group * l->stride;
        const float m = mean[row0 + group], s = rstd[row0 + group];
        /* sum of weight * dout, and of weight * dout * (x - mean): the means of dnorm
         * and of dnorm * norm, up to the factors applied below */
        float dot = 0.0f, centred = 0.0f;
        for (int64_t c = gb_lane(); c < l->C; c += GB_ROW_LANES) {
            const float d = gb_act_load(dy, dtype, c);
            dot = fmaf(w[c], d, dot);
            centred = fmaf(w[c] * d, gb_act_load(xs, dtype, c) - m, centred);
        }
        const float dnorm_mean = gb_lanes_fold_f32(dot) / (float)l->C;
        const float dnorm_norm_mean = gb_lanes_fold_f32(centred) * s / (float)l->C;
        if (gb_lane() == 0)
            terms[group] = ln_dx_terms{m, s, dnorm_mean, dnorm_norm_mean};
    }
    __syncthreads();
    if (dtype == GB_F32 && wide)
        ln_dx_update<uint4, 4>(l, shared, dtype, dx, row0, rows, terms);
    else if (wide)
        ln_dx_update<uint4, 8>(l, shared, dtype, dx, row0, rows, terms);
    else if (dtype == GB_F32)
        ln_dx_update<float, 1>(l, shared, dtype, dx, row0, rows, terms);
    else
        ln_dx_update<uint16_t, 1>(l, shared, dtype, dx, row0, rows, terms);
}

/* Whether dx's rows can be updated 16 bytes at a time. */
static __device__ bool ln_dx_wide(const void *dx, const ln_layout *l)
{
    return ((uintptr_t)dx | (uint64_t)l->row_bytes) % 16 == 0;
}

/* dx += the LayerNorm's input gradient, the blocks taking turns over the tiles; dweight
 * and dbias are left to layernorm_partials_kernel. */
// dx (N, C) act +=; dout, x (N, C) act; weight (C); mean, rstd (N). Per dtype, as above.
template <typename Dtype>
static __global__ void layernorm_backward_dx_kernel(ln_layout l, void *dx, const void *dout,
                                                    const void *x, const float *weight,
                                                    const float *mean, const float *rstd,
                                                    int64_t N)
{
    extern __shared__ __align__(16) unsigned char ln_shared[];
    __shared__ ln_dx_terms terms[TILE_ROWS_MAX];
    ln_load_vectors(ln_shared, &l, weight, NULL);
    const bool wide = ln_dx_wide(dx, &l);
    for (int64_t row0 = (int64_t)blockIdx.x * l.rows_per_tile; row0 < N;
         row0 += (int64_t)gridDim.x * l.rows_per_tile) {
        const int rows = (int)(N - row0 < l.rows_per_tile ? N - row0 : l.rows_per_tile);
        ln_backward_tile<Dtype>(&l, ln_shared, terms, dx, dout, x, mean, rstd, row0, rows, wide);
    }
}

/* The tile's rows added in order to its chunk's sums of norm * dout (dweight's) and of
 * dout (dbias's), in double, for the columns of this thread (threadIdx.x and every
 * blockDim.x on): layernorm_partials_kernel's terms, in its order. */
template <typename Dtype>
static __device__ void ln_add_tile_sums(const ln_layout *l, unsigned char *shared,
                                        const ln_dx_terms *terms, int rows, double *sum_w,
                                        double *sum_b)
{
    constexpr gb_dtype dtype = Dtype::dtype;
    const unsigned char *dy = ln_tile(shared, l, 0), *xs = ln_tile(shared, l, 1);
    for (int64_t c = threadIdx.x; c < l->C; c += blockDim.x) {
        double pw = sum_w[c], pb = sum_b[c];
        for (int r = 0; r < rows; r++) {
            const float d = gb_act_load(dy + r * l->stride, dtype, c);
            const float norm = gb_ln_norm(gb_act_load(xs + r * l->stride, dtype, c),
                                          terms[r].mean, terms[r].rstd);
            pw += (double)(norm * d);
            pb += (double)d;
        }
        sum_w[c] = pw;
        sum_b[c] = pb;
    }
}

/* The whole backward but the partials' sum: dx, and the partials of dweight and dbias,
 * a block per chunk of rows, so that dout and x are read from DRAM once (the two-pass
 * form reads them again for the partials). The block takes its chunk in as few tiles as
 * the shared memory allows (one of 64 rows, 1024 threads, at GPT-2's C = 768 in 16 bits;
 * two in f32): a chunk's tiles one after another would leave each warp as many waits
 * for memory, with few warps an SM to hide them. It keeps the chunk's sums in shared
 * memory (vectors 1-2: dweight's, 3-4: dbias's), each column's with the thread that
 * adds to it. */
// partials (chunks, 2 C): each chunk's dweight sums, then its dbias sums; grid: the
// chunks; the rest as layernorm_backward_dx_kernel.
template <typename Dtype>
static __global__ void __launch_bounds__(GB_CHUNK_ROWS * GB_ROW_LANES)
layernorm_backward_kernel(ln_layout l, void *dx, double *partials, const void *dout,
                          const void *x, const float *weight, const float *mean,
                          const float *rstd, int64_t N)
{
    extern __shared__ __align__(16) unsigned char ln_shared[];
    __shared__ ln_dx_terms terms[GB_CHUNK_ROWS];
    ln_load_vectors(ln_shared, &l, weight, NULL);
    double *sum_w = (double *)ln_vector(ln_shared, &l, 1);
    double *sum_b = (double *)ln_vector(ln_shared, &l, 3);
    for (int64_t c = threadIdx.x; c < l.C; c += blockDim.x)
        sum_w[c] = sum_b[c] = 0.0;
    const bool wide = ln_dx_wide(dx, &l);
    const int64_t chunk = blockIdx.x, end = gb_chunk_begin(N, chunk + 1, gridDim.x);
    for (int64_t row0 = gb_chunk_begin(N, chunk, gridDim.x); row0 < end;
         row0 += l.rows_per_tile) {
        const int rows = (int)(end - row0 < l.rows_per_tile ? end - row0 : l.rows_per_tile);
        ln_backward_tile<Dtype>(&l, ln_shared, terms, dx, dout, x, mean, rstd, row0, rows, wide);
        ln_add_tile_sums<Dtype>(&l, ln_shared, terms, rows, sum_w, sum_b);
    }
    for (int64_t c = threadIdx.x; c < l.C; c += blockDim.x) {
        partials[chunk * 2 * l.C + c] = sum_w[c];
        partials[chunk * 2 * l.C + l.C + c] = sum_b[c];
    }
}

/* Pass one of dweight and dbias: partials (chunks, 2 slab), each chunk's dweight terms
 * then its dbias terms, for columns c0 .. c0 + slab_cols. The chunk's rows reach shared
 * memory PARTIAL_ROWS at a time, the block's CUDA_BLOCK columns of dout and x; thread j
 * then adds its column down the rows in order. */
// dout, x (N, C) act; mean, rstd (N); grid (chunks, ceil(slab_cols / CUDA_BLOCK)). Per
// dtype, as above.
template <typename Dtype>
static __global__ void __launch_bounds__(CUDA_BLOCK, PARTIAL_BLOCKS_PER_SM)
layernorm_partials_kernel(double *partials, int64_t slab, const void *dout, const void *x,
                          const float *mean, const float *rstd, int64_t N, int64_t C,
                          int64_t c0, int64_t slab_cols)
{
    constexpr gb_dtype dtype = Dtype::dtype;
    __shared__ __align__(16) float dout_rows[PARTIAL_ROWS * CUDA_BLOCK];
    __shared__ __align__(16) float x_rows[PARTIAL_ROWS * CUDA_BLOCK];
    __shared__ float row_mean[GB_CHUNK_ROWS], row_rstd[GB_CHUNK_ROWS];
    const int64_t chunk = blockIdx.x, chunks = gridDim.x;
    const int64_t col0 = c0 + (int64_t)blockIdx.y * CUDA_BLOCK;
    const int64_t width = slab_cols - (int64_t)blockIdx.y * CUDA_BLOCK < CUDA_BLOCK
                              ? slab_cols - (int64_t)blockIdx.y * CUDA_BLOCK
                              : CUDA_BLOCK;
    const int64_t size = gb_act_size(dtype);
    const int64_t begin = gb_chunk_begin(N, chunk, chunks);
    const int64_t end = gb_chunk_begin(N, chunk + 1, chunks);
    for (int64_t r = threadIdx.x; r < end - begin; r += blockDim.x) {
        row_mean[r] = mean[begin + r];
        row_rstd[r] = rstd[begin + r];
    }
    const int j = (int)threadIdx.x;
    double pw = 0.0, pb = 0.0;
    for (int64_t r0 = begin; r0 < end; r0 += PARTIAL_ROWS) {
        const int rows = (int)(end - r0 < PARTIAL_ROWS ? end - r0 : PARTIAL_ROWS);
        __syncthreads();   // the previous slice is summed, the statistics are in
        gb_block_copy_rows(dout_rows, width * size, (const char *)dout + (r0 * C + col0) * size,
                           C * size, rows, width * size);
        gb_block_copy_rows(x_rows, width * size, (const char *)x + (r0 * C + col0) * size,
                           C * size, rows, width * size);
        __syncthreads();
        if (j >= width)
            continue;
        for (int r = 0; r < rows; r++) {
            const float d = gb_act_load(dout_rows, dtype, r * width + j);
            const float norm = gb_ln_norm(gb_act_load(x_rows, dtype, r * width + j),
                                          row_mean[r0 - begin + r], row_rstd[r0 - begin + r]);
            pw += (double)(norm * d);
            pb += (double)d;
        }
    }
    if (j >= width)
        return;
    const int64_t at = col0 - c0 + j;
    partials[chunk * 2 * slab + at] = pw;
    partials[chunk * 2 * slab + slab + at] = pb;
}

/* The layout of `tiles` tiles of C-wide rows and `vectors` f32 vectors: as many rows per
 * tile, up to `rows` (a power of two), as fit `budget` bytes, else one. */
static ln_layout ln_fit(gb_dtype dtype, int64_t C, int tiles, int vectors, size_t budget,
                        int rows)
{
    ln_layout l;
    l.C = C;
    l.row_bytes = C * gb_act_size(dtype);
    l.stride = gb_lane_tile_stride(l.row_bytes);
    l.vector_bytes = (C * 4 + 15) / 16 * 16;
    l.tiles = tiles;
    l.vectors = vectors;
    l.rows_per_tile = rows;
    while (l.rows_per_tile > 1 && ln_shared_bytes(&l) > budget)
        l.rows_per_tile /= 2;
    return l;
}

/* A launch of `kernel` with layout l: its limit raised where l takes more than the
 * default shared memory, by LN_STATIC more (the attribute covers the static part too, as
 * the emulator reads it). */
template <typename Kernel>
static gb_status ln_allow(cuda_device *dev, Kernel *kernel, const ln_layout *l)
{
    const gb_host *host = dev->host;
    if (ln_shared_bytes(l) > SMEM_DEFAULT - LN_STATIC)
        GB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)(ln_shared_bytes(l) + LN_STATIC)));
    return GB_OK;
}

/* ln_fit within the default shared memory (or one row past it), for a launch of `kernel`. */
template <typename Kernel>
static gb_status ln_plan(cuda_device *dev, Kernel *kernel, gb_dtype dtype, int64_t C,
                         int tiles, int vectors, ln_layout *l)
{
    *l = ln_fit(dtype, C, tiles, vectors, SMEM_DEFAULT - LN_STATIC, TILE_ROWS_MAX);
    return ln_allow(dev, kernel, l);
}

/* Blocks for a layout over N rows: every tile a block's turn, no more than fit at once. */
static unsigned ln_blocks(const cuda_device *dev, const ln_layout *l, int64_t N)
{
    return cuda_resident_blocks(dev, (N + l->rows_per_tile - 1) / l->rows_per_tile,
                                l->rows_per_tile * GB_ROW_LANES, ln_shared_bytes(l));
}

/* The forward's launch for the dtype of Dtype. */
template <typename Dtype>
static gb_status launch_forward(cuda_device *dev, void *sum, void *out, float *mean,
                                float *rstd, const void *a, const void *b, const float *weight,
                                const float *bias, int64_t N, int64_t C, float eps)
{
    const gb_host *host = dev->host;
    ln_layout l;
    gb_status st = ln_plan(dev, layernorm_forward_kernel<Dtype>, Dtype::dtype, C, b ? 2 : 1, 2,
                           &l);
    if (st != GB_OK)
        return st;
    layernorm_forward_kernel<Dtype><<<ln_blocks(dev, &l, N), l.rows_per_tile * GB_ROW_LANES,
                                      ln_shared_bytes(&l), dev->compute>>>(
        l, out, sum, mean, rstd, a, b, weight, bias, N, eps);
    GB_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
    return GB_OK;
}

/* The forward with or without the add before it (b and sum NULL: none). */
static gb_status layernorm_forward(cuda_device *dev, const char *name, gb_dtype dtype,
                                   void *sum, void *out, float *mean, float *rstd,
                                   const void *a, const void *b, const float *weight,
                                   const float *bias, int64_t N, int64_t C, float eps)
{
    gb_status st = cuda_begin(dev, name, dtype, N, C);
    if (st != GB_OK || N == 0 || C == 0)
        return st;
    return GB_ACT_DISPATCH(dtype, launch_forward, dev, sum, out, mean, rstd, a, b, weight, bias,
                           N, C, eps);
}

extern "C" gb_status cuda_layernorm_forward(void *self, gb_dtype dtype, void *out, float *mean,
                                            float *rstd, const void *x, const float *weight,
                                            const float *bias, int64_t N, int64_t C, float eps)
{
    return layernorm_forward((cuda_device *)self, "layernorm_forward", dtype, NULL, out, mean,
                             rstd, x, NULL, weight, bias, N, C, eps);
}

extern "C" gb_status cuda_add_layernorm_forward(void *self, gb_dtype dtype, void *sum,
                                                void *out, float *mean, float *rstd,
                                                const void *a, const void *b,
                                                const float *weight, const float *bias,
                                                int64_t N, int64_t C, float eps)
{
    return layernorm_forward((cuda_device *)self, "add_layernorm_forward", dtype, sum, out,
                             mean, rstd, a, b, weight, bias, N, C, eps);
}

/* The backward in one pass over dout and x (layernorm_backward_kernel), then the
 * partials' sum; GB_ERR_UNSUPPORTED, having queued nothing, where every column's partials
 * do not fit the scratch or the kernel's layout the shared memory. */
template <typename Dtype>
static gb_status launch_fused_backward(cuda_device *dev, void *dx, float *dweight,
                                       float *dbias, const void *dout, const void *x,
                                       const float *weight, const float *mean,
                                       const float *rstd, int64_t N, int64_t C)
{
    const gb_host *host = dev->host;
    const int64_t chunks = gb_chunk_count(N, GB_CHUNK_ROWS);
    const size_t most = dev->smem_optin - 2 * LN_STATIC;
    const ln_layout l = ln_fit(Dtype::dtype, C, 2, 5, most, GB_CHUNK_ROWS);
    if (cuda_slab_columns(dev, chunks, 2, C) < C || ln_shared_bytes(&l) > most)
        return GB_ERR_UNSUPPORTED;
    gb_status st = ln_allow(dev, layernorm_backward_kernel<Dtype>, &l);
    if (st != GB_OK)
        return st;
    double *partials = (double *)dev->scratch;   // (chunks, 2 C)
    layernorm_backward_kernel<Dtype><<<(unsigned)chunks, l.rows_per_tile * GB_ROW_LANES,
                                       ln_shared_bytes(&l), dev->compute>>>(
        l, dx, partials, dout, x, weight, mean, rstd, N);
    GB_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
    return cuda_add_partials(dev, dweight, dbias, partials, chunks, 2 * C, C, C);
}

/* The backward's launches for the dtype of Dtype: in one pass where it fits, else dx,
 * then dweight and dbias in two passes, a slab of columns at a time. */
template <typename Dtype>
static gb_status launch_backward(cuda_device *dev, void *dx, float *dweight, float *dbias,
                                 const void *dout, const void *x, const float *weight,
                                 const float *mean, const float *rstd, int64_t N, int64_t C)
{
    const gb_host *host = dev->host;
    gb_status st = launch_fused_backward<Dtype>(dev, dx, dweight, dbias, dout, x, weight, mean,
                                                rstd, N, C);
    if (st != GB_ERR_UNSUPPORTED)
        return st;
    ln_layout l;
    st = ln_plan(dev, layernorm_backward_dx_kernel<Dtype>, Dtype::dtype, C, 2, 1, &l);
    if (st != GB_OK)
        return st;
    layernorm_backward_dx_kernel<Dtype><<<ln_blocks(dev, &l, N), l.rows_per_tile * GB_ROW_LANES,
                                          ln_shared_bytes(&l), dev->compute>>>(
        l, dx, dout, x, weight, mean, rstd, N);
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
        layernorm_partials_kernel<Dtype><<<grid, CUDA_BLOCK, 0, dev->compute>>>(
            partials, slab, dout, x, mean, rstd, N, C, c0, n);
        GB_CUDA_CHECK_LAUNCH("layernorm_partials_kernel");
        st = cuda_add_partials(dev, dweight + c0, dbias ? dbias + c0 : NULL, partials, chunks,
                               2 * slab, n, slab);
        if (st != GB_OK)
            return st;
    }
    return GB_OK;
}

extern "C" gb_status cuda_layernorm_backward(void *self, gb_dtype dtype, void *dx,
                                             float *dweight, float *dbias, const void *dout,
                                             const void *x, const float *weight,
                                             const float *mean, const float *rstd, int64_t N,
                                             int64_t C)
{
    cuda_device *dev = (cuda_device *)self;
    gb_status st = cuda_begin(dev, "layernorm_backward", dtype, N, C);
    if (st != GB_OK || N == 0 || C == 0)
        return st;
    return GB_ACT_DISPATCH(dtype, launch_backward, dev, dx, dweight, dbias, dout, x, weight,
                           mean, rstd, N, C);
}
