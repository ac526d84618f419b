/* gearbox/toolkit/optim_checks.h: what every optimizer plugin of gearbox checks and does
 * the same way around its step: validation of gb_optim_step_args (sizes, pointers, the
 * step number, groups covering [0, n) exactly once), the fields appended since ABI 1.0
 * read within the caller's struct_size, the low-precision copies gearbox's optimizers
 * write, and the queuing of a CPU plugin's step on the device (optim.h, "Where it
 * runs"). Part of the plugin toolkit (docs/plugin-guide.md): header-only, outside the ABI,
 * compiled into each plugin; it compiles as C and as CUDA C++. Failures are explained
 * through host->set_error().
 */
#ifndef GEARBOX_TOOLKIT_OPTIM_CHECKS_H
#define GEARBOX_TOOLKIT_OPTIM_CHECKS_H

#include <stddef.h>
#include <string.h>

#include "gearbox/device.h"
#include "gearbox/optim.h"

/* Groups must cover [0, n) exactly once: each inside the range, counts adding up to n,
 * and no two overlapping. Groups are few (one per tensor at most), so the pairwise
 * check costs nothing next to the passes over n elements. */
static inline int gb_optim_groups_cover(const gb_host *host, const gb_param_group *groups,
                                        int64_t n_groups, int64_t n)
{
    int64_t total = 0;
    for (int64_t i = 0; i < n_groups; i++) {
        const gb_param_group *g = &groups[i];
        if (g->offset < 0 || g->count < 0 || g->offset > n || g->count > n - g->offset) {
            host->set_error(host, "group %lld [%lld, +%lld) lies outside [0, %lld)",
                               (long long)i, (long long)g->offset, (long long)g->count,
                               (long long)n);
            return 0;
        }
        total += g->count;
    }
    for (int64_t i = 0; i < n_groups; i++)
        for (int64_t j = i + 1; j < n_groups; j++) {
            const gb_param_group *x = &groups[i], *y = &groups[j];
            if (x->offset < y->offset + y->count && y->offset < x->offset + x->count) {
                host->set_error(host, "groups %lld and %lld overlap", (long long)i,
                                   (long long)j);
                return 0;
            }
        }
    if (total != n) {
        host->set_error(host, "groups cover %lld of the %lld parameters",
                           (long long)total, (long long)n);
        return 0;
    }
    return 1;
}

/* The end of the step arguments' ABI 1.0 fields: every core passes at least this much. */
#define GB_OPTIM_STEP_ARGS_1_0_SIZE offsetof(gb_optim_step_args, lowp_stochastic)

/* Whether the caller's arguments reach the 1.1 field of stochastic rounding, and ask for it. */
static inline int gb_optim_lowp_stochastic(const gb_optim_step_args *args)
{
    return args->struct_size >= offsetof(gb_optim_step_args, lowp_seed) + sizeof args->lowp_seed &&
           args->lowp_stochastic;
}

/* The loss scale the device keeps (ABI 1.4, optim.h), or NULL: unset, or arguments from
 * a core that predates it. */
static inline const float *gb_optim_loss_scale(const gb_optim_step_args *args)
{
    return args->struct_size >= offsetof(gb_optim_step_args, loss_scale) + sizeof args->loss_scale
               ? args->loss_scale
               : NULL;
}

static inline int gb_optim_step_args_valid(const gb_host *host, const gb_optim_step_args *args)
{
    if (!args || args->struct_size < GB_OPTIM_STEP_ARGS_1_0_SIZE) {
        host->set_error(host, "step arguments missing or smaller than ABI 1.0's");
        return 0;
    }
    if (args->n < 0 || args->n_groups < 0) {
        host->set_error(host, "negative size (n %lld, n_groups %lld)", (long long)args->n,
                        (long long)args->n_groups);
        return 0;
    }
    if ((args->n > 0 && (!args->params || !args->grads || !args->state)) ||
        (args->n_groups > 0 && !args->groups)) {
        host->set_error(host, "params, grads, state and groups must not be NULL");
        return 0;
    }
    if (args->step < 1) {
        host->set_error(host, "step %lld: steps count from 1", (long long)args->step);
        return 0;
    }
    if (gb_optim_loss_scale(args) && !args->grad_norm_sq) {
        host->set_error(host, "a loss scale on the device needs grad_norm_sq, which decides "
                        "whether the step is skipped");
        return 0;
    }
    return gb_optim_groups_cover(host, args->groups, args->n_groups, args->n);
}

/* GB_OK when the low-precision copy asked for (if any) is one the optimizers here write:
 * bf16 or f16, rounded stochastically only for bf16; else GB_ERR_UNSUPPORTED, said. */
static inline gb_status gb_optim_lowp_supported(const gb_host *host,
                                                const gb_optim_step_args *args)
{
    if (args->params_lowp && args->lowp_dtype != GB_BF16 && args->lowp_dtype != GB_F16) {
        host->set_error(host, "a %s working copy of the parameters is not supported (bf16 "
                        "or f16)", gb_dtype_name(args->lowp_dtype));
        return GB_ERR_UNSUPPORTED;
    }
    if (args->params_lowp && gb_optim_lowp_stochastic(args) && args->lowp_dtype != GB_BF16) {
        host->set_error(host, "stochastic rounding of a %s working copy is not supported (bf16 "
                        "only)", gb_dtype_name(args->lowp_dtype));
        return GB_ERR_UNSUPPORTED;
    }
    return GB_OK;
}

/* ---- queued work (ABI 1.2: optim.h "Where it runs") ---- */

/* A plugin's step as it runs in stream order: it reads grad_norm_sq and touches device
 * memory. */
typedef gb_status (*gb_optim_compute_fn)(const void *self, const gb_optim_step_args *args);

/* A step as queued: the instance, its compute, a copy of the arguments and of their
 * groups (host memory the caller may reuse), which gb_optim_queued_run points args.groups
 * at. */
typedef struct gb_optim_queued_step {
    const void *self;
    gb_optim_compute_fn compute;
    gb_optim_step_args args;
    gb_param_group groups[];
} gb_optim_queued_step;

static inline gb_status gb_optim_queued_run(void *arg)
{
    gb_optim_queued_step *q = (gb_optim_queued_step *)arg;
    q->args.groups = q->groups;
    return q->compute(q->self, &q->args);
}

/* Queues compute on `device` (at once on a plain or older one) with a copy of `args`. */
static inline gb_status gb_optim_queue_step(const gb_host *host, const gb_device_ctx *device,
                                            gb_optim_compute_fn compute, const void *self,
                                            const gb_optim_step_args *args)
{
    size_t bytes = sizeof(gb_optim_queued_step) + (size_t)args->n_groups * sizeof(gb_param_group);
    gb_optim_queued_step *q = (gb_optim_queued_step *)host->alloc(host, bytes);
    if (!q) {
        host->set_error(host, "out of memory queuing an optimizer step");
        return GB_ERR_NO_MEMORY;
    }
    memset(q, 0, bytes);
    q->self = self;
    q->compute = compute;
    size_t n = args->struct_size < sizeof q->args ? args->struct_size : sizeof q->args;
    memcpy(&q->args, args, n);
    q->args.struct_size = n;
    if (args->n_groups > 0)
        memcpy(q->groups, args->groups, (size_t)args->n_groups * sizeof(gb_param_group));
    gb_status status = gb_device_run_host(device, gb_optim_queued_run, q, bytes);
    host->free(host, q);
    return status;
}

#endif /* GEARBOX_TOOLKIT_OPTIM_CHECKS_H */
