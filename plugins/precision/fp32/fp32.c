/* The fp32 precision policy: everything in f32, no master copy, no loss scaling.
 *
 * The baseline every other policy is compared against. It runs on any device, so
 * eligible() always says yes, and since f32 gradients do not underflow the way f16 ones
 * do, the loss-scaler entries are NULL (precision.h: scale 1, no step ever skipped).
 * It has no options and keeps no state beyond its host.
 */
#include "gearbox/precision.h"
#include "policy_plugin.h"

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
    *self = policy_instance_new(host, sizeof(fp32));
    return *self ? GB_OK : GB_ERR_NO_MEMORY;
}

static gb_status fp32_policy(void *self, gb_precision_policy *out)
{
    return policy_write(self, out, GB_F32, 0);
}

static const gb_precision_ops fp32_ops = {
    .struct_size = sizeof(gb_precision_ops),
    .create = fp32_create,
    .destroy = policy_instance_destroy,
    .eligible = policy_eligible_anywhere,
    .policy = fp32_policy,
    /* The scaler entries stay NULL: no loss scaling. */
};

GB_PLUGIN_DEFINE_CAPS(GB_KIND_PRECISION, "fp32", "1.0.0",
                      "f32 activations, matmuls and weights; no loss scaling",
                      GB_DEVICE_CPU | GB_DEVICE_CUDA | GB_DEVICE_ANY_HOST, GB_DTYPE_BIT(GB_F32),
                      GB_CAP_DETERMINISTIC, GB_NO_OPTIONS, fp32_ops)
