/* The fp32 precision policy: everything in f32, no master copy, no loss scaling.
 *
 * The baseline every other policy is compared against. It runs on any device, so
 * eligible() always says yes, and since f32 gradients do not underflow the way f16 ones
 * do, the loss-scaler entries are NULL (precision.h: scale 1, no step ever skipped).
 * It has no options and keeps no state beyond its host.
 */
#include "gearbox/precision.h"

typedef struct fp32 {
    const gb_host *host;
} fp32;

static gb_status fp32_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    (void)options;
    (void)device;
    if (!host || !self)
        return GB_ERR_INVALID_ARG;
    fp32 *p = host->alloc(host, sizeof *p);
    if (!p) {
        host->set_error(host, "out of memory");
        return GB_ERR_NO_MEMORY;
    }
    p->host = host;
    *self = p;
    return GB_OK;
}

static void fp32_destroy(void *self)
{
    fp32 *p = self;
    if (p)
        p->host->free(p->host, p);
}

static int fp32_eligible(void *self, const gb_device_ctx *device, char *reason,
                         size_t reason_cap)
{
    (void)self;
    (void)device;
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    return 1;
}

static gb_status fp32_policy(void *self, gb_precision_policy *out)
{
    fp32 *p = self;
    if (!out) {
        if (p)
            p->host->set_error(p->host, "policy: no output struct");
        return GB_ERR_INVALID_ARG;
    }
    /* ABI 1.0 fields only, which every caller's struct_size covers (docs/abi.md) */
    out->activation_dtype = GB_F32;
    out->matmul_dtype = GB_F32;
    out->param_dtype = GB_F32;
    out->master_weights = 0;
    return GB_OK;
}

static const gb_precision_ops fp32_ops = {
    .struct_size = sizeof(gb_precision_ops),
    .create = fp32_create,
    .destroy = fp32_destroy,
    .eligible = fp32_eligible,
    .policy = fp32_policy,
    /* The scaler entries stay NULL: no loss scaling. */
};

GB_PLUGIN_DEFINE(GB_KIND_PRECISION, "fp32", "1.0.0",
                 "f32 activations, matmuls and weights; no loss scaling",
                 GB_DEVICE_CPU | GB_DEVICE_CUDA, GB_NO_OPTIONS, fp32_ops)
