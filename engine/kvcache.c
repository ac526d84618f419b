/* Sampling with a KV cache (kvcache.h): per layer, the keys and values of every position
 * so far on the run's device, laid out (batch, block_size, n_embd) as the packed
 * projection holds them, so a layer's cache is a (B, H, T, D) view with the rows
 * block_size apart; and on the host each sequence's tokens, which the window needs when
 * it slides past block_size and which the forward without a cache runs over. */
#include "kvcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcache_step.h"
#include "loader.h"
#include "report.h"
#include "runtime.h"

struct gb_kv_cache {
    gb_model *m;
    gb_runtime *rt;
    gb_model_config cfg;
    int64_t batch;
    int incremental;          /* the attention plugin has forward_cached */
    void **layers;            /* layer l's keys at 2l, its values at 2l + 1: (batch,
                                 block_size, n_embd) activations each, device */
    int32_t *tokens;          /* (batch, block_size) host: each sequence's window */
    int32_t *window;          /* (batch, block_size) host, after tokens: the window packed
                                 for a forward */
    int64_t length;           /* tokens each sequence holds (at most block_size) */
    int64_t past;             /* positions whose keys and values are in the cache */
};

/* Whether the run's attention plugin has forward_cached: built for ABI 1.7 or later and
 * the entry set. */
static int attention_has_cache(const gb_runtime *rt)
{
    const gb_instance *attn = &rt->inst[GB_KIND_ATTN];
    return attn->plugin->desc->abi_minor >= 7 && GB_ATTN_HAS(rt->attn, forward_cached);
}

int gb_kv_cache_incremental(const gb_kv_cache *c, char *why)
{
    const gb_plugin_desc *d = c->rt->inst[GB_KIND_ATTN].plugin->desc;
    if (why && c->incremental)
        snprintf(why, 256, "KV cache: attn/%s attends over it", d->name);
    else if (why && attention_has_cache(c->rt))
        snprintf(why, 256, "no KV cache, as asked: the forward over the whole window for "
                 "every token");
    else if (why)
        snprintf(why, 256, "no KV cache: attn/%s %s, so every token runs the forward over "
                 "the whole window", d->name, d->abi_minor < 7 ? "predates ABI 1.7"
                                                                : "has no forward_cached");
    return c->incremental;
}

static int allocate_layers(gb_kv_cache *c)
{
    const size_t bytes = (size_t)(c->batch * c->cfg.block_size * c->cfg.n_embd) *
                         gb_dtype_size(c->rt->policy.activation_dtype);
    gb_instance *dev = &c->rt->inst[GB_KIND_DEVICE];
    c->layers = calloc((size_t)(2 * c->cfg.n_layer), sizeof *c->layers);
    if (!c->layers)
        return -1;
    for (int64_t i = 0; i < 2 * c->cfg.n_layer; i++)
        GB_CALL(dev, "alloc", c->rt->dev->alloc(dev->self, bytes, &c->layers[i]));
    return 0;
}

void gb_kv_cache_free(gb_kv_cache *c)
{
    if (!c)
        return;
    for (int64_t i = 0; c->layers && i < 2 * c->cfg.n_layer; i++)
        if (c->layers[i])
            c->rt->dev->free(c->rt->inst[GB_KIND_DEVICE].self, c->layers[i]);
    free(c->layers);
    free(c->tokens);
    free(c);
}

gb_kv_cache *gb_kv_cache_create(gb_model *m, gb_runtime *rt, const gb_model_config *cfg,
                                int64_t batch, int cached)
{
    gb_kv_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    const size_t window = (size_t)(batch * cfg->block_size);
    *c = (gb_kv_cache){.m = m, .rt = rt, .cfg = *cfg, .batch = batch,
                       .incremental = cached && attention_has_cache(rt),
                       .tokens = malloc(2 * window * sizeof *c->tokens)};
    c->window = c->tokens ? c->tokens + window : NULL;
    if (!c->tokens || (c->incremental && allocate_layers(c))) {
        gb_report(GB_REPORT_ERROR, "model", "gearbox: error: could not allocate the KV cache "
                  "(batch %lld, block_size %lld, %lld layers) on the %s device",
                  (long long)batch, (long long)cfg->block_size, (long long)cfg->n_layer,
                  rt->device.family);
        gb_kv_cache_free(c);
        return NULL;
    }
    return c;
}

int64_t gb_kv_cache_length(const gb_kv_cache *c)
{
    return c->length;
}

void gb_kv_cache_reset(gb_kv_cache *c)
{
    c->length = c->past = 0;
}

int64_t gb_kv_cache_past(const gb_kv_cache *c)
{
    return c->past;
}

/* A layer's cache as a (B, H, past + T, D) view: rows block_size apart per sequence. */
static gb_tensor cache_view(const gb_kv_cache *c, void *base, const gb_attn_problem *p)
{
    const int64_t C = c->cfg.n_embd, D = p->head_dim;
    return (gb_tensor){
        .data = base, .dtype = p->dtype, .ndim = 4,
        .shape = {p->batch, p->heads, c->past + p->seq_len, D},
        .stride = {c->cfg.block_size * C, D, C, 1},
    };
}

int gb_kv_cache_attention(gb_kv_cache *c, int64_t layer, const gb_attn_problem *p,
                          gb_tensor out, gb_tensor q, gb_tensor k, gb_tensor v)
{
    gb_instance *attn = &c->rt->inst[GB_KIND_ATTN];
    GB_CALL(attn, "forward_cached",
            c->rt->attn->forward_cached(attn->self, p, c->past, out, q, k, v,
                                        cache_view(c, c->layers[2 * layer], p),
                                        cache_view(c, c->layers[2 * layer + 1], p)));
    return 0;
}

/* Appends `T` tokens (batch, T) to the sequences' windows, keeping the last block_size
 * tokens; returns how many tokens at the end the next forward must run over: the new ones
 * while the cache holds the rest, else the whole window (it slid, or there is no cache). */
static int64_t append_tokens(gb_kv_cache *c, const int32_t *tokens, int64_t T)
{
    const int64_t S = c->cfg.block_size, kept = c->length + T <= S ? c->length : S - T;
    for (int64_t b = 0; b < c->batch; b++) {
        int32_t *row = c->tokens + b * S;
        if (kept > 0)
            memmove(row, row + c->length - kept, (size_t)kept * sizeof *row);
        const int64_t from = T > S ? T - S : 0;   /* a prompt longer than the window */
        memcpy(row + (kept > 0 ? kept : 0), tokens + b * T + from,
               (size_t)(T - from) * sizeof *row);
    }
    const int64_t slid = kept < c->length;
    c->length = (kept > 0 ? kept : 0) + (T > S ? S : T);
    if (!c->incremental || slid)
        c->past = 0;
    return c->length - c->past;
}

/* Each sequence's last row of the logits of a forward over (batch, n) tokens into
 * `logits` (batch, vocab_size). */
static int last_logits(gb_kv_cache *c, int64_t n, float *logits)
{
    const int64_t V = c->cfg.vocab_size;
    float *all = malloc((size_t)(c->batch * n * V) * sizeof *all);
    int rc = all ? gb_model_get_logits(c->m, all, c->batch, n) : -1;
    for (int64_t b = 0; !rc && b < c->batch; b++)
        memcpy(logits + b * V, all + (b * n + n - 1) * V, (size_t)V * sizeof *logits);
    free(all);
    return rc;
}

int gb_kv_cache_forward(gb_kv_cache *c, const int32_t *tokens, int64_t T, float *logits)
{
    const int64_t S = c->cfg.block_size;
    const int64_t n = append_tokens(c, tokens, T), first = c->length - n;
    for (int64_t b = 0; b < c->batch; b++)
        memcpy(c->window + b * n, c->tokens + b * S + first, (size_t)n * sizeof *c->window);
    int rc = c->incremental ? gb_model_forward_cached(c->m, c, c->window, c->batch, n)
                            : gb_model_forward(c->m, c->window, NULL, c->batch, n, NULL);
    if (rc || last_logits(c, n, logits))
        return -1;
    c->past = c->incremental ? c->length : 0;
    return 0;
}
