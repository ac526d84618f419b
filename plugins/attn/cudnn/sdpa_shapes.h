/* attn/cudnn's decisions that need no GPU: which problems cuDNN's fused attention takes
 * (eligibility), the dims and strides of every tensor of its graphs, the key a plan is
 * cached under, where the pieces of the workspace lie, the order in which the engines
 * cuDNN offers are tried, and which cached plan makes room for a new one. Pure functions of the problem,
 * the views and the versions, header-only and plain C11, so that tests/attn checks them
 * on any machine; cuda.c turns them into cuDNN descriptors. Nothing here allocates,
 * prints or calls cuDNN or CUDA.
 *
 * Layout: cuDNN takes 4-d tensors (B, H, rows, cols) with one stride per dim, which is
 * what the contract's views are, so Q, K, V, O and the gradients are handed over with
 * their own strides and nothing is copied. A transposed operand (K^T for Q K^T, V^T for
 * dO V^T) is the same memory with the last two dims and strides swapped.
 */
#ifndef GB_ATTN_CUDNN_SDPA_SHAPES_H
#define GB_ATTN_CUDNN_SDPA_SHAPES_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/toolkit/attn_checks.h"
#include "gearbox/attn.h"

#define SDPA_PLUGIN "attn/cudnn"
/* cuDNN's tensor cores read 16-byte vectors: pointers and strides must keep to them. */
#define SDPA_ALIGN_BYTES 16
/* Where the workspace's second piece starts: a multiple of this after the plan's part. */
#define SDPA_WORKSPACE_ALIGN 256

/* What eligibility depends on besides the problem: the cuDNN library loaded at run time
 * (cudnnGetVersion(), e.g. 91900 for 9.19.0) and the GPU's compute capability. */
typedef struct sdpa_env {
    int64_t cudnn_version;
    int32_t cc_major, cc_minor;
} sdpa_env;

/* The dims and strides (elements) of one 4-d tensor of a graph. */
typedef struct sdpa_layout {
    int64_t dims[4];
    int64_t strides[4];
} sdpa_layout;

/* Largest head_dim cuDNN's fused attention runs forward and backward on this GPU: 256 on
 * Hopper (compute capability 9.x), 128 elsewhere. Source: the support matrix of the cuDNN
 * documentation's "Attention" page (backend 9.18.1: backward "d <= 128" on Ampere/Ada,
 * "d <= 256" on Hopper) and cudnn-frontend's backward support check (sdpa backward node:
 * d <= 256 on prop_major 9, d <= 128 otherwise). Blackwell is held to 128 as the frontend
 * holds it for backward unless d_qk = 192. */
static inline int64_t sdpa_max_head_dim(const sdpa_env *env)
{
    return env->cc_major == 9 ? 256 : 128;
}

/* The rows that cuDNN < 9.15.1 computes wrongly in backward unless a padding mask is added:
 * T not a multiple of 128 (cudnn-frontend 1.15 adds that mask itself for backend <= 9.15.0;
 * this plugin does not build it and refuses those shapes instead). */
static inline int sdpa_backward_needs_padding(const sdpa_env *env, int64_t T)
{
    return env->cudnn_version <= 91500 && T % 128 != 0;
}

static inline void sdpa_version_text(int64_t v, char *out, size_t cap)
{
    snprintf(out, cap, "%lld.%lld.%lld", (long long)(v / 10000), (long long)(v / 100 % 100),
             (long long)(v % 100));
}

/* 1 when cuDNN's fused attention can run `p` forward and backward in `env`; else 0 with a
 * reason naming the rule and what to use instead. Checked in the order a user fixes them:
 * the problem itself, the dtype, the library, the GPU, the shape. */
static inline int sdpa_eligible(const sdpa_env *env, const gb_attn_problem *p, char *reason,
                                size_t cap)
{
    char have[32];
    if (!gb_attn_problem_ok_on(SDPA_PLUGIN, "cuda", p, reason, cap))
        return 0;
    sdpa_version_text(env->cudnn_version, have, sizeof have);
    if (p->dtype == GB_F32)
        snprintf(reason, cap, "cuDNN fused attention is 16-bit; use attn/flash or attn/math for "
                 "f32 (or [precision] plugin = bf16 or fp16)");
    else if (env->cudnn_version < 90000)
        snprintf(reason, cap, "%s needs cuDNN 9.0 or newer at run time and found %s; install "
                 "cuDNN 9 (the nvidia-cudnn-cu13 wheel) or use attn/flash", SDPA_PLUGIN, have);
    else if (env->cudnn_version == 91000 || env->cudnn_version == 91001)
        snprintf(reason, cap, "cuDNN %s has known bugs in 16-bit fused attention (the cuDNN "
                 "frontend refuses 9.10.0 and 9.10.1); upgrade to 9.10.2 or newer, or use "
                 "attn/flash", have);
    else if (env->cc_major < 8)
        snprintf(reason, cap, "cuDNN fused attention needs compute capability 8.0 (Ampere) or "
                 "newer; this GPU is %d.%d: use attn/mem_efficient", (int)env->cc_major,
                 (int)env->cc_minor);
    else if (p->head_dim % 8 != 0)
        snprintf(reason, cap, "head_dim %lld is not a multiple of 8, which cuDNN fused attention "
                 "needs; use attn/flash or attn/mem_efficient", (long long)p->head_dim);
    else if (p->head_dim > sdpa_max_head_dim(env))
        snprintf(reason, cap, "head_dim %lld > %lld: cuDNN fused attention's backward takes "
                 "head_dim <= %lld on compute capability %d.%d (256 on Hopper only); use "
                 "attn/mem_efficient", (long long)p->head_dim, (long long)sdpa_max_head_dim(env),
                 (long long)sdpa_max_head_dim(env), (int)env->cc_major, (int)env->cc_minor);
    else if (p->seq_len == 1)
        snprintf(reason, cap, "T = 1: cuDNN's attention backward does not take one query "
                 "against one key; use attn/math");
    else if (sdpa_backward_needs_padding(env, p->seq_len))
        snprintf(reason, cap, "T = %lld is not a multiple of 128, which cuDNN %s (<= 9.15.0) "
                 "needs in backward without a padding mask; upgrade cuDNN to 9.15.1 or newer, "
                 "or use attn/flash", (long long)p->seq_len, have);
    else
        return 1;
    return 0;
}

/* ---- layouts ------------------------------------------------------------------------ */

/* A (B, H, T, D) view as cuDNN's (B, H, T, D) tensor: the view's own strides. */
static inline sdpa_layout sdpa_view_layout(const gb_tensor *t)
{
    sdpa_layout l;
    for (int i = 0; i < 4; i++) {
        l.dims[i] = t->shape[i];
        l.strides[i] = t->stride[i];
    }
    return l;
}

/* The same memory with the last two dims swapped: (B, H, T, D) read as (B, H, D, T), e.g.
 * K^T for Q K^T, or (B, H, T_q, T_k) scores read as (B, H, T_k, T_q). */
static inline sdpa_layout sdpa_transposed(sdpa_layout l)
{
    int64_t d = l.dims[2], s = l.strides[2];
    l.dims[2] = l.dims[3];
    l.strides[2] = l.strides[3];
    l.dims[3] = d;
    l.strides[3] = s;
    return l;
}

/* A packed (B, H, rows, cols) tensor, innermost dim last. */
static inline sdpa_layout sdpa_packed(int64_t B, int64_t H, int64_t rows, int64_t cols)
{
    sdpa_layout l = {{B, H, rows, cols}, {H * rows * cols, rows * cols, cols, 1}};
    return l;
}

/* The (B, H, T, T) scores, probabilities and their gradients (virtual: never in memory). */
static inline sdpa_layout sdpa_scores(const gb_attn_problem *p)
{
    return sdpa_packed(p->batch, p->heads, p->seq_len, p->seq_len);
}

/* One f32 per row, (B, H, T, 1): the log-sum-exp forward saves, and backward's
 * rowsum(dO * O). */
static inline sdpa_layout sdpa_row_stats(const gb_attn_problem *p)
{
    return sdpa_packed(p->batch, p->heads, p->seq_len, 1);
}

/* A scalar passed by value (the scale, the mask's fill value, one). */
static inline sdpa_layout sdpa_scalar(void)
{
    sdpa_layout l = {{1, 1, 1, 1}, {1, 1, 1, 1}};
    return l;
}

/* What the causal mask writes above the diagonal before the softmax: -inf from cuDNN
 * 9.10 on, the lowest finite float before (older engines expected it, as the cuDNN
 * frontend's get_negative_inf_value() says). */
static inline float sdpa_mask_fill(int64_t cudnn_version)
{
    return cudnn_version < 91000 ? -FLT_MAX : -INFINITY;
}

/* The softmax scale, 1/sqrt(head_dim), as the contract defines it. */
static inline float sdpa_scale(const gb_attn_problem *p)
{
    return 1.0f / sqrtf((float)p->head_dim);
}

/* 1 when `t`'s data and strides keep to 16-byte vectors; else 0 with a reason naming the
 * view `name`. */
static inline int sdpa_view_aligned(const gb_tensor *t, const char *name, char *reason,
                                    size_t cap)
{
    const int64_t size = (int64_t)gb_dtype_size(t->dtype);
    const int64_t per_vector = size ? SDPA_ALIGN_BYTES / size : 1;
    if ((uintptr_t)t->data % SDPA_ALIGN_BYTES != 0) {
        snprintf(reason, cap, "%s is not %d-byte aligned (address %p), which cuDNN fused "
                 "attention needs", name, SDPA_ALIGN_BYTES, t->data);
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (t->shape[i] > 1 && t->stride[i] % per_vector != 0) {
            snprintf(reason, cap, "%s has stride[%d] = %lld, not a multiple of %lld elements "
                     "(%d bytes), which cuDNN fused attention needs", name, i,
                     (long long)t->stride[i], (long long)per_vector, SDPA_ALIGN_BYTES);
            return 0;
        }
    return 1;
}

/* 1 when buffer `ptr` (saved, the workspace) is 16-byte aligned; else 0 with a reason. */
static inline int sdpa_buffer_aligned(const void *ptr, const char *name, char *reason,
                                      size_t cap)
{
    if ((uintptr_t)ptr % SDPA_ALIGN_BYTES == 0)
        return 1;
    snprintf(reason, cap, "%s is not %d-byte aligned (address %p), which cuDNN fused "
             "attention needs", name, SDPA_ALIGN_BYTES, ptr);
    return 0;
}

/* ---- the layouts memory() plans for, before any view exists ------------------------- */

/* The strides of the views the core passes (engine/model_forward.c): q, k, v and their gradients
 * are slices of the packed (B, T, 3, H, D) projection, out and dout (B, T, H, D) buffers. */
static inline void sdpa_core_strides(const gb_attn_problem *p, int64_t qkv[4], int64_t out[4])
{
    const int64_t C = p->heads * p->head_dim, T = p->seq_len, D = p->head_dim;
    const int64_t q[4] = {T * 3 * C, D, 3 * C, 1}, o[4] = {T * C, D, C, 1};
    memcpy(qkv, q, sizeof q);
    memcpy(out, o, sizeof o);
}

/* The strides of contiguous (B, H, T, D) views, for every tensor. */
static inline void sdpa_contiguous_strides(const gb_attn_problem *p, int64_t s[4])
{
    const sdpa_layout l = sdpa_packed(p->batch, p->heads, p->seq_len, p->head_dim);
    memcpy(s, l.strides, sizeof l.strides);
}

/* ---- plan cache keys ---------------------------------------------------------------- */

enum { SDPA_FORWARD = 0, SDPA_BACKWARD = 1 };
/* Views of a call, in this order: q, k, v, out, and for backward dout, dq, dk, dv. */
enum { SDPA_Q, SDPA_K, SDPA_V, SDPA_O, SDPA_DO, SDPA_DQ, SDPA_DK, SDPA_DV, SDPA_VIEWS };

/* What a plan is built for: the direction, the problem and every view's strides. */
typedef struct sdpa_key {
    int32_t direction;
    int32_t dtype, causal;
    int64_t batch, heads, seq_len, head_dim;
    int64_t strides[SDPA_VIEWS][4];
} sdpa_key;

static inline int sdpa_views_of(int direction)
{
    return direction == SDPA_FORWARD ? SDPA_O + 1 : SDPA_VIEWS;
}

/* The key of a call; `strides` holds sdpa_views_of(direction) rows. Unused rows are zero,
 * so keys compare with memcmp. */
static inline sdpa_key sdpa_make_key(int direction, const gb_attn_problem *p,
                                     const int64_t (*strides)[4])
{
    sdpa_key k;
    memset(&k, 0, sizeof k);
    k.direction = direction;
    k.dtype = (int32_t)p->dtype;
    k.causal = p->causal;
    k.batch = p->batch;
    k.heads = p->heads;
    k.seq_len = p->seq_len;
    k.head_dim = p->head_dim;
    memcpy(k.strides, strides, (size_t)sdpa_views_of(direction) * sizeof strides[0]);
    return k;
}

/* The key memory() plans under for the core's layout (`core` 1) or contiguous views. */
static inline sdpa_key sdpa_planned_key(int direction, const gb_attn_problem *p, int core)
{
    int64_t strides[SDPA_VIEWS][4], qkv[4], out[4];
    if (core)
        sdpa_core_strides(p, qkv, out);
    else {
        sdpa_contiguous_strides(p, qkv);
        memcpy(out, qkv, sizeof out);
    }
    for (int i = 0; i < SDPA_VIEWS; i++)
        memcpy(strides[i], i == SDPA_O || i == SDPA_DO ? out : qkv, sizeof qkv);
    return sdpa_make_key(direction, p, strides);
}

/* ---- workspace ---------------------------------------------------------------------- */

static inline int64_t sdpa_round_up(int64_t n, int64_t to)
{
    return (n + to - 1) / to * to;
}

/* Where backward's rowsum(dO * O) (B*H*T f32, which cuDNN wants in memory) starts in the
 * workspace: after the plan's own scratch. */
static inline int64_t sdpa_rowsum_offset(int64_t plan_workspace)
{
    return sdpa_round_up(plan_workspace, SDPA_WORKSPACE_ALIGN);
}

/* Workspace bytes of one call: the forward plan's scratch, or backward's scratch and its
 * rowsum, whichever is larger (the workspace is one buffer for both). */
static inline int64_t sdpa_workspace_bytes(const gb_attn_problem *p, int64_t forward_plan,
                                           int64_t backward_plan)
{
    const int64_t rows = p->batch * p->heads * p->seq_len;
    const int64_t backward = sdpa_rowsum_offset(backward_plan) + rows * (int64_t)sizeof(float);
    return forward_plan > backward ? forward_plan : backward;
}

/* ---- engine choice ------------------------------------------------------------------ */

/* What an engine configuration's numerical notes say about run-to-run bits. */
enum { SDPA_NONDETERMINISTIC = 0, SDPA_DETERMINISTIC = 1, SDPA_NOTES_UNKNOWN = -1 };

/* The order in which to try the `n` configurations cuDNN's heuristics offered, given what
 * each one's notes say (determinism[i], one of the values above): the deterministic ones
 * first, in the heuristics' order, then those whose notes cuDNN could not report, never
 * a nondeterministic one. A cuDNN that reports no notes then still yields a plan instead
 * of none (the plugin logs which engine it took and why). Writes the configurations'
 * indices into order (n entries at most) and returns how many there are. */
static inline int sdpa_engine_order(const int *determinism, int n, int *order)
{
    int count = 0;
    for (int i = 0; i < n; i++)
        if (determinism[i] == SDPA_DETERMINISTIC)
            order[count++] = i;
    for (int i = 0; i < n; i++)
        if (determinism[i] == SDPA_NOTES_UNKNOWN)
            order[count++] = i;
    return count;
}

/* ---- the plan cache ----------------------------------------------------------------- */

/* The slot of an n-slot plan cache that a new plan goes into: a free one (last_use 0),
 * else the one whose last use (a tick that grows with every lookup) lies furthest back.
 * The plans of the latest n - 1 lookups are therefore never evicted: a caller that has
 * just fetched a plan keeps it while it builds the next one. */
static inline int sdpa_victim_slot(const uint64_t *last_use, int n)
{
    int victim = 0;
    for (int i = 0; i < n; i++) {
        if (last_use[i] == 0)
            return i;
        if (last_use[i] < last_use[victim])
            victim = i;
    }
    return victim;
}

#endif /* GB_ATTN_CUDNN_SDPA_SHAPES_H */
