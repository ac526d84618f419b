/* optim/adamw for the toy NPU (family "toy_npu"; built a second time with NPU_OTHER_FAMILY
 * for a family that does not exist, which the loader must refuse on the NPU): AdamW with
 * the keys and defaults of gearbox's own, run as the NPU's kernel, every buffer reached
 * through toy_npu_at() (toy_npu.h). Gradients are clipped and unscaled as optim.h says.
 * f32 only: it writes no low-precision copy. Built out of tree against gearbox's headers
 * alone, the toolkit's among them (gearbox/toolkit/instance.h, optim_checks.h).
 */
#include <math.h>

#include "gearbox/optim.h"
#include "gearbox/toolkit/instance.h"
#include "gearbox/toolkit/optim_checks.h"
#include "toy_npu.h"

#if defined(NPU_OTHER_FAMILY)
#define FAMILY "other_npu"
#else
#define FAMILY TOY_NPU_FAMILY
#endif

enum { OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_WEIGHT_DECAY };

static const gb_option npu_adamw_options[] = {
    {"beta1", GB_OPT_FLOAT, "0.9", 0, 0.999999, NULL, "decay rate of the first moment"},
    {"beta2", GB_OPT_FLOAT, "0.95", 0, 0.999999, NULL, "decay rate of the second moment"},
    {"eps", GB_OPT_FLOAT, "1e-8", 1e-30, 1, NULL, "added to the denominator"},
    {"weight_decay", GB_OPT_FLOAT, "0.1", 0, 10, NULL, "decoupled weight decay of decaying groups"},
};

typedef struct npu_adamw {
    gb_plugin_instance base;   /* the host and the device (gearbox/toolkit/instance.h) */
    const toy_npu_runtime *npu;
    double beta1, beta2, eps, weight_decay;
} npu_adamw;

static gb_status npu_create(const gb_host *host, const gb_value *options,
                            const gb_device_ctx *device, void **self)
{
    const toy_npu_runtime *npu = toy_npu_of(device);
    if (!npu) {
        host->set_error(host, "optim/adamw (%s) runs on the toy NPU only: this run's device "
                        "is not one", FAMILY);
        return GB_ERR_UNSUPPORTED;
    }
    gb_status st = gb_plugin_instance_new(host, device, "optim/adamw (" FAMILY ")",
                                          sizeof(npu_adamw), self);
    if (st != GB_OK)
        return st;
    npu_adamw *a = *self;
    a->npu = npu;
    a->beta1 = options[OPT_BETA1].f;
    a->beta2 = options[OPT_BETA2].f;
    a->eps = options[OPT_EPS].f;
    a->weight_decay = options[OPT_WEIGHT_DECAY].f;
    return GB_OK;
}

static size_t npu_state_bytes(void *self, int64_t n)
{
    (void)self;
    return 2 * (size_t)n * sizeof(float);
}

/* What each gradient is multiplied by: the loss scale removed, then the clip (optim.h). */
static float grad_scale(const npu_adamw *a, const gb_optim_step_args *args)
{
    float inv = args->inv_loss_scale;
    if (gb_optim_loss_scale(args))
        inv = 1.0f / *(const float *)toy_npu_at(a->npu, gb_optim_loss_scale(args));
    if (!args->grad_norm_sq || args->max_norm <= 0.0f)
        return inv;
    float norm = sqrtf(*(const float *)toy_npu_at(a->npu, args->grad_norm_sq)) * inv;
    float clip = args->max_norm / (norm + 1e-6f);
    return inv * (clip < 1.0f ? clip : 1.0f);
}

static gb_status npu_step(void *self, const gb_optim_step_args *args)
{
    const npu_adamw *a = self;
    if (!gb_optim_step_args_valid(a->base.host, args))
        return GB_ERR_INVALID_ARG;
    if (args->params_lowp) {
        a->base.host->set_error(a->base.host, "optim/adamw (%s) writes no low-precision copy: "
                                "use [precision] plugin = fp32", FAMILY);
        return GB_ERR_UNSUPPORTED;
    }
    float *p = toy_npu_at(a->npu, args->params), *m = toy_npu_at(a->npu, args->state);
    const float *g = toy_npu_at(a->npu, args->grads);
    float *v = m + args->n;
    const float scale = grad_scale(a, args);
    const double bc1 = 1.0 - pow(a->beta1, (double)args->step);
    const double bc2 = 1.0 - pow(a->beta2, (double)args->step);
    for (int64_t k = 0; k < args->n_groups; k++) {
        const gb_param_group *grp = &args->groups[k];
        float decay = grp->decay ? (float)(1.0 - args->lr * a->weight_decay) : 1.0f;
        for (int64_t i = grp->offset; i < grp->offset + grp->count; i++) {
            float gi = g[i] * scale;
            m[i] = (float)(a->beta1 * m[i] + (1.0 - a->beta1) * gi);
            v[i] = (float)(a->beta2 * v[i] + (1.0 - a->beta2) * gi * gi);
            float update = (float)(args->lr * (m[i] / bc1) / (sqrt(v[i] / bc2) + a->eps));
            p[i] = p[i] * decay - update;
        }
    }
    return GB_OK;
}

GB_OPTIM_PLUGIN_FOR(FAMILY, "adamw", "1.0.0", "AdamW on the toy NPU's memory; f32", 0u,
                    GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY,
                    GB_OPTIONS(npu_adamw_options), .create = npu_create,
                    .destroy = gb_plugin_instance_destroy, .state_bytes = npu_state_bytes,
                    .step = npu_step)
