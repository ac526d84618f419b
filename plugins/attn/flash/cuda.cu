/* attn/flash on CUDA: FlashAttention-2 (Dao, 2023) with kernels of our own. The (T, T)
 * scores never exist: a block owns a tile of rows, keeps what it accumulates for them in
 * registers, and streams tiles of the other side past them through shared memory, with
 * the online softmax in forward and the probabilities recomputed from the saved
 * log-sum-exps in backward.
 *
 * On sm_90a (H100, H200) at head_dim 64, bf16 and f16, the three passes run on wgmma
 * instead (kernels/cuda/wgmma.cuh): a warpgroup of 4 warps per 64 rows, its products'
 * B operands read from 128-byte-swizzled tiles once for the 64 rows (wg_forward_kernel
 * here, wg_dq_kernel and wg_dkv_kernel in cuda_bwd.cu), when [attn] products (auto, the
 * default) says so; every other GPU, head_dim and the products = mma_sync key run the
 * kernels below.
 *
 * Forward, bf16 and f16 (mma_forward_kernel): FlashAttention-2's, on mma.sync m16n8k16
 * and ldmatrix (kernels/cuda/mma_sync.cuh). A block per (batch, head, tile of 128
 * queries; 64 past head_dim 64): 4 warps of 32 queries below head_dim 64, 8 of 16 at 64, 4
 * of 16 past it (mma_fwd_tiles), each warp's Q fragments, output accumulators and softmax
 * state in registers from the first key tile to the last.
 * K and V tiles (64 keys) up to the causal diagonal (tiles above it are never loaded)
 * stream through two shared buffers each: tile i + 1 is copied by cp.async
 * (__pipeline_memcpy_async) while the block computes on tile i (stream_tiles). Per tile a
 * warp computes S = Q K^T into accumulators, the online-softmax step on them (row maxima
 * across the 4 lanes of a row by shuffles, P rounded to the dtype), rescales its output
 * in registers and adds P V with P packed from the accumulators straight into A
 * fragments: S and P never touch shared memory. Rows are padded so every ldmatrix is
 * free of bank conflicts. Saved: the base-2 log-sum-exp of each row, B*H*T f32
 * (attn_flash_math.h has every per-element step, tested on the CPU). The f32 forward
 * (forward_kernel) has the same structure with FMAs on CUDA cores and its S and P tiles
 * in shared memory.
 * Backward: D = rowsum(dO * O) (workspace B*H*T f32), then two kernels that each own
 * what they write, so nothing is summed with atomics: a block per tile of ROWS keys keeps
 * dK and dV in registers while the query tiles that see it stream past (Q, dO, lse2, D;
 * double-buffered), and a block per tile of ROWS queries keeps dQ while the key tiles it
 * sees stream past. Q K^T and dO V^T are computed twice, once in each, which is the price
 * of no atomics: every sum has a fixed order, and the same inputs give the same bits run
 * after run. For bf16 and f16 those two kernels are cuda_bwd.cu's, on mma.sync with the
 * scores in registers, the dQ kernel working out D of its rows for the dK/dV kernel after
 * it; f32 runs the ones here, after a kernel of its own for D (a warp per row).
 *
 * bf16 and f16 tiles go to the tensor cores (mma.sync), and P and dS are rounded to the
 * dtype before their products (as FlashAttention-2 does); f32 runs the same structure
 * with FMAs on CUDA cores (lanes own fixed rows and columns, S and P through shared
 * memory), so f32 gives f32 results.
 *
 * Shapes: any T (partial tiles are zero-filled and masked), head_dim up to 128 (padded
 * with zeros to 32, 64, 80, 96 or 128 columns, one compiled configuration each), any
 * strides with head_dim contiguous (cp.async when every view's rows start on 16 bytes,
 * element loads otherwise). Tiles: mma_fwd_tiles, fwd_tiles (f32) and bwd_tiles; at most
 * 97 KiB of shared memory per block, so every GPU of compute capability 8.0 or newer runs them.
 * Everything is queued on ctx->stream. One option, products. Its speed is unmeasured until
 * a GPU
 * runs scripts/gpu-check.sh bench; the emulator checks its values and CUDA's rules.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "attn_cached_cuda.cuh"
#include "gearbox/toolkit/attn_checks.h"
#include "attn_flash_math.h"
#include "flash_common.cuh"
#include "cuda_status.h"
#include "mma_sync.cuh"
#include "warp.cuh"
#include "wgmma.cuh"
#include "gearbox/attn.h"

#define PLUGIN "attn/flash"
#define MAX_HEAD_DIM 128
/* Warps per block of the D = dO . O kernel, and the rows of one head each takes. */
#define DELTA_ROWS 8
#define DELTA_RUN 8

/* [attn] products: which tensor-core instructions the 16-bit kernels at head_dim 64 run. */
enum { PRODUCTS_AUTO, PRODUCTS_MMA_SYNC, PRODUCTS_WGMMA };

static const gb_option flash_cuda_options[] = {
    {"products", GB_OPT_ENUM, "auto", 0, 0, "auto|mma_sync|wgmma",
     "tensor-core products of the bf16 and f16 kernels at head_dim 64 (forward, dQ, "
     "dK/dV): wgmma (sm_90a, warpgroups of 64 rows) or mma.sync (every GPU); auto takes "
     "wgmma on a 9.0 GPU when the build has sm_90a code (-Dgpu_arch lists sm_90a), else "
     "mma_sync"},
};

typedef struct attn_flash_cuda {
    gb_plugin_instance base;     /* base.device: its stream */
    int shared_limit;       /* bytes of shared memory a block may opt in to on this GPU */
    int wgmma;              /* the 16-bit kernels at head_dim 64 run on wgmma (wg_*) */
} attn_flash_cuda;

/* ---- tiles --------------------------------------------------------------------------- */

/* The f32 kernels' tile sizes and shared memory (FlashAttention-2's traits struct; the
 * 16-bit kernels have theirs: mma_fwd_tiles here, mma_tiles in cuda_bwd.cu): E the
 * element type of the tiles, DP the head_dim padded to a multiple of 16, COLS the rows of
 * the tiles streamed past the block. A block owns ROWS rows (queries in forward and dQ,
 * keys in dK/dV), 16 per warp. Leading dimensions are padded past the row (16-byte chunks
 * for cp.async, and rows move across banks). Every region starts on 128 bytes; streamed
 * tiles have two buffers, one filling by cp.async while the block computes on the other. */
template <typename E, int DP, int COLS_> struct tiles {
    static_assert(std::is_same<E, float>::value, "16-bit tiles are mma_fwd_tiles, mma_tiles");
    static constexpr int ROWS = 32;
    static constexpr int WARPS = ROWS / 16;
    static constexpr int THREADS = WARPS * WARP;
    static constexpr int COLS = COLS_;
    static constexpr int LD = DP + 4;                 /* elements between rows of an E tile */
    static constexpr int LDS = COLS + 4;              /* floats between rows of a score tile */
    static constexpr int LDP = COLS + 8;              /* elements between rows of P or dS */
    static_assert(COLS % 16 == 0 && (LD * sizeof(E)) % 16 == 0, "tiles of whole fragments");

    static constexpr __host__ __device__ size_t tile(int rows)
    {
        return up128((size_t)rows * LD * sizeof(E));
    }
    /* ROWS x COLS scores in f32, and P or dS in E */
    static constexpr __host__ __device__ size_t scores()
    {
        return up128((size_t)ROWS * LDS * sizeof(float));
    }
    static constexpr __host__ __device__ size_t probs()
    {
        return up128((size_t)ROWS * LDP * sizeof(E));
    }
    static constexpr __host__ __device__ size_t per_row(int rows)
    {
        return up128((size_t)rows * sizeof(float));
    }

    /* forward: Q | K[2] | V[2] | S | P | per-row factors */
    static constexpr __host__ __device__ size_t fwd_k() { return tile(ROWS); }
    static constexpr __host__ __device__ size_t fwd_v() { return fwd_k() + 2 * tile(COLS); }
    static constexpr __host__ __device__ size_t fwd_s() { return fwd_v() + 2 * tile(COLS); }
    static constexpr __host__ __device__ size_t fwd_p() { return fwd_s() + scores(); }
    static constexpr __host__ __device__ size_t fwd_f() { return fwd_p() + probs(); }
    static constexpr __host__ __device__ size_t fwd_bytes() { return fwd_f() + per_row(ROWS); }

    /* backward, both kernels: own_a own_b (ROWS) | other_a[2] other_b[2] (COLS) | S | dP |
     * P | dS | lse2[2] | D[2] (the streamed rows', dK/dV only) */
    static constexpr __host__ __device__ size_t bwd_b() { return tile(ROWS); }
    static constexpr __host__ __device__ size_t bwd_c() { return bwd_b() + tile(ROWS); }
    static constexpr __host__ __device__ size_t bwd_d() { return bwd_c() + 2 * tile(COLS); }
    static constexpr __host__ __device__ size_t bwd_s() { return bwd_d() + 2 * tile(COLS); }
    static constexpr __host__ __device__ size_t bwd_dp() { return bwd_s() + scores(); }
    static constexpr __host__ __device__ size_t bwd_p() { return bwd_dp() + scores(); }
    static constexpr __host__ __device__ size_t bwd_ds() { return bwd_p() + probs(); }
    static constexpr __host__ __device__ size_t dq_bytes() { return bwd_ds() + probs(); }
    static constexpr __host__ __device__ size_t bwd_lse() { return dq_bytes(); }
    static constexpr __host__ __device__ size_t bwd_delta() { return bwd_lse() + 2 * per_row(COLS); }
    static constexpr __host__ __device__ size_t dkv_bytes() { return bwd_delta() + 2 * per_row(COLS); }
};

/* The f32 configurations: 32 rows streamed, or 16 past head_dim 64, in forward and
 * backward. All fit the 99 KiB of shared memory of compute capability 8.6. */
template <typename E, int DP> using fwd_tiles = tiles<E, DP, (DP > 64 ? 16 : 32)>;
template <typename E, int DP> using bwd_tiles = fwd_tiles<E, DP>;

static __device__ unsigned char *shared_base()
{
    extern __shared__ __align__(128) unsigned char flash_shared[];
    return flash_shared;
}

/* ---- a warp's products --------------------------------------------------------------- */

/* What a warp computes on its 16 rows for tiles `tl`, f32 only (the 16-bit kernels run
 * on mma.sync: mma_fwd_warp here, cuda_bwd.cu's):
 *   hold(a, A)            keeps A (16, DP) as the left operand of scores()
 *   scores(S, a, B)       S (16, COLS) = A B^T, B (COLS, DP) a tile
 *   add(acc, P, B)        acc (16, DP) += P (16, COLS) B, B (COLS, DP)
 *   scale_rows(acc, f)    row r of acc *= f[r], f 16 floats in shared memory
 *   chunk(dst, acc, n)    columns 16n to 16n + 15 of acc into dst (16, 16), leading LDS
 * The accumulator stays in registers from the first tile to the last. */
template <typename E, int DP, class tl> struct warp_math;

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

/* On CUDA cores, lanes owning rows and columns as lane_row() and lane_parity() say; each
 * lane sums its dot products in index order. A is read from shared memory. */
template <int DP, class tl> struct warp_math<float, DP, tl> {
    struct acc {
        float a[DP / 2];   /* columns lane_parity() + 2 i of the lane's row */
    };
    struct held {
        const float *A = nullptr;
    };
    static __device__ void hold(held &a, const float *A) { a.A = A; }

    static __device__ void scores(float *S, const held &a, const float *B)
    {
        const int r = lane_row(), par = lane_parity();
        float s[tl::COLS / 2] = {0};
        for (int d = 0; d < DP; d++) {
            const float x = a.A[r * tl::LD + d];
#pragma unroll
            for (int j = 0; j < tl::COLS / 2; j++)
                s[j] = fmaf(x, B[(par + 2 * j) * tl::LD + d], s[j]);
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

    static __device__ void scale_rows(acc &x, const float *factor)
    {
        const float f = factor[lane_row()];
#pragma unroll
        for (int i = 0; i < DP / 2; i++)
            x.a[i] *= f;
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

/* factor * acc (the warp's rows t0 .. t0 + 15 of `v`, from element `head` of head bh),
 * rounded to its dtype, 16 columns at a time through the warp's score tile `scratch`. */
template <typename E, int DP, class tl>
static __device__ void write_rows(const head_view &v, int64_t head,
                                  const typename warp_math<E, DP, tl>::acc &x, float factor,
                                  float *scratch, int64_t t0, const dims &s)
{
    const int lane = threadIdx.x % WARP, r = lane / 2, c0 = (lane % 2) * 8;
    const int64_t t = t0 + r;
#pragma unroll   // a constant n indexes the fragments, which keeps them in registers
    for (int n = 0; n < DP / 16; n++) {
        if (16 * n >= s.D)
            break;
        __syncwarp();   // the last chunk's reads are done
        warp_math<E, DP, tl>::chunk(scratch, x, n);
        __syncwarp();
        for (int c = c0; c < c0 + 8; c++) {
            const int d = 16 * n + c;
            if (t < s.T && d < s.D)
                gb_act_store(v.data, elem<E>::dtype, head + t * v.row + d,
                             factor * scratch[r * tl::LDS + c]);
        }
    }
}

/* ---- forward ------------------------------------------------------------------------- */

/* A forward block's loads, on tiles `tl` (tl::fwd_k(), tl::fwd_v(): two buffers each of K
 * and V, COLS rows): constructing it queues the block's Q tile (ROWS queries from t0, at
 * the start of shared memory) and key tile 0 into buffer 0; kv(i, buf) queues key tile i
 * into buffer buf (stream_tiles' queue). */
template <typename E, int DP, class tl> struct kv_stream {
    unsigned char *sm;
    const E *kh, *vh;
    int64_t k_row, v_row;
    const dims &s;

    __device__ kv_stream(unsigned char *sm_, const head_view &q, const head_view &k,
                         const head_view &v, int64_t bh, int64_t t0, const dims &s_)
        : sm(sm_), kh(head_start<E>(k, bh, s_)), vh(head_start<E>(v, bh, s_)), k_row(k.row),
          v_row(v.row), s(s_)
    {
        queue_tile<E, DP, tl::LD>((E *)sm, tl::ROWS, head_start<E>(q, bh, s), q.row, t0, s);
        (*this)(0, 0);
    }
    __device__ E *k(int buf) const { return (E *)(sm + tl::fwd_k() + buf * tl::tile(tl::COLS)); }
    __device__ E *v(int buf) const { return (E *)(sm + tl::fwd_v() + buf * tl::tile(tl::COLS)); }
    __device__ void operator()(int64_t i, int buf) const
    {
        queue_tile<E, DP, tl::LD>(k(buf), tl::COLS, kh, k_row, i * tl::COLS, s);
        queue_tile<E, DP, tl::LD>(v(buf), tl::COLS, vh, v_row, i * tl::COLS, s);
    }
};

/* One online-softmax step of the lane's row (query t) over the key tile at j0: reads the
 * scores S (16, COLS), writes P = 2^(s2 - m) (16, COLS) in E and the row's rescale factor
 * for the output, updates m and l. Each lane pair shares a row: the maxima and sums are
 * combined with the partner lane. */
template <typename E, class tl>
static __device__ void softmax_step(const float *S, E *P, float *factor, int64_t t, int64_t j0,
                                    const dims &s, float *m, float *l)
{
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
    if (par == 0)
        factor[r] = rescale;
}

/* out (B, H, T, D) and lse2 (B*H*T) from q, k, v in f32 (bf16 and f16 run
 * mma_forward_kernel): a block per tile of ROWS queries, a warp per 16 of them holding its
 * output (16, DP) in registers; K and V tiles (COLS, DP) stream through two shared buffers
 * each. Key tiles wholly above the causal diagonal are never loaded. */
template <typename E, int DP>
static __global__ void __launch_bounds__(fwd_tiles<E, DP>::THREADS)
forward_kernel(head_view out, head_view q, head_view k, head_view v, float *lse2, dims s)
{
    using tl = fwd_tiles<E, DP>;
    using wm = warp_math<E, DP, tl>;
    unsigned char *sm = shared_base();
    const int warp = threadIdx.x / WARP, r = lane_row(), par = lane_parity();
    E *qs = (E *)sm;
    float *S = (float *)(sm + tl::fwd_s()) + warp * 16 * tl::LDS;
    E *P = (E *)(sm + tl::fwd_p()) + warp * 16 * tl::LDP;
    float *factor = (float *)(sm + tl::fwd_f()) + warp * 16;
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t t = t0 + warp * 16 + r;   // the lane's query
    const kv_stream<E, DP, tl> kv(sm, q, k, v, bh, t0, s);
    typename wm::held qa;
    typename wm::acc o;
    wm::zero(o);
    float m = -INFINITY, l = 0.0f;
    const int64_t n = tile_count(0, attn_keys_end(t0, tl::ROWS, s.T, s.causal), tl::COLS);
    stream_tiles(n, kv, [&](int64_t i, int buf) {
        if (i == 0)
            wm::hold(qa, qs + warp * 16 * tl::LD);
        wm::scores(S, qa, kv.k(buf));
        __syncwarp();
        softmax_step<E, tl>(S, P, factor, t, i * tl::COLS, s, &m, &l);
        __syncwarp();
        wm::scale_rows(o, factor);
        wm::add(o, P, kv.v(buf));
    });
    if (par == 0)
        factor[r] = l > 0.0f ? 1.0f / l : 0.0f;   // rows past T saw no key
    __syncwarp();
    wm::scale_rows(o, factor);
    const int64_t head = (bh / s.H) * out.batch + (bh % s.H) * out.head;
    write_rows<E, DP, tl>(out, head, o, 1.0f, S, t0 + warp * 16, s);
    if (t < s.T && par == 0)
        lse2[bh * s.T + t] = attn_lse2(m, l);
}

/* ---- forward on mma.sync (bf16, f16) ------------------------------------------------- */

/* The 16-bit forward's tiles (FlashAttention-2's forward): warps each owning MT m16 tiles
 * of queries, COLS = 64 keys a streamed tile. Below head_dim 64, 4 warps of 32 rows (each B
 * fragment of K then feeds two products); at 64, 8 warps of 16 rows, whose Q, S and O
 * fragments fit 128 registers, so that two blocks (16 warps) share an SM: with 32 rows a
 * warp took 255 registers and an SM held 8 warps, too few to issue at its rate; past 64, 4
 * warps of 16 rows. Rows are padded by 16
 * bytes (LD = DP + 8: a row is an odd number of 16-byte chunks, so the 8 rows an ldmatrix
 * phase reads lie in 8 different groups of 4 banks, conflict-free). Shared memory: Q
 * (ROWS) | K[2] | V[2] (COLS); Q is read into registers once, and its rows then stage the
 * warp's output for coalesced stores. */
template <typename E, int DP> struct mma_fwd_tiles {
    static constexpr int MT = DP < 64 ? 2 : 1;
    static constexpr int WARPS = DP <= 64 ? 8 / MT : 4;
    /* blocks an SM must hold: at 64 two, the registers bounded to fit; else no bound */
    static constexpr int BLOCKS_PER_SM = DP == 64 ? 2 : 0;
    static constexpr int THREADS = WARPS * WARP;
    static constexpr int ROWS = WARPS * 16 * MT;
    static constexpr int COLS = 64;
    static constexpr int LD = DP + 8;
    static constexpr int KSTEPS = DP / 16;     /* k-steps of Q K^T */
    static constexpr int STILES = COLS / 8;    /* n8 tiles of S */
    static constexpr int OTILES = DP / 8;      /* n8 tiles of O */
    static_assert(DP % 16 == 0 && LD * sizeof(E) / 16 % 2 == 1, "rows of odd 16-byte chunks");

    static constexpr __host__ __device__ size_t tile(int rows)
    {
        return up128((size_t)rows * LD * sizeof(E));
    }
    static constexpr __host__ __device__ size_t fwd_k() { return tile(ROWS); }
    static constexpr __host__ __device__ size_t fwd_v() { return fwd_k() + 2 * tile(COLS); }
    static constexpr __host__ __device__ size_t bytes() { return fwd_v() + 2 * tile(COLS); }
};

/* What a warp keeps in registers from the first key tile to the last, in mma.sync's
 * fragment layouts (g = lane / 4, t = lane % 4): Q as A fragments; O as accumulators,
 * o[mt][n][e] at row 16 mt + g + 8 (e / 2), column 8 n + 2 t + e % 2; and each of its 2 MT
 * rows' running maximum m and this lane's share of the running sum l (its 4 lanes' shares
 * are added at the end), row index 2 mt + h for rows g + 8 h of m-tile mt. */
template <typename E, int DP> struct mma_fwd_warp {
    using tl = mma_fwd_tiles<E, DP>;
    uint32_t q[tl::MT][tl::KSTEPS][4];
    float o[tl::MT][tl::OTILES][4];
    float m[2 * tl::MT], l[2 * tl::MT];
    /* scores, then probabilities, of the current key tile, in the same layout as o */
    float s[tl::MT][tl::STILES][4];

    /* Every accumulator of x (m-tiles, n8 tiles, 4 floats) to 0. */
    template <int N> static __device__ void zero(float (&x)[tl::MT][N][4])
    {
#pragma unroll
        for (int mt = 0; mt < tl::MT; mt++)
#pragma unroll
            for (int n = 0; n < N; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    x[mt][n][e] = 0.0f;
    }

    __device__ void start()
    {
        zero(o);
#pragma unroll
        for (int mt = 0; mt < tl::MT; mt++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                m[2 * mt + h] = -INFINITY;
                l[2 * mt + h] = 0.0f;
            }
        }
    }

    /* Q's rows of the warp (16 MT, from `rows`, leading LD) into A fragments: ldmatrix_x4's
     * lanes 0-15 give rows 0-15 at columns 16 k, lanes 16-31 the same rows at 16 k + 8. */
    __device__ void hold(const E *rows)
    {
        const int lane = threadIdx.x % WARP;
#pragma unroll
        for (int mt = 0; mt < tl::MT; mt++)
#pragma unroll
            for (int k = 0; k < tl::KSTEPS; k++)
                gb_ldmatrix_x4(q[mt][k], rows + (16 * mt + lane % 16) * tl::LD + 16 * k +
                                             8 * (lane / 16));
    }

    /* s = Q K^T for the key tile `ks` (COLS, LD). Each ldmatrix_x4 reads the B fragments of
     * two n8 tiles of keys at one k-step (lanes 8i..8i+7: keys 8 (n + i / 2) + 0..7,
     * columns 16 k + 8 (i % 2)), used by every m-tile; k runs in order within each tile. */
    __device__ void scores(const E *ks)
    {
        const int lane = threadIdx.x % WARP, i = lane / 8;
        zero(s);
#pragma unroll
        for (int n = 0; n < tl::STILES; n += 2)
#pragma unroll
            for (int k = 0; k < tl::KSTEPS; k++) {
                uint32_t b[4];
                gb_ldmatrix_x4(b, ks + (8 * (n + i / 2) + lane % 8) * tl::LD + 16 * k +
                                      8 * (i % 2));
#pragma unroll
                for (int mt = 0; mt < tl::MT; mt++) {
                    mma16<E>::mma(s[mt][n], q[mt][k], b);
                    mma16<E>::mma(s[mt][n + 1], q[mt][k], b + 2);
                }
            }
    }

    /* The scores of the key tile at j0 hidden from the warp's rows (from w0) made -inf: keys
     * past T and, under the causal mask, after the row; in 32-bit offsets from the tile's
     * corner (the tile is at most COLS keys from w0's rows, so they fit), as
     * attn_visible would say element by element. */
    __device__ void hide_masked(int64_t w0, int64_t j0, const dims &sd)
    {
        const int lane = threadIdx.x % WARP, g = lane / 4, t = lane % 4;
        const int64_t keys_left = sd.T - j0;
        const int cols = keys_left < tl::COLS ? (int)keys_left : tl::COLS;
        const int64_t ahead = w0 - j0;   /* key offset - row offset a row still sees */
        const int diag = !sd.causal ? tl::COLS : ahead > tl::COLS ? tl::COLS : (int)ahead;
#pragma unroll
        for (int mt = 0; mt < tl::MT; mt++)
#pragma unroll
            for (int n = 0; n < tl::STILES; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = 16 * mt + g + 8 * (e / 2), c = 8 * n + 2 * t + e % 2;
                    if (c >= cols || c - r > diag)
                        s[mt][n][e] = -INFINITY;
                }
    }

    /* The online-softmax step of the lane's rows over the key tile at j0 (w0: the warp's
     * first query): s becomes P = 2^(s2 - m) rounded to E, m the new maxima (each row's
     * across its 4 lanes by two shuffles), l this lane's share, o rescaled. `masked`: some
     * key of the tile is hidden from some row (the causal diagonal, or past T), and only
     * then are the scores tested, the hidden ones made -inf (P 0) before the step. */
    __device__ void softmax(int64_t w0, int64_t j0, bool masked, const dims &sd)
    {
        if (masked)
            hide_masked(w0, j0, sd);
#pragma unroll
        for (int mt = 0; mt < tl::MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float top = -INFINITY;
#pragma unroll
                for (int n = 0; n < tl::STILES; n++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        float &x = s[mt][n][2 * h + c];
                        x *= sd.scale_log2;
                        top = fmaxf(top, x);
                    }
                top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
                top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
                float &mr = m[2 * mt + h];
                const float m_new = fmaxf(mr, top), rescale = attn_rescale(mr, m_new);
                float sum = 0.0f;
#pragma unroll
                for (int n = 0; n < tl::STILES; n++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        float &x = s[mt][n][2 * h + c];
                        x = elem<E>::widen(elem<E>::round(attn_prob_running(x, m_new)));
                        sum += x;   // the sum of what P V adds up
                    }
                l[2 * mt + h] = l[2 * mt + h] * rescale + sum;
                mr = m_new;
#pragma unroll
                for (int n = 0; n < tl::OTILES; n++)
#pragma unroll
                    for (int c = 0; c < 2; c++)
                        o[mt][n][2 * h + c] *= rescale;
            }
    }

    /* o += P V for the value tile `vs` (COLS, LD). P's A fragment for keys 16 k.. is s's
     * n8 tiles 2 k and 2 k + 1 packed in registers (an accumulator's halves are the A
     * layout's). Each ldmatrix_x4_trans reads the B fragments of two n8 tiles of columns
     * (lanes 8i..8i+7: keys 16 k + 8 (i % 2) + 0..7, columns 8 (n + i / 2)). */
    __device__ void add_pv(const E *vs)
    {
        const int lane = threadIdx.x % WARP, i = lane / 8;
#pragma unroll
        for (int k = 0; k < tl::COLS / 16; k++) {
            uint32_t p[tl::MT][4];
#pragma unroll
            for (int mt = 0; mt < tl::MT; mt++) {
                const float *lo = s[mt][2 * k], *hi = s[mt][2 * k + 1];
                p[mt][0] = mma16<E>::pack(lo[0], lo[1]);
                p[mt][1] = mma16<E>::pack(lo[2], lo[3]);
                p[mt][2] = mma16<E>::pack(hi[0], hi[1]);
                p[mt][3] = mma16<E>::pack(hi[2], hi[3]);
            }
#pragma unroll
            for (int n = 0; n < tl::OTILES; n += 2) {
                uint32_t b[4];
                gb_ldmatrix_x4_trans(b, vs + (16 * k + 8 * (i % 2) + lane % 8) * tl::LD +
                                            8 * (n + i / 2));
#pragma unroll
                for (int mt = 0; mt < tl::MT; mt++) {
                    mma16<E>::mma(o[mt][n], p[mt], b);
                    mma16<E>::mma(o[mt][n + 1], p[mt], b + 2);
                }
            }
        }
    }

    /* The rows' sums across their 4 lanes, o divided by them (0 for a row that saw no
     * key: past T), and the base-2 log-sum-exps of the rows before T into lse2. */
    __device__ void finish(float *lse2, int64_t bh, int64_t w0, const dims &sd)
    {
        const int lane = threadIdx.x % WARP, g = lane / 4;
#pragma unroll
        for (int mt = 0; mt < tl::MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float &lr = l[2 * mt + h];
                lr += __shfl_xor_sync(0xffffffffu, lr, 1);
                lr += __shfl_xor_sync(0xffffffffu, lr, 2);
                const float factor = lr > 0.0f ? 1.0f / lr : 0.0f;
#pragma unroll
                for (int n = 0; n < tl::OTILES; n++)
#pragma unroll
                    for (int c = 0; c < 2; c++)
                        o[mt][n][2 * h + c] *= factor;
                const int64_t row = w0 + 16 * mt + g + 8 * h;
                if (lane % 4 == 0 && row < sd.T)
                    lse2[bh * sd.T + row] = attn_lse2(m[2 * mt + h], lr);
            }
    }

    /* o into rows w0.. of `v` (element `head` of the head), rows before T and columns
     * before D. With aligned views, through the warp's own rows of the Q tile (`stage`,
     * no longer read; element (r, c) at stage[place(r, c)]), so each lane stores whole
     * 16-byte chunks; else element by element from the registers. */
    template <class Place>
    __device__ void write(const head_view &v, int64_t head, int64_t w0, E *stage, Place place,
                          const dims &sd) const
    {
        const int lane = threadIdx.x % WARP, g = lane / 4, t = lane % 4;
        if (!sd.async) {
#pragma unroll
            for (int mt = 0; mt < tl::MT; mt++)
#pragma unroll
                for (int n = 0; n < tl::OTILES; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int64_t row = w0 + 16 * mt + g + 8 * (e / 2);
                        const int col = 8 * n + 2 * t + e % 2;
                        if (row < sd.T && col < sd.D)
                            gb_act_store(v.data, elem<E>::dtype, head + row * v.row + col,
                                         o[mt][n][e]);
                    }
            return;
        }
        uint32_t *words = reinterpret_cast<uint32_t *>(stage);
#pragma unroll
        for (int mt = 0; mt < tl::MT; mt++)
#pragma unroll
            for (int n = 0; n < tl::OTILES; n++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    words[place(16 * mt + g + 8 * h, 8 * n + 2 * t) / 2] =
                        mma16<E>::pack(o[mt][n][2 * h], o[mt][n][2 * h + 1]);
        __syncwarp();
        constexpr int CHUNKS = DP / 8;   /* 16-byte chunks of a row */
        for (int c = lane; c < 16 * tl::MT * CHUNKS; c += WARP) {
            const int r = c / CHUNKS, col = c % CHUNKS * 8;
            if (w0 + r < sd.T && col < sd.D)
                *reinterpret_cast<uint4 *>((E *)v.data + head + (w0 + r) * v.row + col) =
                    *reinterpret_cast<const uint4 *>(stage + place(r, col));
        }
    }
};

/* out (B, H, T, D) and lse2 (B*H*T) from q, k, v in bf16 or f16: a block per tile of ROWS
 * queries, a warp per 16 MT of them holding its Q, O and softmax state in registers; K
 * and V tiles (COLS, DP) stream through two shared buffers each (stream_tiles). Key tiles
 * wholly above the causal diagonal are never loaded, and a warp skips a tile in which no
 * key is visible to its rows. S and P never leave the registers. */
template <typename E, int DP>
static __global__ void
__launch_bounds__(mma_fwd_tiles<E, DP>::THREADS, mma_fwd_tiles<E, DP>::BLOCKS_PER_SM)
mma_forward_kernel(head_view out, head_view q, head_view k, head_view v, float *lse2, dims s)
{
    using tl = mma_fwd_tiles<E, DP>;
    unsigned char *sm = shared_base();
    const int warp = threadIdx.x / WARP;
    E *qs = (E *)sm, *rows = qs + warp * 16 * tl::MT * tl::LD;
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t w0 = t0 + warp * 16 * tl::MT, w_end = w0 + 16 * tl::MT;   // the warp's queries
    const kv_stream<E, DP, tl> kv(sm, q, k, v, bh, t0, s);
    mma_fwd_warp<E, DP> w;
    w.start();
    const int64_t n = tile_count(0, attn_keys_end(t0, tl::ROWS, s.T, s.causal), tl::COLS);
    stream_tiles(n, kv, [&](int64_t i, int buf) {
        const int64_t j0 = i * tl::COLS;
        if (w0 >= s.T || (s.causal && j0 >= w_end))
            return;   // no key of the tile is visible to the warp's rows
        if (i == 0)
            w.hold(rows);
        w.scores(kv.k(buf));
        const bool masked = j0 + tl::COLS > s.T || (s.causal && j0 + tl::COLS > w0 + 1);
        w.softmax(w0, j0, masked, s);
        w.add_pv(kv.v(buf));
    });
    w.finish(lse2, bh, w0, s);
    const int64_t head = (bh / s.H) * out.batch + (bh % s.H) * out.head;
    w.write(out, head, w0, rows, [](int r, int c) { return r * tl::LD + c; }, s);
}

/* ---- forward on wgmma (sm_90a; bf16, f16 at head_dim 64) ----------------------------- */

/* The Hopper forward's tiles: GROUPS warpgroups of 64 queries (ROWS, 256, in all: each
 * K and V tile read from global memory serves twice the rows mma_fwd_tiles' does, which
 * the forward's L2 traffic needed), COLS = 64 keys a streamed tile. Every tile is 64
 * elements (128 bytes) a row, 128-byte swizzled (wgmma_desc.cuh) and starts on 1024 bytes
 * (the dynamic shared memory is rounded up to it: ALIGN more bytes): Q (ROWS) | K[2] |
 * V[2] (COLS). K's rows are B's columns for S = Q K^T (K-major), V's rows B's rows for
 * O += P V (MN-major), each k16 step a descriptor into the tile. */
template <typename E> struct wg_fwd_tiles {
    static constexpr int DP = 64;
    static constexpr int GROUPS = 4;
    static constexpr int WARPS = 4 * GROUPS;
    static constexpr int THREADS = WARPS * WARP;
    static constexpr int ROWS = 64 * GROUPS;
    static constexpr int COLS = 64;
    static constexpr size_t ALIGN = 1024;
    static constexpr __host__ __device__ size_t tile(int rows) { return rows * DP * sizeof(E); }
    static constexpr __host__ __device__ size_t k_at(int buf)
    {
        return tile(ROWS) + buf * tile(COLS);
    }
    static constexpr __host__ __device__ size_t v_at(int buf) { return k_at(2 + buf); }
    static constexpr __host__ __device__ size_t bytes() { return ALIGN + v_at(2); }
    static __device__ int place(int r, int c) { return gb_sw128_index(r, c); }
};

/* A warp of the Hopper forward: mma_fwd_warp's registers, softmax and output at head_dim
 * 64 (one m-tile of 16 rows; its s and o, 8 n8 tiles of 4 floats, are exactly a
 * warpgroup product's 32 accumulators), with the products on the warpgroup. */
template <typename E> struct wg_fwd_warp : mma_fwd_warp<E, 64> {
    using base = mma_fwd_warp<E, 64>;
    using tl = wg_fwd_tiles<E>;
    static_assert(base::tl::MT == 1 && base::tl::STILES == 8 && base::tl::OTILES == 8,
                  "s and o are one product's accumulators");

    static __device__ float (&flat(float (&x)[1][8][4]))[32]
    {
        return *reinterpret_cast<float(*)[32]>(&x[0][0][0]);
    }

    /* Q's 16 rows of the warp (`rows` of the swizzled Q tile) into A fragments. */
    __device__ void hold(const E *rows)
    {
        const int lane = threadIdx.x % WARP;
#pragma unroll
        for (int k = 0; k < 4; k++)
            gb_ldmatrix_x4(this->q[0][k], rows + tl::place(lane % 16, 16 * k + 8 * (lane / 16)));
    }

    /* Waits for the group just committed and keeps the accumulators' uses after it. */
    static __device__ void retire(float (&acc)[32])
    {
        gb_wgmma_commit();
        gb_wgmma_wait<0>();
        gb_wgmma_hold(acc);
    }

    /* s = Q K^T for the key tile at descriptor `ks` (K-major): four k16 steps, 32 bytes
     * apart along K's rows. */
    __device__ void scores(uint64_t ks)
    {
        base::zero(this->s);
        float(&acc)[32] = flat(this->s);
        gb_wgmma_hold(acc);
        gb_wgmma_fence();
#pragma unroll
        for (int k = 0; k < 4; k++)
            wgmma16<E, 0>::mma(acc, this->q[0][k], gb_wgmma_desc_advance(ks, 32 * k));
        retire(acc);
    }

    /* o += P V for the value tile at descriptor `vs` (MN-major): P's A fragments packed
     * from s as mma_fwd_warp's add_pv packs them; V's k16 step k is its rows 16 k..,
     * 2048 bytes apart. */
    __device__ void add_pv(uint64_t vs)
    {
        uint32_t p[4][4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float *lo = this->s[0][2 * k], *hi = this->s[0][2 * k + 1];
            p[k][0] = mma16<E>::pack(lo[0], lo[1]);
            p[k][1] = mma16<E>::pack(lo[2], lo[3]);
            p[k][2] = mma16<E>::pack(hi[0], hi[1]);
            p[k][3] = mma16<E>::pack(hi[2], hi[3]);
        }
        float(&acc)[32] = flat(this->o);
        gb_wgmma_hold(acc);
        gb_wgmma_fence();
#pragma unroll
        for (int k = 0; k < 4; k++)
            wgmma16<E, 1>::mma(acc, p[k], gb_wgmma_desc_advance(vs, tl::tile(16) * k));
        retire(acc);
    }
};

/* The Hopper forward's loads (mma_forward_kernel's kv_stream, into swizzled tiles). */
template <typename E> struct wg_kv_stream {
    using tl = wg_fwd_tiles<E>;
    E *base;
    const E *kh, *vh;
    int64_t k_row, v_row;
    const dims &s;

    __device__ wg_kv_stream(E *base_, const head_view &q, const head_view &k, const head_view &v,
                            int64_t bh, int64_t t0, const dims &s_)
        : base(base_), kh(head_start<E>(k, bh, s_)), vh(head_start<E>(v, bh, s_)), k_row(k.row),
          v_row(v.row), s(s_)
    {
        queue_tile_at<E, tl::DP>(base, tl::ROWS, head_start<E>(q, bh, s), q.row, t0, s, tl::place);
        (*this)(0, 0);
    }
    __device__ E *k(int buf) const { return base + tl::k_at(buf) / sizeof(E); }
    __device__ E *v(int buf) const { return base + tl::v_at(buf) / sizeof(E); }
    __device__ void operator()(int64_t i, int buf) const
    {
        queue_tile_at<E, tl::DP>(k(buf), tl::COLS, kh, k_row, i * tl::COLS, s, tl::place);
        queue_tile_at<E, tl::DP>(v(buf), tl::COLS, vh, v_row, i * tl::COLS, s, tl::place);
    }
};

/* mma_forward_kernel at head_dim 64 on sm_90a: a block per tile of ROWS queries, a
 * warpgroup per 64 of them computing S = Q K^T and O += P V with wgmma (Q and P from
 * registers, K and V from the swizzled shared tiles), each warp the online softmax of its
 * 16 rows in registers as mma_forward_kernel's warps do. A warpgroup skips a key tile
 * none of its rows sees (its warps issue every product together). One block an SM: 128
 * registers a thread, 16 warps. Elsewhere than sm_90a it traps; the host never launches it
 * there (wgmma_runs_on). */
template <typename E>
static __global__ void __launch_bounds__(wg_fwd_tiles<E>::THREADS, 1)
wg_forward_kernel(head_view out, head_view q, head_view k, head_view v, float *lse2, dims s)
{
    using tl = wg_fwd_tiles<E>;
    E *base = (E *)align_up(shared_base(), tl::ALIGN);
    /* the tiles' descriptors: K's as B of S (K-major), V's as B of P V (MN-major) */
    const uint64_t k_major = gb_wgmma_desc(base, 16, 1024),
                   mn_major = gb_wgmma_desc(base, tl::tile(tl::COLS), 1024);
    const int warp = threadIdx.x / WARP, group = warp / 4;
    E *rows = base + warp * 16 * tl::DP;
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t w0 = t0 + warp * 16, g0 = t0 + group * 64, g_end = g0 + 64;
    const wg_kv_stream<E> kv(base, q, k, v, bh, t0, s);
    wg_fwd_warp<E> w;
    w.start();
    const int64_t n = tile_count(0, attn_keys_end(t0, tl::ROWS, s.T, s.causal), tl::COLS);
    stream_tiles(n, kv, [&](int64_t i, int buf) {
        const int64_t j0 = i * tl::COLS;
        if (g0 >= s.T || (s.causal && j0 >= g_end))
            return;   // no key of the tile is visible to the warpgroup's rows
        if (i == 0)
            w.hold(rows);
        w.scores(gb_wgmma_desc_advance(k_major, tl::k_at(buf)));
        const bool masked = j0 + tl::COLS > s.T || (s.causal && j0 + tl::COLS > w0 + 1);
        w.softmax(w0, j0, masked, s);
        w.add_pv(gb_wgmma_desc_advance(mn_major, tl::v_at(buf)));
    }, [] { gb_fence_proxy_async(); });
    w.finish(lse2, bh, w0, s);
    const int64_t head = (bh / s.H) * out.batch + (bh % s.H) * out.head;
    w.write(out, head, w0, rows, tl::place, s);
}

/* ---- backward ------------------------------------------------------------------------ */

/* delta (B*H*T) = dO . O per row for the f32 backward (the 16-bit one works it out in its
 * dQ kernel): a warp per DELTA_RUN consecutive rows of one head, lanes over the row, a
 * fixed butterfly. A block's rows are one tile of a head, so the head's offsets are worked
 * out once per warp, not per row. */
static __global__ void delta_kernel(float *delta, head_view dout, head_view out, dims s,
                                    int64_t tiles)
{
    const int lane = threadIdx.x % WARP;
    const int64_t bh = blockIdx.x / tiles, b = bh / s.H, h = bh % s.H;
    const int64_t t0 = ((blockIdx.x % tiles) * DELTA_ROWS + threadIdx.x / WARP) * DELTA_RUN;
    const int64_t end = t0 + DELTA_RUN < s.T ? t0 + DELTA_RUN : s.T;
    const float *g = (const float *)dout.data + b * dout.batch + h * dout.head + t0 * dout.row;
    const float *o = (const float *)out.data + b * out.batch + h * out.head + t0 * out.row;
    for (int64_t t = t0; t < end; t++, g += dout.row, o += out.row) {
        float dot = 0.0f;
        for (int d = lane; d < s.D; d += WARP)
            dot += g[d] * o[d];
        dot = gb_warp_sum(dot);
        if (lane == 0)
            delta[bh * s.T + t] = dot;
    }
}

static void launch_delta(float *delta, const head_view &dout, const head_view &out,
                         const dims &s, int64_t heads, cudaStream_t stream)
{
    const int64_t tiles = (s.T + DELTA_ROWS * DELTA_RUN - 1) / (DELTA_ROWS * DELTA_RUN);
    delta_kernel<<<(unsigned)(heads * tiles), DELTA_ROWS * WARP, 0, stream>>>(delta, dout, out,
                                                                              s, tiles);
}

/* The backward kernels' shared memory (bwd_tiles<E, DP>::bwd_*), the score tiles at the
 * calling warp's rows: two tiles of the ROWS rows the block owns, two double-buffered
 * tiles of the COLS rows it streams, S and dP, P and dS; dK/dV also streams lse2 and D of
 * the streamed queries (dQ keeps its rows' in registers). */
template <typename E, int DP> struct bwd_shared {
    using tl = bwd_tiles<E, DP>;
    unsigned char *sm;
    E *own_a, *own_b;
    float *S, *dP;
    E *P, *dS;

    __device__ bwd_shared() : sm(shared_base())
    {
        const int warp = threadIdx.x / WARP;
        own_a = (E *)sm;
        own_b = (E *)(sm + tl::bwd_b());
        S = (float *)(sm + tl::bwd_s()) + warp * 16 * tl::LDS;
        dP = (float *)(sm + tl::bwd_dp()) + warp * 16 * tl::LDS;
        P = (E *)(sm + tl::bwd_p()) + warp * 16 * tl::LDP;
        dS = (E *)(sm + tl::bwd_ds()) + warp * 16 * tl::LDP;
    }
    /* buffer `buf` of the streamed tiles */
    __device__ E *other_a(int buf) const
    {
        return (E *)(sm + tl::bwd_c() + buf * tl::tile(tl::COLS));
    }
    __device__ E *other_b(int buf) const
    {
        return (E *)(sm + tl::bwd_d() + buf * tl::tile(tl::COLS));
    }
    __device__ float *lse2(int buf) const
    {
        return (float *)(sm + tl::bwd_lse() + buf * tl::per_row(tl::COLS));
    }
    __device__ float *delta(int buf) const
    {
        return (float *)(sm + tl::bwd_delta() + buf * tl::per_row(tl::COLS));
    }
};

/* dQ (B, H, T, D): a block per tile of ROWS queries, over the key tiles they see; dQ
 * (16, DP) f32 per warp in registers. Its own pass, rather than atomics from the dK/dV
 * kernel, so every sum has one order and reruns give the same bits. */
template <typename E, int DP>
static __global__ void __launch_bounds__(bwd_tiles<E, DP>::THREADS)
dq_kernel(head_view dq, head_view q, head_view k, head_view v, head_view dout,
          const float *lse2, const float *delta, dims s)
{
    using tl = bwd_tiles<E, DP>;
    using wm = warp_math<E, DP, tl>;
    const bwd_shared<E, DP> sh;
    E *qs = sh.own_a, *dos = sh.own_b;
    float *S = sh.S, *dP = sh.dP;
    E *dS = sh.dS;
    const int warp = threadIdx.x / WARP, r = lane_row(), par = lane_parity();
    const int64_t bh = block_head(s), t0 = block_tile(s, true) * tl::ROWS;
    const int64_t t = t0 + warp * 16 + r;   // the lane's query
    const float lse_t = t < s.T ? lse2[bh * s.T + t] : 0.0f;
    const float delta_t = t < s.T ? delta[bh * s.T + t] : 0.0f;
    const E *kh = head_start<E>(k, bh, s), *vh = head_start<E>(v, bh, s);
    auto queue = [&](int64_t i, int buf) {
        queue_tile<E, DP, tl::LD>(sh.other_a(buf), tl::COLS, kh, k.row, i * tl::COLS, s);
        queue_tile<E, DP, tl::LD>(sh.other_b(buf), tl::COLS, vh, v.row, i * tl::COLS, s);
    };

    queue_tile<E, DP, tl::LD>(qs, tl::ROWS, head_start<E>(q, bh, s), q.row, t0, s);
    queue_tile<E, DP, tl::LD>(dos, tl::ROWS, head_start<E>(dout, bh, s), dout.row, t0, s);
    queue(0, 0);
    typename wm::acc acc;
    wm::zero(acc);
    const int64_t n = tile_count(0, attn_keys_end(t0, tl::ROWS, s.T, s.causal), tl::COLS);
    stream_tiles(n, queue, [&](int64_t i, int buf) {
        const E *ks = sh.other_a(buf);
        const int64_t j0 = i * tl::COLS;
        typename wm::held a;
        wm::hold(a, qs + warp * 16 * tl::LD);
        wm::scores(S, a, ks);
        wm::hold(a, dos + warp * 16 * tl::LD);
        wm::scores(dP, a, sh.other_b(buf));
        __syncwarp();
#pragma unroll
        for (int c2 = 0; c2 < tl::COLS / 2; c2++) {
            const int c = par + 2 * c2, at = r * tl::LDS + c;
            const float p = attn_visible(t, j0 + c, s.T, s.causal)
                                ? attn_prob_saved(S[at] * s.scale_log2, lse_t)
                                : 0.0f;
            dS[r * tl::LDP + c] = elem<E>::round(attn_dscore(p, dP[at], delta_t));
        }
        __syncwarp();
        wm::add(acc, dS, ks);
    });
    const int64_t head = (bh / s.H) * dq.batch + (bh % s.H) * dq.head;
    write_rows<E, DP, tl>(dq, head, acc, s.scale, S, t0 + warp * 16, s);
}

/* dK and dV (B, H, T, D): a block per tile of ROWS keys, over the query tiles that see
 * them; dK and dV (16, DP) f32 per warp in registers. The warp's rows are keys, its
 * columns queries: S^T = K Q^T, dP^T = V dO^T. */
template <typename E, int DP>
static __global__ void __launch_bounds__(bwd_tiles<E, DP>::THREADS)
dkv_kernel(head_view dk, head_view dv, head_view q, head_view k, head_view v, head_view dout,
           const float *lse2, const float *delta, dims s)
{
    using tl = bwd_tiles<E, DP>;
    using wm = warp_math<E, DP, tl>;
    const bwd_shared<E, DP> sh;
    E *ks = sh.own_a, *vs = sh.own_b;
    float *S = sh.S, *dP = sh.dP;
    E *P = sh.P, *dS = sh.dS;
    const int warp = threadIdx.x / WARP, r = lane_row(), par = lane_parity();
    const int64_t bh = block_head(s), j0 = block_tile(s, false) * tl::ROWS;
    const int64_t j = j0 + warp * 16 + r;   // the lane's key
    const int64_t first = attn_queries_begin(j0, tl::COLS, s.causal);
    const E *qh = head_start<E>(q, bh, s), *doh = head_start<E>(dout, bh, s);
    auto queue = [&](int64_t i, int buf) {
        const int64_t t0 = first + i * tl::COLS;
        queue_tile<E, DP, tl::LD>(sh.other_a(buf), tl::COLS, qh, q.row, t0, s);
        queue_tile<E, DP, tl::LD>(sh.other_b(buf), tl::COLS, doh, dout.row, t0, s);
        queue_rows(sh.lse2(buf), tl::COLS, lse2, bh, t0, s);
        queue_rows(sh.delta(buf), tl::COLS, delta, bh, t0, s);
    };

    queue_tile<E, DP, tl::LD>(ks, tl::ROWS, head_start<E>(k, bh, s), k.row, j0, s);
    queue_tile<E, DP, tl::LD>(vs, tl::ROWS, head_start<E>(v, bh, s), v.row, j0, s);
    queue(0, 0);
    typename wm::acc dk_acc, dv_acc;
    wm::zero(dk_acc);
    wm::zero(dv_acc);
    stream_tiles(tile_count(first, s.T, tl::COLS), queue, [&](int64_t i, int buf) {
        const E *qs = sh.other_a(buf), *dos = sh.other_b(buf);
        const float *lse_s = sh.lse2(buf), *delta_s = sh.delta(buf);
        const int64_t t0 = first + i * tl::COLS;
        typename wm::held a;
        wm::hold(a, ks + warp * 16 * tl::LD);
        wm::scores(S, a, qs);
        wm::hold(a, vs + warp * 16 * tl::LD);
        wm::scores(dP, a, dos);
        __syncwarp();
#pragma unroll
        for (int c2 = 0; c2 < tl::COLS / 2; c2++) {
            const int c = par + 2 * c2, at = r * tl::LDS + c;
            const float p = attn_visible(t0 + c, j, s.T, s.causal)
                                ? attn_prob_saved(S[at] * s.scale_log2, lse_s[c])
                                : 0.0f;
            P[r * tl::LDP + c] = elem<E>::round(p);
            dS[r * tl::LDP + c] = elem<E>::round(attn_dscore(p, dP[at], delta_s[c]));
        }
        __syncwarp();
        wm::add(dv_acc, P, dos);
        wm::add(dk_acc, dS, qs);
    });
    const int64_t head_k = (bh / s.H) * dk.batch + (bh % s.H) * dk.head;
    const int64_t head_v = (bh / s.H) * dv.batch + (bh % s.H) * dv.head;
    write_rows<E, DP, tl>(dk, head_k, dk_acc, s.scale, S, j0 + warp * 16, s);
    write_rows<E, DP, tl>(dv, head_v, dv_acc, 1.0f, S, j0 + warp * 16, s);
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

/* The forward's shared memory: mma.sync's tiles for bf16 and f16, the f32 kernel's own. */
template <typename E, int DP> static constexpr size_t forward_bytes()
{
    if constexpr (std::is_same<E, float>::value)
        return fwd_tiles<E, DP>::fwd_bytes();
    else
        return mma_fwd_tiles<E, DP>::bytes();
}

/* Shared memory of the larger backward kernel (dK/dV's, which holds what dQ's does and the
 * streamed rows' lse2 and D): f32's here, the 16-bit ones' in cuda_bwd.cu. */
template <typename E, int DP> static constexpr size_t backward_bytes()
{
    if constexpr (std::is_same<E, float>::value)
        return bwd_tiles<E, DP>::dkv_bytes();
    else
        return mma_tiles<DP>::dkv_bytes();
}

/* Shared memory of the largest kernel of the problem's configuration. */
static size_t shared_bytes(const gb_attn_problem *p)
{
    size_t bytes = 0;
    by_config(p, [&](auto e, auto dp) {
        using E = typename decltype(e)::type;
        constexpr int DP = decltype(dp)::value;
        constexpr size_t fwd = forward_bytes<E, DP>(), bwd = backward_bytes<E, DP>();
        static_assert(fwd <= SHARED_BYTES_EVERYWHERE && bwd <= SHARED_BYTES_EVERYWHERE,
                      "a configuration's tiles outgrow the shared memory of some GPUs");
        bytes = fwd > bwd ? fwd : bwd;
        return GB_OK;
    });
    return bytes;
}

/* Rows per tile of the problem's dtype: the fewest any of its kernels owns per block, so
 * the most blocks a launch of it may need. */
static int tile_rows(gb_dtype dtype)
{
    return dtype == GB_F32 ? fwd_tiles<float, 32>::ROWS : mma_fwd_tiles<__half, 128>::ROWS;
}

/* ---- the plugin ---------------------------------------------------------------------- */

static head_view view_of(const gb_tensor *t)
{
    head_view v = {t->data, t->stride[0], t->stride[1], t->stride[2]};
    return v;
}

/* Whether every view's rows start on 16 bytes, as cp.async's chunks need: the core's views
 * always do (head_dim a multiple of 8, buffers from cudaMalloc). */
static int rows_aligned(const gb_attn_problem *p, const gb_tensor *const *views, int n)
{
    const size_t size = gb_dtype_size(p->dtype);
    if ((size_t)p->head_dim * size % 16)
        return 0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < 3; d++)
            if ((uintptr_t)views[i]->data % 16 || (size_t)views[i]->stride[d] * size % 16)
                return 0;
    return 1;
}

static dims dims_of(const gb_attn_problem *p, const gb_tensor *const *views, int n)
{
    const int64_t rows = tile_rows(p->dtype);
    dims s = {p->heads, p->seq_len, (int)p->head_dim, p->causal,
              1.0f / sqrtf((float)p->head_dim), attn_score_scale_log2(p->head_dim),
              (p->seq_len + rows - 1) / rows, rows_aligned(p, views, n)};
    return s;
}

/* Blocks of a launch: a tile of each head. */
static unsigned tile_blocks(const gb_attn_problem *p, const dims &s)
{
    return (unsigned)(p->batch * p->heads * s.tiles);
}

/* Whether this build holds the sm_90a kernels (meson's GB_CUDA_SM90A: -Dgpu_arch lists
 * sm_90a; the emulator runs them too) and the GPU is one they run on. */
static int wgmma_runs_on(const gb_device_ctx *device)
{
#ifdef GB_CUDA_SM90A
    return device->cc_major == 9 && device->cc_minor == 0;
#else
    (void)device;
    return 0;
#endif
}

/* [attn] products into the instance's choice; `wgmma` where it cannot run is refused. */
static gb_status choose_products(const gb_host *host, int64_t products,
                                 const gb_device_ctx *device, int *wgmma)
{
    const int runs = wgmma_runs_on(device);
    if (products == PRODUCTS_WGMMA && !runs) {
        host->set_error(host, PLUGIN " [attn] products = wgmma: wgmma runs on compute "
                        "capability 9.0 (H100, H200) from a build with -Dgpu_arch listing "
                        "sm_90a; this is %d.%d%s (set products = auto or mma_sync)",
                        (int)device->cc_major, (int)device->cc_minor,
#ifdef GB_CUDA_SM90A
                        ""
#else
                        " and the build has no sm_90a code"
#endif
        );
        return GB_ERR_CONFIG;
    }
    *wgmma = products == PRODUCTS_WGMMA || (products == PRODUCTS_AUTO && runs);
    return GB_OK;
}

static gb_status flash_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    gb_status st = gb_attn_require_cuda(host, PLUGIN, device);
    if (st != GB_OK)
        return st;
    int wgmma = 0;
    st = choose_products(host, options ? options[0].i : (int64_t)PRODUCTS_AUTO, device, &wgmma);
    if (st != GB_OK)
        return st;
    int limit = 0;
    cudaError_t err =
        cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device->ordinal);
    if (err != cudaSuccess) {
        host->set_error(host, PLUGIN " cannot read the shared memory limit of GPU %d: %s (%s); "
                        "check the GPU with nvidia-smi, or use attn/math",
                        (int)device->ordinal, cudaGetErrorString(err), cudaGetErrorName(err));
        return GB_ERR_DEVICE;
    }
    st = gb_plugin_instance_new(host, device, PLUGIN, sizeof(attn_flash_cuda), self);
    if (st == GB_OK) {
        ((attn_flash_cuda *)*self)->shared_limit = limit;
        ((attn_flash_cuda *)*self)->wgmma = wgmma;
    }
    return st;
}

static int flash_eligible(void *self, const gb_attn_problem *p, char *reason, size_t reason_cap)
{
    const attn_flash_cuda *f = (const attn_flash_cuda *)self;
    if (!gb_attn_problem_ok_on(PLUGIN, "cuda", p, reason, reason_cap))
        return 0;
    if (p->head_dim > MAX_HEAD_DIM) {
        snprintf(reason, reason_cap, PLUGIN " on cuda supports head_dim up to %d (tiles of 32, "
                 "64, 80, 96 or 128 columns, smaller head_dims padded with zeros); this run "
                 "asks for head_dim %lld: use attn/math (any head_dim) or attn/cudnn (bf16 "
                 "and f16, head_dim up to 256 on Hopper)", MAX_HEAD_DIM, (long long)p->head_dim);
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
                 "attn/math)", need, (long long)p->head_dim, gb_dtype_name(p->dtype),
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

/* The forward kernel `kernel` with tiles `tl` and `bytes` of shared memory, a block per
 * tile of tl::ROWS queries of each head; views: out, q, k, v. */
template <class tl, typename K>
static gb_status launch_forward(K *kernel, size_t bytes, const gb_host *host,
                                const gb_attn_problem *p, dims s, cudaStream_t stream,
                                const gb_tensor *const *views, void *saved)
{
    gb_status status = allow_shared(host, kernel, bytes);
    if (status != GB_OK)
        return status;
    s.tiles = (p->seq_len + tl::ROWS - 1) / tl::ROWS;
    kernel<<<tile_blocks(p, s), tl::THREADS, bytes, stream>>>(
        view_of(views[0]), view_of(views[1]), view_of(views[2]), view_of(views[3]),
        (float *)saved, s);
    GB_CUDA_CHECK_LAUNCH("the forward kernel (a block per query tile)");
    return GB_OK;
}

static gb_status flash_forward(void *self, const gb_attn_problem *p, gb_tensor out, gb_tensor q,
                               gb_tensor k, gb_tensor v, void *saved, void *workspace)
{
    (void)workspace;
    const attn_flash_cuda *f = (const attn_flash_cuda *)self;
    const gb_host *host = f->base.host;
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    gb_status st = gb_attn_check_eligible_call(&f->base, PLUGIN, "forward", flash_eligible, p,
                                               names, views, 4);
    if (st != GB_OK)
        return st;
    cudaStream_t stream = (cudaStream_t)f->base.device.stream;
    const dims s = dims_of(p, views, 4);
    return by_config(p, [&](auto e, auto dp) {
        using E = typename decltype(e)::type;
        constexpr int DP = decltype(dp)::value;
        constexpr size_t bytes = forward_bytes<E, DP>();
        if constexpr (std::is_same<E, float>::value) {
            return launch_forward<fwd_tiles<E, DP>>(forward_kernel<E, DP>, bytes, host, p, s,
                                                    stream, views, saved);
        } else {
            if (DP == 64 && f->wgmma)
                return launch_forward<wg_fwd_tiles<E>>(wg_forward_kernel<E>,
                                                       wg_fwd_tiles<E>::bytes(), host, p, s,
                                                       stream, views, saved);
            return launch_forward<mma_fwd_tiles<E, DP>>(mma_forward_kernel<E, DP>, bytes, host,
                                                        p, s, stream, views, saved);
        }
    });
}

/* forward_cached (ABI 1.7): new rows over the caches, by attn/common's warp per row. */
static gb_status flash_forward_cached(void *self, const gb_attn_problem *p, int64_t past,
                                      gb_tensor out, gb_tensor q, gb_tensor k, gb_tensor v,
                                      gb_tensor k_cache, gb_tensor v_cache)
{
    const gb_plugin_instance *a = (const gb_plugin_instance *)self;
    return attn_cuda_forward_cached(a, PLUGIN, flash_eligible, p, past, out, q, k, v, k_cache,
                                    v_cache);
}

static gb_status flash_backward(void *self, const gb_attn_problem *p, gb_tensor dq, gb_tensor dk,
                                gb_tensor dv, gb_tensor dout, gb_tensor q, gb_tensor k,
                                gb_tensor v, gb_tensor out, const void *saved, void *workspace)
{
    const attn_flash_cuda *f = (const attn_flash_cuda *)self;
    const gb_host *host = f->base.host;
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v, &out};
    gb_status st = gb_attn_check_eligible_call(&f->base, PLUGIN, "backward", flash_eligible, p,
                                               names, views, 8);
    if (st != GB_OK)
        return st;
    cudaStream_t stream = (cudaStream_t)f->base.device.stream;
    const dims s = dims_of(p, views, 8);
    const float *lse2 = (const float *)saved;
    float *delta = (float *)workspace;
    return by_config(p, [&](auto e, auto dp) {
        using E = typename decltype(e)::type;
        constexpr int DP = decltype(dp)::value;
        if constexpr (!std::is_same<E, float>::value) {
            const bwd_views w = {view_of(&dq), view_of(&dk), view_of(&dv), view_of(&dout),
                                 view_of(&q),  view_of(&k),  view_of(&v),  view_of(&out),
                                 lse2,         delta};
            return flash_backward_mma<E, DP>(host, w, s, p->batch * p->heads, stream, f->wgmma);
        } else {
            launch_delta(delta, view_of(&dout), view_of(&out), s, p->batch * p->heads, stream);
            GB_CUDA_CHECK_LAUNCH("delta_kernel (dO . O, a warp per DELTA_RUN rows)");
            using tl = bwd_tiles<E, DP>;
            gb_status status = allow_shared(host, dq_kernel<E, DP>, tl::dq_bytes());
            if (status == GB_OK)
                status = allow_shared(host, dkv_kernel<E, DP>, tl::dkv_bytes());
            if (status != GB_OK)
                return status;
            dq_kernel<E, DP><<<tile_blocks(p, s), tl::THREADS, tl::dq_bytes(), stream>>>(
                view_of(&dq), view_of(&q), view_of(&k), view_of(&v), view_of(&dout), lse2,
                delta, s);
            GB_CUDA_CHECK_LAUNCH("dq_kernel (a block per query tile)");
            dkv_kernel<E, DP><<<tile_blocks(p, s), tl::THREADS, tl::dkv_bytes(), stream>>>(
                view_of(&dk), view_of(&dv), view_of(&q), view_of(&k), view_of(&v),
                view_of(&dout), lse2, delta, s);
            GB_CUDA_CHECK_LAUNCH("dkv_kernel (a block per key tile)");
            return GB_OK;
        }
    });
}

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
GB_ATTN_PLUGIN("flash", "1.2.0",
               "FlashAttention-2 tiles on tensor cores (mma.sync, wgmma on sm_90a at "
               "head_dim 64; f32 on CUDA cores), "
               "online softmax, log-sum-exps saved; any T, head_dim up to 128; f32, "
               "bf16, f16",
               GB_DEVICE_CUDA, GB_ATTN_DTYPES, GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY,
               GB_OPTIONS(flash_cuda_options), flash_create, gb_plugin_instance_destroy,
               flash_eligible,
               flash_memory, flash_forward, flash_backward, flash_forward_cached)
}
