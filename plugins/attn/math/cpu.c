/* attn/math on the CPU: attention as written in the textbook, materialising the (T, T)
 * probabilities of every (batch, head).
 *
 * Forward keeps the probabilities for backward (B*H*T*T floats per layer), so backward
 * needs no recomputation; the price is memory quadratic in T, which the tiled plugins
 * avoid. Each (batch, head) is one unit of work for one thread, so every sum has one
 * owner that adds its terms in a fixed order and results are bit-identical whatever the
 * thread count.
 *
 * The products run on kernels/cpu's shared kernels (cpu_kernels.h: AVX-512, AVX2 or
 * portable, all with the same bits) over packed copies of one head: K^T / sqrt(head_dim)
 * or V^T, and rows of V, K, Q and dO padded to a multiple of 16 floats (read in place when
 * head_dim is a multiple of 16 already); Q and dO are read in place where a product only
 * broadcasts their elements, and P and dS are read transposed in place for dV = P^T dO
 * and dK = dS^T Q. Rows go in strips of the kernel's
 * block height; with a causal mask a strip computes only the keys its last row sees,
 * rounded up to 16, so the products skip (nearly) all of the upper triangle. Exact zeros
 * (masked probabilities, padding) add nothing to an fma chain that starts from +0, so
 * those extra terms never change a bit.
 *
 * Workspace: the packed tiles of every thread (about (T + 4 head_dim) x T floats each),
 * which memory() declares, so the plugin allocates nothing. Views may have any strides
 * as long as head_dim is contiguous (stride[3] == 1). bf16 and f16 problems compute in
 * f32 too: the views read are widened into f32 copies and the outputs rounded from f32
 * copies (attn_views.h), which the workspace also holds (4 copies of a (B, H, T, D)
 * view in forward, 7 in backward); the saved probabilities are f32 whatever the dtype.
 * No options.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn_cpu.h"
#include "cpu_kernels.h"
#include "gearbox/attn.h"
#include "rowreduce.h"

#define PLUGIN "attn/math"

typedef struct attn_math {
    attn_cpu cpu;
    const cpu_kernels *kernels;
} attn_math;

/* f32 copies of views a 16-bit call needs: q, k, v, out forward; q, k, v, dout, dq, dk,
 * dv backward. */
#define WIDE_VIEWS 7

/* Below this many score entries a call runs on the calling thread. */
#define ATTN_PARALLEL_MIN 4096

/* ---- tiles --------------------------------------------------------------------------- */

/* One thread's packed copies of a head. Each buffer starts on a 64-byte boundary. */
typedef struct head_tiles {
    float *kvt;        // (D, Tp): K^T / sqrt(D) in forward, V^T in backward
    float *rows;       // (T, Dp): V in forward, K in backward (see operand_rows)
    float *q, *dout;   // (T, Dp): backward only
    float *s;          // (T, Tp): a strip's scores (forward); the head's dP, then dS (backward)
    float *acc;        // (gemm_rows, Dp): one strip of out, dQ, dK or dV
} head_tiles;

/* Lays one thread's tiles out from `base` (NULL: only count); returns the floats they
 * take. Tp and Dp are T and head_dim rounded up to 16. */
static int64_t lay_out_tiles(const attn_math *attn, const gb_attn_problem *p, float *base,
                             head_tiles *w)
{
    const int64_t T = p->seq_len, D = p->head_dim;
    const int64_t Tp = attn_round_up(T, CPU_VEC), Dp = attn_round_up(D, CPU_VEC);
    const attn_tile layout[] = {
        {D * Tp, &w->kvt}, {T * Dp, &w->rows}, {T * Dp, &w->q}, {T * Dp, &w->dout},
        {T * Tp, &w->s}, {attn->kernels->gemm_rows * Dp, &w->acc},
    };
    return attn_lay_out(layout, sizeof layout / sizeof layout[0], base);
}

static gb_status math_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                             size_t *workspace_bytes)
{
    attn_math *attn = self;
    size_t T = (size_t)p->seq_len;
    head_tiles unused;
    *saved_bytes = (size_t)p->batch * (size_t)p->heads * T * T * sizeof(float);
    *workspace_bytes = (size_t)(attn->cpu.threads * lay_out_tiles(attn, p, NULL, &unused) +
                                attn_wide_floats(p, WIDE_VIEWS)) * sizeof(float);
    return GB_OK;
}

/* The calling thread's tiles, laid out for `p` in the workspace. */
static head_tiles thread_tiles(const attn_math *attn, const gb_attn_problem *p,
                               float *workspace)
{
    head_tiles w;
    const int64_t floats = lay_out_tiles(attn, p, NULL, &w);
    lay_out_tiles(attn, p, workspace + (int64_t)omp_get_thread_num() * floats, &w);
    return w;
}

/* Where the f32 copies of a 16-bit call start: after every thread's tiles. */
static float *wide_copies(const attn_math *attn, const gb_attn_problem *p, float *workspace)
{
    head_tiles unused;
    return workspace + attn->cpu.threads * lay_out_tiles(attn, p, NULL, &unused);
}

/* ---- one call ------------------------------------------------------------------------ */

/* What every head of one forward or backward call needs. */
typedef struct math_call {
    const cpu_kernels *kern;
    int64_t H, T, D, Tp, Dp, R;   /* R: rows per strip, the kernel's block height */
    int causal;
    float scale;
    attn_call views;              /* f32 (attn_cpu_f32) */
    float *probs;                 // (B, H, T, T)
} math_call;

static math_call call_of(const attn_math *attn, const gb_attn_problem *p, float *probs,
                         attn_call views)
{
    return (math_call){
        .kern = attn->kernels,
        .H = p->heads,
        .T = p->seq_len,
        .D = p->head_dim,
        .Tp = attn_round_up(p->seq_len, CPU_VEC),
        .Dp = attn_round_up(p->head_dim, CPU_VEC),
        .R = attn->kernels->gemm_rows,
        .causal = p->causal,
        .scale = 1.0f / sqrtf((float)p->head_dim),
        .views = views,
        .probs = probs,
    };
}

/* Keys the rows i0 .. i0+nr-1 see between them: with a causal mask, up to the last row. */
static int64_t strip_keys(const math_call *c, int64_t i0, int64_t nr)
{
    return c->causal ? i0 + nr : c->T;
}

/* Rows 0 .. T-1 of head (b, h) of `t` as the right-hand side of a product: the view
 * itself when head_dim is a multiple of 16, else a copy padded with zeros in `tile`.
 * *ld receives the row stride. */
// tile (T, Dp)
static const float *operand_rows(const math_call *c, float *tile, const gb_tensor *t,
                                 int64_t b, int64_t h, int64_t *ld)
{
    if (c->D == c->Dp) {
        *ld = t->stride[2];
        return attn_row(t, b, h, 0);
    }
    attn_pack_rows(tile, c->Dp, t, b, h, 0, c->T, c->D);
    *ld = c->Dp;
    return tile;
}

/* Probabilities of row t from its scores: softmax over the n keys it sees, zero up to T.
 * `scores` (width, a multiple of 16 and >= n) is overwritten. */
// prow (T); scores (width)
static void probability_row(const math_call *c, float *prow, float *scores, int64_t n,
                            int64_t width)
{
    const float max = c->kern->max_row(scores, n);
    const float inv_sum = 1.0f / c->kern->exp_row(scores, n, width, max);
    for (int64_t j = 0; j < n; j++)
        prow[j] = scores[j] * inv_sum;
    memset(prow + n, 0, (size_t)(c->T - n) * sizeof(float));
}

/* S = Q K^T / sqrt(D), P = softmax(S), out = P V, a strip of query rows at a time. */
static void forward_head(const math_call *c, head_tiles *w, int64_t b, int64_t h)
{
    const int64_t T = c->T, D = c->D, Tp = c->Tp, Dp = c->Dp;
    const float *q = attn_row(&c->views.q, b, h, 0);
    const int64_t ldq = c->views.q.stride[2];
    float *probs = c->probs + (b * c->H + h) * T * T;
    int64_t ldv;
    attn_pack_columns(w->kvt, Tp, &c->views.k, b, h, 0, T, D, c->scale);
    const float *v = operand_rows(c, w->rows, &c->views.v, b, h, &ldv);
    for (int64_t i0 = 0; i0 < T; i0 += c->R) {
        const int64_t nr = attn_min(c->R, T - i0), keys = strip_keys(c, i0, nr);
        const int64_t width = attn_round_up(keys, CPU_VEC);
        c->kern->gemm(nr, width, D, q + i0 * ldq, ldq, 1, w->kvt, Tp, w->s, Tp, 0);
        for (int64_t i = 0; i < nr; i++)
            probability_row(c, probs + (i0 + i) * T, w->s + i * Tp,
                            attn_visible_keys(c->causal, i0 + i, 0, T), width);
        c->kern->gemm(nr, Dp, keys, probs + i0 * T, T, 1, v, ldv, w->acc, Dp, 0);
        attn_unpack_rows(&c->views.out, b, h, i0, nr, w->acc, Dp, D, 1.0f);
    }
}

/* dS = P * (dP - sum over keys of P dP) over the n keys row t sees, zero from there up
 * to `end`. `row` holds dP and becomes dS. */
// row (end); prow (T)
static void score_gradient_row(float *row, const float *prow, int64_t n, int64_t end)
{
    const float p_dp = row_dot(prow, row, n);
    for (int64_t j = 0; j < n; j++)
        row[j] = prow[j] * (row[j] - p_dp);
    for (int64_t j = n; j < end; j++)
        row[j] = 0.0f;
}

/* dP = dO V^T, dS, dQ = dS K / sqrt(D) a strip of query rows at a time; then
 * dK = dS^T Q / sqrt(D) and dV = P^T dO a strip of key rows at a time, each summing over
 * the queries that see it in order. */
static void backward_head(const math_call *c, head_tiles *w, int64_t b, int64_t h)
{
    const int64_t T = c->T, D = c->D, Tp = c->Tp, Dp = c->Dp;
    const float *dout = attn_row(&c->views.dout, b, h, 0);
    const int64_t ldo = c->views.dout.stride[2];
    const float *probs = c->probs + (b * c->H + h) * T * T;
    int64_t ldk, ldq, ldd;
    attn_pack_columns(w->kvt, Tp, &c->views.v, b, h, 0, T, D, 1.0f);
    const float *k = operand_rows(c, w->rows, &c->views.k, b, h, &ldk);
    const float *q = operand_rows(c, w->q, &c->views.q, b, h, &ldq);
    const float *dout_rows = operand_rows(c, w->dout, &c->views.dout, b, h, &ldd);
    for (int64_t i0 = 0; i0 < T; i0 += c->R) {
        const int64_t nr = attn_min(c->R, T - i0), keys = strip_keys(c, i0, nr);
        const int64_t width = attn_round_up(keys, CPU_VEC);
        float *ds = w->s + i0 * Tp;
        c->kern->gemm(nr, width, D, dout + i0 * ldo, ldo, 1, w->kvt, Tp, ds, Tp, 0);
        for (int64_t i = 0; i < nr; i++)
            score_gradient_row(ds + i * Tp, probs + (i0 + i) * T,
                               attn_visible_keys(c->causal, i0 + i, 0, T), attn_min(width, T));
        c->kern->gemm(nr, Dp, keys, ds, Tp, 1, k, ldk, w->acc, Dp, 0);
        attn_unpack_rows(&c->views.dq, b, h, i0, nr, w->acc, Dp, D, c->scale);
    }
    for (int64_t j0 = 0; j0 < T; j0 += c->R) {
        // queries before t0 do not see these keys: their dS and P are zero here
        const int64_t nr = attn_min(c->R, T - j0), t0 = c->causal ? j0 : 0;
        c->kern->gemm(nr, Dp, T - t0, w->s + t0 * Tp + j0, 1, Tp, q + t0 * ldq, ldq, w->acc,
                      Dp, 0);
        attn_unpack_rows(&c->views.dk, b, h, j0, nr, w->acc, Dp, D, c->scale);
        c->kern->gemm(nr, Dp, T - t0, probs + t0 * T + j0, 1, T, dout_rows + t0 * ldd, ldd,
                      w->acc, Dp, 0);
        attn_unpack_rows(&c->views.dv, b, h, j0, nr, w->acc, Dp, D, 1.0f);
    }
}

/* One call, forward or backward, run in stream order. Backward never reads out: the
 * probabilities forward saved carry everything out would tell. */
static gb_status math_compute(const attn_call *call)
{
    attn_math *attn = call->self;
    const gb_attn_problem *p = &call->p;
    float *workspace = call->workspace;
    float *wide = wide_copies(attn, p, workspace);
    // forward writes the probabilities, backward only reads them
    math_call c = call_of(attn, p, call->saved, attn_cpu_f32(call, &wide));
    const int64_t heads = p->batch * c.H;
    #pragma omp parallel num_threads(gb_omp_team(attn->cpu.threads)) \
        if (heads * c.T * c.T >= ATTN_PARALLEL_MIN)
    {
        head_tiles w = thread_tiles(attn, p, workspace);
        #pragma omp for schedule(dynamic, 1)
        for (int64_t bh = 0; bh < heads; bh++)
            (call->backward ? backward_head : forward_head)(&c, &w, bh / c.H, bh % c.H);
    }
    attn_cpu_store(call, &c.views);
    return GB_OK;
}

static const attn_cpu_kind math_kind = {PLUGIN, math_compute, math_compute, 0};

static gb_status math_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    (void)options;
    const attn_math init = {.kernels = cpu_kernels_best()};
    host->log(host, GB_LOG_DEBUG, "%s kernels", init.kernels->name);
    return attn_cpu_create(host, device, &math_kind, &init, sizeof init, self);
}

GB_ATTN_PLUGIN("math", "1.0.0",
               "materialises the T x T probabilities; any T and head_dim; f32, bf16, f16",
               ATTN_CPU_DEVICES_DTYPES_CAPS, GB_NO_OPTIONS, .create = math_create,
               .memory = math_memory, ATTN_CPU_ENTRIES)
