/* attn/flash on the CPU: FlashAttention-2 (Dao, 2023) with tiles sized for the caches.
 *
 * Forward: each (batch, head, query tile) streams key tiles through an online softmax,
 * keeping a running max m and sum l per query row and rescaling the running output, so
 * no (T, T) matrix ever exists; it saves only the log-sum-exp m + log l of each row
 * (B*H*T floats per layer). Tiles wholly above the causal diagonal are never visited,
 * and a tile across it is taken a strip of rows (the kernels' block height) at a time,
 * each strip only up to the keys it sees, rounded up to 16. Backward recomputes the
 * probabilities tile by tile from the log-sum-exps, with D_t = dO_t . O_t computed first
 * (FlashAttention-2's stand-in for rowsum(P * dP)).
 * Every sum has one owner that adds its terms in a fixed order, so there are no atomics
 * and outputs are bit-identical whatever the thread count; backward_by_heads says how
 * the work is split.
 *
 * Products run on packed tiles: K^T / sqrt(head_dim) and V^T for the score products, and
 * rows of V, K, Q and dO padded to a multiple of 16 floats; Q and dO are read in place
 * where a product only broadcasts their elements. The kernels are kernels/cpu's
 * (cpu_kernels.h): AVX-512 or AVX2 intrinsics when the CPU has them, portable C otherwise
 * (option `isa`); all give the same bits, and the terms the strips leave out are exact
 * zeros, which an fma chain started from +0 never notices. Workspace is one set of tiles
 * per thread plus D (B*H*T floats): linear in T. head_dim contiguous; head_dim is limited
 * by memory only. bf16 and f16 problems compute in f32 too: the views read are widened
 * into f32 copies in the workspace and the outputs rounded from f32 copies there
 * (attn_views.h; 4 copies of a (B, H, T, D) view in forward, 8 in backward); the saved
 * log-sum-exps are f32.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn_cpu.h"
#include "cpu_kernels.h"
#include "gearbox/attn.h"
#include "pointwise.h"
#include "rowreduce.h"

#define PLUGIN "attn/flash"

enum { OPT_BLOCK_Q, OPT_BLOCK_K, OPT_ISA };
/* f32 copies of views a 16-bit call needs: q, k, v, out forward; q, k, v, out, dout, dq,
 * dk, dv backward. */
enum { WIDE_VIEWS = 8 };
enum { ISA_AUTO };   /* the other choices are kernel sets, by name */

static const gb_option flash_options[] = {
    [OPT_BLOCK_Q] = {"block_q", GB_OPT_INT, "128", 1, 4096, NULL,
                     "query rows per tile (a thread holds Q, dO and O or dQ tiles of "
                     "block_q x head_dim)"},
    [OPT_BLOCK_K] = {"block_k", GB_OPT_INT, "128", 16, 4096, NULL,
                     "keys per tile, a multiple of 16 (K, V, dK, dV tiles of block_k x "
                     "head_dim; scores of block_q x block_k)"},
    [OPT_ISA] = {"isa", GB_OPT_ENUM, "auto", 0, 0, "auto|avx512|avx2|portable",
                 "inner kernels: auto picks avx512 when the CPU has AVX-512F, else avx2 "
                 "when it has AVX2 and FMA; all give identical results"},
};

typedef struct attn_flash {
    attn_cpu cpu;
    int64_t block_q, block_k;
    const cpu_kernels *kernels;
} attn_flash;

/* The kernels `isa` asks for: auto takes the fastest this CPU runs without a word; a
 * named set this build or CPU cannot run is refused. */
static gb_status choose_kernels(const gb_host *host, int64_t isa, const cpu_kernels **out)
{
    if (isa == ISA_AUTO) {
        *out = cpu_kernels_best();
        return GB_OK;
    }
    char name[16];
    const char *choices = flash_options[OPT_ISA].choices;
    for (int64_t i = 0; i < isa; i++)
        choices = strchr(choices, '|') + 1;
    snprintf(name, sizeof name, "%.*s", (int)strcspn(choices, "|"), choices);
    *out = cpu_kernels_find(name);
    if (*out)
        return GB_OK;
#ifdef CPU_KERNELS_X86
    const char *lacking = "this CPU lacks its instructions";
#else
    const char *lacking = "this build is not for x86-64";
#endif
    host->set_error(host, "[attn] isa = %s, but %s; use isa = auto or portable", name,
                    lacking);
    return GB_ERR_UNSUPPORTED;
}

/* ---- tiles --------------------------------------------------------------------------- */

/* Tile sizes for one problem: no larger than T needs. */
typedef struct tile_shape {
    int64_t BQ, BK, D, Dp;   /* query rows, keys (a multiple of 16), head_dim, padded */
    int64_t T;
    int by_heads;            /* backward split over whole heads (see backward_by_heads) */
} tile_shape;

/* Backward splits work over whole heads when there are enough of them to keep every
 * thread busy (at most a fifth of thread time idle): one pass, each thread keeping its
 * head's Q, dO and dQ packed (3 T x head_dim floats). Otherwise it runs two passes, over
 * key tiles for dK, dV and over query tiles for dQ, which computes Q K^T and dO V^T twice
 * but splits finely. Both add every sum in the same order, so they give the same bits.
 * (The forward pass has no such choice: its query tiles are independent.) */
static int backward_by_heads(int threads, const gb_attn_problem *p)
{
    const int64_t heads = p->batch * p->heads;
    const int64_t rounds = (heads + threads - 1) / threads;
    return rounds * threads * 4 <= heads * 5;
}

static tile_shape shape_of(const attn_flash *f, const gb_attn_problem *p)
{
    const int64_t T = p->seq_len;
    return (tile_shape){
        .BQ = attn_min(f->block_q, T),
        .BK = attn_min(f->block_k, attn_round_up(T, CPU_VEC)),
        .D = p->head_dim,
        .Dp = attn_round_up(p->head_dim, CPU_VEC),
        .T = T,
        .by_heads = backward_by_heads(f->cpu.threads, p),
    };
}

/* One thread's scratch. Each buffer starts on a 64-byte boundary. */
typedef struct tiles {
    float *q, *dout;  // (R, Dp) rows of Q and dO: R = T (a whole head) or BQ (a tile)
    float *dq;        // (T, Dp) a whole head's dQ; backward by heads only
    float *acc;       // (BQ, Dp) running output in forward, a query tile's dQ in backward
    float *kt, *vt;   // (D, BK) K^T / sqrt(D), V^T
    float *rows;      // (BK, Dp) V in forward, K in backward
    float *s, *ds;    // (BQ, BK) scores, then P; dP, then dS
    float *dk, *dv;   // (BK, Dp)
    float *m, *l;     // (BQ) running max and sum of each query row
} tiles;

/* Lays the tiles out from `base` (NULL: only count); returns the floats they take. */
static int64_t lay_out_tiles(const tile_shape *t, float *base, tiles *w)
{
    const int64_t head_rows = t->by_heads ? t->T : t->BQ;
    const attn_tile layout[] = {
        {head_rows * t->Dp, &w->q}, {head_rows * t->Dp, &w->dout},
        {t->by_heads * t->T * t->Dp, &w->dq}, {t->BQ * t->Dp, &w->acc},
        {t->D * t->BK, &w->kt}, {t->D * t->BK, &w->vt}, {t->BK * t->Dp, &w->rows},
        {t->BQ * t->BK, &w->s}, {t->BQ * t->BK, &w->ds}, {t->BK * t->Dp, &w->dk},
        {t->BK * t->Dp, &w->dv}, {t->BQ, &w->m}, {t->BQ, &w->l},
    };
    return attn_lay_out(layout, sizeof layout / sizeof layout[0], base);
}

static gb_status flash_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                              size_t *workspace_bytes)
{
    attn_flash *f = self;
    const tile_shape t = shape_of(f, p);
    tiles unused;
    const int64_t rows = p->batch * p->heads * p->seq_len;
    *saved_bytes = (size_t)rows * sizeof(float);
    *workspace_bytes = (size_t)(attn_round_up(rows, CPU_VEC) +
                                f->cpu.threads * lay_out_tiles(&t, NULL, &unused) +
                                attn_wide_floats(p, WIDE_VIEWS)) *
                       sizeof(float);
    return GB_OK;
}

/* ---- one call ------------------------------------------------------------------------ */

/* What every tile of one forward or backward call needs. */
typedef struct flash_call {
    const cpu_kernels *kern;
    tile_shape t;
    int64_t H, T;
    int causal;
    float scale;
    attn_call views;   // f32 (attn_cpu_f32)
    float *lse;     // (B, H, T) saved by forward
    float *delta;   // (B, H, T) dO . O, in the workspace
    float *arena;   // (threads, arena_floats)
    int64_t arena_floats;
} flash_call;

/* `call` laid out: its views, in f32, follow the tiles in the workspace. */
static flash_call call_of(const attn_call *call)
{
    const attn_flash *f = call->self;
    const gb_attn_problem *p = &call->p;
    flash_call c = {
        .kern = f->kernels,
        .t = shape_of(f, p),
        .H = p->heads,
        .T = p->seq_len,
        .causal = p->causal,
        .scale = 1.0f / sqrtf((float)p->head_dim),
        .lse = call->saved,   // forward writes it, backward only reads it
        .delta = call->workspace,
    };
    tiles unused;
    c.arena_floats = lay_out_tiles(&c.t, NULL, &unused);
    c.arena = c.delta + attn_round_up(p->batch * p->heads * p->seq_len, CPU_VEC);
    float *wide = c.arena + f->cpu.threads * c.arena_floats;
    c.views = attn_cpu_f32(call, &wide);
    return c;
}

static tiles thread_tiles(const flash_call *c)
{
    tiles w;
    lay_out_tiles(&c->t, c->arena + (int64_t)omp_get_thread_num() * c->arena_floats, &w);
    return w;
}

/* Keys a query tile q0 .. q0+nq-1 needs: with a causal mask, none past its last row. */
static int64_t key_end(const flash_call *c, int64_t q0, int64_t nq)
{
    return c->causal ? q0 + nq : c->T;
}

/* The first query tile that sees key k0: with a causal mask, the one holding row k0. */
static int64_t query_start(const flash_call *c, int64_t k0)
{
    return c->causal ? k0 / c->t.BQ * c->t.BQ : 0;
}

/* Keys of tile k0.. (nk of them) that query rows q0+i0 .. q0+i0+nr-1 see between them:
 * with a causal mask, those up to the last row's position. */
static int64_t strip_keys(const flash_call *c, int64_t q0, int64_t i0, int64_t nr, int64_t k0,
                          int64_t nk)
{
    return attn_visible_keys(c->causal, q0 + i0 + nr - 1, k0, nk);
}

/* The first row of query tile q0.. (nq rows) that sees key `key`; nq when none does. */
static int64_t first_row_seeing(const flash_call *c, int64_t q0, int64_t nq, int64_t key)
{
    const int64_t i = c->causal ? key - q0 : 0;
    return i < 0 ? 0 : i > nq ? nq : i;
}

/* Online softmax of rows i0 .. i0+nr-1 over one key tile: each becomes exp(s - new max)
 * up to `width`, m and l carry each row's running max and sum, and the running output is
 * rescaled to the new max. */
static void softmax_rows(const flash_call *c, tiles *w, int64_t q0, int64_t i0, int64_t nr,
                         int64_t k0, int64_t nk, int64_t width)
{
    const int64_t BK = c->t.BK, Dp = c->t.Dp;
    for (int64_t i = i0; i < i0 + nr; i++) {
        float *row = w->s + i * BK;
        const int64_t n = attn_visible_keys(c->causal, q0 + i, k0, nk);
        const float tile_max = c->kern->max_row(row, n);
        const float m_new = tile_max > w->m[i] ? tile_max : w->m[i];
        const float alpha = gb_exp_fast(w->m[i] - m_new);   // 0 on a row's first tile
        w->l[i] = w->l[i] * alpha + c->kern->exp_row(row, n, width, m_new);
        w->m[i] = m_new;
        float *o = w->acc + i * Dp;
        for (int64_t d = 0; d < Dp; d++)
            o[d] *= alpha;
    }
}

/* Forward of query tile q0..: Q is read in place (a product only broadcasts its rows).
 * Each key tile is taken a strip of rows at a time, each strip up to the keys it sees;
 * a strip that sees none of the tile is passed over, which its rows' running max, sum
 * and output (rescaled by exp(0) = 1, plus nothing) would not notice. */
static void forward_tile(const flash_call *c, tiles *w, int64_t b, int64_t h, int64_t q0)
{
    const int64_t BK = c->t.BK, D = c->t.D, Dp = c->t.Dp, R = c->kern->gemm_rows;
    const int64_t nq = attn_min(c->t.BQ, c->T - q0), ldq = c->views.q.stride[2];
    const float *q = attn_row(&c->views.q, b, h, q0);
    float *lse = c->lse + (b * c->H + h) * c->T + q0;
    memset(w->acc, 0, (size_t)(nq * Dp) * sizeof(float));
    for (int64_t i = 0; i < nq; i++) {
        w->m[i] = -INFINITY;
        w->l[i] = 0.0f;
    }
    for (int64_t k0 = 0; k0 < key_end(c, q0, nq); k0 += BK) {
        const int64_t nk = attn_min(BK, c->T - k0);
        attn_pack_columns(w->kt, BK, &c->views.k, b, h, k0, nk, D, c->scale);
        attn_pack_rows(w->rows, Dp, &c->views.v, b, h, k0, nk, D);
        for (int64_t i0 = 0; i0 < nq; i0 += R) {
            const int64_t nr = attn_min(R, nq - i0), keys = strip_keys(c, q0, i0, nr, k0, nk);
            if (keys == 0)
                continue;
            const int64_t width = attn_round_up(keys, CPU_VEC);
            float *s_rows = w->s + i0 * BK;
            c->kern->gemm(nr, width, D, q + i0 * ldq, ldq, 1, w->kt, BK, s_rows, BK, 0);
            softmax_rows(c, w, q0, i0, nr, k0, nk, width);
            c->kern->gemm(nr, Dp, keys, s_rows, BK, 1, w->rows, Dp, w->acc + i0 * Dp, Dp, 1);
        }
    }
    for (int64_t i = 0; i < nq; i++) {
        lse[i] = w->m[i] + logf(w->l[i]);
        const float inv_l = 1.0f / w->l[i];
        for (int64_t d = 0; d < D; d++)
            w->acc[i * Dp + d] *= inv_l;
    }
    attn_unpack_rows(&c->views.out, b, h, q0, nq, w->acc, Dp, D, 1.0f);
}

static gb_status flash_forward_compute(const attn_call *call)
{
    const attn_flash *f = call->self;
    const gb_attn_problem *p = &call->p;
    flash_call c = call_of(call);
    const int64_t n_tiles = (c.T + c.t.BQ - 1) / c.t.BQ, units = p->batch * c.H * n_tiles;
    #pragma omp parallel num_threads(gb_omp_team(f->cpu.threads)) if (units > 1)
    {
        tiles w = thread_tiles(&c);
        #pragma omp for schedule(dynamic, 1)
        for (int64_t u = 0; u < units; u++) {
            int64_t bh = u / n_tiles;
            forward_tile(&c, &w, bh / c.H, bh % c.H, u % n_tiles * c.t.BQ);
        }
    }
    attn_cpu_store(call, &c.views);
    return GB_OK;
}

/* ---- backward ------------------------------------------------------------------------ */

/* K^T / sqrt(D) and V^T of key tile k0.., for the products that recompute P and dP. */
static void pack_key_tile(const flash_call *c, tiles *w, int64_t b, int64_t h, int64_t k0,
                          int64_t nk)
{
    attn_pack_columns(w->kt, c->t.BK, &c->views.k, b, h, k0, nk, c->t.D, c->scale);
    attn_pack_columns(w->vt, c->t.BK, &c->views.v, b, h, k0, nk, c->t.D, 1.0f);
}

/* P and dS of query tile q0.. against the packed key tile k0.., a strip of rows at a
 * time up to the keys the strip sees: w->s = P = exp(Q K^T / sqrt(D) - lse),
 * w->ds = P * (dO V^T - D), zero from there to BK (the key-side products read them
 * transposed). Strips that see none of the tile are left unwritten: no product reads
 * them. q and dout point at row q0 of Q and dO with row strides ldq and ldo. */
static void pair_gradients(const flash_call *c, tiles *w, int64_t bh, int64_t q0, int64_t nq,
                           int64_t k0, int64_t nk, const float *q, int64_t ldq,
                           const float *dout, int64_t ldo)
{
    const int64_t BK = c->t.BK, D = c->t.D, R = c->kern->gemm_rows;
    const float *lse = c->lse + bh * c->T + q0, *delta = c->delta + bh * c->T + q0;
    for (int64_t i0 = 0; i0 < nq; i0 += R) {
        const int64_t nr = attn_min(R, nq - i0), keys = strip_keys(c, q0, i0, nr, k0, nk);
        if (keys == 0)
            continue;
        const int64_t width = attn_round_up(keys, CPU_VEC);
        c->kern->gemm(nr, width, D, q + i0 * ldq, ldq, 1, w->kt, BK, w->s + i0 * BK, BK, 0);
        c->kern->gemm(nr, width, D, dout + i0 * ldo, ldo, 1, w->vt, BK, w->ds + i0 * BK, BK,
                      0);
        for (int64_t i = i0; i < i0 + nr; i++) {
            float *p_row = w->s + i * BK, *ds_row = w->ds + i * BK;
            c->kern->exp_row(p_row, attn_visible_keys(c->causal, q0 + i, k0, nk), width,
                             lse[i]);
            for (int64_t j = 0; j < width; j++)
                ds_row[j] = p_row[j] * (ds_row[j] - delta[i]);
            memset(p_row + width, 0, (size_t)(BK - width) * sizeof(float));
            memset(ds_row + width, 0, (size_t)(BK - width) * sizeof(float));
        }
    }
}

/* dV += P^T dO and dK += dS^T Q for the pair just computed, a strip of keys at a time
 * over the queries that see it; P^T and dS^T are read transposed in place. q, dout: the
 * tile's packed (nq, Dp) rows. */
static void add_key_gradients(const flash_call *c, tiles *w, int64_t q0, int64_t nq,
                              int64_t k0, int64_t nk, const float *q, const float *dout)
{
    const int64_t BK = c->t.BK, Dp = c->t.Dp, R = c->kern->gemm_rows;
    for (int64_t j0 = 0; j0 < nk; j0 += R) {
        const int64_t nr = attn_min(R, nk - j0), i0 = first_row_seeing(c, q0, nq, k0 + j0);
        if (i0 == nq)
            break;   // later keys are seen by no query of this tile either
        c->kern->gemm(nr, Dp, nq - i0, w->s + i0 * BK + j0, 1, BK, dout + i0 * Dp, Dp,
                      w->dv + j0 * Dp, Dp, 1);
        c->kern->gemm(nr, Dp, nq - i0, w->ds + i0 * BK + j0, 1, BK, q + i0 * Dp, Dp,
                      w->dk + j0 * Dp, Dp, 1);
    }
}

/* dQ (nq, Dp) += dS K for the pair just computed, each strip of rows up to the keys it
 * sees. */
static void add_query_gradients(const flash_call *c, tiles *w, int64_t q0, int64_t nq,
                                int64_t k0, int64_t nk, float *dq)
{
    const int64_t BK = c->t.BK, Dp = c->t.Dp, R = c->kern->gemm_rows;
    for (int64_t i0 = 0; i0 < nq; i0 += R) {
        const int64_t nr = attn_min(R, nq - i0), keys = strip_keys(c, q0, i0, nr, k0, nk);
        if (keys > 0)
            c->kern->gemm(nr, Dp, keys, w->ds + i0 * BK, BK, 1, w->rows, Dp, dq + i0 * Dp, Dp,
                          1);
    }
}

static void write_key_gradients(const flash_call *c, tiles *w, int64_t b, int64_t h,
                                int64_t k0, int64_t nk)
{
    attn_unpack_rows(&c->views.dk, b, h, k0, nk, w->dk, c->t.Dp, c->t.D, c->scale);
    attn_unpack_rows(&c->views.dv, b, h, k0, nk, w->dv, c->t.Dp, c->t.D, 1.0f);
}

/* Backward of a whole head in one pass: key tiles in order, each against the query
 * tiles that see it in order, with dQ summed per thread over the key tiles. */
static void backward_head(const flash_call *c, tiles *w, int64_t b, int64_t h)
{
    const int64_t T = c->T, BQ = c->t.BQ, BK = c->t.BK, D = c->t.D, Dp = c->t.Dp;
    attn_pack_rows(w->q, Dp, &c->views.q, b, h, 0, T, D);
    attn_pack_rows(w->dout, Dp, &c->views.dout, b, h, 0, T, D);
    memset(w->dq, 0, (size_t)(T * Dp) * sizeof(float));
    for (int64_t k0 = 0; k0 < T; k0 += BK) {
        const int64_t nk = attn_min(BK, T - k0);
        pack_key_tile(c, w, b, h, k0, nk);
        attn_pack_rows(w->rows, Dp, &c->views.k, b, h, k0, nk, D);
        memset(w->dk, 0, (size_t)(nk * Dp) * sizeof(float));
        memset(w->dv, 0, (size_t)(nk * Dp) * sizeof(float));
        for (int64_t q0 = query_start(c, k0); q0 < T; q0 += BQ) {
            const int64_t nq = attn_min(BQ, T - q0);
            float *q = w->q + q0 * Dp, *dout = w->dout + q0 * Dp;
            pair_gradients(c, w, b * c->H + h, q0, nq, k0, nk, q, Dp, dout, Dp);
            add_key_gradients(c, w, q0, nq, k0, nk, q, dout);
            add_query_gradients(c, w, q0, nq, k0, nk, w->dq + q0 * Dp);
        }
        write_key_gradients(c, w, b, h, k0, nk);
    }
    attn_unpack_rows(&c->views.dq, b, h, 0, T, w->dq, Dp, D, c->scale);
}

/* dK and dV of key tile k0.., summed over the query tiles that see it, in order. */
static void key_tile_gradients(const flash_call *c, tiles *w, int64_t b, int64_t h, int64_t k0)
{
    const int64_t BQ = c->t.BQ, D = c->t.D, Dp = c->t.Dp;
    const int64_t nk = attn_min(c->t.BK, c->T - k0);
    pack_key_tile(c, w, b, h, k0, nk);
    memset(w->dk, 0, (size_t)(nk * Dp) * sizeof(float));
    memset(w->dv, 0, (size_t)(nk * Dp) * sizeof(float));
    for (int64_t q0 = query_start(c, k0); q0 < c->T; q0 += BQ) {
        const int64_t nq = attn_min(BQ, c->T - q0);
        attn_pack_rows(w->q, Dp, &c->views.q, b, h, q0, nq, D);
        attn_pack_rows(w->dout, Dp, &c->views.dout, b, h, q0, nq, D);
        pair_gradients(c, w, b * c->H + h, q0, nq, k0, nk, w->q, Dp, w->dout, Dp);
        add_key_gradients(c, w, q0, nq, k0, nk, w->q, w->dout);
    }
    write_key_gradients(c, w, b, h, k0, nk);
}

/* dQ of query tile q0.., summed over its key tiles in order; Q and dO read in place. */
static void query_tile_gradients(const flash_call *c, tiles *w, int64_t b, int64_t h,
                                 int64_t q0)
{
    const int64_t BK = c->t.BK, D = c->t.D, Dp = c->t.Dp;
    const int64_t nq = attn_min(c->t.BQ, c->T - q0);
    const float *q = attn_row(&c->views.q, b, h, q0);
    const float *dout = attn_row(&c->views.dout, b, h, q0);
    memset(w->acc, 0, (size_t)(nq * Dp) * sizeof(float));
    for (int64_t k0 = 0; k0 < key_end(c, q0, nq); k0 += BK) {
        const int64_t nk = attn_min(BK, c->T - k0);
        pack_key_tile(c, w, b, h, k0, nk);
        attn_pack_rows(w->rows, Dp, &c->views.k, b, h, k0, nk, D);
        pair_gradients(c, w, b * c->H + h, q0, nq, k0, nk, q, c->views.q.stride[2], dout,
                       c->views.dout.stride[2]);
        add_query_gradients(c, w, q0, nq, k0, nk, w->acc);
    }
    attn_unpack_rows(&c->views.dq, b, h, q0, nq, w->acc, Dp, D, c->scale);
}

static gb_status flash_backward_compute(const attn_call *call)
{
    const attn_flash *f = call->self;
    const gb_attn_problem *p = &call->p;
    flash_call c = call_of(call);
    const int64_t heads = p->batch * c.H, T = c.T, D = c.t.D;
    const int64_t q_tiles = (T + c.t.BQ - 1) / c.t.BQ, k_tiles = (T + c.t.BK - 1) / c.t.BK;
    #pragma omp parallel num_threads(gb_omp_team(f->cpu.threads)) if (heads * q_tiles > 1)
    {
        tiles w = thread_tiles(&c);
        #pragma omp for schedule(static)
        for (int64_t bh = 0; bh < heads; bh++)
            for (int64_t t = 0; t < T; t++)
                c.delta[bh * T + t] = row_dot(attn_row(&c.views.dout, bh / c.H, bh % c.H, t),
                                              attn_row(&c.views.out, bh / c.H, bh % c.H, t), D);
        if (c.t.by_heads) {
            #pragma omp for schedule(dynamic, 1)
            for (int64_t bh = 0; bh < heads; bh++)
                backward_head(&c, &w, bh / c.H, bh % c.H);
        } else {
            #pragma omp for schedule(dynamic, 1)
            for (int64_t u = 0; u < heads * k_tiles; u++) {
                int64_t bh = u / k_tiles;
                key_tile_gradients(&c, &w, bh / c.H, bh % c.H, u % k_tiles * c.t.BK);
            }
            #pragma omp for schedule(dynamic, 1)
            for (int64_t u = 0; u < heads * q_tiles; u++) {
                int64_t bh = u / q_tiles;
                query_tile_gradients(&c, &w, bh / c.H, bh % c.H, u % q_tiles * c.t.BQ);
            }
        }
    }
    attn_cpu_store(call, &c.views);
    return GB_OK;
}

static const attn_cpu_kind flash_kind = {PLUGIN, flash_forward_compute, flash_backward_compute,
                                         1};

static gb_status flash_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    const int64_t block_k = options[OPT_BLOCK_K].i;
    if (block_k % CPU_VEC != 0) {
        host->set_error(host, "[attn] block_k = %lld is not a multiple of %d, the width the "
                        "kernels work in; use %lld", (long long)block_k, CPU_VEC,
                        (long long)((block_k + CPU_VEC - 1) / CPU_VEC * CPU_VEC));
        return GB_ERR_CONFIG;
    }
    const cpu_kernels *kernels;
    gb_status status = choose_kernels(host, options[OPT_ISA].i, &kernels);
    if (status != GB_OK)
        return status;
    const attn_flash init = {.block_q = options[OPT_BLOCK_Q].i, .block_k = block_k,
                             .kernels = kernels};
    host->log(host, GB_LOG_DEBUG, "%s kernels, tiles of %lld queries x %lld keys",
              kernels->name, (long long)init.block_q, (long long)block_k);
    return attn_cpu_create(host, device, &flash_kind, &init, sizeof init, self);
}

GB_ATTN_PLUGIN("flash", "1.0.0",
               "FlashAttention-2 tiles with online softmax; saves per-row log-sum-exp; "
               "AVX-512, AVX2 or portable kernels; f32, bf16, f16",
               ATTN_CPU_DEVICES_DTYPES_CAPS, GB_OPTIONS(flash_options), .create = flash_create,
               .memory = flash_memory, ATTN_CPU_ENTRIES)
