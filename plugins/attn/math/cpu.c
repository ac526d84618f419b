/* attn/math on the CPU: attention as written in the textbook, materialising the (T, T)
 * probabilities of every (batch, head).
 *
 * Forward keeps the probabilities for backward (B*H*T*T floats per layer), so backward
 * needs no recomputation; the price is memory quadratic in T, which the tiled plugins
 * avoid. Each (batch, head) is one unit of work for one thread: its rows of dK and dV
 * sum over queries in a fixed order, so results are bit-identical whatever the thread
 * count. Views may have any strides as long as head_dim is contiguous (stride[3] == 1);
 * f32 only. No options.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/attn.h"
#include "pointwise.h"
#include "rowreduce.h"

typedef struct attn_math {
    const gb_host *host;
    int threads;   /* host->num_threads, at least 1: one workspace row each */
} attn_math;

/* Below this many score entries a call runs on the calling thread. */
#define ATTN_PARALLEL_MIN 4096

static gb_status math_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    (void)options;
    if (!device || device->device != GB_DEVICE_CPU) {
        host->set_error(host, "attn/math-cpu runs on the cpu device only; this run's device "
                              "is not the cpu (use the plugin built for it)");
        return GB_ERR_UNSUPPORTED;
    }
    attn_math *attn = host->alloc(host, sizeof *attn);
    if (!attn) {
        host->set_error(host, "cannot allocate the attn/math instance");
        return GB_ERR_NO_MEMORY;
    }
    attn->host = host;
    attn->threads = host->num_threads > 0 ? host->num_threads : 1;
    *self = attn;
    return GB_OK;
}

static void math_destroy(void *self)
{
    attn_math *attn = self;
    if (attn)
        attn->host->free(attn->host, attn);
}

static int math_eligible(void *self, const gb_attn_problem *p, char *reason, size_t reason_cap)
{
    (void)self;
    if (p->struct_size < sizeof(gb_attn_problem))
        snprintf(reason, reason_cap, "problem.struct_size %zu is smaller than ABI 1.0's %zu",
                 p->struct_size, sizeof(gb_attn_problem));
    else if (p->dtype != GB_F32)
        snprintf(reason, reason_cap, "attn/math on cpu computes in f32 only; this run asks "
                 "for %s", gb_dtype_name(p->dtype));
    else if (p->causal != 0 && p->causal != 1)
        snprintf(reason, reason_cap, "causal must be 0 or 1; this run asks for %d",
                 (int)p->causal);
    else if (p->batch < 1 || p->heads < 1 || p->seq_len < 1 || p->head_dim < 1)
        snprintf(reason, reason_cap, "batch, heads, seq_len and head_dim must all be >= 1; "
                 "this run asks for (B, H, T, D) = (%lld, %lld, %lld, %lld)",
                 (long long)p->batch, (long long)p->heads, (long long)p->seq_len,
                 (long long)p->head_dim);
    else
        return 1;
    return 0;
}

static gb_status math_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                             size_t *workspace_bytes)
{
    attn_math *attn = self;
    size_t T = (size_t)p->seq_len;
    *saved_bytes = (size_t)p->batch * (size_t)p->heads * T * T * sizeof(float);
    *workspace_bytes = (size_t)attn->threads * T * sizeof(float);
    return GB_OK;
}

/* Refuses a problem the plugin would have called ineligible, with the same reason. */
static gb_status check_problem(attn_math *attn, const char *call, const gb_attn_problem *p)
{
    char reason[256];
    if (math_eligible(attn, p, reason, sizeof reason))
        return GB_OK;
    attn->host->set_error(attn->host, "%s: %s", call, reason);
    return GB_ERR_UNSUPPORTED;
}

static gb_status check_view(attn_math *attn, const char *call, const char *name,
                            const gb_tensor *t, const gb_attn_problem *p)
{
    const int64_t want[4] = {p->batch, p->heads, p->seq_len, p->head_dim};
    if (t->ndim != 4 || t->shape[0] != want[0] || t->shape[1] != want[1] ||
        t->shape[2] != want[2] || t->shape[3] != want[3]) {
        attn->host->set_error(attn->host,
                              "%s: %s must be a 4-d view (B, H, T, D) = (%lld, %lld, %lld, "
                              "%lld); got ndim %d, shape (%lld, %lld, %lld, %lld)", call, name,
                              (long long)want[0], (long long)want[1], (long long)want[2],
                              (long long)want[3], (int)t->ndim, (long long)t->shape[0],
                              (long long)t->shape[1], (long long)t->shape[2],
                              (long long)t->shape[3]);
        return GB_ERR_INVALID_ARG;
    }
    if (t->dtype != p->dtype) {
        attn->host->set_error(attn->host, "%s: %s is %s but the problem says %s", call, name,
                              gb_dtype_name(t->dtype), gb_dtype_name(p->dtype));
        return GB_ERR_INVALID_ARG;
    }
    if (t->stride[3] != 1) {
        attn->host->set_error(attn->host, "%s: attn/math needs head_dim contiguous "
                              "(stride[3] == 1); %s has stride[3] = %lld", call, name,
                              (long long)t->stride[3]);
        return GB_ERR_UNSUPPORTED;
    }
    return GB_OK;
}

static gb_status check_views(attn_math *attn, const char *call, const gb_attn_problem *p,
                             const char *const *names, const gb_tensor *const *views, int n)
{
    gb_status status = check_problem(attn, call, p);
    for (int i = 0; i < n && status == GB_OK; i++)
        status = check_view(attn, call, names[i], views[i], p);
    return status;
}

/* Row (b, h, t) of a (B, H, T, D) view: D contiguous floats. */
static inline float *row_of(const gb_tensor *t, int64_t b, int64_t h, int64_t s)
{
    return (float *)t->data + b * t->stride[0] + h * t->stride[1] + s * t->stride[2];
}

// y, x (D)
static inline void row_axpy(float *y, float a, const float *x, int64_t D)
{
    for (int64_t d = 0; d < D; d++)
        y[d] = fmaf(a, x[d], y[d]);
}

/* Row t of the probabilities: softmax over keys 0..n-1 of q_t . k_j * scale, zero past n. */
// prow (T); q (D)
static void probability_row(float *prow, const float *q, const gb_tensor *k, int64_t b,
                            int64_t h, int64_t n, int64_t T, int64_t D, float scale)
{
    for (int64_t j = 0; j < n; j++)
        prow[j] = row_dot(q, row_of(k, b, h, j), D) * scale;
    float max = row_max(prow, n);
    for (int64_t j = 0; j < n; j++)
        prow[j] = exp_fast(prow[j] - max);
    float inv_sum = 1.0f / row_sum(prow, n);
    for (int64_t j = 0; j < n; j++)
        prow[j] *= inv_sum;
    for (int64_t j = n; j < T; j++)
        prow[j] = 0.0f;
}

static gb_status math_forward(void *self, const gb_attn_problem *p, gb_tensor out,
                              gb_tensor q, gb_tensor k, gb_tensor v, void *saved,
                              void *workspace)
{
    (void)workspace;
    attn_math *attn = self;
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    gb_status status = check_views(attn, "forward", p, names, views, 4);
    if (status != GB_OK)
        return status;
    const int64_t H = p->heads, T = p->seq_len, D = p->head_dim;
    const float scale = 1.0f / sqrtf((float)D);
    float *probs = saved;   // (B, H, T, T)
    #pragma omp parallel for schedule(static) num_threads(attn->threads) \
        if (p->batch * H * T * T >= ATTN_PARALLEL_MIN)
    for (int64_t bh = 0; bh < p->batch * H; bh++) {
        int64_t b = bh / H, h = bh % H;
        for (int64_t t = 0; t < T; t++) {
            int64_t n = p->causal ? t + 1 : T;
            float *prow = probs + (bh * T + t) * T;
            probability_row(prow, row_of(&q, b, h, t), &k, b, h, n, T, D, scale);
            float *o = row_of(&out, b, h, t);
            memset(o, 0, (size_t)D * sizeof(float));
            for (int64_t j = 0; j < n; j++)
                row_axpy(o, prow[j], row_of(&v, b, h, j), D);
        }
    }
    return GB_OK;
}

/* dP = dO V^T, dV = P^T dO, dS = P * (dP - rowsum(P * dP)), dQ = dS K * scale,
 * dK = dS^T Q * scale, for one (batch, head); dk and dv rows sum over t in order. */
// probs (T, T); dp (T) scratch
static void backward_head(const float *probs, float *dp, int64_t b, int64_t h,
                          const gb_attn_problem *p, const gb_tensor *dq, const gb_tensor *dk,
                          const gb_tensor *dv, const gb_tensor *dout, const gb_tensor *q,
                          const gb_tensor *k, const gb_tensor *v, float scale)
{
    const int64_t T = p->seq_len, D = p->head_dim;
    for (int64_t t = 0; t < T; t++) {
        memset(row_of(dk, b, h, t), 0, (size_t)D * sizeof(float));
        memset(row_of(dv, b, h, t), 0, (size_t)D * sizeof(float));
    }
    for (int64_t t = 0; t < T; t++) {
        int64_t n = p->causal ? t + 1 : T;
        const float *prow = probs + t * T;
        const float *do_t = row_of(dout, b, h, t);
        for (int64_t j = 0; j < n; j++)
            dp[j] = row_dot(do_t, row_of(v, b, h, j), D);
        float p_dp = row_dot(prow, dp, n);
        for (int64_t j = 0; j < n; j++)
            dp[j] = prow[j] * (dp[j] - p_dp);   // now dS
        float *dq_t = row_of(dq, b, h, t);
        memset(dq_t, 0, (size_t)D * sizeof(float));
        const float *q_t = row_of(q, b, h, t);
        for (int64_t j = 0; j < n; j++) {
            row_axpy(dq_t, dp[j], row_of(k, b, h, j), D);
            row_axpy(row_of(dk, b, h, j), dp[j] * scale, q_t, D);
            row_axpy(row_of(dv, b, h, j), prow[j], do_t, D);
        }
        for (int64_t d = 0; d < D; d++)
            dq_t[d] *= scale;
    }
}

static gb_status math_backward(void *self, const gb_attn_problem *p, gb_tensor dq,
                               gb_tensor dk, gb_tensor dv, gb_tensor dout, gb_tensor q,
                               gb_tensor k, gb_tensor v, gb_tensor out, const void *saved,
                               void *workspace)
{
    (void)out;   // the saved probabilities carry everything out would tell
    attn_math *attn = self;
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v};
    gb_status status = check_views(attn, "backward", p, names, views, 7);
    if (status != GB_OK)
        return status;
    const int64_t H = p->heads, T = p->seq_len;
    const float scale = 1.0f / sqrtf((float)p->head_dim);
    const float *probs = saved;   // (B, H, T, T)
    float *rows = workspace;      // (threads, T)
    #pragma omp parallel for schedule(static) num_threads(attn->threads) \
        if (p->batch * H * T * T >= ATTN_PARALLEL_MIN)
    for (int64_t bh = 0; bh < p->batch * H; bh++)
        backward_head(probs + bh * T * T, rows + (int64_t)omp_get_thread_num() * T, bh / H,
                      bh % H, p, &dq, &dk, &dv, &dout, &q, &k, &v, scale);
    return GB_OK;
}

static const gb_attn_ops math_ops = {
    .struct_size = sizeof(gb_attn_ops),
    .create = math_create,
    .destroy = math_destroy,
    .eligible = math_eligible,
    .memory = math_memory,
    .forward = math_forward,
    .backward = math_backward,
};

GB_PLUGIN_DEFINE(GB_KIND_ATTN, "math", "1.0.0",
                 "materialises the T x T probabilities; any T and head_dim, f32",
                 GB_DEVICE_CPU, GB_NO_OPTIONS, math_ops)
