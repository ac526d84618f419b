/* The bf16 precision policy: bf16 activations, matmul inputs and weights, f32 master
 * weights, no loss scaling.
 *
 * bf16 has f32's 8 exponent bits, so gradients do not underflow the way f16 ones do and
 * the loss-scaler entries are NULL (precision.h: scale 1, no step ever skipped). What it
 * loses is mantissa (7 bits), which is why the optimizer updates an f32 master copy and
 * writes the bf16 working copy in the same pass, rounded to nearest even, or with
 * `stochastic_rounding` stochastically (the policy's ABI 1.1 field, which the core passes
 * to the optimizer; a caller whose policy struct predates 1.1 does not see it).
 *
 * The policy is device-independent: CUDA runs bf16 kernels, the CPU device converts, so
 * eligible() says yes everywhere with no reason. Which of the two a run prefers is the
 * core's choice by device capability, not this plugin's.
 */
#include <stddef.h>

#include "gearbox/precision.h"
#include "policy_plugin.h"

typedef struct bf16 {
    const gb_host *host;
    int stochastic_rounding;
} bf16;

enum { OPT_STOCHASTIC_ROUNDING };

static const gb_option bf16_options[] = {
    [OPT_STOCHASTIC_ROUNDING] = {"stochastic_rounding", GB_OPT_BOOL, "false", 0, 0, NULL,
                                 "round the optimizer's bf16 weight copy stochastically "
                                 "(unbiased, reproducible from the run's seed) instead of to "
                                 "nearest even"},
};

static gb_status bf16_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    (void)device;
    if (!host || !options || !self)
        return GB_ERR_INVALID_ARG;
    bf16 *p = policy_instance_new(host, sizeof *p, "precision/bf16");
    if (!p)
        return GB_ERR_NO_MEMORY;
    p->stochastic_rounding = options[OPT_STOCHASTIC_ROUNDING].i != 0;
    *self = p;
    return GB_OK;
}

static gb_status bf16_policy(void *self, gb_precision_policy *out)
{
    gb_status st = policy_write(self, out, GB_BF16, 1);
    const bf16 *p = self;
    if (st == GB_OK && out->struct_size >= offsetof(gb_precision_policy, stochastic_rounding) +
                                                sizeof out->stochastic_rounding)
        out->stochastic_rounding = p->stochastic_rounding;
    return st;
}

/* The scaler entries stay NULL: bf16 needs no loss scaling. */
GB_PRECISION_PLUGIN("bf16", "1.0.0",
                    "bf16 activations, matmuls and weights, f32 master weights; no loss scaling",
                    GB_DEVICE_CPU | GB_DEVICE_CUDA | GB_DEVICE_ANY_HOST,
                    GB_DTYPE_BIT(GB_BF16), GB_CAP_DETERMINISTIC,
                    GB_OPTIONS(bf16_options), .create = bf16_create,
                    .destroy = policy_instance_destroy, .eligible = policy_eligible_anywhere,
                    .policy = bf16_policy)
