/* Per-phase timers for a training step, behind `gearbox bench step --profile`.
 *
 * The model and the trainer add the wall time of each kernel call to its phase when a
 * profile is attached (and cost one pointer test when none is). On devices with a queue
 * the device is synchronised around every timed call, so a profile shows where time goes
 * but removes any overlap between kernels; compare its total with an unprofiled run.
 * It also counts the FLOPs each phase executes, which a profile of one step gives exactly
 * (they do not depend on the data).
 */
#ifndef GB_CORE_PROFILE_H
#define GB_CORE_PROFILE_H

#include <stdint.h>

typedef enum gb_phase {
    GB_PHASE_DATA,            /* batch assembly and host-to-device copies of tokens */
    GB_PHASE_FWD_EMBED,
    GB_PHASE_FWD_LAYERNORM,
    GB_PHASE_FWD_MATMUL,      /* linear layers and the LM head, bias included */
    GB_PHASE_FWD_ATTN,
    GB_PHASE_FWD_GELU,
    GB_PHASE_FWD_RESIDUAL,
    GB_PHASE_FWD_LOSS,        /* cross-entropy and reading the losses back */
    GB_PHASE_BWD_LOSS,
    GB_PHASE_BWD_MATMUL_DX,   /* input gradients of linear layers */
    GB_PHASE_BWD_MATMUL_DW,   /* weight gradients of linear layers */
    GB_PHASE_BWD_BIAS,
    GB_PHASE_BWD_ATTN,
    GB_PHASE_BWD_GELU,
    GB_PHASE_BWD_LAYERNORM,
    GB_PHASE_BWD_EMBED,
    GB_PHASE_ZERO_GRADS,      /* the parameter and residual gradient buffers */
    GB_PHASE_GRAD_NORM,
    GB_PHASE_OPTIMIZER,
    GB_PHASE_ALL_REDUCE,      /* waiting for gradient buckets after backward */
    GB_PHASE_RECOMPUTE,       /* forward kernels run again in backward ([train] recompute) */
    GB_PHASE_COUNT
} gb_phase;

typedef struct gb_profile {
    double ms[GB_PHASE_COUNT];
    int64_t calls[GB_PHASE_COUNT];
    /* FLOPs the matmul and attention calls of each phase executed, 2 per multiply-add:
     * matmuls from their shapes, attention over the causal triangle (diagonal included)
     * that the plugins compute: two products forward, four backward. */
    double flops[GB_PHASE_COUNT];
    /* Called, when set, with the device synchronised at both ends of every timed call of
     * the model: with GB_PHASE_COUNT at its start, with its phase at its end, so what the
     * device ran between the two marks is that call's (`gearbox bench step --predict`
     * reads the CUDA emulator's counts there). A zeroed profile has none. */
    void (*mark)(void *ctx, gb_phase phase);
    void *mark_ctx;
} gb_profile;

/* "forward: matmul" and the like. */
const char *gb_phase_name(gb_phase phase);

#endif
