/* The fp16 precision policy: f16 activations, matmul inputs and weights, f32 master
 * weights, and a dynamic loss scaler with PyTorch GradScaler's semantics.
 *
 * f16 keeps 10 mantissa bits but only 5 exponent bits, so small gradients underflow to
 * zero unless the loss is scaled up first: the core multiplies the loss gradient by
 * loss_scale(), divides the gradients by it before the optimizer step, and reports after
 * each step whether any gradient was inf/nan; update() then skips the step and backs the
 * scale off, or counts a clean step and grows the scale after growth_interval of them.
 * The rule, its config keys and the 40-byte state blob the core saves in checkpoints
 * (magic "GBLS", version, scale, growth tracker, skipped steps, total steps) are
 * described in plugins/precision/common/loss_scaler.h.
 *
 * The policy is device-independent: on CUDA the kernels run in f16, on the CPU the device
 * converts, so eligible() says yes everywhere. With device_update (the default) the
 * scaler also gives itself to the core as a gb_loss_scaler (ABI 1.4, scaler_get and
 * scaler_set), so on a device and optimizer that can, the overflow check, the skip and the
 * scale's update stay on the device, with the same rule and bits, and no host round trip
 * per step. Left out: per-parameter-group scales and hysteresis (several infs in a row
 * before backing off), which GradScaler lacks too.
 */
#include "gearbox/precision.h"
#include "loss_scaler.h"
#include "policy_plugin.h"

typedef struct fp16 {
    const gb_host *host;
    loss_scaler scaler;
    int device_update;
} fp16;

enum { OPT_INIT_SCALE, OPT_GROWTH_FACTOR, OPT_BACKOFF_FACTOR, OPT_GROWTH_INTERVAL,
       OPT_MIN_SCALE, OPT_ENABLED, OPT_DEVICE_UPDATE };

static const gb_option fp16_options[] = {
    [OPT_INIT_SCALE] = {"init_scale", GB_OPT_FLOAT, "65536", 1e-38, 1e38, NULL,
                        "the loss scale of the first step (2^16, as GradScaler); at least "
                        "min_scale"},
    [OPT_GROWTH_FACTOR] = {"growth_factor", GB_OPT_FLOAT, "2.0", 1, 65536, NULL,
                           "the scale is multiplied by this after growth_interval clean "
                           "steps; above 1"},
    [OPT_BACKOFF_FACTOR] = {"backoff_factor", GB_OPT_FLOAT, "0.5", 0, 1, NULL,
                            "the scale is multiplied by this after a step with inf/nan "
                            "gradients, which is skipped; in (0, 1)"},
    [OPT_GROWTH_INTERVAL] = {"growth_interval", GB_OPT_INT, "2000", 1, 1e9, NULL,
                             "clean steps in a row before the scale grows"},
    [OPT_MIN_SCALE] = {"min_scale", GB_OPT_FLOAT, "1.0", 1e-38, 1e38, NULL,
                       "the scale never backs off below this (PyTorch's GradScaler has no "
                       "floor; 1e-38 comes close)"},
    [OPT_ENABLED] = {"enabled", GB_OPT_BOOL, "true", 0, 0, NULL,
                     "false turns loss scaling off: scale 1, no step ever skipped, as "
                     "GradScaler(enabled=False)"},
    [OPT_DEVICE_UPDATE] = {"device_update", GB_OPT_BOOL, "true", 0, 0, NULL,
                           "the overflow check and the scale's update run on the device, "
                           "where the device and optimizer can (no host round trip per step); "
                           "false: on the host, after reading the gradient norm back"},
};

static gb_status fp16_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    (void)device;
    if (!host || !options || !self)
        return GB_ERR_INVALID_ARG;
    const loss_scaler_config config = {
        .init_scale = options[OPT_INIT_SCALE].f,
        .growth_factor = options[OPT_GROWTH_FACTOR].f,
        .backoff_factor = options[OPT_BACKOFF_FACTOR].f,
        .growth_interval = options[OPT_GROWTH_INTERVAL].i,
        .min_scale = options[OPT_MIN_SCALE].f,
        .enabled = options[OPT_ENABLED].i != 0,
    };
    loss_scaler scaler;
    gb_status st = loss_scaler_init(&scaler, &config, host);
    if (st != GB_OK)
        return st;
    fp16 *p = policy_instance_new(host, sizeof *p, "precision/fp16");
    if (!p)
        return GB_ERR_NO_MEMORY;
    p->scaler = scaler;
    p->device_update = options[OPT_DEVICE_UPDATE].i != 0;
    *self = p;
    return GB_OK;
}

static gb_status fp16_policy(void *self, gb_precision_policy *out)
{
    return policy_write(self, out, GB_F16, 1);
}

static float fp16_loss_scale(void *self)
{
    return loss_scaler_scale(&((fp16 *)self)->scaler);
}

static gb_status fp16_update(void *self, int found_inf, int *skip_step)
{
    fp16 *p = self;
    gb_status st = policy_require(self, skip_step, "update: skip_step must not be NULL");
    if (st == GB_OK)
        loss_scaler_update(&p->scaler, found_inf, skip_step);
    return st;
}

static size_t fp16_state_bytes(void *self)
{
    (void)self;
    return sizeof(loss_scaler_state);
}

static gb_status fp16_save_state(void *self, void *buf)
{
    fp16 *p = self;
    gb_status st = policy_require(self, buf, "save_state: no buffer");
    if (st == GB_OK)
        loss_scaler_save(&p->scaler, buf);
    return st;
}

static gb_status fp16_load_state(void *self, const void *buf)
{
    fp16 *p = self;
    gb_status st = policy_require(self, buf, "load_state: no buffer");
    return st == GB_OK ? loss_scaler_load(&p->scaler, buf, p->host) : st;
}

static gb_status fp16_scaler_get(void *self, gb_loss_scaler *out)
{
    fp16 *p = self;
    gb_status st = policy_require(self, out, "scaler_get: out must not be NULL");
    if (st != GB_OK)
        return st;
    if (!p->device_update) {
        p->host->set_error(p->host, "[precision] device_update = false");
        return GB_ERR_UNSUPPORTED;
    }
    loss_scaler_get(&p->scaler, out);
    return GB_OK;
}

static gb_status fp16_scaler_set(void *self, const gb_loss_scaler *in)
{
    fp16 *p = self;
    gb_status st = policy_require(self, in, "scaler_set: in must not be NULL");
    return st == GB_OK ? loss_scaler_set(&p->scaler, in, p->host) : st;
}

GB_PRECISION_PLUGIN("fp16", "1.0.0",
                    "f16 compute, f32 master weights, dynamic loss scaling (PyTorch GradScaler)",
                    GB_DEVICE_CPU | GB_DEVICE_CUDA | GB_DEVICE_ANY_HOST,
                    GB_DTYPE_BIT(GB_F16), GB_CAP_DETERMINISTIC,
                    GB_OPTIONS(fp16_options), .create = fp16_create,
                    .destroy = policy_instance_destroy, .eligible = policy_eligible_anywhere,
                    .policy = fp16_policy, .loss_scale = fp16_loss_scale, .update = fp16_update,
                    .state_bytes = fp16_state_bytes, .save_state = fp16_save_state,
                    .load_state = fp16_load_state, .scaler_get = fp16_scaler_get,
                    .scaler_set = fp16_scaler_set)
