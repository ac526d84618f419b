/* attn/flash's backward for bf16 and f16 on mma.sync (FlashAttention-2's backward, Dao
 * 2023): m16n8k16 tensor-core products on fragments the kernels index themselves
 * (kernels/cuda/mma_sync.cuh), so the scores never leave registers. cuda.cu launches
 * them through flash_backward_mma; f32 keeps its own kernels there. At head_dim 64 on
 * sm_90a the same two kernels run on wgmma (wg_dq_kernel, wg_dkv_kernel, at the end:
 * a warpgroup per 64 rows) when cuda.cu asks. D = dO . O, which both
 * need, is the dQ kernel's to work out (its warps' rows, before their first tile) and to
 * store for the dK/dV kernel, which runs after it on the stream: no kernel of its own,
 * and dO and O read once for it.
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
 * plain ldmatrix. Up to head_dim 64 each kernel reads its warp's own rows (Q and dO; K and
 * V) into A fragments once and holds them (held_rows), and takes a streamed tile 16 rows at
 * a time, so that the scores of fewer rows leave them room in the 128 registers of 16 warps
 * an SM (the dK/dV kernel, with two accumulators, spills two registers for it: two local
 * stores and loads a tile, against the eight ldmatrix.x4 of K and V it no longer reads).
 *
 * Only the tiles that the causal diagonal or the end of the sequence cut through are
 * masked element by element (tile_mask, in 32-bit offsets from the tile's corner: their
 * hidden scores made -inf before the one probability step, hide_masked); the others run
 * none of the tests, and a warp skips a streamed tile that none of its rows sees.
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
#include <string.h>

#include <type_traits>

#include "attn_flash_math.h"
#include "flash_common.cuh"
#include "mma_sync.cuh"
#include "vec16.cuh"

/* ---- a warp's products --------------------------------------------------------------- */

static __device__ int lane_id()
{
    return threadIdx.x % WARP;
}

/* The A operand of a warp's 16 rows of a shared tile (rows, DP), leading dimension LD:
 * fragment k (k16 step k) by ldmatrix.x4, whose lanes 0-15 give rows 0-15 at column
 * 16 k and lanes 16-31 the same rows at 16 k + 8 (matrices a[0..3]); read when a product
 * asks for it (shared_rows), or once for all the streamed tiles (held_rows: DP / 4
 * registers held, no shared-memory read a tile). */
template <typename E, int DP, int LD> struct shared_rows {
    const E *rows;
    __device__ void load(const E *from) { rows = from; }
    __device__ void fragment(int k, uint32_t (&a)[4]) const
    {
        const int lane = lane_id();
        gb_ldmatrix_x4(a, rows + (lane % 16) * LD + 16 * k + (lane / 16) * 8);
    }
};

template <typename E, int DP, int LD> struct held_rows {
    uint32_t a[DP / 16][4];
    /* once the rows are in shared memory */
    __device__ void load(const E *rows)
    {
#pragma unroll
        for (int k = 0; k < DP / 16; k++)
            shared_rows<E, DP, LD>{rows}.fragment(k, a[k]);
    }
    __device__ void fragment(int k, uint32_t (&out)[4]) const
    {
#pragma unroll
        for (int i = 0; i < 4; i++)
            out[i] = a[k][i];
    }
};

/* How the kernels take their warps' own rows: held up to head_dim 64, where a streamed
 * tile is taken 16 rows at a time (part_rows) so that the scores of fewer rows make room
 * for them; read a tile at a time beyond, where holding them would take the dQ kernel past
 * 128 registers and so halve the warps an SM runs (two blocks of 8 to one), and the dK/dV
 * kernel's accumulators leave no room. */
template <typename E, int DP, int LD>
using own_rows = typename std::conditional<DP <= 64, held_rows<E, DP, LD>,
                                           shared_rows<E, DP, LD>>::type;

template <int DP> static constexpr __host__ __device__ int part_rows()
{
    return DP <= 64 ? 16 : mma_tiles<DP>::COLS;
}

/* acc (16, 8N) = A B^T: A a warp's 16 rows (shared_rows or held_rows), B N*8 rows of a
 * shared tile (rows, DP) with leading dimension LD. Per k16 step one ldmatrix.x4 of B per
 * two n8 tiles (matrix i: rows 8 (i / 2) + 0..7 at column k + 8 (i % 2), i.e. b[0], b[1]
 * of the first tile and of the second). */
template <typename E, int DP, int LD, int N, class Rows>
static __device__ void scores(float (&acc)[N][4], const Rows &A, const E *B)
{
    static_assert(N % 2 == 0, "n8 tiles in pairs");
    const int lane = lane_id(), m = lane / 8;
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[n][e] = 0.0f;
#pragma unroll
    for (int k = 0; k < DP / 16; k++) {
        uint32_t a[4];
        A.fragment(k, a);
#pragma unroll
        for (int n = 0; n < N; n += 2) {
            uint32_t b[4];
            gb_ldmatrix_x4(b, B + (8 * n + (m / 2) * 8 + lane % 8) * LD + 16 * k + (m % 2) * 8);
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

/* Which elements (r, c) of a warp's tile of 16 rows by COLS columns are visible, from
 * offsets to its corner in 32 bits: columns before `cols` (the rest are past T) and, under
 * the causal mask, the key's offset less the query's at most `diag` (the keys are the rows
 * in dK/dV, the columns in dQ). Rows past T are not masked: a row's products touch only
 * its own accumulators, which are not stored past T, and a warp whose rows all lie past T
 * skips every tile (rows_seen). */
template <int COLS, bool KEYS_ON_ROWS> struct tile_mask {
    int cols, diag;

    /* The warp's rows from block_r0 + warp_r0 against the columns from c0 (absolute
     * positions; block_r0 and c0 the same for the whole block, so the 64-bit arithmetic
     * stays in uniform registers and a warp holds only its 32-bit offset). */
    __device__ tile_mask(int64_t block_r0, int warp_r0, int64_t c0, const dims &s)
        : cols(clamp(wide(s.T - c0), COLS)),
          diag(!s.causal      ? WIDE
               : KEYS_ON_ROWS ? wide(c0 - block_r0) - warp_r0
                              : wide(block_r0 - c0) + warp_r0)
    {
    }
    __device__ bool visible(int r, int c) const
    {
        return c < cols && (KEYS_ON_ROWS ? r - c : c - r) <= diag;
    }
    /* some element is hidden: the tile needs the mask */
    __device__ bool partial() const
    {
        return cols < COLS || (KEYS_ON_ROWS ? 15 : COLS - 1) > diag;
    }
    /* no element is visible: the warp skips the tile */
    __device__ bool empty() const
    {
        return cols == 0 || (KEYS_ON_ROWS ? 1 - COLS : -15) > diag;
    }

  private:
    /* distances past this are as good as infinite: tiles and warp offsets are far smaller */
    static constexpr int WIDE = 1 << 30;
    static __device__ int wide(int64_t d) { return d < -WIDE ? -WIDE : d > WIDE ? WIDE : (int)d; }
    static __device__ int clamp(int n, int most) { return n < 0 ? 0 : n > most ? most : n; }
};

/* Whether any of the warp's 16 rows from block_r0 + warp_r0 lies before T. */
static __device__ bool rows_seen(int64_t block_r0, int warp_r0, const dims &s)
{
    return block_r0 + warp_r0 < s.T;
}

/* The saved lse2 and D of a warp's tile where its rows are queries (dQ): a lane's two
 * rows g and g + 8, in registers for the whole kernel; every n8 tile of scores takes the
 * same (tile(n)), by row h. */
struct row_saved {
    float lse2[2], delta[2];
    __device__ const row_saved &tile(int) const { return *this; }
    __device__ float lse(int h, int) const { return lse2[h]; }
    __device__ float d(int h, int) const { return delta[h]; }
};

/* ... and where its columns are queries (dK/dV): n8 tile n's columns 8 n + 2 t + e of a
 * lane, read from shared memory as one pair each (tile(n)) when the element-wise step
 * reaches the tile (after the products, so that they hold no register through them). */
struct col_pair {
    float2 lse2, delta;
    __device__ float lse(int, int e) const { return e ? lse2.y : lse2.x; }
    __device__ float d(int, int e) const { return e ? delta.y : delta.x; }
};

struct col_saved {
    const float *lse2, *delta;   /* the streamed tile's, from column 2 t */
    __device__ col_saved(const float *lse_tile, const float *delta_tile)
        : lse2(lse_tile + 2 * (lane_id() % 4)), delta(delta_tile + 2 * (lane_id() % 4))
    {
    }
    __device__ col_pair tile(int n) const
    {
        return {pair_at(lse2 + 8 * n), pair_at(delta + 8 * n)};
    }

    /* Two floats by one 8-byte load, as nvcc's LDS.64 (a float2 copied as a struct, g++,
     * which builds the emulated kernels, loads a float at a time, which the counting mode
     * would take for two shared loads). */
    static __device__ float2 pair_at(const float *p)
    {
        const uint64_t bits = *reinterpret_cast<const uint64_t *>(p);
        float2 v;
        memcpy(&v, &bits, sizeof v);
        return v;
    }
};

/* The scores `mask` hides set to -inf, so that the probabilities computed from them are 0
 * and so are their score gradients (dS = 0 (dP - D)): a tile the causal diagonal or the
 * end of the sequence cuts through takes this pass before grads_of, the others none of
 * its tests. Accumulator n's registers e hold (g + 8 (e / 2), 8 n + 2 t + e % 2). */
template <int N, class Mask>
static __device__ void hide_masked(float (&S)[N][4], const Mask &mask)
{
    const int lane = lane_id(), g = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (!mask.visible(g + 8 * (e / 2), 8 * n + 2 * t + e % 2))
                S[n][e] = -INFINITY;
}

/* P and dS of the warp's 16 rows against a streamed tile of 16 K columns, as A fragments,
 * from its scores S and dP (2 K n8 tiles of accumulators): for each element (r, c) P =
 * 2^(S * scale_log2 - lse2) and dS = P (dP - D), rounded to E, with the row's or column's
 * saved lse2 and D; where `mask` cuts through the tile, the hidden scores first made -inf
 * (hide_masked), so their P and dS are 0. Accumulator n's registers (g, 2t..) and
 * (g + 8, 2t..) are registers (n % 2) * 2 + 0 and + 1 of A fragment n / 2. */
template <typename E, int K, class Saved, class Mask>
static __device__ void grads_of(float (&S)[2 * K][4], const float (&dP)[2 * K][4],
                                float scale_log2, const Saved &saved, const Mask &mask,
                                uint32_t (&P)[K][4], uint32_t (&dS)[K][4])
{
    if (mask.partial())
        hide_masked(S, mask);
#pragma unroll
    for (int n = 0; n < 2 * K; n++) {
        const auto &values = saved.tile(n);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float p[2], ds[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                p[e] = attn_prob_saved(S[n][2 * h + e] * scale_log2, values.lse(h, e));
                ds[e] = attn_dscore(p[e], dP[n][2 * h + e], values.d(h, e));
            }
            P[n / 2][(n % 2) * 2 + h] = mma16<E>::pack(p[0], p[1]);
            dS[n / 2][(n % 2) * 2 + h] = mma16<E>::pack(ds[0], ds[1]);
        }
    }
}

/* grads_of on the scores of S = A B^T and dP = dA dB^T (scores()); false, and nothing
 * computed, where the mask hides the whole tile from the warp. */
template <typename E, int DP, int LD, int K, class Rows, class dRows, class Saved, class Mask>
static __device__ bool tile_probs_and_grads(const Rows &a, const E *B, const dRows &da,
                                            const E *dB, float scale_log2, const Saved &saved,
                                            const Mask &mask, uint32_t (&P)[K][4],
                                            uint32_t (&dS)[K][4])
{
    if (mask.empty())
        return false;
    float S[2 * K][4], dP[2 * K][4];
    scores<E, DP, LD>(S, a, B);
    scores<E, DP, LD>(dP, da, dB);
    grads_of<E, K>(S, dP, scale_log2, saved, mask, P, dS);
    return true;
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

/* The 8 elements of `row` from column c as floats, zeros past head_dim: one 16-byte load
 * where every view's rows start on 16 bytes (s.async: head_dim a multiple of 8, so the
 * chunk lies wholly before it or past it), else one element at a time. */
template <typename E>
static __device__ void load_chunk(float (&v)[8], const E *row, int c, const dims &s)
{
    if (s.async) {
        if (c < s.D) {
            const gb_vec16 unit = gb_vec16_load(row + c);
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] = gb_act_widen(elem<E>::dtype, unit.h[e]);
            return;
        }
#pragma unroll
        for (int e = 0; e < 8; e++)
            v[e] = 0.0f;
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
        v[e] = c + e < s.D ? elem<E>::widen(row[c + e]) : 0.0f;
}

/* The row_saved of a warp's 16 queries from t (of head bh): lse2 from the forward, and D =
 * dO . O, stored to delta for the dK/dV kernel that runs next; 0 past T. Lanes 2 r and
 * 2 r + 1 take row r, its 8-element chunks alternately, so each load of the warp reads 16
 * rows' 32 consecutive bytes; a lane sums its products in chunk order, the pair adds its
 * two sums, and each lane takes its rows' (g and g + 8) from their pairs. Loaded all at
 * once, before the warp's first tile: no kernel of its own, dO and O read once for it. */
template <typename E, int DP>
static __device__ row_saved warp_rows_saved(const float *lse2, float *delta,
                                            const head_view &dout, const head_view &out,
                                            int64_t bh, int64_t t, const dims &s)
{
    const int lane = lane_id(), g = lane / 4;
    const int64_t row = t + lane / 2;
    float dot = 0.0f;
    if (row < s.T) {
        const E *x = (const E *)dout.data + head_offset(dout, bh, s) + row * dout.row;
        const E *y = (const E *)out.data + head_offset(out, bh, s) + row * out.row;
#pragma unroll
        for (int c = 8 * (lane % 2); c < DP; c += 16) {
            float a[8], b[8];
            load_chunk<E>(a, x, c, s);
            load_chunk<E>(b, y, c, s);
#pragma unroll
            for (int e = 0; e < 8; e++)
                dot += a[e] * b[e];
        }
    }
    dot += __shfl_xor_sync(0xffffffffu, dot, 1);
    if (lane % 2 == 0 && row < s.T)
        delta[bh * s.T + row] = dot;
    row_saved saved = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        saved.delta[h] = __shfl_sync(0xffffffffu, dot, 2 * (g + 8 * h));
        if (t + g + 8 * h < s.T)
            saved.lse2[h] = lse2[bh * s.T + t + g + 8 * h];
    }
    return saved;
}

/* ---- kernels ------------------------------------------------------------------------- */

/* The region at `offset` of the block's dynamic shared memory (mma_tiles' layout). */
template <typename E> static __device__ E *shared_tile(size_t offset)
{
    extern __shared__ __align__(128) unsigned char flash_bwd_shared[];
    return (E *)(flash_bwd_shared + offset);
}

/* At the first streamed tile (its wait brought the block's own tiles in too), the warp's
 * own rows of both tiles into a and b (own_rows: held, or just their address); then
 * whether any of those rows lies before T, which a warp past it skips every tile for. */
template <typename E, int DP, class Rows>
static __device__ bool own_rows_ready(int64_t i, Rows &a, Rows &b, int64_t block_r0,
                                      const dims &s)
{
    using tl = mma_tiles<DP>;
    const int warp = threadIdx.x / WARP;
    if (i == 0) {
        a.load(shared_tile<E>(0) + warp * 16 * tl::LD);
        b.load(shared_tile<E>(tl::own_b()) + warp * 16 * tl::LD);
    }
    return rows_seen(block_r0, warp * 16, s);
}

/* dQ (B, H, T, D): a block per tile of ROWS queries over the key tiles they see (K and V
 * streamed); a warp's 16 rows of dQ in f32 accumulators, its rows of Q and dO as A
 * fragments (own_rows) and their lse2 and D in registers (D worked out and stored here,
 * warp_rows_saved). A warp skips the key tiles wholly after its queries (the causal
 * diagonal runs through the block's last tiles). */
template <typename E, int DP>
static __global__ void __launch_bounds__(mma_tiles<DP>::THREADS)
dq_mma_kernel(head_view dq, head_view q, head_view k, head_view v, head_view dout,
              head_view out, const float *lse2, float *delta, dims s)
{
    using tl = mma_tiles<DP>;
    const int warp = threadIdx.x / WARP;
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    E *qs = shared_tile<E>(0), *dos = shared_tile<E>(tl::own_b());
    const E *kh = head_start<E>(k, bh, s), *vh = head_start<E>(v, bh, s);
    auto queue = [&](int64_t i, int buf) {
        queue_tile<E, DP, tl::LD>(shared_tile<E>(tl::other_a(buf)), tl::COLS, kh, k.row,
                              i * tl::COLS, s);
        queue_tile<E, DP, tl::LD>(shared_tile<E>(tl::other_b(buf)), tl::COLS, vh, v.row,
                              i * tl::COLS, s);
    };
    queue_tile<E, DP, tl::LD>(qs, tl::ROWS, head_start<E>(q, bh, s), q.row, t0, s);
    queue_tile<E, DP, tl::LD>(dos, tl::ROWS, head_start<E>(dout, bh, s), dout.row, t0, s);
    queue(0, 0);
    const row_saved saved =
        warp_rows_saved<E, DP>(lse2, delta, dout, out, bh, t0 + warp * 16, s);
    float acc[DP / 8][4] = {};
    own_rows<E, DP, tl::LD> qa, doa;
    constexpr int PART = part_rows<DP>();   // the keys of a streamed tile taken at once
    const int64_t n = tile_count(0, attn_keys_end(t0, tl::ROWS, s.T, s.causal), tl::COLS);
    stream_tiles(n, queue, [&](int64_t i, int buf) {
        if (!own_rows_ready<E, DP>(i, qa, doa, t0, s))
            return;
#pragma unroll
        for (int part = 0; part < tl::COLS; part += PART) {
            const E *ks = shared_tile<E>(tl::other_a(buf)) + part * tl::LD;
            const E *vs = shared_tile<E>(tl::other_b(buf)) + part * tl::LD;
            const tile_mask<PART, false> mask(t0, warp * 16, i * tl::COLS + part, s);
            uint32_t P[PART / 16][4], dS[PART / 16][4];
            if (tile_probs_and_grads<E, DP, tl::LD>(qa, ks, doa, vs, s.scale_log2, saved, mask,
                                                    P, dS))
                accumulate<E, DP, tl::LD>(acc, dS, ks);
        }
    });
    store_rows<E, DP>(dq, head_offset(dq, bh, s), acc, s.scale, t0 + warp * 16, s);
}

/* dK and dV (B, H, T, D): a block per tile of ROWS keys over the query tiles that see them
 * (Q, dO and their lse2 and D streamed); a warp's 16 rows of dK and dV in f32
 * accumulators, its rows of K and V as A fragments (own_rows). Its scores have keys as
 * rows: S^T = K Q^T, dP^T = V dO^T. A warp skips the query tiles wholly before its keys
 * (the causal diagonal runs through the first). */
template <typename E, int DP>
static __global__ void __launch_bounds__(mma_tiles<DP>::THREADS)
dkv_mma_kernel(head_view dk, head_view dv, head_view q, head_view k, head_view v,
               head_view dout, const float *lse2, const float *delta, dims s)
{
    using tl = mma_tiles<DP>;
    const int warp = threadIdx.x / WARP;
    const int64_t bh = block_head(s), j0 = block_tile(s, false) * tl::ROWS;
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
    own_rows<E, DP, tl::LD> ka, va;
    constexpr int PART = part_rows<DP>();
    stream_tiles(tile_count(first, s.T, tl::COLS), queue, [&](int64_t i, int buf) {
        if (!own_rows_ready<E, DP>(i, ka, va, j0, s))
            return;
#pragma unroll
        for (int part = 0; part < tl::COLS; part += PART) {
            const E *qs = shared_tile<E>(tl::other_a(buf)) + part * tl::LD;
            const E *dos = shared_tile<E>(tl::other_b(buf)) + part * tl::LD;
            const tile_mask<PART, true> mask(j0, warp * 16, first + i * tl::COLS + part, s);
            const col_saved saved(shared_tile<float>(tl::lse(buf)) + part,
                                  shared_tile<float>(tl::delta(buf)) + part);
            uint32_t P[PART / 16][4], dS[PART / 16][4];
            if (!tile_probs_and_grads<E, DP, tl::LD>(ka, qs, va, dos, s.scale_log2, saved, mask,
                                                     P, dS))
                continue;
            accumulate<E, DP, tl::LD>(dv_acc, P, dos);
            accumulate<E, DP, tl::LD>(dk_acc, dS, qs);
        }
    });
    store_rows<E, DP>(dk, head_offset(dk, bh, s), dk_acc, s.scale, j0 + warp * 16, s);
    store_rows<E, DP>(dv, head_offset(dv, bh, s), dv_acc, 1.0f, j0 + warp * 16, s);
}

/* ---- dK and dV on wgmma (sm_90a; bf16, f16 at head_dim 64) ---------------------------- */

/* Its tiles: GROUPS warpgroups of 64 keys (ROWS a block, as mma_tiles<64>'s), query tiles
 * of COLS streamed and taken HALF at a time. Every 16-bit tile is 64 elements (128 bytes)
 * a row, 128-byte swizzled (wgmma_desc.cuh), on 1024 bytes (the dynamic shared memory
 * rounded up to it: ALIGN more bytes): K | V (ROWS) | Q[2] | dO[2] (COLS) | lse2[2] |
 * D[2] (COLS floats). */
struct wg_bwd_tiles {
    static constexpr int DP = 64, GROUPS = 4, WARPS = 4 * GROUPS, THREADS = WARPS * WARP;
    static constexpr int ROWS = 64 * GROUPS, COLS = 64, HALF = 32;
    static constexpr size_t ALIGN = 1024;
    static constexpr __host__ __device__ size_t tile(int rows) { return rows * DP * 2; }
    static constexpr __host__ __device__ size_t v_at() { return tile(ROWS); }
    static constexpr __host__ __device__ size_t q_at(int buf)
    {
        return 2 * tile(ROWS) + buf * tile(COLS);
    }
    static constexpr __host__ __device__ size_t do_at(int buf) { return q_at(2 + buf); }
    static constexpr __host__ __device__ size_t lse_at(int buf)
    {
        return q_at(4) + buf * COLS * sizeof(float);
    }
    static constexpr __host__ __device__ size_t delta_at(int buf) { return lse_at(2 + buf); }
    static constexpr __host__ __device__ size_t bytes() { return ALIGN + delta_at(2); }
    static __device__ int place(int r, int c) { return gb_sw128_index(r, c); }
};

/* S = A B^T and dP = dA dB^T for a warpgroup, m64n32, every operand from shared memory
 * (K-major descriptors a, b, da, db, each k16 step 32 bytes along the rows), waited for:
 * the scores of both backward kernels' half tiles. */
template <typename E>
static __device__ void wg_score_pair(float (&S)[16], float (&dP)[16], uint64_t a, uint64_t b,
                                     uint64_t da, uint64_t db)
{
#pragma unroll
    for (int i = 0; i < 16; i++)
        S[i] = dP[i] = 0.0f;
    gb_wgmma_hold(S);   // zeroed before the fence, not moved past it
    gb_wgmma_hold(dP);
    gb_wgmma_fence();
#pragma unroll
    for (int k = 0; k < wg_bwd_tiles::DP / 16; k++) {
        wgmma16<E, 0>::mma_ss(S, gb_wgmma_desc_advance(a, 32 * k),
                              gb_wgmma_desc_advance(b, 32 * k));
        wgmma16<E, 0>::mma_ss(dP, gb_wgmma_desc_advance(da, 32 * k),
                              gb_wgmma_desc_advance(db, 32 * k));
    }
    gb_wgmma_commit();
    gb_wgmma_wait<0>();
    gb_wgmma_hold(S);
    gb_wgmma_hold(dP);
}

/* The descriptors of one half tile's products: the warpgroup's keys as A (K-major), and
 * the half's queries as B, K-major (of S^T and dP^T) and MN-major (of dV and dK). */
struct wg_half_descs {
    uint64_t k, v, q, dout, q_mn, dout_mn;
};

/* One half tile of queries (HALF rows of the swizzled Q and dO tiles, their lse2 and D
 * from `lse`, `dlt`) against the warpgroup's 64 keys: S^T = K Q^T and dP^T = V dO^T
 * (m64n32, both operands from shared memory), P^T and dS^T in registers as A fragments
 * (grads_of, the warp's 16 keys by `mask`), dV += P^T dO and dK += dS^T Q (m64n64, B the
 * MN-major tile). Each group waited for before the registers it wrote are read or written
 * again. */
template <typename E>
static __device__ void wg_dkv_half(const wg_half_descs &d, const float *lse, const float *dlt,
                                   const tile_mask<wg_bwd_tiles::HALF, true> &mask,
                                   float scale_log2, float (&dk_acc)[32], float (&dv_acc)[32])
{
    using tl = wg_bwd_tiles;
    float S[16], dP[16];
    wg_score_pair<E>(S, dP, d.k, d.q, d.v, d.dout);
    uint32_t P[tl::HALF / 16][4], dS[tl::HALF / 16][4];
    const col_saved saved(lse, dlt);
    grads_of<E, 2>(as_n8_tiles(S), as_n8_tiles(dP), scale_log2, saved, mask, P, dS);
    gb_wgmma_fence();
#pragma unroll
    for (int k = 0; k < tl::HALF / 16; k++) {   // k16 step k: queries 16 k.., 2048 bytes on
        wgmma16<E, 1>::mma(dv_acc, P[k], gb_wgmma_desc_advance(d.dout_mn, tl::tile(16) * k));
        wgmma16<E, 1>::mma(dk_acc, dS[k], gb_wgmma_desc_advance(d.q_mn, tl::tile(16) * k));
    }
    gb_wgmma_commit();
    gb_wgmma_wait<0>();
    gb_wgmma_hold(dv_acc);
    gb_wgmma_hold(dk_acc);
}

/* dkv_mma_kernel at head_dim 64 on sm_90a: a block per tile of ROWS keys, a warpgroup per
 * 64 of them keeping their dK and dV in f32 accumulators (the warps' 16 rows each, in
 * mma.sync's layout, so store_rows stores them) while the query tiles that see them stream
 * past. A warpgroup skips a half tile none of its keys is seen by (its warps issue every
 * product together). One block an SM: 128 registers a thread, 16 warps. Elsewhere than
 * sm_90a it traps; the host never launches it there. */
template <typename E>
static __global__ void __launch_bounds__(wg_bwd_tiles::THREADS, 1)
wg_dkv_kernel(head_view dk, head_view dv, head_view q, head_view k, head_view v,
              head_view dout, const float *lse2, const float *delta, dims s)
{
    using tl = wg_bwd_tiles;
    unsigned char *sm = align_up(shared_tile<unsigned char>(0), tl::ALIGN);
    const int warp = threadIdx.x / WARP, group = warp / 4;
    const int64_t bh = block_head(s), j0 = block_tile(s, false) * tl::ROWS;
    const int64_t first = attn_queries_begin(j0, tl::COLS, s.causal), g_key0 = j0 + 64 * group;
    E *ks = (E *)sm, *vs = (E *)(sm + tl::v_at());
    const E *qh = head_start<E>(q, bh, s), *doh = head_start<E>(dout, bh, s);
    auto at = [&](size_t offset) { return (E *)(sm + offset); };
    auto queue = [&](int64_t i, int buf) {
        const int64_t t0 = first + i * tl::COLS;
        queue_tile_at<E, tl::DP>(at(tl::q_at(buf)), tl::COLS, qh, q.row, t0, s, tl::place);
        queue_tile_at<E, tl::DP>(at(tl::do_at(buf)), tl::COLS, doh, dout.row, t0, s, tl::place);
        queue_rows((float *)(sm + tl::lse_at(buf)), tl::COLS, lse2, bh, t0, s);
        queue_rows((float *)(sm + tl::delta_at(buf)), tl::COLS, delta, bh, t0, s);
    };
    queue_tile_at<E, tl::DP>(ks, tl::ROWS, head_start<E>(k, bh, s), k.row, j0, s, tl::place);
    queue_tile_at<E, tl::DP>(vs, tl::ROWS, head_start<E>(v, bh, s), v.row, j0, s, tl::place);
    queue(0, 0);
    float dk_acc[32] = {}, dv_acc[32] = {};
    /* the descriptors of the tiles from the start of shared memory: K-major, MN-major */
    const uint64_t k_major = gb_wgmma_desc(sm, 16, 1024),
                   mn_major = gb_wgmma_desc(sm, tl::tile(tl::HALF), 1024);
    const uint32_t own = 64 * group * tl::DP * sizeof(E);   // the warpgroup's keys
    stream_tiles(tile_count(first, s.T, tl::COLS), queue, [&](int64_t i, int buf) {
        if (g_key0 >= s.T)
            return;   // the warpgroup's keys all lie past T
#pragma unroll
        for (int half = 0; half < tl::COLS; half += tl::HALF) {
            const int64_t t0 = first + i * tl::COLS + half;
            if (t0 >= s.T || (s.causal && t0 + tl::HALF - 1 < g_key0))
                continue;   // no query of the half sees a key of the warpgroup
            const tile_mask<tl::HALF, true> mask(j0, warp * 16, t0, s);
            const uint32_t q = tl::q_at(buf) + half * tl::DP * sizeof(E),
                           dout = tl::do_at(buf) + half * tl::DP * sizeof(E);
            const wg_half_descs d = {gb_wgmma_desc_advance(k_major, own),
                                     gb_wgmma_desc_advance(k_major, tl::v_at() + own),
                                     gb_wgmma_desc_advance(k_major, q),
                                     gb_wgmma_desc_advance(k_major, dout),
                                     gb_wgmma_desc_advance(mn_major, q),
                                     gb_wgmma_desc_advance(mn_major, dout)};
            wg_dkv_half<E>(d, (const float *)(sm + tl::lse_at(buf)) + half,
                           (const float *)(sm + tl::delta_at(buf)) + half, mask, s.scale_log2,
                           dk_acc, dv_acc);
        }
    }, [] { gb_fence_proxy_async(); });
    store_rows<E, tl::DP>(dk, head_offset(dk, bh, s), as_n8_tiles(dk_acc), s.scale,
                          j0 + warp * 16, s);
    store_rows<E, tl::DP>(dv, head_offset(dv, bh, s), as_n8_tiles(dv_acc), 1.0f,
                          j0 + warp * 16, s);
}

/* The dQ kernel's products for one half tile of keys (HALF rows of the swizzled K and V
 * tiles) against the warpgroup's 64 queries: S = Q K^T and dP = dO V^T (m64n32, both
 * operands from shared memory), dS in registers as A fragments (grads_of, the warp's 16
 * queries' lse2 and D in `saved`, by `mask`), dQ += dS K (m64n64, B the MN-major K tile).
 * desc: the queries' Q and dO (K-major), the half's K and V (K-major) and K (MN-major). */
struct wg_dq_descs {
    uint64_t q, dout, k, v, k_mn;
};

template <typename E>
static __device__ void wg_dq_half(const wg_dq_descs &d, const row_saved &saved,
                                  const tile_mask<wg_bwd_tiles::HALF, false> &mask,
                                  float scale_log2, float (&dq_acc)[32])
{
    using tl = wg_bwd_tiles;
    float S[16], dP[16];
    wg_score_pair<E>(S, dP, d.q, d.k, d.dout, d.v);
    uint32_t P[tl::HALF / 16][4], dS[tl::HALF / 16][4];
    grads_of<E, 2>(as_n8_tiles(S), as_n8_tiles(dP), scale_log2, saved, mask, P, dS);
    gb_wgmma_fence();
#pragma unroll
    for (int k = 0; k < tl::HALF / 16; k++)   // k16 step k: keys 16 k.., 2048 bytes on
        wgmma16<E, 1>::mma(dq_acc, dS[k], gb_wgmma_desc_advance(d.k_mn, tl::tile(16) * k));
    gb_wgmma_commit();
    gb_wgmma_wait<0>();
    gb_wgmma_hold(dq_acc);
}

/* dq_mma_kernel at head_dim 64 on sm_90a: a block per tile of ROWS queries, a warpgroup
 * per 64 of them keeping their dQ in f32 accumulators while the key tiles they see stream
 * past (wg_bwd_tiles' layout with Q and dO in the own tiles, K and V streamed); each warp
 * works out D = dO . O of its 16 rows for the dK/dV kernel, as dq_mma_kernel's warps do
 * (warp_rows_saved). A warpgroup skips a half tile of keys none of its queries sees. */
template <typename E>
static __global__ void __launch_bounds__(wg_bwd_tiles::THREADS, 1)
wg_dq_kernel(head_view dq, head_view q, head_view k, head_view v, head_view dout,
             head_view out, const float *lse2, float *delta, dims s)
{
    using tl = wg_bwd_tiles;
    unsigned char *sm = align_up(shared_tile<unsigned char>(0), tl::ALIGN);
    const int warp = threadIdx.x / WARP, group = warp / 4;
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t g_query0 = t0 + 64 * group;
    const E *kh = head_start<E>(k, bh, s), *vh = head_start<E>(v, bh, s);
    auto at = [&](size_t offset) { return (E *)(sm + offset); };
    auto queue = [&](int64_t i, int buf) {
        const int64_t j0 = i * tl::COLS;
        queue_tile_at<E, tl::DP>(at(tl::q_at(buf)), tl::COLS, kh, k.row, j0, s, tl::place);
        queue_tile_at<E, tl::DP>(at(tl::do_at(buf)), tl::COLS, vh, v.row, j0, s, tl::place);
    };
    queue_tile_at<E, tl::DP>(at(0), tl::ROWS, head_start<E>(q, bh, s), q.row, t0, s, tl::place);
    queue_tile_at<E, tl::DP>(at(tl::v_at()), tl::ROWS, head_start<E>(dout, bh, s), dout.row, t0,
                             s, tl::place);
    queue(0, 0);
    const row_saved saved =
        warp_rows_saved<E, tl::DP>(lse2, delta, dout, out, bh, t0 + warp * 16, s);
    float dq_acc[32] = {};
    /* the descriptors of the tiles from the start of shared memory: K-major, MN-major */
    const uint64_t k_major = gb_wgmma_desc(sm, 16, 1024),
                   mn_major = gb_wgmma_desc(sm, tl::tile(tl::HALF), 1024);
    const uint32_t own = 64 * group * tl::DP * sizeof(E);   // the warpgroup's queries
    const int64_t n = tile_count(0, attn_keys_end(t0, tl::ROWS, s.T, s.causal), tl::COLS);
    stream_tiles(n, queue, [&](int64_t i, int buf) {
        if (g_query0 >= s.T)
            return;   // the warpgroup's queries all lie past T
#pragma unroll
        for (int half = 0; half < tl::COLS; half += tl::HALF) {
            const int64_t j0 = i * tl::COLS + half;
            if (j0 >= s.T || (s.causal && j0 > g_query0 + 63))
                continue;   // no key of the half is seen by a query of the warpgroup
            const tile_mask<tl::HALF, false> mask(t0, warp * 16, j0, s);
            const uint32_t keys = tl::q_at(buf) + half * tl::DP * sizeof(E),
                           values = tl::do_at(buf) + half * tl::DP * sizeof(E);
            const wg_dq_descs d = {gb_wgmma_desc_advance(k_major, own),
                                   gb_wgmma_desc_advance(k_major, tl::v_at() + own),
                                   gb_wgmma_desc_advance(k_major, keys),
                                   gb_wgmma_desc_advance(k_major, values),
                                   gb_wgmma_desc_advance(mn_major, keys)};
            wg_dq_half<E>(d, saved, mask, s.scale_log2, dq_acc);
        }
    }, [] { gb_fence_proxy_async(); });
    store_rows<E, tl::DP>(dq, head_offset(dq, bh, s), as_n8_tiles(dq_acc), s.scale,
                          t0 + warp * 16, s);
}

/* ---- launch -------------------------------------------------------------------------- */

template <typename E, int DP>
gb_status flash_backward_mma(const gb_host *host, const bwd_views &w, dims s, int64_t heads,
                             cudaStream_t stream, int wgmma)
{
    using tl = mma_tiles<DP>;
    static_assert(DP != 64 || wg_bwd_tiles::ROWS == tl::ROWS, "both dK/dV kernels' tiles");
    s.tiles = (s.T + tl::ROWS - 1) / tl::ROWS;
    const unsigned blocks = (unsigned)(heads * s.tiles);
    const bool hopper = DP == 64 && wgmma;
    if (hopper) {
        using wl = wg_bwd_tiles;
        gb_status status = allow_shared(host, wg_dq_kernel<E>, wl::bytes());
        if (status == GB_OK)
            status = allow_shared(host, wg_dkv_kernel<E>, wl::bytes());
        if (status != GB_OK)
            return status;
        wg_dq_kernel<E><<<blocks, wl::THREADS, wl::bytes(), stream>>>(
            w.dq, w.q, w.k, w.v, w.dout, w.out, w.lse2, w.delta, s);
        GB_CUDA_CHECK_LAUNCH("wg_dq_kernel (a block per query tile, wgmma)");
        wg_dkv_kernel<E><<<blocks, wl::THREADS, wl::bytes(), stream>>>(
            w.dk, w.dv, w.q, w.k, w.v, w.dout, w.lse2, w.delta, s);
        GB_CUDA_CHECK_LAUNCH("wg_dkv_kernel (a block per key tile, wgmma)");
        return GB_OK;
    }
    gb_status status = allow_shared(host, dq_mma_kernel<E, DP>, tl::dq_bytes());
    if (status == GB_OK)
        status = allow_shared(host, dkv_mma_kernel<E, DP>, tl::dkv_bytes());
    if (status != GB_OK)
        return status;
    dq_mma_kernel<E, DP><<<blocks, tl::THREADS, tl::dq_bytes(), stream>>>(
        w.dq, w.q, w.k, w.v, w.dout, w.out, w.lse2, w.delta, s);
    GB_CUDA_CHECK_LAUNCH("dq_mma_kernel (a block per query tile)");
    dkv_mma_kernel<E, DP><<<blocks, tl::THREADS, tl::dkv_bytes(), stream>>>(
        w.dk, w.dv, w.q, w.k, w.v, w.dout, w.lse2, w.delta, s);
    GB_CUDA_CHECK_LAUNCH("dkv_mma_kernel (a block per key tile)");
    return GB_OK;
}

/* The configurations cuda.cu dispatches to: both 16-bit types at every padded head_dim. */
#define FLASH_BACKWARD_MMA(E, DP)                                                         \
    template gb_status flash_backward_mma<E, DP>(const gb_host *, const bwd_views &, dims, \
                                                 int64_t, cudaStream_t, int);
#define FLASH_BACKWARD_MMA_DIMS(E) \
    FLASH_BACKWARD_MMA(E, 32)      \
    FLASH_BACKWARD_MMA(E, 64)      \
    FLASH_BACKWARD_MMA(E, 80)      \
    FLASH_BACKWARD_MMA(E, 96)      \
    FLASH_BACKWARD_MMA(E, 128)
FLASH_BACKWARD_MMA_DIMS(__nv_bfloat16)
FLASH_BACKWARD_MMA_DIMS(__half)
