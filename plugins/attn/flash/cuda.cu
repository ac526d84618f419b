/* attn/flash on CUDA: FlashAttention-2 (Dao, 2023) with kernels of our own. The (T, T)
 * scores never exist: a block holds a tile of rows in shared memory and streams tiles of
 * the other side past it, with the online softmax in forward and the probabilities
 * recomputed from the saved log-sum-exps in backward.
 *
 * Forward: a block per (batch, head, tile of ROWS queries), a warp per 16 queries. For
 * each tile of COLS keys up to the causal diagonal (tiles above it are never loaded) a
 * warp computes S = Q K^T, takes each row's new maximum, rescales its running sum and its
 * output (f32 in shared memory) and adds P V. Saved: the base-2 log-sum-exp of each row,
 * B*H*T f32 (attn_flash_math.h has every per-element step, tested on the CPU).
 * Backward: D = rowsum(dO * O) first (a warp per row, workspace B*H*T f32), then two
 * kernels that each own what they write, so nothing is summed with atomics: a block per
 * tile of ROWS keys walks the query tiles that see it and keeps dK and dV in registers; a
 * block per tile of ROWS queries walks the key tiles it sees and keeps dQ. Q K^T and
 * dO V^T are computed twice, once in each, which is the price of no atomics. Every sum
 * has a fixed order: the same inputs give the same bits run after run.
 *
 * Tensor cores through WMMA (nvcuda::wmma, 16x16x16, f32 accumulators) rather than
 * mma.sync PTX: WMMA leaves the fragment layout to the compiler, so no register index
 * can be wrong, at the cost of sending each S tile through shared memory for the
 * softmax; this code was written without a GPU to run it on, and correctness came
 * first. bf16 and f16 tiles go to the tensor cores, and P and dS are rounded to the
 * dtype before their products (as FlashAttention-2 does); f32 runs the same tiling with
 * FMAs on CUDA cores (lanes own fixed rows and columns), so f32 gives f32 results.
 *
 * Shapes: any T (partial tiles are zero-filled and masked), head_dim up to 128 (padded
 * with zeros to 32, 64, 80, 96 or 128 columns, one compiled configuration each), any
 * strides with head_dim contiguous. Tiles: 64 rows (4 warps) for 16-bit with 64 columns
 * up to head_dim 64 and 32 beyond; 32 x 32 (2 warps) for f32; at most 89 KiB of shared
 * memory per block, so every GPU of compute capability 8.0 or newer runs them.
 * Everything is queued on ctx->stream. No options. Not yet run on a GPU: its conformance
 * test (attn-conformance-cuda, suite gpu) needs one.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>

#include <type_traits>

#include "act.cuh"
#include "attn_checks.h"
#include "attn_flash_math.h"
#include "cuda_status.h"
#include "warp.cuh"
#include "gearbox/attn.h"

#define PLUGIN "attn/flash"
#define WARP GB_WARP
#define MAX_HEAD_DIM 128
/* Rows per block of the D = dO . O kernel: a warp each. */
#define DELTA_ROWS 8

namespace wmma = nvcuda::wmma;

typedef struct attn_flash_cuda {
    const gb_host *host;
    gb_device_ctx device;   /* the device given to create(): its stream */
    int shared_limit;       /* bytes of shared memory a block may opt in to on this GPU */
} attn_flash_cuda;

/* A (B, H, T, D) view as kernels take it: element (b, h, t, d) is at
 * b * batch + h * head + t * row + d. */
struct head_view {
    void *data;
    int64_t batch, head, row;
};

/* Offset of element (bh, t, 0) of `v`, bh = b * H + h. */
static __device__ int64_t row_at(const head_view &v, int64_t bh, int64_t H, int64_t t)
{
    return (bh / H) * v.batch + (bh % H) * v.head + t * v.row;
}

/* The problem as every kernel takes it. */
struct dims {
    int64_t H, T;
    int D, causal;
    float scale, scale_log2;   /* 1/sqrt(D), and that times log2(e) */
    int64_t tiles;             /* tiles of ROWS rows per head */
};

/* ---- element types ------------------------------------------------------------------- */

/* What the kernels need of a tile's element type: loading a view's element unchanged,
 * rounding an f32 to it and widening it back, and the gb_dtype of the views. */
template <typename E> struct elem;

template <> struct elem<float> {
    static constexpr gb_dtype dtype = GB_F32;
    static __device__ float load(const void *p, int64_t i) { return ((const float *)p)[i]; }
    static __device__ float round(float x) { return x; }
    static __device__ float widen(float x) { return x; }
};

template <> struct elem<__half> {
    static constexpr gb_dtype dtype = GB_F16;
    static __device__ __half load(const void *p, int64_t i)
    {
        return __ushort_as_half(((const unsigned short *)p)[i]);
    }
    static __device__ __half round(float x) { return __float2half_rn(x); }
    static __device__ float widen(__half x) { return __half2float(x); }
};

template <> struct elem<__nv_bfloat16> {
    static constexpr gb_dtype dtype = GB_BF16;
    static __device__ __nv_bfloat16 load(const void *p, int64_t i)
    {
        return __ushort_as_bfloat16(((const unsigned short *)p)[i]);
    }
    static __device__ __nv_bfloat16 round(float x) { return __float2bfloat16_rn(x); }
    static __device__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
};

/* ---- tiles --------------------------------------------------------------------------- */

static constexpr __host__ __device__ size_t up128(size_t bytes)
{
    return (bytes + 127) / 128 * 128;
}

/* One configuration's tile sizes and shared memory (FlashAttention-2's traits struct):
 * E the element type of the tiles, DP the head_dim padded to a multiple of 16. A block
 * owns ROWS rows (queries in forward and dQ, keys in dK/dV), 16 per warp, and streams the
 * other side past them COLS rows at a time. Leading dimensions are padded past the row
 * (fragment rows stay 32-byte aligned for WMMA, and rows move across banks). Every region
 * starts on 128 bytes. */
template <typename E, int DP> struct tiles {
    static constexpr bool SIMT = std::is_same<E, float>::value;
    static constexpr int ROWS = SIMT ? 32 : 64;
    static constexpr int WARPS = ROWS / 16;
    static constexpr int THREADS = WARPS * WARP;
    static constexpr int COLS = SIMT || DP > 64 ? 32 : 64;
    static constexpr int LD = DP + (SIMT ? 4 : 8);   /* elements between rows of an E tile */
    static constexpr int LDS = COLS + 4;              /* floats between rows of a score tile */
    static constexpr int LDP = COLS + 8;              /* elements between rows of P or dS */
    static constexpr int LDO = DP + 4;                /* floats between rows of forward's O */

    static constexpr __host__ __device__ size_t tile(int rows)
    {
        return up128((size_t)rows * LD * sizeof(E));
    }
    /* a score tile of 16 x COLS f32 per warp, and the same in E */
    static constexpr __host__ __device__ size_t scores()
    {
        return up128((size_t)ROWS * LDS * sizeof(float));
    }
    static constexpr __host__ __device__ size_t probs()
    {
        return up128((size_t)ROWS * LDP * sizeof(E));
    }
    static constexpr __host__ __device__ size_t outputs()
    {
        return up128((size_t)ROWS * LDO * sizeof(float));
    }
    static constexpr __host__ __device__ size_t per_col()
    {
        return up128((size_t)COLS * sizeof(float));
    }

    /* forward: Q | K V | S | P | O */
    static constexpr __host__ __device__ size_t fwd_k() { return tile(ROWS); }
    static constexpr __host__ __device__ size_t fwd_v() { return fwd_k() + tile(COLS); }
    static constexpr __host__ __device__ size_t fwd_s() { return fwd_v() + tile(COLS); }
    static constexpr __host__ __device__ size_t fwd_p() { return fwd_s() + scores(); }
    static constexpr __host__ __device__ size_t fwd_o() { return fwd_p() + probs(); }
    static constexpr __host__ __device__ size_t fwd_bytes() { return fwd_o() + outputs(); }

    /* dQ: Q dO | K V | S dP | dS;  dK/dV: K V | Q dO | S dP | P dS | lse2 D */
    static constexpr __host__ __device__ size_t bwd_b() { return tile(ROWS); }
    static constexpr __host__ __device__ size_t bwd_c() { return bwd_b() + tile(ROWS); }
    static constexpr __host__ __device__ size_t bwd_d() { return bwd_c() + tile(COLS); }
    static constexpr __host__ __device__ size_t bwd_s() { return bwd_d() + tile(COLS); }
    static constexpr __host__ __device__ size_t bwd_dp() { return bwd_s() + scores(); }
    static constexpr __host__ __device__ size_t bwd_p() { return bwd_dp() + scores(); }
    static constexpr __host__ __device__ size_t bwd_ds() { return bwd_p() + probs(); }
    static constexpr __host__ __device__ size_t dq_bytes() { return bwd_ds(); }
    static constexpr __host__ __device__ size_t bwd_lse() { return bwd_ds() + probs(); }
    static constexpr __host__ __device__ size_t bwd_delta() { return bwd_lse() + per_col(); }
    static constexpr __host__ __device__ size_t dkv_bytes() { return bwd_delta() + per_col(); }

    static constexpr __host__ __device__ size_t most_bytes()
    {
        return fwd_bytes() > dkv_bytes() ? (fwd_bytes() > dq_bytes() ? fwd_bytes() : dq_bytes())
                                         : (dkv_bytes() > dq_bytes() ? dkv_bytes() : dq_bytes());
    }
};

static __device__ unsigned char *shared_base()
{
    extern __shared__ __align__(128) unsigned char flash_shared[];
    return flash_shared;
}

/* ---- a warp's products --------------------------------------------------------------- */

/* What a warp computes on its 16 rows, all warp-collective:
 *   scores(S, A, B)    S (16, COLS) f32 = A (16, DP) B^T, B (COLS, DP), both E tiles
 *   add(acc, P, B)     acc (16, DP) += P (16, COLS) B, P an E tile, B (COLS, DP)
 *   load/store(acc, O) between acc and O (16, DP) f32, leading dimension LDO
 *   chunk(dst, acc, n) columns 16n to 16n + 15 of acc into dst (16, 16), leading LDS
 * Tensor cores for 16-bit tiles: */
template <typename E, int DP> struct warp_math {
    using tl = tiles<E, DP>;
    using frag_a = wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major>;
    using frag_bt = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major>;
    using frag_b = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major>;
    using frag_c = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
    struct acc {
        frag_c f[DP / 16];
    };

    static __device__ void scores(float *S, const E *A, const E *B)
    {
#pragma unroll
        for (int n = 0; n < tl::COLS / 16; n++) {
            frag_c c;
            wmma::fill_fragment(c, 0.0f);
#pragma unroll
            for (int k = 0; k < DP / 16; k++) {
                frag_a a;
                frag_bt bt;   // B^T (DP, COLS) is B read column-major
                wmma::load_matrix_sync(a, A + 16 * k, tl::LD);
                wmma::load_matrix_sync(bt, B + 16 * n * tl::LD + 16 * k, tl::LD);
                wmma::mma_sync(c, a, bt, c);
            }
            wmma::store_matrix_sync(S + 16 * n, c, tl::LDS, wmma::mem_row_major);
        }
    }

    static __device__ void zero(acc &x)
    {
#pragma unroll
        for (int n = 0; n < DP / 16; n++)
            wmma::fill_fragment(x.f[n], 0.0f);
    }

    static __device__ void add(acc &x, const E *P, const E *B)
    {
#pragma unroll
        for (int k = 0; k < tl::COLS / 16; k++) {
            frag_a a;
            wmma::load_matrix_sync(a, P + 16 * k, tl::LDP);
#pragma unroll
            for (int n = 0; n < DP / 16; n++) {
                frag_b b;
                wmma::load_matrix_sync(b, B + 16 * k * tl::LD + 16 * n, tl::LD);
                wmma::mma_sync(x.f[n], a, b, x.f[n]);
            }
        }
    }

    static __device__ void load(acc &x, const float *O)
    {
#pragma unroll
        for (int n = 0; n < DP / 16; n++)
            wmma::load_matrix_sync(x.f[n], O + 16 * n, tl::LDO, wmma::mem_row_major);
    }

    static __device__ void store(float *O, const acc &x)
    {
#pragma unroll
        for (int n = 0; n < DP / 16; n++)
            wmma::store_matrix_sync(O + 16 * n, x.f[n], tl::LDO, wmma::mem_row_major);
    }

    static __device__ void chunk(float *dst, const acc &x, int n)
    {
        wmma::store_matrix_sync(dst, x.f[n], tl::LDS, wmma::mem_row_major);
    }
};

/* The lanes' share of a warp's 16 rows in the element-wise steps: lane l has row l / 2
 * and the columns of parity l % 2. */
static __device__ int lane_row()
{
    return (threadIdx.x % WARP) / 2;
}

static __device__ int lane_parity()
{
    return threadIdx.x % 2;
}

/* f32 on CUDA cores, lanes owning rows and columns as lane_row() and lane_parity() say;
 * each lane sums its dot products in index order. */
template <int DP> struct warp_math<float, DP> {
    using tl = tiles<float, DP>;
    struct acc {
        float a[DP / 2];   /* columns lane_parity() + 2 i of the lane's row */
    };

    static __device__ void scores(float *S, const float *A, const float *B)
    {
        const int r = lane_row(), par = lane_parity();
        float s[tl::COLS / 2] = {0};
        for (int d = 0; d < DP; d++) {
            const float a = A[r * tl::LD + d];
#pragma unroll
            for (int j = 0; j < tl::COLS / 2; j++)
                s[j] = fmaf(a, B[(par + 2 * j) * tl::LD + d], s[j]);
        }
#pragma unroll
        for (int j = 0; j < tl::COLS / 2; j++)
            S[r * tl::LDS + par + 2 * j] = s[j];
    }

    static __device__ void zero(acc &x)
    {
#pragma unroll
        for (int i = 0; i < DP / 2; i++)
            x.a[i] = 0.0f;
    }

    static __device__ void add(acc &x, const float *P, const float *B)
    {
        const int r = lane_row(), par = lane_parity();
        for (int c = 0; c < tl::COLS; c++) {
            const float p = P[r * tl::LDP + c];
#pragma unroll
            for (int i = 0; i < DP / 2; i++)
                x.a[i] = fmaf(p, B[c * tl::LD + par + 2 * i], x.a[i]);
        }
    }

    static __device__ void load(acc &x, const float *O)
    {
        const int r = lane_row(), par = lane_parity();
#pragma unroll
        for (int i = 0; i < DP / 2; i++)
            x.a[i] = O[r * tl::LDO + par + 2 * i];
    }

    static __device__ void store(float *O, const acc &x)
    {
        const int r = lane_row(), par = lane_parity();
#pragma unroll
        for (int i = 0; i < DP / 2; i++)
            O[r * tl::LDO + par + 2 * i] = x.a[i];
    }

    static __device__ void chunk(float *dst, const acc &x, int n)
    {
        const int r = lane_row(), par = lane_parity();
#pragma unroll
        for (int i = 0; i < DP / 2; i++)
            if (i / 8 == n)
                dst[r * tl::LDS + par + 2 * i - 16 * n] = x.a[i];
    }
};

/* ---- block helpers ------------------------------------------------------------------- */

/* Rows [t0, t0 + rows) of head bh of `v` into the tile `dst` (rows, DP), leading dimension
 * LD, by the whole block: zeros past T and past head_dim, so padding adds nothing. */
template <typename E, int DP>
static __device__ void load_tile(E *dst, int rows, const head_view &v, int64_t bh, int64_t t0,
                                 const dims &s)
{
    using tl = tiles<E, DP>;
    for (int i = threadIdx.x; i < rows * DP; i += blockDim.x) {
        const int r = i / DP, d = i % DP;
        const int64_t t = t0 + r;
        dst[r * tl::LD + d] = t < s.T && d < s.D
                                  ? elem<E>::load(v.data, row_at(v, bh, s.H, t) + d)
                                  : elem<E>::round(0.0f);
    }
}

/* factor * acc (the warp's rows t0 .. t0 + 15, head bh) into `v`, rounded to its dtype,
 * 16 columns at a time through the warp's score tile `scratch`. */
template <typename E, int DP>
static __device__ void write_rows(const head_view &v, const typename warp_math<E, DP>::acc &x,
                                  float factor, float *scratch, int64_t bh, int64_t t0,
                                  const dims &s)
{
    using tl = tiles<E, DP>;
    const int lane = threadIdx.x % WARP, r = lane / 2, c0 = (lane % 2) * 8;
    const int64_t t = t0 + r;
    for (int n = 0; n < DP / 16 && 16 * n < s.D; n++) {
        __syncwarp();   // the last chunk's reads are done
        warp_math<E, DP>::chunk(scratch, x, n);
        __syncwarp();
        for (int c = c0; c < c0 + 8; c++) {
            const int d = 16 * n + c;
            if (t < s.T && d < s.D)
                gb_act_store(v.data, elem<E>::dtype, row_at(v, bh, s.H, t) + d,
                             factor * scratch[r * tl::LDS + c]);
        }
    }
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

/* ---- forward ------------------------------------------------------------------------- */

/* One online-softmax step of the lane's row (query t) over the key tile at j0: reads the
 * scores S, writes P = 2^(s2 - m) in E, rescales the running output O, updates m and l.
 * Each lane pair shares a row: the maxima and sums are combined with the partner lane. */
template <typename E, int DP>
static __device__ void softmax_step(const float *S, E *P, float *O, int64_t t, int64_t j0,
                                    const dims &s, float *m, float *l)
{
    using tl = tiles<E, DP>;
    const int r = lane_row(), par = lane_parity();
    float s2[tl::COLS / 2], top = -INFINITY;
#pragma unroll
    for (int i = 0; i < tl::COLS / 2; i++) {
        const int c = par + 2 * i;
        s2[i] = attn_visible(t, j0 + c, s.T, s.causal) ? S[r * tl::LDS + c] * s.scale_log2
                                                       : -INFINITY;
        top = fmaxf(top, s2[i]);
    }
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    const float m_new = fmaxf(*m, top), rescale = attn_rescale(*m, m_new);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < tl::COLS / 2; i++) {
        const E p = elem<E>::round(attn_prob_running(s2[i], m_new));
        P[r * tl::LDP + par + 2 * i] = p;
        sum += elem<E>::widen(p);   // the sum of what P V adds up
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    *l = *l * rescale + sum;
    *m = m_new;
    for (int i = 0; i < DP / 2; i++)
        O[r * tl::LDO + par + 2 * i] *= rescale;
}

/* out (B, H, T, D) and lse2 (B*H*T) from q, k, v: a block per tile of ROWS queries. */
template <typename E, int DP>
static __global__ void __launch_bounds__(tiles<E, DP>::THREADS)
forward_kernel(head_view out, head_view q, head_view k, head_view v, float *lse2, dims s)
{
    using tl = tiles<E, DP>;
    using wm = warp_math<E, DP>;
    unsigned char *sm = shared_base();
    const int warp = threadIdx.x / WARP, r = lane_row(), par = lane_parity();
    E *qs = (E *)sm, *ks = (E *)(sm + tl::fwd_k()), *vs = (E *)(sm + tl::fwd_v());
    float *S = (float *)(sm + tl::fwd_s()) + warp * 16 * tl::LDS;
    E *P = (E *)(sm + tl::fwd_p()) + warp * 16 * tl::LDP;
    float *O = (float *)(sm + tl::fwd_o()) + warp * 16 * tl::LDO;
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t t = t0 + warp * 16 + r;   // the lane's query

    load_tile<E, DP>(qs, tl::ROWS, q, bh, t0, s);
    for (int i = 0; i < DP / 2; i++)
        O[r * tl::LDO + par + 2 * i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int64_t end = attn_keys_end(t0, tl::ROWS, s.T, s.causal);
    for (int64_t j0 = 0; j0 < end; j0 += tl::COLS) {
        __syncthreads();   // every warp is done with the last K and V tiles
        load_tile<E, DP>(ks, tl::COLS, k, bh, j0, s);
        load_tile<E, DP>(vs, tl::COLS, v, bh, j0, s);
        __syncthreads();
        wm::scores(S, qs + warp * 16 * tl::LD, ks);
        __syncwarp();
        softmax_step<E, DP>(S, P, O, t, j0, s, &m, &l);
        __syncwarp();
        typename wm::acc o;
        wm::load(o, O);
        wm::add(o, P, vs);
        wm::store(O, o);
        __syncwarp();
    }
    if (t >= s.T)
        return;
    const int64_t at = row_at(out, bh, s.H, t);
    for (int d = par; d < s.D; d += 2)
        gb_act_store(out.data, elem<E>::dtype, at + d, O[r * tl::LDO + d] / l);
    if (par == 0)
        lse2[bh * s.T + t] = attn_lse2(m, l);
}

/* ---- backward ------------------------------------------------------------------------ */

/* delta (B*H*T) = dO . O per row: a warp per row, lanes over the row, a fixed butterfly. */
static __global__ void delta_kernel(float *delta, head_view dout, head_view out, gb_dtype dtype,
                                    dims s, int64_t rows)
{
    const int64_t row = blockIdx.x * (int64_t)DELTA_ROWS + threadIdx.x / WARP;
    if (row >= rows)
        return;
    const int lane = threadIdx.x % WARP;
    const int64_t bh = row / s.T, t = row % s.T;
    const int64_t g = row_at(dout, bh, s.H, t), o = row_at(out, bh, s.H, t);
    float dot = 0.0f;
    for (int d = lane; d < s.D; d += WARP)
        dot += gb_act_load(dout.data, dtype, g + d) * gb_act_load(out.data, dtype, o + d);
    dot = gb_warp_sum(dot);
    if (lane == 0)
        delta[row] = dot;
}

/* The backward kernels' shared memory (tiles<E, DP>::bwd_*), the score tiles at the
 * calling warp's rows: two tiles of the ROWS rows the block owns, two of the COLS rows it
 * streams, S and dP, P and dS; dK/dV also keeps lse2 and D of the streamed queries (dQ
 * keeps its rows' in registers and uses P for its dS). */
template <typename E, int DP> struct bwd_shared {
    using tl = tiles<E, DP>;
    E *own_a, *own_b, *other_a, *other_b;
    float *S, *dP;
    E *P, *dS;
    float *lse2, *delta;

    __device__ bwd_shared()
    {
        unsigned char *sm = shared_base();
        const int warp = threadIdx.x / WARP;
        own_a = (E *)sm;
        own_b = (E *)(sm + tl::bwd_b());
        other_a = (E *)(sm + tl::bwd_c());
        other_b = (E *)(sm + tl::bwd_d());
        S = (float *)(sm + tl::bwd_s()) + warp * 16 * tl::LDS;
        dP = (float *)(sm + tl::bwd_dp()) + warp * 16 * tl::LDS;
        P = (E *)(sm + tl::bwd_p()) + warp * 16 * tl::LDP;
        dS = (E *)(sm + tl::bwd_ds()) + warp * 16 * tl::LDP;
        lse2 = (float *)(sm + tl::bwd_lse());
        delta = (float *)(sm + tl::bwd_delta());
    }
};

/* dQ (B, H, T, D): a block per tile of ROWS queries, over the key tiles they see. */
template <typename E, int DP>
static __global__ void __launch_bounds__(tiles<E, DP>::THREADS)
dq_kernel(head_view dq, head_view q, head_view k, head_view v, head_view dout,
          const float *lse2, const float *delta, dims s)
{
    using tl = tiles<E, DP>;
    using wm = warp_math<E, DP>;
    const bwd_shared<E, DP> sh;
    E *qs = sh.own_a, *dos = sh.own_b, *ks = sh.other_a, *vs = sh.other_b;
    float *S = sh.S, *dP = sh.dP;
    E *dS = sh.P;
    const int warp = threadIdx.x / WARP, r = lane_row(), par = lane_parity();
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t t = t0 + warp * 16 + r;   // the lane's query
    const float lse_t = t < s.T ? lse2[bh * s.T + t] : 0.0f;
    const float delta_t = t < s.T ? delta[bh * s.T + t] : 0.0f;

    load_tile<E, DP>(qs, tl::ROWS, q, bh, t0, s);
    load_tile<E, DP>(dos, tl::ROWS, dout, bh, t0, s);
    typename wm::acc acc;
    wm::zero(acc);
    const int64_t end = attn_keys_end(t0, tl::ROWS, s.T, s.causal);
    for (int64_t j0 = 0; j0 < end; j0 += tl::COLS) {
        __syncthreads();   // every warp is done with the last K and V tiles
        load_tile<E, DP>(ks, tl::COLS, k, bh, j0, s);
        load_tile<E, DP>(vs, tl::COLS, v, bh, j0, s);
        __syncthreads();
        wm::scores(S, qs + warp * 16 * tl::LD, ks);
        wm::scores(dP, dos + warp * 16 * tl::LD, vs);
        __syncwarp();
#pragma unroll
        for (int i = 0; i < tl::COLS / 2; i++) {
            const int c = par + 2 * i, at = r * tl::LDS + c;
            const float p = attn_visible(t, j0 + c, s.T, s.causal)
                                ? attn_prob_saved(S[at] * s.scale_log2, lse_t)
                                : 0.0f;
            dS[r * tl::LDP + c] = elem<E>::round(attn_dscore(p, dP[at], delta_t));
        }
        __syncwarp();
        wm::add(acc, dS, ks);
    }
    write_rows<E, DP>(dq, acc, s.scale, S, bh, t0 + warp * 16, s);
}

/* dK and dV (B, H, T, D): a block per tile of ROWS keys, over the query tiles that see
 * them. The warp's rows are keys, its columns queries: S^T = K Q^T, dP^T = V dO^T. */
template <typename E, int DP>
static __global__ void __launch_bounds__(tiles<E, DP>::THREADS)
dkv_kernel(head_view dk, head_view dv, head_view q, head_view k, head_view v, head_view dout,
           const float *lse2, const float *delta, dims s)
{
    using tl = tiles<E, DP>;
    using wm = warp_math<E, DP>;
    const bwd_shared<E, DP> sh;
    E *ks = sh.own_a, *vs = sh.own_b, *qs = sh.other_a, *dos = sh.other_b;
    float *S = sh.S, *dP = sh.dP, *lse_s = sh.lse2, *delta_s = sh.delta;
    E *P = sh.P, *dS = sh.dS;
    const int warp = threadIdx.x / WARP, r = lane_row(), par = lane_parity();
    const int64_t bh = block_head(s), j0 = block_tile(s, false) * tl::ROWS;
    const int64_t j = j0 + warp * 16 + r;   // the lane's key

    load_tile<E, DP>(ks, tl::ROWS, k, bh, j0, s);
    load_tile<E, DP>(vs, tl::ROWS, v, bh, j0, s);
    typename wm::acc dk_acc, dv_acc;
    wm::zero(dk_acc);
    wm::zero(dv_acc);
    for (int64_t t0 = attn_queries_begin(j0, tl::COLS, s.causal); t0 < s.T; t0 += tl::COLS) {
        __syncthreads();   // every warp is done with the last Q, dO, lse2 and D tiles
        load_tile<E, DP>(qs, tl::COLS, q, bh, t0, s);
        load_tile<E, DP>(dos, tl::COLS, dout, bh, t0, s);
        for (int c = threadIdx.x; c < tl::COLS; c += blockDim.x) {
            const bool in = t0 + c < s.T;
            lse_s[c] = in ? lse2[bh * s.T + t0 + c] : 0.0f;
            delta_s[c] = in ? delta[bh * s.T + t0 + c] : 0.0f;
        }
        __syncthreads();
        wm::scores(S, ks + warp * 16 * tl::LD, qs);
        wm::scores(dP, vs + warp * 16 * tl::LD, dos);
        __syncwarp();
#pragma unroll
        for (int i = 0; i < tl::COLS / 2; i++) {
            const int c = par + 2 * i, at = r * tl::LDS + c;
            const float p = attn_visible(t0 + c, j, s.T, s.causal)
                                ? attn_prob_saved(S[at] * s.scale_log2, lse_s[c])
                                : 0.0f;
            const E pe = elem<E>::round(p);
            P[r * tl::LDP + c] = pe;
            dS[r * tl::LDP + c] = elem<E>::round(attn_dscore(p, dP[at], delta_s[c]));
        }
        __syncwarp();
        wm::add(dv_acc, P, dos);
        wm::add(dk_acc, dS, qs);
    }
    write_rows<E, DP>(dk, dk_acc, s.scale, S, bh, j0 + warp * 16, s);
    write_rows<E, DP>(dv, dv_acc, 1.0f, S, bh, j0 + warp * 16, s);
}

/* ---- configurations ------------------------------------------------------------------ */

/* head_dim padded to the columns of a compiled configuration; 0 past MAX_HEAD_DIM. */
static int padded_head_dim(int64_t D)
{
    static const int dims_compiled[] = {32, 64, 80, 96, 128};
    for (int dp : dims_compiled)
        if (D <= dp)
            return dp;
    return 0;
}

template <typename E> struct elem_tag {
    using type = E;
};

template <int DP> using dim_tag = std::integral_constant<int, DP>;

/* f(elem_tag<E>, dim_tag<DP>) for the problem's configuration; GB_ERR_UNSUPPORTED for
 * one not compiled (eligible() refuses those first). */
template <typename E, class F> static gb_status by_head_dim(int dp, F &f)
{
    switch (dp) {
    case 32: return f(elem_tag<E>(), dim_tag<32>());
    case 64: return f(elem_tag<E>(), dim_tag<64>());
    case 80: return f(elem_tag<E>(), dim_tag<80>());
    case 96: return f(elem_tag<E>(), dim_tag<96>());
    case 128: return f(elem_tag<E>(), dim_tag<128>());
    default: return GB_ERR_UNSUPPORTED;
    }
}

template <class F> static gb_status by_config(const gb_attn_problem *p, F &&f)
{
    const int dp = padded_head_dim(p->head_dim);
    switch (p->dtype) {
    case GB_F32: return by_head_dim<float>(dp, f);
    case GB_BF16: return by_head_dim<__nv_bfloat16>(dp, f);
    case GB_F16: return by_head_dim<__half>(dp, f);
    default: return GB_ERR_UNSUPPORTED;
    }
}

/* The most shared memory a block may opt in to on compute capability 8.6 and 8.9, the
 * smallest limit of the GPUs this build targets (8.0: 163 KiB, 9.0: 227 KiB). */
#define SHARED_BYTES_EVERYWHERE (99 * 1024)

/* Shared memory of the largest kernel of the problem's configuration. */
static size_t shared_bytes(const gb_attn_problem *p)
{
    size_t bytes = 0;
    by_config(p, [&](auto e, auto dp) {
        using tl = tiles<typename decltype(e)::type, decltype(dp)::value>;
        static_assert(tl::most_bytes() <= SHARED_BYTES_EVERYWHERE,
                      "a configuration's tiles outgrow the shared memory of some GPUs");
        bytes = tl::most_bytes();
        return GB_OK;
    });
    return bytes;
}

/* Rows per tile of the problem's configuration (ROWS). */
static int tile_rows(gb_dtype dtype)
{
    return dtype == GB_F32 ? tiles<float, 32>::ROWS : tiles<__half, 32>::ROWS;
}

/* ---- the plugin ---------------------------------------------------------------------- */

static head_view view_of(const gb_tensor *t)
{
    head_view v = {t->data, t->stride[0], t->stride[1], t->stride[2]};
    return v;
}

static dims dims_of(const gb_attn_problem *p)
{
    const int64_t rows = tile_rows(p->dtype);
    dims s = {p->heads, p->seq_len, (int)p->head_dim, p->causal,
              1.0f / sqrtf((float)p->head_dim), attn_score_scale_log2(p->head_dim),
              (p->seq_len + rows - 1) / rows};
    return s;
}

/* Blocks of a launch: a tile of each head. */
static unsigned tile_blocks(const gb_attn_problem *p, const dims &s)
{
    return (unsigned)(p->batch * p->heads * s.tiles);
}

static gb_status flash_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    (void)options;
    gb_status st = attn_require_cuda(host, PLUGIN, device);
    if (st != GB_OK)
        return st;
    int limit = 0;
    cudaError_t err =
        cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device->ordinal);
    if (err != cudaSuccess) {
        host->set_error(host, PLUGIN " cannot read the shared memory limit of GPU %d: %s (%s); "
                        "check the GPU with nvidia-smi, or use attn/mem_efficient",
                        (int)device->ordinal, cudaGetErrorString(err), cudaGetErrorName(err));
        return GB_ERR_DEVICE;
    }
    attn_flash_cuda *f = (attn_flash_cuda *)host->alloc(host, sizeof *f);
    if (!f) {
        host->set_error(host, "cannot allocate the " PLUGIN " instance");
        return GB_ERR_NO_MEMORY;
    }
    f->host = host;
    attn_keep_device(&f->device, device);
    f->shared_limit = limit;
    *self = f;
    return GB_OK;
}

static void flash_destroy(void *self)
{
    attn_flash_cuda *f = (attn_flash_cuda *)self;
    if (f)
        f->host->free(f->host, f);
}

static int flash_eligible(void *self, const gb_attn_problem *p, char *reason, size_t reason_cap)
{
    const attn_flash_cuda *f = (const attn_flash_cuda *)self;
    if (!attn_problem_ok_on(PLUGIN, "cuda", p, reason, reason_cap))
        return 0;
    if (p->head_dim > MAX_HEAD_DIM) {
        snprintf(reason, reason_cap, PLUGIN " on cuda supports head_dim up to %d (tiles of 32, "
                 "64, 80, 96 or 128 columns, smaller head_dims padded with zeros); this run "
                 "asks for %lld (use attn/mem_efficient, up to 256)", MAX_HEAD_DIM,
                 (long long)p->head_dim);
        return 0;
    }
    const int64_t rows = tile_rows(p->dtype);
    if (p->batch * p->heads * ((p->seq_len + rows - 1) / rows) > INT32_MAX) {
        snprintf(reason, reason_cap, PLUGIN " on cuda launches a block per tile of %lld rows "
                 "of each head, at most %d blocks; (B, H, T) = (%lld, %lld, %lld) needs more "
                 "(use a smaller batch)", (long long)rows, INT32_MAX, (long long)p->batch,
                 (long long)p->heads, (long long)p->seq_len);
        return 0;
    }
    const size_t need = shared_bytes(p);
    if (f && need > (size_t)f->shared_limit) {
        snprintf(reason, reason_cap, PLUGIN " on cuda needs %zu bytes of shared memory per "
                 "block for head_dim %lld in %s, and this GPU offers %d (use "
                 "attn/mem_efficient)", need, (long long)p->head_dim, gb_dtype_name(p->dtype),
                 f->shared_limit);
        return 0;
    }
    return 1;
}

/* One f32 per row of B*H*T: the base-2 log-sum-exps (saved), D = dO . O (workspace). */
static size_t row_floats(const gb_attn_problem *p)
{
    return (size_t)p->batch * (size_t)p->heads * (size_t)p->seq_len * sizeof(float);
}

static gb_status flash_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                              size_t *workspace_bytes)
{
    (void)self;
    *saved_bytes = row_floats(p);
    *workspace_bytes = row_floats(p);
    return GB_OK;
}

static gb_status check_call(const attn_flash_cuda *f, const char *call, const gb_attn_problem *p,
                            const char *const *names, const gb_tensor *const *views, int n)
{
    char reason[256];
    int ok = flash_eligible((void *)f, p, reason, sizeof reason);
    return attn_check_call(f->host, PLUGIN, call, ok, reason, p, names, views, n);
}

/* Lets `kernel` use `bytes` of shared memory (beyond the default 48 KiB). */
template <typename K>
static gb_status allow_shared(const gb_host *host, K *kernel, size_t bytes)
{
    GB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)bytes));
    return GB_OK;
}

static gb_status flash_forward(void *self, const gb_attn_problem *p, gb_tensor out, gb_tensor q,
                               gb_tensor k, gb_tensor v, void *saved, void *workspace)
{
    (void)workspace;
    const attn_flash_cuda *f = (const attn_flash_cuda *)self;
    const gb_host *host = f->host;
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    gb_status st = check_call(f, "forward", p, names, views, 4);
    if (st != GB_OK)
        return st;
    cudaStream_t stream = (cudaStream_t)f->device.stream;
    const dims s = dims_of(p);
    return by_config(p, [&](auto e, auto dp) {
        using E = typename decltype(e)::type;
        constexpr int DP = decltype(dp)::value;
        using tl = tiles<E, DP>;
        gb_status status = allow_shared(host, forward_kernel<E, DP>, tl::fwd_bytes());
        if (status != GB_OK)
            return status;
        forward_kernel<E, DP><<<tile_blocks(p, s), tl::THREADS, tl::fwd_bytes(), stream>>>(
            view_of(&out), view_of(&q), view_of(&k), view_of(&v), (float *)saved, s);
        GB_CUDA_CHECK_LAUNCH("forward_kernel (a block per query tile)");
        return GB_OK;
    });
}

static gb_status flash_backward(void *self, const gb_attn_problem *p, gb_tensor dq, gb_tensor dk,
                                gb_tensor dv, gb_tensor dout, gb_tensor q, gb_tensor k,
                                gb_tensor v, gb_tensor out, const void *saved, void *workspace)
{
    const attn_flash_cuda *f = (const attn_flash_cuda *)self;
    const gb_host *host = f->host;
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v, &out};
    gb_status st = check_call(f, "backward", p, names, views, 8);
    if (st != GB_OK)
        return st;
    cudaStream_t stream = (cudaStream_t)f->device.stream;
    const dims s = dims_of(p);
    const int64_t rows = p->batch * p->heads * p->seq_len;
    const float *lse2 = (const float *)saved;
    float *delta = (float *)workspace;
    delta_kernel<<<(unsigned)((rows + DELTA_ROWS - 1) / DELTA_ROWS), DELTA_ROWS * WARP, 0,
                   stream>>>(delta, view_of(&dout), view_of(&out), p->dtype, s, rows);
    GB_CUDA_CHECK_LAUNCH("delta_kernel (dO . O, a warp per row)");
    return by_config(p, [&](auto e, auto dp) {
        using E = typename decltype(e)::type;
        constexpr int DP = decltype(dp)::value;
        using tl = tiles<E, DP>;
        gb_status status = allow_shared(host, dq_kernel<E, DP>, tl::dq_bytes());
        if (status == GB_OK)
            status = allow_shared(host, dkv_kernel<E, DP>, tl::dkv_bytes());
        if (status != GB_OK)
            return status;
        dq_kernel<E, DP><<<tile_blocks(p, s), tl::THREADS, tl::dq_bytes(), stream>>>(
            view_of(&dq), view_of(&q), view_of(&k), view_of(&v), view_of(&dout), lse2, delta, s);
        GB_CUDA_CHECK_LAUNCH("dq_kernel (a block per query tile)");
        dkv_kernel<E, DP><<<tile_blocks(p, s), tl::THREADS, tl::dkv_bytes(), stream>>>(
            view_of(&dk), view_of(&dv), view_of(&q), view_of(&k), view_of(&v), view_of(&dout),
            lse2, delta, s);
        GB_CUDA_CHECK_LAUNCH("dkv_kernel (a block per key tile)");
        return GB_OK;
    });
}

static const gb_attn_ops flash_ops = {
    /* .struct_size = */ sizeof(gb_attn_ops),
    /* .create = */ flash_create,
    /* .destroy = */ flash_destroy,
    /* .eligible = */ flash_eligible,
    /* .memory = */ flash_memory,
    /* .forward = */ flash_forward,
    /* .backward = */ flash_backward,
};

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
GB_PLUGIN_DEFINE_CAPS(GB_KIND_ATTN, "flash", "1.0.0",
                      "FlashAttention-2 tiles on tensor cores (WMMA; f32 on CUDA cores), "
                      "online softmax, log-sum-exps saved; any T, head_dim up to 128; f32, "
                      "bf16, f16",
                      GB_DEVICE_CUDA,
                      GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
                      GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY, GB_NO_OPTIONS, flash_ops)
}
