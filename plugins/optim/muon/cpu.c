/* Muon on the CPU: the hidden matrices orthogonalised in f32, AdamW for the rest.
 *
 * The step is muon_step.h's, its matrix products the device's matmul (oneDNN on
 * device/cpu) in f32, the dtype a CPU computes the reference in; its element-wise passes
 * are OpenMP loops over kernels/common/muon.h's and adamw.h's formulas, queued on the
 * device with gb_device_run_host so that they run in order with the products between them.
 * Every element is independent and the loops have a static schedule, so the results do
 * not depend on the thread count.
 *
 * Deliberately left out: fusing the passes, vectors by hand, and a bf16 iteration (the
 * CUDA version's); the device's sum_squares gives the norm.
 */
#include "adamw.h"
#include "gearbox/optim.h"
#include "muon.h"
#include "muon_step.h"
#include "stochastic_round.h"

/* One pass as queued: its instance, a copy of the step's arguments and its operands. */
typedef struct muon_cpu_pass {
    const muon_base *mu;
    gb_optim_step_args args;
    muon_tensor t;
    muon_coeffs c;
    muon_apply_coeffs ac;
    float *u;
    const float *norm_sq;
    float *x;
    int64_t numel;          /* the normalising pass's elements */
} muon_cpu_pass;

static gb_status queue(const muon_base *mu, gb_host_fn fn, muon_cpu_pass *pass)
{
    pass->mu = mu;
    return gb_device_run_host(&mu->adamw.inst.device, fn, pass, sizeof *pass);
}

static muon_cpu_pass pass_of(const gb_optim_step_args *args)
{
    muon_cpu_pass pass;
    memset(&pass, 0, sizeof pass);
    size_t n = args->struct_size < sizeof pass.args ? args->struct_size : sizeof pass.args;
    memcpy(&pass.args, args, n);
    pass.args.struct_size = n;
    pass.args.groups = NULL; /* the plan has the tensors; the caller's groups may go */
    pass.args.n_groups = 0;
    return pass;
}

/* Writes the working copy of p[0, count) at flat offset `offset`, when there is one. */
static void write_lowp(const gb_optim_step_args *args, int64_t offset, int64_t count,
                       int threads)
{
    uint16_t *lowp = args->params_lowp;
    if (!lowp)
        return;
    const int stochastic = gb_optim_lowp_stochastic(args);
    const float *p = args->params;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = offset; i < offset + count; i++)
        lowp[i] = gb_lowp_at(p[i], args->lowp_dtype, stochastic, args->lowp_seed, args->step, i);
}

static gb_status run_adamw(void *arg)
{
    const muon_cpu_pass *q = arg;
    const muon_base *mu = q->mu;
    const gb_optim_step_args *args = &q->args;
    float *m = args->state, *v = m + args->n;
    adamw_coeffs c = adamw_step_coeffs(&mu->adamw.h, args->lr, args->step, optim_grad_scale(args));
    const float decay = adamw_decay_factor(&mu->adamw.h, args->lr);
    for (int64_t k = 0; k < mu->n_tensors; k++) {
        const muon_tensor *t = &mu->tensors[k];
        if (muon_is_matrix(t))
            continue;
        const int64_t off = t->offset, count = t->rows * t->cols;
        float *vt = v + t->v_offset - off; /* indexed like p */
        const float d = t->decay ? decay : 1.0f;
#pragma omp parallel for schedule(static) num_threads(mu->adamw.threads)
        for (int64_t i = off; i < off + count; i++)
            adamw_element(&args->params[i], &m[i], &vt[i], args->grads[i], d, &c);
        write_lowp(args, off, count, mu->adamw.threads);
    }
    return GB_OK;
}

static gb_status muon_cpu_adamw(const muon_base *mu, const gb_optim_step_args *args)
{
    muon_cpu_pass pass = pass_of(args);
    return queue(mu, run_adamw, &pass);
}

static gb_status run_momentum(void *arg)
{
    const muon_cpu_pass *q = arg;
    const gb_optim_step_args *args = &q->args;
    muon_coeffs c = q->c;
    c.g_scale = optim_grad_scale(args);
    float *mom = (float *)args->state + q->t.offset;
    const float *g = args->grads + q->t.offset;
    const int64_t numel = q->t.rows * q->t.cols;
#pragma omp parallel for schedule(static) num_threads(q->mu->adamw.threads)
    for (int64_t i = 0; i < numel; i++) {
        mom[i] = muon_momentum(mom[i], g[i], &c);
        q->u[i] = muon_update(mom[i], g[i], &c);
    }
    return GB_OK;
}

static gb_status muon_cpu_momentum(const muon_base *mu, const gb_optim_step_args *args,
                                   const muon_tensor *t, const muon_coeffs *c, float *u)
{
    muon_cpu_pass pass = pass_of(args);
    pass.t = *t;
    pass.c = *c;
    pass.u = u;
    return queue(mu, run_momentum, &pass);
}

static gb_status run_normalize(void *arg)
{
    const muon_cpu_pass *q = arg;
    const float norm_sq = *q->norm_sq;
#pragma omp parallel for schedule(static) num_threads(q->mu->adamw.threads)
    for (int64_t i = 0; i < q->numel; i++)
        q->x[i] = muon_normalized(q->u[i], norm_sq);
    return GB_OK;
}

static gb_status muon_cpu_normalize(const muon_base *mu, void *x, const float *u,
                                    const float *norm_sq, int64_t numel)
{
    muon_cpu_pass pass;
    memset(&pass, 0, sizeof pass);
    pass.numel = numel;
    pass.x = x;
    pass.u = (float *)u;
    pass.norm_sq = norm_sq;
    return queue(mu, run_normalize, &pass);
}

static gb_status run_apply(void *arg)
{
    const muon_cpu_pass *q = arg;
    const gb_optim_step_args *args = &q->args;
    const int64_t off = q->t.offset, numel = q->t.rows * q->t.cols;
    float *p = args->params + off;
#pragma omp parallel for schedule(static) num_threads(q->mu->adamw.threads)
    for (int64_t i = 0; i < numel; i++)
        p[i] = muon_apply(p[i], q->x[i], &q->ac);
    write_lowp(args, off, numel, q->mu->adamw.threads);
    return GB_OK;
}

static gb_status muon_cpu_apply(const muon_base *mu, const gb_optim_step_args *args,
                                const muon_tensor *t, const void *x,
                                const muon_apply_coeffs *c)
{
    muon_cpu_pass pass = pass_of(args);
    pass.t = *t;
    pass.ac = *c;
    pass.x = (float *)x;
    return queue(mu, run_apply, &pass);
}

static const muon_passes cpu_passes = {muon_cpu_adamw, muon_cpu_momentum, muon_cpu_normalize,
                                       muon_cpu_apply};

static gb_status muon_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    return muon_base_create(host, options, device, optim_cpu_device_ok, GB_F32,
                            sizeof(muon_base), self);
}

static gb_status muon_step(void *self, const gb_optim_step_args *args)
{
    return muon_step_with(self, args, &cpu_passes);
}

GB_OPTIM_PLUGIN("muon", "1.0.0",
                "Muon: hidden matrices orthogonalised by 5 Newton-Schulz iterations (f32 "
                "products on the device), AdamW for embeddings, biases and norms",
                GB_DEVICE_CPU | GB_DEVICE_ANY_HOST, GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
                GB_CAP_DETERMINISTIC | GB_CAP_LOWP_COPY | GB_CAP_STOCHASTIC_ROUNDING |
                    GB_CAP_QUEUED_MEMORY,
                GB_OPTIONS(muon_options), .create = muon_create, .destroy = muon_destroy,
                .state_bytes = muon_state_bytes, .step = muon_step,
                .bind_params = muon_bind_params)
