/* Recomputation (gb_recompute): block activations that backward reads, computed again
 * instead of kept, and what that saves in the memory plan. */
#include "model_internal.h"

/* Block l's activations again where backward is to read them (gb_recompute). The last
 * block's are still there from forward, which ran it last. `part` says which are wanted
 * now: under norm_gelu ln1 shares a buffer with ln2, so it comes back only after ln2 has
 * been used. */
int gb_model_recompute_for_backward(gb_model *m, int64_t l, const void *residual,
                                    int64_t B, int64_t T, recompute_part part)
{
    layer_params *p = &m->p.layers[l];
    layer_acts *a = &m->acts[l];
    int64_t N = B * T;
    int last = l == m->cfg.n_layer - 1;
    int rc = 0;
    m->recomputing = 1;
    if (m->cfg.recompute == GB_RECOMPUTE_BLOCK && part == RECOMPUTE_MLP_INPUTS && !last)
        rc = gb_model_block_forward(m, l, residual, B, T);
    else if (m->cfg.recompute == GB_RECOMPUTE_NORM_GELU && part == RECOMPUTE_MLP_INPUTS && !last)
        rc = gb_model_layernorm_forward(m, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w,
                                        p->ln2b, N) ||
             gb_model_gelu_forward(m, a->fch_gelu, a->fch, N * 4 * m->cfg.n_embd);
    else if (m->cfg.recompute == GB_RECOMPUTE_NORM_GELU && part == RECOMPUTE_LN1)
        rc = gb_model_layernorm_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, residual, p->ln1w,
                                        p->ln1b, N);
    m->recomputing = 0;
    return rc;
}

static const char *recompute_name(gb_recompute r)
{
    return r == GB_RECOMPUTE_BLOCK ? "block" : r == GB_RECOMPUTE_NORM_GELU ? "norm_gelu" : "none";
}

/* What recomputation saves: the activations the same model would plan keeping everything. */
void gb_model_print_recompute_savings(const gb_model *m, FILE *out, const char *prefix)
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
