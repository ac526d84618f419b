/* Attention of new query rows over a KV cache on CUDA (ABI 1.7's forward_cached), shared
 * by attn/flash and attn/math: sampling asks for one new row per sequence at a time, for
 * which neither plugin's tiles of a training forward fit. The kernels are in
 * attn_cached_cuda.cu, which each of the two plugins builds in (a .cu of its own, so nvcc
 * and the emulator's cu2cc see its kernels and launches as they see the plugin's).
 */
#ifndef GB_ATTN_CACHED_CUDA_CUH
#define GB_ATTN_CACHED_CUDA_CUH

#include <stdint.h>

#include "gearbox/toolkit/attn_checks.h"
#include "gearbox/attn.h"

/* forward_cached for a CUDA plugin whose instance is `a`: the checks of attn_checks.h with
 * the plugin's own eligible(), then attn_cached_cuda.cu's two kernels on the device's
 * stream, each launch checked. */
gb_status attn_cuda_forward_cached(const gb_plugin_instance *a, const char *plugin,
                                   gb_attn_eligible_fn eligible, const gb_attn_problem *p,
                                   int64_t past, gb_tensor out, gb_tensor q, gb_tensor k,
                                   gb_tensor v, gb_tensor k_cache, gb_tensor v_cache);

#endif /* GB_ATTN_CACHED_CUDA_CUH */
