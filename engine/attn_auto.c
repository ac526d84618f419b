/* `[attn] plugin = auto`: the fastest eligible attention plugin for this run's shapes,
 * measured, not guessed. PyTorch's SDPA picks by a fixed priority and explains itself only
 * when nothing is eligible; here every candidate is asked, timed on the run's own problem
 * (B, heads, T, head_dim, dtype) and the choice is printed with the reason each other one
 * lost. The measurement takes a few forward+backward calls per candidate at start-up; a
 * run that must not depend on timing names its plugin instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "gearbox/convert.h"
#include "attn_auto.h"
#include "instance.h"
#include "report.h"
#include "rng.h"
#include "runtime.h"

#define TIMED_CALLS 3
#define GB_AUTO_NAME_MAX 64   /* a plugin name as broadcast between ranks */

typedef struct candidate {
    const gb_plugin *plugin;
    double ms;              /* best forward+backward time; < 0 when not eligible */
    char reason[1200];
} candidate;

/* Device buffers for one (B, H, T, D) problem in its dtype: q, k, v, out, dout, dq, dk,
 * dv. */
typedef struct trial_buffers {
    void *t[8];
    void *saved, *workspace;
} trial_buffers;

static gb_tensor contiguous(const gb_attn_problem *p, void *data)
{
    int64_t T = p->seq_len, D = p->head_dim;
    return (gb_tensor){.data = data, .dtype = p->dtype, .ndim = 4,
                       .shape = {p->batch, p->heads, T, D},
                       .stride = {p->heads * T * D, T * D, D, 1}};
}

static void free_trial(gb_runtime *rt, trial_buffers *b)
{
    void *dev = rt->inst[GB_KIND_DEVICE].self;
    for (int i = 0; i < 8; i++)
        if (b->t[i])
            rt->dev->free(dev, b->t[i]);
    if (b->saved)
        rt->dev->free(dev, b->saved);
    if (b->workspace)
        rt->dev->free(dev, b->workspace);
}

/* Element i of a host array of `dtype` (f32, bf16 or f16) becomes x, rounded to nearest. */
static void store_element(unsigned char *host, gb_dtype dtype, size_t i, float x)
{
    if (dtype == GB_BF16)
        ((uint16_t *)host)[i] = gb_bf16_from_f32(x);
    else if (dtype == GB_F16)
        ((uint16_t *)host)[i] = gb_f16_from_f32(x);
    else
        ((float *)host)[i] = x;
}

static int alloc_trial(gb_runtime *rt, const gb_attn_problem *p, size_t saved,
                       size_t workspace, trial_buffers *b)
{
    void *dev = rt->inst[GB_KIND_DEVICE].self;
    size_t n = (size_t)(p->batch * p->heads * p->seq_len * p->head_dim);
    size_t bytes = n * gb_dtype_size(p->dtype);
    unsigned char *host = malloc(bytes);
    int failed = !host;
    gb_rng rng = gb_rng_stream(0, 0, 0, 0);
    for (size_t i = 0; !failed && i < n; i++)
        store_element(host, p->dtype, i, (float)(gb_rng_uniform(&rng) - 0.5));
    for (int i = 0; !failed && i < 8; i++)
        failed = rt->dev->alloc(dev, bytes, &b->t[i]) != GB_OK ||
                 rt->dev->copy(dev, b->t[i], host, bytes, GB_COPY_HOST_TO_DEVICE) != GB_OK;
    failed = failed || rt->dev->alloc(dev, saved ? saved : 64, &b->saved) != GB_OK ||
             rt->dev->alloc(dev, workspace ? workspace : 64, &b->workspace) != GB_OK;
    free(host);
    return failed ? -1 : 0;
}

/* Best of TIMED_CALLS forward+backward calls after one warm-up, in ms; < 0 on failure. */
static double time_candidate(gb_runtime *rt, const gb_attn_ops *ops, void *self,
                             const gb_attn_problem *p, trial_buffers *b)
{
    void *dev = rt->inst[GB_KIND_DEVICE].self;
    double best = -1.0;
    for (int call = 0; call <= TIMED_CALLS; call++) {
        double t0 = gb_now_ms();
        gb_tensor x[8]; /* q k v out dout dq dk dv */
        for (int i = 0; i < 8; i++)
            x[i] = contiguous(p, b->t[i]);
        if (ops->forward(self, p, x[3], x[0], x[1], x[2], b->saved, b->workspace) != GB_OK ||
            ops->backward(self, p, x[5], x[6], x[7], x[4], x[0], x[1], x[2], x[3], b->saved,
                          b->workspace) != GB_OK ||
            rt->dev->sync(dev) != GB_OK)
            return -1.0;
        double ms = gb_now_ms() - t0;
        if (call > 0 && (best < 0 || ms < best))
            best = ms;
    }
    return best;
}

/* Creates, asks and times one candidate; fills c->ms and c->reason. */
static void try_candidate(gb_runtime *rt, const gb_attn_problem *p, candidate *c)
{
    gb_instance inst = {0};
    gb_diag diag = {0};
    gb_config *defaults = gb_config_load_string("", "defaults", "/", &diag);
    const gb_attn_ops *ops = c->plugin->desc->ops;
    c->ms = -1.0;
    if (!defaults || gb_instance_bind(&inst, c->plugin, defaults, c->plugin->desc->name,
                                      (int)rt->settings.threads, &diag) ||
        ops->create(&inst.host, gb_instance_options(&inst), &rt->ctx, &inst.self) != GB_OK) {
        snprintf(c->reason, sizeof c->reason, "could not start: %s",
                 inst.error[0] ? inst.error : diag.count ? diag.messages[0] : "no message");
    } else if (ops->eligible(inst.self, p, c->reason, sizeof c->reason)) {
        size_t saved = 0, workspace = 0;
        trial_buffers b = {0};
        if (ops->memory(inst.self, p, &saved, &workspace) != GB_OK ||
            alloc_trial(rt, p, saved, workspace, &b) != 0)
            snprintf(c->reason, sizeof c->reason, "needs %.1f MiB it could not get",
                     (double)(saved + workspace) / 1048576.0);
        else if ((c->ms = time_candidate(rt, ops, inst.self, p, &b)) < 0)
            snprintf(c->reason, sizeof c->reason, "failed on a trial call: %s", inst.error);
        free_trial(rt, &b);
    }
    if (inst.self)
        ops->destroy(inst.self);
    gb_instance_unbind(&inst);
    gb_config_free(defaults);
    gb_diag_clear(&diag);
}

static void report(const gb_attn_problem *p, const candidate *c, int n, int best)
{
    gb_report(GB_REPORT_INFO, "attn", "attn auto: chose %s for B %lld, heads %lld, T %lld, "
              "head_dim %lld, %s: forward+backward %.3f ms, the fastest eligible",
              c[best].plugin->desc->name, (long long)p->batch, (long long)p->heads,
              (long long)p->seq_len, (long long)p->head_dim, gb_dtype_name(p->dtype),
              c[best].ms);
    for (int i = 0; i < n; i++) {
        if (i == best)
            continue;
        if (c[i].ms >= 0)
            gb_report(GB_REPORT_INFO, "attn", "attn auto:   passed over %s: %.3f ms, %.2fx "
                      "slower", c[i].plugin->desc->name, c[i].ms, c[i].ms / c[best].ms);
        else
            gb_report(GB_REPORT_INFO, "attn", "attn auto:   passed over %s: %s",
                      c[i].plugin->desc->name, c[i].reason);
    }
}

/* Rank 0's choice (a plugin name, "" when it found none) on every rank, through the comm
 * plugin's broadcast of a device buffer; the local choice when there is one rank. Ranks
 * that measured differently would otherwise run different kernels and drift apart. */
static int agree_with_rank0(gb_runtime *rt, char name[GB_AUTO_NAME_MAX], gb_diag *diag)
{
    gb_instance *comm = &rt->inst[GB_KIND_COMM], *dev = &rt->inst[GB_KIND_DEVICE];
    if (rt->comm->world(comm->self) <= 1)
        return 0;
    void *buf = NULL;
    int ok = rt->dev->alloc(dev->self, GB_AUTO_NAME_MAX, &buf) == GB_OK &&
             rt->dev->copy(dev->self, buf, name, GB_AUTO_NAME_MAX, GB_COPY_HOST_TO_DEVICE) ==
                 GB_OK &&
             rt->comm->broadcast(comm->self, buf, GB_AUTO_NAME_MAX, 0) == GB_OK &&
             rt->dev->copy(dev->self, name, buf, GB_AUTO_NAME_MAX, GB_COPY_DEVICE_TO_HOST) ==
                 GB_OK;
    if (buf)
        rt->dev->free(dev->self, buf);
    name[GB_AUTO_NAME_MAX - 1] = '\0';
    if (!ok)
        gb_diag_add(diag, "[attn] plugin = auto: could not take rank 0's choice: %s",
                    comm->error[0] ? comm->error : dev->error[0] ? dev->error : "no message");
    return ok ? 0 : -1;
}

/* The index of the chosen plugin (rank 0's) among this rank's candidates; -1, said in
 * diag, when this rank cannot run it. */
static int choice_index(const char *name, const candidate *c, int n, gb_diag *diag)
{
    for (int i = 0; i < n; i++)
        if (strcmp(c[i].plugin->desc->name, name) == 0) {
            if (c[i].ms >= 0)
                return i;
            gb_diag_add(diag, "[attn] plugin = auto: rank 0 chose %s, which this rank cannot "
                        "run: %s", name, c[i].reason);
            return -1;
        }
    gb_diag_add(diag, "[attn] plugin = auto: rank 0 chose %s, which this rank does not find "
                "on its plugin path; give every rank the same plugins", name);
    return -1;
}

int gb_attn_auto(gb_runtime *rt, gb_diag *diag)
{
    const gb_settings *s = &rt->settings;
    gb_attn_problem p = {.struct_size = sizeof p, .batch = s->batch_size, .heads = s->n_head,
                         .seq_len = s->block_size, .head_dim = s->n_embd / s->n_head,
                         .dtype = rt->policy.activation_dtype, .causal = 1,
                         .allow_tf32 = rt->policy.tf32};
    const gb_plugin **found = NULL;
    int n = gb_loader_scan(rt->loader, GB_KIND_ATTN, &found, diag);
    candidate *c = calloc((size_t)n + 1, sizeof *c);
    int best = -1, kept = 0;
    for (int i = 0; c && i < n; i++) {
        if (!gb_plugin_runs_on(found[i]->desc, rt->device.family, rt->device_bits))
            continue;
        c[kept].plugin = found[i];
        try_candidate(rt, &p, &c[kept]);
        if (c[kept].ms >= 0 && (best < 0 || c[kept].ms < c[best].ms))
            best = kept;
        kept++;
    }
    char chosen[GB_AUTO_NAME_MAX] = "";
    if (best >= 0)
        snprintf(chosen, sizeof chosen, "%s", c[best].plugin->desc->name);
    int rc = -1;
    if (!c || agree_with_rank0(rt, chosen, diag)) {
        /* said in diag */
    } else if (!chosen[0]) {
        gb_diag_add(diag, "[attn] plugin = auto: no attention plugin on the search path %s "
                    "can run B %lld, heads %lld, T %lld, head_dim %lld on %s%s",
                    gb_loader_path_string(rt->loader), (long long)p.batch, (long long)p.heads,
                    (long long)p.seq_len, (long long)p.head_dim, rt->device.family,
                    kept ? ":" : "");
        for (int i = 0; i < kept; i++)
            gb_diag_add(diag, "  %s: %s", c[i].plugin->desc->name, c[i].reason);
    } else if ((best = choice_index(chosen, c, kept, diag)) < 0) {
        /* said in diag */
    } else {
        if (rt->comm->rank(rt->inst[GB_KIND_COMM].self) == 0)
            report(&p, c, kept, best);
        rc = gb_instance_bind(&rt->inst[GB_KIND_ATTN], c[best].plugin, rt->cfg, "auto",
                              (int)s->threads, diag) ? -1 : 0;
        rt->attn = c[best].plugin->desc->ops;
    }
    free(c);
    free(found);
    return rc;
}
