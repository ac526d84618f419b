/* The backward pass: the loss gradient through the LM head, the final LayerNorm and the
 * blocks in reverse, into the gradient buffer, telling the caller (DDP) as each block's
 * gradients become final. */
#include "model_internal.h"

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
    gb_model_count_flops(m, GB_PHASE_BWD_MATMUL_DX, gb_model_matmul_flops(&dx));
    gb_model_count_flops(m, GB_PHASE_BWD_MATMUL_DW, gb_model_matmul_flops(&dw));
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

/* The gradient `grad` through dropout at `site`: grad itself when the pass did not drop,
 * else `scratch` holding gb_model_dropout(grad). NULL after reporting a failed call. */
static const void *dropout_grad(gb_model *m, void *scratch, const void *grad, int64_t n,
                                uint64_t site)
{
    if (!m->dropping)
        return grad;
    return gb_model_dropout(m, GB_PHASE_BWD_MATMUL_DX, scratch, grad, n, site) ? NULL : scratch;
}

int gb_model_zero_grads(gb_model *m)
{
    TIMED_CALL(m, GB_PHASE_ZERO_GRADS, &m->rt->inst[GB_KIND_DEVICE], "memset_zero",
               m->rt->dev->memset_zero(m->dev, m->grads,
                                       (size_t)gb_model_flat_count(m) * sizeof(float)));
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
    gb_attn_problem prob = gb_model_attn_problem(m, B, T);
    TIMED_CALL(m, GB_PHASE_BWD_ATTN, inst, "backward",
               m->rt->attn->backward(inst->self, &prob, gb_model_heads_view(m, m->d3C, B, T, 1),
                                     gb_model_heads_view(m, at(m, m->d3C, C), B, T, 1),
                                     gb_model_heads_view(m, at(m, m->d3C, 2 * C), B, T, 1),
                                     gb_model_heads_view(m, (void *)datty, B, T, 0),
                                     gb_model_heads_view(m, a->qkv, B, T, 1),
                                     gb_model_heads_view(m, at(m, a->qkv, C), B, T, 1),
                                     gb_model_heads_view(m, at(m, a->qkv, 2 * C), B, T, 1),
                                     gb_model_heads_view(m, a->atty, B, T, 0), a->attn_saved,
                                     m->attn_workspace));
    gb_model_count_flops(m, GB_PHASE_BWD_ATTN, 4.0 * gb_model_causal_product_flops(&prob));
    return 0;
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
    if (gb_model_recompute_for_backward(m, l, residual, B, T, RECOMPUTE_MLP_INPUTS) ||
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
        gb_model_recompute_for_backward(m, l, residual, B, T, RECOMPUTE_LN1) ||
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

/* Backward's device work; `dlogit_scale` is gb_model_dlogit_scale_of()'s. */
static int backward_work(gb_model *m, float dlogit_scale)
{
    const gb_device_ops *ops = m->rt->dev;
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    /* the head at the forward's width; the pad columns of dlogits hold the forward's zeros
     * (wte's pad rows are zero), so they add nothing to dX and give pad rows zero dW */
    int64_t B = m->last_B, T = m->last_T, N = B * T, C = m->cfg.n_embd, Vp = m->logits_ld;
    /* logits become dlogits in place, unless the fused classifier did it in forward */
    if (!m->dlogits_ready)
        TIMED_CALL(m, GB_PHASE_BWD_LOSS, dev, "cross_entropy",
                   gb_model_scaled_cross_entropy(m, N, dlogit_scale));
    const void *last = m->acts[m->cfg.n_layer - 1].res3;
    if (linear_backward_ep(m, m->dC, m->g.wte, NULL, m->logits, Vp, m->lnf, m->p.wte, N, C, Vp,
                           GB_EPILOGUE_DEFAULT, NULL))
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
    if (gb_model_dropout(m, GB_PHASE_BWD_MATMUL_DX, m->dres, m->dres, N * C, DROP_EMBED))
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
    float dlogit_scale = gb_model_dlogit_scale_of(m, dloss, N);
    if (m->dlogits_ready && dlogit_scale != m->dlogits_scale) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: backward's loss gradient %g "
                  "differs from the %g forward computed dlogits for ([train] fuse_classifier); "
                  "pass backward's dloss to gb_model_forward_loaded", (double)dlogit_scale,
                  (double)m->dlogits_scale);
        return -1;
    }
    if (gb_model_run_recorded(m, &m->graphs[GRAPH_BACKWARD], N, dlogit_scale,
                              m->dlogits_ready, backward_work))
        return -1;
    m->last_has_targets = 0; /* logits were consumed */
    m->dlogits_ready = 0;
    return grads_ready_from(m, m->grads);
}
