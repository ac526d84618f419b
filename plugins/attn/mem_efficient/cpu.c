/* attn/mem_efficient on the CPU: attention one block of queries at a time (Rabe and
 * Staats, "Self-attention does not need O(n^2) memory"; xformers' memory-efficient
 * kernel), so the (T, T) probabilities never exist for all heads at once.
 *
 * Forward computes a (block_q, T) slab of scores per thread, takes its softmax and
 * multiplies by V; it keeps only the log-sum-exp of each row (B*H*T floats per layer).
 * Backward recomputes each slab of probabilities from those log-sum-exps, block by block,
 * with D_t = dO_t . O_t standing in for rowsum(P * dP). Memory is linear in T: a slab or
 * two per thread. Speed is not the point here (attn/flash tiles keys too and vectorises
 * its inner products); the loops are plain rows, like attn/math's.
 *
 * Forward splits work over (batch, head, query block); backward over (batch, head), so
 * that each row of dK and dV sums over query blocks in a fixed order on one thread and
 * results are bit-identical whatever the thread count. head_dim contiguous. bf16 and f16
 * problems compute in f32 too: the views read are widened into f32 copies in the
 * workspace and the outputs rounded from f32 copies there (attn_views.h; 4 copies of a
 * (B, H, T, D) view in forward, 8 in backward); the saved log-sum-exps are f32.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn_cpu.h"
#include "gearbox/attn.h"
#include "pointwise.h"
#include "rowreduce.h"

#define PLUGIN "attn/mem_efficient"

enum { OPT_BLOCK_Q };

static const gb_option mem_efficient_options[] = {
    [OPT_BLOCK_Q] = {"block_q", GB_OPT_INT, "64", 1, 65536, NULL,
                     "queries per block: each thread holds block_q x T scores (x2 in backward)"},
};

/* f32 copies of views a 16-bit call needs: q, k, v, out forward; q, k, v, out, dout, dq,
 * dk, dv backward. */
#define WIDE_VIEWS 8

typedef struct attn_mem_efficient {
    attn_cpu cpu;      /* cpu.threads: one slab each */
    int64_t block_q;
} attn_mem_efficient;

static int64_t block_rows(const attn_mem_efficient *attn, const gb_attn_problem *p)
{
    return attn->block_q < p->seq_len ? attn->block_q : p->seq_len;
}

static gb_status mem_efficient_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                                      size_t *workspace_bytes)
{
    attn_mem_efficient *attn = self;
    size_t T = (size_t)p->seq_len;
    *saved_bytes = (size_t)p->batch * (size_t)p->heads * T * sizeof(float);
    *workspace_bytes = ((size_t)attn->cpu.threads * 2 * (size_t)block_rows(attn, p) * T +
                        (size_t)attn_wide_floats(p, WIDE_VIEWS)) * sizeof(float);
    return GB_OK;
}

// y, x (D)
static inline void row_axpy(float *y, float a, const float *x, int64_t D)
{
    for (int64_t d = 0; d < D; d++)
        y[d] = fmaf(a, x[d], y[d]);
}

/* The first row of a query block starting at q0 that sees key j. */
static inline int64_t first_row_seeing(int causal, int64_t j, int64_t q0)
{
    return causal && j > q0 ? j - q0 : 0;
}

/* One block of queries q0 .. q0+nq-1 of head (b, h): its scores, scaled, into the slab.
 * Key-major so that each key row is read once per block. Row i holds keys 0 .. n_i-1. */
// slab (nq, T)
static void block_scores(float *slab, const gb_tensor *q, const gb_tensor *k, int64_t b,
                         int64_t h, int64_t q0, int64_t nq, const gb_attn_problem *p,
                         float scale)
{
    const int64_t T = p->seq_len, D = p->head_dim;
    const int64_t n_keys = p->causal ? q0 + nq : T;
    for (int64_t j = 0; j < n_keys; j++) {
        const float *k_j = attn_row(k, b, h, j);
        for (int64_t i = first_row_seeing(p->causal, j, q0); i < nq; i++)
            slab[i * T + j] = row_dot(attn_row(q, b, h, q0 + i), k_j, D) * scale;
    }
}

/* Forward for one query block: softmax of each slab row, its log-sum-exp, out = P V. */
// slab (nq, T); lse (T) of this head
static void forward_block(float *slab, float *lse, const gb_tensor *out, const gb_tensor *q,
                          const gb_tensor *k, const gb_tensor *v, int64_t b, int64_t h,
                          int64_t q0, int64_t nq, const gb_attn_problem *p, float scale)
{
    const int64_t T = p->seq_len, D = p->head_dim;
    block_scores(slab, q, k, b, h, q0, nq, p, scale);
    for (int64_t i = 0; i < nq; i++) {
        float *row = slab + i * T;
        int64_t n = attn_visible_keys(p->causal, q0 + i, 0, T);
        float max = row_max(row, n);
        for (int64_t j = 0; j < n; j++)
            row[j] = gb_exp_fast(row[j] - max);
        float sum = row_sum(row, n);
        lse[q0 + i] = max + logf(sum);
        float inv_sum = 1.0f / sum;
        for (int64_t j = 0; j < n; j++)
            row[j] *= inv_sum;
        memset(attn_row(out, b, h, q0 + i), 0, (size_t)D * sizeof(float));
    }
    const int64_t n_keys = p->causal ? q0 + nq : T;
    for (int64_t j = 0; j < n_keys; j++) {
        const float *v_j = attn_row(v, b, h, j);
        for (int64_t i = first_row_seeing(p->causal, j, q0); i < nq; i++)
            row_axpy(attn_row(out, b, h, q0 + i), slab[i * T + j], v_j, D);
    }
}

static gb_status mem_efficient_forward_compute(const attn_call *call)
{
    const attn_mem_efficient *attn = call->self;
    const gb_attn_problem *p = &call->p;
    const int64_t H = p->heads, T = p->seq_len, BQ = block_rows(attn, p);
    const int64_t blocks = (T + BQ - 1) / BQ, units = p->batch * H * blocks;
    const float scale = 1.0f / sqrtf((float)p->head_dim);
    float *lse = call->saved;        // (B, H, T)
    float *slabs = call->workspace;  // (threads, BQ, T) of the (threads, 2, BQ, T) backward takes
    float *wide = slabs + (int64_t)attn->cpu.threads * 2 * BQ * T;
    const attn_call f32 = attn_cpu_f32(call, &wide);
    #pragma omp parallel for schedule(dynamic, 1) num_threads(gb_omp_team(attn->cpu.threads)) if (units > 1)
    for (int64_t u = 0; u < units; u++) {
        int64_t bh = u / blocks, q0 = u % blocks * BQ;
        int64_t nq = T - q0 < BQ ? T - q0 : BQ;
        forward_block(slabs + (int64_t)omp_get_thread_num() * BQ * T, lse + bh * T, &f32.out,
                      &f32.q, &f32.k, &f32.v, bh / H, bh % H, q0, nq, p, scale);
    }
    attn_cpu_store(call, &f32);
    return GB_OK;
}

/* Backward of one head, query block after query block: P from the saved log-sum-exp,
 * dP = dO V^T, dS = P * (dP - D_t), dQ = dS K * scale, dK += dS^T Q * scale, dV += P^T dO. */
// prob, dprob (BQ, T) scratch; lse (T) of this head
static void backward_head(float *prob, float *dprob, const float *lse, const attn_call *g,
                          int64_t b, int64_t h, int64_t BQ, const gb_attn_problem *p,
                          float scale)
{
    const int64_t T = p->seq_len, D = p->head_dim;
    for (int64_t t = 0; t < T; t++) {
        memset(attn_row(&g->dk, b, h, t), 0, (size_t)D * sizeof(float));
        memset(attn_row(&g->dv, b, h, t), 0, (size_t)D * sizeof(float));
    }
    for (int64_t q0 = 0; q0 < T; q0 += BQ) {
        const int64_t nq = T - q0 < BQ ? T - q0 : BQ;
        const int64_t n_keys = p->causal ? q0 + nq : T;
        block_scores(prob, &g->q, &g->k, b, h, q0, nq, p, scale);
        for (int64_t j = 0; j < n_keys; j++) {
            const float *v_j = attn_row(&g->v, b, h, j);
            for (int64_t i = first_row_seeing(p->causal, j, q0); i < nq; i++)
                dprob[i * T + j] = row_dot(attn_row(&g->dout, b, h, q0 + i), v_j, D);
        }
        for (int64_t i = 0; i < nq; i++) {
            const int64_t t = q0 + i, n = attn_visible_keys(p->causal, t, 0, T);
            const float *do_t = attn_row(&g->dout, b, h, t);
            const float d_t = row_dot(do_t, attn_row(&g->out, b, h, t), D);
            float *p_row = prob + i * T, *ds_row = dprob + i * T;
            for (int64_t j = 0; j < n; j++) {
                p_row[j] = gb_exp_fast(p_row[j] - lse[t]);
                ds_row[j] = p_row[j] * (ds_row[j] - d_t);
            }
            float *dq_t = attn_row(&g->dq, b, h, t);
            memset(dq_t, 0, (size_t)D * sizeof(float));
            for (int64_t j = 0; j < n; j++)
                row_axpy(dq_t, ds_row[j], attn_row(&g->k, b, h, j), D);
            for (int64_t d = 0; d < D; d++)
                dq_t[d] *= scale;
        }
        for (int64_t j = 0; j < n_keys; j++) {
            float *dk_j = attn_row(&g->dk, b, h, j), *dv_j = attn_row(&g->dv, b, h, j);
            for (int64_t i = first_row_seeing(p->causal, j, q0); i < nq; i++) {
                row_axpy(dk_j, dprob[i * T + j] * scale, attn_row(&g->q, b, h, q0 + i), D);
                row_axpy(dv_j, prob[i * T + j], attn_row(&g->dout, b, h, q0 + i), D);
            }
        }
    }
}

static gb_status mem_efficient_backward_compute(const attn_call *call)
{
    const attn_mem_efficient *attn = call->self;
    const gb_attn_problem *p = &call->p;
    const int64_t H = p->heads, T = p->seq_len, BQ = block_rows(attn, p);
    const float scale = 1.0f / sqrtf((float)p->head_dim);
    const float *lse = call->saved;  // (B, H, T)
    float *slabs = call->workspace;  // (threads, 2, BQ, T)
    float *wide = slabs + (int64_t)attn->cpu.threads * 2 * BQ * T;
    const attn_call g = attn_cpu_f32(call, &wide);   // the views backward_head reads, writes
    #pragma omp parallel for schedule(dynamic, 1) num_threads(gb_omp_team(attn->cpu.threads)) \
        if (p->batch * H > 1)
    for (int64_t bh = 0; bh < p->batch * H; bh++) {
        float *prob = slabs + (int64_t)omp_get_thread_num() * 2 * BQ * T;
        backward_head(prob, prob + BQ * T, lse + bh * T, &g, bh / H, bh % H, BQ, p, scale);
    }
    attn_cpu_store(call, &g);
    return GB_OK;
}

static const attn_cpu_kind mem_efficient_kind = {PLUGIN, mem_efficient_forward_compute,
                                                 mem_efficient_backward_compute, 1};

static gb_status mem_efficient_create(const gb_host *host, const gb_value *options,
                                      const gb_device_ctx *device, void **self)
{
    const attn_mem_efficient init = {.block_q = options[OPT_BLOCK_Q].i};
    return attn_cpu_create(host, device, &mem_efficient_kind, &init, sizeof init, self);
}

GB_ATTN_PLUGIN("mem_efficient", "1.0.0",
               "one block of queries at a time; saves only per-row log-sum-exp; any T; "
               "f32, bf16, f16",
               ATTN_CPU_DEVICES_DTYPES_CAPS, GB_OPTIONS(mem_efficient_options),
               .create = mem_efficient_create, .memory = mem_efficient_memory,
               ATTN_CPU_ENTRIES)
