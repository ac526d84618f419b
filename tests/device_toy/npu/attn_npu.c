/* attn/math for the toy NPU (family "toy_npu"): causal attention as written in the
 * textbook, materialising the (T, T) probabilities of every (batch, head), run as the
 * NPU's kernel: every buffer is device memory, reached through toy_npu_at() (toy_npu.h).
 * Forward keeps the probabilities for backward; backward takes one row of dP as workspace.
 * f32 only, no options. Built out of tree against gearbox's headers alone, the toolkit's
 * among them (gearbox/toolkit/instance.h, attn_checks.h), like a vendor's plugin; named after attn/math,
 * so `[attn] plugin = math` takes it on the NPU.
 */
#include <math.h>
#include <stdio.h>

#include "gearbox/attn.h"
#include "gearbox/toolkit/attn_checks.h"
#include "gearbox/toolkit/instance.h"
#include "toy_npu.h"

#define PLUGIN "attn/math (toy_npu)"

typedef struct npu_attn {
    gb_plugin_instance base;   /* the host and the device (gearbox/toolkit/instance.h) */
    const toy_npu_runtime *npu;
} npu_attn;

/* One (batch, head) of a (B, H, T, D) view, on the NPU's side: row t, column d. */
typedef struct head {
    float *at;
    int64_t row, col;
} head;

static head head_of(const toy_npu_runtime *npu, const gb_tensor *v, int64_t b, int64_t h)
{
    float *base = toy_npu_at(npu, v->data);
    return (head){base + b * v->stride[0] + h * v->stride[1], v->stride[2], v->stride[3]};
}

static float *el(head x, int64_t t, int64_t d)
{
    return x.at + t * x.row + d * x.col;
}

static gb_status npu_create(const gb_host *host, const gb_value *options,
                            const gb_device_ctx *device, void **self)
{
    (void)options;
    const toy_npu_runtime *npu = toy_npu_of(device);
    if (!npu) {
        host->set_error(host, "attn/math (toy_npu) runs on the toy NPU only: this run's device "
                        "is not one");
        return GB_ERR_UNSUPPORTED;
    }
    gb_status st = gb_plugin_instance_new(host, device, PLUGIN, sizeof(npu_attn), self);
    if (st == GB_OK)
        ((npu_attn *)*self)->npu = npu;
    return st;
}

static int npu_eligible(void *self, const gb_attn_problem *p, char *reason, size_t cap)
{
    (void)self;
    if (!gb_attn_problem_ok_on(PLUGIN, TOY_NPU_FAMILY, p, reason, cap))
        return 0;
    if (p->dtype == GB_F32)
        return 1;
    snprintf(reason, cap, "attn/math on the toy NPU computes f32 only, not %s",
             gb_dtype_name(p->dtype));
    return 0;
}

static gb_status npu_memory(void *self, const gb_attn_problem *p, size_t *saved,
                            size_t *workspace)
{
    (void)self;
    *saved = (size_t)(p->batch * p->heads * p->seq_len * p->seq_len) * sizeof(float);
    *workspace = (size_t)p->seq_len * sizeof(float);
    return GB_OK;
}

/* What forward and backward both start with: the toolkit's checks of the problem and the
 * call's views (names[i] names views[i] in errors), then the sizes and the softmax scale. */
typedef struct call_dims {
    int64_t T, D;
    float scale;
} call_dims;

static gb_status begin_call(const npu_attn *a, const char *entry, const gb_attn_problem *p,
                            const char *const *names, const gb_tensor *const *views, int n,
                            call_dims *dims)
{
    gb_status st = gb_attn_check_eligible_call(&a->base, PLUGIN, entry, npu_eligible, p, names,
                                               views, n);
    *dims = (call_dims){p->seq_len, p->head_dim, 1.0f / sqrtf((float)p->head_dim)};
    return st;
}

/* The keys row i sees: 0..i with the causal mask, all T without. */
static int64_t seen(const gb_attn_problem *p, int64_t i)
{
    return p->causal ? i + 1 : p->seq_len;
}

static gb_status npu_forward(void *self, const gb_attn_problem *p, gb_tensor out, gb_tensor q,
                             gb_tensor k, gb_tensor v, void *saved, void *workspace)
{
    (void)workspace;
    const npu_attn *a = self;
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    call_dims dims;
    gb_status st = begin_call(a, "forward", p, names, views, 4, &dims);
    if (st != GB_OK)
        return st;
    const int64_t T = dims.T, D = dims.D;
    float *probs = toy_npu_at(a->npu, saved);
    for (int64_t b = 0; b < p->batch; b++) {
        for (int64_t h = 0; h < p->heads; h++) {
            head qh = head_of(a->npu, &q, b, h), kh = head_of(a->npu, &k, b, h),
                 vh = head_of(a->npu, &v, b, h), oh = head_of(a->npu, &out, b, h);
            for (int64_t i = 0; i < T; i++) {
                float *row = probs + ((b * p->heads + h) * T + i) * T;
                float max = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < seen(p, i); j++) {
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++)
                        s += *el(qh, i, d) * *el(kh, j, d);
                    row[j] = s * dims.scale;
                    max = row[j] > max ? row[j] : max;
                }
                for (int64_t j = 0; j < seen(p, i); j++)
                    sum += row[j] = expf(row[j] - max);
                for (int64_t j = 0; j < T; j++)
                    row[j] = j < seen(p, i) ? row[j] / sum : 0.0f;
                for (int64_t d = 0; d < D; d++) {
                    float o = 0.0f;
                    for (int64_t j = 0; j < seen(p, i); j++)
                        o += row[j] * *el(vh, j, d);
                    *el(oh, i, d) = o;
                }
            }
        }
    }
    return GB_OK;
}

/* dq, dk, dv start at zero; then row i's dP, dV and dS in turn. */
static gb_status npu_backward(void *self, const gb_attn_problem *p, gb_tensor dq, gb_tensor dk,
                              gb_tensor dv, gb_tensor dout, gb_tensor q, gb_tensor k,
                              gb_tensor v, gb_tensor out, const void *saved, void *workspace)
{
    (void)out;
    const npu_attn *a = self;
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v};
    call_dims dims;
    gb_status st = begin_call(a, "backward", p, names, views, 7, &dims);
    if (st != GB_OK)
        return st;
    const int64_t T = dims.T, D = dims.D;
    const float *probs = toy_npu_at(a->npu, saved);
    float *dp = toy_npu_at(a->npu, workspace);
    for (int64_t b = 0; b < p->batch; b++) {
        for (int64_t h = 0; h < p->heads; h++) {
            head qh = head_of(a->npu, &q, b, h), kh = head_of(a->npu, &k, b, h),
                 vh = head_of(a->npu, &v, b, h), doh = head_of(a->npu, &dout, b, h),
                 dqh = head_of(a->npu, &dq, b, h), dkh = head_of(a->npu, &dk, b, h),
                 dvh = head_of(a->npu, &dv, b, h);
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++)
                    *el(dqh, t, d) = *el(dkh, t, d) = *el(dvh, t, d) = 0.0f;
            for (int64_t i = 0; i < T; i++) {
                const float *row = probs + ((b * p->heads + h) * T + i) * T;
                float dot = 0.0f;
                for (int64_t j = 0; j < seen(p, i); j++) {
                    dp[j] = 0.0f;
                    for (int64_t d = 0; d < D; d++) {
                        dp[j] += *el(doh, i, d) * *el(vh, j, d);
                        *el(dvh, j, d) += row[j] * *el(doh, i, d);
                    }
                    dot += row[j] * dp[j];
                }
                for (int64_t j = 0; j < seen(p, i); j++) {
                    float ds = row[j] * (dp[j] - dot) * dims.scale;
                    for (int64_t d = 0; d < D; d++) {
                        *el(dqh, i, d) += ds * *el(kh, j, d);
                        *el(dkh, j, d) += ds * *el(qh, i, d);
                    }
                }
            }
        }
    }
    return GB_OK;
}

GB_ATTN_PLUGIN_FOR(TOY_NPU_FAMILY, "math", "1.0.0",
                   "the textbook attention on the toy NPU's memory; f32",
                   0u, GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY,
                   GB_NO_OPTIONS, .create = npu_create, .destroy = gb_plugin_instance_destroy,
                   .eligible = npu_eligible, .memory = npu_memory, .forward = npu_forward,
                   .backward = npu_backward)
