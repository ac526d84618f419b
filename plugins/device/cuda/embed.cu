/* Token plus position embeddings on the CUDA device, forward and backward.
 *
 * Forward is one element per thread. Backward must scatter rows of dout into dwte where
 * tokens repeat, deterministically and without float atomics: every element dwte[v, c] is
 * owned by one thread, which walks all positions in increasing order and adds the rows
 * whose token is v. Threads are grouped as a warp per 32 columns and per residue h of the
 * token modulo H (H a multiple of 8, from the sizes and the GPU's SM count only); the warp
 * scans the tokens (a tile at a time from shared memory, 32 positions per step, a ballot
 * saying which it owns) and handles the positions whose token is h mod H in order, so
 * each token id has exactly one owner per column. dwpe[t, c] is one thread summing over
 * the batch in order. These are the CPU device's orders (each element summed in position
 * order from its old value), so f32 results have its bits. Token ids are trusted to lie in
 * [0, V): the kernel is not told V and does not check.
 */
#include "act.cuh"
#include "cuda_device.h"
#include "cuda_status.h"

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

// dwte (V, C) +=; dout (BT, C) act; tokens (BT); grid (ceil(C / 32), H / SCAN_WARPS)
static __global__ void embed_backward_wte_kernel(gb_dtype dtype, float *dwte, const void *dout,
                                                 const int32_t *tokens, int64_t BT, int64_t C)
{
    __shared__ int32_t tile_token[TOKEN_TILE];
    __shared__ int32_t tile_residue[TOKEN_TILE];   // token % H, once per block, not per warp
    const int H = (int)gridDim.y * SCAN_WARPS;
    const int h = (int)blockIdx.y * SCAN_WARPS + (int)threadIdx.x / 32;
    const int lane = (int)threadIdx.x % 32;
    const int64_t c = (int64_t)blockIdx.x * 32 + lane;
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
                dwte[(int64_t)tile_token[j0 + l] * C + c] +=
                    gb_act_load(dout, dtype, (p0 + j0 + l) * C + c);
            }
        }
    }
}

// dwpe (T_max, C) +=; dout (B, T, C) act
static __global__ void embed_backward_wpe_kernel(gb_dtype dtype, float *dwpe, const void *dout,
                                                 int64_t B, int64_t T, int64_t C)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < T * C; i += step) {
        float acc = dwpe[i];
        for (int64_t b = 0; b < B; b++)
            acc += gb_act_load(dout, dtype, b * T * C + i);
        dwpe[i] = acc;
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

extern "C" gb_status cuda_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                                         const void *dout, const int32_t *tokens, int64_t B,
                                         int64_t T, int64_t C)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, "embed_backward", dtype, B * T, C);
    if (st != GB_OK || B * T * C == 0)
        return st;
    /* as many residues as fill the GPU once (8 blocks of 256 threads per SM), but no more
     * than leave each warp about 32 positions to own (one ballot's worth): every warp reads
     * every token id, so a residue with less to do costs more than it saves */
    const int64_t column_tiles = (C + 31) / 32, positions = B * T;
    int64_t groups = ((int64_t)dev->sm_count * 8 + column_tiles - 1) / column_tiles;
    const int64_t useful = positions / (SCAN_WARPS * 32);
    groups = groups > useful ? useful : groups;
    groups = groups < 1 ? 1 : groups;
    dim3 grid((unsigned)column_tiles, (unsigned)groups);
    embed_backward_wte_kernel<<<grid, SCAN_WARPS * 32, 0, dev->compute>>>(dtype, dwte, dout,
                                                                          tokens, B * T, C);
    GB_CUDA_CHECK_LAUNCH("embed_backward_wte_kernel");
    embed_backward_wpe_kernel<<<cuda_blocks(T * C), CUDA_BLOCK, 0, dev->compute>>>(
        dtype, dwpe, dout, B, T, C);
    GB_CUDA_CHECK_LAUNCH("embed_backward_wpe_kernel");
    return GB_OK;
}
