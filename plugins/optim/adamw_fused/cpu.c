/* AdamW on the CPU in one pass over memory: optim/adamw's mathematics at the speed of
 * the memory bus.
 *
 * A step reads p, g, m and v once and writes p, m and v once (28 bytes per parameter, plus
 * 2 for a bf16/f16 working copy when the core asks for one), applying in that one pass the
 * clip and loss-scale factor, the group's weight decay, both moments with bias correction
 * and the update; with the loss scale on the device (ABI 1.4) it reads the scale there and
 * leaves everything as it is when the gradients overflowed. The squared gradient norm that
 * clipping needs comes from grad_norm_sq, a second read of g (4 bytes per parameter), so a
 * step reads the gradients twice in all. Both loops run on the kernels of kernels.h:
 * AVX-512 when the CPU has it (decided at run time, so a -Dnative=false build still uses
 * it), otherwise portable C; the flat buffers are cut into contiguous, 64-byte-aligned
 * parts, a few per thread, that the threads take in turn (kernels/cpu/omp_team.h), each
 * walking the groups that meet it.
 *
 * Results: the same options, defaults, validation and state layout (m then v, 8n bytes) as
 * optim/adamw, so the two can take over each other's state. The parameters are
 * bit-identical to optim/adamw's for the same squared norm: every element goes through the
 * same f32 operations in the same order (kernels/common/adamw.h, which the CUDA plugins
 * share), with contraction into FMA turned off and no reciprocal tricks. The one
 * difference is grad_norm_sq itself, which sums in double over 256 fixed chunks of 16
 * lanes each (so it does not depend on the thread count) where the CPU device sums one
 * chunk per thread; both round a double to f32 at the end, so the two norms differ only
 * when that double lies within a few ulps of a rounding boundary, and then by one f32 ulp.
 *
 * Deliberately left out, as in optim/adamw: AMSGrad, maximize, and parameters other
 * than f32 masters.
 */
#include <omp.h>

#include "adamw_instance.h"
#include "gearbox/optim.h"
#include "kernels.h"
#include "omp_team.h"
#include "step_args.h"

/* Below this many elements a parallel region costs more than it saves. */
#define FUSED_PARALLEL_MIN 32768
/* grad_norm_sq's fixed partition; the order of the partial sums depends on n alone. */
#define NORM_CHUNKS 256

typedef struct adamw_fused {
    adamw_base base;
    const fused_kernels *kernels;
} adamw_fused;

static const fused_kernels *best_kernels(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? &fused_kernels_avx512 : &fused_kernels_portable;
}

static gb_status fused_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    gb_status status = adamw_base_create(host, options, device, optim_cpu_device_ok,
                                         "adamw_fused", sizeof(adamw_fused), self);
    if (status != GB_OK)
        return status;
    adamw_fused *a = *self;
    a->kernels = best_kernels();
    host->log(host, GB_LOG_DEBUG, "%s kernels, %d thread(s)", a->kernels->isa,
              a->base.threads);
    return GB_OK;
}

/* Start of part `k` of `parts` of [0, n), on a 16-element boundary so that each part
 * starts on its own cache line. */
static int64_t part_begin(int64_t n, int64_t k, int64_t parts)
{
    return k >= parts ? n : n * k / parts / FUSED_LANES * FUSED_LANES;
}

/* Runs the update on [begin, end) of the flat buffers, one span per group it meets. */
static void update_slice(const adamw_fused *a, const gb_optim_step_args *args,
                         const adamw_coeffs *c, int64_t begin, int64_t end)
{
    float *m = args->state;
    float *v = m + args->n;
    uint16_t *lowp = args->params_lowp;
    float decay = adamw_decay_factor(&a->base.h, args->lr);
    for (int64_t k = 0; k < args->n_groups; k++) {
        const gb_param_group *grp = &args->groups[k];
        int64_t lo = grp->offset > begin ? grp->offset : begin;
        int64_t hi = grp->offset + grp->count < end ? grp->offset + grp->count : end;
        if (lo >= hi)
            continue;
        fused_span span = {
            .p = args->params + lo,
            .g = args->grads + lo,
            .m = m + lo,
            .v = v + lo,
            .lowp = lowp ? lowp + lo : NULL,
            .lowp_dtype = args->lowp_dtype,
            .stochastic = gb_optim_lowp_stochastic(args),
            .seed = gb_optim_lowp_stochastic(args) ? args->lowp_seed : 0,
            .step = args->step,
            .first = lo,
            .count = hi - lo,
            .decay = grp->decay ? decay : 1.0f,
        };
        a->kernels->update(&span, c);
    }
}

/* The update, run in stream order: it reads grad_norm_sq and touches device memory. */
static gb_status fused_step_compute(const void *self, const gb_optim_step_args *args)
{
    const adamw_fused *a = self;
    if (optim_step_skipped(args))
        return GB_OK;
    adamw_coeffs c =
        adamw_step_coeffs(&a->base.h, args->lr, args->step, optim_grad_scale(args));
    int64_t n = args->n;
    const int team = gb_omp_team(a->base.threads);
    const int64_t parts = (int64_t)team * GB_OMP_PIECES_PER_THREAD;
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (n >= FUSED_PARALLEL_MIN)
    for (int64_t k = 0; k < parts; k++)
        update_slice(a, args, &c, part_begin(n, k, parts), part_begin(n, k + 1, parts));
    return GB_OK;
}

static gb_status fused_step(void *self, const gb_optim_step_args *args)
{
    return adamw_cpu_step(self, args, 1, fused_step_compute);
}

static gb_status norm_compute(const adamw_fused *a, float *out, const float *grads, int64_t n);

/* What grad_norm_sq queues. */
typedef struct norm_args {
    const adamw_fused *self;
    float *out;
    const float *grads;
    int64_t n;
} norm_args;

static gb_status norm_run(void *arg)
{
    norm_args *q = arg;
    return norm_compute(q->self, q->out, q->grads, q->n);
}

static gb_status fused_grad_norm_sq(void *self, float *out, const float *grads, int64_t n)
{
    const adamw_fused *a = self;
    if (!a)
        return GB_ERR_INVALID_ARG;
    gb_status status = adamw_check_norm_args(&a->base, out, grads, n);
    if (status != GB_OK)
        return status;
    norm_args q = {.self = a, .out = out, .grads = grads, .n = n};
    return gb_device_run_host(&a->base.inst.device, norm_run, &q, sizeof q);
}

/* The sum of squares, run in stream order: grads and out are device memory. */
static gb_status norm_compute(const adamw_fused *a, float *out, const float *grads, int64_t n)
{
    double partial[NORM_CHUNKS];
#pragma omp parallel for schedule(dynamic, 1) num_threads(gb_omp_team(a->base.threads)) \
    if (n >= FUSED_PARALLEL_MIN)
    for (int k = 0; k < NORM_CHUNKS; k++) {
        int64_t begin = part_begin(n, k, NORM_CHUNKS), end = part_begin(n, k + 1, NORM_CHUNKS);
        partial[k] = a->kernels->sum_squares(grads + begin, end - begin);
    }
    double total = 0.0;
    for (int k = 0; k < NORM_CHUNKS; k++)
        total += partial[k];
    *out = (float)total;
    return GB_OK;
}

GB_OPTIM_PLUGIN("adamw_fused", "1.0.0",
                "AdamW in one pass over memory (AVX-512 or portable, OpenMP), bit-identical "
                "to adamw",
                GB_DEVICE_CPU | GB_DEVICE_ANY_HOST, GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
                GB_CAP_DETERMINISTIC | GB_CAP_LOWP_COPY | GB_CAP_STOCHASTIC_ROUNDING |
                    GB_CAP_QUEUED_MEMORY | GB_CAP_DEVICE_LOSS_SCALE | GB_CAP_RANGE_STEP,
                GB_OPTIONS(adamw_options), .create = fused_create,
                .destroy = gb_plugin_instance_destroy, .state_bytes = adamw_state_bytes,
                .step = fused_step, .grad_norm_sq = fused_grad_norm_sq)
