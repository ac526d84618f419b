/* The fp32 precision policy: everything in f32, no master copy, no loss scaling.
 *
 * The baseline every other policy is compared against. It runs on any device, so
 * eligible() always says yes, and since f32 gradients do not underflow the way f16 ones
 * do, the loss-scaler entries are NULL (precision.h: scale 1, no step ever skipped).
 * It has no options and keeps no state beyond its host.
 */
#include "gearbox/precision.h"
#include "policy_plugin.h"

static gb_status fp32_policy(void *self, gb_precision_policy *out)
{
    return policy_write(self, out, GB_F32, 0);
}

/* The scaler entries stay NULL: no loss scaling. */
GB_PRECISION_PLUGIN_FOR(GB_FAMILY_ANY, "fp32", "1.0.0",
                        "f32 activations, matmuls and weights; no loss scaling",
                        GB_DEVICE_CPU | GB_DEVICE_CUDA | GB_DEVICE_ANY_HOST,
                        GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC,
                        GB_NO_OPTIONS, .create = policy_create_plain,
                        .destroy = policy_instance_destroy, .eligible = policy_eligible_anywhere,
                        .policy = fp32_policy)
