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
#include "adamw_instance.h"
#include "gearbox/optim.h"
#include "omp_team.h"
#include "step_args.h"

typedef adamw_base adamw;

static gb_status adamw_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    return adamw_base_create(host, options, device, optim_cpu_device_ok, "adamw", sizeof(adamw),
                             self);
}

/* p *= factor; p (n) */
static void decay_weights(float *p, int64_t n, float factor, int threads)
{
#pragma omp parallel for schedule(static) num_threads(gb_omp_team(threads))
    for (int64_t i = 0; i < n; i++)
        p[i] = gb_fmul_rn(p[i], factor);
}

/* m = b1*m + (1-b1)*g with g = grad*g_scale; m, grad (n) */
static void update_first_moment(float *m, const float *grad, int64_t n, const adamw_coeffs *c,
                                int threads)
{
#pragma omp parallel for schedule(static) num_threads(gb_omp_team(threads))
    for (int64_t i = 0; i < n; i++)
        m[i] = adamw_moment1(m[i], adamw_grad(grad[i], c), c);
}

/* v = b2*v + (1-b2)*g*g with g = grad*g_scale; v, grad (n) */
static void update_second_moment(float *v, const float *grad, int64_t n, const adamw_coeffs *c,
                                 int threads)
{
#pragma omp parallel for schedule(static) num_threads(gb_omp_team(threads))
    for (int64_t i = 0; i < n; i++)
        v[i] = adamw_moment2(v[i], adamw_grad(grad[i], c), c);
}

/* p -= step_size * m / (sqrt(v)/sqrt(bc2) + eps); p, m, v (n) */
static void apply_update(float *p, const float *m, const float *v, int64_t n,
                         const adamw_coeffs *c, int threads)
{
#pragma omp parallel for schedule(static) num_threads(gb_omp_team(threads))
    for (int64_t i = 0; i < n; i++)
        p[i] = gb_fsub_rn(p[i], adamw_delta(m[i], v[i], c));
}

/* The update, run in stream order: it reads grad_norm_sq and touches device memory. */
static gb_status adamw_step_compute(const void *self, const gb_optim_step_args *args)
{
    const adamw *a = self;
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

static gb_status adamw_step(void *self, const gb_optim_step_args *args)
{
    return adamw_cpu_step(self, args, 0, adamw_step_compute);
}

GB_OPTIM_PLUGIN("adamw", "1.0.0",
                "AdamW (torch.optim.AdamW math), readable reference: one pass per term",
                GB_DEVICE_CPU | GB_DEVICE_ANY_HOST, 0u, GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY |
                    GB_CAP_RANGE_STEP,
                GB_OPTIONS(adamw_options), .create = adamw_create,
                .destroy = gb_plugin_instance_destroy, .state_bytes = adamw_state_bytes,
                .step = adamw_step)
