/* Names of the profile's phases; see profile.h. */
#include "profile.h"

const char *gb_phase_name(gb_phase phase)
{
    static const char *const names[GB_PHASE_COUNT] = {
        [GB_PHASE_DATA] = "data: batches to the device",
        [GB_PHASE_FWD_EMBED] = "forward: embedding",
        [GB_PHASE_FWD_LAYERNORM] = "forward: layernorm",
        [GB_PHASE_FWD_MATMUL] = "forward: matmul",
        [GB_PHASE_FWD_ATTN] = "forward: attention",
        [GB_PHASE_FWD_GELU] = "forward: gelu",
        [GB_PHASE_FWD_RESIDUAL] = "forward: residual add",
        [GB_PHASE_FWD_LOSS] = "forward: cross-entropy",
        [GB_PHASE_BWD_LOSS] = "backward: cross-entropy",
        [GB_PHASE_BWD_MATMUL_DX] = "backward: matmul dX",
        [GB_PHASE_BWD_MATMUL_DW] = "backward: matmul dW",
        [GB_PHASE_BWD_BIAS] = "backward: bias",
        [GB_PHASE_BWD_ATTN] = "backward: attention",
        [GB_PHASE_BWD_GELU] = "backward: gelu",
        [GB_PHASE_BWD_LAYERNORM] = "backward: layernorm",
        [GB_PHASE_BWD_EMBED] = "backward: embedding",
        [GB_PHASE_ZERO_GRADS] = "zeroing gradients",
        [GB_PHASE_GRAD_NORM] = "gradient norm",
        [GB_PHASE_OPTIMIZER] = "optimizer step",
        [GB_PHASE_ALL_REDUCE] = "all-reduce wait",
        [GB_PHASE_RECOMPUTE] = "backward: recomputed forward",
    };
    return (unsigned)phase < GB_PHASE_COUNT ? names[phase] : "unknown";
}
