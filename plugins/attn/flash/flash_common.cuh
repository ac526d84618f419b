/* What attn/flash's CUDA kernels share across its .cu files (cuda.cu: forward, the f32
 * backward and the plugin; cuda_bwd.cu: the 16-bit backward on mma.sync): the views and
 * problem as kernels take them, the element types, the block's head and tile, and the
 * cp.async tile stream every kernel runs. Device helpers are static (each .cu gets its
 * own copy); the types are the same in every file. The dynamic shared memory is declared
 * in each .cu, not here: the emulator's cu2cc rewrites `extern __shared__` in the .cu
 * files it is given, not in what they include.
 */
#ifndef GB_ATTN_FLASH_COMMON_CUH
#define GB_ATTN_FLASH_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <stdint.h>

#include "act.cuh"
#include "cuda_status.h"
#include "mma_sync.cuh"
#include "warp.cuh"
#include "wgmma.cuh"
#include "gearbox/attn.h"

#define WARP GB_WARP

/* A (B, H, T, D) view as kernels take it: element (b, h, t, d) is at
 * b * batch + h * head + t * row + d. */
struct head_view {
    void *data;
    int64_t batch, head, row;
};

/* The problem as every kernel takes it. */
struct dims {
    int64_t H, T;
    int D, causal;
    float scale, scale_log2;   /* 1/sqrt(D), and that times log2(e) */
    int64_t tiles;             /* tiles of ROWS rows per head */
    int async;                 /* every view's rows start on 16 bytes: tiles load by cp.async */
};

/* ---- element types ------------------------------------------------------------------- */

/* What the kernels need of a tile's element type: rounding an f32 to it and widening it
 * back, by the hardware's conversions, and the gb_dtype of the views (for act.cuh's
 * gb_act_store and gb_act_widen, which convert the same way, where a kernel has bits or an
 * untyped pointer). */
template <typename E> struct elem;

template <> struct elem<float> {
    static constexpr gb_dtype dtype = GB_F32;
    static __device__ float round(float x) { return x; }
    static __device__ float widen(float x) { return x; }
};

template <> struct elem<__half> {
    static constexpr gb_dtype dtype = GB_F16;
    static __device__ __half round(float x) { return __float2half_rn(x); }
    static __device__ float widen(__half x) { return __half2float(x); }
};

template <> struct elem<__nv_bfloat16> {
    static constexpr gb_dtype dtype = GB_BF16;
    static __device__ __nv_bfloat16 round(float x) { return __float2bfloat16_rn(x); }
    static __device__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
};

/* ---- tiles and blocks ---------------------------------------------------------------- */

static constexpr __host__ __device__ size_t up128(size_t bytes)
{
    return (bytes + 127) / 128 * 128;
}

/* Element (b, h, 0, 0) of `v` for bh = b * H + h, once per block. */
template <typename E>
static __device__ const E *head_start(const head_view &v, int64_t bh, const dims &s)
{
    return (const E *)v.data + (bh / s.H) * v.batch + (bh % s.H) * v.head;
}

/* Queues rows [t0, t0 + rows) of a head (`src`, rows `row` elements apart) into the tile
 * `dst` (rows, DP), element (r, c) at dst[place(r, c)] (c a multiple of 16 bytes' worth),
 * by the whole block: 16-byte cp.async chunks when s.async says every view allows them,
 * else plain loads. Zeros past T and past head_dim, so padding adds nothing. The caller
 * commits, waits and syncs. */
template <typename E, int DP, class Place>
static __device__ void queue_tile_at(E *dst, int rows, const E *src, int64_t row, int64_t t0,
                                     const dims &s, Place place)
{
    constexpr int CHUNK = 16 / sizeof(E), PER_ROW = DP / CHUNK;
    for (int i = threadIdx.x; i < rows * PER_ROW; i += blockDim.x) {
        const int r = i / PER_ROW, c = i % PER_ROW * CHUNK;
        const int64_t t = t0 + r;
        E *d = dst + place(r, c);
        const E *from = src + t * row + c;
        if (s.async && t < s.T && c < s.D) {
            __pipeline_memcpy_async(d, from, 16);
        } else {
#pragma unroll
            for (int e = 0; e < CHUNK; e++)
                d[e] = t < s.T && c + e < s.D ? from[e] : elem<E>::round(0.0f);
        }
    }
}

/* The same into a tile whose rows are LD elements apart. */
template <typename E, int DP, int LD>
static __device__ void queue_tile(E *dst, int rows, const E *src, int64_t row, int64_t t0,
                                  const dims &s)
{
    queue_tile_at<E, DP>(dst, rows, src, row, t0, s, [](int r, int c) { return r * LD + c; });
}

/* Queues `n` per-row floats of head bh from t0 (lse2 or D) into dst, zeros past T. */
static __device__ void queue_rows(float *dst, int n, const float *src, int64_t bh, int64_t t0,
                                  const dims &s)
{
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        if (t0 + c < s.T)
            __pipeline_memcpy_async(dst + c, src + bh * s.T + t0 + c, sizeof(float));
        else
            dst[c] = 0.0f;
    }
}

/* The streaming loop every kernel runs: tile i of n is computed from buffer i % 2 while
 * tile i + 1 is copied into the other. queue(i, buf) queues tile i's copies (tile 0's,
 * with the block's own tiles, are queued by the caller before the loop); body(i, buf)
 * computes on it; landed(), in each thread once its copies of the tile are in and before
 * the barrier that publishes them (a proxy fence, where wgmma reads them). Two barriers a
 * tile: after the wait, so every thread's copies are in; after the body, so no warp still
 * reads the buffer the next tile's copies refill. */
template <class Queue, class Body, class Landed>
static __device__ void stream_tiles(int64_t n, Queue queue, Body body, Landed landed)
{
    __pipeline_commit();
    for (int64_t i = 0; i < n; i++) {
        if (i + 1 < n)
            queue(i + 1, (int)((i + 1) % 2));
        __pipeline_commit();   // an empty group on the last tile keeps the count fixed
        __pipeline_wait_prior(1);
        landed();
        __syncthreads();
        body(i, (int)(i % 2));
        __syncthreads();
    }
    __pipeline_wait_prior(0);
}

template <class Queue, class Body>
static __device__ void stream_tiles(int64_t n, Queue queue, Body body)
{
    stream_tiles(n, queue, body, [] {});
}

/* The block's head and tile: blockIdx.x = head * tiles + i. Query tiles run last first
 * (last_first), as the later ones see the most keys under the causal mask, and so start
 * first; key tiles run in order, as the first are seen by the most queries. */
static __device__ int64_t block_head(const dims &s)
{
    return blockIdx.x / s.tiles;
}

static __device__ int64_t block_tile(const dims &s, bool last_first)
{
    const int64_t i = blockIdx.x % s.tiles;
    return last_first ? s.tiles - 1 - i : i;
}

/* Tiles of `cols` from `begin` to `end`. */
static __device__ int64_t tile_count(int64_t begin, int64_t end, int cols)
{
    return (end - begin + cols - 1) / cols;
}

/* Lets `kernel` use `bytes` of shared memory (beyond the default 48 KiB). */
template <typename K>
static gb_status allow_shared(const gb_host *host, K *kernel, size_t bytes)
{
    GB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)bytes));
    return GB_OK;
}

/* ---- the 16-bit backward (cuda_bwd.cu) ------------------------------------------------ */

/* Its tiles: a block owns ROWS rows (keys in dK/dV, queries in dQ), 16 per warp, and
 * streams tiles of COLS rows past them; rows of every 16-bit tile are LD elements apart
 * (16 bytes of padding: conflict-free ldmatrix). Shared memory, every region on 128
 * bytes: own_a own_b (ROWS) | other_a[2] other_b[2] (COLS) | then, dK/dV only, lse[2]
 * delta[2] (COLS floats). Each streamed row is read from global memory once per block,
 * so the more rows a block owns, the less the kernels re-read: 256 (sixteen warps) up to
 * head_dim 64, 128 beyond, as much as fits 99 KiB. The scores of a streamed tile (2 x
 * COLS / 2 f32 a lane) live beside the f32 accumulators (DP / 2 a lane, two of them in
 * dK/dV): COLS is 32 up to head_dim 64, where 512 threads hold a thread to 128 registers,
 * and 16 beyond. */
template <int DP> struct mma_tiles {
    static constexpr int WARPS = DP > 64 ? 8 : 16;
    static constexpr int ROWS = 16 * WARPS;
    static constexpr int THREADS = WARPS * WARP;
    static constexpr int COLS = DP > 64 ? 16 : 32;
    static constexpr int NS = COLS / 8;   /* n8 tiles of a warp's scores */
    static constexpr int LD = DP + 8;
    static_assert(DP % 16 == 0 && COLS % 16 == 0, "tiles of whole k16 steps");

    static constexpr __host__ __device__ size_t tile(int rows)
    {
        return up128((size_t)rows * LD * 2);
    }
    static constexpr __host__ __device__ size_t floats() { return up128(COLS * sizeof(float)); }
    static constexpr __host__ __device__ size_t own_b() { return tile(ROWS); }
    static constexpr __host__ __device__ size_t other_a(int buf)
    {
        return 2 * tile(ROWS) + buf * tile(COLS);
    }
    static constexpr __host__ __device__ size_t other_b(int buf) { return other_a(2 + buf); }
    static constexpr __host__ __device__ size_t dq_bytes() { return other_a(4); }
    static constexpr __host__ __device__ size_t lse(int buf)
    {
        return dq_bytes() + buf * floats();
    }
    static constexpr __host__ __device__ size_t delta(int buf) { return lse(2 + buf); }
    static constexpr __host__ __device__ size_t dkv_bytes() { return lse(4); }
};

/* What the backward reads and writes (delta: D = dO . O per row, B*H*T floats). */
struct bwd_views {
    head_view dq, dk, dv, dout, q, k, v, out;
    const float *lse2;
    float *delta;
};

/* dQ, dK and dV of `heads` (B * H) heads on the stream, E __nv_bfloat16 or __half, DP 32,
 * 64, 80, 96 or 128 (instantiated in cuda_bwd.cu); D = dO . O is worked out on the way,
 * into delta, by the dQ kernel, for the dK/dV kernel after it, which at head_dim 64 is
 * the sm_90a one (wgmma) when `wgmma`. */
template <typename E, int DP>
gb_status flash_backward_mma(const gb_host *host, const bwd_views &w, dims s, int64_t heads,
                             cudaStream_t stream, int wgmma);

/* The tensor-core product and the packing of E pairs (mma_sync.cuh). */
template <typename E> struct mma16;

template <> struct mma16<__nv_bfloat16> {
    static __device__ void mma(float d[4], const uint32_t a[4], const uint32_t b[2])
    {
        gb_mma_m16n8k16_bf16(d, a, b);
    }
    static __device__ uint32_t pack(float lo, float hi) { return gb_pack_bf16x2(lo, hi); }
};

template <> struct mma16<__half> {
    static __device__ void mma(float d[4], const uint32_t a[4], const uint32_t b[2])
    {
        gb_mma_m16n8k16_f16(d, a, b);
    }
    static __device__ uint32_t pack(float lo, float hi) { return gb_pack_f16x2(lo, hi); }
};

/* The warpgroup products of the sm_90a kernels (wgmma.cuh): m64n64k16 with A from
 * registers and B K-major (TRANS_B 0) or MN-major (1), and m64n32k16 from shared memory. */
template <typename E, int TRANS_B> struct wgmma16;
template <int TRANS_B> struct wgmma16<__nv_bfloat16, TRANS_B> {
    static __device__ void mma(float (&d)[32], const uint32_t (&a)[4], uint64_t b)
    {
        gb_wgmma_m64n64k16_bf16<TRANS_B>(d, a, b);
    }
    static __device__ void mma_ss(float (&d)[16], uint64_t a, uint64_t b)
    {
        gb_wgmma_m64n32k16_ss_bf16(d, a, b);
    }
};
template <int TRANS_B> struct wgmma16<__half, TRANS_B> {
    static __device__ void mma(float (&d)[32], const uint32_t (&a)[4], uint64_t b)
    {
        gb_wgmma_m64n64k16_f16<TRANS_B>(d, a, b);
    }
    static __device__ void mma_ss(float (&d)[16], uint64_t a, uint64_t b)
    {
        gb_wgmma_m64n32k16_ss_f16(d, a, b);
    }
};

/* p moved up to the next multiple of `align` bytes, as pointer arithmetic on p (so it stays
 * a shared-memory pointer the compiler loads through with LDS, not a generic one): the
 * low bits of a shared object's generic address are those of its shared-window address. */
static __device__ unsigned char *align_up(unsigned char *p, size_t align)
{
    return p + (align - (uintptr_t)p % align) % align;
}

/* The same registers as n8 tiles of mma.sync accumulators: a warpgroup product's
 * accumulator i is tile i / 4's element i % 4. */
template <int N> static __device__ float (&as_n8_tiles(float (&d)[N]))[N / 4][4]
{
    return *reinterpret_cast<float(*)[N / 4][4]>(&d[0]);
}

#endif /* GB_ATTN_FLASH_COMMON_CUH */
