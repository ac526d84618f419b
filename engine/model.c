/* The GPT model's creation (see model.h; model_internal.h lists the other files): the
 * checks of the config against the device, the buffers every pass uses sized in one
 * computation that both creates the model and plans its memory (gb_model_plan), the
 * fusions in effect, the memory plan's printout and the model's release. */
#include "model_internal.h"

#include <stdlib.h>

#include "optim_params.h"

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

gb_attn_problem gb_model_attn_problem(const gb_model *m, int64_t B, int64_t T)
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
    gb_attn_problem prob = gb_model_attn_problem(m, m->B, m->cfg.block_size);
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

int64_t gb_model_flat_count(const gb_model *m)
{
    return gb_shard_padded(m->shard, m->n_params);
}

static int allocate_parameters(gb_model *m)
{
    m->groups = calloc((size_t)m->n_tensors, sizeof *m->groups);
    if (!m->groups)
        return -1;
    for (int i = 0; i < m->n_tensors; i++)
        m->groups[i] = (gb_param_group){m->tensors[i].offset, m->tensors[i].numel,
                                        m->tensors[i].decay};
    if (m->train && gb_shard_wanted(m->rt) &&
        !(m->shard = gb_shard_create(m->rt, m->n_params, m->groups, m->n_tensors)))
        return -1;
    m->params = ALLOC_F32(m, gb_model_flat_count(m), params);
    if (m->act != GB_F32 && !(m->params_lowp = ALLOC_ACT(m, gb_model_flat_count(m), params)))
        return -1;
    m->p.layers = calloc((size_t)m->cfg.n_layer, sizeof(layer_params));
    m->g.layers = calloc((size_t)m->cfg.n_layer, sizeof(layer_params));
    if (!m->params || !m->p.layers || !m->g.layers)
        return -1;
    gb_model_bind_views(m, m->params, &m->p);
    if (!m->train)
        return 0;
    m->grads = ALLOC_F32(m, gb_model_flat_count(m), grads);
    m->norm_sq = ALLOC_F32(m, 1, grads);
    if (!m->grads || !m->norm_sq)
        return -1;
    gb_model_bind_views(m, m->grads, &m->g);
    gb_instance *opt = &m->rt->inst[GB_KIND_OPTIM];
    size_t workspace_bytes;
    if (gb_optim_bind_params(m->rt, m->tensors, m->n_tensors, m->n_params,
                             m->params_lowp ? m->act : GB_F32, &workspace_bytes))
        return -1;
    m->optim_state_bytes =
        m->rt->optim->state_bytes(opt->self, gb_shard_state_count(m->shard, m->n_params));
    m->optim_state = device_alloc(m, m->optim_state_bytes, &m->plan.optimizer);
    if (!m->optim_state || (workspace_bytes &&
        !(m->optim_workspace = device_alloc(m, workspace_bytes, &m->plan.optimizer))))
        return -1;
    if (!m->rt->precision->update || !gb_model_place_scaler(m))
        return 0;
    m->scaler = device_alloc(m, sizeof *m->scaler, &m->plan.optimizer);
    return m->scaler ? 0 : -1;
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
    gb_model_plan_tensors(m);
    if (!m->tensors || plan_attention(m) || allocate_parameters(m) || allocate_activations(m)) {
        gb_model_free(m);
        return NULL;
    }
    return m;
}

/* The sharded buffers' padding starts (and stays) zero: the collectives move it. */
static int zero_padding(gb_model *m)
{
    size_t count = (size_t)gb_model_flat_count(m);
    GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "memset_zero",
            m->rt->dev->memset_zero(m->dev, m->params, count * sizeof(float)));
    if (m->params_lowp)
        GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "memset_zero",
                m->rt->dev->memset_zero(m->dev, m->params_lowp, count * m->act_size));
    return gb_model_zero_grads(m);
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
    if (m->shard && zero_padding(m))
        return -1;
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
    gb_shard_free(m->shard);
    free(m->p.layers);
    free(m->g.layers);
    free(m->acts);
    free(m->host_losses);
    gb_model_release_figures(m);
    free(m);
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
    if (m->shard)
        fprintf(out, "%soptimizer state sharded ([optim] shard_state): %zu bytes on this rank "
                "of %zu in all, 1/%d\n", prefix, m->optim_state_bytes,
                gb_model_optim_state_bytes(m), m->shard->world);
    if (m->train && m->cfg.recompute != GB_RECOMPUTE_NONE)
        gb_model_print_recompute_savings(m, out, prefix);
    if (m->train)
        print_fusions(m, out, prefix);
}

gb_memory_plan gb_model_memory(const gb_model *m)
{
    return m->plan;
}
