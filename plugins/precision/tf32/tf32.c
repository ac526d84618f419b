/* The tf32 precision policy: f32 storage everywhere, matmuls on CUDA tensor cores in TF32.
 *
 * TF32 rounds matmul inputs to 10 mantissa bits (f32's 8-bit exponent kept) and
 * accumulates in f32, which runs matmuls several times faster than plain f32 on Ampere
 * and newer GPUs; on older ones the permission changes nothing. Activations, weights and
 * gradients stay f32, so there is no master copy and no loss scaling (the scaler entries
 * are NULL). It is PyTorch's torch.backends.cuda.matmul.allow_tf32 = True.
 *
 * The CPU has no TF32, so eligible() refuses it with a reason pointing at fp32 and bf16;
 * so it does a GPU older than compute capability 8.0 (the context's cc_major, ABI 1.2).
 * The descriptor still lists the CPU because the object itself, being policy only, loads
 * anywhere: that way `[precision] plugin = tf32` on the CPU gets eligible()'s explanation.
 * The permission travels as gb_precision_policy.tf32 (ABI 1.2), which the core passes to
 * every matmul and attention call as allow_tf32.
 */
#include <stddef.h>
#include <stdio.h>

#include "gearbox/precision.h"
#include "policy_plugin.h"

/* The compute capability of a CUDA device, or 0 when its context predates ABI 1.2 and
 * does not say (then the GPU is taken to have TF32). */
static int cc_major_of(const gb_device_ctx *device)
{
    return device->struct_size >= offsetof(gb_device_ctx, cc_minor) + sizeof device->cc_minor
               ? device->cc_major
               : 0;
}

static int tf32_eligible(void *self, const gb_device_ctx *device, char *reason,
                         size_t reason_cap)
{
    (void)self;
    int cuda = device && device->device == GB_DEVICE_CUDA;
    int cc = cuda ? cc_major_of(device) : 0;
    int ok = cuda && (cc == 0 || cc >= 8);
    if (reason && reason_cap > 0) {
        if (ok)
            reason[0] = '\0';
        else if (cuda)
            snprintf(reason, reason_cap, "tf32 needs tensor cores of compute capability 8.0 "
                     "(Ampere) or later; this GPU is %d.%d: use fp32 (the same numbers without "
                     "TF32) or fp16", device->cc_major, device->cc_minor);
        else
            snprintf(reason, reason_cap, "tf32 is a CUDA tensor-core matmul mode; this run's "
                     "device is %s: use fp32 (the same numbers without TF32) or bf16",
                     !device ? "unknown" : device->device == GB_DEVICE_CPU ? "cpu" : "not CUDA");
    }
    return ok;
}

/* Storage stays f32; TF32 is a property of the matmuls (docs/precision.md). */
static gb_status tf32_policy(void *self, gb_precision_policy *out)
{
    gb_status st = policy_write(self, out, GB_F32, 0);
    if (st == GB_OK && out->struct_size >= offsetof(gb_precision_policy, tf32) + sizeof out->tf32)
        out->tf32 = 1;
    return st;
}

/* The scaler entries stay NULL: f32 gradients need no loss scaling. */
GB_PRECISION_PLUGIN("tf32", "1.0.0",
                    "f32 storage with TF32 tensor-core matmuls (CUDA only); no loss scaling",
                    GB_DEVICE_CPU | GB_DEVICE_CUDA, GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC,
                    GB_NO_OPTIONS, .create = policy_create_plain,
                    .destroy = policy_instance_destroy, .eligible = tf32_eligible,
                    .policy = tf32_policy)
