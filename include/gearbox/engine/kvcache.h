/* Sampling with a KV cache: a model's forward over the new tokens only, attending to the
 * keys and values every earlier position left in the cache, so each token costs the same
 * whatever the length so far (a forward over the whole window costs T tokens' worth).
 *
 * The attention plugin does the attention of the new rows over the cache (ABI 1.7's
 * forward_cached, which the CPU plugins and attn/flash and attn/math on CUDA have). With a
 * plugin that lacks it (built before 1.7, or leaving it NULL) the cache holds only the
 * tokens, and each call runs the model's forward over the whole window again: the same
 * tokens, at the cost of sampling without a cache.
 *
 * Positions past block_size: the model has no embedding for them, so, as sampling without
 * a cache does, the window slides: once the sequences are longer than block_size, each
 * call runs the forward over their last block_size tokens (filling the cache again). */
#ifndef GB_ENGINE_KVCACHE_H
#define GB_ENGINE_KVCACHE_H

#include <stdint.h>

#include "gearbox/engine/model.h"
#include "gearbox/engine/run.h"

typedef struct gb_kv_cache gb_kv_cache;

/* A cache for `batch` sequences (at most the batch `m` was created for) of the model `m`,
 * which was created from `rt` and `cfg`; its keys and values take 2 x n_layer x batch x
 * block_size x n_embd activations on the run's device. `cached` 0 holds no keys and
 * values even where the plugin could attend over them: every call runs the forward over
 * the whole window (sampling without a cache, to compare with). NULL after reporting
 * why. */
gb_kv_cache *gb_kv_cache_create(gb_model *m, gb_runtime *rt, const gb_model_config *cfg,
                                int64_t batch, int cached);
void gb_kv_cache_free(gb_kv_cache *c);
/* Appends T tokens to every sequence (`tokens` (batch, T), host memory, T >= 1) and
 * writes the logits of each sequence's last token into `logits` (batch, vocab_size),
 * host memory. 0, or -1 after reporting why. */
int gb_kv_cache_forward(gb_kv_cache *c, const int32_t *tokens, int64_t T, float *logits);
/* The tokens each sequence holds so far; 0 after gb_kv_cache_reset. */
int64_t gb_kv_cache_length(const gb_kv_cache *c);
void gb_kv_cache_reset(gb_kv_cache *c);
/* 1 when the attention plugin attends over the cache; 0 when each call recomputes the
 * window. `why` (NULL or room for 256 bytes) gets a phrase saying which and why. */
int gb_kv_cache_incremental(const gb_kv_cache *c, char *why);

#endif
