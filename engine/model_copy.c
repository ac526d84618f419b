/* Copies between host and device: the parameters (with their low-precision working
 * copy), the gradients, the optimizer's state and the logits, and the parameters'
 * initialisation on the host. */
#include "model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/convert.h"

#include "rng.h"

int gb_model_copy_to_device(gb_model *m, void *dst, const void *src, size_t bytes)
{
    GB_CALL(&m->rt->inst[GB_KIND_DEVICE], "copy to device",
            m->rt->dev->copy(m->dev, dst, src, bytes, GB_COPY_HOST_TO_DEVICE));
    return 0;
}

int gb_model_copy_to_host(gb_model *m, void *dst, const void *src, size_t bytes)
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
    int rc = gb_model_copy_to_device(m, m->params_lowp, lowp, (size_t)m->n_params * sizeof *lowp);
    free(lowp);
    return rc;
}

/* The LM head runs at the padded width (logits_ld columns), so wte's pad rows are
 * columns of all three of its products: zero, their logits are zero, add nothing to the
 * input gradient and get a zero gradient, so the optimizer never moves them. Weights
 * that set them otherwise are refused rather than trained wrongly; initialisation,
 * imports and llm.c's files hold zeros there. */
static int check_head_padding(const gb_model *m, const float *host)
{
    const gb_param_tensor *wte = &m->tensors[0];
    int64_t V = m->cfg.vocab_size, C = wte->cols;
    for (int64_t i = V * C; i < m->logits_ld * C; i++)
        if (host[wte->offset + i] != 0.0f) {
            gb_report(GB_REPORT_ERROR, "model", "gearbox: error: wte row %lld column %lld is %g, "
                      "but rows %lld to %lld pad the vocabulary ([model] padded_vocab_size = "
                      "%lld) and the padded LM head needs them zero; zero them in the weights, "
                      "or load them into a model without padding", (long long)(i / C),
                      (long long)(i % C), (double)host[wte->offset + i], (long long)V,
                      (long long)(m->logits_ld - 1), (long long)m->cfg.padded_vocab_size);
            return -1;
        }
    return 0;
}

int gb_model_set_params(gb_model *m, const float *host)
{
    if (check_head_padding(m, host) ||
        gb_model_copy_to_device(m, m->params, host, (size_t)m->n_params * sizeof(float)))
        return -1;
    return m->params_lowp ? set_working_params(m, host) : 0;
}

int gb_model_get_params(gb_model *m, float *host)
{
    return gb_model_copy_to_host(m, host, m->params, (size_t)m->n_params * sizeof(float));
}

int gb_model_get_grads(gb_model *m, float *host)
{
    return gb_model_copy_to_host(m, host, m->grads, (size_t)m->n_params * sizeof(float));
}

size_t gb_model_optim_state_bytes(const gb_model *m)
{
    if (!m->shard)
        return m->optim_state_bytes;
    return (size_t)m->shard->planes * (size_t)m->n_params * sizeof(float);
}

int gb_model_optim_state_sharded(const gb_model *m)
{
    return m->shard != NULL;
}

const gb_shard *gb_model_shard(const gb_model *m)
{
    return m->shard;
}

int gb_model_set_optim_state(gb_model *m, const void *host)
{
    if (m->shard)
        return gb_shard_set_state(m->rt, m->shard, m->optim_state, host);
    return gb_model_copy_to_device(m, m->optim_state, host, m->optim_state_bytes);
}

int gb_model_get_optim_state(gb_model *m, void *host)
{
    if (m->shard)   /* the gradients are free between steps: the gather's scratch */
        return gb_shard_get_state(m->rt, m->shard, m->optim_state, m->grads, host);
    return gb_model_copy_to_host(m, host, m->optim_state, m->optim_state_bytes);
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

int gb_model_get_logits(gb_model *m, float *host, int64_t B, int64_t T)
{
    int64_t V = m->cfg.vocab_size, ld = m->logits_ld, N = B * T;
    size_t bytes = (size_t)(N * ld) * m->act_size;
    unsigned char *raw = malloc(bytes);
    if (!raw || gb_model_copy_to_host(m, raw, m->logits, bytes)) {
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
