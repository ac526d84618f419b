/* Token plus position embeddings on the CUDA device, forward and backward.
 *
 * Forward is one element per thread. Backward must scatter rows of dout into dwte where
 * tokens repeat, deterministically and without float atomics: every element dwte[v, c] is
 * owned by one thread, which walks all positions in increasing order and adds the rows
 * whose token is v. Threads are grouped as a warp per 32 runs of columns (a lane's run 16
 * bytes of dout: 8 16-bit or 4 f32 columns, where every row starts on 16 bytes; else one
 * column) and per residue h of the token modulo H (H a multiple of 8, from the sizes and
 * the GPU's SM count only); the warp scans the tokens (a tile at a time from shared
 * memory, 32 positions per step, a ballot saying which it owns) and handles the positions
 * whose token is h mod H in order, so each token id has exactly one owner per column.
 * Wider runs make fewer warps scan the same tokens. dwpe's run of columns at t is one
 * thread summing over the batch in order. These are the CPU device's orders (each element
 * summed in position order from its old value), so f32 results have its bits. Token ids
 * are trusted to lie in [0, V): the kernel is not told V and does not check.
 */
#include "act.cuh"
#include "cuda_device.h"
#include "cuda_status.h"
#include "vec16.cuh"

/* Tokens per tile of the backward scan (in shared memory). */
#define TOKEN_TILE 1024
/* Warps per block of the backward scan, each its own residue. */
#define SCAN_WARPS 8

// out (B, T, C) act; tokens (B, T); wte (V, C); wpe (T, C)
static __global__ void embed_forward_kernel(gb_dtype dtype, void *out, const int32_t *tokens,
                                            const float *wte, const float *wpe, int64_t T,
                                            int64_t C, int64_t n)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const int64_t bt = i / C, c = i % C;
        const float v = wte[(int64_t)tokens[bt] * C + c] + wpe[(bt % T) * C + c];
        gb_act_store(out, dtype, i, v);
    }
}

/* The N activations of src from element i as f32 (one 16-byte load where N > 1:
 * gb_vec16_len's count, src aligned); and N f32 of a gradient row, to and from registers. */
template <typename Dtype, int N>
static __device__ __forceinline__ void embed_load(const void *src, int64_t i, float *out)
{
    if constexpr (N == 1)
        out[0] = gb_act_load(src, Dtype::dtype, i);
    else
        gb_vec16_load_act<Dtype>(src, i, out);
}

template <int N>
static __device__ __forceinline__ void grad_load(const float *g, float *out)
{
    if constexpr (N == 1)
        out[0] = g[0];
    else
        gb_vec16_load_f32<N>(g, out);
}

template <int N>
static __device__ __forceinline__ void grad_store(float *g, const float *in)
{
    if constexpr (N == 1)
        g[0] = in[0];
    else
        gb_vec16_store_f32<N>(g, in);
}

/* dst[0 .. N) += the N activations of src from element i: each element its one
 * addition, so the sums are the scalar loop's. */
template <typename Dtype, int N>
static __device__ __forceinline__ void embed_add(float *dst, const void *src, int64_t i)
{
    float g[N], acc[N];
    embed_load<Dtype, N>(src, i, g);
    grad_load<N>(dst, acc);
#pragma unroll
    for (int k = 0; k < N; k++)
        acc[k] += g[k];
    grad_store<N>(dst, acc);
}

// dwte (V, C) +=; dout (BT, C) act; tokens (BT); grid (ceil(C / (32 N)), H / SCAN_WARPS):
// each lane N consecutive columns
template <typename Dtype, int N>
static __global__ void embed_backward_wte_kernel(float *dwte, const void *dout,
                                                 const int32_t *tokens, int64_t BT, int64_t C)
{
    __shared__ int32_t tile_token[TOKEN_TILE];
    __shared__ int32_t tile_residue[TOKEN_TILE];   // token % H, once per block, not per warp
    const int H = (int)gridDim.y * SCAN_WARPS;
    const int h = (int)blockIdx.y * SCAN_WARPS + (int)threadIdx.x / 32;
    const int lane = (int)threadIdx.x % 32;
    const int64_t c = ((int64_t)blockIdx.x * 32 + lane) * N;
    for (int64_t p0 = 0; p0 < BT; p0 += TOKEN_TILE) {
        const int len = (int)(BT - p0 < TOKEN_TILE ? BT - p0 : TOKEN_TILE);
        __syncthreads();   // the previous tile is no longer read
        for (int j = (int)threadIdx.x; j < len; j += (int)blockDim.x) {
            tile_token[j] = tokens[p0 + j];
            tile_residue[j] = tile_token[j] % H;
        }
        __syncthreads();
        /* 32 positions at a time: which of them the warp owns, then those in order */
        for (int j0 = 0; j0 < len; j0 += 32) {
            const int j = j0 + lane;
            const unsigned owned = __ballot_sync(0xffffffffu, j < len && tile_residue[j] == h);
            if (c >= C)
                continue;
            for (unsigned rest = owned; rest != 0u; rest &= rest - 1u) {   // lowest first
                const int l = __ffs((int)rest) - 1;
                embed_add<Dtype, N>(dwte + (int64_t)tile_token[j0 + l] * C + c, dout,
                                    (p0 + j0 + l) * C + c);
            }
        }
    }
}

// dwpe (T_max, C) +=; dout (B, T, C) act; each thread N consecutive elements of dwpe,
// summed over the batch in order in registers
template <typename Dtype, int N>
static __global__ void embed_backward_wpe_kernel(float *dwpe, const void *dout, int64_t B,
                                                 int64_t T, int64_t C)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x * N;
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * N; i < T * C;
         i += step) {
        float acc[N];
        grad_load<N>(dwpe + i, acc);
        for (int64_t b = 0; b < B; b++) {
            float g[N];
            embed_load<Dtype, N>(dout, b * T * C + i, g);
#pragma unroll
            for (int k = 0; k < N; k++)
                acc[k] += g[k];
        }
        grad_store<N>(dwpe + i, acc);
    }
}

extern "C" gb_status cuda_embed_forward(void *self, gb_dtype dtype, void *out,
                                        const int32_t *tokens, const float *wte,
                                        const float *wpe, int64_t B, int64_t T, int64_t C)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, "embed_forward", dtype, B * T, C);
    const int64_t n = B * T * C;
    if (st != GB_OK || n == 0)
        return st;
    embed_forward_kernel<<<cuda_blocks(n), CUDA_BLOCK, 0, dev->compute>>>(dtype, out, tokens,
                                                                          wte, wpe, T, C, n);
    GB_CUDA_CHECK_LAUNCH("embed_forward_kernel");
    return GB_OK;
}

/* The backward's two launches, N columns a lane of the scan and N elements of dwpe a
 * thread. */
template <typename Dtype, int N>
static gb_status embed_backward_units(cuda_device *dev, float *dwte, float *dwpe,
                                      const void *dout, const int32_t *tokens, int64_t B,
                                      int64_t T, int64_t C)
{
    const gb_host *host = dev->host;
    /* as many residues as fill the GPU once (8 blocks of 256 threads per SM), but no more
     * than leave each warp about 32 positions to own (one ballot's worth): every warp reads
     * every token id, so a residue with less to do costs more than it saves */
    const int64_t column_tiles = (C + 32 * N - 1) / (32 * N), positions = B * T;
    int64_t groups = ((int64_t)dev->sm_count * 8 + column_tiles - 1) / column_tiles;
    const int64_t useful = positions / (SCAN_WARPS * 32);
    groups = groups > useful ? useful : groups;
    groups = groups < 1 ? 1 : groups;
    dim3 grid((unsigned)column_tiles, (unsigned)groups);
    embed_backward_wte_kernel<Dtype, N><<<grid, SCAN_WARPS * 32, 0, dev->compute>>>(
        dwte, dout, tokens, B * T, C);
    GB_CUDA_CHECK_LAUNCH("embed_backward_wte_kernel");
    embed_backward_wpe_kernel<Dtype, N><<<cuda_blocks(T * C / N), CUDA_BLOCK, 0, dev->compute>>>(
        dwpe, dout, B, T, C);
    GB_CUDA_CHECK_LAUNCH("embed_backward_wpe_kernel");
    return GB_OK;
}

/* 16-byte units where every row of dout, dwte and dwpe starts on 16 bytes, else one
 * element at a time. */
template <typename Dtype>
static gb_status embed_backward_dtype(cuda_device *dev, float *dwte, float *dwpe,
                                      const void *dout, const int32_t *tokens, int64_t B,
                                      int64_t T, int64_t C)
{
    constexpr int n = gb_vec16_len<Dtype>::n;
    const bool units = C % n == 0 && (uintptr_t)dout % GB_VEC16_BYTES == 0 &&
                       (uintptr_t)dwte % GB_VEC16_BYTES == 0 &&
                       (uintptr_t)dwpe % GB_VEC16_BYTES == 0;
    return units ? embed_backward_units<Dtype, n>(dev, dwte, dwpe, dout, tokens, B, T, C)
                 : embed_backward_units<Dtype, 1>(dev, dwte, dwpe, dout, tokens, B, T, C);
}

extern "C" gb_status cuda_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                                         const void *dout, const int32_t *tokens, int64_t B,
                                         int64_t T, int64_t C)
{
    cuda_device *dev = (cuda_device *)self;
    gb_status st = cuda_begin(dev, "embed_backward", dtype, B * T, C);
    if (st != GB_OK || B * T * C == 0)
        return st;
    return GB_ACT_DISPATCH(dtype, embed_backward_dtype, dev, dwte, dwpe, dout, tokens, B, T, C);
}
