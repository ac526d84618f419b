/* attn/flash on the CPU: FlashAttention-2 (Dao, 2023) with tiles sized for the caches.
 *
 * Forward: each (batch, head, query tile) streams key tiles through an online softmax,
 * keeping a running max m and sum l per query row and rescaling the running output, so
 * no (T, T) matrix ever exists; it saves only the log-sum-exp m + log l of each row
 * (B*H*T floats per layer). Tiles wholly above the causal diagonal are never visited.
 * Backward recomputes the probabilities tile by tile from the log-sum-exps, with
 * D_t = dO_t . O_t computed first (FlashAttention-2's stand-in for rowsum(P * dP)).
 * Every sum has one owner that adds its terms in a fixed order, so there are no atomics
 * and outputs are bit-identical whatever the thread count; backward_by_heads says how
 * the work is split.
 *
 * Products run on packed tiles: K^T / sqrt(head_dim) and V^T for the score products, and
 * rows of V, K, Q and dO padded to a multiple of 16 floats; Q and dO are read in place
 * where a product only broadcasts their elements. The kernels (kernels.h) are AVX-512
 * intrinsics when the CPU has AVX-512F and portable C otherwise (option `isa`); both give
 * the same bits. Workspace is one set of tiles per thread plus D (B*H*T floats): linear
 * in T. f32 only; head_dim contiguous; head_dim is limited by memory only.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn_views.h"
#include "gearbox/attn.h"
#include "kernels.h"
#include "pointwise.h"
#include "rowreduce.h"

#define PLUGIN "attn/flash"

enum { OPT_BLOCK_Q, OPT_BLOCK_K, OPT_ISA };
enum { ISA_AUTO, ISA_AVX512, ISA_PORTABLE };

static const gb_option flash_options[] = {
    [OPT_BLOCK_Q] = {"block_q", GB_OPT_INT, "128", 1, 4096, NULL,
                     "query rows per tile (a thread holds Q, dO and O or dQ tiles of "
                     "block_q x head_dim)"},
    [OPT_BLOCK_K] = {"block_k", GB_OPT_INT, "128", 16, 4096, NULL,
                     "keys per tile, a multiple of 16 (K, V, dK, dV tiles of block_k x "
                     "head_dim; scores of block_q x block_k)"},
    [OPT_ISA] = {"isa", GB_OPT_ENUM, "auto", 0, 0, "auto|avx512|portable",
                 "inner kernels: auto picks avx512 when the CPU has AVX-512F; both give "
                 "identical results"},
};

typedef struct attn_flash {
    const gb_host *host;
    int threads;       /* host->num_threads, at least 1: one set of tiles each */
    int64_t block_q, block_k;
    const flash_kernels *kernels;
} attn_flash;

/* The kernels `isa` asks for; auto falls back to portable C without a word. */
static gb_status choose_kernels(const gb_host *host, int64_t isa, const flash_kernels **out)
{
    *out = &flash_kernels_portable;
    if (isa == ISA_PORTABLE)
        return GB_OK;
#ifdef FLASH_HAVE_AVX512
    if (__builtin_cpu_supports("avx512f")) {
        *out = &flash_kernels_avx512;
        return GB_OK;
    }
    const char *why = "this CPU has no AVX-512F";
#else
    const char *why = "this build has no AVX-512 kernels (it is not for x86-64)";
#endif
    if (isa == ISA_AUTO)
        return GB_OK;
    host->set_error(host, "[attn] isa = avx512, but %s; use isa = auto or portable", why);
    return GB_ERR_UNSUPPORTED;
}

static gb_status flash_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    if (!device || device->device != GB_DEVICE_CPU) {
        host->set_error(host, PLUGIN "-cpu runs on the cpu device only; this run's device is "
                              "not the cpu (use the plugin built for it)");
        return GB_ERR_UNSUPPORTED;
    }
    const int64_t block_k = options[OPT_BLOCK_K].i;
    if (block_k % FLASH_VEC != 0) {
        host->set_error(host, "[attn] block_k = %lld is not a multiple of %d, the width the "
                        "kernels work in; use %lld", (long long)block_k, FLASH_VEC,
                        (long long)((block_k + FLASH_VEC - 1) / FLASH_VEC * FLASH_VEC));
        return GB_ERR_CONFIG;
    }
    const flash_kernels *kernels;
    gb_status status = choose_kernels(host, options[OPT_ISA].i, &kernels);
    if (status != GB_OK)
        return status;
    attn_flash *f = host->alloc(host, sizeof *f);
    if (!f) {
        host->set_error(host, "cannot allocate the " PLUGIN " instance");
        return GB_ERR_NO_MEMORY;
    }
    f->host = host;
    f->threads = host->num_threads > 0 ? host->num_threads : 1;
    f->block_q = options[OPT_BLOCK_Q].i;
    f->block_k = block_k;
    f->kernels = kernels;
    host->log(host, GB_LOG_DEBUG, "%s kernels, tiles of %lld queries x %lld keys",
              kernels->name, (long long)f->block_q, (long long)block_k);
    *self = f;
    return GB_OK;
}

static void flash_destroy(void *self)
{
    attn_flash *f = self;
    if (f)
        f->host->free(f->host, f);
}

static int flash_eligible(void *self, const gb_attn_problem *p, char *reason, size_t reason_cap)
{
    (void)self;
    return attn_problem_ok(PLUGIN, p, reason, reason_cap);
}

/* ---- tiles --------------------------------------------------------------------------- */

static int64_t round_up(int64_t n, int64_t to)
{
    return (n + to - 1) / to * to;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

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
        .BQ = min64(f->block_q, T),
        .BK = min64(f->block_k, round_up(T, FLASH_VEC)),
        .D = p->head_dim,
        .Dp = round_up(p->head_dim, FLASH_VEC),
        .T = T,
        .by_heads = backward_by_heads(f->threads, p),
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
    const int64_t sizes[] = {head_rows * t->Dp, head_rows * t->Dp, t->by_heads * t->T * t->Dp,
                             t->BQ * t->Dp, t->D * t->BK, t->D * t->BK, t->BK * t->Dp,
                             t->BQ * t->BK, t->BQ * t->BK, t->BK * t->Dp, t->BK * t->Dp,
                             t->BQ, t->BQ};
    float **slots[] = {&w->q, &w->dout, &w->dq, &w->acc, &w->kt, &w->vt, &w->rows, &w->s,
                       &w->ds, &w->dk, &w->dv, &w->m, &w->l};
    _Static_assert(sizeof sizes / sizeof sizes[0] == sizeof slots / sizeof slots[0],
                   "one size per tile");
    int64_t used = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *slots[i] = base ? base + used : NULL;
        used += round_up(sizes[i], FLASH_VEC);
    }
    return used;
}

static gb_status flash_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                              size_t *workspace_bytes)
{
    attn_flash *f = self;
    const tile_shape t = shape_of(f, p);
    tiles unused;
    const int64_t rows = p->batch * p->heads * p->seq_len;
    *saved_bytes = (size_t)rows * sizeof(float);
    *workspace_bytes = (size_t)(round_up(rows, FLASH_VEC) +
                                f->threads * lay_out_tiles(&t, NULL, &unused)) *
                       sizeof(float);
    return GB_OK;
}

/* Rows s0 .. s0+n-1 of head (b, h) into dst (n, ld), columns D .. ld-1 zeroed so that
 * products over the padded width add nothing. */
// dst (n, ld)
static void pack_rows(float *dst, int64_t ld, const gb_tensor *t, int64_t b, int64_t h,
                      int64_t s0, int64_t n, int64_t D)
{
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst + i * ld, attn_row(t, b, h, s0 + i), (size_t)D * sizeof(float));
        memset(dst + i * ld + D, 0, (size_t)(ld - D) * sizeof(float));
    }
}

/* The same rows transposed and times `scale`: dst[d][j] = scale * row j's element d;
 * columns n .. ld-1 zeroed. */
// dst (D, ld)
static void pack_columns(float *dst, int64_t ld, const gb_tensor *t, int64_t b, int64_t h,
                         int64_t s0, int64_t n, int64_t D, float scale)
{
    for (int64_t j = 0; j < n; j++) {
        const float *src = attn_row(t, b, h, s0 + j);
        for (int64_t d = 0; d < D; d++)
            dst[d * ld + j] = src[d] * scale;
    }
    for (int64_t d = 0; d < D; d++)
        memset(dst + d * ld + n, 0, (size_t)(ld - n) * sizeof(float));
}

/* Rows s0 .. s0+n-1 of head (b, h) = the first D columns of src times `scale`. */
// src (n, ld)
static void unpack_rows(const gb_tensor *t, int64_t b, int64_t h, int64_t s0, int64_t n,
                        const float *src, int64_t ld, int64_t D, float scale)
{
    for (int64_t i = 0; i < n; i++) {
        float *row = attn_row(t, b, h, s0 + i);
        for (int64_t d = 0; d < D; d++)
            row[d] = src[i * ld + d] * scale;
    }
}

/* ---- one call ------------------------------------------------------------------------ */

/* What every tile of one forward or backward call needs. */
typedef struct flash_call {
    const flash_kernels *kern;
    tile_shape t;
    int64_t H, T;
    int causal;
    float scale;
    gb_tensor q, k, v, out, dout, dq, dk, dv;
    float *lse;     // (B, H, T) saved by forward
    float *delta;   // (B, H, T) dO . O, in the workspace
    float *arena;   // (threads, arena_floats)
    int64_t arena_floats;
} flash_call;

static flash_call call_of(const attn_flash *f, const gb_attn_problem *p, float *lse,
                          void *workspace)
{
    flash_call c = {
        .kern = f->kernels,
        .t = shape_of(f, p),
        .H = p->heads,
        .T = p->seq_len,
        .causal = p->causal,
        .scale = 1.0f / sqrtf((float)p->head_dim),
        .lse = lse,
        .delta = workspace,
    };
    tiles unused;
    c.arena_floats = lay_out_tiles(&c.t, NULL, &unused);
    c.arena = c.delta + round_up(p->batch * p->heads * p->seq_len, FLASH_VEC);
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

/* Online softmax over one key tile: rows of w->s become exp(s - new max), m and l carry
 * each row's running max and sum, and the running output is rescaled to the new max. */
static void softmax_tile(const flash_call *c, tiles *w, int64_t q0, int64_t nq, int64_t k0,
                         int64_t nk)
{
    const int64_t BK = c->t.BK, Dp = c->t.Dp;
    for (int64_t i = 0; i < nq; i++) {
        float *row = w->s + i * BK;
        const int64_t n = attn_visible_keys(c->causal, q0 + i, k0, nk);
        const float tile_max = row_max(row, n);
        const float m_new = tile_max > w->m[i] ? tile_max : w->m[i];
        const float alpha = exp_fast(w->m[i] - m_new);   // 0 on a row's first tile
        w->l[i] = w->l[i] * alpha + c->kern->exp_row(row, n, BK, m_new);
        w->m[i] = m_new;
        float *o = w->acc + i * Dp;
        for (int64_t d = 0; d < Dp; d++)
            o[d] *= alpha;
    }
}

/* Forward of query tile q0..: Q is read in place (a product only broadcasts its rows). */
static void forward_tile(const flash_call *c, tiles *w, int64_t b, int64_t h, int64_t q0)
{
    const int64_t BK = c->t.BK, D = c->t.D, Dp = c->t.Dp;
    const int64_t nq = min64(c->t.BQ, c->T - q0);
    const float *q = attn_row(&c->q, b, h, q0);
    float *lse = c->lse + (b * c->H + h) * c->T + q0;
    memset(w->acc, 0, (size_t)(nq * Dp) * sizeof(float));
    for (int64_t i = 0; i < nq; i++) {
        w->m[i] = -INFINITY;
        w->l[i] = 0.0f;
    }
    for (int64_t k0 = 0; k0 < key_end(c, q0, nq); k0 += BK) {
        const int64_t nk = min64(BK, c->T - k0);
        pack_columns(w->kt, BK, &c->k, b, h, k0, nk, D, c->scale);
        pack_rows(w->rows, Dp, &c->v, b, h, k0, nk, D);
        c->kern->gemm(nq, BK, D, q, c->q.stride[2], 1, w->kt, BK, w->s, BK, 0);
        softmax_tile(c, w, q0, nq, k0, nk);
        c->kern->gemm(nq, Dp, nk, w->s, BK, 1, w->rows, Dp, w->acc, Dp, 1);
    }
    for (int64_t i = 0; i < nq; i++) {
        lse[i] = w->m[i] + logf(w->l[i]);
        const float inv_l = 1.0f / w->l[i];
        for (int64_t d = 0; d < D; d++)
            w->acc[i * Dp + d] *= inv_l;
    }
    unpack_rows(&c->out, b, h, q0, nq, w->acc, Dp, D, 1.0f);
}

static gb_status check_call(attn_flash *f, const char *call, const gb_attn_problem *p,
                            const char *const *names, const gb_tensor *const *views, int n)
{
    char reason[256];
    int ok = flash_eligible(f, p, reason, sizeof reason);
    return attn_check_call(f->host, PLUGIN, call, ok, reason, p, names, views, n);
}

static gb_status flash_forward(void *self, const gb_attn_problem *p, gb_tensor out, gb_tensor q,
                               gb_tensor k, gb_tensor v, void *saved, void *workspace)
{
    attn_flash *f = self;
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    gb_status status = check_call(f, "forward", p, names, views, 4);
    if (status != GB_OK)
        return status;
    flash_call c = call_of(f, p, saved, workspace);
    c.q = q, c.k = k, c.v = v, c.out = out;
    const int64_t n_tiles = (c.T + c.t.BQ - 1) / c.t.BQ, units = p->batch * c.H * n_tiles;
    #pragma omp parallel num_threads(f->threads) if (units > 1)
    {
        tiles w = thread_tiles(&c);
        #pragma omp for schedule(static, 1)
        for (int64_t u = 0; u < units; u++) {
            int64_t bh = u / n_tiles;
            forward_tile(&c, &w, bh / c.H, bh % c.H, u % n_tiles * c.t.BQ);
        }
    }
    return GB_OK;
}

/* ---- backward ------------------------------------------------------------------------ */

/* K^T / sqrt(D) and V^T of key tile k0.., for the products that recompute P and dP. */
static void pack_key_tile(const flash_call *c, tiles *w, int64_t b, int64_t h, int64_t k0,
                          int64_t nk)
{
    pack_columns(w->kt, c->t.BK, &c->k, b, h, k0, nk, c->t.D, c->scale);
    pack_columns(w->vt, c->t.BK, &c->v, b, h, k0, nk, c->t.D, 1.0f);
}

/* P and dS of query tile q0.. against the packed key tile k0..: w->s = P =
 * exp(Q K^T / sqrt(D) - lse), w->ds = P * (dO V^T - D). q and dout point at row q0 of
 * Q and dO with row strides ldq and ldo. */
static void pair_gradients(const flash_call *c, tiles *w, int64_t bh, int64_t q0, int64_t nq,
                           int64_t k0, int64_t nk, const float *q, int64_t ldq,
                           const float *dout, int64_t ldo)
{
    const int64_t BK = c->t.BK, D = c->t.D;
    const float *lse = c->lse + bh * c->T + q0, *delta = c->delta + bh * c->T + q0;
    c->kern->gemm(nq, BK, D, q, ldq, 1, w->kt, BK, w->s, BK, 0);
    c->kern->gemm(nq, BK, D, dout, ldo, 1, w->vt, BK, w->ds, BK, 0);
    for (int64_t i = 0; i < nq; i++) {
        float *p_row = w->s + i * BK, *ds_row = w->ds + i * BK;
        c->kern->exp_row(p_row, attn_visible_keys(c->causal, q0 + i, k0, nk), BK, lse[i]);
        for (int64_t j = 0; j < BK; j++)
            ds_row[j] = p_row[j] * (ds_row[j] - delta[i]);
    }
}

/* dV += P^T dO and dK += dS^T Q for the pair just computed; P^T and dS^T are read
 * transposed in place. q, dout: the tile's packed (nq, Dp) rows. */
static void add_key_gradients(const flash_call *c, tiles *w, int64_t nq, int64_t nk,
                              const float *q, const float *dout)
{
    const int64_t BK = c->t.BK, Dp = c->t.Dp;
    c->kern->gemm(nk, Dp, nq, w->s, 1, BK, dout, Dp, w->dv, Dp, 1);
    c->kern->gemm(nk, Dp, nq, w->ds, 1, BK, q, Dp, w->dk, Dp, 1);
}

static void write_key_gradients(const flash_call *c, tiles *w, int64_t b, int64_t h,
                                int64_t k0, int64_t nk)
{
    unpack_rows(&c->dk, b, h, k0, nk, w->dk, c->t.Dp, c->t.D, c->scale);
    unpack_rows(&c->dv, b, h, k0, nk, w->dv, c->t.Dp, c->t.D, 1.0f);
}

/* Backward of a whole head in one pass: key tiles in order, each against the query
 * tiles that see it in order, with dQ summed per thread over the key tiles. */
static void backward_head(const flash_call *c, tiles *w, int64_t b, int64_t h)
{
    const int64_t T = c->T, BQ = c->t.BQ, BK = c->t.BK, D = c->t.D, Dp = c->t.Dp;
    pack_rows(w->q, Dp, &c->q, b, h, 0, T, D);
    pack_rows(w->dout, Dp, &c->dout, b, h, 0, T, D);
    memset(w->dq, 0, (size_t)(T * Dp) * sizeof(float));
    for (int64_t k0 = 0; k0 < T; k0 += BK) {
        const int64_t nk = min64(BK, T - k0);
        pack_key_tile(c, w, b, h, k0, nk);
        pack_rows(w->rows, Dp, &c->k, b, h, k0, nk, D);
        memset(w->dk, 0, (size_t)(nk * Dp) * sizeof(float));
        memset(w->dv, 0, (size_t)(nk * Dp) * sizeof(float));
        for (int64_t q0 = query_start(c, k0); q0 < T; q0 += BQ) {
            const int64_t nq = min64(BQ, T - q0);
            float *q = w->q + q0 * Dp, *dout = w->dout + q0 * Dp;
            pair_gradients(c, w, b * c->H + h, q0, nq, k0, nk, q, Dp, dout, Dp);
            add_key_gradients(c, w, nq, nk, q, dout);
            c->kern->gemm(nq, Dp, nk, w->ds, BK, 1, w->rows, Dp, w->dq + q0 * Dp, Dp, 1);
        }
        write_key_gradients(c, w, b, h, k0, nk);
    }
    unpack_rows(&c->dq, b, h, 0, T, w->dq, Dp, D, c->scale);
}

/* dK and dV of key tile k0.., summed over the query tiles that see it, in order. */
static void key_tile_gradients(const flash_call *c, tiles *w, int64_t b, int64_t h, int64_t k0)
{
    const int64_t BQ = c->t.BQ, D = c->t.D, Dp = c->t.Dp;
    const int64_t nk = min64(c->t.BK, c->T - k0);
    pack_key_tile(c, w, b, h, k0, nk);
    memset(w->dk, 0, (size_t)(nk * Dp) * sizeof(float));
    memset(w->dv, 0, (size_t)(nk * Dp) * sizeof(float));
    for (int64_t q0 = query_start(c, k0); q0 < c->T; q0 += BQ) {
        const int64_t nq = min64(BQ, c->T - q0);
        pack_rows(w->q, Dp, &c->q, b, h, q0, nq, D);
        pack_rows(w->dout, Dp, &c->dout, b, h, q0, nq, D);
        pair_gradients(c, w, b * c->H + h, q0, nq, k0, nk, w->q, Dp, w->dout, Dp);
        add_key_gradients(c, w, nq, nk, w->q, w->dout);
    }
    write_key_gradients(c, w, b, h, k0, nk);
}

/* dQ of query tile q0.., summed over its key tiles in order; Q and dO read in place. */
static void query_tile_gradients(const flash_call *c, tiles *w, int64_t b, int64_t h,
                                 int64_t q0)
{
    const int64_t BK = c->t.BK, D = c->t.D, Dp = c->t.Dp;
    const int64_t nq = min64(c->t.BQ, c->T - q0);
    const float *q = attn_row(&c->q, b, h, q0), *dout = attn_row(&c->dout, b, h, q0);
    memset(w->acc, 0, (size_t)(nq * Dp) * sizeof(float));
    for (int64_t k0 = 0; k0 < key_end(c, q0, nq); k0 += BK) {
        const int64_t nk = min64(BK, c->T - k0);
        pack_key_tile(c, w, b, h, k0, nk);
        pack_rows(w->rows, Dp, &c->k, b, h, k0, nk, D);
        pair_gradients(c, w, b * c->H + h, q0, nq, k0, nk, q, c->q.stride[2], dout,
                       c->dout.stride[2]);
        c->kern->gemm(nq, Dp, nk, w->ds, BK, 1, w->rows, Dp, w->acc, Dp, 1);
    }
    unpack_rows(&c->dq, b, h, q0, nq, w->acc, Dp, D, c->scale);
}

static gb_status flash_backward(void *self, const gb_attn_problem *p, gb_tensor dq,
                                gb_tensor dk, gb_tensor dv, gb_tensor dout, gb_tensor q,
                                gb_tensor k, gb_tensor v, gb_tensor out, const void *saved,
                                void *workspace)
{
    attn_flash *f = self;
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v, &out};
    gb_status status = check_call(f, "backward", p, names, views, 8);
    if (status != GB_OK)
        return status;
    // forward's log-sum-exps are only read; flash_call holds them for both directions
    flash_call c = call_of(f, p, (float *)saved, workspace);
    c.q = q, c.k = k, c.v = v, c.out = out, c.dout = dout, c.dq = dq, c.dk = dk, c.dv = dv;
    const int64_t heads = p->batch * c.H, T = c.T, D = c.t.D;
    const int64_t q_tiles = (T + c.t.BQ - 1) / c.t.BQ, k_tiles = (T + c.t.BK - 1) / c.t.BK;
    #pragma omp parallel num_threads(f->threads) if (heads * q_tiles > 1)
    {
        tiles w = thread_tiles(&c);
        #pragma omp for schedule(static)
        for (int64_t bh = 0; bh < heads; bh++)
            for (int64_t t = 0; t < T; t++)
                c.delta[bh * T + t] = row_dot(attn_row(&dout, bh / c.H, bh % c.H, t),
                                              attn_row(&out, bh / c.H, bh % c.H, t), D);
        if (c.t.by_heads) {
            #pragma omp for schedule(static, 1)
            for (int64_t bh = 0; bh < heads; bh++)
                backward_head(&c, &w, bh / c.H, bh % c.H);
        } else {
            #pragma omp for schedule(static, 1)
            for (int64_t u = 0; u < heads * k_tiles; u++) {
                int64_t bh = u / k_tiles;
                key_tile_gradients(&c, &w, bh / c.H, bh % c.H, u % k_tiles * c.t.BK);
            }
            #pragma omp for schedule(static, 1)
            for (int64_t u = 0; u < heads * q_tiles; u++) {
                int64_t bh = u / q_tiles;
                query_tile_gradients(&c, &w, bh / c.H, bh % c.H, u % q_tiles * c.t.BQ);
            }
        }
    }
    return GB_OK;
}

static const gb_attn_ops flash_ops = {
    .struct_size = sizeof(gb_attn_ops),
    .create = flash_create,
    .destroy = flash_destroy,
    .eligible = flash_eligible,
    .memory = flash_memory,
    .forward = flash_forward,
    .backward = flash_backward,
};

GB_PLUGIN_DEFINE(GB_KIND_ATTN, "flash", "1.0.0",
                 "FlashAttention-2 tiles with online softmax; saves per-row log-sum-exp; "
                 "AVX-512 or portable kernels, f32",
                 GB_DEVICE_CPU, GB_OPTIONS(flash_options), flash_ops)
