/* optim/lion: the Lion optimizer (Chen et al. 2023, "Symbolic Discovery of Optimization
 * Algorithms"), as a third-party gearbox plugin built against the installed headers only.
 *
 * Lion keeps one moment m per parameter and moves every parameter by the same amount,
 * the learning rate, in the direction of the sign of an interpolation of m and the
 * gradient; m itself follows the gradient with a slower rate:
 *     c = beta1 * m + (1 - beta1) * g
 *     p = p * (1 - lr * weight_decay)   (groups with decay = 1 only)
 *     p = p - lr * sign(c)
 *     m = beta2 * m + (1 - beta2) * g
 * in the order lion-pytorch applies them. g is the gradient with the loss scale removed
 * and global-norm clipping applied, as gearbox/optim.h defines them. Every element is
 * independent and the loop has a static OpenMP schedule on at most host->num_threads
 * threads, so results are bit-identical for any thread count. The instance starts with
 * the toolkit's gb_plugin_instance (gearbox/toolkit/instance.h) and the step's arguments
 * are checked by the toolkit's gb_optim_step_args_valid (gearbox/toolkit/optim_checks.h),
 * as in gearbox's own plugins.
 *
 * State: m (n) f32, zeroed by the core before step 1, plain data it saves in checkpoints.
 * Deliberately left out: the low-precision parameter copy (a step with params_lowp set is
 * refused with GB_ERR_UNSUPPORTED), any dtype but f32, and devices other than the CPU.
 */
#include <math.h>

#include "gearbox/optim.h"
#include "gearbox/toolkit/instance.h"
#include "gearbox/toolkit/optim_checks.h"

typedef struct lion {
    gb_plugin_instance base;   /* the host and the device (gearbox/toolkit/instance.h) */
    float beta1, beta2, weight_decay;
    int threads;
} lion;

enum { OPT_BETA1, OPT_BETA2, OPT_WEIGHT_DECAY };

static const gb_option lion_options[] = {
    [OPT_BETA1] = {"beta1", GB_OPT_FLOAT, "0.9", 0, 1, NULL,
                   "weight of the moment against the gradient in the update direction"},
    [OPT_BETA2] = {"beta2", GB_OPT_FLOAT, "0.99", 0, 1, NULL,
                   "decay rate of the moment (mean of gradients)"},
    [OPT_WEIGHT_DECAY] = {"weight_decay", GB_OPT_FLOAT, "0.1", 0, 10, NULL,
                          "decoupled weight decay for groups that decay (Lion wants about "
                          "10x AdamW's, with a 3-10x smaller learning rate)"},
};

static gb_status lion_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    if (device->device != GB_DEVICE_CPU) {
        host->set_error(host, "lion runs on the CPU device only");
        return GB_ERR_UNSUPPORTED;
    }
    gb_status st = gb_plugin_instance_new(host, device, "optim/lion", sizeof(lion), self);
    if (st != GB_OK)
        return st;
    lion *l = *self;
    l->beta1 = (float)options[OPT_BETA1].f;
    l->beta2 = (float)options[OPT_BETA2].f;
    l->weight_decay = (float)options[OPT_WEIGHT_DECAY].f;
    l->threads = host->num_threads > 0 ? host->num_threads : 1;
    return GB_OK;
}

static size_t lion_state_bytes(void *self, int64_t n)
{
    (void)self;
    return n > 0 ? sizeof(float) * (size_t)n : 0;
}

/* The factor that removes the loss scale and clips to the global norm (optim.h). */
static float grad_scale(const gb_optim_step_args *args)
{
    double inv_loss_scale = args->inv_loss_scale;
    if (!args->grad_norm_sq || !(args->max_norm > 0))
        return (float)inv_loss_scale;
    double norm = sqrt((double)*args->grad_norm_sq) * inv_loss_scale;
    double clip = args->max_norm / (norm + 1e-6);
    return (float)(inv_loss_scale * (clip < 1.0 ? clip : 1.0));
}

/* One group: p, m, grad (n). decay is 1 for groups without weight decay. */
static void update_group(const lion *l, float *p, float *m, const float *grad, int64_t n,
                         float g_scale, float lr, float decay)
{
    const float b1 = l->beta1, b2 = l->beta2;
#pragma omp parallel for schedule(static) num_threads(l->threads)
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] * g_scale;
        float c = b1 * m[i] + (1.0f - b1) * g;
        float sign = (c > 0.0f) - (c < 0.0f);
        p[i] = p[i] * decay - lr * sign;
        m[i] = b2 * m[i] + (1.0f - b2) * g;
    }
}

static gb_status lion_step(void *self, const gb_optim_step_args *args)
{
    const lion *l = self;
    if (!gb_optim_step_args_valid(l->base.host, args))
        return GB_ERR_INVALID_ARG;
    if (args->params_lowp) {
        l->base.host->set_error(l->base.host, "lion keeps no low-precision parameter copy; use "
                                "a precision policy without master weights");
        return GB_ERR_UNSUPPORTED;
    }
    float g_scale = grad_scale(args);
    float decay = 1.0f - args->lr * l->weight_decay;
    for (int64_t k = 0; k < args->n_groups; k++) {
        const gb_param_group *g = &args->groups[k];
        update_group(l, args->params + g->offset, (float *)args->state + g->offset,
                     args->grads + g->offset, g->count, g_scale, args->lr,
                     g->decay ? decay : 1.0f);
    }
    return GB_OK;
}

GB_OPTIM_PLUGIN("lion", "1.0.0",
                "Lion (Chen et al. 2023): sign of an interpolated moment; 4 bytes of state "
                "per parameter",
                GB_DEVICE_CPU, 0u, GB_CAPS_UNDECLARED, GB_OPTIONS(lion_options),
                .create = lion_create, .destroy = gb_plugin_instance_destroy,
                .state_bytes = lion_state_bytes, .step = lion_step)
