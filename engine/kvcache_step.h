/* What a forward over a KV cache needs of model_forward.c and kvcache.c of each other
 * (private to the engine): model_forward.c runs its usual forward over the new tokens,
 * asking the cache for the first new position and for each layer's attention. */
#ifndef GB_CORE_KVCACHE_STEP_H
#define GB_CORE_KVCACHE_STEP_H

#include "gearbox/attn.h"
#include "kvcache.h"

/* Positions cached before this forward's tokens. */
int64_t gb_kv_cache_past(const gb_kv_cache *c);
/* Layer `layer`'s attention of the new rows (q, k, v views of its packed projection, out
 * of its attention output) over the cache, through the plugin's forward_cached. */
int gb_kv_cache_attention(gb_kv_cache *c, int64_t layer, const gb_attn_problem *p,
                          gb_tensor out, gb_tensor q, gb_tensor k, gb_tensor v);
/* gb_model_forward over (B, T) tokens at positions past .. past+T-1 of the cache's
 * sequences (model_forward.c). */
int gb_model_forward_cached(gb_model *m, gb_kv_cache *c, const int32_t *tokens, int64_t B,
                            int64_t T);

#endif
