/* attn/flash's backward for bf16 and f16 on mma.sync (FlashAttention-2's backward, Dao
 * 2023): m16n8k16 tensor-core products on fragments the kernels index themselves
 * (kernels/cuda/mma_sync.cuh), so the scores never leave registers. cuda.cu runs D =
 * dO . O first and launches these through flash_backward_mma; f32 keeps its own kernels
 * there.
 *
 * Two kernels, each owning what it writes, so nothing is summed with atomics and the same
 * inputs give the same bits run after run (FlashAttention-2 adds dQ with atomics from the
 * dK/dV pass instead): a block per tile of ROWS keys keeps dK and dV of its rows in f32
 * accumulators while the query tiles that see them stream past, and a block per tile of
 * ROWS queries keeps dQ while the key tiles stream past. S and dP are computed in both,
 * which is the price: seven products a tile pair where FlashAttention-2 has five.
 *
 * A warp owns 16 rows of the block. Per streamed tile of COLS rows it computes its scores
 * with its own rows as the mma's M: S^T = K Q^T and dP^T = V dO^T in the dK/dV kernel,
 * S = Q K^T and dP = dO V^T in the dQ kernel (A and B both rows of shared tiles, read by
 * plain ldmatrix). P = 2^(s2 - lse2) and dS = P (dP - D) are computed on the accumulator
 * registers, and rounded in registers into A fragments: the accumulators of two
 * neighbouring n8 tiles are exactly one k16 A fragment (rows g and g + 8, columns 2t, 2t+1
 * and 2t + 8, 2t + 9). Because the dK/dV kernel puts keys on M, P^T and dS^T come out of
 * its score products already as the A operands of dV += P^T dO and dK += dS^T Q: no
 * transpose of P or dS at all. The transposes fall on the B operands instead, dO and Q
 * (and K in dQ += dS K), which are stored with the reduced dimension on rows: ldmatrix
 * .trans reads them as the column-major B fragments the mma wants, for the price of a
 * plain ldmatrix.
 *
 * Shared memory: the block's own two tiles (ROWS rows), the streamed two tiles (COLS rows)
 * double-buffered by cp.async (stream_tiles), and in dK/dV the streamed queries' lse2 and
 * D. Rows are padded by 16 bytes (LD = DP + 8), so the eight 16-byte rows of every
 * ldmatrix phase fall in eight different groups of four banks: conflict-free at every
 * head_dim compiled (32, 64, 80, 96, 128).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "act.cuh"
#include "attn_flash_math.h"
#include "flash_common.cuh"
#include "mma_sync.cuh"

/* ---- a warp's products --------------------------------------------------------------- */

static __device__ int lane_id()
{
    return threadIdx.x % WARP;
}

/* acc (16, 8N) = A B^T: A the warp's 16 rows of a shared tile, B N*8 rows of another, both
 * (rows, DP) with leading dimension LD. Per k16 step one ldmatrix.x4 of A (lanes 0-15 give
 * rows 0-15 at column k, lanes 16-31 the same rows at k + 8: matrices a[0..3]) and one of B
 * per two n8 tiles (matrix i: rows 8 (i / 2) + 0..7 at column k + 8 (i % 2), i.e. b[0], b[1]
 * of the first tile and of the second). */
template <typename E, int DP, int LD, int N>
static __device__ void scores(float (&acc)[N][4], const E *A, const E *B)
{
    static_assert(N % 2 == 0, "n8 tiles in pairs");
    const int lane = lane_id(), m = lane / 8;
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[n][e] = 0.0f;
#pragma unroll
    for (int k = 0; k < DP; k += 16) {
        uint32_t a[4];
        gb_ldmatrix_x4(a, A + (lane % 16) * LD + k + (lane / 16) * 8);
#pragma unroll
        for (int n = 0; n < N; n += 2) {
            uint32_t b[4];
            gb_ldmatrix_x4(b, B + (8 * n + (m / 2) * 8 + lane % 8) * LD + k + (m % 2) * 8);
            mma16<E>::mma(acc[n], a, b);
            mma16<E>::mma(acc[n + 1], a, b + 2);
        }
    }
}

/* acc (16, DP) += X B: X (16, 16K) the warp's A fragments (K of them, from rounded score
 * accumulators), B (16K, DP) a shared tile with leading dimension LD whose rows are X's
 * columns. B's fragments want two consecutive rows of one column per register, so
 * ldmatrix.trans reads them (matrix i: rows 16 kk + 8 (i % 2) + 0..7 at column 8 n +
 * 8 (i / 2), i.e. b[0], b[1] of n8 tile n and of tile n + 1). */
template <typename E, int DP, int LD, int K>
static __device__ void accumulate(float (&acc)[DP / 8][4], const uint32_t (&X)[K][4],
                                  const E *B)
{
    const int lane = lane_id(), m = lane / 8;
#pragma unroll
    for (int kk = 0; kk < K; kk++)
#pragma unroll
        for (int n = 0; n < DP / 8; n += 2) {
            uint32_t b[4];
            gb_ldmatrix_x4_trans(b, B + (16 * kk + (m % 2) * 8 + lane % 8) * LD + 8 * n +
                                        (m / 2) * 8);
            mma16<E>::mma(acc[n], X[kk], b);
            mma16<E>::mma(acc[n + 1], X[kk], b + 2);
        }
}

/* P and dS of the warp's 16 rows against a streamed tile, as A fragments: S = A B^T and
 * dP = dA dB^T (scores()), then for each element (r, c) P = 2^(S * scale_log2 - lse2)
 * where visible, else 0, and dS = P (dP - D), rounded to E. where(r, c, &lse2, &D) says
 * whether (r, c) is visible and gives its row's or column's saved values. Accumulator n's
 * registers (g, 2t..) and (g + 8, 2t..) are registers (n % 2) * 2 + 0 and + 1 of A
 * fragment n / 2. */
template <typename E, int DP, int LD, int K, class Where>
static __device__ void probs_and_grads(const E *A, const E *B, const E *dA, const E *dB,
                                       float scale_log2, Where where, uint32_t (&P)[K][4],
                                       uint32_t (&dS)[K][4])
{
    float S[2 * K][4], dP[2 * K][4];
    scores<E, DP, LD>(S, A, B);
    scores<E, DP, LD>(dP, dA, dB);
    const int lane = lane_id(), g = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < 2 * K; n++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float p[2], ds[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float lse = 0.0f, delta = 0.0f;
                const bool seen = where(g + 8 * h, 8 * n + 2 * t + e, &lse, &delta);
                p[e] = seen ? attn_prob_saved(S[n][2 * h + e] * scale_log2, lse) : 0.0f;
                ds[e] = attn_dscore(p[e], dP[n][2 * h + e], delta);
            }
            P[n / 2][(n % 2) * 2 + h] = mma16<E>::pack(p[0], p[1]);
            dS[n / 2][(n % 2) * 2 + h] = mma16<E>::pack(ds[0], ds[1]);
        }
}

/* factor * acc, the warp's rows row0 .. row0 + 15 of `v` (from element `head`), rounded
 * to E: each lane its accumulator pairs, rows past T and columns past head_dim left out.
 * Where every view's rows start on 16 bytes (s.async; head_dim is then a multiple of 8) a
 * pair is one 4-byte store, else two 2-byte ones. */
template <typename E, int DP>
static __device__ void store_rows(const head_view &v, int64_t head, const float (&acc)[DP / 8][4],
                                  float factor, int64_t row0, const dims &s)
{
    const int lane = lane_id(), g = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < DP / 8; n++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t r = row0 + g + 8 * h, at = head + r * v.row;
            const int d = 8 * n + 2 * t;
            const float lo = factor * acc[n][2 * h], hi = factor * acc[n][2 * h + 1];
            if (r >= s.T || d >= s.D)
                continue;
            if (s.async) {
                *(uint32_t *)((E *)v.data + at + d) = mma16<E>::pack(lo, hi);
            } else {
                gb_act_store(v.data, elem<E>::dtype, at + d, lo);
                if (d + 1 < s.D)
                    gb_act_store(v.data, elem<E>::dtype, at + d + 1, hi);
            }
        }
}

static __device__ int64_t head_offset(const head_view &v, int64_t bh, const dims &s)
{
    return (bh / s.H) * v.batch + (bh % s.H) * v.head;
}

/* The `where` of probs_and_grads in the dQ kernel: the warp's rows are queries from tw,
 * its columns keys from j0; each lane keeps its two rows' lse2 and D in registers. */
struct query_rows {
    int64_t tw, j0;
    const float *lse, *delta;   /* rows g and g + 8 */
    const dims &s;
    __device__ bool operator()(int r, int c, float *l, float *d) const
    {
        *l = lse[r / 8];
        *d = delta[r / 8];
        return attn_visible(tw + r, j0 + c, s.T, s.causal) != 0;
    }
};

/* ... and in the dK/dV kernel: the warp's rows are keys from jw, its columns queries from
 * t0, whose lse2 and D came with them into shared memory. */
struct key_rows {
    int64_t jw, t0;
    const float *lse, *delta;   /* the streamed queries' */
    const dims &s;
    __device__ bool operator()(int r, int c, float *l, float *d) const
    {
        *l = lse[c];
        *d = delta[c];
        return attn_visible(t0 + c, jw + r, s.T, s.causal) != 0;
    }
};

/* ---- kernels ------------------------------------------------------------------------- */

/* The region at `offset` of the block's dynamic shared memory (mma_tiles' layout). */
template <typename E> static __device__ E *shared_tile(size_t offset)
{
    extern __shared__ __align__(128) unsigned char flash_bwd_shared[];
    return (E *)(flash_bwd_shared + offset);
}

/* dQ (B, H, T, D): a block per tile of ROWS queries over the key tiles they see (K and V
 * streamed); a warp's 16 rows of dQ in f32 accumulators, its rows' lse2 and D in
 * registers. */
template <typename E, int DP>
static __global__ void __launch_bounds__(mma_tiles<DP>::THREADS)
dq_mma_kernel(head_view dq, head_view q, head_view k, head_view v, head_view dout,
              const float *lse2, const float *delta, dims s)
{
    using tl = mma_tiles<DP>;
    const int warp = threadIdx.x / WARP, g = lane_id() / 4;
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t tw = t0 + warp * 16;   // the warp's first query
    E *qs = shared_tile<E>(0), *dos = shared_tile<E>(tl::own_b());
    const E *kh = head_start<E>(k, bh, s), *vh = head_start<E>(v, bh, s);
    auto queue = [&](int64_t i, int buf) {
        queue_tile<E, DP, tl::LD>(shared_tile<E>(tl::other_a(buf)), tl::COLS, kh, k.row,
                              i * tl::COLS, s);
        queue_tile<E, DP, tl::LD>(shared_tile<E>(tl::other_b(buf)), tl::COLS, vh, v.row,
                              i * tl::COLS, s);
    };
    float lse_r[2], delta_r[2];   // rows g and g + 8
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t t = tw + g + 8 * h;
        lse_r[h] = t < s.T ? lse2[bh * s.T + t] : 0.0f;
        delta_r[h] = t < s.T ? delta[bh * s.T + t] : 0.0f;
    }

    queue_tile<E, DP, tl::LD>(qs, tl::ROWS, head_start<E>(q, bh, s), q.row, t0, s);
    queue_tile<E, DP, tl::LD>(dos, tl::ROWS, head_start<E>(dout, bh, s), dout.row, t0, s);
    queue(0, 0);
    float acc[DP / 8][4] = {};
    const int64_t n = tile_count(0, attn_keys_end(t0, tl::ROWS, s.T, s.causal), tl::COLS);
    stream_tiles(n, queue, [&](int64_t i, int buf) {
        const E *ks = shared_tile<E>(tl::other_a(buf)), *vs = shared_tile<E>(tl::other_b(buf));
        uint32_t P[tl::NS / 2][4], dS[tl::NS / 2][4];
        probs_and_grads<E, DP, tl::LD>(qs + warp * 16 * tl::LD, ks, dos + warp * 16 * tl::LD,
                                       vs, s.scale_log2,
                                       query_rows{tw, i * tl::COLS, lse_r, delta_r, s}, P, dS);
        accumulate<E, DP, tl::LD>(acc, dS, ks);
    });
    store_rows<E, DP>(dq, head_offset(dq, bh, s), acc, s.scale, tw, s);
}

/* dK and dV (B, H, T, D): a block per tile of ROWS keys over the query tiles that see them
 * (Q, dO and their lse2 and D streamed); a warp's 16 rows of dK and dV in f32
 * accumulators. Its scores have keys as rows: S^T = K Q^T, dP^T = V dO^T. */
template <typename E, int DP>
static __global__ void __launch_bounds__(mma_tiles<DP>::THREADS)
dkv_mma_kernel(head_view dk, head_view dv, head_view q, head_view k, head_view v,
               head_view dout, const float *lse2, const float *delta, dims s)
{
    using tl = mma_tiles<DP>;
    const int warp = threadIdx.x / WARP;
    const int64_t bh = block_head(s), j0 = block_tile(s, false) * tl::ROWS;
    const int64_t jw = j0 + warp * 16;   // the warp's first key
    const int64_t first = attn_queries_begin(j0, tl::COLS, s.causal);
    E *ks = shared_tile<E>(0), *vs = shared_tile<E>(tl::own_b());
    const E *qh = head_start<E>(q, bh, s), *doh = head_start<E>(dout, bh, s);
    auto queue = [&](int64_t i, int buf) {
        const int64_t t0 = first + i * tl::COLS;
        queue_tile<E, DP, tl::LD>(shared_tile<E>(tl::other_a(buf)), tl::COLS, qh, q.row, t0, s);
        queue_tile<E, DP, tl::LD>(shared_tile<E>(tl::other_b(buf)), tl::COLS, doh, dout.row, t0, s);
        queue_rows(shared_tile<float>(tl::lse(buf)), tl::COLS, lse2, bh, t0, s);
        queue_rows(shared_tile<float>(tl::delta(buf)), tl::COLS, delta, bh, t0, s);
    };

    queue_tile<E, DP, tl::LD>(ks, tl::ROWS, head_start<E>(k, bh, s), k.row, j0, s);
    queue_tile<E, DP, tl::LD>(vs, tl::ROWS, head_start<E>(v, bh, s), v.row, j0, s);
    queue(0, 0);
    float dk_acc[DP / 8][4] = {}, dv_acc[DP / 8][4] = {};
    stream_tiles(tile_count(first, s.T, tl::COLS), queue, [&](int64_t i, int buf) {
        const E *qs = shared_tile<E>(tl::other_a(buf)), *dos = shared_tile<E>(tl::other_b(buf));
        const key_rows where = {jw, first + i * tl::COLS, shared_tile<float>(tl::lse(buf)),
                                shared_tile<float>(tl::delta(buf)), s};
        uint32_t P[tl::NS / 2][4], dS[tl::NS / 2][4];
        probs_and_grads<E, DP, tl::LD>(ks + warp * 16 * tl::LD, qs, vs + warp * 16 * tl::LD,
                                       dos, s.scale_log2, where, P, dS);
        accumulate<E, DP, tl::LD>(dv_acc, P, dos);
        accumulate<E, DP, tl::LD>(dk_acc, dS, qs);
    });
    store_rows<E, DP>(dk, head_offset(dk, bh, s), dk_acc, s.scale, jw, s);
    store_rows<E, DP>(dv, head_offset(dv, bh, s), dv_acc, 1.0f, jw, s);
}

/* ---- launch -------------------------------------------------------------------------- */

template <typename E, int DP>
gb_status flash_backward_mma(const gb_host *host, const bwd_views &w, dims s, int64_t heads,
                             cudaStream_t stream)
{
    using tl = mma_tiles<DP>;
    s.tiles = (s.T + tl::ROWS - 1) / tl::ROWS;
    const unsigned blocks = (unsigned)(heads * s.tiles);
    gb_status status = allow_shared(host, dq_mma_kernel<E, DP>, tl::dq_bytes());
    if (status == GB_OK)
        status = allow_shared(host, dkv_mma_kernel<E, DP>, tl::dkv_bytes());
    if (status != GB_OK)
        return status;
    dq_mma_kernel<E, DP><<<blocks, tl::THREADS, tl::dq_bytes(), stream>>>(
        w.dq, w.q, w.k, w.v, w.dout, w.lse2, w.delta, s);
    GB_CUDA_CHECK_LAUNCH("dq_mma_kernel (a block per query tile)");
    dkv_mma_kernel<E, DP><<<blocks, tl::THREADS, tl::dkv_bytes(), stream>>>(
        w.dk, w.dv, w.q, w.k, w.v, w.dout, w.lse2, w.delta, s);
    GB_CUDA_CHECK_LAUNCH("dkv_mma_kernel (a block per key tile)");
    return GB_OK;
}

/* The configurations cuda.cu dispatches to: both 16-bit types at every padded head_dim. */
#define FLASH_BACKWARD_MMA(E, DP)                                                         \
    template gb_status flash_backward_mma<E, DP>(const gb_host *, const bwd_views &, dims, \
                                                 int64_t, cudaStream_t);
#define FLASH_BACKWARD_MMA_DIMS(E) \
    FLASH_BACKWARD_MMA(E, 32)      \
    FLASH_BACKWARD_MMA(E, 64)      \
    FLASH_BACKWARD_MMA(E, 80)      \
    FLASH_BACKWARD_MMA(E, 96)      \
    FLASH_BACKWARD_MMA(E, 128)
FLASH_BACKWARD_MMA_DIMS(__nv_bfloat16)
FLASH_BACKWARD_MMA_DIMS(__half)
