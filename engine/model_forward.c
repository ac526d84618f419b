/* The forward pass: embeddings, the pre-LayerNorm blocks (attention through the
 * attention plugin, the MLP, dropout, the fused residual LayerNorm), the final LayerNorm,
 * the tied LM head and the cross-entropy loss; over a KV cache when sampling. */
#include "model_internal.h"

#include "kvcache_step.h"
#include "rng.h"

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
    gb_model_count_flops(m, GB_PHASE_FWD_MATMUL, gb_model_matmul_flops(&a));
    return 0;
}

/* out (N, OC) = in (N, IC) @ W (OC, IC)^T + bias (OC) */
static int linear_forward(gb_model *m, void *out, const void *in, const float *W,
                          const float *bias, int64_t N, int64_t IC, int64_t OC)
{
    return linear_forward_ep(m, out, OC, in, W, bias, N, IC, OC, GB_EPILOGUE_DEFAULT, NULL);
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
gb_status gb_model_scaled_cross_entropy(gb_model *m, int64_t N, float dloss)
{
    if (!m->scaler)
        return cross_entropy(m, m->logits, N, dloss);
    return m->rt->dev->cross_entropy_scaled(m->dev, m->act, m->losses, m->logits, m->logits,
                                            m->logits_ld, m->targets, N, m->cfg.vocab_size,
                                            dloss, &m->scaler->scale);
}

/* A (B, H, T, D) view of one of q, k, v inside the packed (B, T, 3, H, D) buffer, or of a
 * (B, T, H, D) buffer when `packed` is 0. */
gb_tensor gb_model_heads_view(const gb_model *m, void *base, int64_t B, int64_t T, int packed)
{
    int64_t C = m->cfg.n_embd, H = m->cfg.n_head, D = C / H;
    int64_t row = packed ? 3 * C : C;
    return (gb_tensor){
        .data = base, .dtype = m->act, .ndim = 4,
        .shape = {B, H, T, D},
        .stride = {T * row, D, row, 1},
    };
}

/* out = gb_model_dropout(in) over n activations at `site` of the micro-step being trained, when the
 * pass drops (nothing otherwise); forward and backward (which applies it to the gradient)
 * draw the same mask. Timed with the residual adds beside it in forward, with the input
 * gradients in backward. */
int gb_model_dropout(gb_model *m, gb_phase phase, void *out, const void *in, int64_t n,
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

static int attention_forward(gb_model *m, layer_acts *a, int64_t B, int64_t T)
{
    gb_instance *inst = &m->rt->inst[GB_KIND_ATTN];
    int64_t C = m->cfg.n_embd;
    gb_attn_problem prob = gb_model_attn_problem(m, B, T);
    gb_tensor out = gb_model_heads_view(m, a->atty, B, T, 0),
              q = gb_model_heads_view(m, a->qkv, B, T, 1),
              k = gb_model_heads_view(m, at(m, a->qkv, C), B, T, 1),
              v = gb_model_heads_view(m, at(m, a->qkv, 2 * C), B, T, 1);
    if (m->kv) /* the new rows over the keys and values of the positions before them */
        return gb_kv_cache_attention(m->kv, a - m->acts, &prob, out, q, k, v);
    TIMED_CALL(m, GB_PHASE_FWD_ATTN, inst, "forward",
               m->rt->attn->forward(inst->self, &prob, out, q, k, v, a->attn_saved,
                                    m->attn_workspace));
    gb_model_count_flops(m, GB_PHASE_FWD_ATTN, 2.0 * gb_model_causal_product_flops(&prob));
    return 0;
}

int gb_model_layernorm_forward(gb_model *m, void *out, float *mean, float *rstd,
                               const void *x, const float *w, const float *b, int64_t N)
{
    TIMED_CALL(m, GB_PHASE_FWD_LAYERNORM, &m->rt->inst[GB_KIND_DEVICE], "layernorm_forward",
               m->rt->dev->layernorm_forward(m->dev, m->act, out, mean, rstd, x, w, b, N,
                                             m->cfg.n_embd, 1e-5f));
    return 0;
}

/* out = GELU(x) in the model's form (erf, or GPT-2's tanh). */
int gb_model_gelu_forward(gb_model *m, void *out, const void *x, int64_t n)
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
        return gb_model_layernorm_forward(m, out, mean, rstd, sum, w, bias, N);
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
           gb_model_gelu_forward(m, a->fch_gelu, a->fch, N * 4 * C);
}

/* Block l over `residual`. Under GB_FUSE_RESIDUAL_NORM the forward pass (not a
 * recomputation) leaves ln1 to the block before, whose last residual add also normalises
 * into this block's ln1, and this block's into the next's ln1 or the final LayerNorm. */
int gb_model_block_forward(gb_model *m, int64_t l, const void *residual, int64_t B, int64_t T)
{
    layer_params *p = &m->p.layers[l];
    layer_acts *a = &m->acts[l];
    int64_t N = B * T, C = m->cfg.n_embd;
    int chain = (m->fused & GB_FUSE_RESIDUAL_NORM) && !m->recomputing;
    if (!(chain && l > 0) &&
        gb_model_layernorm_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, residual, p->ln1w,
                                   p->ln1b, N))
        return -1;
    if (linear_forward(m, a->qkv, a->ln1, p->qkvw, p->qkvb, N, C, 3 * C) ||
        attention_forward(m, a, B, T) ||
        linear_forward(m, m->proj, a->atty, p->projw, p->projb, N, C, C) ||
        gb_model_dropout(m, GB_PHASE_FWD_RESIDUAL, m->proj, m->proj, N * C,
                         DROP_SITE(l, DROP_ATTN)) ||
        add_layernorm_forward(m, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, residual, m->proj,
                              p->ln2w, p->ln2b, N) ||
        mlp_up_forward(m, a, p, N) ||
        linear_forward(m, m->proj, a->fch_gelu, p->fcprojw, p->fcprojb, N, 4 * C, C) ||
        gb_model_dropout(m, GB_PHASE_FWD_RESIDUAL, m->proj, m->proj, N * C, DROP_SITE(l, DROP_MLP)))
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
    if (gb_model_copy_to_host(m, m->host_losses, m->losses, (size_t)N * sizeof(float)))
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
    /* the head's width: the padded vocabulary where cross-entropy skips its pad columns */
    int64_t C = m->cfg.n_embd, Vp = m->logits_ld, N = B * T;
    /* over a KV cache the tokens start at the first position it does not hold */
    const float *wpe = m->p.wpe + (m->kv ? gb_kv_cache_past(m->kv) * C : 0);
    TIMED_CALL(m, GB_PHASE_FWD_EMBED, dev, "embed_forward",
               ops->embed_forward(m->dev, m->act, m->encoded, m->tokens, m->p.wte, wpe, B, T,
                                  C));
    if (gb_model_dropout(m, GB_PHASE_FWD_RESIDUAL, m->encoded, m->encoded, N * C, DROP_EMBED))
        return -1;
    const void *residual = m->encoded;
    for (int64_t l = 0; l < m->cfg.n_layer; l++) {
        if (gb_model_block_forward(m, l, residual, B, T))
            return -1;
        residual = m->acts[l].res3;
    }
    /* the last block normalised its output already when it chained the LayerNorms */
    if ((!(m->fused & GB_FUSE_RESIDUAL_NORM) &&
         gb_model_layernorm_forward(m, m->lnf, m->lnf_mean, m->lnf_rstd, residual, m->p.lnfw,
                                    m->p.lnfb, N)) ||
        linear_forward_ep(m, m->logits, Vp, m->lnf, m->p.wte, NULL, N, C, Vp,
                          GB_EPILOGUE_DEFAULT, NULL))
        return -1;
    m->last_B = B;
    m->last_T = T;
    m->last_has_targets = has_targets;
    m->dlogits_ready = 0;
    if (!has_targets)
        return 0;
    double start = gb_model_phase_begin(m);
    if (with_grad)
        GB_CALL(dev, "cross_entropy", gb_model_scaled_cross_entropy(m, N, dlogit_scale));
    else
        GB_CALL(dev, "cross_entropy", cross_entropy(m, NULL, N, 0.0f));
    if (mean_loss && read_mean_loss(m, N, mean_loss))
        return -1;
    gb_model_phase_end(m, GB_PHASE_FWD_LOSS, start);
    return 0;
}

/* The (B, T) batch from host memory into the batch buffers. */
static int copy_batch(gb_model *m, const int32_t *tokens, const int32_t *targets, int64_t B,
                      int64_t T)
{
    size_t bytes = (size_t)(B * T) * sizeof(int32_t);
    double start = gb_model_phase_begin(m);
    if (gb_model_copy_to_device(m, m->tokens, tokens, bytes) ||
        (targets && gb_model_copy_to_device(m, m->targets, targets, bytes)))
        return -1;
    gb_model_phase_end(m, GB_PHASE_DATA, start);
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

/* d(loss)/d(each row's loss) for a micro-batch of n rows whose mean loss has gradient
 * dloss, times the loss scale when the host keeps it (the device's scaler has the kernel
 * read its scale). */
float gb_model_dlogit_scale_of(const gb_model *m, float dloss, int64_t n)
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
    float scale = fused ? gb_model_dlogit_scale_of(m, dloss, B * T) : 0.0f;
    m->dropping = m->train && m->cfg.dropout > 0.0f;
    if (gb_model_run_recorded(m, &m->graphs[GRAPH_FORWARD], B * T, scale, fused, forward_work))
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
