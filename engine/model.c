/* The GPT model through the device and attention plugins; see model.h.
 * Shapes: B batch, T tokens, C n_embd, H heads, D = C/H, V vocab, L layers, N = B*T.
 * Activations (void *) are of the precision policy's activation dtype; parameters,
 * gradients, per-row statistics and losses are f32. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/convert.h"

#include "clock.h"
#include "kvcache_step.h"
#include "loader.h"
#include "optim_params.h"
#include "report.h"
#include "rng.h"
#include "runtime.h"

typedef struct layer_params {
    float *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb;
    float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} layer_params;

typedef struct model_params {
    float *wte, *wpe, *lnfw, *lnfb;
    layer_params *layers;
} model_params;

typedef struct layer_acts {
    void *ln1;                         /* (N, C) */
    float *ln1_mean, *ln1_rstd;        /* (N), (N) */
    void *qkv;                         /* (N, 3C) packed as (B, T, 3, H, D) */
    void *atty;                        /* (N, C) attention output, (B, T, H, D) */
    void *attn_saved;                  /* what the attention plugin keeps for backward */
    void *res2;                        /* (N, C) residual after attention */
    void *ln2;                         /* (N, C) */
    float *ln2_mean, *ln2_rstd;        /* (N), (N) */
    void *fch, *fch_gelu;              /* (N, 4C) */
    void *res3;                        /* (N, C) residual after the MLP */
} layer_acts;

/* One training step's figures on their way to the host: each micro-step's per-token
 * losses and the squared gradient norm, copied behind the step's work into host memory
 * that the host reads once `event` completed. */
typedef struct figure_slot {
    float *losses;          /* (figures_micro, B * block_size) host */
    float *norm_sq;         /* one f32 host */
    void *scaler;           /* a gb_loss_scaler host, after the step's update (device scaler) */
    void *event;            /* recorded behind the copies; NULL on a device without events */
    int64_t step;           /* the 1-based step held; 0 while empty */
    int64_t n_micro, n_tokens;
} figure_slot;

/* A piece of the training micro-step recorded as a device graph (gb_model_use_graphs),
 * and what it was recorded for: the tokens it covers and the one scalar its calls take
 * that may change (the loss gradient's scale). */
typedef struct model_graph {
    void *graph;            /* NULL until recorded */
    int64_t n;
    float scalar;
    int variant;            /* which calls the work makes (backward: whether it has the
                               loss gradient to compute) */
    int ran;                /* the piece has run once without recording */
} model_graph;

enum { GRAPH_FORWARD, GRAPH_BACKWARD };

struct gb_model {
    gb_runtime *rt;
    void *dev;                      /* the device instance, first argument of its ops */
    gb_model_config cfg;
    int64_t B;                      /* micro-batch capacity */
    int train;
    int planning_only;              /* size every buffer but allocate none (gb_model_plan) */
    gb_dtype act;                   /* activations (and matmul inputs), from the policy */
    int32_t tf32;                   /* the policy lets f32 products round inputs to TF32 */
    size_t act_size;                /* bytes per activation element */
    uint64_t seed;                  /* the run's seed (stochastic rounding and dropout
                                       draw from it) */
    uint64_t dropout_step;          /* gb_model_set_dropout_step's micro-step */
    int dropping;                   /* the last forward dropped (training with dropout) */

    gb_param_tensor *tensors;
    int n_tensors;
    int64_t n_params;
    gb_param_group *groups;         /* host, one per tensor */

    float *params, *grads;          /* (n_params) each, device */
    void *params_lowp;              /* (n_params) of act: the weights the matmuls read, which
                                       the optimizer writes beside the f32 master copy;
                                       NULL when act is f32 */
    void *optim_state;              /* device */
    size_t optim_state_bytes;
    void *optim_workspace;          /* device scratch of bind_params' size, or NULL */
    float *norm_sq;                 /* device scalar */
    /* The loss scaler, when the policy has one: on the device (ABI 1.4), where the kernels
     * read its scale and its update follows each step; else the precision plugin's
     * update() on the host after reading the gradient norm back. */
    gb_loss_scaler *scaler;         /* device memory, or NULL: on the host */
    char scaler_where[240];         /* gb_model_scaler_where: on the device, or on the host
                                       and why; "" without a scaler */
    int64_t scaler_skipped_base;    /* skipped_steps the device copy started from */
    int64_t skipped_steps;          /* updates skipped in this process (host scaler) */
    model_params p, g;              /* views into params and grads */

    int32_t *tokens, *targets;      /* (B, block_size) device */
    void *encoded;                  /* (N, C) */
    layer_acts *acts;
    void *proj;                     /* (N, C) forward scratch for both projections */
    void *lnf;
    float *lnf_mean, *lnf_rstd;
    void *logits;                   /* (N, logits_ld), V columns used; becomes dlogits */
    int64_t logits_ld;              /* the padded vocabulary's rows, so each row starts
                                       aligned, on a device with cross_entropy_ld; else V */
    float *losses;                  /* (N) */
    float *host_losses;             /* (N) host */
    void *dres, *dC, *d3C, *d4C;    /* backward scratch: (N, C), (N, C), (N, 3C), (N, 4C) */
    void *attn_workspace;
    size_t attn_saved_bytes, attn_workspace_bytes;

    figure_slot figures[2];         /* the two newest steps' figures (gb_model_step_figures) */
    int next_figures;               /* the slot the current step stages into */
    int64_t figures_micro;          /* micro-steps a slot has room for; 0: not enabled */
    float *figures_host;            /* both slots' host memory (pinned where it can be) */

    gb_profile *profile;            /* kernel times by phase, or NULL */
    int recomputing;                /* kernels now run count as GB_PHASE_RECOMPUTE */
    gb_grads_ready_fn grads_ready;  /* told as backward finishes gradients; may be NULL */
    void *grads_ready_ctx;

    int use_graphs;                 /* training forward and backward as device graphs */
    model_graph graphs[2];          /* indexed by GRAPH_FORWARD, GRAPH_BACKWARD */
    int64_t graph_recordings, graph_launches;

    gb_kv_cache *kv;                /* during gb_model_forward_cached: attention over it */
    int64_t last_B, last_T;         /* shape of the last forward */
    int last_has_targets;
    unsigned fused;                 /* the gb_fusion bits in effect (wanted and possible) */
    int dlogits_ready;              /* the last forward left dlogits in place of the logits
                                       (GB_FUSE_CLASSIFIER) ... */
    float dlogits_scale;            /* ... for this dlogit scale */

    void **allocations;
    int n_allocations;
    gb_memory_plan plan;
};

/* ---- allocation ---------------------------------------------------------------------- */

/* Stands in for every buffer of a model that is only planned: non-NULL, never used. */
static char planned_only_buffer;

static void *device_alloc(gb_model *m, size_t bytes, size_t *category)
{
    if (bytes == 0)
        bytes = 64;
    if (m->planning_only) {
        *category += bytes;
        return &planned_only_buffer;
    }
    void *ptr = NULL;
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    gb_status st = m->rt->dev->alloc(m->dev, bytes, &ptr);
    if (st != GB_OK) {
        gb_call_failed(dev, st, "alloc");
        return NULL;
    }
    void **grown = realloc(m->allocations, (size_t)(m->n_allocations + 1) * sizeof *grown);
    if (!grown) {
        m->rt->dev->free(m->dev, ptr);
        return NULL;
    }
    m->allocations = grown;
    m->allocations[m->n_allocations++] = ptr;
    *category += bytes;
    return ptr;
}

#define ALLOC_F32(m, count, category) \
    ((float *)device_alloc((m), (size_t)(count) * sizeof(float), &(m)->plan.category))
#define ALLOC_ACT(m, count, category) \
    device_alloc((m), (size_t)(count) * (m)->act_size, &(m)->plan.category)

/* The activation `elems` elements into `base`. */
static void *at(const gb_model *m, const void *base, int64_t elems)
{
    return (char *)base + (size_t)elems * m->act_size;
}

/* The copy of master parameter `w` that matmuls read: itself in f32 runs, else the same
 * element of the low-precision copy. */
static const void *working(const gb_model *m, const float *w)
{
    return m->params_lowp ? at(m, m->params_lowp, w - m->params) : w;
}

/* ---- parameter layout ---------------------------------------------------------------- */

static gb_param_tensor *add_tensor(gb_model *m, const char *name, int64_t rows, int64_t cols,
                                   gb_param_role role)
{
    gb_param_tensor *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = m->n_params;
    t->rows = rows;
    t->cols = cols;
    t->numel = rows * cols;
    t->decay = rows > 1;
    t->role = role;
    m->n_params += t->numel;
    return t;
}

/* Block l's `module`.weight of (rows, cols) in `role`, then its .bias of bias_len when
 * the model has biases. */
static void add_block_module(gb_model *m, int64_t l, const char *module, int64_t rows,
                             int64_t cols, int64_t bias_len, gb_param_role role)
{
    char name[64];
    snprintf(name, sizeof name, "h.%lld.%s.weight", (long long)l, module);
    add_tensor(m, name, rows, cols, role);
    if (m->cfg.bias) {
        snprintf(name, sizeof name, "h.%lld.%s.bias", (long long)l, module);
        add_tensor(m, name, 1, bias_len, GB_PARAM_BIAS);
    }
}

/* nanoGPT's parameter order; biases only when the model has them. */
static void plan_tensors(gb_model *m)
{
    const gb_model_config *c = &m->cfg;
    int64_t C = c->n_embd;
    m->tensors = calloc((size_t)(4 + 12 * c->n_layer), sizeof *m->tensors);
    if (!m->tensors)
        return;
    add_tensor(m, "wte", gb_model_table_rows(c), C, GB_PARAM_EMBEDDING)->tied_head = 1;
    add_tensor(m, "wpe", c->block_size, C, GB_PARAM_EMBEDDING);
    for (int64_t l = 0; l < c->n_layer; l++) {
        add_block_module(m, l, "ln_1", 1, C, C, GB_PARAM_NORM);
        add_block_module(m, l, "attn.c_attn", 3 * C, C, 3 * C, GB_PARAM_MATRIX);
        add_block_module(m, l, "attn.c_proj", C, C, C, GB_PARAM_MATRIX);
        add_block_module(m, l, "ln_2", 1, C, C, GB_PARAM_NORM);
        add_block_module(m, l, "mlp.c_fc", 4 * C, C, 4 * C, GB_PARAM_MATRIX);
        add_block_module(m, l, "mlp.c_proj", C, 4 * C, C, GB_PARAM_MATRIX);
    }
    add_tensor(m, "ln_f.weight", 1, C, GB_PARAM_NORM);
    if (c->bias)
        add_tensor(m, "ln_f.bias", 1, C, GB_PARAM_BIAS);
}

gb_param_tensor *gb_model_layout(const gb_model_config *cfg, int *count, int64_t *n_params)
{
    gb_model m = {.cfg = *cfg};
    plan_tensors(&m);
    *count = m.n_tensors;
    *n_params = m.n_params;
    return m.tensors;
}

/* Points `views` at the tensors of `base`, in plan_tensors' order. */
static void bind_views(gb_model *m, float *base, model_params *v)
{
    if (m->planning_only)
        return; /* a plan has no memory to point into */
    int i = 0;
    int bias = m->cfg.bias;
#define NEXT() (base + m->tensors[i++].offset)
#define NEXT_BIAS() (bias ? NEXT() : NULL)
    v->wte = NEXT();
    v->wpe = NEXT();
    for (int64_t l = 0; l < m->cfg.n_layer; l++) {
        layer_params *lp = &v->layers[l];
        lp->ln1w = NEXT();
        lp->ln1b = NEXT_BIAS();
        lp->qkvw = NEXT();
        lp->qkvb = NEXT_BIAS();
        lp->projw = NEXT();
        lp->projb = NEXT_BIAS();
        lp->ln2w = NEXT();
        lp->ln2b = NEXT_BIAS();
        lp->fcw = NEXT();
        lp->fcb = NEXT_BIAS();
        lp->fcprojw = NEXT();
        lp->fcprojb = NEXT_BIAS();
    }
    v->lnfw = NEXT();
    v->lnfb = NEXT_BIAS();
#undef NEXT
#undef NEXT_BIAS
}

gb_model_config gb_model_config_of(const gb_settings *s, int64_t data_vocab)
{
    return (gb_model_config){
        .n_layer = s->n_layer, .n_head = s->n_head, .n_embd = s->n_embd,
        .block_size = s->block_size, .vocab_size = s->vocab_size ? s->vocab_size : data_vocab,
        .bias = s->bias, .recompute = (gb_recompute)s->recompute,
        .padded_vocab_size = s->padded_vocab_size, .gelu_tanh = s->gelu_tanh,
        .dropout = (float)s->dropout,
        .fuse = (s->fuse_classifier ? GB_FUSE_CLASSIFIER : 0u) |
                (s->fuse_gelu ? GB_FUSE_GELU : 0u) |
                (s->fuse_bias_grad ? GB_FUSE_BIAS_GRAD : 0u) |
                (s->fuse_residual_norm ? GB_FUSE_RESIDUAL_NORM : 0u),
    };
}

/* ---- creation ------------------------------------------------------------------------ */

static gb_attn_problem attn_problem(const gb_model *m, int64_t B, int64_t T)
{
    return (gb_attn_problem){
        .struct_size = sizeof(gb_attn_problem),
        .batch = B,
        .heads = m->cfg.n_head,
        .seq_len = T,
        .head_dim = m->cfg.n_embd / m->cfg.n_head,
        .dtype = m->act,
        .causal = 1,
        .allow_tf32 = m->tf32,
    };
}

static int plan_attention(gb_model *m)
{
    gb_instance *inst = &m->rt->inst[GB_KIND_ATTN];
    gb_attn_problem prob = attn_problem(m, m->B, m->cfg.block_size);
    char reason[512] = "";
    if (!m->rt->attn->eligible(inst->self, &prob, reason, sizeof reason)) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: [attn] plugin = %s cannot run this "
                  "model (B %lld, heads %lld, T %lld, head_dim %lld, %s): %s",
                  inst->plugin->desc->name, (long long)prob.batch, (long long)prob.heads,
                  (long long)prob.seq_len, (long long)prob.head_dim, gb_dtype_name(prob.dtype),
                  reason);
        return -1;
    }
    GB_CALL(inst, "memory", m->rt->attn->memory(inst->self, &prob, &m->attn_saved_bytes,
                                                 &m->attn_workspace_bytes));
    return 0;
}

/* An activation buffer of `count` elements: `shared` when backward recomputes it (all
 * blocks then write the same buffer), else a block's own. */
static void *own_or_shared(gb_model *m, void *shared, int64_t count)
{
    return shared ? shared : ALLOC_ACT(m, count, activations);
}

static float *own_or_shared_f32(gb_model *m, float *shared, int64_t count)
{
    return shared ? shared : ALLOC_F32(m, count, activations);
}

/* The activations block `a` keeps for backward; the non-NULL buffers of `shared` are
 * those it recomputes instead. */
static int allocate_block_acts(gb_model *m, layer_acts *a, const layer_acts *shared)
{
    int64_t N = m->B * m->cfg.block_size, C = m->cfg.n_embd;
    a->ln1 = own_or_shared(m, shared->ln1, N * C);
    a->ln1_mean = own_or_shared_f32(m, shared->ln1_mean, N);
    a->ln1_rstd = own_or_shared_f32(m, shared->ln1_rstd, N);
    a->qkv = own_or_shared(m, shared->qkv, N * 3 * C);
    a->atty = own_or_shared(m, shared->atty, N * C);
    a->attn_saved = shared->attn_saved ? shared->attn_saved
                                       : device_alloc(m, m->attn_saved_bytes, &m->plan.activations);
    a->res2 = own_or_shared(m, shared->res2, N * C);
    a->ln2 = own_or_shared(m, shared->ln2, N * C);
    a->ln2_mean = own_or_shared_f32(m, shared->ln2_mean, N);
    a->ln2_rstd = own_or_shared_f32(m, shared->ln2_rstd, N);
    a->fch = own_or_shared(m, shared->fch, N * 4 * C);
    a->fch_gelu = own_or_shared(m, shared->fch_gelu, N * 4 * C);
    a->res3 = own_or_shared(m, shared->res3, N * C);
    return (a->ln1 && a->ln1_mean && a->ln1_rstd && a->qkv && a->atty && a->attn_saved &&
            a->res2 && a->ln2 && a->ln2_mean && a->ln2_rstd && a->fch && a->fch_gelu &&
            a->res3) ? 0 : -1;
}

/* Every block's activations. Recomputed buffers are shared: norm_gelu shares one
 * LayerNorm output (ln1 and ln2 are never needed at once in backward) and one GELU
 * output; block shares all of block 0's buffers but each block's output, which is the
 * next block's input. */
static int allocate_blocks(gb_model *m)
{
    int64_t N = m->B * m->cfg.block_size, C = m->cfg.n_embd;
    layer_acts shared = {0};
    m->acts = calloc((size_t)m->cfg.n_layer, sizeof *m->acts);
    if (!m->acts)
        return -1;
    if (m->train && m->cfg.recompute == GB_RECOMPUTE_NORM_GELU) {
        shared.ln1 = shared.ln2 = ALLOC_ACT(m, N * C, activations);
        shared.fch_gelu = ALLOC_ACT(m, N * 4 * C, activations);
        if (!shared.ln1 || !shared.fch_gelu)
            return -1;
    }
    for (int64_t l = 0; l < m->cfg.n_layer; l++) {
        if (allocate_block_acts(m, &m->acts[l], &shared))
            return -1;
        if (l == 0 && m->train && m->cfg.recompute == GB_RECOMPUTE_BLOCK) {
            shared = m->acts[0];
            shared.res3 = NULL;
        }
    }
    return 0;
}

static int allocate_activations(gb_model *m)
{
    int64_t N = m->B * m->cfg.block_size, C = m->cfg.n_embd;
    m->tokens = device_alloc(m, (size_t)N * sizeof(int32_t), &m->plan.activations);
    m->targets = device_alloc(m, (size_t)N * sizeof(int32_t), &m->plan.activations);
    m->encoded = ALLOC_ACT(m, N * C, activations);
    if (allocate_blocks(m))
        return -1;
    m->proj = ALLOC_ACT(m, N * C, activations);
    m->lnf = ALLOC_ACT(m, N * C, activations);
    m->lnf_mean = ALLOC_F32(m, N, activations);
    m->lnf_rstd = ALLOC_F32(m, N, activations);
    m->logits = ALLOC_ACT(m, N * m->logits_ld, activations);
    m->losses = ALLOC_F32(m, N, activations);
    m->attn_workspace = device_alloc(m, m->attn_workspace_bytes, &m->plan.workspace);
    if (!m->tokens || !m->targets || !m->encoded || !m->proj || !m->lnf || !m->lnf_mean ||
        !m->lnf_rstd || !m->logits || !m->losses || !m->attn_workspace)
        return -1;
    if (!m->train)
        return 0;
    m->dres = ALLOC_ACT(m, N * C, workspace);
    m->dC = ALLOC_ACT(m, N * C, workspace);
    m->d3C = ALLOC_ACT(m, N * 3 * C, workspace);
    m->d4C = ALLOC_ACT(m, N * 4 * C, workspace);
    return (m->dres && m->dC && m->d3C && m->d4C) ? 0 : -1;
}

/* ---- the loss scaler ----------------------------------------------------------------- */

/* Why the precision policy's loss scaler cannot run on the device, or NULL when it can:
 * the policy gives itself as a gb_loss_scaler, enabled (into *out), the device has the
 * kernels and the optimizer reads the scale there (all ABI 1.4). */
static const char *device_scaler_refusal(gb_runtime *rt, gb_loss_scaler *out)
{
    const gb_precision_ops *p = rt->precision;
    gb_instance *prec = &rt->inst[GB_KIND_PRECISION];
    const gb_plugin_desc *optim = rt->inst[GB_KIND_OPTIM].plugin->desc;
    if (p->struct_size < offsetof(gb_precision_ops, scaler_set) + sizeof p->scaler_set ||
        !p->scaler_get || !p->scaler_set)
        return "the precision plugin does not hand its scaler to the device (ABI 1.4)";
    if (!GB_DEVICE_HAS(rt->dev, cross_entropy_scaled) ||
        !GB_DEVICE_HAS(rt->dev, loss_scaler_update))
        return "the device has no cross_entropy_scaled and loss_scaler_update (ABI 1.4)";
    if (!(gb_plugin_caps(optim) & GB_CAP_DEVICE_LOSS_SCALE))
        return "the optimizer does not read the loss scale on the device "
               "(GB_CAP_DEVICE_LOSS_SCALE)";
    gb_status st = p->scaler_get(prec->self, out);
    gb_instance_forget_errors();   /* a refusal here is a choice, not a failure */
    if (st != GB_OK)
        return prec->error[0] ? prec->error : "the precision plugin keeps it";
    return out->enabled ? NULL : "the scaler is disabled";
}

/* Decides where the loss scaler runs, as gb_model_scaler_where says: 1 on the device, 0
 * on the host. */
static int place_scaler(gb_model *m)
{
    gb_loss_scaler s;
    const char *why = device_scaler_refusal(m->rt, &s);
    if (why)
        snprintf(m->scaler_where, sizeof m->scaler_where, "on the host, after reading the "
                 "gradient norm back: %.160s", why);
    else
        snprintf(m->scaler_where, sizeof m->scaler_where, "on the device (overflow check, "
                 "skip and scale update queued with each step)");
    return why == NULL;
}

const char *gb_model_scaler_where(const gb_model *m)
{
    return m->scaler_where[0] ? m->scaler_where : NULL;
}

int gb_model_scaler_to_device(gb_model *m)
{
    if (!m->scaler)
        return 0;
    gb_instance *prec = &m->rt->inst[GB_KIND_PRECISION];
    gb_loss_scaler s;
    GB_CALL(prec, "scaler_get", m->rt->precision->scaler_get(prec->self, &s));
    m->scaler_skipped_base = s.skipped_steps;
    GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "copy to device",
            m->rt->dev->copy(m->dev, m->scaler, &s, sizeof s, GB_COPY_HOST_TO_DEVICE));
    return 0;
}

int gb_model_scaler_to_host(gb_model *m)
{
    if (!m->scaler)
        return 0;
    gb_instance *prec = &m->rt->inst[GB_KIND_PRECISION];
    gb_loss_scaler s;
    GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "copy to host",
            m->rt->dev->copy(m->dev, &s, m->scaler, sizeof s, GB_COPY_DEVICE_TO_HOST));
    GB_CALL(prec, "scaler_set", m->rt->precision->scaler_set(prec->self, &s));
    return 0;
}

static int allocate_parameters(gb_model *m)
{
    m->params = ALLOC_F32(m, m->n_params, params);
    if (m->act != GB_F32 && !(m->params_lowp = ALLOC_ACT(m, m->n_params, params)))
        return -1;
    m->p.layers = calloc((size_t)m->cfg.n_layer, sizeof(layer_params));
    m->g.layers = calloc((size_t)m->cfg.n_layer, sizeof(layer_params));
    if (!m->params || !m->p.layers || !m->g.layers)
        return -1;
    bind_views(m, m->params, &m->p);
    m->groups = calloc((size_t)m->n_tensors, sizeof *m->groups);
    if (!m->groups)
        return -1;
    for (int i = 0; i < m->n_tensors; i++)
        m->groups[i] = (gb_param_group){m->tensors[i].offset, m->tensors[i].numel,
                                        m->tensors[i].decay};
    if (!m->train)
        return 0;
    m->grads = ALLOC_F32(m, m->n_params, grads);
    m->norm_sq = ALLOC_F32(m, 1, grads);
    if (!m->grads || !m->norm_sq)
        return -1;
    bind_views(m, m->grads, &m->g);
    gb_instance *opt = &m->rt->inst[GB_KIND_OPTIM];
    size_t workspace_bytes;
    if (gb_optim_bind_params(m->rt, m->tensors, m->n_tensors, m->n_params,
                             m->params_lowp ? m->act : GB_F32, &workspace_bytes))
        return -1;
    m->optim_state_bytes = m->rt->optim->state_bytes(opt->self, m->n_params);
    m->optim_state = device_alloc(m, m->optim_state_bytes, &m->plan.optimizer);
    if (!m->optim_state || (workspace_bytes &&
        !(m->optim_workspace = device_alloc(m, workspace_bytes, &m->plan.optimizer))))
        return -1;
    if (!m->rt->precision->update || !place_scaler(m))
        return 0;
    m->scaler = device_alloc(m, sizeof *m->scaler, &m->plan.optimizer);
    return m->scaler ? 0 : -1;
}

int64_t gb_model_table_rows(const gb_model_config *cfg)
{
    return cfg->padded_vocab_size ? cfg->padded_vocab_size : cfg->vocab_size;
}

/* What the model asks of the config beyond its sizes: padding that covers the vocabulary
 * (which may come from the data), a device with dropout (optional in ABI 1.7) when a
 * training model drops (evaluation and sampling never do), and one with GELU's tanh form
 * (optional in ABI 1.2) when the model uses it. Checked when the model is made, not when
 * it is only planned (a plan sizes buffers; its callers go on to make the model). */
static int check_model_choices(const gb_runtime *rt, const gb_model_config *cfg, int train)
{
    const gb_device_ops *ops = rt->dev;
    const gb_plugin *dev = rt->inst[GB_KIND_DEVICE].plugin;
    if (gb_model_table_rows(cfg) < cfg->vocab_size) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: [model] padded_vocab_size = %lld "
                  "is smaller than the vocabulary (%lld ids); pad up or set 0",
                  (long long)cfg->padded_vocab_size, (long long)cfg->vocab_size);
        return -1;
    }
    if (train && cfg->dropout > 0.0f && !GB_DEVICE_HAS(ops, dropout)) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: [model] dropout = %g: [device] "
                  "plugin = %s (%s) has no dropout kernel (ABI 1.7's dropout); use a device "
                  "that has one (cpu, cuda), or set dropout = 0", (double)cfg->dropout,
                  dev->desc->name, dev->path);
        return -1;
    }
    if (!cfg->gelu_tanh ||
        (GB_DEVICE_HAS(ops, gelu_tanh_forward) && GB_DEVICE_HAS(ops, gelu_tanh_backward)))
        return 0;
    gb_report(GB_REPORT_ERROR, "model", "gearbox: error: [model] gelu = tanh: [device] plugin = "
              "%s (%s) has no kernels for GELU's tanh form (gelu_tanh_forward/backward, "
              "GB_CAP_GELU_TANH); use gelu = erf, or a device that has them (cpu, cuda)",
              dev->desc->name, dev->path);
    return -1;
}

static const struct {
    gb_fusion bit;
    const char *key;
} fusion_keys[] = {
    {GB_FUSE_CLASSIFIER, "fuse_classifier"},
    {GB_FUSE_GELU, "fuse_gelu"},
    {GB_FUSE_BIAS_GRAD, "fuse_bias_grad"},
    {GB_FUSE_RESIDUAL_NORM, "fuse_residual_norm"},
};

/* Why fusion f cannot apply to model m on its device, or NULL when it can. */
static const char *fusion_obstacle(const gb_model *m, gb_fusion f)
{
    const gb_runtime *rt = m->rt;
    int epilogues = (gb_plugin_caps(rt->inst[GB_KIND_DEVICE].plugin->desc) &
                     GB_CAP_MATMUL_EPILOGUES) != 0;
    if (!m->train)
        return "not training";
    switch (f) {
    case GB_FUSE_CLASSIFIER:
        return NULL;
    case GB_FUSE_GELU:
        if (!epilogues)
            return "the device's matmul has no epilogues (GB_CAP_MATMUL_EPILOGUES)";
        return m->cfg.recompute == GB_RECOMPUTE_NORM_GELU
                   ? "recompute = norm_gelu recomputes GELU with its own kernel"
                   : NULL;
    case GB_FUSE_BIAS_GRAD:
        if (!m->cfg.bias)
            return "the model has no biases";
        return epilogues ? NULL : "the device's matmul has no epilogues (GB_CAP_MATMUL_EPILOGUES)";
    case GB_FUSE_RESIDUAL_NORM:
        return GB_DEVICE_HAS(rt->dev, add_layernorm_forward)
                   ? NULL
                   : "the device has no add_layernorm_forward (ABI 1.5)";
    }
    return "unknown fusion";
}

/* The plan's line on fusions: those in effect, and why each wanted one is not (its key
 * stays true, as the effective config `gearbox check` prints under this line says). */
static void print_fusions(const gb_model *m, FILE *out, const char *prefix)
{
    fprintf(out, "%sfusions:", prefix);
    const char *sep = " ";
    for (size_t i = 0; i < sizeof fusion_keys / sizeof fusion_keys[0]; i++)
        if (m->fused & fusion_keys[i].bit) {
            fprintf(out, "%s%s", sep, fusion_keys[i].key);
            sep = ", ";
        }
    if (!m->fused)
        fprintf(out, " none");
    for (size_t i = 0; i < sizeof fusion_keys / sizeof fusion_keys[0]; i++)
        if ((m->cfg.fuse & ~m->fused) & fusion_keys[i].bit)
            fprintf(out, "; %s = true, not applied: %s", fusion_keys[i].key,
                    fusion_obstacle(m, fusion_keys[i].bit));
    fprintf(out, "\n");
}

/* A model whose tensors are laid out and whose buffers are sized, and allocated unless
 * planning_only: creation and planning share every size computation. NULL on failure. */
static gb_model *lay_out(gb_runtime *rt, const gb_model_config *cfg, int64_t batch, int train,
                         int planning_only)
{
    gb_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->rt = rt;
    m->dev = rt->inst[GB_KIND_DEVICE].self;
    m->cfg = *cfg;
    m->B = batch;
    m->train = train;
    m->planning_only = planning_only;
    m->act = rt->policy.activation_dtype;
    m->tf32 = rt->policy.tf32;
    m->act_size = gb_dtype_size(m->act);
    /* logits rows a padded vocabulary apart where the device takes them (ABI 1.3) */
    m->logits_ld = GB_DEVICE_HAS(rt->dev, cross_entropy_ld) ? gb_model_table_rows(cfg)
                                                            : cfg->vocab_size;
    for (unsigned f = 1; f <= GB_FUSE_RESIDUAL_NORM; f <<= 1)
        if ((cfg->fuse & f) && !fusion_obstacle(m, (gb_fusion)f))
            m->fused |= f;
    plan_tensors(m);
    if (!m->tensors || plan_attention(m) || allocate_parameters(m) || allocate_activations(m)) {
        gb_model_free(m);
        return NULL;
    }
    return m;
}

/* What an allocated model needs beyond its device buffers. */
static int finish_creation(gb_model *m)
{
    m->host_losses = malloc((size_t)(m->B * m->cfg.block_size) * sizeof(float));
    if (!m->host_losses)
        return -1;
    if (m->train)
        GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "memset_zero",
                m->rt->dev->memset_zero(m->dev, m->optim_state, m->optim_state_bytes));
    return gb_model_scaler_to_device(m);
}

gb_model *gb_model_create(gb_runtime *rt, const gb_model_config *cfg, int64_t batch, int train)
{
    if (check_model_choices(rt, cfg, train))
        return NULL;
    gb_model *m = lay_out(rt, cfg, batch, train, 0);
    if (!m || finish_creation(m)) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: could not allocate the model "
                  "(batch %lld, block_size %lld) on the %s device", (long long)batch,
                  (long long)cfg->block_size, rt->device.family);
        gb_model_free(m);
        return NULL;
    }
    return m;
}

int gb_model_plan(gb_runtime *rt, const gb_model_config *cfg, int64_t batch, int train,
                  gb_memory_plan *out)
{
    gb_model *m = lay_out(rt, cfg, batch, train, 1);
    if (!m)
        return -1;
    *out = m->plan;
    gb_model_free(m);
    return 0;
}

/* ---- step figures -------------------------------------------------------------------- */

/* Whether the device has ABI 1.2's pinned memory, asynchronous copies and events; an
 * older device runs every call before returning, so plain copies cost no stall there. */
static int device_queues(const gb_model *m)
{
    const gb_device_ops *ops = m->rt->dev;
    return ops->struct_size >= offsetof(gb_device_ops, event_sync) + sizeof ops->event_sync;
}

static void release_figures(gb_model *m)
{
    const gb_device_ops *ops = m->rt->dev;
    for (int i = 0; i < 2; i++)
        if (m->figures[i].event)
            ops->event_destroy(m->dev, m->figures[i].event);
    if (m->figures_host && device_queues(m))
        ops->free_host(m->dev, m->figures_host);
    else
        free(m->figures_host);
    memset(m->figures, 0, sizeof m->figures);
    m->figures_host = NULL;
    m->figures_micro = 0;
}

int gb_model_enable_figures(gb_model *m, int64_t max_micro)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const gb_device_ops *ops = m->rt->dev;
    /* each slot: the losses, then norm_sq and a gb_loss_scaler, 64-byte aligned */
    int64_t stride = (max_micro * m->B * m->cfg.block_size + 15) / 16 * 16 + 32;
    size_t bytes = 2 * (size_t)stride * sizeof(float);
    release_figures(m);
    if (device_queues(m))
        GB_CALL(dev, "alloc_host", ops->alloc_host(m->dev, bytes, (void **)&m->figures_host));
    else if (!(m->figures_host = malloc(bytes)))
        return -1;
    m->figures_micro = max_micro;
    for (int i = 0; i < 2; i++) {
        figure_slot *f = &m->figures[i];
        f->losses = m->figures_host + (size_t)i * (size_t)stride;
        f->norm_sq = f->losses + stride - 32;
        f->scaler = f->losses + stride - 16;
        if (device_queues(m))
            GB_CALL(dev, "event_create", ops->event_create(m->dev, &f->event));
    }
    return 0;
}

/* Queues a copy of device memory into the host memory of a figure slot. */
static int stage(gb_model *m, void *host, const void *src, size_t bytes)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    if (device_queues(m))
        GB_CALL(dev, "copy_async", m->rt->dev->copy_async(m->dev, host, src, bytes,
                                                           GB_COPY_DEVICE_TO_HOST, NULL));
    else
        GB_CALL(dev, "copy to host", m->rt->dev->copy(m->dev, host, src, bytes,
                                                       GB_COPY_DEVICE_TO_HOST));
    return 0;
}

int gb_model_stage_loss(gb_model *m, int64_t micro)
{
    figure_slot *f = &m->figures[m->next_figures];
    int64_t n = m->last_B * m->last_T;
    if (micro >= m->figures_micro || !m->last_has_targets) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: internal error: the loss of micro-step "
                  "%lld staged without room or targets", (long long)micro);
        return -1;
    }
    f->n_tokens = n;
    return stage(m, f->losses + micro * n, m->losses, (size_t)n * sizeof(float));
}

int gb_model_stage_step(gb_model *m, int64_t step, int64_t n_micro)
{
    figure_slot *f = &m->figures[m->next_figures];
    if (stage(m, f->norm_sq, m->norm_sq, sizeof(float)) ||
        (m->scaler && stage(m, f->scaler, m->scaler, sizeof *m->scaler)))
        return -1;
    if (f->event)
        GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "event_record",
                m->rt->dev->event_record(m->dev, f->event, NULL));
    f->step = step;
    f->n_micro = n_micro;
    m->next_figures ^= 1;
    return 0;
}

/* Each micro-step's mean in double, rounded to f32, then their mean: the arithmetic of
 * the synchronous read this replaced, so reported losses keep their bits. */
static double mean_staged_loss(const figure_slot *f)
{
    double micro_sum = 0.0;
    for (int64_t k = 0; k < f->n_micro; k++) {
        const float *losses = f->losses + k * f->n_tokens;
        double sum = 0.0;
        for (int64_t i = 0; i < f->n_tokens; i++)
            sum += losses[i];
        micro_sum += (float)(sum / (double)f->n_tokens);
    }
    return micro_sum / (double)f->n_micro;
}

int gb_model_step_figures(gb_model *m, int newest, gb_step_figures *out)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const figure_slot *f = &m->figures[m->next_figures ^ 1];
    const figure_slot *older = &m->figures[m->next_figures];
    /* a device with a queue may still be running the newest step: the one before it is
     * what can be read without stalling (it also waits, but behind no queued work) */
    if (!newest && f->event && !m->rt->ctx.host_access && older->step)
        f = older;
    if (!f->step) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: internal error: step figures read before "
                  "any step");
        return -1;
    }
    if (f->event)
        GB_CALL(dev, "event_sync", m->rt->dev->event_sync(m->dev, f->event));
    out->step = f->step;
    out->loss = mean_staged_loss(f);
    out->grad_norm = sqrtf(*f->norm_sq);
    out->loss_scale = gb_model_loss_scale(m);
    out->skipped_steps = m->skipped_steps;
    if (m->scaler) {   /* the device's scaler as that step's update left it */
        gb_loss_scaler s;
        memcpy(&s, f->scaler, sizeof s);
        out->loss_scale = s.scale;
        out->skipped_steps = s.skipped_steps - m->scaler_skipped_base;
    }
    return 0;
}

void gb_model_free(gb_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < 2; i++)
        if (m->graphs[i].graph)
            m->rt->dev->graph_destroy(m->dev, m->graphs[i].graph);
    for (int i = 0; i < m->n_allocations; i++)
        m->rt->dev->free(m->dev, m->allocations[i]);
    free(m->allocations);
    free(m->tensors);
    free(m->groups);
    free(m->p.layers);
    free(m->g.layers);
    free(m->acts);
    free(m->host_losses);
    release_figures(m);
    free(m);
}

static const char *recompute_name(gb_recompute r)
{
    return r == GB_RECOMPUTE_BLOCK ? "block" : r == GB_RECOMPUTE_NORM_GELU ? "norm_gelu" : "none";
}

/* What recomputation saves: the activations the same model would plan keeping everything. */
static void print_recompute_savings(const gb_model *m, FILE *out, const char *prefix)
{
    gb_model_config keep_all = m->cfg;
    keep_all.recompute = GB_RECOMPUTE_NONE;
    gb_memory_plan full;
    if (gb_model_plan(m->rt, &keep_all, m->B, 1, &full))
        return;
    const double mib = 1024.0 * 1024.0;
    fprintf(out, "%srecompute = %s: activations %.2f MiB instead of %.2f (%.2f MiB less), "
            "for %s in backward\n", prefix, recompute_name(m->cfg.recompute),
            m->plan.activations / mib, full.activations / mib, (double)(full.activations - m->plan.activations) / mib,
            m->cfg.recompute == GB_RECOMPUTE_BLOCK ? "one more forward pass"
                                                   : "LayerNorm and GELU forward again");
}

void gb_memory_plan_print(const gb_memory_plan *p, FILE *out, const char *prefix)
{
    const double mib = 1024.0 * 1024.0;
    fprintf(out, "%smemory plan: %.2f MiB = params %.2f + grads %.2f + optimizer %.2f + "
            "activations %.2f + workspace %.2f\n", prefix, (double)(p->params + p->grads +
            p->optimizer + p->activations + p->workspace) / mib, p->params / mib,
            p->grads / mib, p->optimizer / mib, p->activations / mib, p->workspace / mib);
}

void gb_model_print_memory(const gb_model *m, FILE *out, const char *prefix)
{
    gb_memory_plan_print(&m->plan, out, prefix);
    if (m->train && m->cfg.recompute != GB_RECOMPUTE_NONE)
        print_recompute_savings(m, out, prefix);
    if (m->train)
        print_fusions(m, out, prefix);
}

const gb_param_tensor *gb_model_tensors(const gb_model *m, int *count)
{
    *count = m->n_tensors;
    return m->tensors;
}

int64_t gb_model_num_params(const gb_model *m)
{
    return m->n_params;
}

gb_memory_plan gb_model_memory(const gb_model *m)
{
    return m->plan;
}

/* ---- profiling ----------------------------------------------------------------------- */

void gb_model_set_profile(gb_model *m, gb_profile *profile)
{
    m->profile = profile;
}

/* The start of a timed call: queued work is finished first so it is not counted. */
static double phase_begin(gb_model *m)
{
    if (!m->profile)
        return 0.0;
    m->rt->dev->sync(m->dev);
    return gb_now_ms();
}

static void phase_end(gb_model *m, gb_phase phase, double start)
{
    if (!m->profile)
        return;
    m->rt->dev->sync(m->dev);
    if (m->recomputing)
        phase = GB_PHASE_RECOMPUTE;
    m->profile->ms[phase] += gb_now_ms() - start;
    m->profile->calls[phase]++;
}

/* Adds `flops` executed by a call of `phase` to the profile, when one is attached. */
static void count_flops(gb_model *m, gb_phase phase, double flops)
{
    if (!m->profile)
        return;
    m->profile->flops[m->recomputing ? GB_PHASE_RECOMPUTE : phase] += flops;
}

static double matmul_flops(const gb_matmul_args *a)
{
    return 2.0 * (double)a->m * (double)a->n * (double)a->k * (double)(a->batch > 1 ? a->batch : 1);
}

/* One (T, T) x (T, D) product per head over the causal triangle, diagonal included. */
static double causal_product_flops(const gb_attn_problem *p)
{
    double T = (double)p->seq_len;
    return 2.0 * (double)p->batch * (double)p->heads * (double)p->head_dim * T * (T + 1.0) / 2.0;
}

/* Runs one plugin call as part of `phase`; a failure ends the function with -1. */
#define TIMED_CALL(m, phase, inst, what, call)      \
    do {                                            \
        double start_ = phase_begin(m);             \
        GB_CALL((inst), (what), (call));            \
        phase_end((m), (phase), start_);            \
    } while (0)

/* ---- host <-> device ----------------------------------------------------------------- */

static int copy_to_device(gb_model *m, void *dst, const void *src, size_t bytes)
{
    GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "copy to device",
            m->rt->dev->copy(m->dev, dst, src, bytes, GB_COPY_HOST_TO_DEVICE));
    return 0;
}

static int copy_to_host(gb_model *m, void *dst, const void *src, size_t bytes)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    GB_CALL(dev, "sync", m->rt->dev->sync(m->dev));
    GB_CALL(dev, "copy to host", m->rt->dev->copy(m->dev, dst, src, bytes,
                                                   GB_COPY_DEVICE_TO_HOST));
    return 0;
}

/* The low-precision working copy of `host` (n_params f32) on the device. Later copies
 * are the optimizer's, written in the same pass as the master weights. */
static int set_working_params(gb_model *m, const float *host)
{
    uint16_t *lowp = malloc((size_t)m->n_params * sizeof *lowp);
    if (!lowp)
        return -1;
    for (int64_t i = 0; i < m->n_params; i++)
        lowp[i] = m->act == GB_BF16 ? gb_bf16_from_f32(host[i]) : gb_f16_from_f32(host[i]);
    int rc = copy_to_device(m, m->params_lowp, lowp, (size_t)m->n_params * sizeof *lowp);
    free(lowp);
    return rc;
}

int gb_model_set_params(gb_model *m, const float *host)
{
    if (copy_to_device(m, m->params, host, (size_t)m->n_params * sizeof(float)))
        return -1;
    return m->params_lowp ? set_working_params(m, host) : 0;
}

int gb_model_get_params(gb_model *m, float *host)
{
    return copy_to_host(m, host, m->params, (size_t)m->n_params * sizeof(float));
}

int gb_model_get_grads(gb_model *m, float *host)
{
    return copy_to_host(m, host, m->grads, (size_t)m->n_params * sizeof(float));
}

size_t gb_model_optim_state_bytes(const gb_model *m)
{
    return m->optim_state_bytes;
}

int gb_model_set_optim_state(gb_model *m, const void *host)
{
    return copy_to_device(m, m->optim_state, host, m->optim_state_bytes);
}

int gb_model_get_optim_state(gb_model *m, void *host)
{
    return copy_to_host(m, host, m->optim_state, m->optim_state_bytes);
}

int gb_model_init(gb_model *m, uint64_t seed)
{
    m->seed = seed;
    float *host = malloc((size_t)m->n_params * sizeof(float));
    if (!host)
        return -1;
    double residual_std = 0.02 / sqrt(2.0 * (double)m->cfg.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const gb_param_tensor *t = &m->tensors[i];
        float *dst = host + t->offset;
        int is_layernorm = strstr(t->name, "ln_") != NULL;
        int is_bias = strstr(t->name, ".bias") != NULL;
        int is_residual_proj = strstr(t->name, "c_proj.weight") != NULL;
        /* one stream per tensor, so adding biases does not shift every other tensor */
        gb_rng rng = gb_rng_stream(seed, GB_RNG_INIT, (uint64_t)i, 0);
        /* wte's padding rows stay 0: no token selects them and no logit reads them */
        int64_t numel = strcmp(t->name, "wte") == 0 ? m->cfg.vocab_size * t->cols : t->numel;
        memset(dst, 0, (size_t)t->numel * sizeof *dst);
        for (int64_t j = 0; j < numel; j++) {
            if (is_bias)
                dst[j] = 0.0f;
            else if (is_layernorm)
                dst[j] = 1.0f;
            else
                dst[j] = (float)(gb_rng_normal(&rng) * (is_residual_proj ? residual_std : 0.02));
        }
    }
    int rc = gb_model_set_params(m, host);
    free(host);
    return rc;
}

/* ---- forward ------------------------------------------------------------------------- */

/* out (N, OC), rows ld apart, = epilogue(in (N, IC) @ W (OC, IC)^T + bias (OC)), the
 * pre-activation into aux (N, OC) for a GELU epilogue */
static int linear_forward_ep(gb_model *m, void *out, int64_t ld, const void *in, const float *W,
                             const float *bias, int64_t N, int64_t IC, int64_t OC,
                             gb_matmul_epilogue epilogue, void *aux)
{
    gb_matmul_args a = {
        .struct_size = sizeof a, .m = N, .n = OC, .k = IC,
        .a = in, .lda = IC, .trans_a = 0, .dtype_a = m->act,
        .b = working(m, W), .ldb = IC, .trans_b = 1, .dtype_b = m->act,
        .c = out, .ldc = ld, .dtype_c = m->act,
        .alpha = 1.0f, .beta = 0.0f, .bias = bias, .allow_tf32 = m->tf32,
        .epilogue = epilogue, .aux = aux,
        /* the optimizer's 16-bit copy: no cast of the bias before the product */
        .bias_lowp = bias && m->params_lowp ? working(m, bias) : NULL,
    };
    TIMED_CALL(m, GB_PHASE_FWD_MATMUL, &m->rt->inst[GB_KIND_DEVICE], "matmul",
               m->rt->dev->matmul(m->dev, &a));
    count_flops(m, GB_PHASE_FWD_MATMUL, matmul_flops(&a));
    return 0;
}

/* out (N, OC) = in (N, IC) @ W (OC, IC)^T + bias (OC) */
static int linear_forward(gb_model *m, void *out, const void *in, const float *W,
                          const float *bias, int64_t N, int64_t IC, int64_t OC)
{
    return linear_forward_ep(m, out, OC, in, W, bias, N, IC, OC, GB_EPILOGUE_DEFAULT, NULL);
}

/* dinp (N, IC) = dx_epilogue(dout (N, OC) @ W (OC, IC)), reading dx_aux (N, IC) for a
 * DGELU epilogue; dW (OC, IC) += dout^T @ in; dbias += sum(dout), in the dW product's
 * epilogue under GB_FUSE_BIAS_GRAD; dout's rows are ld apart (only OC without a bias) */
static int linear_backward_ep(gb_model *m, void *dinp, float *dW, float *dbias,
                              const void *dout, int64_t ld, const void *in, const float *W,
                              int64_t N, int64_t IC, int64_t OC, gb_matmul_epilogue dx_epilogue,
                              void *dx_aux)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    int fused_bias = dbias && (m->fused & GB_FUSE_BIAS_GRAD);
    gb_matmul_args dx = {
        .struct_size = sizeof dx, .m = N, .n = IC, .k = OC,
        .a = dout, .lda = ld, .trans_a = 0, .dtype_a = m->act,
        .b = working(m, W), .ldb = IC, .trans_b = 0, .dtype_b = m->act,
        .c = dinp, .ldc = IC, .dtype_c = m->act,
        .alpha = 1.0f, .beta = 0.0f, .allow_tf32 = m->tf32,
        .epilogue = dx_epilogue, .aux = dx_aux,
    };
    gb_matmul_args dw = {
        .struct_size = sizeof dw, .m = OC, .n = IC, .k = N,
        .a = dout, .lda = ld, .trans_a = 1, .dtype_a = m->act,
        .b = in, .ldb = IC, .trans_b = 0, .dtype_b = m->act,
        .c = dW, .ldc = IC, .dtype_c = GB_F32,
        .alpha = 1.0f, .beta = 1.0f, .allow_tf32 = m->tf32,
        .epilogue = fused_bias ? GB_EPILOGUE_BIAS_GRAD : GB_EPILOGUE_DEFAULT,
        .bias_grad = fused_bias ? dbias : NULL,
    };
    TIMED_CALL(m, GB_PHASE_BWD_MATMUL_DX, dev, "matmul", m->rt->dev->matmul(m->dev, &dx));
    TIMED_CALL(m, GB_PHASE_BWD_MATMUL_DW, dev, "matmul", m->rt->dev->matmul(m->dev, &dw));
    count_flops(m, GB_PHASE_BWD_MATMUL_DX, matmul_flops(&dx));
    count_flops(m, GB_PHASE_BWD_MATMUL_DW, matmul_flops(&dw));
    if (dbias && !fused_bias)
        TIMED_CALL(m, GB_PHASE_BWD_BIAS, dev, "bias_backward",
                   m->rt->dev->bias_backward(m->dev, m->act, dbias, dout, N, OC));
    return 0;
}

static int linear_backward(gb_model *m, void *dinp, float *dW, float *dbias, const void *dout,
                           const void *in, const float *W, int64_t N, int64_t IC, int64_t OC)
{
    return linear_backward_ep(m, dinp, dW, dbias, dout, OC, in, W, N, IC, OC,
                              GB_EPILOGUE_DEFAULT, NULL);
}

/* Softmax cross-entropy over the logits' V real columns, with its gradient into dlogits
 * when that is not NULL. */
static gb_status cross_entropy(gb_model *m, void *dlogits, int64_t N, float dloss)
{
    const gb_device_ops *ops = m->rt->dev;
    int64_t V = m->cfg.vocab_size;
    if (m->logits_ld != V)
        return ops->cross_entropy_ld(m->dev, m->act, m->losses, dlogits, m->logits,
                                     m->logits_ld, m->targets, N, V, dloss);
    return ops->cross_entropy(m->dev, m->act, m->losses, dlogits, m->logits, m->targets, N, V,
                              dloss);
}

/* cross_entropy with dlogits in place, the loss gradient of each row (dloss) multiplied
 * by the loss scale: by the kernel, reading the device's scaler, or already by the caller
 * from the precision plugin's, so the same product either way. */
static gb_status scaled_cross_entropy(gb_model *m, int64_t N, float dloss)
{
    if (!m->scaler)
        return cross_entropy(m, m->logits, N, dloss);
    return m->rt->dev->cross_entropy_scaled(m->dev, m->act, m->losses, m->logits, m->logits,
                                            m->logits_ld, m->targets, N, m->cfg.vocab_size,
                                            dloss, &m->scaler->scale);
}

/* A (B, H, T, D) view of one of q, k, v inside the packed (B, T, 3, H, D) buffer, or of a
 * (B, T, H, D) buffer when `packed` is 0. */
static gb_tensor heads_view(const gb_model *m, void *base, int64_t B, int64_t T, int packed)
{
    int64_t C = m->cfg.n_embd, H = m->cfg.n_head, D = C / H;
    int64_t row = packed ? 3 * C : C;
    return (gb_tensor){
        .data = base, .dtype = m->act, .ndim = 4,
        .shape = {B, H, T, D},
        .stride = {T * row, D, row, 1},
    };
}

/* Dropout's sites in a micro-step: the embeddings' sum, then per layer the attention
 * projection's and the MLP's output. */
enum { DROP_EMBED = 0, DROP_ATTN = 1, DROP_MLP = 2 };
#define DROP_SITE(l, which) (1 + 2 * (uint64_t)(l) + ((which) - DROP_ATTN))

/* out = dropout(in) over n activations at `site` of the micro-step being trained, when the
 * pass drops (nothing otherwise); forward and backward (which applies it to the gradient)
 * draw the same mask. Timed with the residual adds beside it in forward, with the input
 * gradients in backward. */
static int dropout(gb_model *m, gb_phase phase, void *out, const void *in, int64_t n,
                   uint64_t site)
{
    if (!m->dropping)
        return 0;
    gb_rng r = gb_rng_stream(m->seed, GB_RNG_DROPOUT, m->dropout_step, site);
    uint64_t seed = gb_rng_next(&r);
    TIMED_CALL(m, phase, &m->rt->inst[GB_KIND_DEVICE], "dropout",
               m->rt->dev->dropout(m->dev, m->act, out, in, n, m->cfg.dropout, seed));
    return 0;
}

/* The gradient `grad` through dropout at `site`: grad itself when the pass did not drop,
 * else `scratch` holding dropout(grad). NULL after reporting a failed call. */
static const void *dropout_grad(gb_model *m, void *scratch, const void *grad, int64_t n,
                                uint64_t site)
{
    if (!m->dropping)
        return grad;
    return dropout(m, GB_PHASE_BWD_MATMUL_DX, scratch, grad, n, site) ? NULL : scratch;
}

static int attention_forward(gb_model *m, layer_acts *a, int64_t B, int64_t T)
{
    gb_instance *inst = &m->rt->inst[GB_KIND_ATTN];
    int64_t C = m->cfg.n_embd;
    gb_attn_problem prob = attn_problem(m, B, T);
    gb_tensor out = heads_view(m, a->atty, B, T, 0), q = heads_view(m, a->qkv, B, T, 1),
              k = heads_view(m, at(m, a->qkv, C), B, T, 1),
              v = heads_view(m, at(m, a->qkv, 2 * C), B, T, 1);
    if (m->kv) /* the new rows over the keys and values of the positions before them */
        return gb_kv_cache_attention(m->kv, a - m->acts, &prob, out, q, k, v);
    TIMED_CALL(m, GB_PHASE_FWD_ATTN, inst, "forward",
               m->rt->attn->forward(inst->self, &prob, out, q, k, v, a->attn_saved,
                                    m->attn_workspace));
    count_flops(m, GB_PHASE_FWD_ATTN, 2.0 * causal_product_flops(&prob));
    return 0;
}

static int layernorm_forward(gb_model *m, void *out, float *mean, float *rstd, const void *x,
                             const float *w, const float *b, int64_t N)
{
    TIMED_CALL(m, GB_PHASE_FWD_LAYERNORM, &m->rt->inst[GB_KIND_DEVICE], "layernorm_forward",
               m->rt->dev->layernorm_forward(m->dev, m->act, out, mean, rstd, x, w, b, N,
                                             m->cfg.n_embd, 1e-5f));
    return 0;
}

/* out = GELU(x) in the model's form (erf, or GPT-2's tanh). */
static int gelu_forward(gb_model *m, void *out, const void *x, int64_t n)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const gb_device_ops *ops = m->rt->dev;
    if (m->cfg.gelu_tanh)
        TIMED_CALL(m, GB_PHASE_FWD_GELU, dev, "gelu_tanh_forward",
                   ops->gelu_tanh_forward(m->dev, m->act, out, x, n));
    else
        TIMED_CALL(m, GB_PHASE_FWD_GELU, dev, "gelu_forward",
                   ops->gelu_forward(m->dev, m->act, out, x, n));
    return 0;
}

/* sum = a + b and out = LayerNorm(sum) with weight w and bias b: one kernel under
 * GB_FUSE_RESIDUAL_NORM (the same bits), else the add and then the LayerNorm. */
static int add_layernorm_forward(gb_model *m, void *sum, void *out, float *mean, float *rstd,
                                 const void *a, const void *b, const float *w,
                                 const float *bias, int64_t N)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const gb_device_ops *ops = m->rt->dev;
    int64_t C = m->cfg.n_embd;
    if (!(m->fused & GB_FUSE_RESIDUAL_NORM)) {
        TIMED_CALL(m, GB_PHASE_FWD_RESIDUAL, dev, "add",
                   ops->add(m->dev, m->act, sum, a, b, N * C));
        return layernorm_forward(m, out, mean, rstd, sum, w, bias, N);
    }
    TIMED_CALL(m, GB_PHASE_FWD_LAYERNORM, dev, "add_layernorm_forward",
               ops->add_layernorm_forward(m->dev, m->act, sum, out, mean, rstd, a, b, w, bias,
                                          N, C, 1e-5f));
    return 0;
}

/* The MLP's first linear layer and GELU: fch, the pre-activation, and fch_gelu; one matmul
 * with a GELU epilogue under GB_FUSE_GELU. */
static int mlp_up_forward(gb_model *m, layer_acts *a, const layer_params *p, int64_t N)
{
    int64_t C = m->cfg.n_embd;
    if (m->fused & GB_FUSE_GELU)
        return linear_forward_ep(m, a->fch_gelu, 4 * C, a->ln2, p->fcw, p->fcb, N, C, 4 * C,
                                 m->cfg.gelu_tanh ? GB_EPILOGUE_GELU_TANH : GB_EPILOGUE_GELU,
                                 a->fch);
    return linear_forward(m, a->fch, a->ln2, p->fcw, p->fcb, N, C, 4 * C) ||
           gelu_forward(m, a->fch_gelu, a->fch, N * 4 * C);
}

/* Block l over `residual`. Under GB_FUSE_RESIDUAL_NORM the forward pass (not a
 * recomputation) leaves ln1 to the block before, whose last residual add also normalises
 * into this block's ln1, and this block's into the next's ln1 or the final LayerNorm. */
static int block_forward(gb_model *m, int64_t l, const void *residual, int64_t B, int64_t T)
{
    layer_params *p = &m->p.layers[l];
    layer_acts *a = &m->acts[l];
    int64_t N = B * T, C = m->cfg.n_embd;
    int chain = (m->fused & GB_FUSE_RESIDUAL_NORM) && !m->recomputing;
    if (!(chain && l > 0) &&
        layernorm_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, residual, p->ln1w, p->ln1b, N))
        return -1;
    if (linear_forward(m, a->qkv, a->ln1, p->qkvw, p->qkvb, N, C, 3 * C) ||
        attention_forward(m, a, B, T) ||
        linear_forward(m, m->proj, a->atty, p->projw, p->projb, N, C, C) ||
        dropout(m, GB_PHASE_FWD_RESIDUAL, m->proj, m->proj, N * C, DROP_SITE(l, DROP_ATTN)) ||
        add_layernorm_forward(m, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, residual, m->proj,
                              p->ln2w, p->ln2b, N) ||
        mlp_up_forward(m, a, p, N) ||
        linear_forward(m, m->proj, a->fch_gelu, p->fcprojw, p->fcprojb, N, 4 * C, C) ||
        dropout(m, GB_PHASE_FWD_RESIDUAL, m->proj, m->proj, N * C, DROP_SITE(l, DROP_MLP)))
        return -1;
    if (chain && l + 1 < m->cfg.n_layer) {
        layer_acts *next = &m->acts[l + 1];
        layer_params *np = &m->p.layers[l + 1];
        return add_layernorm_forward(m, a->res3, next->ln1, next->ln1_mean, next->ln1_rstd,
                                     a->res2, m->proj, np->ln1w, np->ln1b, N);
    }
    if (chain)
        return add_layernorm_forward(m, a->res3, m->lnf, m->lnf_mean, m->lnf_rstd, a->res2,
                                     m->proj, m->p.lnfw, m->p.lnfb, N);
    TIMED_CALL(m, GB_PHASE_FWD_RESIDUAL, &m->rt->inst[GB_KIND_DEVICE], "add",
               m->rt->dev->add(m->dev, m->act, a->res3, a->res2, m->proj, N * C));
    return 0;
}

static int read_mean_loss(gb_model *m, int64_t N, float *mean_loss)
{
    if (copy_to_host(m, m->host_losses, m->losses, (size_t)N * sizeof(float)))
        return -1;
    double sum = 0.0;
    for (int64_t i = 0; i < N; i++)
        sum += m->host_losses[i];
    *mean_loss = (float)(sum / (double)N);
    return 0;
}

static int check_batch_shape(const gb_model *m, int64_t B, int64_t T)
{
    if (B >= 1 && B <= m->B && T >= 1 && T <= m->cfg.block_size)
        return 0;
    gb_report(GB_REPORT_ERROR, "model", "gearbox: error: forward of (B %lld, T %lld) exceeds "
              "the planned (B %lld, T %lld)", (long long)B, (long long)T, (long long)m->B,
              (long long)m->cfg.block_size);
    return -1;
}

/* Forward over the batch in m->tokens (and m->targets when has_targets); with_grad: the
 * loss pass also leaves the loss gradient, scaled by dlogit_scale, in place of the logits
 * (GB_FUSE_CLASSIFIER). */
static int forward_on_device(gb_model *m, int64_t B, int64_t T, int has_targets,
                             float *mean_loss, int with_grad, float dlogit_scale)
{
    const gb_device_ops *ops = m->rt->dev;
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    int64_t C = m->cfg.n_embd, V = m->cfg.vocab_size, N = B * T;
    /* over a KV cache the tokens start at the first position it does not hold */
    const float *wpe = m->p.wpe + (m->kv ? gb_kv_cache_past(m->kv) * C : 0);
    TIMED_CALL(m, GB_PHASE_FWD_EMBED, dev, "embed_forward",
               ops->embed_forward(m->dev, m->act, m->encoded, m->tokens, m->p.wte, wpe, B, T,
                                  C));
    if (dropout(m, GB_PHASE_FWD_RESIDUAL, m->encoded, m->encoded, N * C, DROP_EMBED))
        return -1;
    const void *residual = m->encoded;
    for (int64_t l = 0; l < m->cfg.n_layer; l++) {
        if (block_forward(m, l, residual, B, T))
            return -1;
        residual = m->acts[l].res3;
    }
    /* the last block normalised its output already when it chained the LayerNorms */
    if ((!(m->fused & GB_FUSE_RESIDUAL_NORM) &&
         layernorm_forward(m, m->lnf, m->lnf_mean, m->lnf_rstd, residual, m->p.lnfw, m->p.lnfb,
                           N)) ||
        linear_forward_ep(m, m->logits, m->logits_ld, m->lnf, m->p.wte, NULL, N, C, V,
                          GB_EPILOGUE_DEFAULT, NULL))
        return -1;
    m->last_B = B;
    m->last_T = T;
    m->last_has_targets = has_targets;
    m->dlogits_ready = 0;
    if (!has_targets)
        return 0;
    double start = phase_begin(m);
    if (with_grad)
        GB_CALL(dev, "cross_entropy", scaled_cross_entropy(m, N, dlogit_scale));
    else
        GB_CALL(dev, "cross_entropy", cross_entropy(m, NULL, N, 0.0f));
    if (mean_loss && read_mean_loss(m, N, mean_loss))
        return -1;
    phase_end(m, GB_PHASE_FWD_LOSS, start);
    return 0;
}

/* The (B, T) batch from host memory into the batch buffers. */
static int copy_batch(gb_model *m, const int32_t *tokens, const int32_t *targets, int64_t B,
                      int64_t T)
{
    size_t bytes = (size_t)(B * T) * sizeof(int32_t);
    double start = phase_begin(m);
    if (copy_to_device(m, m->tokens, tokens, bytes) ||
        (targets && copy_to_device(m, m->targets, targets, bytes)))
        return -1;
    phase_end(m, GB_PHASE_DATA, start);
    return 0;
}

int gb_model_forward(gb_model *m, const int32_t *tokens, const int32_t *targets, int64_t B,
                     int64_t T, float *mean_loss)
{
    if (check_batch_shape(m, B, T) || copy_batch(m, tokens, targets, B, T))
        return -1;
    m->dropping = 0;   /* evaluation and sampling never drop */
    return forward_on_device(m, B, T, targets != NULL, mean_loss, 0, 0.0f);
}

int gb_model_forward_cached(gb_model *m, gb_kv_cache *c, const int32_t *tokens, int64_t B,
                            int64_t T)
{
    if (check_batch_shape(m, B, T) || copy_batch(m, tokens, NULL, B, T))
        return -1;
    m->kv = c;
    int rc = forward_on_device(m, B, T, 0, NULL, 0, 0.0f);
    m->kv = NULL;
    return rc;
}

int gb_model_load_batch(gb_model *m, const int32_t *tokens, const int32_t *targets, int64_t B,
                        int64_t T)
{
    return check_batch_shape(m, B, T) || copy_batch(m, tokens, targets, B, T);
}

void gb_model_batch_buffers(gb_model *m, int32_t **tokens, int32_t **targets)
{
    *tokens = m->tokens;
    *targets = m->targets;
}

/* ---- device graphs ------------------------------------------------------------------- */

typedef int (*graph_work)(gb_model *m, float scalar);

/* Runs `work` through graph `g`: the first time as it is (the plugins' first-call set-up,
 * such as cuBLASLt's plans, then happens outside a recording), the second time recorded
 * and the recording launched, from then on by launching it, and recorded again when n or
 * the scalar change. With a profile attached, which times each call on its own, it runs
 * as it is. */
static int run_recorded(gb_model *m, model_graph *g, int64_t n, float scalar, int variant,
                        graph_work work)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const gb_device_ops *ops = m->rt->dev;
    if (!m->use_graphs || m->profile)
        return work(m, scalar);
    if (!(g->graph && g->n == n && g->scalar == scalar && g->variant == variant)) {
        if (!g->ran) {
            g->ran = 1;
            return work(m, scalar);
        }
        if (g->graph)
            ops->graph_destroy(m->dev, g->graph);
        g->graph = NULL;
        GB_CALL(dev, "graph_begin", ops->graph_begin(m->dev));
        int failed = work(m, scalar);
        gb_status st = ops->graph_end(m->dev, &g->graph);   /* ends the recording either way */
        if (failed || st != GB_OK) {
            if (g->graph)
                ops->graph_destroy(m->dev, g->graph);
            g->graph = NULL;
            return failed ? -1 : gb_call_failed(dev, st, "graph_end");
        }
        g->n = n;
        g->scalar = scalar;
        g->variant = variant;
        m->graph_recordings++;
    }
    GB_CALL(dev, "graph_launch", ops->graph_launch(m->dev, g->graph));
    m->graph_launches++;
    return 0;
}

/* d(loss)/d(each row's loss) for a micro-batch of n rows whose mean loss has gradient
 * dloss, times the loss scale when the host keeps it (the device's scaler has the kernel
 * read its scale). */
static float dlogit_scale_of(const gb_model *m, float dloss, int64_t n)
{
    float scale = dloss / (float)n;
    if (!m->scaler)   /* the host's scale is a scalar of the work (a graph records it) */
        scale *= gb_model_loss_scale(m);
    return scale;
}

/* Training forward; `scalar` is the dlogit scale when the classifier is fused. */
static int forward_work(gb_model *m, float scalar)
{
    int fused = (m->fused & GB_FUSE_CLASSIFIER) != 0;
    return forward_on_device(m, m->last_B, m->last_T, 1, NULL, fused, scalar);
}

int gb_model_forward_loaded(gb_model *m, int64_t B, int64_t T, float dloss)
{
    if (check_batch_shape(m, B, T))
        return -1;
    m->last_B = B;
    m->last_T = T;
    int fused = (m->fused & GB_FUSE_CLASSIFIER) != 0;
    float scale = fused ? dlogit_scale_of(m, dloss, B * T) : 0.0f;
    m->dropping = m->train && m->cfg.dropout > 0.0f;
    if (run_recorded(m, &m->graphs[GRAPH_FORWARD], B * T, scale, fused, forward_work))
        return -1;
    m->last_has_targets = 1;
    m->dlogits_ready = fused;
    m->dlogits_scale = scale;
    return 0;
}

void gb_model_set_dropout_step(gb_model *m, uint64_t micro_step)
{
    m->dropout_step = micro_step;
}

void gb_model_use_graphs(gb_model *m)
{
    m->use_graphs = 1;
}

void gb_model_graph_counts(const gb_model *m, int64_t *recorded, int64_t *launched)
{
    *recorded = m->graph_recordings;
    *launched = m->graph_launches;
}

int gb_model_get_logits(gb_model *m, float *host, int64_t B, int64_t T)
{
    int64_t V = m->cfg.vocab_size, ld = m->logits_ld, N = B * T;
    size_t bytes = (size_t)(N * ld) * m->act_size;
    unsigned char *raw = malloc(bytes);
    if (!raw || copy_to_host(m, raw, m->logits, bytes)) {
        free(raw);
        return -1;
    }
    /* the real columns of each row, widened from 16 bits where the activations are */
    for (int64_t r = 0; r < N; r++)
        for (int64_t c = 0; c < V; c++) {
            size_t at = (size_t)(r * ld + c);
            uint16_t h;
            if (m->act == GB_F32) {
                memcpy(&host[r * V + c], raw + at * sizeof(float), sizeof(float));
                continue;
            }
            memcpy(&h, raw + at * sizeof h, sizeof h);
            host[r * V + c] = m->act == GB_BF16 ? gb_f32_from_bf16(h) : gb_f32_from_f16(h);
        }
    free(raw);
    return 0;
}

/* ---- backward ------------------------------------------------------------------------ */

int gb_model_zero_grads(gb_model *m)
{
    TIMED_CALL(m, GB_PHASE_ZERO_GRADS, &m->rt->inst[GB_KIND_DEVICE], "memset_zero",
               m->rt->dev->memset_zero(m->dev, m->grads, (size_t)m->n_params * sizeof(float)));
    return 0;
}

static int layernorm_backward(gb_model *m, float *dw, float *db, const void *dout,
                              const void *x, const float *w, const float *mean,
                              const float *rstd, int64_t N)
{
    TIMED_CALL(m, GB_PHASE_BWD_LAYERNORM, &m->rt->inst[GB_KIND_DEVICE], "layernorm_backward",
               m->rt->dev->layernorm_backward(m->dev, m->act, m->dres, dw, db, dout, x, w, mean,
                                              rstd, N, m->cfg.n_embd));
    return 0;
}

static int attention_backward(gb_model *m, layer_acts *a, const void *datty, int64_t B,
                              int64_t T)
{
    gb_instance *inst = &m->rt->inst[GB_KIND_ATTN];
    int64_t C = m->cfg.n_embd;
    gb_attn_problem prob = attn_problem(m, B, T);
    TIMED_CALL(m, GB_PHASE_BWD_ATTN, inst, "backward",
               m->rt->attn->backward(inst->self, &prob, heads_view(m, m->d3C, B, T, 1),
                                     heads_view(m, at(m, m->d3C, C), B, T, 1),
                                     heads_view(m, at(m, m->d3C, 2 * C), B, T, 1),
                                     heads_view(m, (void *)datty, B, T, 0),
                                     heads_view(m, a->qkv, B, T, 1),
                                     heads_view(m, at(m, a->qkv, C), B, T, 1),
                                     heads_view(m, at(m, a->qkv, 2 * C), B, T, 1),
                                     heads_view(m, a->atty, B, T, 0), a->attn_saved,
                                     m->attn_workspace));
    count_flops(m, GB_PHASE_BWD_ATTN, 4.0 * causal_product_flops(&prob));
    return 0;
}

/* ---- recomputation ------------------------------------------------------------------- */

/* Block l's activations again where backward is to read them (gb_recompute). The last
 * block's are still there from forward, which ran it last. `part` says which are wanted
 * now: under norm_gelu ln1 shares a buffer with ln2, so it comes back only after ln2 has
 * been used. */
typedef enum recompute_part { RECOMPUTE_MLP_INPUTS, RECOMPUTE_LN1 } recompute_part;

static int recompute_for_backward(gb_model *m, int64_t l, const void *residual, int64_t B,
                                  int64_t T, recompute_part part)
{
    layer_params *p = &m->p.layers[l];
    layer_acts *a = &m->acts[l];
    int64_t N = B * T;
    int last = l == m->cfg.n_layer - 1;
    int rc = 0;
    m->recomputing = 1;
    if (m->cfg.recompute == GB_RECOMPUTE_BLOCK && part == RECOMPUTE_MLP_INPUTS && !last)
        rc = block_forward(m, l, residual, B, T);
    else if (m->cfg.recompute == GB_RECOMPUTE_NORM_GELU && part == RECOMPUTE_MLP_INPUTS && !last)
        rc = layernorm_forward(m, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b,
                               N) ||
             gelu_forward(m, a->fch_gelu, a->fch, N * 4 * m->cfg.n_embd);
    else if (m->cfg.recompute == GB_RECOMPUTE_NORM_GELU && part == RECOMPUTE_LN1)
        rc = layernorm_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, residual, p->ln1w, p->ln1b,
                               N);
    m->recomputing = 0;
    return rc;
}

/* dx = dout * GELU'(x) in place of dout, in the model's form. */
static int gelu_backward(gb_model *m, void *dx, const void *x, int64_t n)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const gb_device_ops *ops = m->rt->dev;
    if (m->cfg.gelu_tanh)
        TIMED_CALL(m, GB_PHASE_BWD_GELU, dev, "gelu_tanh_backward",
                   ops->gelu_tanh_backward(m->dev, m->act, dx, x, dx, n));
    else
        TIMED_CALL(m, GB_PHASE_BWD_GELU, dev, "gelu_backward",
                   ops->gelu_backward(m->dev, m->act, dx, x, dx, n));
    return 0;
}

/* m->dres holds d(loss)/d(res3) on entry and d(loss)/d(residual) on return. */
static int block_backward(gb_model *m, int64_t l, const void *residual, int64_t B, int64_t T)
{
    layer_params *p = &m->p.layers[l], *g = &m->g.layers[l];
    layer_acts *a = &m->acts[l];
    int64_t N = B * T, C = m->cfg.n_embd;
    /* under GB_FUSE_GELU the input gradient's matmul multiplies by GELU' itself */
    int fused = (m->fused & GB_FUSE_GELU) != 0;
    gb_matmul_epilogue dgelu = !fused ? GB_EPILOGUE_DEFAULT
                               : m->cfg.gelu_tanh ? GB_EPILOGUE_DGELU_TANH : GB_EPILOGUE_DGELU;
    /* dres passes dropout's mask to each branch it feeds and stays whole for the residual
     * path: the masked copies go to scratch free at that point (dC, then d4C) */
    const void *dmlp = NULL;
    if (recompute_for_backward(m, l, residual, B, T, RECOMPUTE_MLP_INPUTS) ||
        !(dmlp = dropout_grad(m, m->dC, m->dres, N * C, DROP_SITE(l, DROP_MLP))) ||
        linear_backward_ep(m, m->d4C, g->fcprojw, g->fcprojb, dmlp, C, a->fch_gelu,
                           p->fcprojw, N, 4 * C, C, dgelu, fused ? a->fch : NULL))
        return -1;
    const void *dattn = NULL;
    if ((!fused && gelu_backward(m, m->d4C, a->fch, N * 4 * C)) ||
        linear_backward(m, m->dC, g->fcw, g->fcb, m->d4C, a->ln2, p->fcw, N, C, 4 * C) ||
        layernorm_backward(m, g->ln2w, g->ln2b, m->dC, a->res2, p->ln2w, a->ln2_mean,
                           a->ln2_rstd, N) ||
        !(dattn = dropout_grad(m, m->d4C, m->dres, N * C, DROP_SITE(l, DROP_ATTN))) ||
        linear_backward(m, m->dC, g->projw, g->projb, dattn, a->atty, p->projw, N, C, C) ||
        attention_backward(m, a, m->dC, B, T) ||
        recompute_for_backward(m, l, residual, B, T, RECOMPUTE_LN1) ||
        linear_backward(m, m->dC, g->qkvw, g->qkvb, m->d3C, a->ln1, p->qkvw, N, C, 3 * C) ||
        layernorm_backward(m, g->ln1w, g->ln1b, m->dC, residual, p->ln1w, a->ln1_mean,
                           a->ln1_rstd, N))
        return -1;
    return 0;
}

void gb_model_on_grads_ready(gb_model *m, gb_grads_ready_fn fn, void *ctx)
{
    m->grads_ready = fn;
    m->grads_ready_ctx = ctx;
}

/* The gradients from `first` (a parameter of the flat buffer) to the end are final. */
static int grads_ready_from(gb_model *m, const float *first)
{
    return m->grads_ready ? m->grads_ready(m->grads_ready_ctx, first - m->grads) : 0;
}

/* Backward's device work; `dlogit_scale` is dlogit_scale_of()'s. */
static int backward_work(gb_model *m, float dlogit_scale)
{
    const gb_device_ops *ops = m->rt->dev;
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    int64_t B = m->last_B, T = m->last_T, N = B * T, C = m->cfg.n_embd, V = m->cfg.vocab_size;
    /* logits become dlogits in place, unless the fused classifier did it in forward */
    if (!m->dlogits_ready)
        TIMED_CALL(m, GB_PHASE_BWD_LOSS, dev, "cross_entropy",
                   scaled_cross_entropy(m, N, dlogit_scale));
    const void *last = m->acts[m->cfg.n_layer - 1].res3;
    if (linear_backward_ep(m, m->dC, m->g.wte, NULL, m->logits, m->logits_ld, m->lnf, m->p.wte,
                           N, C, V, GB_EPILOGUE_DEFAULT, NULL))
        return -1;
    TIMED_CALL(m, GB_PHASE_ZERO_GRADS, dev, "memset_zero",
               ops->memset_zero(m->dev, m->dres, (size_t)(N * C) * m->act_size));
    if (layernorm_backward(m, m->g.lnfw, m->g.lnfb, m->dC, last, m->p.lnfw, m->lnf_mean,
                           m->lnf_rstd, N) ||
        grads_ready_from(m, m->g.lnfw))
        return -1;
    /* each block's tensors are contiguous and follow the previous block's */
    for (int64_t l = m->cfg.n_layer - 1; l >= 0; l--) {
        const void *residual = l ? m->acts[l - 1].res3 : m->encoded;
        if (block_backward(m, l, residual, B, T) || grads_ready_from(m, m->g.layers[l].ln1w))
            return -1;
    }
    if (dropout(m, GB_PHASE_BWD_MATMUL_DX, m->dres, m->dres, N * C, DROP_EMBED))
        return -1;
    TIMED_CALL(m, GB_PHASE_BWD_EMBED, dev, "embed_backward",
               ops->embed_backward(m->dev, m->act, m->g.wte, m->g.wpe, m->dres, m->tokens, B, T,
                                   C));
    return 0;
}

int gb_model_backward(gb_model *m, float dloss)
{
    int64_t N = m->last_B * m->last_T;
    if (!m->train || !m->last_has_targets) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: backward needs a training model "
                  "and a forward pass with targets");
        return -1;
    }
    float dlogit_scale = dlogit_scale_of(m, dloss, N);
    if (m->dlogits_ready && dlogit_scale != m->dlogits_scale) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: backward's loss gradient %g "
                  "differs from the %g forward computed dlogits for ([train] fuse_classifier); "
                  "pass backward's dloss to gb_model_forward_loaded", (double)dlogit_scale,
                  (double)m->dlogits_scale);
        return -1;
    }
    if (run_recorded(m, &m->graphs[GRAPH_BACKWARD], N, dlogit_scale, m->dlogits_ready,
                     backward_work))
        return -1;
    m->last_has_targets = 0; /* logits were consumed */
    m->dlogits_ready = 0;
    return grads_ready_from(m, m->grads);
}

/* ---- update -------------------------------------------------------------------------- */

/* With a loss scaler: whether any gradient is inf/nan (the squared norm then is not
 * finite), told to the scaler, which decides whether the update is skipped. */
static int consult_scaler(gb_model *m, int *skip)
{
    gb_runtime *rt = m->rt;
    *skip = 0;
    if (!rt->precision->update || m->scaler)
        return 0;
    float norm_sq = 0.0f;
    if (copy_to_host(m, &norm_sq, m->norm_sq, sizeof norm_sq))
        return -1;
    GB_CALL(&rt->inst[GB_KIND_PRECISION], "update",
            rt->precision->update(rt->inst[GB_KIND_PRECISION].self, !isfinite(norm_sq), skip));
    m->skipped_steps += *skip;
    return 0;
}

float gb_model_loss_scale(const gb_model *m)
{
    const gb_precision_ops *p = m->rt->precision;
    return p->loss_scale ? p->loss_scale(m->rt->inst[GB_KIND_PRECISION].self) : 1.0f;
}

int gb_model_update(gb_model *m, float lr, float max_norm, int64_t step, int *skipped)
{
    gb_runtime *rt = m->rt;
    gb_instance *opt = &rt->inst[GB_KIND_OPTIM];
    float scale = gb_model_loss_scale(m); /* backward's, before the scaler moves it */
    *skipped = 0;
    if (rt->optim->grad_norm_sq)
        TIMED_CALL(m, GB_PHASE_GRAD_NORM, opt, "grad_norm_sq",
                   rt->optim->grad_norm_sq(opt->self, m->norm_sq, m->grads, m->n_params));
    else
        TIMED_CALL(m, GB_PHASE_GRAD_NORM, &rt->inst[GB_KIND_DEVICE], "sum_squares",
                   rt->dev->sum_squares(m->dev, m->norm_sq, m->grads, m->n_params));
    if (consult_scaler(m, skipped))
        return -1;
    if (*skipped)
        return 0;
    gb_optim_step_args args = {
        .struct_size = sizeof args,
        .params = m->params,
        .grads = m->grads,
        .state = m->optim_state,
        .n = m->n_params,
        .groups = m->groups,
        .n_groups = m->n_tensors,
        .step = step,
        .lr = lr,
        .grad_norm_sq = m->norm_sq,
        .max_norm = max_norm,
        .inv_loss_scale = 1.0f / scale,
        .loss_scale = m->scaler ? &m->scaler->scale : NULL,
        .params_lowp = m->params_lowp,
        .lowp_dtype = m->act,
        .lowp_stochastic = m->params_lowp && rt->policy.stochastic_rounding,
        .lowp_seed = m->seed,
        .workspace = m->optim_workspace,
        .lr_max = (float)rt->settings.learning_rate,
    };
    TIMED_CALL(m, GB_PHASE_OPTIMIZER, opt, "step", rt->optim->step(opt->self, &args));
    if (m->scaler)   /* after the step, which reads the scale it backs off or grows */
        TIMED_CALL(m, GB_PHASE_OPTIMIZER, &rt->inst[GB_KIND_DEVICE], "loss_scaler_update",
                   rt->dev->loss_scaler_update(m->dev, m->scaler, m->norm_sq));
    return 0;
}

float *gb_model_grads(gb_model *m)
{
    return m->grads;
}

float *gb_model_params(gb_model *m)
{
    return m->params;
}
