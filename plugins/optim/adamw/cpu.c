/* AdamW on the CPU: the readable reference optimizer.
 *
 * The mathematics is torch.optim.AdamW's (decoupled weight decay, bias-corrected moments),
 * written as separate passes over the flat buffers in the order PyTorch applies them:
 * weight decay, first moment, second moment, update. Each pass is an OpenMP loop with a
 * static schedule and every element is independent, so results do not depend on the
 * thread count. Scalars (bias corrections, step size) are computed in double and rounded
 * to f32 once, as PyTorch does with its Python-float hyperparameters. The formulas are
 * kernels/common/adamw.h's, which optim/adamw_fused and the CUDA versions use too.
 *
 * Deliberately left out: fusing the passes, vectorising by hand, AMSGrad, maximize, and
 * any dtype other than f32; a fused plugin does the one-pass version.
 *
 * State layout: m (n) f32 followed by v (n) f32, zeroed by the core before step 1.
 */
#include "adamw.h"
#include "adamw_options.h"
#include "gearbox/optim.h"
#include "step_args.h"

typedef struct adamw {
    const gb_host *host;
    gb_device_ctx device;   /* the device given to create(): where step() queues */
    adamw_hparams h;
    int threads;
} adamw;

static gb_status adamw_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    if (!host || !options || !self)
        return GB_ERR_INVALID_ARG;
    if (device && !gb_device_memory_is_host(device)) {
        host->set_error(host, "adamw (cpu) runs on devices whose buffers are host memory");
        return GB_ERR_UNSUPPORTED;
    }
    adamw_hparams h;
    if (!adamw_read_options(host, options, &h))
        return GB_ERR_CONFIG;
    adamw *a = host->alloc(host, sizeof *a);
    if (!a) {
        host->set_error(host, "out of memory");
        return GB_ERR_NO_MEMORY;
    }
    *a = (adamw){
        .host = host,
        .h = h,
        .threads = host->num_threads > 0 ? host->num_threads : 1,
    };
    optim_keep_device(&a->device, device);
    *self = a;
    return GB_OK;
}

static void adamw_destroy(void *self)
{
    adamw *a = self;
    if (a)
        a->host->free(a->host, a);
}

static size_t adamw_state_bytes(void *self, int64_t n)
{
    (void)self;
    return n > 0 ? 2 * sizeof(float) * (size_t)n : 0;
}

/* p *= factor; p (n) */
static void decay_weights(float *p, int64_t n, float factor, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++)
        p[i] = gb_fmul_rn(p[i], factor);
}

/* m = b1*m + (1-b1)*g with g = grad*g_scale; m, grad (n) */
static void update_first_moment(float *m, const float *grad, int64_t n, const adamw_coeffs *c,
                                int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++)
        m[i] = adamw_moment1(m[i], adamw_grad(grad[i], c), c);
}

/* v = b2*v + (1-b2)*g*g with g = grad*g_scale; v, grad (n) */
static void update_second_moment(float *v, const float *grad, int64_t n, const adamw_coeffs *c,
                                 int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++)
        v[i] = adamw_moment2(v[i], adamw_grad(grad[i], c), c);
}

/* p -= step_size * m / (sqrt(v)/sqrt(bc2) + eps); p, m, v (n) */
static void apply_update(float *p, const float *m, const float *v, int64_t n,
                         const adamw_coeffs *c, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++)
        p[i] = gb_fsub_rn(p[i], adamw_delta(m[i], v[i], c));
}

static gb_status adamw_step_compute(const adamw *a, const gb_optim_step_args *args);

static gb_status adamw_step_run(void *arg)
{
    optim_queued_step *q = arg;
    return adamw_step_compute(q->self, optim_queued_args(q));
}

static gb_status adamw_step(void *self, const gb_optim_step_args *args)
{
    const adamw *a = self;
    if (!a)
        return GB_ERR_INVALID_ARG;
    if (!optim_step_args_valid(a->host, args))
        return GB_ERR_INVALID_ARG;
    if (args->params_lowp) {
        a->host->set_error(a->host, "adamw keeps no low-precision parameter copy; use "
                           "[optim] plugin = adamw_fused for master weights");
        return GB_ERR_UNSUPPORTED;
    }
    return optim_queue_step(a->host, &a->device, adamw_step_run, a, args);
}

/* The update, run in stream order: it reads grad_norm_sq and touches device memory. */
static gb_status adamw_step_compute(const adamw *a, const gb_optim_step_args *args)
{
    float *m = args->state;
    float *v = m + args->n;
    adamw_coeffs c = adamw_step_coeffs(&a->h, args->lr, args->step, optim_grad_scale(args));
    float decay = adamw_decay_factor(&a->h, args->lr);

    for (int64_t k = 0; k < args->n_groups; k++) {
        int64_t off = args->groups[k].offset, cnt = args->groups[k].count;
        float *p = args->params + off;
        const float *g = args->grads + off;
        if (args->groups[k].decay)
            decay_weights(p, cnt, decay, a->threads);
        update_first_moment(m + off, g, cnt, &c, a->threads);
        update_second_moment(v + off, g, cnt, &c, a->threads);
        apply_update(p, m + off, v + off, cnt, &c, a->threads);
    }
    return GB_OK;
}

static const gb_optim_ops adamw_ops = {
    .struct_size = sizeof(gb_optim_ops),
    .create = adamw_create,
    .destroy = adamw_destroy,
    .state_bytes = adamw_state_bytes,
    .step = adamw_step,
};

GB_PLUGIN_DEFINE_CAPS(GB_KIND_OPTIM, "adamw", "1.0.0",
                      "AdamW (torch.optim.AdamW math), readable reference: one pass per term",
                      GB_DEVICE_CPU | GB_DEVICE_ANY_HOST, 0u,
                      GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY, GB_OPTIONS(adamw_options), adamw_ops)
