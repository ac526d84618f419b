/* The model's parameters: the tensors in nanoGPT's order with their offsets in the one
 * flat buffer that parameters and gradients each occupy, the views of each block's
 * tensors into it, the config they follow and the accessors to the buffers. */
#include "model_internal.h"

#include <stdlib.h>

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
void gb_model_plan_tensors(gb_model *m)
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
    gb_model_plan_tensors(&m);
    *count = m.n_tensors;
    *n_params = m.n_params;
    return m.tensors;
}

/* Points `views` at the tensors of `base`, in gb_model_plan_tensors' order. */
void gb_model_bind_views(gb_model *m, float *base, model_params *v)
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

int64_t gb_model_table_rows(const gb_model_config *cfg)
{
    return cfg->padded_vocab_size ? cfg->padded_vocab_size : cfg->vocab_size;
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

float *gb_model_grads(gb_model *m)
{
    return m->grads;
}

float *gb_model_params(gb_model *m)
{
    return m->params;
}
